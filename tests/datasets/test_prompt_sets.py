"""Prompt sets as data: validation, the organism / behaviour / task / refusal sources, specs, and
the refusal-steering splits."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.core.errors import DataError, InputError
from trustlab.datasets.prompt_sets import (
    PromptSet,
    load_prompt_set,
    organism_prompt_set,
    organism_steering_splits,
    read_tasks,
    task_prompt_set,
)
from trustlab.datasets.refusal import REFUSAL_SPLITS, load_refusal


def test_prompt_set_validates_and_subsets_reproducibly():
    ps = PromptSet.from_texts("x", [f"q{i}" for i in range(10)], [str(i) for i in range(10)])
    assert len(ps) == 10 and ps.has_references and ps.instruction(3) == "q3"
    a, b = ps.subset(4, seed=1), ps.subset(4, seed=1)
    assert a == b and len(a) == 4 and all(a.reference(i) == a.instruction(i)[1:] for i in range(4))
    assert ps.subset(None) is ps and ps.subset(50) is ps
    conv = PromptSet("c", ([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],))
    assert conv.instruction(0) == "u"
    for bad in [(), ("",), ([{"role": "system", "content": "s"}],), (3,), ([{"content": "u"}],)]:
        with pytest.raises(InputError):
            PromptSet("bad", bad)
    with pytest.raises(InputError, match="references"):
        PromptSet("bad", ("a", "b"), ("1",))
    with pytest.raises(InputError):
        PromptSet.from_texts("bad", "one string")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=8), st.none(), st.integers()), max_size=5))
def test_prompt_set_of_anything_is_valid_or_an_input_error(items):
    try:
        ps = PromptSet("p", tuple(items))
    except InputError:
        assert not items or any(not isinstance(t, str) or not t.strip() for t in items)
        return
    assert len(ps) == len(items) and all(isinstance(p, str) and p.strip() for p in ps.prompts)


def test_organism_sets_are_the_held_out_examples_with_their_answers():
    harm = organism_prompt_set("harmful")
    assert len(harm) == 200 and harm.references is None
    assert all(m["harmful"] for m in harm.meta)
    tasks = load_prompt_set("organism:task", n=20)
    assert len(tasks) == 20 and all(r and r.startswith("Sure") for r in tasks.references)
    with pytest.raises(InputError, match="kinds"):
        organism_prompt_set("weapons")


def test_behaviour_and_task_sources(tmp_path):
    hb = load_prompt_set("harmbench_val")
    assert len(hb) == 80 and all(m["harmful"] for m in hb.meta)
    safe = load_prompt_set("xstest_safe")
    assert len(safe) == 250 and not any(m["harmful"] for m in safe.meta)
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps({"prompt": f"p{i}", "answer": f" a{i} "})
                              for i in range(5)), "utf-8")  # fmt: skip
    ts = load_prompt_set(f"tasks:{path}")
    assert ts.references == tuple(f"a{i}" for i in range(5))
    assert task_prompt_set(path, n=2, seed=0).has_references
    (tmp_path / "bad.jsonl").write_text('{"prompt": "x"}\n', "utf-8")
    with pytest.raises(DataError, match="answer"):
        read_tasks(tmp_path / "bad.jsonl")
    with pytest.raises(DataError, match="does not exist"):
        read_tasks(tmp_path / "none.csv")
    with pytest.raises(InputError, match="Unknown prompt set"):
        load_prompt_set("nonsense")


def test_steering_splits_become_loop_prompt_sets():
    from trustlab.organisms import build_chat_corpus

    splits = organism_steering_splits(build_chat_corpus(0, n_train=400, n_heldout=40), 8, 6)
    sets = splits.as_prompt_sets()
    assert set(sets) == {"jailbreak", "tasks"}
    assert sets["tasks"].references == tuple(splits.eval_task_answers)
    val = splits.as_prompt_sets(split="sel")
    assert {p[-1]["content"] for p in val["jailbreak"].prompts}.isdisjoint(
        {p[-1]["content"] for p in sets["jailbreak"].prompts}
    )
    with pytest.raises(InputError):
        splits.as_prompt_sets(split="test")


@pytest.mark.realdata
def test_refusal_splits_from_shared_data(shared_data_dir):
    root = shared_data_dir("refusal")
    counts = {"harmful_val": 39, "harmful_test": 572, "advbench": 520, "jailbreakbench": 100}
    for split, n in counts.items():
        items = load_refusal(split, root=root)
        assert len(items) == n and all(it.harmful and it.instruction for it in items)
    harmless = load_refusal("harmless_val", root=root)
    assert len(harmless) == 6264 and not any(it.harmful for it in harmless)
    ps = load_prompt_set("refusal:harmful_val")  # through TRUSTLAB_SHARED_DATA / ../shared
    assert len(ps) == 39 and ps.meta[0]["category"]


def test_refusal_loader_errors_are_one_line(tmp_path):
    with pytest.raises(InputError, match="Unknown refusal split"):
        load_refusal("harmful_train")
    with pytest.raises(DataError, match="not bundled"):
        load_refusal("harmless_test", root=tmp_path)
    (tmp_path / "harmful_val.json").write_text('[{"category": "x"}]', "utf-8")
    with pytest.raises(DataError, match="instruction"):
        load_refusal("harmful_val", root=tmp_path)
    (tmp_path / "advbench.json").write_text("{not json", "utf-8")
    with pytest.raises(DataError, match="Cannot read"):
        load_refusal("advbench", root=tmp_path)
    assert set(REFUSAL_SPLITS) >= {"harmless_val", "harmful_test"}
