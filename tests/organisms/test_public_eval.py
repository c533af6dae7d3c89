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
    evaluate_refusal,
    public_list_metrics,
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
