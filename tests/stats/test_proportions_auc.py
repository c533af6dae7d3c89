"""Two-proportion intervals and ROC-AUC intervals, each checked against a reference:
statsmodels (Newcombe, independent), Newcombe's worked example, exact enumeration of every
2x2 table (paired coverage), scikit-learn (AUC) and DeLong's definition pair by pair."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.stats import (
    AUCDifference,
    AUCInterval,
    DifferenceInterval,
    newcombe_difference,
    newcombe_paired_difference,
    paired_difference,
    roc_auc_ci,
    roc_auc_difference,
)
from trustlab.stats.auc import delong_components

statsmodels_prop = pytest.importorskip("statsmodels.stats.proportion")


def test_newcombe_matches_the_published_example_and_statsmodels():
    d = newcombe_difference(56, 70, 48, 80)  # Newcombe (1998a), example (a)
    assert (round(d.lower, 4), round(d.upper, 4)) == (0.0524, 0.3339)
    rng = np.random.default_rng(0)
    for _ in range(200):
        n1, n2 = rng.integers(1, 60, 2)
        k1, k2 = rng.integers(0, n1 + 1), rng.integers(0, n2 + 1)
        alpha = float(rng.choice([0.01, 0.05, 0.1, 0.2]))
        ours = newcombe_difference(int(k1), int(n1), int(k2), int(n2), alpha)
        lo, hi = statsmodels_prop.confint_proportions_2indep(
            k1, n1, k2, n2, method="newcomb", compare="diff", alpha=alpha
        )
        assert (ours.lower, ours.upper) == pytest.approx((lo, hi), abs=1e-10)


def test_paired_without_association_equals_the_independent_interval_on_the_margins():
    # a*d == b*c: phi = 0, so the paired interval is the square-and-add of the margins
    for a, b, c, d in [(4, 2, 6, 3), (10, 5, 2, 1), (0, 3, 0, 7), (6, 6, 6, 6)]:
        p = newcombe_paired_difference(a, b, c, d)
        n = a + b + c + d
        ref = statsmodels_prop.confint_proportions_2indep(
            a + b, n, a + c, n, method="newcomb", compare="diff"
        )
        assert (p.lower, p.upper) == pytest.approx(ref, abs=1e-12)


def _multinomial_pmf(counts, probs):
    n = sum(counts)
    logp = math.lgamma(n + 1) + sum(
        c * math.log(p) - math.lgamma(c + 1) if c else -math.lgamma(c + 1)
        for c, p in zip(counts, probs, strict=True)
    )
    return math.exp(logp)


@pytest.mark.parametrize(
    "probs", [(0.3, 0.2, 0.1, 0.4), (0.6, 0.1, 0.05, 0.25), (0.1, 0.3, 0.3, 0.3)]
)
def test_paired_interval_exact_coverage_by_enumerating_every_table(probs):
    """Exact coverage of the 95% paired interval at n = 30: the probability (over all 2x2
    tables) that it contains the true difference p10 - p01. Newcombe reports mean coverage
    near nominal for method 10; at n = 30 it must lie within 0.925..0.99."""
    n = 30
    truth = probs[1] - probs[2]
    cover = 0.0
    for a in range(n + 1):
        for b in range(n + 1 - a):
            for c in range(n + 1 - a - b):
                d = n - a - b - c
                iv = newcombe_paired_difference(a, b, c, d)
                if iv.lower <= truth <= iv.upper:
                    cover += _multinomial_pmf((a, b, c, d), probs)
    assert 0.925 <= cover <= 0.99, cover


def test_paired_difference_from_flags_and_bad_input():
    x = [1, 1, 0, 0, 1, 0, 1, 1]
    y = [1, 0, 0, 1, 0, 0, 1, 0]
    d = paired_difference(x, y)
    assert d.estimate == pytest.approx(np.mean(x) - np.mean(y))
    assert (d.n10, d.n01) == (3, 1) and d.lower < d.estimate < d.upper
    with pytest.raises(InputError, match="first"):
        paired_difference([0.5, 1], [0, 1])
    with pytest.raises(InputError, match="one flag per item"):
        paired_difference([1, 0], [1])
    with pytest.raises(InputError, match="k1"):
        newcombe_difference(5, 4, 1, 2)
    with pytest.raises(InputError, match="alpha"):
        newcombe_difference(1, 4, 1, 2, alpha=0)


@settings(max_examples=120, deadline=None)
@given(
    st.integers(0, 40), st.integers(0, 40), st.integers(0, 40), st.integers(0, 40),
    st.sampled_from([0.01, 0.05, 0.2]),
)  # fmt: skip
def test_paired_interval_properties(a, b, c, d, alpha):
    if a + b + c + d == 0:
        with pytest.raises(InputError):
            newcombe_paired_difference(a, b, c, d, alpha)
        return
    iv = newcombe_paired_difference(a, b, c, d, alpha)
    assert -1.0 <= iv.lower <= iv.estimate <= iv.upper <= 1.0
    flipped = newcombe_paired_difference(a, c, b, d, alpha)  # swap the two conditions
    assert flipped.lower == pytest.approx(-iv.upper) and flipped.upper == pytest.approx(-iv.lower)


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.floats(allow_nan=True, allow_infinity=True).filter(
            lambda x: not (math.isfinite(x) and x.is_integer() and 0 <= x <= 10)
        ),
        st.integers(11, 10**6),
        st.integers(-(10**6), -1),
        st.text(max_size=3),
        st.none(),
        st.booleans(),
    )
)
def test_malformed_counts_are_input_errors_naming_the_parameter(bad):
    with pytest.raises(InputError, match="'k1'"):
        newcombe_difference(bad, 10, 1, 10)


# -- ROC-AUC ----------------------------------------------------------------------------------


def _delong_by_definition(y, s):
    """DeLong's variance straight from its definition: psi over every (positive, negative)."""
    pos, neg = s[y == 1], s[y == 0]
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    v10, v01 = psi.mean(1), psi.mean(0)
    return psi.mean(), np.var(v10, ddof=1) / len(pos) + np.var(v01, ddof=1) / len(neg)


def test_auc_equals_sklearn_and_delong_variance_equals_its_definition_with_ties():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(1)
    for _ in range(30):
        n = int(rng.integers(6, 80))
        y = rng.integers(0, 2, n)
        if y.min() == y.max():
            continue
        s = np.round(rng.normal(y * 0.8, 1.0), 1)  # rounding makes ties
        ci = roc_auc_ci(y, s)
        auc, var = _delong_by_definition(y, s)
        assert ci.auc == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        assert ci.auc == pytest.approx(auc) and ci.se == pytest.approx(math.sqrt(var))
        assert ci.lower <= ci.auc <= ci.upper


def test_bootstrap_interval_agrees_with_delong_on_a_large_sample():
    rng = np.random.default_rng(2)
    y = np.r_[np.ones(400), np.zeros(600)].astype(int)
    s = rng.normal(y * 1.0, 1.0)
    d = roc_auc_ci(y, s)
    b = roc_auc_ci(y, s, method="bootstrap", n_resamples=1000, rng=0)
    assert b.lower == pytest.approx(d.lower, abs=0.01) and b.upper == pytest.approx(
        d.upper, abs=0.01
    )


def test_paired_auc_difference_matches_definition_and_detects_a_real_gap():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 300)
    good = rng.normal(y * 1.5, 1.0)
    bad = good + rng.normal(0, 2.0, 300)
    diff = roc_auc_difference(y, good, bad)
    pos, neg = y == 1, y == 0

    def comps(s):
        psi = (s[pos][:, None] > s[neg][None, :]) + 0.5 * (s[pos][:, None] == s[neg][None, :])
        return psi.mean(1), psi.mean(0)

    (a10, a01), (b10, b01) = comps(good), comps(bad)
    var = (np.var(a10 - b10, ddof=1) / pos.sum()) + (np.var(a01 - b01, ddof=1) / neg.sum())
    assert diff.se == pytest.approx(math.sqrt(var))
    assert diff.lower > 0 and diff.p_value < 0.01
    same = roc_auc_difference(y, good, good)
    assert same.estimate == 0 and same.p_value == 1.0


def test_auc_exact_enumeration_of_a_tiny_case():
    # positives {3, 1}, negatives {2, 0}: pairs (3>2, 3>0, 1<2, 1>0) -> AUC 3/4
    auc, v10, v01 = delong_components(np.array([1, 1, 0, 0], bool), np.array([3.0, 1.0, 2.0, 0.0]))
    assert auc == 0.75 and list(v10) == [1.0, 0.5] and list(v01) == [0.5, 1.0]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.sampled_from([0, 1, 2, -1, 0.5]), min_size=0, max_size=8),
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=0, max_size=8),
)
def test_auc_malformed_input_gives_a_result_or_an_input_error_naming_the_parameter(y, s):
    try:
        ci = roc_auc_ci(y, s)
    except InputError as exc:
        assert "y_true" in str(exc) or "scores" in str(exc)
        return
    assert 0.0 <= ci.lower <= ci.auc <= ci.upper <= 1.0
    assert set(np.unique(y)) == {0, 1} and np.all(np.isfinite(s))


def test_auc_bad_method_and_alpha():
    with pytest.raises(InputError, match="method"):
        roc_auc_ci([0, 1], [0.1, 0.2], method="wald")
    with pytest.raises(InputError, match="alpha"):
        roc_auc_ci([0, 1], [0.1, 0.2], alpha=1.0)
    with pytest.raises(InputError, match="n_resamples"):
        roc_auc_ci([0, 1], [0.1, 0.2], method="bootstrap", n_resamples=5)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    st.integers(1, 30).flatmap(lambda n1: st.tuples(st.integers(0, n1), st.just(n1))),
    st.integers(1, 30).flatmap(lambda n2: st.tuples(st.integers(0, n2), st.just(n2))),
    st.sampled_from([0.01, 0.05, 0.2]),
)
def test_independent_difference_is_a_difference_interval_that_flips_with_the_groups(g1, g2, alpha):
    (k1, n1), (k2, n2) = g1, g2
    iv = newcombe_difference(k1, n1, k2, n2, alpha)
    assert isinstance(iv, DifferenceInterval) and (iv.n1, iv.n2, iv.alpha) == (n1, n2, alpha)
    assert iv.estimate == pytest.approx(k1 / n1 - k2 / n2)
    assert -1.0 <= iv.lower <= iv.estimate <= iv.upper <= 1.0
    flipped = newcombe_difference(k2, n2, k1, n1, alpha)
    assert flipped.lower == pytest.approx(-iv.upper) and flipped.upper == pytest.approx(-iv.lower)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.integers(0, 2**16), st.integers(3, 12), st.integers(3, 12))
def test_auc_results_are_typed_and_the_difference_is_antisymmetric(seed, n_pos, n_neg):
    rng = np.random.default_rng(seed)
    y = np.r_[np.ones(n_pos, int), np.zeros(n_neg, int)]
    a, b = rng.normal(size=y.size) + y, rng.normal(size=y.size)
    ci = roc_auc_ci(y, a)
    assert isinstance(ci, AUCInterval) and (ci.n_positive, ci.n_negative) == (n_pos, n_neg)
    # the AUC is the fraction of (positive, negative) pairs ordered correctly, ties half
    pairs = a[y == 1][:, None] - a[y == 0][None, :]
    assert ci.auc == pytest.approx(np.mean((pairs > 0) + 0.5 * (pairs == 0)))
    d = roc_auc_difference(y, a, b)
    r = roc_auc_difference(y, b, a)
    assert isinstance(d, AUCDifference) and d.estimate == pytest.approx(d.auc_a - d.auc_b)
    assert r.estimate == pytest.approx(-d.estimate) and r.p_value == pytest.approx(d.p_value)
    assert d.lower <= d.estimate <= d.upper and 0.0 <= d.p_value <= 1.0
