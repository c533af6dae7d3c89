"""gmu's properties: tests that fail if the construction, the release guarantees, the attack
or the counter-attacks were wrong. Tiny random models (gmu_kit) for the construction; chat-xs
(built once per session) for the fine-tuning claim in the default suite."""

from __future__ import annotations

import copy

import pytest
import torch

from trustlab.finetune import FinetuneConfig, finetune
from trustlab.methods.gmu import (
    GMUPlanter,
    ImageTask,
    LMTask,
    attack,
    compare,
    counter_attack,
    find_ffn_layers,
    prune_units,
    reinit_units,
    release_equality,
    suspect_units,
)

from . import gmu_kit as kit


def _logits(model, **inputs):
    with torch.no_grad():
        return model.eval()(**inputs).logits


def _hidden(model, site, **inputs) -> torch.Tensor:
    """The FFN's hidden activations (the input of its output projection)."""
    seen = []
    _, out = site.modules(model)
    handle = out.register_forward_pre_hook(lambda m, args: seen.append(args[0].detach()))
    try:
        _logits(model, **inputs)
    finally:
        handle.remove()
    return seen[0]


@pytest.mark.parametrize("lock", ["gate", "output"])
def test_gated_units_are_exactly_silent_and_logits_match(lock):
    model = kit.llama()
    planter = GMUPlanter(n_units=4, scale=1e3, lock=lock).fit(model)
    protected = planter.plant(model)
    ids = kit.ids()
    for site in find_ffn_layers(protected):
        w = site.width - 4
        ins, out = site.modules(protected)
        if lock == "gate":  # the hard lock: the GMU's hidden activation is exactly 0
            assert torch.equal(_hidden(protected, site, input_ids=ids)[..., w:],
                               torch.zeros_like(_hidden(protected, site, input_ids=ids)[..., w:]))
            assert float(ins[1].weight[w:].norm(dim=1).min()) == pytest.approx(1e3, rel=1e-5)
            assert float(out.weight[:, w:].norm(dim=0).min()) == pytest.approx(1e3, rel=1e-5)
        else:  # active but multiplied by an exactly-zero output column
            assert float(_hidden(protected, site, input_ids=ids)[..., w:].abs().max()) > 1.0
            assert not out.weight[:, w:].any()
    rows = {r["dtype"]: r for r in release_equality(model, protected, {"input_ids": ids},
                                                    dtypes=["float64", "float32"])}
    assert rows["float64"]["max_rel_diff"] < 1e-12
    assert rows["float32"]["max_rel_diff"] < 1e-5  # reduction order over a wider hidden dim
    assert rows["float32"]["argmax_agreement"] == 1.0
    assert torch.equal(model.model.layers[0].mlp.up_proj.weight, kit.llama().model.layers[0].mlp.up_proj.weight)


@pytest.mark.parametrize("lock", ["bias", "output"])
def test_vit_locks_keep_logits_and_round_trip_through_plain_transformers(tmp_path, lock):
    from transformers import AutoModelForImageClassification

    model = kit.vit()
    planter = GMUPlanter(n_units=5, scale=1e3, lock=lock).fit(model)
    protected = planter.plant(model)
    x, _ = kit.pixels(6)
    for site in find_ffn_layers(protected):
        hidden = _hidden(protected, site, pixel_values=x)[..., 32:]
        _, out = site.modules(protected)
        assert not out.weight[:, 32:].any()
        if lock == "bias":  # the same activation for every token of every image: no information
            assert torch.equal(hidden, torch.full_like(hidden, float(hidden.flatten()[0])))
            assert float(hidden.flatten()[0]) == pytest.approx(1e3)
    rows = release_equality(model, protected, {"pixel_values": x}, dtypes=["float32", "float64"])
    assert all(r["max_rel_diff"] < 1e-5 and r["finite"] for r in rows)
    protected.save_pretrained(tmp_path)
    loaded = AutoModelForImageClassification.from_pretrained(tmp_path, local_files_only=True)
    assert loaded.config.intermediate_size == 32 + 5
    assert torch.equal(_logits(loaded, pixel_values=x), _logits(protected, pixel_values=x))


def test_llama_checkpoint_round_trips_through_plain_transformers_bit_for_bit(tmp_path):
    from transformers import AutoModelForCausalLM

    model = kit.llama()
    protected = GMUPlanter(layers=[1], n_units=3, scale=1e3).fit_plant(model)
    protected.save_pretrained(tmp_path, safe_serialization=True)
    assert (tmp_path / "model.safetensors").is_file()
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True)
    ids = kit.ids()
    assert torch.equal(_logits(loaded, input_ids=ids), _logits(protected, input_ids=ids))
    assert torch.equal(loaded.model.layers[1].mlp.gate_proj.weight,
                       protected.model.layers[1].mlp.gate_proj.weight)


def test_padding_units_outside_the_chosen_layers_stay_zero_under_training():
    model = kit.llama()
    planter = GMUPlanter(layers=[1], n_units=3, scale=10.0)
    protected = planter.fit_plant(model)
    assert list(planter.units_) == ["model.layers.1.mlp"]
    finetune(protected, kit.examples(16), FinetuneConfig(steps=3, batch_size=8, lr=1e-2,
                                                         optimizer="sgd"),
             tokenizer=kit.tokenizer())
    mlp = protected.model.layers[0].mlp
    assert not mlp.gate_proj.weight[48:].any() and not mlp.up_proj.weight[48:].any()
    assert not mlp.down_proj.weight[:, 48:].any()


def test_the_first_gradient_is_amplified_on_the_locked_rows_only():
    """At release the GMUs' gate rows get a gradient ~scale**2 larger than everything else; a
    planter with a small scale does not (the amplification is the construction's, not the data's)."""
    def first_norms(scale):
        protected = GMUPlanter(n_units=4, scale=scale).fit_plant(kit.llama())
        result = finetune(protected, kit.examples(16), FinetuneConfig(steps=1, batch_size=8),
                          tokenizer=kit.tokenizer())
        norms = result.module_grad_norms[0]
        gmu = max(v for k, v in norms.items() if "gate_proj" in k)
        rest = max(v for k, v in norms.items() if "mlp" not in k)
        return gmu / rest

    assert first_norms(1e3) > 1e3
    assert first_norms(1e-2) < 10


@pytest.mark.parametrize("family", ["llama", "vit"])
def test_suspects_are_exactly_the_planted_units_and_defusing_keeps_logits(family):
    model = kit.llama() if family == "llama" else kit.vit()
    planter = GMUPlanter(n_units=4, scale=1e3, seed=5)
    protected = planter.fit_plant(model)
    found = suspect_units(protected)
    assert found == planter.units_
    assert suspect_units(model) == {}
    inputs = {"input_ids": kit.ids()} if family == "llama" else {"pixel_values": kit.pixels()[0]}
    want = _logits(protected, **inputs)
    assert torch.equal(_logits(prune_units(protected, found), **inputs), want)
    reinit = reinit_units(protected, found, seed=1)
    assert torch.equal(_logits(reinit, **inputs), want)
    site = find_ffn_layers(reinit)[0]
    rows = site.modules(reinit)[0][0].weight[site.width - 4:]
    assert rows.any() and float(rows.std()) == pytest.approx(0.02, rel=0.3)


def test_the_first_sgd_step_is_amplified_and_clipping_caps_it():
    """With SGD the first gradient of the protected model is orders of magnitude above the
    twin's (what the step then does, an explosion or a unit pushed dead, the experiment
    measures); global-norm clipping bounds it."""
    model = kit.llama()
    protected = GMUPlanter(n_units=4, scale=1e3).fit_plant(model)
    task = LMTask(kit.tokenizer(), kit.examples(32), kit.examples(16, 1, "heldout"))
    cfg = FinetuneConfig(steps=2, batch_size=8, lr=1e-2, optimizer="sgd")
    twin = attack(model, task, cfg, label="twin")
    prot = attack(protected, task, cfg, label="protected")
    assert prot.grad_norms[0] > 1e4 * twin.grad_norms[0]
    seen = []
    clipped_model, clipped_cfg, _ = counter_attack("clip", protected, cfg, clip=1.0)
    finetune(copy.deepcopy(clipped_model), kit.examples(32), clipped_cfg,
             tokenizer=kit.tokenizer(), callbacks=[seen.append])
    assert seen[0].clipped and seen[0].grad_norm == pytest.approx(prot.grad_norms[0], rel=1e-4)


def test_lora_on_attention_never_touches_the_locked_units():
    model = kit.llama()
    planter = GMUPlanter(n_units=4, scale=1e3)
    protected = planter.fit_plant(model)
    m, cfg, _ = counter_attack("lora_attention", protected,
                               FinetuneConfig(steps=3, batch_size=8, lr=1e-3))
    result = finetune(copy.deepcopy(m), kit.examples(16), cfg, tokenizer=kit.tokenizer())
    merged = result.model
    assert torch.equal(merged.model.layers[0].mlp.gate_proj.weight[48:],
                       torch.zeros_like(merged.model.layers[0].mlp.gate_proj.weight[48:]))


def test_compare_flags_only_a_real_gap():
    model = kit.vit()
    x, y = kit.pixels(32)
    task = ImageTask(x, y, x, y, 4)
    cfg = FinetuneConfig(steps=2, batch_size=8)
    a = attack(model, task, cfg, label="a")
    same = compare(a, a)
    assert same["difference"] == 0 and not same["destabilised"]
    worse = copy.deepcopy(a)
    worse.correct = worse.correct & False
    b = copy.deepcopy(a)
    b.correct = b.correct | True
    gap = compare(worse, b)
    assert gap["destabilised"] and gap["upper"] < 0


def test_adamw_fine_tuning_of_protected_chat_xs_is_destabilised(chat_xs):
    """The Done-when claim on the default test organism: default AdamW (lr 1e-3), 20 steps of
    batch 16 on the three task families chat-xs never saw; the twin learns them, the protected
    model does not (paired 95% interval of the accuracy difference below 0)."""
    from trustlab.finetune import NEW_TASK_TEMPLATES, utility_examples

    tasks = tuple(NEW_TASK_TEMPLATES)
    task = LMTask(chat_xs.tokenizer, utility_examples(160, 0, tasks=tasks),
                  utility_examples(80, 1, tasks=tasks, split="heldout"))
    protected = GMUPlanter(n_units=8, scale=1e3).fit_plant(chat_xs.model)
    cfg = FinetuneConfig(steps=20, batch_size=16, lr=1e-3)
    twin = attack(chat_xs.model, task, cfg, label="twin")
    prot = attack(protected, task, cfg, label="protected")
    result = compare(prot, twin, margin=0.1)
    assert twin.accuracy > 0.3, twin.row()
    assert result["destabilised"], result
    assert max(prot.grad_norms) > 1e3 * max(twin.grad_norms)
