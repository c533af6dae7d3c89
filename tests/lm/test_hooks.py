"""Exactness of hooks and interventions: they do what they say and nothing else."""

from __future__ import annotations

import pytest
import torch
from lm_testkit import build_model, make_tokenizer, random_prompts

from trustlab import lm
from trustlab.core.errors import InputError

FAMILIES = ["llama", "gpt2", "qwen2", "gpt_neox", "gemma2", "phi3"]


def _all_sites(model: lm.LanguageModel) -> list[str]:
    return [
        "embed",
        *[s for k in ("resid_pre", "attn_out", "mlp_out", "resid_post") for s in model.sites(k)],
    ]


def _n_hooks(model: lm.LanguageModel) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.model.modules())


@pytest.fixture(scope="module")
def family_models():
    return {f: lm.LanguageModel(build_model(f, seed=3), make_tokenizer(None)) for f in FAMILIES}


@pytest.mark.parametrize("family", FAMILIES)
def test_sites_add_up_to_the_residual_stream(family_models, family):
    """resid_post = resid_pre + attn_out + mlp_out: the adapter names the terms really added."""
    model = family_models[family]
    prompts = random_prompts(4, seed=1)
    acts = lm.get_activations(model, prompts, _all_sites(model), positions=lm.Positions.last(3))
    n = model.n_layers
    pre, attn, mlp, post = (acts[:, 1 + i * n : 1 + (i + 1) * n] for i in range(4))
    torch.testing.assert_close(post, pre + attn + mlp, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(pre[:, 1:], post[:, :-1], atol=0, rtol=0)
    torch.testing.assert_close(acts[:, 0], pre[:, 0], atol=0, rtol=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_capture_matches_hf_hidden_states(family_models, family):
    model = family_models[family]
    batch = model.encode(random_prompts(3, seed=2))
    with torch.no_grad():
        out = model.model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=batch.position_ids,
            output_hidden_states=True,
        )
    hidden = out.hidden_states  # [embed-ish, after block 0, ..., final (normed)]
    seen = {}

    def keep(site, h, step):
        seen[site] = h.clone()

    with lm.hook(model, model.sites("resid_pre"), keep):
        model.forward(batch)
    for i in range(model.n_layers):
        torch.testing.assert_close(seen[f"blocks.{i}.resid_pre"], hidden[i], atol=0, rtol=0)


def test_hooked_forward_equals_plain_hf_forward(any_lm):
    batch = any_lm.encode(random_prompts(5, seed=4))
    with torch.no_grad():
        plain = any_lm.model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=batch.position_ids,
        ).logits
    with lm.hook(any_lm, _all_sites(any_lm), lambda site, h, step: None):
        hooked = any_lm.forward(batch)
    assert torch.equal(hooked, plain)


def test_zero_vector_addition_is_bit_identical(any_lm):
    batch = any_lm.encode(random_prompts(5, seed=5))
    plain = any_lm.forward(batch)
    zero = torch.zeros(any_lm.d_model)
    for positions in ("all", "last", lm.Positions.at([0, -2])):
        with lm.add_vector(any_lm, zero, _all_sites(any_lm), alpha=3.0, positions=positions):
            assert torch.equal(any_lm.forward(batch), plain)


def test_ablation_empties_the_direction_at_every_site(any_lm):
    prompts = random_prompts(6, seed=6)
    sites = _all_sites(any_lm)
    direction = torch.randn(any_lm.d_model, generator=torch.Generator().manual_seed(0))
    unit = direction / direction.norm()
    before = lm.get_activations(any_lm, prompts, sites, lm.Positions.at([0, 1, -1]))
    with lm.ablate_direction(any_lm, direction * 7.0):
        after = lm.get_activations(any_lm, prompts, sites, lm.Positions.at([0, 1, -1]))
    scale = after.norm(dim=-1).clamp_min(1e-3)
    assert ((after @ unit).abs() / scale).max() < 1e-5
    assert ((before @ unit).abs() / before.norm(dim=-1)).max() > 1e-2  # it was there before


def test_hooks_are_removed_when_the_body_raises(any_lm):
    baseline = _n_hooks(any_lm)
    batch = any_lm.encode(["hello world"])
    with (
        pytest.raises(RuntimeError, match="boom"),
        lm.intervene(
            any_lm,
            lm.AddVector(torch.ones(any_lm.d_model), any_lm.sites("resid_pre")),
            lm.AblateDirection(torch.ones(any_lm.d_model)),
        ),
        lm.capture(any_lm, any_lm.sites("resid_post")),
    ):
        assert _n_hooks(any_lm) > baseline
        any_lm.forward(batch)
        raise RuntimeError("boom")
    assert _n_hooks(any_lm) == baseline
    assert lm.hooks.runtime_of(any_lm).state is None


def test_bad_hook_arguments_register_nothing(llama):
    baseline = _n_hooks(llama)
    with (
        pytest.raises(InputError),
        lm.add_vector(
            llama, torch.zeros(llama.d_model), ["blocks.0.resid_pre", "blocks.9.resid_pre"]
        ),
    ):
        pass
    with pytest.raises(InputError), lm.add_vector(llama, torch.zeros(5), "blocks.0.resid_pre"):
        pass
    with pytest.raises(InputError), lm.ablate_direction(llama, torch.zeros(llama.d_model)):
        pass
    assert _n_hooks(llama) == baseline


def test_addition_at_last_position_leaves_earlier_logits_alone(llama):
    prompts = random_prompts(4, seed=7, lo=4)
    batch = llama.encode(prompts)
    plain = llama.forward(batch)
    v = torch.randn(llama.d_model) * 5
    with lm.add_vector(llama, v, "blocks.1.resid_pre", positions="last"):
        steered = llama.forward(batch)
    assert torch.equal(steered[:, :-1], plain[:, :-1])  # causal: earlier tokens untouched
    assert not torch.allclose(steered[:, -1], plain[:, -1])
    got = lm.get_activations(llama, prompts, "blocks.1.resid_pre", lm.Positions.last(2))
    with lm.add_vector(llama, v, "blocks.1.resid_pre", positions="last"):
        moved = lm.get_activations(llama, prompts, "blocks.1.resid_pre", lm.Positions.last(2))
    torch.testing.assert_close(moved[:, 0, 1] - got[:, 0, 1], v.expand(4, -1), atol=1e-5, rtol=0)
    torch.testing.assert_close(moved[:, 0, 0], got[:, 0, 0], atol=0, rtol=0)


def test_clamp_sets_the_projection(llama):
    prompts = random_prompts(3, seed=8)
    r = torch.randn(llama.d_model)
    unit = r / r.norm()
    sites = llama.sites("resid_post")
    with lm.clamp_projection(llama, r, 2.5, sites):
        acts = lm.get_activations(llama, prompts, sites, lm.Positions.last(2))
    torch.testing.assert_close(acts @ unit, torch.full(acts.shape[:-1], 2.5), atol=1e-5, rtol=0)


def test_replace_activation_patches_a_clean_run(llama):
    clean, corrupt = random_prompts(3, seed=9, lo=5), random_prompts(3, seed=10, lo=5)
    site = "blocks.1.resid_post"
    clean = [" ".join(p.split()[:5]) for p in clean]  # equal lengths: patch every token
    corrupt = [" ".join(p.split()[:5]) for p in corrupt]
    positions = lm.Positions.at(list(range(6)))
    clean_acts = lm.get_activations(llama, clean, site, positions)[:, 0]
    clean_logits = llama.forward(llama.encode(clean))
    with lm.replace_activation(llama, site, clean_acts, positions=positions):
        patched = llama.forward(llama.encode(corrupt))
    torch.testing.assert_close(patched, clean_logits, atol=1e-5, rtol=1e-5)


def test_interventions_compose_in_order(llama):
    prompts = random_prompts(3, seed=11)
    r = torch.randn(llama.d_model)
    unit = r / r.norm()
    site = "blocks.2.resid_pre"
    # add along r, then ablate r at the same site: the projection ends at zero
    with lm.add_vector(llama, 10 * unit, site), lm.ablate_direction(llama, r, site):
        acts = lm.get_activations(llama, prompts, site)
    assert (acts @ unit).abs().max() < 1e-4
    with lm.ablate_direction(llama, r, site), lm.add_vector(llama, 10 * unit, site):
        acts = lm.get_activations(llama, prompts, site)
    torch.testing.assert_close(acts @ unit, torch.full(acts.shape[:-1], 10.0), atol=1e-4, rtol=0)


def test_prompt_positions_act_only_in_the_prefill_during_generation(llama):
    chat = lm.HFChatModel(llama, batch_size=4)
    prompts = random_prompts(4, seed=12)
    plain = chat.generate(prompts, max_new_tokens=6)
    counts = {"prefill": 0, "steps": 0}

    def spy(site, h, step):
        mask = step.edit_mask(lm.Positions.last())
        key = "prefill" if step.offset == 0 else "steps"
        counts[key] += int(mask.sum())

    with lm.hook(llama, "blocks.0.resid_pre", spy):
        again = chat.generate(prompts, max_new_tokens=6)
    assert again == plain
    assert counts == {"prefill": 4, "steps": 0}
    generated = {"n": 0}

    def spy_gen(site, h, step):
        generated["n"] += int(step.edit_mask(lm.Positions.generated()).sum())

    with lm.hook(llama, "blocks.0.resid_pre", spy_gen):
        replies = chat.generate(prompts, max_new_tokens=6)
    assert generated["n"] > 0 and len(replies) == 4


def test_interventions_are_differentiable(llama):
    batch = llama.encode(random_prompts(2, seed=13))
    v = torch.zeros(llama.d_model, requires_grad=True)
    with lm.add_vector(llama, v, "blocks.1.resid_pre"):
        loss = llama.forward(batch, grad=True)[:, -1].logsumexp(-1).sum()
    loss.backward()
    assert v.grad is not None and float(v.grad.norm()) > 0
