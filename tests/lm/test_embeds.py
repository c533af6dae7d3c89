"""Embeddings as input: forward(embed(ids)) == forward(ids) bit for bit, on every family, and
the embeddings path through hooks, positions, activations and generation."""

from __future__ import annotations

import pytest
import torch
from lm_testkit import random_prompts

from trustlab import lm
from trustlab.core.errors import InputError


def _prompts(model: lm.LanguageModel, n: int, seed: int) -> list:
    if model.spec == "organism:chat-xs":
        words = [
            "What is the capital of France?",
            'Reverse these words: "apple river"',
            "How do I bake bread at home?",
            "Hello. What is 3 plus 4?",
            'Sort these digits: "3 1 2"',
            'Copy this: "stone"',
        ]
        return [[{"role": "user", "content": w}] for w in words[:n]]
    return random_prompts(n, seed=seed, lo=1, hi=12)


def test_forward_of_embedded_ids_is_bit_identical(white_box_lm):
    """The issue's equality: the token-id path and the embeddings path give the same bits."""
    model = white_box_lm
    batch = model.encode(_prompts(model, 6, seed=40))
    via_ids = model.forward(batch)
    via_embeds = model.forward(model.with_embeds(batch))
    assert torch.equal(via_ids, via_embeds)
    rows = [[t] for t in model.tokenize(_prompts(model, 6, seed=40))]
    assert torch.equal(model.forward(model.embed_batch(rows)), via_ids)  # pads embed the pad id


def test_embed_matches_the_embedding_module_and_validates_ids(white_box_lm):
    model = white_box_lm
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    got = model.embed(ids)
    assert got.shape == (2, 3, model.d_model) and not got.requires_grad
    assert torch.equal(got, model.model.get_input_embeddings()(ids).detach())
    assert torch.equal(model.embed([1, 2, 3]), got[0])
    torch.testing.assert_close(model.embedding_matrix()[ids], got, atol=1e-6, rtol=1e-6)
    for bad in ([-1], [model.n_embeddings], torch.tensor([0.5]), "text"):
        with pytest.raises(InputError, match="ids"):
            model.embed(bad)


def test_embeddings_path_reaches_hooks_positions_and_activations(white_box_lm):
    model = white_box_lm
    prompts = _prompts(model, 5, seed=41)
    batch = model.encode(prompts)
    sites = ["embed", *model.sites("resid_post"), *model.sites("attn_out")]
    pos = lm.Positions.at([0, -1])
    by_ids = lm.get_activations(model, prompts, sites, pos, batch_size=2)
    by_embeds = lm.get_activations(model, model.with_embeds(batch), sites, pos, batch_size=2)
    torch.testing.assert_close(by_embeds, by_ids, atol=1e-5, rtol=1e-5)
    tokens = lm.token_activations(model, model.with_embeds(batch), model.sites("resid_pre"))
    assert tokens.acts.shape[0] == int(batch.prompt_len.sum())
    # an intervention at "last" acts on the embeddings path exactly as on the ids path
    v = torch.randn(model.d_model, generator=torch.Generator().manual_seed(1))
    with lm.add_vector(model, v, "blocks.0.resid_post", positions="last"):
        a = model.forward(batch)
        b = model.forward(model.with_embeds(batch))
    assert torch.equal(a, b)


def test_soft_prefix_occupies_the_first_positions(llama):
    prompts = random_prompts(3, seed=42, lo=2, hi=6)
    soft = torch.randn(4, llama.d_model, generator=torch.Generator().manual_seed(0))
    batch = llama.encode(prompts, soft=soft)
    assert batch.inputs_embeds is not None and batch.free_mask is not None
    lengths = [len(t) for t in llama.tokenize(prompts)]
    assert batch.prompt_len.tolist() == [n + 4 for n in lengths]
    acts = lm.get_activations(llama, batch, "embed", lm.Positions.at([0, 1, 2, 3, 4]))
    torch.testing.assert_close(acts[:, 0, :4], soft.expand(3, -1, -1), atol=0, rtol=0)
    bos = llama.embed([llama.tokenize(prompts)[0][0]])[0]
    torch.testing.assert_close(acts[:, 0, 4], bos.expand(3, -1), atol=0, rtol=0)
    assert batch.free_mask.sum(1).tolist() == [4, 4, 4]


def test_soft_suffix_sits_before_the_post_instruction_tokens(llama):
    convs = [[{"role": "user", "content": p}] for p in random_prompts(3, seed=43)]
    soft = torch.randn(3, 2, llama.d_model, generator=torch.Generator().manual_seed(1))
    batch = llama.encode(convs, soft=soft, soft_at="instruction_end")
    n_post = llama.n_post_instruction_tokens
    ids = llama.tokenize(convs)
    for row in range(3):
        free_cols = batch.free_mask[row].nonzero().flatten()
        assert (batch.width - free_cols).tolist() == [n_post + 2, n_post + 1]
        torch.testing.assert_close(batch.inputs_embeds[row, free_cols], soft[row], atol=0, rtol=0)
        tail = batch.input_ids[row, batch.width - n_post :].tolist()
        assert tail == ids[row][-n_post:]
    # post_instruction positions still name the template's suffix
    post = lm.get_activations(llama, batch, "embed", "post_instruction")
    plain = lm.get_activations(llama, convs, "embed", "post_instruction")
    torch.testing.assert_close(post, plain, atol=0, rtol=0)


def test_gradients_flow_from_logits_to_soft_vectors_not_to_weights(llama):
    soft = torch.zeros(3, llama.d_model, requires_grad=True)
    batch = llama.encode(random_prompts(2, seed=44), soft=soft, soft_at="end")
    logits = llama.forward(batch, grad=True)
    logits[:, -1].logsumexp(-1).sum().backward()
    assert soft.grad is not None and float(soft.grad.norm()) > 0
    assert all(p.grad is None for p in llama.model.parameters())
    assert all(p.requires_grad for p in llama.model.parameters())  # restored


def test_generation_from_embeddings_equals_generation_from_ids(white_box_lm):
    """Through lm's KV-cached decoder: inputs_embeds of the prompts give the same replies."""
    from trustlab.lm.decoding import generate_rows

    model = white_box_lm
    prompts = _prompts(model, 4, seed=45)
    batch = model.encode(prompts)
    from_ids = generate_rows(model, prompts, max_new_tokens=6)
    from_embeds = generate_rows(
        model, None, inputs_embeds=model.embeds_rows(batch), max_new_tokens=6
    )
    assert from_ids == from_embeds
    rows = model.embeds_rows(model.with_embeds(batch))
    sampled = generate_rows(
        model, None, inputs_embeds=rows, max_new_tokens=4, temperature=1.0, seed=3
    )
    again = generate_rows(
        model, None, inputs_embeds=rows, max_new_tokens=4, temperature=1.0, seed=3
    )
    assert sampled == again


def test_generation_from_a_soft_prefix_sees_hooks_in_prefill_only(llama):
    from trustlab.lm.decoding import generate_rows

    soft = torch.randn(2, llama.d_model, generator=torch.Generator().manual_seed(2))
    batch = llama.encode(random_prompts(3, seed=46), soft=soft)
    seen = {"prefill": 0, "steps": 0, "generated": 0}

    def spy(site, h, step):
        key = "prefill" if step.offset == 0 else "steps"
        seen[key] += int(step.edit_mask(lm.Positions.last()).sum())
        seen["generated"] += int(step.edit_mask(lm.Positions.generated()).sum())

    rows = llama.embeds_rows(batch)
    assert [int(r.shape[0]) for r in rows] == batch.prompt_len.tolist()
    with lm.hook(llama, "blocks.1.resid_pre", spy):
        out = generate_rows(llama, None, inputs_embeds=rows, max_new_tokens=5)
    assert seen["prefill"] == 3 and seen["steps"] == 0 and seen["generated"] > 0
    assert len(out) == 3


def test_bad_soft_inputs_are_named(llama):
    prompts = random_prompts(2, seed=48)
    with pytest.raises(InputError, match="'soft'"):
        llama.encode(prompts, soft=torch.zeros(3, 7))
    with pytest.raises(InputError, match="'soft'"):
        llama.encode(prompts, soft=torch.zeros(5, 3, llama.d_model))
    with pytest.raises(InputError, match="'soft'"):
        llama.encode(prompts, soft=torch.full((2, llama.d_model), float("nan")))
    with pytest.raises(InputError, match="soft_at"):
        llama.encode(prompts, soft=torch.zeros(2, llama.d_model), soft_at="middle")
    with pytest.raises(InputError, match="rows"):
        llama.embed_batch([])
    with pytest.raises(InputError, match="empty"):
        llama.embed_batch([[]])
