"""The AgentHarm-style pool: its size, its two norms, and refused paraphrase indices."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.datasets.agentharm import (
    ACCEPTABLE,
    N_PARAPHRASES,
    POOL_PARAPHRASES,
    SEED_PARAPHRASES,
    VIOLATION,
    ToolCall,
    tool_calls,
)


def test_the_pool_and_the_seed_paraphrase_are_disjoint_and_complete():
    pool, seed = tool_calls(POOL_PARAPHRASES), tool_calls(SEED_PARAPHRASES)
    assert len(pool) == 5880 and len(seed) == 5880 // 4
    assert len({(t.tool, t.instruction, t.arguments) for t in pool}) == 5880  # all distinct
    assert {t.instruction for t in pool}.isdisjoint({t.instruction for t in seed})
    assert {t.scenario for t in pool} == set(range(12)) and len({t.tool for t in pool}) == 10
    assert all(isinstance(t, ToolCall) and t.call.startswith(f"{t.tool}(") for t in pool)


def test_local_norms_flip_some_generic_labels_and_only_where_a_rule_says():
    pool = tool_calls()
    flipped = [t for t in pool if t.local_label != t.generic_label]
    assert 0 < len(flipped) < len(pool) / 2
    # the change freeze on prod: restarting a prod host is blocked locally, allowed generically
    prod = [t for t in pool if t.tool == "run_shell" and t.args["host"].startswith("prod")
            and "restart" in t.args["command"]]
    assert prod and all(t.local_label == VIOLATION != t.generic_label for t in prod)


@pytest.mark.parametrize("bad", [[5], [-1], [1, 1], "1", [True], 3])
def test_paraphrase_indices_are_checked(bad):
    with pytest.raises(InputError, match="paraphrases"):
        tool_calls(bad)


@functools.cache
def _all_calls() -> tuple[ToolCall, ...]:
    return tuple(tool_calls(range(N_PARAPHRASES)))


_INDEX_LIKE = st.one_of(st.integers(-3, 8), st.booleans(), st.floats(-1, 6), st.none(),
                        st.text(max_size=2), st.integers(0, 4).map(np.int64))


@given(chosen=st.lists(_INDEX_LIKE, max_size=7))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_tool_calls_any_index_list_gives_its_calls_or_input_error(chosen):
    """Property (issue 38): any list of would-be paraphrase indices either selects exactly the
    calls of those paraphrases, scenario by scenario in the given paraphrase order (numpy
    integers are the same indices), or is an InputError -- never a silently dropped, rounded
    or duplicated index. Every ToolCall is labelled under both norms."""
    valid = (all(not isinstance(p, bool) and isinstance(p, int | np.integer)
                 and 0 <= p < N_PARAPHRASES for p in chosen)
             and len({int(p) for p in chosen}) == len(chosen))
    if not valid:
        with pytest.raises(InputError, match="paraphrases"):
            tool_calls(chosen)
        return
    got = tool_calls(chosen)
    full = _all_calls()
    want = [t for si in range(12) for p in chosen for t in full
            if t.scenario == si and t.paraphrase == int(p)]
    assert got == want
    assert all(isinstance(t, ToolCall) and {t.generic_label, t.local_label} <= {ACCEPTABLE,
               VIOLATION} for t in got)
