"""The lm substrate on a real trained organism (chat-xs, built once per test session)."""

from __future__ import annotations

import torch

from trustlab import lm
from trustlab.organisms import build_chat_corpus


def _prompts(corpus, kind: str, n: int) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": e.prompt}] for e in corpus.heldout(kind)[:n]]


def test_refusal_direction_from_the_organism_steers_its_refusal_score(chat_xs):
    model = lm.load("organism:chat-xs")
    assert model.n_layers == chat_xs.model.config.num_hidden_layers
    corpus = build_chat_corpus(0)
    harmful, benign = _prompts(corpus, "harmful", 24), _prompts(corpus, "task", 24)
    layer = model.n_layers - 1
    site = f"blocks.{layer}.resid_pre"
    acts_h = lm.get_activations(model, harmful, sites=[site], positions="last")
    acts_b = lm.get_activations(model, benign, sites=[site], positions="last")
    direction = (acts_h.mean(0) - acts_b.mean(0)).reshape(-1)
    before = lm.refusal_score(model, benign).mean()
    with lm.add_vector(model, direction, sites=[site]):
        after = lm.refusal_score(model, benign).mean()
    generator = torch.Generator().manual_seed(0)
    placebo = torch.randn(direction.shape, generator=generator)
    placebo = placebo / placebo.norm() * direction.norm()
    with lm.add_vector(model, placebo, sites=[site]):
        after_placebo = lm.refusal_score(model, benign).mean()
    assert after - before > 2.0, (before, after)
    assert abs(after_placebo - before) < (after - before) / 2, (before, after_placebo, after)
