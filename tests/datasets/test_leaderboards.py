"""Leaderboard loader: built-ins, files, frames, orientation and errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trustlab.core.errors import DataError, InputError
from trustlab.datasets.leaderboards import (
    BUILTIN_LEADERBOARDS,
    HELM_CLASSIC_CONTAMINATED,
    Leaderboard,
    load_leaderboard,
)

SHAPES = {
    "bbh24": (107, 24),
    "bbh27": (107, 27),
    "mmlu57": (82, 57),
    "helm_classic_accuracy": (67, 16),
    "openllm_v1": (87, 6),
    "openllm_v2": (340, 6),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_builtins_load_with_expected_shape(name):
    lb = load_leaderboard(name)
    assert lb.shape == SHAPES[name]
    assert len(set(lb.models)) == lb.n_models
    assert not lb.scores.flags.writeable


def test_bbh24_drops_the_three_v2_tasks_and_keeps_values():
    b24, b27 = load_leaderboard("bbh24"), load_leaderboard("bbh27")
    assert set(b27.datasets) - set(b24.datasets) == {
        "Dyck Languages", "Multistep Arithmetic Two", "Word Sorting"}
    assert b24.scores[0, b24.datasets.index("Boolean Expressions")] == 96.4  # GPT-4, from the TSV
    assert b24.models[0] == "GPT-4"


def test_helm_missing_and_contamination_mask():
    lb = load_leaderboard("helm_classic_accuracy")
    raw = load_leaderboard("helm_classic_accuracy_raw")
    assert lb.has_missing
    assert np.isnan(lb.scores).sum() - np.isnan(raw.scores).sum() == 4
    i = lb.model_index("T0pp (11B)")
    for d in HELM_CLASSIC_CONTAMINATED["T0pp (11B)"]:
        assert np.isnan(lb.scores[i, lb.datasets.index(d)])
    assert "Mean win rate" in lb.info.columns


def test_from_frame_orientation_and_info(tmp_path):
    df = pd.DataFrame({"name": ["a", "b"], "acc": [0.5, 0.7], "err": [0.1, 0.3], "org": ["x", "y"]})
    lb = Leaderboard.from_frame(df, higher_is_better={"err": False})
    assert lb.datasets == ("acc", "err")
    np.testing.assert_allclose(lb.scores[:, 1], [-0.1, -0.3])
    assert list(lb.info["org"]) == ["x", "y"]
    path = tmp_path / "s.tsv"
    df.to_csv(path, sep="\t", index=False)
    lb2 = load_leaderboard(path)
    np.testing.assert_allclose(lb2.scores, [[0.5, 0.1], [0.7, 0.3]])
    csv = tmp_path / "s.csv"
    csv.write_text("model,a,b\nm1,1,-\nm2,2,3\n")
    lb3 = load_leaderboard(csv)
    assert np.isnan(lb3.scores[0, 1])


def test_errors_are_one_line_and_typed(tmp_path):
    with pytest.raises(DataError, match="Unknown leaderboard"):
        load_leaderboard("nope")
    with pytest.raises(DataError, match="does not exist"):
        load_leaderboard(tmp_path / "missing.csv")
    bad = tmp_path / "dup.csv"
    bad.write_text("model,a\nm,1\nm,2\n")
    with pytest.raises(DataError, match="more than once"):
        load_leaderboard(bad)
    assert load_leaderboard(bad, duplicates="last").scores[0, 0] == 2
    with pytest.raises(InputError):
        Leaderboard(np.zeros((2, 2)), ("a", "b"), ("x",))
    with pytest.raises(InputError, match="not in leaderboard"):
        load_leaderboard("bbh24").model_index("no-such-model")
    pq = tmp_path / "t.parquet"
    pq.write_bytes(b"x")
    with pytest.raises((DataError, ImportError)):
        load_leaderboard(pq)


def test_select_and_builtins_registry():
    lb = load_leaderboard("bbh24")
    sub = lb.select(models=[0, 2], datasets=list(lb.datasets[:3]))
    assert sub.shape == (2, 3)
    assert sub.scores[1, 0] == lb.scores[2, 0]
    assert set(SHAPES) <= set(BUILTIN_LEADERBOARDS)


# -- reading user tables: say what was read, never drop a score column silently (22, 38) ----


def _write(tmp_path, name: str, text: str | bytes):
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_a_typo_in_a_score_column_is_an_error_naming_the_cell(tmp_path):
    path = _write(tmp_path, "s.csv", "model,arc,mmlu\na,0.5,0.6\nb,oops,0.7\nc,0.4,0.2\n")
    with pytest.raises(DataError, match=r"Column 'arc' .* row 2 \(model 'b'\): 'oops'"):
        load_leaderboard(path)
    # the same column given explicitly: the same cell is named
    with pytest.raises(DataError, match="'oops'"):
        load_leaderboard(path, dataset_columns=["arc", "mmlu"])
    # a text column with one number in it stays a text (metadata) column
    lb = load_leaderboard(
        _write(tmp_path, "t.csv", "model,org,arc\na,meta,0.5\nb,7,0.7\nc,goog,0.4\n")
    )
    assert lb.datasets == ("arc",) and "org (text)" in lb.describe()


def test_metadata_columns_are_not_benchmarks_and_are_listed(tmp_path):
    path = _write(
        tmp_path,
        "s.csv",
        "id,org,model,params_B,Average,release_year,arc,mmlu\n"
        "1,meta,a,7,0.55,2023,0.5,0.6\n2,goog,b,13,0.5,2024,0.3,0.7\n3,meta,c,70,0.3,2024,0.4,0.2\n",
    )
    lb = load_leaderboard(path)
    assert lb.datasets == ("arc", "mmlu")
    assert lb.models == ("a", "b", "c")  # not the organisation column
    text = lb.describe()
    for col in ("id (an identifier", "org (text)", "params_B (a model size)", "Average (a published"):
        assert col in text
    assert "release_year (a date)" in text
    assert list(lb.info.columns) == ["id", "org", "params_B", "Average", "release_year"]


def test_a_numeric_row_number_is_an_identifier_not_a_benchmark():
    frame = pd.DataFrame({"model": list("abcd"), "n": [1, 2, 3, 4], "arc": [0.1, 0.5, 0.3, 0.2]})
    lb = Leaderboard.from_frame(frame)
    assert lb.datasets == ("arc",) and "n (consecutive whole numbers" in lb.describe()


def test_organisation_column_is_not_taken_as_model_names():
    frame = pd.DataFrame({"org": ["x", "x", "y"], "checkpoint": ["p", "q", "r"], "acc": [1, 2, 3.5]})
    assert Leaderboard.from_frame(frame).models == ("p", "q", "r")
    frame = pd.DataFrame({"org": ["x", "x", "y"], "family": ["p", "q", "r"], "acc": [1, 2, 3.5]})
    assert Leaderboard.from_frame(frame).models == ("p", "q", "r")  # the only unique text column
    both = pd.DataFrame({"org": ["x", "y", "z"], "family": ["p", "q", "r"], "acc": [1, 2, 3.5]})
    with pytest.raises(DataError, match=r"org, family are all text columns.*model_column"):
        Leaderboard.from_frame(both)


def test_a_model_without_scores_is_dropped_and_named(tmp_path):
    path = _write(tmp_path, "s.csv", "model,arc,mmlu\na,0.5,0.6\nb,,\nc,0.4,0.2\n")
    lb = load_leaderboard(path)
    assert lb.models == ("a", "c")
    assert "dropped 1 model(s) without any score" in lb.describe() and ": b" in lb.describe()


def test_excel_sep_line_bom_and_percent_cells_are_read(tmp_path):
    want = np.array([[0.5, 0.6], [0.3, 0.7], [0.4, 0.2]])
    sep = _write(tmp_path, "sep.csv", "sep=;\nmodel;arc;mmlu\na;0.5;0.6\nb;0.3;0.7\nc;0.4;0.2\n")
    np.testing.assert_allclose(load_leaderboard(sep).scores, want)
    bom = _write(tmp_path, "bom.csv", b"\xef\xbb\xbfmodel,arc,mmlu\na,0.5,0.6\nb,0.3,0.7\nc,0.4,0.2\n")
    np.testing.assert_allclose(load_leaderboard(bom, model_column="model").scores, want)
    assert load_leaderboard(bom).models == ("a", "b", "c")
    pct = _write(tmp_path, "pct.csv", "model,arc,mmlu\na,50%,60%\nb,30%,70%\nc,40%,20%\n")
    lb = load_leaderboard(pct)
    np.testing.assert_allclose(lb.scores, 100 * want)
    assert "read as percentages" in lb.describe()
    mixed = _write(tmp_path, "mix.csv", "model,arc\na,50%\nb,0.3\nc,40%\n")
    with pytest.raises(DataError, match="mixes percent cells"):
        load_leaderboard(mixed)


def test_decimal_commas_are_named_and_readable(tmp_path):
    path = _write(tmp_path, "c.csv", "model;arc;mmlu\na;0,5;0,6\nb;0,3;0,7\nc;0,4;0,2\n")
    with pytest.raises(DataError, match=r"decimal commas \(e.g. '0,5'.*--decimal ,"):
        load_leaderboard(path)
    np.testing.assert_allclose(load_leaderboard(path, decimal=",").scores[:, 0], [0.5, 0.3, 0.4])


def test_no_score_columns_says_why(tmp_path):
    path = _write(tmp_path, "s.csv", "model,org,params\na,x,7\nb,y,13\n")
    with pytest.raises(DataError, match=r"no score columns.*org \(text\).*params \(a model size\)"):
        load_leaderboard(path)
