"""The AgentHarm-style pool: its size, its two norms, and refused paraphrase indices."""

from __future__ import annotations

import pytest

from trustlab.core.errors import InputError
from trustlab.datasets.agentharm import (
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
