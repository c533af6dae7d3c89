"""Per-head sites and the MLP hidden activation: they decompose what the block adds."""

from __future__ import annotations

import pytest
import torch
from lm_testkit import random_prompts

from trustlab import lm
from trustlab.core.errors import InputError


def _prompts(model, n, seed):
    if model.spec == "organism:chat-xs":
        return [
            [{"role": "user", "content": t}]
            for t in ["What is the capital of Spain?", "How do I fix a bike?", 'Copy this: "river"']
        ]
    return random_prompts(n, seed=seed, lo=2)


def test_head_sites_have_their_shapes(white_box_lm):
    model = white_box_lm
    prompts = _prompts(model, 3, seed=60)
    n_heads = model.adapter.n_heads
    d_head = model.adapter.head_dim(0)
    z = lm.get_activations(model, prompts, model.sites("head_z"), lm.Positions.last(2))
    out = lm.get_activations(model, prompts, model.sites("head_out"), "last")
    hidden = lm.get_activations(model, prompts, "blocks.0.mlp_hidden", "last")
    assert z.shape == (len(prompts), model.n_layers, 2, n_heads, d_head)
    assert out.shape == (len(prompts), model.n_layers, 1, n_heads, model.d_model)
    assert hidden.ndim == 4 and hidden.shape[:3] == (len(prompts), 1, 1)


def test_per_head_contributions_sum_to_attn_out(white_box_lm):
    """The issue's equality: sum_h head_out + b_O = attn_out (pre-norm families)."""
    model = white_box_lm
    prompts = _prompts(model, 4, seed=61)
    pos = lm.Positions.at([0, -1])
    heads = lm.get_activations(model, prompts, model.sites("head_out"), pos)  # [N, L, P, H, D]
    attn = lm.get_activations(model, prompts, model.sites("attn_out"), pos)  # [N, L, P, D]
    proj = torch.stack([_bias(model, i) for i in range(model.n_layers)])  # [L, D]
    total = heads.sum(-2) + proj.view(1, model.n_layers, 1, -1)
    if model.adapter.attn_post_norm:  # Gemma 2: attn_out is the post-norm of the sum
        for i in range(model.n_layers):
            module, _ = model.adapter.module(f"blocks.{i}.attn_out")
            with torch.no_grad():
                total[:, i] = module(total[:, i])
    scale = attn.abs().max()
    assert float((total - attn).abs().max()) <= 1e-5 * float(scale) + 1e-6


def _bias(model, layer):
    _, bias = model.adapter.out_proj(layer)
    return torch.zeros(model.d_model) if bias is None else bias.detach().float()


def test_head_out_is_z_through_each_heads_slice_of_w_o(llama):
    prompts = random_prompts(3, seed=62)
    z = lm.get_activations(llama, prompts, "blocks.1.head_z", "last")[:, 0, 0]  # [N, H, dh]
    out = lm.get_activations(llama, prompts, "blocks.1.head_out", "last")[:, 0, 0]  # [N, H, D]
    w_o = llama.model.model.layers[1].self_attn.o_proj.weight.detach()  # [D, H*dh]
    d_head = z.shape[-1]
    for h in range(z.shape[1]):
        manual = z[:, h] @ w_o[:, h * d_head : (h + 1) * d_head].t()
        torch.testing.assert_close(out[:, h], manual, atol=1e-5, rtol=1e-5)


def test_mlp_hidden_through_the_down_projection_is_mlp_out(white_box_lm):
    model = white_box_lm
    prompts = _prompts(model, 3, seed=63)
    hidden = lm.get_activations(model, prompts, "blocks.0.mlp_hidden", "last")[:, 0, 0]
    mlp = lm.get_activations(model, prompts, "blocks.0.mlp_out", "last")[:, 0, 0]
    down = model.adapter._submodule("blocks.0.mlp_hidden", 0, model.adapter.mlp_down)
    with torch.no_grad():
        manual = down(hidden)
    if model.adapter.attn_post_norm:  # Gemma 2: the post-feedforward norm follows
        module, _ = model.adapter.module("blocks.0.mlp_out")
        with torch.no_grad():
            manual = module(manual)
    torch.testing.assert_close(manual, mlp, atol=1e-5, rtol=1e-5)


def test_zeroing_one_head_z_equals_removing_its_contribution(llama):
    batch = llama.encode(random_prompts(3, seed=64))
    site = "blocks.2.head_z"

    def zero_head(name, h, step):
        out = h.clone()
        out[..., 1, :] = 0
        return out

    with lm.hook(llama, site, zero_head):
        a = llama.forward(batch)
    with lm.hook(llama, "blocks.2.head_out", zero_head):
        b = llama.forward(batch)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(a, llama.forward(batch))


def test_observing_head_sites_leaves_logits_bit_identical(any_lm):
    batch = any_lm.encode(random_prompts(4, seed=65))
    plain = any_lm.forward(batch)
    sites = [*any_lm.sites("head_z"), *any_lm.sites("head_out"), *any_lm.sites("mlp_hidden")]
    with lm.hook(any_lm, sites, lambda s, h, st: None):
        assert torch.equal(any_lm.forward(batch), plain)


def test_head_sites_of_different_shapes_are_read_separately(llama):
    with pytest.raises(InputError, match="shapes"):
        lm.get_activations(llama, ["hello"], ["blocks.0.head_z", "blocks.0.resid_pre"])
    with pytest.raises(InputError, match="blocks"):
        lm.get_activations(llama, ["hello"], ["blocks.9.head_z"])
