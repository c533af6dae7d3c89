"""Aggregation rules: hand-computed examples, pref_voting, and HELM's published mean win rate."""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.core.errors import InputError
from trustlab.datasets.leaderboards import load_leaderboard
from trustlab.methods.bribery import (
    aggregate,
    borda_scores,
    condorcet_winner,
    copeland_scores,
    is_unique_winner,
    mean_win_rate,
    median_scores,
    pairwise_margins,
    unique_winner,
)

# 3 models × 4 datasets, hand-computed below
TINY = np.array(
    [
        [0.9, 0.1, 0.5, 0.5],  # A
        [0.8, 0.7, 0.5, 0.2],  # B
        [0.1, 0.9, 0.4, 0.3],  # C
    ]
)


def test_tiny_example_by_hand():
    np.testing.assert_allclose(aggregate(TINY, "mean"), [0.5, 0.55, 0.425])
    np.testing.assert_allclose(median_scores(TINY), [0.5, 0.6, 0.35])  # even: mean of middle two
    # wins (ties ½) per dataset: A: 2,0,1.5,2  B: 1,1,1.5,0  C: 0,2,0,1
    np.testing.assert_allclose(borda_scores(TINY), [5.5, 3.5, 3.0])
    np.testing.assert_allclose(mean_win_rate(TINY), [5.5 / 8, 3.5 / 8, 3.0 / 8])
    # pairwise: A vs B: A above on d0, d3; B above on d1; tie d2 -> A wins. A vs C: 3-1 A.
    # B vs C: B above d0, d2; C above d1, d3 -> tie
    M = pairwise_margins(TINY)
    assert (M[0, 1], M[0, 2], M[1, 2]) == (1, 2, 0)
    np.testing.assert_array_equal(M, -M.T)
    np.testing.assert_allclose(copeland_scores(TINY), [2.0, 0.5, 0.5])
    assert condorcet_winner(TINY) == 0
    assert unique_winner(aggregate(TINY, "mean")) == 1


def test_missing_pairs_are_skipped():
    s = np.array([[1.0, np.nan], [0.0, 5.0], [np.nan, 4.0]])
    # d0: model 0 beats 1; d1: model 1 beats 2 (model 0 missing)
    np.testing.assert_allclose(mean_win_rate(s), [1.0, 0.5, 0.0])
    np.testing.assert_allclose(borda_scores(s), [1.0, 1.0, 0.0])
    M = pairwise_margins(s)
    assert M[0, 2] == 0 and M[0, 1] == 1 and M[1, 2] == 1


def test_unique_winner_needs_strictly_more():
    assert not is_unique_winner(np.array([1.0, 1.0, 0.0]), 0)
    assert is_unique_winner(np.array([1.0 + 1e-6, 1.0, 0.0]), 0)
    assert not is_unique_winner(np.array([1.0 + 1e-13, 1.0, 0.0]), 0)  # rounding noise = tie
    assert unique_winner(np.array([2.0, 2.0])) is None


def test_unknown_rule_is_rejected():
    with pytest.raises(InputError, match="Unknown aggregation rule"):
        aggregate(TINY, "plurality")


def _pref_voting_profile(scores: np.ndarray):
    from pref_voting.profiles import Profile

    rankings = [tuple(np.argsort(-scores[:, d], kind="stable").tolist()) for d in range(scores.shape[1])]
    return Profile(rankings)


@pytest.mark.parametrize("seed", range(25))
def test_borda_and_copeland_match_pref_voting(seed):
    pytest.importorskip("pref_voting")
    from pref_voting.c1_methods import condorcet, copeland
    from pref_voting.scoring_methods import borda

    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(2, 7)), int(rng.integers(1, 8))
    s = rng.random((n, m))  # continuous: strict rankings
    prof = _pref_voting_profile(s)
    ours_borda = borda_scores(s)
    assert set(borda(prof)) == set(np.flatnonzero(ours_borda == ours_borda.max()).tolist())
    ref = prof.borda_scores()
    np.testing.assert_allclose([ref[c] for c in range(n)], ours_borda)
    cop = copeland_scores(s)
    assert set(copeland(prof)) == set(np.flatnonzero(cop == cop.max()).tolist())
    ref_c = prof.copeland_scores()  # wins - losses
    np.testing.assert_allclose([ref_c[c] for c in range(n)], 2 * cop - (n - 1))
    cw = condorcet_winner(s)
    ref_cw = prof.condorcet_winner()
    assert cw == ref_cw
    assert set(condorcet(prof)) == ({cw} if cw is not None else set(range(n)))
    for i in range(n):
        for j in range(n):
            assert pairwise_margins(s)[i, j] == prof.margin(i, j)


def test_mean_win_rate_reproduces_helm_published_column():
    """HELM classic accuracy: our MWR vs the published "Mean win rate" (3 decimals).

    The table's scores are rounded to 3 decimals, which creates ties HELM never saw. So: (1) every
    model whose cells are tie-free must match to the rounding; (2) every published value must lie in
    our [ties-as-losses, ties-as-wins] bracket (± rounding); (3) without HELM's contamination mask
    (T0pp) the check fails, so the mask is what HELM did."""
    lb = load_leaderboard("helm_classic_accuracy")
    pub = lb.info["Mean win rate"].to_numpy(float)
    s = lb.scores
    half = mean_win_rate(s)
    tied = np.zeros(s.shape, bool)
    for d in range(s.shape[1]):
        col = s[:, d]
        ok = ~np.isnan(col)
        vals, counts = np.unique(col[ok], return_counts=True)
        tied[ok, d] = np.isin(col[ok], vals[counts > 1])
    free = ~tied.any(axis=1)
    assert free.sum() >= 5
    assert np.all(np.abs(half[free] - pub[free]) <= 0.0005 + 1e-12)
    lo, hi = mean_win_rate(s, ties="loss"), mean_win_rate(s, ties="win")
    assert np.all((pub >= lo - 0.0005 - 1e-12) & (pub <= hi + 0.0005 + 1e-12))
    assert np.median(np.abs(half - pub)) <= 0.0015
    raw = load_leaderboard("helm_classic_accuracy_raw").scores
    lo_r, hi_r = mean_win_rate(raw, ties="loss"), mean_win_rate(raw, ties="win")
    assert not np.all((pub >= lo_r - 0.0005) & (pub <= hi_r + 0.0005))
