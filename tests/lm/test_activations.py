"""Activation capture: shapes, padding-awareness, batch invariance, positions."""

from __future__ import annotations

import pytest
import torch
from lm_testkit import random_prompts

from trustlab import lm
from trustlab.core.errors import InputError


def test_shape_and_dtype(any_lm):
    prompts = random_prompts(5, seed=20)
    sites = ["embed", *any_lm.sites("resid_post")]
    acts = lm.get_activations(any_lm, prompts, sites, lm.Positions.last(2))
    assert acts.shape == (5, 1 + any_lm.n_layers, 2, any_lm.d_model)
    assert acts.dtype == torch.float32 and acts.device.type == "cpu"
    assert torch.isfinite(acts).all()


def test_left_and_right_padding_agree_at_last(any_lm):
    prompts = random_prompts(8, seed=21, lo=1, hi=14)
    sites = any_lm.sites("resid_post")
    left = lm.get_activations(any_lm, prompts, sites, "last", batch_size=8, padding_side="left")
    right = lm.get_activations(any_lm, prompts, sites, "last", batch_size=8, padding_side="right")
    torch.testing.assert_close(left, right, atol=1e-5, rtol=1e-5)


def test_batched_equals_unbatched(any_lm):
    prompts = random_prompts(7, seed=22, lo=1, hi=14)
    sites = ["embed", *any_lm.sites("resid_pre"), *any_lm.sites("mlp_out")]
    pos = lm.Positions.at([0, -1])
    batched = lm.get_activations(any_lm, prompts, sites, pos, batch_size=4)
    single = torch.cat([lm.get_activations(any_lm, [p], sites, pos) for p in prompts])
    torch.testing.assert_close(batched, single, atol=1e-5, rtol=1e-5)


def test_explicit_indices_count_real_tokens(llama):
    prompts = ["hello world", "hello world sky is blue"]
    acts = lm.get_activations(llama, prompts, "embed", lm.Positions.at([0, 1, -1]))
    emb = llama.model.get_input_embeddings().weight.detach()
    ids = llama.tokenize(prompts)
    for row, toks in enumerate(ids):
        expected = emb[[toks[0], toks[1], toks[-1]]]
        torch.testing.assert_close(acts[row, 0], expected, atol=0, rtol=0)


def test_post_instruction_positions_are_the_template_suffix(llama):
    convs = [[{"role": "user", "content": p}] for p in random_prompts(4, seed=23)]
    n_post = llama.n_post_instruction_tokens
    post = lm.get_activations(llama, convs, llama.sites("resid_pre"), "post_instruction")
    last = lm.get_activations(llama, convs, llama.sites("resid_pre"), lm.Positions.last(n_post))
    assert torch.equal(post, last)
    # the suffix tokens are the same for every prompt: embeddings match across prompts
    emb = lm.get_activations(llama, convs, "embed", "post_instruction")
    assert torch.equal(emb[0], emb[3])


def test_positions_outside_a_prompt_are_an_error(llama):
    with pytest.raises(InputError, match="outside"):
        lm.get_activations(llama, ["hello"], "embed", lm.Positions.at([5]))
    with pytest.raises(InputError, match="fixed number"):
        lm.get_activations(llama, ["hello"], "embed", "all")


def test_progress_callback_sees_every_batch(llama):
    seen = []

    def progress(items, description="", total=None):
        seen.append((description, total))
        yield from items

    lm.get_activations(llama, random_prompts(5), "embed", batch_size=2, progress=progress)
    assert seen == [("activations", 3)]


def test_capture_stops_early_but_interventions_still_apply(llama):
    prompts = random_prompts(3, seed=24)
    v = torch.randn(llama.d_model)
    base = lm.get_activations(llama, prompts, "blocks.0.resid_post")
    with lm.add_vector(llama, v, "embed"):
        moved = lm.get_activations(llama, prompts, "blocks.0.resid_post")
    assert not torch.allclose(base, moved)


def test_token_activations_cover_every_prompt_token(llama):
    prompts = random_prompts(5, seed=25)
    got = lm.token_activations(llama, prompts, ["blocks.1.resid_post"], batch_size=2)
    lengths = [len(t) for t in llama.tokenize(prompts)]
    assert got.acts.shape == (sum(lengths), 1, llama.d_model)
    assert got.prompt_index.tolist() == [i for i, n in enumerate(lengths) for _ in range(n)]
    assert got.token_ids.tolist() == [t for toks in llama.tokenize(prompts) for t in toks]
    last = lm.get_activations(llama, prompts, ["blocks.1.resid_post"], "last")
    ends = torch.tensor(lengths).cumsum(0) - 1
    torch.testing.assert_close(got.acts[ends], last[:, :, 0], atol=1e-5, rtol=1e-5)
