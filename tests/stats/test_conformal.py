"""Split-conformal quantile and p-values: reference agreement and the coverage guarantee."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from trustlab.core.errors import InputError
from trustlab.stats import conformal_pvalues, conformal_quantile, conformal_rank


def _reference_quantile(scores: np.ndarray, alpha: float) -> float:
    n = scores.size
    k = math.ceil((n + 1) * (1 - alpha) - 1e-9)
    return float(np.sort(scores)[k - 1])


@pytest.mark.parametrize("n", [19, 20, 50, 99, 1000])
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2, 0.5])
def test_quantile_matches_sort_reference(n: int, alpha: float) -> None:
    rng = np.random.default_rng(n * 1000 + int(alpha * 100))
    if n < (1 - alpha) / alpha:
        pytest.skip(f"n={n} is below the minimum for alpha={alpha}")
    scores = rng.standard_normal(n)
    assert conformal_quantile(scores, alpha) == _reference_quantile(scores, alpha)
    # Same threshold as the empirical quantile at the corrected level ceil((n+1)(1-a))/n.
    level = conformal_rank(n, alpha) / n
    assert conformal_quantile(scores, alpha) == np.quantile(scores, level, method="inverted_cdf")


def test_rank_exact_integers_are_not_bumped_by_rounding() -> None:
    # (n + 1)(1 - alpha) is an exact integer here; floating point must not push k up by one.
    assert conformal_rank(19, 0.05) == 19
    assert conformal_rank(99, 0.01) == 99
    assert conformal_rank(9, 0.1) == 9
    assert conformal_rank(39, 0.3) == 28


@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1, 0.2, 0.3, 0.45, 0.5, 0.9])
def test_minimum_n_in_message_is_exact(alpha: float) -> None:
    with pytest.raises(InputError) as info:
        conformal_rank(0, alpha)
    need = int(str(info.value).split("Need at least ")[1].split()[0])
    assert conformal_rank(need, alpha) <= need
    with pytest.raises(InputError, match="Need at least"):
        conformal_rank(need - 1, alpha)


def test_too_few_scores_raises() -> None:
    with pytest.raises(
        InputError, match=r"Need at least 19 calibration scores for alpha=0.05, got 10"
    ):
        conformal_quantile(np.arange(10.0), 0.05)


@pytest.mark.parametrize(
    ("scores", "alpha", "match"),
    [
        (np.arange(50.0), 1.5, r"'alpha' parameter of conformal_quantile must be in \(0, 1\)"),
        (np.arange(50.0), 0.0, "must be in"),
        (np.array([]), 0.1, "must not be empty"),
        (np.ones((10, 10)), 0.1, "must be 1-D"),
        (np.array([1.0, np.nan] * 30), 0.1, "NaN"),
    ],
)
def test_quantile_rejects_bad_input(scores: np.ndarray, alpha: float, match: str) -> None:
    with pytest.raises(InputError, match=match):
        conformal_quantile(scores, alpha)


@pytest.mark.parametrize(("n", "alpha"), [(19, 0.1), (50, 0.1), (100, 0.05), (30, 0.2)])
def test_coverage_guarantee_over_exchangeable_draws(n: int, alpha: float) -> None:
    """P(test <= q) lies in [1 - alpha, 1 - alpha + 1/(n+1)]; it equals k/(n+1) exactly."""
    reps = 2000
    rng = np.random.default_rng(7 + n)
    draws = rng.exponential(size=(reps, n + 1))  # continuous, so no ties
    hits = np.array([d[-1] <= conformal_quantile(d[:-1], alpha) for d in draws])
    coverage = hits.mean()
    exact = conformal_rank(n, alpha) / (n + 1)
    assert 1 - alpha <= exact <= 1 - alpha + 1 / (n + 1) + 1e-12
    tol = 4 * math.sqrt(exact * (1 - exact) / reps)
    assert 1 - alpha - tol <= coverage <= 1 - alpha + 1 / (n + 1) + tol
    assert abs(coverage - exact) <= tol


def test_pvalues_match_direct_count() -> None:
    rng = np.random.default_rng(0)
    cal = rng.integers(0, 10, size=40).astype(float)  # ties on purpose
    test = np.arange(-1.0, 12.0, 0.5)
    expected = np.array([(1 + np.sum(cal >= s)) / (cal.size + 1) for s in test])
    np.testing.assert_allclose(conformal_pvalues(cal, test), expected)
    assert conformal_pvalues(cal, 100.0).shape == ()
    assert conformal_pvalues(cal, -100.0) == 1.0


def test_pvalues_are_valid_and_uniform_under_exchangeability() -> None:
    n, reps = 20, 4000
    rng = np.random.default_rng(1)
    draws = rng.standard_normal(size=(reps, n + 1))
    p = np.array([conformal_pvalues(d[:-1], d[-1]) for d in draws])
    # Exactly uniform on {1/(n+1), ..., 1}; test against that law and check validity.
    values = np.arange(1, n + 2) / (n + 1)
    observed = np.array([(np.isclose(p, v)).sum() for v in values])
    assert observed.sum() == reps
    assert stats.chisquare(observed).pvalue > 1e-3
    for u in (0.05, 0.1, 0.25, 0.5):
        tol = 4 * math.sqrt(u * (1 - u) / reps)
        assert np.mean(p <= u) <= u + tol


def test_pvalue_and_quantile_define_the_same_prediction_set() -> None:
    rng = np.random.default_rng(2)
    cal = rng.standard_normal(50)
    test = rng.standard_normal(1000)
    alpha = 0.1
    q = conformal_quantile(cal, alpha)
    np.testing.assert_array_equal(test <= q, conformal_pvalues(cal, test) > alpha)


def test_pvalues_reject_bad_input() -> None:
    with pytest.raises(InputError, match="must not be empty"):
        conformal_pvalues([], [1.0])
    with pytest.raises(InputError, match="NaN"):
        conformal_pvalues([1.0, 2.0], [np.nan])
