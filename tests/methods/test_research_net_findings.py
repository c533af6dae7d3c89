"""research-net's four findings as decisions with stated margins: each must be able to fail."""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.core.errors import InputError
from trustlab.methods.research_net import NetworkStats, split_roles
from trustlab.methods.research_net.findings import (
    learners_know_more,
    optimisation_beats_fixed,
    researcher_learner_split,
    short_paths_low_clustering,
)


def test_finding_i_needs_the_interval_above_the_margin():
    fixed = 100.0
    clear = optimisation_beats_fixed([105.0, 106.0, 104.5, 105.5], fixed, margin=0.02, rng=0)
    assert clear.holds and clear.numbers["share_above_margin"] == 1.0
    assert clear.numbers["gain_low"] <= clear.numbers["gain_mean"] <= clear.numbers["gain_high"]
    assert clear.numbers["gain_mean"] == pytest.approx(0.0525)
    # everything above the fixed topology, but by less than the margin: does not hold
    small = optimisation_beats_fixed([101.0, 101.5, 100.8], fixed, margin=0.02, rng=0)
    assert not small.holds and small.numbers["share_above_margin"] == 0.0
    # a mean above the margin carried by one lucky restart: the interval reaches below it
    lucky = optimisation_beats_fixed([99.0, 99.5, 100.0, 100.2, 125.0], fixed, margin=0.02, rng=0)
    assert lucky.numbers["gain_mean"] > 0.02 and not lucky.holds
    assert lucky.numbers["share_above_margin"] == pytest.approx(0.2)
    # margin 0 asks only for the interval above 'no gain'
    assert optimisation_beats_fixed([101.0, 101.5, 100.8], fixed, margin=0.0, rng=0).holds
    single = optimisation_beats_fixed([110.0], fixed, margin=0.02)
    assert single.holds and single.numbers["gain_low"] == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("values", "fixed", "margin"),
    [([], 1.0, 0.02), ([1.0, float("nan")], 1.0, 0.02), ([[1.0]], 1.0, 0.02),
     ([1.0], 0.0, 0.02), ([1.0], float("inf"), 0.02), ([1.0], 1.0, -0.1)],
)
def test_finding_i_rejects_bad_input(values, fixed, margin):
    with pytest.raises(InputError):
        optimisation_beats_fixed(values, fixed, margin=margin)


def _stats(path: float, clustering: float) -> NetworkStats:
    return NetworkStats(10, 0.5, path, path, clustering, clustering, 1.0)


def test_finding_ii_needs_shorter_paths_and_clustering_lower_by_the_margin():
    null = _stats(2.0, 0.30)
    assert short_paths_low_clustering(_stats(1.9, 0.10), null).holds
    assert short_paths_low_clustering(_stats(2.0, 0.28), null).holds
    assert not short_paths_low_clustering(_stats(2.1, 0.10), null).holds  # longer paths
    assert not short_paths_low_clustering(_stats(1.9, 0.295), null).holds  # within the margin
    assert not short_paths_low_clustering(_stats(1.0, 0.30), null).holds


def test_finding_iii_needs_two_separated_groups():
    r = np.array([0.95, 0.99, 1.0, 0.05, 0.02, 0.0, 0.1, 0.04, 0.03, 0.06])
    assert researcher_learner_split(split_roles(r), r).holds
    even = np.full(10, 0.3)
    assert not researcher_learner_split(split_roles(even), even).holds
    close = np.linspace(0.2, 0.5, 10)  # no gap of 0.5 between the groups
    assert not researcher_learner_split(split_roles(close), close).holds


def test_finding_iv_needs_both_margins():
    r = np.array([1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    roles = split_roles(r)
    k_more = np.array([1.0, 1.0, 2.0, 2.0, 2.0, 2.0])
    rising = [0.02, 0.05, 0.10]
    assert learners_know_more(k_more, roles, rising).holds
    assert not learners_know_more(k_more, roles, [0.10, 0.11]).holds  # Gini +0.01 < 0.02
    k_close = np.array([1.0, 1.0, 1.05, 1.05, 1.05, 1.05])  # x1.05 < x1.1
    assert not learners_know_more(k_close, roles, rising).holds
    assert not learners_know_more(k_more[::-1], roles, rising).holds
    nobody = split_roles(np.full(6, 0.2))  # one group only: no comparison, no finding
    assert not learners_know_more(k_more, nobody, rising).holds
    with pytest.raises(InputError, match="gini_curve"):
        learners_know_more(k_more, roles, [0.1])
