"""The fine-tuning loop: determinism, response-only loss, optimisers, clipping, masks, LoRA,
callbacks and the evaluation hook, each checked by a property that fails when it is wrong."""

from __future__ import annotations

import math

import pytest
import torch

from trustlab.core.errors import InputError
from trustlab.finetune import (
    FinetuneConfig,
    LoraSettings,
    encode_data,
    finetune,
    lr_multiplier,
    weights_sha256,
)
from trustlab.finetune.loop import _collate

FAST = {"steps": 4, "batch_size": 8, "lr": 1e-2}


def _params(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_same_seed_same_weights_other_seed_other_weights(tiny_tokenizer, tiny_data, tiny_model):

    def run(seed):
        model = _fresh(tiny_tokenizer)
        finetune(model, tiny_data, FAST, tokenizer=tiny_tokenizer, seed=seed)
        return weights_sha256(model)

    assert run(0) == run(0)
    assert run(0) != run(1)


def _fresh(tokenizer):
    from trustlab.organisms.specs import ModelShape
    from trustlab.organisms.train import make_llama

    return make_llama(
        ModelShape(n_layers=2, d_model=16, n_heads=2, d_mlp=32),
        tokenizer,
        torch.Generator().manual_seed(0),
        0.05,
    )


def test_loss_covers_the_response_and_end_token_only(tiny_tokenizer, tiny_data):
    encoded = encode_data(tiny_tokenizer, tiny_data[:4])
    for example, item in zip(encoded, tiny_data[:4], strict=True):
        response = tiny_tokenizer(item.response, add_special_tokens=False)["input_ids"]
        assert example.ids[example.n_prompt :] == [*response, tiny_tokenizer.eos_token_id]
    special = torch.tensor(sorted(set(tiny_tokenizer.all_special_ids)))
    _, attention, labels = _collate(
        encoded[:4], tiny_tokenizer.pad_token_id, None, special, 0.0, torch.Generator()
    )
    for row, example in enumerate(encoded[:4]):
        assert (labels[row, : example.n_prompt] == -100).all()
        assert (
            labels[row, example.n_prompt : len(example.ids)].tolist()
            == example.ids[example.n_prompt :]
        )
        assert (labels[row, len(example.ids) :] == -100).all()
        assert attention[row].sum() == len(example.ids)


def test_prompt_and_response_pairs_equal_examples(tiny_tokenizer, tiny_data):
    pairs = [(e.messages(), e.response) for e in tiny_data]
    plain = [(e.prompt, e.response) for e in tiny_data if e.system is None]
    assert encode_data(tiny_tokenizer, pairs) == encode_data(tiny_tokenizer, tiny_data)
    assert encode_data(tiny_tokenizer, plain) == encode_data(tiny_tokenizer, tiny_data)


def test_training_lowers_the_loss(tiny_tokenizer, tiny_data, tiny_model):
    result = finetune(
        tiny_model, tiny_data, FAST, tokenizer=tiny_tokenizer, steps=40, schedule="constant"
    )
    first, last = sum(result.losses[:5]) / 5, sum(result.losses[-5:]) / 5
    assert last < 0.8 * first, (first, last)
    assert result.steps_run == 40 and len(result.grad_norms) == 40 and len(result.lrs) == 40


def _sgd_step(tokenizer, data, clip):
    model = _fresh(tokenizer)
    before = torch.cat([p.detach().flatten() for p in model.parameters()])
    result = finetune(
        model, data, tokenizer=tokenizer, steps=1, batch_size=8, lr=0.1, optimizer="sgd",
        momentum=0.0, schedule="constant", clip_grad_norm=clip,
    )  # fmt: skip
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    return float((after - before).norm()), result


def test_plain_sgd_moves_by_lr_times_the_reported_preclip_norm(tiny_tokenizer, tiny_data):
    moved, result = _sgd_step(tiny_tokenizer, tiny_data, None)
    assert moved == pytest.approx(0.1 * result.grad_norms[0], rel=1e-4)
    assert result.grad_norms[0] > 0.05


def test_clipping_bounds_the_step_and_reports_the_norm_before_clipping(tiny_tokenizer, tiny_data):
    _, unclipped = _sgd_step(tiny_tokenizer, tiny_data, None)
    moved, clipped = _sgd_step(tiny_tokenizer, tiny_data, 0.01)
    assert clipped.grad_norms[0] == pytest.approx(unclipped.grad_norms[0], rel=1e-6)
    assert moved == pytest.approx(0.1 * 0.01, rel=1e-3)


def test_module_norms_add_up_to_the_global_norm(tiny_tokenizer, tiny_data, tiny_model):
    result = finetune(tiny_model, tiny_data, FAST, tokenizer=tiny_tokenizer)
    for total, modules in zip(result.grad_norms, result.module_grad_norms, strict=True):
        assert math.sqrt(sum(v * v for v in modules.values())) == pytest.approx(total, rel=1e-5)
    assert "model.layers.1.mlp.down_proj" in result.module_grad_norms[0]


def test_parameter_mask_trains_only_the_chosen_modules(tiny_tokenizer, tiny_data, tiny_model):
    before = _params(tiny_model)
    result = finetune(
        tiny_model, tiny_data, FAST, tokenizer=tiny_tokenizer, trainable=("model.layers.1.mlp.*",)
    )
    for name, param in tiny_model.named_parameters():
        changed = not torch.equal(param, before[name])
        assert changed == name.startswith("model.layers.1.mlp."), name
        assert param.requires_grad  # the mask is undone after training
    assert set(result.module_grad_norms[0]) == {
        "model.layers.1.mlp.gate_proj", "model.layers.1.mlp.up_proj",
        "model.layers.1.mlp.down_proj",
    }  # fmt: skip
    assert result.n_trainable == 3 * 16 * 32


def test_a_mask_matching_nothing_is_an_error_naming_it(tiny_tokenizer, tiny_data, tiny_model):
    with pytest.raises(InputError, match="trainable"):
        finetune(tiny_model, tiny_data, FAST, tokenizer=tiny_tokenizer, trainable=("nope.*",))
    assert all(p.requires_grad for p in tiny_model.parameters())


def test_adam_and_adamw_differ_only_through_weight_decay(tiny_tokenizer, tiny_data):
    def run(**kw):
        model = _fresh(tiny_tokenizer)
        finetune(model, tiny_data, FAST, tokenizer=tiny_tokenizer, **kw)
        return weights_sha256(model)

    assert run(optimizer="adam") == run(optimizer="adamw")  # no decay: the same update
    assert run(optimizer="adam", weight_decay=0.1) != run(optimizer="adamw", weight_decay=0.1)
    assert run(optimizer="sgd", momentum=0.9) != run(optimizer="sgd", momentum=0.0)


def test_lora_trains_adapters_and_merges_them_into_the_targeted_modules(
    tiny_tokenizer, tiny_data, tiny_model
):
    pytest.importorskip("peft", reason="LoRA needs peft")
    before = _params(tiny_model)
    lora = LoraSettings(r=2, alpha=4, target_modules=("q_proj", "v_proj"), layers=(1,))
    result = finetune(tiny_model, tiny_data, FAST, tokenizer=tiny_tokenizer, lora=lora)
    assert result.model is tiny_model or type(result.model) is type(tiny_model)
    after = dict(result.model.named_parameters())
    assert set(after) == set(before)  # merged: a plain model again
    changed = {n for n in before if not torch.equal(before[n], after[n].detach())}
    assert changed == {
        "model.layers.1.self_attn.q_proj.weight",
        "model.layers.1.self_attn.v_proj.weight",
    }
    assert result.n_trainable == 2 * (2 * 16 + 2 * 16)  # A (r x in) + B (out x r), two modules


def test_unmerged_lora_keeps_the_base_weights(tiny_tokenizer, tiny_data, tiny_model):
    pytest.importorskip("peft", reason="LoRA needs peft")
    before = _params(tiny_model)
    lora = LoraSettings(r=2, alpha=4, target_modules=("q_proj",), merge=False)
    result = finetune(tiny_model, tiny_data, FAST, tokenizer=tiny_tokenizer, lora=lora)
    assert any("lora_A" in n for n, _ in result.model.named_parameters())
    base = result.model.get_base_model()
    for name, param in base.named_parameters():
        if "lora_" not in name:
            key = name.replace(".base_layer", "")
            assert torch.equal(param, before[key]), name


def test_callbacks_see_every_step_and_can_stop_training(tiny_tokenizer, tiny_data, tiny_model):
    seen = []

    def stop_after_three(info):
        seen.append(info)
        return info.step == 3

    result = finetune(
        tiny_model, tiny_data, FAST, tokenizer=tiny_tokenizer, steps=10,
        callbacks=[stop_after_three],
    )  # fmt: skip
    assert [i.step for i in seen] == [1, 2, 3]
    assert result.stopped_early and result.steps_run == 3
    assert seen[0].grad_norm == result.grad_norms[0] and seen[0].loss == result.losses[0]


def test_evaluation_hook_runs_every_k_steps_and_at_the_end(tiny_tokenizer, tiny_data, tiny_model):
    calls = []

    def evaluate(model, step):
        assert not model.training and not torch.is_grad_enabled()
        calls.append(step)
        return {"step_squared": step * step}

    result = finetune(
        tiny_model, tiny_data, FAST, tokenizer=tiny_tokenizer, steps=7, evaluate=evaluate,
        eval_every=3,
    )  # fmt: skip
    assert calls == [3, 6, 7]
    assert result.evaluations[-1] == (7, {"step_squared": 49.0})


def test_a_non_finite_loss_stops_and_flags_divergence(tiny_tokenizer, tiny_data, tiny_model):
    with torch.no_grad():
        tiny_model.model.norm.weight.fill_(float("nan"))
    result = finetune(tiny_model, tiny_data, FAST, tokenizer=tiny_tokenizer)
    assert result.diverged and result.steps_run == 1


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ("constant", [1.0, 1.0, 1.0, 1.0, 1.0]),
        ("warmup_constant", [0.5, 1.0, 1.0, 1.0, 1.0]),
        ("warmup_linear", [0.5, 1.0, 1.0, 0.7, 0.4]),  # reaches the floor at step == steps
    ],
)
def test_schedules(schedule, expected):
    at = lr_multiplier(FinetuneConfig(steps=5, warmup=2, schedule=schedule, min_lr_ratio=0.1))
    assert [at(s) for s in range(5)] == pytest.approx(expected)
    cosine = lr_multiplier(FinetuneConfig(steps=102, warmup=2, min_lr_ratio=0.05))
    assert cosine(2) == pytest.approx(1.0) and cosine(102) == pytest.approx(0.05)


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"lr": -1.0}, "lr"),
        ({"steps": 0}, "steps"),
        ({"clip_grad_norm": 0.0}, "clip_grad_norm"),
        ({"optimizer": "rmsprop"}, "optimizer"),
        ({"warmup": -1}, "warmup"),
        ({"betas": (0.9, 1.5)}, "betas"),
        ({"batch_size": 1000}, "batch_size"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_bad_settings_raise_an_input_error_naming_them(
    tiny_tokenizer, tiny_data, tiny_model, override, field
):
    with pytest.raises(InputError, match=field):
        finetune(tiny_model, tiny_data, tokenizer=tiny_tokenizer, **override)


def test_bad_data_and_models_raise_input_errors(tiny_tokenizer, tiny_data, tiny_model):
    with pytest.raises(InputError, match="data"):
        finetune(tiny_model, "not a list", tokenizer=tiny_tokenizer)
    with pytest.raises(InputError, match="data"):
        finetune(tiny_model, [42], tokenizer=tiny_tokenizer)
    with pytest.raises(InputError, match="empty"):
        finetune(tiny_model, [], tokenizer=tiny_tokenizer)
    with pytest.raises(InputError, match="tokenizer"):
        finetune(tiny_model, tiny_data)
    with pytest.raises(InputError, match="model"):
        finetune("organism:chat-xs", tiny_data, tokenizer=tiny_tokenizer)
    with pytest.raises(InputError, match="eval_every"):
        finetune(tiny_model, tiny_data, tokenizer=tiny_tokenizer, eval_every=0, evaluate=dict)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from trustlab.finetune import parse_config  # noqa: E402

_ANY = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True),
    st.text(max_size=4), st.lists(st.floats(0, 1), max_size=3),
)  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(
    field=st.sampled_from(
        ["steps", "batch_size", "lr", "optimizer", "betas", "momentum", "weight_decay",
         "schedule", "warmup", "min_lr_ratio", "clip_grad_norm", "trainable", "word_dropout",
         "max_length", "seed", "threads"]
    ),
    value=_ANY,
)  # fmt: skip
def test_any_setting_is_either_valid_or_an_input_error_naming_it(field, value):
    try:
        config = parse_config(None, **{field: value})
    except InputError as exc:
        assert field in str(exc) or "config" in str(exc)
        assert "\n" not in str(exc)
        return
    assert getattr(config, field) is not None or value is None
    if isinstance(getattr(config, field), float):
        assert math.isfinite(getattr(config, field))


def test_the_evaluation_hook_goes_through_the_shared_evaluation_loop(
    tiny_tokenizer, tiny_data, tiny_model
):
    import trustlab.lm as lm
    from trustlab.datasets.prompt_sets import load_prompt_set
    from trustlab.finetune import evaluation_hook

    tasks = load_prompt_set("organism:task", n=10)
    hook = evaluation_hook(tiny_tokenizer, [tasks], [lm.RefusalJudge(), lm.ExactMatchJudge()])
    result = finetune(
        tiny_model, tiny_data, FAST, tokenizer=tiny_tokenizer, evaluate=hook, eval_every=2
    )
    assert [step for step, _ in result.evaluations] == [2, 4]
    metrics = result.evaluations[-1][1]
    name = f"{tasks.name}/{lm.ExactMatchJudge().name}"
    assert 0 <= metrics[f"{name}/lower"] <= metrics[name] <= metrics[f"{name}/upper"] <= 1
    assert tiny_model.training is False
