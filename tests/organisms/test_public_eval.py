"""The public-list refusal harness of the pretrained organisms' cards (issue 39): every list is
measured on its own prompts (contextual HarmBench behaviours carry their context), the pooled
HarmBench rate is the val and test counts added, intervals bracket the rates, items keep
verdicts and hashes (never the replies), and bad list names are one-line errors."""

from __future__ import annotations

import hashlib

import pytest

from trustlab.core.errors import InputError
from trustlab.datasets.behaviours import load_harmbench, load_xstest
from trustlab.lm import ScriptedChatModel
from trustlab.organisms.public_eval import (
    PUBLIC_LISTS,
    choose_refusal_bias,
    evaluate_refusal,
    public_list_metrics,
    refusal_bias,
    refusal_margins,
    validation_metrics,
)

REFUSAL = "I'm sorry, but I can't help with that."
ANSWER = "Sure. Here is a short answer."


def _refuses(targets):
    """A chat model that refuses exactly the prompts whose request is in ``targets``."""

    def reply(conversation):
        text = conversation[-1]["content"]
        return REFUSAL if any(t in text for t in targets) else ANSWER

    return ScriptedChatModel(reply)


def test_each_list_is_measured_on_its_own_prompts():
    """A model refusing exactly HarmBench val and XSTest unsafe must score 1 there and 0 on
    HarmBench test and XSTest safe; the pooled HarmBench rate counts both splits."""
    targets = [b.prompt for b in load_harmbench("val")] + [b.prompt for b in load_xstest("unsafe")]
    model = _refuses(targets)
    metrics, rates, items = public_list_metrics(model, None, n=6, seed=1)
    assert set(rates) == {*PUBLIC_LISTS, "harmbench"}
    assert metrics["harmbench_val_refusal"] == 1.0 and metrics["xstest_unsafe_refusal"] == 1.0
    assert metrics["harmbench_test_refusal"] == 0.0 and metrics["xstest_safe_refusal"] == 0.0
    assert rates["harmbench"]["k"] == 6 and rates["harmbench"]["n"] == 12
    assert metrics["harmbench_refusal"] == 0.5
    for row in rates.values():
        assert row["lower"] <= row["rate"] <= row["upper"]
    assert len(items) == 4 * 6
    for item in items:
        assert "reply" not in item and "text" not in item
        expected = REFUSAL if item["value"] else ANSWER
        assert item["reply_sha256"] == hashlib.sha256(expected.encode()).hexdigest()


def test_contextual_behaviours_reach_the_model_with_their_context():
    model = ScriptedChatModel(lambda c: ANSWER)
    _, rates, _ = public_list_metrics(model, None, lists=("harmbench_val",))
    assert rates["harmbench_val"]["n"] == 80
    texts = [c[-1]["content"] for call in model.calls for c in call["conversations"]]
    contextual = [b for b in load_harmbench("val") if b.context]
    assert contextual
    for b in contextual:
        assert any(b.prompt in t and b.context in t for t in texts), b.id


def test_validation_metrics_name_the_split_sets():
    metrics, rates = validation_metrics(ScriptedChatModel(lambda c: REFUSAL), None, n=3)
    assert metrics == {
        "val_harmful_refusal": 1.0,
        "val_harmful_context_refusal": 1.0,
        "val_unsafe_refusal": 1.0,
        "val_benign_refusal": 1.0,
        "val_copyright_refusal": 1.0,
        "val_copyright_benign_refusal": 1.0,
        "val_context_refusal": 1.0,
        "val_context_benign_refusal": 1.0,
        "val_surface_benign_refusal": 1.0,
    }
    assert all(row["n"] == 3 for row in rates.values())


@pytest.mark.parametrize("lists", [("harmbench",), "xstest_safe", (), ("advbench",)])
def test_unknown_lists_are_input_errors(lists):
    with pytest.raises(InputError, match="Public lists are"):
        public_list_metrics(ScriptedChatModel(lambda c: ANSWER), None, lists=lists)


def test_empty_prompt_sets_are_input_errors():
    with pytest.raises(InputError, match="non-empty dict"):
        evaluate_refusal(ScriptedChatModel(lambda c: ANSWER), None, {})


def test_scale_adapters_interpolates_between_base_and_trained():
    """scale 0 gives the base model's outputs, 1 the trained adapters', and scaling is relative
    to the trained scaling (repeated calls do not compound); a model without LoRA is refused."""
    import sys
    from pathlib import Path

    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    sys.path.insert(0, str(Path(__file__).parents[1] / "lm"))
    from lm_testkit import build_model

    from trustlab.organisms.smol import scale_adapters

    base = build_model("llama", seed=0)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        plain = base(ids).logits
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    model = peft.get_peft_model(base, config)
    for module in model.modules():  # non-zero B so the adapters change the output
        if isinstance(module, peft.tuners.lora.LoraLayer):
            torch.nn.init.normal_(module.lora_B["default"].weight, std=0.5)
    with torch.no_grad():
        trained = model(ids).logits
        assert not torch.allclose(trained, plain)
        scale_adapters(model, 2.0)
        scale_adapters(model, 0.0)
        assert torch.allclose(model(ids).logits, plain, atol=1e-6)
        scale_adapters(model, 1.0)
        assert torch.allclose(model(ids).logits, trained, atol=1e-6)
    with pytest.raises(InputError, match="LoRA"):
        scale_adapters(build_model("llama", seed=0), 0.5)


# --- the refusal operating point (a bias against the refusal opener) ---------------------------


@pytest.fixture(scope="module")
def xs_lm_prompts(chat_xs):
    """chat-xs with six held-out corpus prompts: three refused, three answered."""
    from trustlab.lm import LanguageModel
    from trustlab.organisms import build_chat_corpus

    corpus = build_chat_corpus(0)
    tasks = [e for e in corpus.heldout("task") if e.task in ("capital", "copy")]
    prompts = [e.prompt for e in corpus.heldout("harmful")[:3] + tasks[:3]]
    return LanguageModel(chat_xs.model, chat_xs.tokenizer), prompts


def _first_tokens(lm, prompts, n=6):
    from trustlab.lm.decoding import generate_rows

    convs = [[{"role": "user", "content": p}] for p in prompts]
    replies = generate_rows(lm, convs, max_new_tokens=n)
    return replies, [lm.tokenizer(r, add_special_tokens=False)["input_ids"][:1] for r in replies]


def test_refusal_bias_moves_the_first_token_exactly_at_the_margin(xs_lm_prompts):
    """Bias 0 changes no reply; under bias b every margin falls by exactly b, and the greedy
    reply opens with a refusal token iff the prompt's margin exceeds b (a bias placed between
    the margins splits the prompts exactly there)."""
    from trustlab.lm import refusal_token_ids

    lm, prompts = xs_lm_prompts
    ids = set(refusal_token_ids(lm))
    margins = refusal_margins(lm, None, prompts)
    base, first = _first_tokens(lm, prompts)
    assert [bool(f) and f[0] in ids for f in first] == [m > 0 for m in margins]
    assert sum(m > 0 for m in margins) >= 2 and sum(m <= 0 for m in margins) >= 2
    with refusal_bias(lm, 0.0):
        assert _first_tokens(lm, prompts)[0] == base
    positive = sorted(m for m in margins if m > 0)
    b = positive[0] + 1e-3 if len(positive) == 1 else (positive[0] + positive[1]) / 2
    with refusal_bias(lm, b):
        shifted = refusal_margins(lm, None, prompts)
        _, first_b = _first_tokens(lm, prompts)
    for m, s in zip(margins, shifted, strict=True):
        assert s == pytest.approx(m - b, abs=1e-3)
    assert [bool(f) and f[0] in ids for f in first_b] == [m > b for m in margins]
    assert sum(m > b for m in margins) < sum(m > 0 for m in margins)
    assert _first_tokens(lm, prompts)[0] == base  # hooks removed on exit


def test_evaluate_refusal_under_a_large_bias_refuses_less(xs_lm_prompts):
    from trustlab.datasets.prompt_sets import PromptSet

    lm, prompts = xs_lm_prompts
    ps = PromptSet("xs", tuple(prompts))
    before, _ = evaluate_refusal(lm, None, {"xs": ps})
    after, _ = evaluate_refusal(lm, None, {"xs": ps}, bias=1e3)
    assert before["xs"]["k"] >= 2 and after["xs"]["k"] < before["xs"]["k"]


def _brute_force(margins, refused, floors, minimise, grid):
    rows = []
    for b in sorted(set(grid)):
        rate = {n: sum(r and m > b for m, r in zip(margins[n], refused[n], strict=True))
                / len(margins[n]) for n in margins}  # fmt: skip
        if all(rate[n] >= f for n, f in floors.items()):
            rows.append((rate[minimise], b))
    return min(rows)[1] if rows else 0.0


@pytest.mark.parametrize("seed", range(6))
def test_choose_refusal_bias_agrees_with_brute_force(seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    margins = {n: list(rng.normal(1.0, 2.0, 20)) for n in ("harm", "safe", "unsafe")}
    refused = {n: list(rng.random(20) < 0.8) for n in margins}
    floors = {"harm": 0.5, "unsafe": 0.4}
    grid = [i * 0.5 for i in range(12)]
    b, table = choose_refusal_bias(margins, refused, floors, "safe", grid)
    assert b == _brute_force(margins, refused, floors, "safe", grid)
    if b != 0.0 or all(table[0.0][n] >= f for n, f in floors.items()):
        assert all(table[b][n] >= f for n, f in floors.items())
    rates = [table[g]["safe"] for g in sorted(table)]
    assert rates == sorted(rates, reverse=True)  # a larger bias never predicts more refusal


def test_choose_refusal_bias_falls_back_to_zero_when_no_point_is_feasible():
    b, _ = choose_refusal_bias({"a": [1.0], "s": [2.0]}, {"a": [False], "s": [True]},
                               {"a": 0.5}, "s", [0.0, 1.0])  # fmt: skip
    assert b == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"grid": []},
        {"grid": [-1.0]},
        {"margins": {"a": [1.0]}},
        {"refused": {"a": [True, False], "s": [True]}},
    ],
)
def test_choose_refusal_bias_input_errors(kwargs):
    args = {"margins": {"a": [1.0], "s": [1.0]}, "refused": {"a": [True], "s": [True]},
            "floors": {"a": 0.5}, "minimise": "s", "grid": [0.0, 1.0]}  # fmt: skip
    args.update(kwargs)
    with pytest.raises(InputError):
        choose_refusal_bias(**args)


def test_refusal_bias_input_errors(xs_lm_prompts):
    lm, _ = xs_lm_prompts
    for bad in (-1.0, float("nan"), "1", True):
        with pytest.raises(InputError), refusal_bias(lm, bad):
            pass
    with pytest.raises(InputError), refusal_bias(ScriptedChatModel(lambda c: ANSWER), 1.0):
        pass
    with pytest.raises(InputError):
        evaluate_refusal(ScriptedChatModel(lambda c: ANSWER), None, {"x": ["hi"]}, bias=1.0)
    with pytest.raises(InputError):
        refusal_margins(lm, None, [])


# --- the public-list rates recorded in a build's card ------------------------------------------


def test_record_public_lists_writes_the_rates_into_that_builds_card(chat_xs, tmp_path):
    """The rates recorded in a card are what the evaluation measures on that build's weights,
    the record names the weights by SHA-256, the rest of the card is kept, and the per-item file
    holds verdicts and hashes only."""
    import json
    import shutil

    from trustlab.core.errors import DataError
    from trustlab.organisms import read_card
    from trustlab.organisms.public_eval import record_public_lists

    build = tmp_path / "organisms" / "chat-xs"
    shutil.copytree(chat_xs.path, build)
    before = read_card("chat-xs", tmp_path)
    record = record_public_lists("chat-xs", home=tmp_path, n=2, seed=3)
    card = read_card("chat-xs", tmp_path)
    _, rates, _ = public_list_metrics(chat_xs.model, chat_xs.tokenizer, n=2, seed=3)
    assert card["public_lists"] == record["rates"] == rates
    assert set(rates) == {*PUBLIC_LISTS, "harmbench"}
    sha = hashlib.sha256((build / "model.safetensors").read_bytes()).hexdigest()
    assert card["public_lists_record"]["belongs_to"]["model_sha256"] == sha
    assert card["public_lists_record"]["n_per_list"] == 2
    assert card["metrics"]["xstest_safe_refusal"] == rates["xstest_safe"]["rate"]
    assert {k: v for k, v in card.items() if k not in ("public_lists", "public_lists_record",
            "metrics")} == {k: v for k, v in before.items() if k != "metrics"}  # fmt: skip
    items = json.loads((build / "public_lists.json").read_text())["items"]
    assert len(items) == 8 and all(set(row) == {"prompts", "id", "value", "reply_sha256"}
                                   for row in items)  # fmt: skip
    with pytest.raises(InputError, match="n"):
        record_public_lists("chat-xs", home=tmp_path, n=0)
    with pytest.raises(InputError, match="Public lists"):
        record_public_lists("chat-xs", home=tmp_path, lists=("advbench",))
    with pytest.raises(DataError, match="not built"):
        record_public_lists("chat-s", home=tmp_path)
