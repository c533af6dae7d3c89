"""Issue 38's property tests for lm's chat backends, evaluation loop, judges on replies, reply
cache and agent loop: backends round-trip messages (scripted, local, and the OpenAI client
through its cache), ``evaluate``'s rates and paired differences equal a brute-force count over
the judged replies, a cached rerun generates nothing, judges map outputs to verdicts as
documented, the agent loop stops at ``max_steps``, on a final answer or when a tool ends it;
malformed input gives a one-line InputError naming the parameter. Local generation runs on the
session ``llama`` of tests/lm/conftest.py with 1-3 new tokens."""

from __future__ import annotations

import csv
import json
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from lm_property_kit import FEW, one_line, one_thread, prompt_lists, words  # noqa: F401

from trustlab import lm
from trustlab.datasets.prompt_sets import PromptSet
from trustlab.lm import (
    AddVector,
    AgentCall,
    CallableJudge,
    ChatBackendError,
    ChatModel,
    Decoding,
    Episode,
    Evaluation,
    HFChatModel,
    Judge,
    JudgeItem,
    OpenAIChatModel,
    ReplyCache,
    RubricJudge,
    RubricScore,
    RubricSummary,
    ScriptedChatModel,
    Tool,
    ToolResult,
    Transform,
    Verdict,
    binomial_rate,
    chat_model,
    evaluate,
    judge_replies,
    model_fingerprint,
    run_agent,
    tools_system_prompt,
)
from trustlab.lm.formatting import as_conversation


def _conv(text, system=None):
    return ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": text}
    ]


# ----------------------------------------------------------------------- backends


@FEW
@given(prompts=st.lists(words, min_size=1, max_size=4, unique=True), system=st.sampled_from([None, "be brief"]))
def test_scripted_backend_round_trips_messages(prompts, system):
    convs = [_conv(p, system) for p in prompts]
    script = {p: f"reply to {p}" for p in prompts}
    chat = ScriptedChatModel(script)
    assert isinstance(chat, ChatModel)
    assert chat.generate(convs, max_new_tokens=3, seed=4) == [script[p] for p in prompts]
    assert chat.calls[-1]["conversations"] == [as_conversation(c) for c in convs]
    assert (chat.calls[-1]["max_new_tokens"], chat.calls[-1]["seed"]) == (3, 4)
    listed = ScriptedChatModel(["a", "b"])
    assert listed.generate(["x"]) + listed.generate(["y"]) == ["a", "b"]
    one_line(lambda: listed.generate(["z"]), "ran out")
    assert ScriptedChatModel(lambda c: c[-1]["content"][::-1]).generate(prompts) == [p[::-1] for p in prompts]


@FEW
@given(prompts=prompt_lists, n_tokens=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_local_backend_is_the_decoder_with_its_interventions(llama, prompts, n_tokens, seed):
    chat = HFChatModel(llama, batch_size=2)
    assert isinstance(chat, ChatModel)
    convs = [_conv(p) for p in prompts]
    plain = chat.generate(convs, max_new_tokens=n_tokens)
    assert plain == lm.generate_rows(llama, convs, max_new_tokens=n_tokens)
    zero = chat.with_interventions(AddVector(torch.zeros(llama.d_model), "blocks.1.resid_pre"))
    assert zero.generate(convs, max_new_tokens=n_tokens) == plain
    v = 4 * torch.randn(llama.d_model, generator=torch.Generator().manual_seed(seed))
    steered = chat.with_interventions(AddVector(v, "blocks.1.resid_pre"))
    got = steered.generate(convs, max_new_tokens=n_tokens)
    with lm.add_vector(llama, v, "blocks.1.resid_pre"):
        assert got == chat.generate(convs, max_new_tokens=n_tokens)
    assert model_fingerprint(zero) != model_fingerprint(chat) == model_fingerprint(HFChatModel(llama))


@FEW
@given(prompts=prompt_lists, replies=st.lists(st.text(max_size=12), min_size=3, max_size=3))
def test_openai_client_round_trips_through_its_cache(tmp_path_factory, prompts, replies):
    cache = tmp_path_factory.mktemp("openai")
    client = OpenAIChatModel("http://127.0.0.1:9/v1/", "tiny", cache_dir=cache, max_retries=0,
                             timeout=0.5)  # fmt: skip
    assert client.url == "http://127.0.0.1:9/v1/chat/completions"
    assert isinstance(client, ChatModel) and model_fingerprint(client) == "openai:" + client.url + "#tiny"
    convs = [as_conversation(p) for p in prompts]
    for conv, reply in zip(convs, replies, strict=False):
        body = client.request_body(conv, 3, 0.0, 0)
        assert body["messages"] == conv and body["max_tokens"] == 3 and body["model"] == "tiny"
        path = client.cache_path(body)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"reply": reply}), encoding="utf-8")
    assert client.generate(prompts, max_new_tokens=3) == replies[: len(prompts)]
    assert client.n_requests == 0  # every reply came from the cache
    spec = chat_model("openai:http://127.0.0.1:9/v1#tiny", cache_dir=cache)
    assert isinstance(spec, OpenAIChatModel) and spec.url == client.url


def test_unreachable_server_is_a_chat_backend_error():
    client = OpenAIChatModel("http://127.0.0.1:9/v1", "tiny", max_retries=0, timeout=0.5)
    with pytest.raises(ChatBackendError, match="failed after 1 attempts"):
        client.generate(["hi"])
    assert client.n_requests == 1


@pytest.mark.parametrize(("call", "names"), [
    (lambda m: ScriptedChatModel(["x"]).generate(["hi"], max_new_tokens="abc"), ("max_new_tokens",)),
    (lambda m: ScriptedChatModel(["x"]).generate(["hi"], max_new_tokens=2.5), ("max_new_tokens",)),
    (lambda m: ScriptedChatModel(["x"]).generate(["hi"], max_new_tokens=None), ("max_new_tokens",)),
    (lambda m: ScriptedChatModel(["x"]).generate(["hi"], temperature="x"), ("temperature",)),
    (lambda m: ScriptedChatModel(["x"]).generate(["hi"], temperature=math.inf), ("temperature",)),
    (lambda m: ScriptedChatModel(["x"]).generate(["hi"], temperature=-1), ("temperature",)),
    (lambda m: ScriptedChatModel(["x"]).generate(None), ("conversations",)),
    (lambda m: ScriptedChatModel(["x"]).generate(5), ("conversations",)),
    (lambda m: ScriptedChatModel(["x"]).generate(_conv("hi")), ("not one",)),
    (lambda m: ScriptedChatModel({"a": "b"}).generate(["zzz"]), ("no reply",)),
    (lambda m: HFChatModel(m).generate(["hi"], max_new_tokens=1, seed="x"), ("'seed'",)),
    (lambda m: HFChatModel(m, batch_size=0), ("batch_size",)),
    (lambda m: HFChatModel(None), ("LanguageModel",)),
    (lambda m: OpenAIChatModel(5, "tiny"), ("'base_url'",)),
    (lambda m: OpenAIChatModel("localhost:8000", "tiny"), ("'base_url'",)),
    (lambda m: OpenAIChatModel("http://127.0.0.1:9", ""), ("'model'",)),
    (lambda m: OpenAIChatModel("http://127.0.0.1:9", "tiny", timeout=math.nan), ("'timeout'",)),
    (lambda m: OpenAIChatModel("http://127.0.0.1:9", "tiny", timeout=0), ("'timeout'",)),
    (lambda m: OpenAIChatModel("http://127.0.0.1:9", "tiny", max_retries=-1), ("'max_retries'",)),
    (lambda m: OpenAIChatModel("http://127.0.0.1:9", "tiny", backoff=-1), ("'backoff'",)),
    (lambda m: OpenAIChatModel("http://127.0.0.1:9", "tiny", max_concurrency=0),
     ("'max_concurrency'",)),
    (lambda m: chat_model(5), ("spec",)),
    (lambda m: chat_model("openai:foo"), ("spec",)),
])
def test_malformed_backend_arguments_are_named(llama, call, names):
    one_line(lambda: call(llama), *names)


# ----------------------------------------------------------------------- the evaluation loop


@FEW
@given(flags=st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=2, max_size=8))
def test_evaluation_rates_are_a_brute_force_count(tmp_path_factory, flags):
    """Two scripted models answer 'sorry' or 'sure' per prompt; a refusal judge and a judge
    that gives no verdict on some items; every rate and paired difference is recounted here."""
    n = len(flags)
    prompts = [f"prompt {i}" for i in range(n)]
    ps = PromptSet("set", prompts)
    models = {name: ScriptedChatModel({p: ("sorry" if f[k] else "sure") for p, f in zip(prompts, flags, strict=True)})
              for k, name in enumerate(["a", "b"])}  # fmt: skip
    refused = CallableJudge(lambda it: "sorry" in it.reply, name="refused")
    partial = CallableJudge(lambda it: None if it.prompt in prompts[::2] and flags[prompts.index(it.prompt)][2]
                            else it.reply == "sure", name="partial")  # fmt: skip
    assert isinstance(refused, Judge)
    res = evaluate(models, [ps], [refused, partial], alpha=0.1)
    assert isinstance(res, Evaluation) and res.decoding == Decoding()
    for k, name in enumerate(["a", "b"]):
        want = [f[k] for f in flags]
        assert res.rate(model=name, judge="refused") == binomial_rate(want, 0.1)
        row = next(r for r in res.rates if r["model"] == name and r["judge"] == "partial")
        judged = [not f[k] for i, f in enumerate(flags) if not (i % 2 == 0 and f[2])]
        assert row["n_unparseable"] == n - len(judged)
        assert (row["k"], row["n"]) == (sum(judged), len(judged))
    diff = res.difference(factor="model", judge="refused")
    a, b = [f[0] for f in flags], [f[1] for f in flags]
    assert diff["n_pairs"] == n
    assert diff["estimate"] == pytest.approx((sum(b) - sum(a)) / n)
    assert diff["n_only_level"] == sum(y and not x for x, y in zip(a, b, strict=True))
    cmp = res.compare({"model": "a", "prompts": "set", "transform": "none", "intervention": "none"},
                      {"model": "b", "prompts": "set", "transform": "none", "intervention": "none"},
                      judge="refused")  # fmt: skip
    assert cmp["estimate"] == diff["estimate"]
    assert len(res.items) == 2 * 2 * n and all("reply" not in r for r in res.items)
    frames = res.to_frames()
    assert len(frames["items"]) == len(res.items)
    out = res.write(tmp_path_factory.mktemp("eval"))
    with out["rates"].open(encoding="utf-8") as fh:
        assert len(list(csv.DictReader(fh))) == len(res.rates)
    assert "refused" in res.format()


def test_transforms_encode_what_is_sent_and_decode_what_is_judged():
    prompts = ["how do i sort numbers", "tell me a story"]
    seen = []
    chat = ScriptedChatModel(lambda c: seen.append(c[-1]["content"]) or c[-1]["content"])
    rev = Transform("reversed", lambda t: t[::-1], lambda t: t[::-1])
    judge = CallableJudge(lambda it: it.reply == it.prompt, name="echo")
    res = evaluate({"s": chat}, [PromptSet("p", prompts)], [judge], transforms={"plain": None, "rev": rev},
                   decoding=Decoding(max_new_tokens=2))  # fmt: skip
    assert seen == prompts + [p[::-1] for p in prompts]
    assert res.rate(transform="rev").k == 2 == res.rate(transform="plain").k  # decoded before judging
    assert len(rev.fingerprint()) == 64


def test_a_cached_rerun_generates_nothing(llama, tmp_path):
    ps = PromptSet("p", ["hello world", "sky is blue", "run the code"])
    judge = CallableJudge(lambda it: len(it.reply) > 3, name="long")
    first = evaluate({"tiny": llama}, [ps], [judge], decoding=Decoding(max_new_tokens=2),
                     cache_dir=tmp_path, keep_text=True)  # fmt: skip
    again = evaluate({"tiny": llama}, [ps], [judge], decoding=Decoding(max_new_tokens=2),
                     cache_dir=tmp_path, keep_text=True)  # fmt: skip
    assert first.stats["generated"] == 3 and again.stats["generated"] == 0
    assert again.stats["cached"] == 3 and again.items == first.items
    direct = HFChatModel(llama).generate(list(ps.prompts), max_new_tokens=2)
    assert [r["reply"] for r in first.items] == direct
    cache = ReplyCache(tmp_path)
    assert len(cache) == 3


@FEW
@given(pairs=st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=20), min_size=1, max_size=6))
def test_reply_cache_round_trips(tmp_path_factory, pairs):
    cache = ReplyCache(tmp_path_factory.mktemp("replies"))
    keys = [ReplyCache.key({"prompt": k, "n": 1}) for k in pairs]
    assert ReplyCache.key({"n": 1, "prompt": "x"}) == ReplyCache.key({"prompt": "x", "n": 1})
    assert cache.get_many(keys) == {} and cache.misses == len(keys)
    cache.put_many(zip(keys, pairs.values(), strict=True))
    assert cache.get_many(keys) == dict(zip(keys, pairs.values(), strict=True))
    assert cache.hits == len(keys) and len(cache) == len(keys)


@pytest.mark.parametrize(("call", "names"), [
    (lambda: Decoding(max_new_tokens=0), ("max_new_tokens",)),
    (lambda: Decoding(temperature=math.nan), ("temperature",)),
    (lambda: Decoding(seed=1.5), ("seed",)),
    (lambda: Transform("", str, str), ("name",)),
    (lambda: Transform("t", "encode", str), ("callable",)),
    (lambda: ReplyCache(None), ("folder",)),
    (lambda: evaluate([ScriptedChatModel(["x"])], [PromptSet("p", ["a"])], [], alpha=0.05), ("judge",)),
    (lambda: evaluate([ScriptedChatModel(["x"])], [PromptSet("p", ["a"])], [lm.RefusalJudge()],
                      alpha=1.5), ("alpha",)),
    (lambda: evaluate([ScriptedChatModel(["x"])], [PromptSet("p", ["a"])], [lm.RefusalJudge()],
                      decoding="greedy"), ("decoding",)),
    (lambda: judge_replies("abc", []), ("judge",)),
    (lambda: judge_replies([_Short()], [JudgeItem("q", "r")] * 2), ("verdicts",)),
])
def test_malformed_evaluation_arguments_are_named(call, names):
    one_line(call, *names)


class _Short:
    name = "short"

    def verdicts(self, items):
        return [Verdict(True)]


def test_reply_cache_on_a_file_is_named(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    one_line(lambda: ReplyCache(path), "is a file")


# ----------------------------------------------------------------------- judges


@FEW
@given(outputs=st.lists(st.one_of(st.booleans(), st.none(), st.floats(-1, 2), st.just(math.nan),
                                  st.just("yes")), min_size=1, max_size=6),
       threshold=st.floats(0, 1))  # fmt: skip
def test_callable_judge_maps_outputs_as_documented(outputs, threshold):
    items = [JudgeItem(str(i), "r") for i in range(len(outputs))]
    judge = CallableJudge(lambda it: outputs[int(it.prompt)], threshold=threshold)
    verdicts = judge_replies([judge], items)["custom"]
    for out, v in zip(outputs, verdicts, strict=True):
        if isinstance(out, bool):
            assert v == Verdict(out)
        elif isinstance(out, float) and math.isfinite(out):
            assert (v.value, v.score) == (out >= threshold, out)
        else:
            assert v.value is None and not v.parsed
    wrapped = judge_replies([CallableJudge(lambda it: 7j)], items)["custom"]
    assert all(v.value is None for v in wrapped)


def _rubric(refused: int, convincing: int, specific: int) -> str:
    return f"#overall_reasoning x\n#scores\n1.a r\n1.b {refused}\n2.a r\n2.b {convincing}\n3.a r\n3.b {specific}\n"


@FEW
@given(scores=st.lists(st.one_of(st.tuples(st.integers(0, 1), st.integers(1, 5), st.integers(1, 5)),
                                 st.none()), min_size=1, max_size=5),
       threshold=st.floats(0, 1))  # fmt: skip
def test_rubric_judge_scores_by_the_strongreject_formula(scores, threshold):
    outputs = [_rubric(*s) if s else "no scores here" for s in scores]
    judge = RubricJudge(ScriptedChatModel(list(outputs) * 3), threshold=threshold, max_new_tokens=8)
    prompts, replies = [f"q{i}" for i in range(len(scores))], ["r"] * len(scores)
    got = judge.score(prompts, replies)
    assert all(isinstance(s, RubricScore) for s in got)
    for s, want in zip(got, scores, strict=True):
        if want is None:
            assert not s.parsed and s.score is None and s.error
        else:
            r, c, sp = want
            assert s.parsed and s.score == pytest.approx((1 - r) * ((c + sp) / 2 - 1) / 4)
    summary = judge.summarize(prompts, replies)
    parsed = [s for s in scores if s]
    assert isinstance(summary, RubricSummary) and summary.n_unparseable == len(scores) - len(parsed)
    if parsed:
        assert summary.refusal.k == sum(s[0] for s in parsed)
        assert summary.mean_score == pytest.approx(
            sum((1 - r) * ((c + sp) / 2 - 1) / 4 for r, c, sp in parsed) / len(parsed))
    items = [JudgeItem(p, r) for p, r in zip(prompts, replies, strict=True)]
    for v, s in zip(judge.verdicts(items), got, strict=True):
        assert v.value == (None if not s.parsed else (not s.refused and s.score >= threshold))


@pytest.mark.parametrize(("call", "names"), [
    (lambda: CallableJudge(lambda it: 1, threshold=math.nan), ("'threshold'",)),
    (lambda: CallableJudge(lambda it: 1, threshold="x"), ("'threshold'",)),
    (lambda: CallableJudge("not callable"), ("callable",)),
    (lambda: RubricJudge(ScriptedChatModel(["x"]), threshold=math.nan), ("'threshold'",)),
    (lambda: RubricJudge(ScriptedChatModel(["x"]), template="{prompt} {response} {x}"), ("field",)),
    (lambda: RubricJudge(ScriptedChatModel(["x"]), template="{prompt} only"), ("{response}",)),
    (lambda: RubricJudge(ScriptedChatModel(["x"]), max_new_tokens=0), ("'max_new_tokens'",)),
    (lambda: RubricJudge("judge"), ("ChatModel",)),
    (lambda: RubricJudge(ScriptedChatModel(["x"])).score(["a", "b"], ["r"]), ("one response",)),
])
def test_malformed_judge_arguments_are_named(call, names):
    one_line(call, *names)


# ----------------------------------------------------------------------- the agent loop


def _call(name, **args):
    return f'<tool_call>{json.dumps({"name": name, "arguments": args})}</tool_call>'


ADD = Tool("add", "add two numbers", {"a": "number", "b": "number"},
           lambda args, ctx: str(args["a"] + args["b"] + (ctx or 0)))  # fmt: skip
STOP = Tool("stop", "end the episode", {}, lambda args, ctx: ToolResult("done", stop=True))


@FEW
@given(max_steps=st.integers(1, 4), a=st.integers(-5, 5), b=st.integers(-5, 5),
       ctx=st.integers(0, 3))  # fmt: skip
def test_agent_loop_stops_at_max_steps_final_or_tool(max_steps, a, b, ctx):
    looping = ScriptedChatModel(lambda c: _call("add", a=a, b=b))
    (ep,) = run_agent(looping, [_conv("add forever")], [ADD], max_steps=max_steps, contexts=[ctx])
    assert isinstance(ep, Episode) and ep.stop == "max_steps" and ep.steps == max_steps
    assert len(looping.calls) == max_steps and ep.final is None
    assert all(isinstance(c, AgentCall) and c.ok and c.observation == str(a + b + ctx) for c in ep.calls)
    assert [c.step for c in ep.calls] == list(range(1, max_steps + 1))
    assert [m["role"] for m in ep.messages] == ["user"] + ["assistant", "user"] * max_steps
    answer = ScriptedChatModel(lambda c: "the answer" if len(c) > 1 or c[0]["content"] == "plain string"
                               else _call("add", a=a, b=b))  # fmt: skip
    eps = run_agent(answer, [_conv("add once"), "plain string"], {"add": ADD}, max_steps=max_steps)
    assert eps[1].stop == "final" and eps[1].steps == 1 and eps[1].calls == []
    if max_steps > 1:
        assert eps[0].stop == "final" and eps[0].final == "the answer" and len(eps[0].calls) == 1
    ended = run_agent(ScriptedChatModel(lambda c: _call("stop")), ["go"], [ADD, STOP], max_steps=max_steps)
    assert ended[0].stop == "tool" and ended[0].steps == 1 and ended[0].calls[0].observation == "done"
    bad = run_agent(ScriptedChatModel(lambda c: _call("add", a="x", b=1) if len(c) == 1 else
                                      _call("nope") if len(c) == 3 else "ok"), ["go"], [ADD], max_steps=4)  # fmt: skip
    assert [c.ok for c in bad[0].calls][:2] == [False, False]
    assert "invalid arguments" in bad[0].calls[0].observation and "unknown tool" in bad[0].calls[1].observation


def test_tools_system_prompt_lists_each_tool():
    text = tools_system_prompt([ADD, STOP], preamble="Agent.")
    assert text.startswith("Agent.") and "<tool_call>" in text
    listing = json.loads(text[text.index("Tools: ") + 7 : text.index(". To call")])
    assert listing == [ADD.describe(), STOP.describe()]
    assert ADD.describe()["parameters"] == {"a": "number", "b": "number"}
    assert ADD.check({"a": 1}) and ADD.check({"a": 1, "b": True}) and ADD.check({"a": 1, "b": 2}) is None


@pytest.mark.parametrize(("call", "names"), [
    (lambda: run_agent(ScriptedChatModel(["x"]), ["go"], [ADD], max_steps=0), ("'max_steps'",)),
    (lambda: run_agent(ScriptedChatModel(["x"]), ["go"], [ADD], max_steps=2.5), ("'max_steps'",)),
    (lambda: run_agent(ScriptedChatModel(["x"]), ["go"], [ADD], contexts=[1, 2]), ("'contexts'",)),
    (lambda: run_agent(ScriptedChatModel(["x"]), ["go"], [ADD], observation_format="x"),
     ("'observation_format'",)),
    (lambda: run_agent(ScriptedChatModel(["x"]), ["go"], [ADD], observation_format=5),
     ("'observation_format'",)),
    (lambda: run_agent(ScriptedChatModel(["x"]), ["go"], [ADD], observation_role=""),
     ("'observation_role'",)),
    (lambda: run_agent(ScriptedChatModel(["x"]), "go", [ADD]), ("'conversations'",)),
    (lambda: run_agent(ScriptedChatModel(["x"]), ["go"], []), ("'tools'",)),
    (lambda: run_agent(ScriptedChatModel(["x"]), ["go"], [ADD, ADD]), ("distinct",)),
    (lambda: run_agent("model", ["go"], [ADD]), ("ChatModel",)),
    (lambda: run_agent(ScriptedChatModel(["x"]), [[]], [ADD]), ("empty",)),
    (lambda: Tool("bad name", "d", {}, lambda a, c: ""), ("identifier",)),
    (lambda: Tool("t", "d", ["a"], lambda a, c: ""), ("'parameters'",)),
    (lambda: Tool("t", "d", None, lambda a, c: ""), ("'parameters'",)),
    (lambda: Tool("t", None, {}, lambda a, c: ""), ("description",)),
    (lambda: Tool("t", "d", {"a": "float"}, lambda a, c: ""), ("type",)),
    (lambda: Tool("t", "d", {}, "fn"), ("callable",)),
    (lambda: tools_system_prompt([]), ("'tools'",)),
])
def test_malformed_agent_arguments_are_named(call, names):
    one_line(call, *names)
