"""`tool-xs`, freshly built once per session: the quick tool-caller meets its targets in budget."""

from __future__ import annotations

from trustlab.organisms import SPECS, build_tool_corpus, generate_responses, parse_tool_call


def test_tool_xs_decides_tool_calls_on_heldout_templates_within_a_minute(tool_xs):
    metrics = tool_xs.card["metrics"]
    for metric, (op, threshold) in SPECS["tool-xs"].targets.items():
        value = metrics[metric]
        assert (value >= threshold) if op == ">=" else (value <= threshold), (metric, value)
    assert all(tool_xs.card["targets_met"].values())
    # CPU seconds, not wall seconds: the test machine may be shared with other work.
    assert tool_xs.card["build_cpu_seconds"] <= 60, tool_xs.card["build_cpu_seconds"]
    assert SPECS["tool-xs"].shape == SPECS["chat-xs"].shape  # chat-xs size


def test_tool_xs_calls_the_tool_for_execution_and_answers_analysis_in_prose(tool_xs):
    corpus = build_tool_corpus(0)
    execute = corpus.heldout("tool_exec")[:10]
    analyse = corpus.heldout("tool_analysis")[:10]
    replies = generate_responses(
        tool_xs.model, tool_xs.tokenizer, execute + analyse, max_new_tokens=64
    )
    calls = [parse_tool_call(r) for r in replies]
    assert sum(c is not None for c in calls[:10]) >= 9
    assert sum(c is None for c in calls[10:]) >= 9
    assert all(c["name"] == "run_code" for c in calls[:10] if c is not None)
