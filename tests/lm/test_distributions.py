"""Distances between categoricals and distributions read from the model."""

from __future__ import annotations

import math

import pytest
import torch
from lm_testkit import random_prompts

from trustlab import lm
from trustlab.core.errors import InputError


def _random_dists(n, k, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(n, k, generator=g, dtype=torch.float64) * 3, -1)


def test_fisher_rao_properties():
    p, q = _random_dists(50, 7, 0), _random_dists(50, 7, 1)
    d = lm.fisher_rao(p, q)
    assert torch.all(lm.fisher_rao(p, p) == 0)
    torch.testing.assert_close(d, lm.fisher_rao(q, p), atol=0, rtol=0)
    assert torch.all((d > 0) & (d <= math.pi))
    naive = 2 * torch.arccos((p * q).sqrt().sum(-1).clamp(max=1.0))
    torch.testing.assert_close(d, naive, atol=1e-12, rtol=1e-9)
    r = _random_dists(50, 7, 2)
    assert torch.all(lm.fisher_rao(p, r) <= d + lm.fisher_rao(q, r) + 1e-12)  # a metric


@pytest.mark.parametrize(("a", "b"), [(0.5, 0.5), (0.1, 0.9), (0.0, 1.0), (0.3, 0.31)])
def test_fisher_rao_two_point_closed_form(a, b):
    p = torch.tensor([a, 1 - a], dtype=torch.float64)
    q = torch.tensor([b, 1 - b], dtype=torch.float64)
    expected = 2 * math.acos(math.sqrt(a * b) + math.sqrt((1 - a) * (1 - b)))
    assert float(lm.fisher_rao(p, q)) == pytest.approx(expected, abs=1e-12)


def test_fisher_rao_is_exact_near_zero_and_for_disjoint_supports():
    eps = 1e-30
    p = torch.tensor([1 - eps, eps], dtype=torch.float64)
    q = torch.tensor([1.0, 0.0], dtype=torch.float64)
    assert float(lm.fisher_rao(p, q)) == pytest.approx(2 * math.sqrt(eps), rel=1e-9)
    assert float(lm.fisher_rao(torch.tensor([1.0, 0]), torch.tensor([0, 1.0]))) == pytest.approx(
        math.pi
    )
    logp = torch.log_softmax(torch.tensor([0.0, -80.0, -200.0], dtype=torch.float64), -1)
    logq = torch.log_softmax(torch.tensor([0.0, -82.0, -200.0], dtype=torch.float64), -1)
    d = float(lm.fisher_rao(logp, logq, log=True))
    expected = 2 * abs(math.exp(-40.0) - math.exp(-41.0))  # dominated by the second entry
    assert d == pytest.approx(expected, rel=1e-6)


def test_kl_and_tv():
    p, q = _random_dists(20, 5, 3), _random_dists(20, 5, 4)
    ref = torch.distributions.kl_divergence(
        torch.distributions.Categorical(probs=p), torch.distributions.Categorical(probs=q)
    )
    torch.testing.assert_close(lm.kl_divergence(p, q), ref, atol=1e-12, rtol=1e-9)
    torch.testing.assert_close(lm.kl_divergence(p.log(), q.log(), log=True), ref)
    assert torch.all(lm.kl_divergence(p, p) == 0)
    zero = torch.tensor([0.5, 0.5, 0.0])
    assert float(lm.kl_divergence(zero, torch.tensor([0.25, 0.25, 0.5]))) == pytest.approx(
        math.log(2)
    )
    assert math.isinf(float(lm.kl_divergence(torch.tensor([0.5, 0.5]), torch.tensor([1.0, 0]))))
    tv = lm.total_variation(p, q)
    torch.testing.assert_close(tv, 0.5 * (p - q).abs().sum(-1))
    assert torch.all((tv >= 0) & (tv <= 1))
    # Pinsker and the Hellinger bounds tie the three together
    assert torch.all(tv <= torch.sqrt(lm.kl_divergence(p, q) / 2) + 1e-12)
    hell2 = 1 - torch.cos(lm.fisher_rao(p, q) / 2)
    assert torch.all(hell2 <= tv + 1e-12)


@pytest.mark.parametrize(
    ("p", "q"),
    [([0.5, 0.6], [0.5, 0.5]), ([-0.1, 1.1], [0.5, 0.5]), ([0.5, 0.5], [0.3, 0.3, 0.4])],
)
def test_distances_reject_non_distributions(p, q):
    with pytest.raises(InputError):
        lm.fisher_rao(torch.tensor(p), torch.tensor(q))


def test_next_token_logprobs_match_the_forward_pass(any_lm):
    prompts = random_prompts(6, seed=30, lo=1)
    logp = lm.next_token_logprobs(any_lm, prompts, batch_size=4)
    assert logp.shape == (6, any_lm.vocab_size)
    torch.testing.assert_close(logp.exp().sum(-1), torch.ones(6), atol=1e-5, rtol=0)
    for i, p in enumerate(prompts):
        logits = any_lm.forward(any_lm.encode([p]))[0, -1]
        torch.testing.assert_close(logp[i], torch.log_softmax(logits, -1), atol=1e-5, rtol=1e-5)


def test_sequence_logprobs_are_teacher_forced_sums(llama):
    prompts = random_prompts(4, seed=31)
    conts = ["sky is blue", "hello", "run the code", "sorry cannot help"]
    total = lm.sequence_logprobs(llama, prompts, conts, batch_size=3)
    per_token = lm.sequence_logprobs(llama, prompts, conts, per_token=True)
    for i, (p, c) in enumerate(zip(prompts, conts, strict=True)):
        ids = llama.tokenize([p])[0] + llama.tokenizer(c, add_special_tokens=False)["input_ids"]
        logp = torch.log_softmax(llama.forward(llama.pad([ids]))[0], -1)
        n = len(llama.tokenizer(c, add_special_tokens=False)["input_ids"])
        manual = sum(float(logp[len(ids) - n - 1 + j, ids[len(ids) - n + j]]) for j in range(n))
        assert float(total[i]) == pytest.approx(manual, abs=1e-4)
        assert len(per_token[i]) == n


def test_distributions_respond_to_interventions(llama):
    prompts = random_prompts(4, seed=32)
    base = lm.next_token_probs(llama, prompts)
    with lm.add_vector(llama, torch.zeros(llama.d_model), llama.sites("resid_pre")):
        same = lm.next_token_probs(llama, prompts)
    assert torch.all(lm.fisher_rao(base, same) == 0)
    with lm.add_vector(llama, torch.randn(llama.d_model) * 4, llama.sites("resid_pre")):
        moved = lm.next_token_probs(llama, prompts)
    assert torch.all(lm.fisher_rao(base, moved) > 1e-3)
