"""Property tests for the agent loop's text helpers (issue 38): ``format_tool_call`` is read back
by ``parse_tool_call`` whatever the JSON arguments, ``format_observation`` writes exactly what
``run_agent`` feeds back, and both reject malformed input in one line. No model runs here."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from lm_property_kit import one_line

from trustlab.lm import (
    ScriptedChatModel,
    Tool,
    format_observation,
    format_tool_call,
    parse_tool_call,
    run_agent,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
names = st.text(st.characters(codec="utf-8", exclude_characters="<>"), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(names, st.dictionaries(st.text(max_size=8), json_values, max_size=4))
def test_format_tool_call_round_trips_through_parse_tool_call(name, arguments):
    parsed = parse_tool_call("some text " + format_tool_call(name, arguments) + " more")
    assert parsed == {"name": name, "arguments": arguments}


@settings(max_examples=15, deadline=None, derandomize=True)
@given(st.text(st.characters(codec="ascii", categories=["L", "N"]), max_size=20), st.booleans())
def test_format_observation_is_what_run_agent_feeds_back(content, ok):
    def tool(args, ctx):
        if not ok:
            raise ValueError(content)
        return content

    echo = Tool("echo", "echo", {}, tool)
    script = ScriptedChatModel(lambda conv: format_tool_call("echo", {}) if len(conv) == 1 else "done")
    (episode,) = run_agent(script, [[{"role": "user", "content": "go"}]], [echo], max_steps=3)
    observed = episode.messages[2]["content"]
    payload = json.loads(observed.removeprefix("<tool_response>").removesuffix("</tool_response>"))
    assert observed == format_observation("echo", payload.get("content", payload.get("error")), ok)
    assert ("content" in payload) == ok


def test_malformed_input_is_one_line():
    one_line(lambda: format_tool_call("", {}), "name")
    one_line(lambda: format_tool_call(5, {}), "name")
    one_line(lambda: format_tool_call("f", ["a"]), "arguments")
    one_line(lambda: format_tool_call("f", {"x": object()}), "arguments")
    one_line(lambda: format_observation(3, "x"), "name")
    one_line(lambda: format_observation("f", "x", fmt="no slot"), "fmt")
