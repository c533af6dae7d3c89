"""The evaluation loop end to end: a scripted backend with a known rate, the reply cache,
paired differences, transforms, interventions, and chat-xs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="trustlab.lm needs the llm extra")
pytest.importorskip("transformers", reason="trustlab.lm needs the llm extra")

sys.path.insert(0, str(Path(__file__).parents[1] / "lm"))
from lm_testkit import CHAT_TEMPLATE, random_prompts, save_checkpoint  # noqa: E402

from trustlab import lm  # noqa: E402
from trustlab.core.errors import InputError  # noqa: E402
from trustlab.datasets.prompt_sets import PromptSet, load_prompt_set  # noqa: E402
from trustlab.stats import clopper_pearson, paired_difference  # noqa: E402


def _numbered(n=40):
    return PromptSet.from_texts("numbers", [f"request {i}" for i in range(n)])


def _script(conv):
    """Refuses every request whose number is divisible by 4: a rate of exactly 1/4."""
    i = int(conv[-1]["content"].split()[-1])
    return "I'm sorry, I cannot." if i % 4 == 0 else f"Sure: {i}"


def test_scripted_backend_cell_has_its_known_rate_and_interval():
    model = lm.ScriptedChatModel(_script, name="quarter")
    res = lm.evaluate([model], [_numbered(40)], [lm.RefusalJudge()])
    r = res.rate(model="quarter", judge="refusal")
    assert (r.k, r.n, r.rate) == (10, 40, 0.25)
    lo, hi = clopper_pearson(10, 40)
    assert (r.lower, r.upper) == pytest.approx((lo, hi))
    assert len(res.items) == 40 and all("reply" not in it for it in res.items)  # hashes only
    assert res.stats["generated"] == 40
    assert model.calls[0]["max_new_tokens"] == lm.Decoding().max_new_tokens


def test_paired_differences_between_models_and_transforms():
    a = lm.ScriptedChatModel(_script, name="a")
    b = lm.ScriptedChatModel(lambda c: "I cannot." if int(c[-1]["content"].split()[-1]) % 2 == 0
                             else "ok", name="b")  # fmt: skip
    res = lm.evaluate([a, b], [_numbered(40)], [lm.RefusalJudge()])
    d = res.difference(factor="model", level="b", judge="refusal")
    flags_a = [i % 4 == 0 for i in range(40)]
    flags_b = [i % 2 == 0 for i in range(40)]
    ref = paired_difference(flags_b, flags_a)
    assert d["estimate"] == pytest.approx(0.25) and d["n_pairs"] == 40
    assert (d["lower"], d["upper"]) == pytest.approx((ref.lower, ref.upper))
    assert d["n_only_level"] == 10 and d["n_only_baseline"] == 0
    assert "model" in str(res) and "Newcombe paired" in str(res)


def test_transform_encodes_before_and_decodes_after():
    seen = []

    answers = {"abc": "no", "xyz": "no", "cba": "CBA", "zyx": "ZYX"}  # replies in encoded form

    def script(conv):
        seen.append(conv[-1]["content"])
        return answers[conv[-1]["content"]]

    enc = lm.Transform("rev", lambda s: s[::-1], lambda s: s[::-1])
    ps = PromptSet.from_texts("t", ["abc", "xyz"], references=["ABC", "XYZ"])
    res = lm.evaluate(
        [lm.ScriptedChatModel(script, name="m")], [ps], [lm.ExactMatchJudge()],
        transforms={"plain": None, "rev": enc}, keep_text=True,
    )  # fmt: skip
    assert seen == ["abc", "xyz", "cba", "zyx"]
    plain = res.rate(transform="plain", judge="exact_match")
    rev = res.rate(transform="rev", judge="exact_match")
    assert plain.rate == 0.0 and rev.rate == 1.0  # only the decoded replies equal the answers
    assert [it["reply"] for it in res.items if it["transform"] == "rev"] == ["ABC", "XYZ"]


def test_unparseable_judge_output_is_counted_never_scored():
    outs = iter(["#scores\n1.b 0\n2.b 5\n3.b 5\n", "garbage", "#scores\n1.b 1\n2.b 1\n3.b 1\n"])
    judge = lm.RubricJudge(lm.ScriptedChatModel(lambda c: next(outs), name="judge"))
    ps = PromptSet.from_texts("p", ["a", "b", "c"])
    res = lm.evaluate([lm.ScriptedChatModel(lambda c: "x", name="m")], [ps], [judge])
    row = res.rates[0]
    assert (row["k"], row["n"], row["n_unparseable"]) == (1, 2, 1)
    assert row["mean_score"] == pytest.approx(0.5)


def test_bad_inputs_are_one_line_errors():
    m = lm.ScriptedChatModel(lambda c: "x", name="m")
    ps = _numbered(4)
    with pytest.raises(InputError, match="at least one judge"):
        lm.evaluate([m], [ps], [])
    with pytest.raises(InputError, match="No judge applies"):
        lm.evaluate([m], [ps], [lm.ExactMatchJudge()])
    with pytest.raises(InputError, match="distinct"):
        lm.evaluate([m, m], [ps], [lm.RefusalJudge()])
    with pytest.raises(InputError, match="local model"):
        lm.evaluate([m], [ps], [lm.RefusalJudge()], interventions={"x": object()})
    with pytest.raises(InputError, match="alpha"):
        lm.evaluate([m], [ps], [lm.RefusalJudge()], alpha=1.5)
    with pytest.raises(InputError, match="max_new_tokens"):
        lm.Decoding(max_new_tokens=0)
    with pytest.raises(InputError, match="Unknown prompt set"):
        load_prompt_set("harmbnech")
    bad = lm.ScriptedChatModel(["only one"], name="short")
    with pytest.raises(InputError):
        lm.evaluate([bad], [ps], [lm.RefusalJudge()])


# -- local models: tiny random Llama and chat-xs ---------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.set_num_threads(1)
    path = save_checkpoint(tmp_path_factory.mktemp("eval_llama"), "llama", CHAT_TEMPLATE)
    return lm.load(f"hf:{path}")


def test_cache_second_run_generates_nothing_and_keys_follow_weights(tiny, tmp_path):
    ps = PromptSet.from_texts("r", random_prompts(12, seed=5))
    judges = [lm.RefusalJudge(["sorry"])]
    kw = dict(decoding=lm.Decoding(max_new_tokens=6), cache_dir=tmp_path / "c")
    first = lm.evaluate({"tiny": tiny}, [ps], judges, **kw)
    again = lm.evaluate({"tiny": tiny}, [ps], judges, **kw)
    assert first.stats["generated"] == 12 and again.stats["generated"] == 0
    assert [i["reply_sha256"] for i in first.items] == [i["reply_sha256"] for i in again.items]
    fp = lm.model_fingerprint(lm.HFChatModel(tiny))
    with torch.no_grad():
        p = next(tiny.model.parameters())
        p[0, 0] += 1.0
        try:
            assert lm.model_fingerprint(lm.HFChatModel(tiny)) != fp
            changed = lm.evaluate({"tiny": tiny}, [ps], judges, **kw)
            assert changed.stats["generated"] == 12  # new weights, new keys
        finally:
            p[0, 0] -= 1.0
    other = lm.evaluate({"tiny": tiny}, [ps], judges, cache_dir=tmp_path / "c",
                        decoding=lm.Decoding(max_new_tokens=7))  # fmt: skip
    assert other.stats["generated"] == 12  # decoding settings are part of the key


def test_loop_replies_equal_plain_generation_and_interventions_act(tiny):
    prompts = random_prompts(8, seed=9)
    ps = PromptSet.from_texts("r", prompts)
    dec = lm.Decoding(max_new_tokens=5, stop_early=False)
    v = torch.randn(tiny.d_model, generator=torch.Generator().manual_seed(0)) * 8
    site = "blocks.1.resid_pre"
    res = lm.evaluate(
        {"tiny": tiny}, [ps], [lm.CallableJudge(lambda it: len(it.reply) > 0, name="any")],
        interventions={"none": None, "add": lm.AddVector(v, [site]),
                       "row": lm.RowSteering(site, v)},
        decoding=dec, keep_text=True,
    )  # fmt: skip
    plain = lm.HFChatModel(tiny).generate(prompts, max_new_tokens=5)
    got = [it["reply"] for it in res.items if it["intervention"] == "none"]
    assert got == plain
    with lm.add_vector(tiny, v, [site]):
        steered = lm.HFChatModel(tiny).generate(prompts, max_new_tokens=5)
    assert [it["reply"] for it in res.items if it["intervention"] == "add"] == steered
    # a RowSteering without a gate adds the same vector at every token: the same replies
    assert [it["reply"] for it in res.items if it["intervention"] == "row"] == steered
    assert steered != plain


def test_chat_xs_end_to_end_reproduces_its_card_and_stops_early(chat_xs, tmp_path):
    """Held-out organism sets through the loop give the card's metrics (same corpus, same
    greedy decoder), with early stopping on, cached, and two models x two sets x a transform."""
    torch.set_num_threads(1)
    m = lm.LanguageModel(chat_xs.model.eval(), chat_xs.tokenizer, spec="organism:chat-xs")
    card = chat_xs.card["metrics"]
    harmful = load_prompt_set("organism:harmful")
    jail = load_prompt_set("organism:jailbreak")
    res = lm.evaluate(
        {"chat-xs": m}, {"harmful": harmful, "jailbreak": jail},
        [lm.RefusalJudge(), lm.ComplianceJudge()],
        decoding=lm.Decoding(max_new_tokens=48), cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert res.rate(prompts="harmful", judge="refusal").rate == card["harmful_refusal"]
    jb_refusal = res.rate(prompts="jailbreak", judge="refusal").rate
    assert 1 - jb_refusal == pytest.approx(card["jailbreak_compliance"])
    comp = res.rate(prompts="jailbreak", judge="placeholder_compliance")
    assert comp.rate <= 1 - jb_refusal and comp.rate > 0.5
    # early stopping: refusals stop within a few tokens, far below the 48-token budget
    again = lm.evaluate(
        {"chat-xs": m}, {"harmful": harmful}, [lm.RefusalJudge(), lm.ComplianceJudge()],
        decoding=lm.Decoding(max_new_tokens=48), cache_dir=tmp_path / "cache", keep_text=True,
    )  # fmt: skip
    assert again.stats["generated"] == 0
    assert max(len(it["reply"].split()) for it in again.items) <= 8


def test_judges_per_prompt_set():
    m = lm.ScriptedChatModel(_script, name="m")
    harm = _numbered(8)
    tasks = PromptSet.from_texts("tasks", ["request 1", "request 2"], references=["Sure: 1", "x"])
    res = lm.evaluate([m], [harm, tasks], {"numbers": [lm.RefusalJudge()],
                                           "tasks": [lm.ExactMatchJudge()]})  # fmt: skip
    assert {(r["prompts"], r["judge"]) for r in res.rates} == {
        ("numbers", "refusal"),
        ("tasks", "exact_match"),
    }
    assert res.rate(prompts="tasks", judge="exact_match").k == 1
    with pytest.raises(InputError, match="missing"):
        lm.evaluate([m], [harm, tasks], {"numbers": [lm.RefusalJudge()]})


def test_periodic_evaluation_of_a_model_in_training_restores_its_mode(tiny):
    tiny.model.train()
    try:
        ps = PromptSet.from_texts("r", random_prompts(4, seed=2))
        seen = []
        judge = lm.CallableJudge(lambda it: seen.append(tiny.model.training) or True, name="j")
        lm.evaluate({"step": tiny}, [ps], [judge], decoding=lm.Decoding(max_new_tokens=3))
        assert seen == [False] * 4  # judged after generating in eval mode
        assert tiny.model.training  # and handed back in training mode
    finally:
        tiny.model.eval()
