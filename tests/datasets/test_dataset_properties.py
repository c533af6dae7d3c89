"""Issue 38's property tests for the small dataset readers: files written from drawn records
read back as the same records (ConfAIde vignettes, PrivacyLens seeds, refusal instructions,
labelled texts); malformed arguments give a one-line InputError, damaged files a DataError."""

from __future__ import annotations

import csv
import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.core.errors import DataError, InputError
from trustlab.datasets.confaide import ConfaideVignette, load_confaide_tier2
from trustlab.datasets.labelled_text import LabelledTexts, read_labelled_texts
from trustlab.datasets.privacylens import PrivacyLensSeed, load_privacylens_seeds
from trustlab.datasets.refusal import REFUSAL_SPLITS, RefusalInstruction, load_refusal

SOME = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
words = st.text(alphabet=string.ascii_lowercase + " ", min_size=1, max_size=12).map(
    lambda s: s.strip() or "x")


@SOME
@given(st.lists(st.tuples(words, words, words, st.integers(-100, 100)), min_size=1, max_size=6))
def test_confaide_vignettes_read_back_what_was_written(tmp_path, rows):
    lines = [f"Information about {i} is collected by {w} in order to {p}." for i, w, p, _ in rows]
    (tmp_path / "tier_2a.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "tier_2_labels.txt").write_text("\n".join(str(r) for *_, r in rows))
    got = load_confaide_tier2(tmp_path)
    assert all(isinstance(v, ConfaideVignette) for v in got) and len(got) == len(rows)
    for v, (info, who, why, rating) in zip(got, rows, strict=True):
        assert (v.information, v.collector, v.purpose) == (info, who, why)
        assert v.rating == rating and v.acceptable == (rating > 0)
    (tmp_path / "tier_2_labels.txt").write_text("1 " * (len(rows) + 1))
    with pytest.raises(DataError, match="ratings"):
        load_confaide_tier2(tmp_path)


def _record(name, value):
    seed = {k: f"{k}-{value}" for k in ("data_type", "data_subject", "data_sender",
                                        "data_sender_name", "data_recipient",
                                        "transmission_principle", "source")}
    return {"name": name, "seed": seed, "trajectory": {
        "user_instruction": f"do {value}", "final_action": "SendEmail",
        "toolkits": ["Gmail"]}}


@SOME
@given(st.lists(words, min_size=1, max_size=5, unique=True))
def test_privacylens_seeds_read_back_what_was_written(tmp_path, names):
    file = tmp_path / "seeds.json"
    file.write_text(json.dumps([_record(n, i) for i, n in enumerate(names)]))
    got = load_privacylens_seeds(file)
    assert [s.name for s in got] == names and all(isinstance(s, PrivacyLensSeed) for s in got)
    assert [s.data_type for s in got] == [f"data_type-{i}" for i in range(len(names))]
    file.write_text(json.dumps({"not": "a list"}))
    with pytest.raises(DataError):
        load_privacylens_seeds(file)


@SOME
@given(st.sampled_from(sorted(REFUSAL_SPLITS)),
       st.lists(st.tuples(words, st.one_of(st.none(), st.just(""), words)), min_size=1,
                max_size=5))
def test_refusal_instructions_read_back_with_the_splits_harm_flag(tmp_path, split, rows):
    file, harmful = REFUSAL_SPLITS[split]
    (tmp_path / file).write_text(json.dumps([{"instruction": i, "category": c} for i, c in rows]))
    got = load_refusal(split, root=tmp_path)
    assert all(isinstance(r, RefusalInstruction) for r in got)
    assert [r.instruction for r in got] == [i for i, _ in rows]
    assert [r.category for r in got] == [c or None for _, c in rows]
    assert all(r.harmful == harmful for r in got)
    assert [r.id for r in got] == [f"{split}:{k}" for k in range(len(rows))]


@SOME
@given(st.lists(st.tuples(words, st.sampled_from(["harmful", "benign", "1", "0", "SAFE"])),
                min_size=2, max_size=8), st.sampled_from(["csv", "jsonl"]))
def test_labelled_texts_read_back_with_named_labels(tmp_path, rows, fmt):
    path = tmp_path / f"data.{fmt}"
    if fmt == "csv":
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["text", "label"])
            w.writerows(rows)
    else:
        path.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows))
    want = [1 if y in ("harmful", "1") else 0 for _, y in rows]
    if len(set(want)) < 2:
        with pytest.raises(DataError, match="one class"):
            read_labelled_texts(path)
        return
    got = read_labelled_texts(path)
    assert isinstance(got, LabelledTexts) and list(got.texts) == [t for t, _ in rows]
    assert list(got.labels) == want and got.n_positive == sum(want) and len(got) == len(rows)


@pytest.mark.parametrize(("call", "match"), [
    (lambda p: load_confaide_tier2(3), "root"),
    (lambda p: load_confaide_tier2(p / "missing"), "Cannot read"),
    (lambda p: load_privacylens_seeds(["x"]), "path"),
    (lambda p: load_privacylens_seeds(p / "missing.json"), "Cannot read"),
    (lambda p: load_refusal("harmful_tset", root=p), "split"),
    (lambda p: load_refusal("harmful_test", root=3), "root"),
    (lambda p: load_refusal("harmful_test", root=p), "does not exist"),
    (lambda p: read_labelled_texts(None), "path"),
    (lambda p: read_labelled_texts(p / "x.csv", positive="harmful"), "positive"),
    (lambda p: read_labelled_texts(p / "x.csv", positive=("yes",), negative=("yes",)), "overlap"),
    (lambda p: LabelledTexts(("a", "b"), (0, 2)), "0 .negative. or 1"),
    (lambda p: LabelledTexts(("a", "b"), (0,)), "one label per text"),
])
def test_bad_arguments_and_missing_files_are_one_line_errors(tmp_path, call, match):
    with pytest.raises((InputError, DataError), match=match) as caught:
        call(tmp_path)
    assert "\n" not in str(caught.value)
