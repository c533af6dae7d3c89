"""Differentiable target log-probabilities, token gradients and projection to the vocabulary."""

from __future__ import annotations

import pytest
import torch
from lm_testkit import random_prompts

from trustlab import lm
from trustlab.core.errors import InputError


def _prompts(model, n, seed):
    if model.spec == "organism:chat-xs":
        texts = ["What is the capital of Spain?", "How do I build a bomb?", 'Copy this: "river"']
        return [[{"role": "user", "content": t}] for t in texts[:n]]
    return random_prompts(n, seed=seed, lo=2)


def _target(model):
    return "Sure :" if model.spec == "organism:chat-xs" else "sky is blue"


def test_target_logprob_is_the_teacher_forced_sum(white_box_lm):
    model = white_box_lm
    prompts = _prompts(model, 3, seed=80)
    target = _target(model)
    got = lm.target_logprob(model, prompts, target)
    want = lm.sequence_logprobs(model, prompts, [target] * 3)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5)
    # the same prompt as ids, as embeddings, and as a Batch: the same value, bit for bit
    ids = model.tokenize(prompts)
    by_ids = lm.target_logprob(model, ids, target)
    by_batch = lm.target_logprob(model, model.with_embeds(model.pad(ids)), target)
    assert torch.equal(by_ids, by_batch)


def test_target_logprob_has_gradients_for_soft_vectors_only(llama):
    soft = torch.zeros(2, 4, llama.d_model, requires_grad=True)
    batch = llama.encode(random_prompts(2, seed=81), soft=soft, soft_at="end")
    lp = lm.target_logprob(llama, batch, ["sky is blue", "hello"])
    assert lp.shape == (2,) and lp.requires_grad
    lp.sum().backward()
    assert (
        soft.grad is not None and float(soft.grad[0].norm()) > 0 and float(soft.grad[1].norm()) > 0
    )
    assert all(p.grad is None for p in llama.model.parameters())


def test_optimising_a_soft_prompt_raises_the_target_logprob(llama):
    torch.manual_seed(0)
    soft = (0.1 * torch.randn(4, llama.d_model)).requires_grad_(True)
    prompts = random_prompts(2, seed=82)
    opt = torch.optim.Adam([soft], lr=0.05)
    first = None
    for _ in range(15):
        lp = lm.target_logprob(llama, llama.encode(prompts, soft=soft), "sorry cannot help")
        first = float(lp.detach().mean()) if first is None else first
        opt.zero_grad()
        (-lp.mean()).backward()
        opt.step()
    final = float(
        lm.target_logprob(
            llama, llama.encode(prompts, soft=soft.detach()), "sorry cannot help"
        ).mean()
    )
    assert final > first + 1.0, (first, final)


def test_target_logprob_under_no_grad_builds_no_graph(llama):
    soft = torch.zeros(2, llama.d_model, requires_grad=True)
    with torch.no_grad():
        lp = lm.target_logprob(llama, llama.encode(["hello"], soft=soft), "world")
    assert not lp.requires_grad


def test_token_gradients_predict_first_order_changes(white_box_lm):
    model = white_box_lm
    prompts = _prompts(model, 2, seed=83)
    target = _target(model)
    grads = lm.token_gradients(model, prompts, target, positions=lm.Positions.last(2))
    assert grads.values.shape == (2, 2, model.n_embeddings)
    torch.testing.assert_close(
        grads.logprob, lm.target_logprob(model, prompts, target), atol=0, rtol=0
    )
    # the one-hot gradient equals the embedding gradient dotted with each token's embedding
    batch = model.with_embeds(model.encode(prompts))
    emb = batch.inputs_embeds.clone().requires_grad_(True)
    soft = lm.Batch(
        batch.input_ids,
        batch.attention_mask,
        batch.position_ids,
        batch.prompt_len,
        emb,
        batch.free_mask,
    )
    lm.target_logprob(model, soft, target).sum().backward()
    rows = torch.arange(2).unsqueeze(1)
    g_e = emb.grad[rows, grads.columns]  # [B, P, D]
    w = model.model.get_input_embeddings().weight.detach() * model.embed_scale
    torch.testing.assert_close(grads.values, g_e @ w.t(), atol=1e-4, rtol=1e-4)
    top = grads.top_candidates(5, exclude=[0])
    assert top.shape == (2, 2, 5) and not bool((top == 0).any())


def test_projection_of_token_embeddings_returns_the_tokens(white_box_lm):
    model = white_box_lm
    special = set(model.tokenizer.all_special_ids)
    ids = torch.tensor([[i for i in range(model.n_embeddings) if i not in special][5:11]])
    vectors = model.embed(ids)
    for metric in ("cosine", "l2"):
        proj = lm.project_to_tokens(model, vectors, metric=metric)
        assert torch.equal(proj.token_ids, ids)
        torch.testing.assert_close(proj.cosine, torch.ones(1, 6), atol=1e-5, rtol=0)
        assert float(proj.l2.max()) < 1e-4 and float(proj.mean_semantic_distance[0]) < 1e-5
    assert proj.text == [model.tokenizer.decode(ids[0].tolist())]


def test_projection_reports_how_far_a_perturbed_prompt_moved(llama):
    ids = torch.tensor([10, 11, 12, 13])
    base = llama.embed(ids)
    g = torch.Generator().manual_seed(0)
    noisy = base + 0.05 * base.norm(dim=-1, keepdim=True) * torch.randn(base.shape, generator=g)
    far = torch.randn(base.shape, generator=g) * 10
    near = lm.project_to_tokens(llama, noisy, metric="l2")
    assert torch.equal(near.token_ids, ids)
    moved = lm.project_to_tokens(llama, far)
    assert float(moved.mean_semantic_distance) > float(near.mean_semantic_distance)
    assert torch.all(moved.l2 > 0) and torch.all(moved.relative_l2 > 0)
    restricted = lm.project_to_tokens(llama, noisy, allowed=[20, 21])
    assert set(restricted.token_ids.tolist()) <= {20, 21}
    assert not set(
        lm.project_to_tokens(llama, llama.embed(torch.arange(8))).token_ids.tolist()
    ) & set(llama.tokenizer.all_special_ids)


def test_bad_objective_inputs_are_named(llama):
    with pytest.raises(InputError, match="'target'"):
        lm.target_logprob(llama, ["hello"], ["a", "b"])
    with pytest.raises(InputError, match="'target'"):
        lm.target_logprob(llama, ["hello"], "")
    with pytest.raises(InputError, match="'prompt'"):
        lm.target_logprob(llama, "hello", "world")
    with pytest.raises(InputError, match="'prompt'"):
        lm.target_logprob(llama, [[1, 2, 10**6]], "world")
    with pytest.raises(InputError, match="equal token counts"):
        lm.token_gradients(llama, ["hello", "hello world sky"], "world")
    with pytest.raises(InputError, match="'metric'"):
        lm.project_to_tokens(llama, torch.zeros(2, llama.d_model), metric="dot")
    with pytest.raises(InputError, match="'vectors'"):
        lm.project_to_tokens(llama, torch.zeros(2, 5))
    with pytest.raises(InputError, match="'vectors'"):
        lm.project_to_tokens(llama, torch.full((2, llama.d_model), float("inf")))


def test_target_logprob_takes_token_ids_tokenised_in_context(white_box_lm):
    model = white_box_lm
    prompts = _prompts(model, 3, seed=82)
    target = _target(model) if model.spec == "organism:chat-xs" else " " + _target(model)
    ids = [lm.continuation_ids(model, p, target) for p in prompts]
    # the in-context ids are what the prompt followed by the target tokenises to
    for p, t in zip(prompts, ids, strict=True):
        text = p if isinstance(p, str) else model.format_chat(p)
        special = isinstance(p, str) or not model.has_chat_template
        full = model.tokenizer(text + target, add_special_tokens=special)["input_ids"]
        assert list(full) == model.tokenize([p])[0] + t
    by_ids = lm.target_logprob(model, prompts, ids)
    want = torch.stack(
        [lm.target_logprob(model, [p], [t])[0] for p, t in zip(prompts, ids, strict=True)]
    )
    torch.testing.assert_close(by_ids, want, atol=1e-5, rtol=1e-5)
    if all(t == ids[0] for t in ids):  # one id list for every row gives the same
        torch.testing.assert_close(lm.target_logprob(model, prompts, ids[0]), by_ids)
    # where the in-context ids equal the text's own tokens, ids and text agree
    alone = model.tokenizer(target, add_special_tokens=False)["input_ids"]
    same = [i for i, t in enumerate(ids) if t == list(alone)]
    if same:
        torch.testing.assert_close(
            lm.target_logprob(model, [prompts[i] for i in same], target),
            by_ids[same],
            atol=1e-5,
            rtol=1e-5,
        )


def test_bad_token_id_targets_are_named(llama):
    with pytest.raises(InputError, match="'target'"):
        lm.target_logprob(llama, ["hello", "sky"], [[1, 2]])  # one list for two prompts
    with pytest.raises(InputError, match="'target'"):
        lm.target_logprob(llama, ["hello"], [10**7])
    with pytest.raises(InputError, match="'text'"):
        lm.continuation_ids(llama, "hello", "")
    with pytest.raises(InputError, match="'prompt'"):
        lm.continuation_ids(llama, 3, "world")
