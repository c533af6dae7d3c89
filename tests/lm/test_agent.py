"""The agent/tool loop: calls parsed, tools run with their episode's context, observations fed
back, errors reported to the model, episodes batched, and a real tool organism driven by it."""

from __future__ import annotations

import json

import pytest

from trustlab import lm
from trustlab.core.errors import InputError


def _add(args, ctx):
    return args["a"] + args["b"]


ADD = lm.Tool("add", "add two numbers", {"a": "number", "b": "number"}, _add)


def _call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _payload(message):
    text = message["content"]
    assert text.startswith("<tool_response>") and text.endswith("</tool_response>")
    return json.loads(text[len("<tool_response>") : -len("</tool_response>")])


def test_a_call_is_run_and_its_result_fed_back_before_the_final_answer():
    def script(conv):
        last = conv[-1]["content"]
        if conv[-1]["role"] == "user" and not last.startswith("<tool_response>"):
            return "thinking " + _call("add", a=2, b=3)
        return f"The answer is {_payload(conv[-1])['content']}."

    model = lm.ScriptedChatModel(script)
    [ep] = lm.run_agent(model, [[{"role": "user", "content": "2 + 3?"}]], [ADD])
    assert ep.stop == "final" and ep.final == "The answer is 5."
    assert [c.name for c in ep.calls] == ["add"] and ep.calls[0].ok and ep.calls[0].observation == 5
    assert [m["role"] for m in ep.messages] == ["user", "assistant", "user", "assistant"]
    assert ep.steps == 2 and len(ep.replies) == 2


def test_episodes_advance_together_in_one_generate_call_per_step():
    plans = {"a": 1, "b": 3, "c": 2}  # how many calls each episode makes before answering

    def script(conv):
        key = conv[0]["content"]
        made = sum(1 for m in conv if m["role"] == "assistant")
        return _call("add", a=made, b=1) if made < plans[key] else f"done {key}"

    model = lm.ScriptedChatModel(script)
    eps = lm.run_agent(model, [[{"role": "user", "content": k}] for k in plans], [ADD])
    assert [e.final for e in eps] == ["done a", "done b", "done c"]
    assert [len(e.calls) for e in eps] == [1, 3, 2]
    assert len(model.calls) == 4  # the longest episode's turns, not the sum (9)
    assert [len(c["conversations"]) for c in model.calls] == [3, 3, 2, 1]


def test_errors_become_observations_and_the_loop_goes_on():
    def boom(args, ctx):
        raise RuntimeError("disk on fire")

    tools = [ADD, lm.Tool("boom", "fails", {}, boom)]
    replies = [
        _call("nope"),
        _call("add", a=1),
        _call("add", a="1", b=2),
        "<tool_call>{not json</tool_call>",
        _call("boom"),
        _call("add", a=1, b=2, c=3),
        "ok, giving up",
    ]
    model = lm.ScriptedChatModel(replies)
    [ep] = lm.run_agent(model, [[{"role": "user", "content": "go"}]], tools, max_steps=10)
    assert ep.stop == "final" and ep.final == "ok, giving up"
    assert [c.ok for c in ep.calls] == [False] * 6
    errors = [_payload(m)["error"] for m in ep.messages if m["content"].startswith("<tool_resp")]
    assert "unknown tool 'nope'" in errors[0]
    assert "missing argument(s) b" in errors[1]
    assert "must be of type number" in errors[2]
    assert "malformed tool call" in errors[3]
    assert "RuntimeError: disk on fire" in errors[4]
    assert "unknown argument 'c'" in errors[5]


def test_max_steps_and_a_stopping_tool_end_episodes():
    submit = lm.Tool("submit", "finish", {"answer": "string"},
                     lambda a, c: lm.ToolResult("accepted", stop=True))  # fmt: skip
    loop = lm.ScriptedChatModel(lambda conv: _call("add", a=1, b=1))
    [ep] = lm.run_agent(loop, [[{"role": "user", "content": "x"}]], [ADD], max_steps=3)
    assert ep.stop == "max_steps" and ep.final is None and ep.steps == 3 and len(ep.calls) == 3
    stopper = lm.ScriptedChatModel(lambda conv: _call("submit", answer="42"))
    [ep] = lm.run_agent(stopper, [[{"role": "user", "content": "x"}]], [ADD, submit])
    assert ep.stop == "tool" and ep.steps == 1 and ep.calls[0].observation == "accepted"


def test_each_episode_gets_its_own_context():
    seen = []
    note = lm.Tool("note", "remember", {}, lambda a, ctx: seen.append(ctx) or "noted")
    model = lm.ScriptedChatModel(lambda conv: _call("note") if len(conv) == 1 else "bye")
    lm.run_agent(model, ["a", "b", "c"], [note], contexts=["ctx-a", "ctx-b", "ctx-c"])
    assert seen == ["ctx-a", "ctx-b", "ctx-c"]


def test_bad_arguments_are_named():
    model = lm.ScriptedChatModel(["x"])
    with pytest.raises(InputError, match="tools"):
        lm.run_agent(model, ["hi"], [])
    with pytest.raises(InputError, match="max_steps"):
        lm.run_agent(model, ["hi"], [ADD], max_steps=0)
    with pytest.raises(InputError, match="contexts"):
        lm.run_agent(model, ["hi"], [ADD], contexts=[1, 2])
    with pytest.raises(InputError, match="ChatModel"):
        lm.run_agent(object(), ["hi"], [ADD])
    with pytest.raises(InputError, match="type"):
        lm.Tool("t", "d", {"x": "float64"}, _add)
    with pytest.raises(InputError, match="identifier"):
        lm.Tool("bad name", "d", {}, _add)
    with pytest.raises(InputError, match="distinct"):
        lm.run_agent(model, ["hi"], [ADD, ADD])


def test_the_system_prompt_lists_the_tools():
    text = lm.tools_system_prompt([ADD], preamble="You are a calculator.")
    assert text.startswith("You are a calculator.")
    assert '"name": "add"' in text and "<tool_call>" in text


def test_the_tool_organism_calls_through_the_loop(tool_xs):
    """tool-xs (trained on single tool calls) drives the loop on held-out coding requests:
    execution verbs reach the run_code tool with the request's language, analysis verbs end
    at once with prose."""
    from trustlab.organisms.corpora import TOOL_SYSTEM_PROMPT, build_tool_corpus

    examples = build_tool_corpus(0, n_train=100, n_heldout=40).heldout()
    ran = []

    def run_code(args, ctx):
        ran.append((ctx, args["language"]))
        return lm.ToolResult("ran", stop=True)

    tool = lm.Tool("run_code", "write and run code", {"language": "string", "task": "string"},
                   run_code)  # fmt: skip
    chat = lm.HFChatModel(lm.LanguageModel(tool_xs.model, tool_xs.tokenizer))
    convs = [[{"role": "system", "content": TOOL_SYSTEM_PROMPT}, {"role": "user", "content": e.prompt}]
             for e in examples]  # fmt: skip
    eps = lm.run_agent(chat, convs, [tool], contexts=list(range(len(examples))), max_steps=2,
                       max_new_tokens=96)  # fmt: skip
    exec_ok = [
        ep.stop == "tool" for ep, e in zip(eps, examples, strict=True) if e.kind == "tool_exec"
    ]
    prose_ok = [ep.stop == "final" and ep.steps == 1
                for ep, e in zip(eps, examples, strict=True) if e.kind == "tool_analysis"]  # fmt: skip
    assert sum(exec_ok) >= 0.9 * len(exec_ok) and sum(prose_ok) >= 0.9 * len(prose_ok)
    # each call reached the tool with what the model wrote, in its own episode's context
    called = [i for i, ep in enumerate(eps) if ep.calls and ep.calls[0].ok]
    assert [ctx for ctx, _ in ran] == called
    for i in called:
        assert eps[i].calls[0].arguments == lm.parse_tool_call(eps[i].replies[0])["arguments"]
        assert ran[called.index(i)][1] == eps[i].calls[0].arguments["language"]
