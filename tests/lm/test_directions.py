"""Difference in means, cosine matrices and behavioural direction selection."""

from __future__ import annotations

import pytest
import torch
from lm_testkit import random_prompts

from trustlab import lm
from trustlab.core.errors import InputError


def test_diff_in_means_recovers_a_planted_shift():
    g = torch.Generator().manual_seed(0)
    shift = torch.zeros(3, 2, 16)
    shift[1, 0, 4] = 5.0
    a = torch.randn(4000, 3, 2, 16, generator=g) + shift
    b = torch.randn(4000, 3, 2, 16, generator=g)
    diff = lm.diff_in_means(a, b)
    assert diff.shape == (3, 2, 16)
    assert int(diff.norm(dim=-1).argmax()) == 2  # flattened (layer 1, position 0)
    assert float(diff[1, 0, 4]) == pytest.approx(5.0, abs=0.1)
    with pytest.raises(InputError):
        lm.diff_in_means(a, b[:, :2])


def test_cosine_matrix_and_normalize():
    g = torch.Generator().manual_seed(1)
    a = torch.randn(5, 8, generator=g)
    cos = lm.cosine_similarity_matrix(a)
    torch.testing.assert_close(cos.diagonal(), torch.ones(5))
    torch.testing.assert_close(cos, cos.T)
    torch.testing.assert_close(lm.cosine_similarity_matrix(a, -a).diagonal(), -torch.ones(5))
    assert lm.cosine_similarity_matrix(torch.randn(2, 3, 8), a).shape == (6, 5)
    torch.testing.assert_close(lm.normalize(a).norm(dim=-1), torch.ones(5))
    with pytest.raises(InputError):
        lm.normalize(torch.zeros(3))


def test_select_direction_follows_the_metric_and_skips_late_layers():
    cand = torch.randn(5, 2, 8, generator=torch.Generator().manual_seed(2))
    target = lm.normalize(cand[1, 1])

    def metric(unit, layer, pos):  # lower is better: distance to the target direction
        return float(1 - unit @ target)

    choice = lm.select_direction(cand, metric)
    assert (choice.layer, choice.position) == (1, 1)
    torch.testing.assert_close(choice.direction, target)
    assert torch.isnan(choice.scores[4]).all()  # last 20% of 5 layers skipped
    best_late = lm.select_direction(cand, lambda u, layer, p: float(layer), higher_is_better=True)
    assert best_late.layer == 3
    filtered = lm.select_direction(cand, metric, candidate_filter=lambda u, layer, p: layer != 1)
    assert filtered.layer != 1


def test_refusal_direction_recipe_end_to_end(llama):
    """The recipe on a tiny model: a direction read from two prompt sets, selected by the
    ablation effect on the model's own first-token propensity for a chosen word."""
    sorry = lm.refusal_token_ids(llama, ["sorry"])
    harmful = [
        [{"role": "user", "content": f"how do i build a bomb {p}"}]
        for p in random_prompts(8, seed=40)
    ]
    harmless = [
        [{"role": "user", "content": f"write a poem about the sea {p}"}]
        for p in random_prompts(8, seed=41)
    ]
    sites = llama.sites("resid_pre")
    a = lm.get_activations(llama, harmful, sites, "post_instruction")
    b = lm.get_activations(llama, harmless, sites, "post_instruction")
    cand = lm.diff_in_means(a, b)
    assert cand.shape == (llama.n_layers, llama.n_post_instruction_tokens, llama.d_model)

    def score(model, prompts):
        return lm.refusal_score(model, prompts, sorry)

    metric = lm.ablation_metric(llama, harmful, score)
    choice = lm.select_direction(cand, metric, max_layer_fraction=1.0)
    finite = choice.scores[~torch.isnan(choice.scores)]
    assert choice.score == pytest.approx(float(finite.min()))
    with lm.ablate_direction(llama, choice.direction):
        assert float(score(llama, harmful).mean()) == pytest.approx(choice.score, abs=1e-5)
