"""Issue 38's property tests for the prompt-set builders of steering studies: public steering
splits are disjoint where they must be, sized as asked, wrap their own requests and are
reproducible from their seed; behaviour and refusal prompt sets carry their lists' labels;
malformed arguments give one-line InputErrors."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.core.errors import DataError, InputError
from trustlab.datasets.prompt_sets import (
    SteeringSplits,
    behaviour_prompt_set,
    public_steering_splits,
    refusal_prompt_set,
)
from trustlab.datasets.refusal import REFUSAL_SPLITS

SOME = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
HARMFUL = [f"harmful request {i}" for i in range(30)]
HARMLESS = [f"harmless request {i}" for i in range(20)]
TASKS = [(f"task {i}", f"answer {i}") for i in range(12)]
WRAPPERS = ["Pretend: {r}", "{r} -- answer as a pirate"]


def _texts(prompts):
    return [p[-1]["content"] if isinstance(p, list) else p for p in prompts]


@SOME
@given(st.integers(1, 8), st.integers(1, 6), st.integers(0, 6), st.integers(0, 2**16))
def test_public_steering_splits_are_disjoint_sized_and_reproducible(n_fit, n_eval, n_val, seed):
    s = public_steering_splits(HARMFUL, HARMLESS, n_fit, n_eval, n_val=n_val, seed=seed,
                               wrappers=WRAPPERS, tasks=TASKS)
    assert isinstance(s, SteeringSplits)
    ev = _texts(s.eval_harmful)
    sel = [t for j in _texts(s.sel_jailbreak) for t in HARMFUL
           if any(w.format(r=t) == j for w in WRAPPERS)]  # the requests inside the wrappers
    fit, val = _texts(s.fit_harmful), _texts(s.val_harmful)
    assert len(ev) == n_eval and len(s.sel_jailbreak) == n_val
    assert len(fit) == len(val) <= n_fit
    groups = [set(ev), set(sel), set(fit), set(val)]
    assert sum(len(g) for g in groups) == len(set().union(*groups))  # pairwise disjoint
    assert len(_texts(s.eval_benign)) == n_eval and len(_texts(s.fit_harmless)) <= n_fit
    assert not set(_texts(s.eval_benign)) & set(_texts(s.fit_harmless))
    for req, wrapped in zip(ev, _texts(s.eval_jailbreak), strict=True):
        assert any(w.format(r=req) == wrapped for w in WRAPPERS)
    assert not set(_texts(s.eval_tasks)) & set(_texts(s.sel_tasks))
    assert dict(zip(_texts(s.eval_tasks), s.eval_task_answers, strict=True)).items() <= \
        dict(TASKS).items()
    again = public_steering_splits(HARMFUL, HARMLESS, n_fit, n_eval, n_val=n_val, seed=seed,
                                   wrappers=WRAPPERS, tasks=TASKS)
    assert again == s
    sets = s.as_prompt_sets()
    assert sets and all(len(p.prompts) for p in sets.values())


@pytest.mark.parametrize("name", ["xstest", "advbench"])
def test_behaviour_prompt_sets_keep_the_lists_labels(name):
    for harmful in (True, False):
        if name == "advbench" and not harmful:
            with pytest.raises(DataError, match="no harmless"):
                behaviour_prompt_set(name, harmful=harmful)
            continue
        ps = behaviour_prompt_set(name, harmful=harmful, n=10, seed=1)
        assert len(ps.prompts) == 10 and all(m["harmful"] is harmful for m in ps.meta)
        assert ps.prompts == behaviour_prompt_set(name, harmful=harmful, n=10, seed=1).prompts


def test_refusal_prompt_sets_read_their_split(tmp_path):
    split = sorted(REFUSAL_SPLITS)[0]
    file, harmful = REFUSAL_SPLITS[split]
    (tmp_path / file).write_text(json.dumps([{"instruction": f"do {i}", "category": None}
                                             for i in range(5)]))
    ps = refusal_prompt_set(split, root=tmp_path)
    assert list(ps.prompts) == [f"do {i}" for i in range(5)]
    assert all(m["harmful"] is harmful and m["dataset"] == split for m in ps.meta)
    assert len(refusal_prompt_set(split, root=tmp_path, n=3).prompts) == 3


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"harmful": "one long harmful request"}, "harmful"),
    ({"harmless": None}, "harmless"),
    ({"harmful": [*HARMFUL, 3]}, "harmful"),
    ({"n_fit": 0}, "n_fit"), ({"n_fit": 2.5}, "n_fit"), ({"n_eval": -1}, "n_eval"),
    ({"n_val": -1}, "n_val"), ({"seed": -1}, "seed"), ({"seed": "x"}, "seed"),
    ({"n_eval": 40}, "distinct prompts"),
    ({"wrappers": ["no placeholder"]}, "wrapper"),
])
def test_bad_arguments_are_one_line_errors(kwargs, match):
    args = {"harmful": HARMFUL, "harmless": HARMLESS, "n_fit": 4, "n_eval": 3,
            "wrappers": WRAPPERS, "tasks": TASKS, **kwargs}
    with pytest.raises((InputError, DataError), match=match) as caught:
        public_steering_splits(**args)
    assert "\n" not in str(caught.value)
