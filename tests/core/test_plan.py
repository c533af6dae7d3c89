"""core.plan: the plan of `trustlab run all` (estimates, builds, order) and its CLI output."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trustlab.core.plan import (
    ORGANISM_BUILD_S,
    format_duration,
    format_plan,
    organisms_named,
    plan_run,
)


def test_organisms_named_anywhere_in_a_config():
    cfg = {"models": ["organism:chat-xs", "hf:/x", "organism:chat-s"], "inner": {"m": "organism:chat-xs"},
           "n": 3, "note": "organism"}
    assert organisms_named(cfg) == ["chat-xs", "chat-s"]
    # bare names count only under an organism(s) key; paths and specs there do not
    assert organisms_named({"organisms": ["chat-s", "vit-xs", "hf:/m", "/tmp/x"],
                            "organism": "vlm-s", "name": "chat-m"}) == ["chat-s", "vit-xs",
                                                                         "vlm-s"]


def test_plan_orders_shortest_first_builds_each_organism_once(tmp_path):
    run = tmp_path / "runs" / "hcc" / "20260101T000000Z"
    run.mkdir(parents=True)
    (run / "report.json").write_text(json.dumps({"provenance": {"quick": False,
                                                                "wall_time_s": 12.0}}))
    configs = {"rheology": {"models": ["organism:chat-xs", "organism:chat-m"]},
               "sae-idempotency": {"model": "organism:chat-m"},
               "hcc": {"alpha": 0.1}}
    plan = plan_run(configs, runs_root=tmp_path / "runs", built=["chat-xs"])
    by_id = {it.method_id: it for it in plan}
    assert plan[0].method_id == "hcc" and by_id["hcc"].basis == "your last run"
    assert by_id["hcc"].run_s == 12.0
    built = [name for it in plan for name in it.builds]
    assert built == ["chat-m"]  # chat-xs is cached; chat-m is built once
    assert sum(it.build_s for it in plan) == ORGANISM_BUILD_S["chat-m"]
    assert [it.total_s for it in plan] == sorted(it.total_s for it in plan)
    text = format_plan(plan)
    assert text.startswith("plan: 3 method(s), about ") and "build chat-m" in text
    quick = plan_run(configs, quick=True, runs_root=tmp_path / "runs", built=["chat-xs", "chat-m"])
    assert all(it.basis == "quick preset" for it in quick)  # the last run was not --quick


@pytest.mark.parametrize(("seconds", "text"), [(0, "0 s"), (59.4, "59 s"), (95, "1 min 35 s"),
                                               (3725, "1 h 02 min")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


@given(st.floats(min_value=-1e6, max_value=1e7, allow_nan=False))
def test_format_duration_property(seconds):
    text = format_duration(seconds)
    assert text.endswith((" s", " min")) and "-" not in text
