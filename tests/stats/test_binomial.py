"""Binomial proportion intervals: scipy agreement, exact coverage, conventions, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from trustlab.core.errors import InputError
from trustlab.stats import (
    beta_posterior_quantile,
    clopper_pearson,
    clopper_pearson_lower,
    clopper_pearson_upper,
    hoeffding,
    jeffreys,
    wilson,
)

NS = [1, 2, 3, 7, 10, 25, 100, 333]


def _grid(ns: list[int] = NS) -> tuple[np.ndarray, np.ndarray]:
    k = np.concatenate([np.arange(n + 1) for n in ns])
    n = np.concatenate([np.full(n + 1, n) for n in ns])
    return k, n


@pytest.mark.parametrize(("ours", "method"), [(clopper_pearson, "exact"), (wilson, "wilson")])
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.32])
def test_matches_scipy_binomtest(ours, method: str, alpha: float) -> None:
    k, n = _grid([1, 2, 3, 7, 10, 25, 61])  # scipy's binomtest is slow; keep the grid small
    lo, hi = ours(k, n, alpha=alpha)
    for i in range(k.size):
        ci = stats.binomtest(int(k[i]), int(n[i])).proportion_ci(1 - alpha, method=method)
        assert lo[i] == pytest.approx(ci.low, abs=1e-10)
        assert hi[i] == pytest.approx(ci.high, abs=1e-10)


def test_scalar_in_scalar_out_and_broadcasting() -> None:
    lo, hi = clopper_pearson(3, 10)
    assert isinstance(lo, float) and isinstance(hi, float)
    lo, hi = clopper_pearson(np.array([0, 5, 10]), 10)
    assert lo.shape == (3,) and hi.shape == (3,)
    lo2d, _ = wilson(np.array([[1], [2]]), np.array([10, 20, 30]))
    assert lo2d.shape == (2, 3)


def test_boundary_conventions() -> None:
    n = np.array([1, 5, 50])
    for interval in (clopper_pearson, wilson, jeffreys):
        lo, hi = interval(np.zeros(3, dtype=int), n)
        np.testing.assert_array_equal(lo, 0.0)
        lo, hi = interval(n, n)
        np.testing.assert_array_equal(hi, 1.0)
    # k = 0 closed form: upper = 1 - (alpha/2)^(1/n).
    _, hi = clopper_pearson(0, 20, alpha=0.05)
    assert hi == pytest.approx(1 - 0.025 ** (1 / 20), rel=1e-12)
    assert clopper_pearson_upper(0, 20, alpha=0.05) == pytest.approx(1 - 0.05 ** (1 / 20))
    assert clopper_pearson_lower(20, 20, alpha=0.05) == pytest.approx(0.05 ** (1 / 20))
    assert clopper_pearson_lower(0, 20) == 0.0
    assert clopper_pearson_upper(20, 20) == 1.0


def test_one_sided_equal_two_sided_at_double_alpha() -> None:
    k, n = _grid()
    lo, hi = clopper_pearson(k, n, alpha=0.1)
    np.testing.assert_allclose(clopper_pearson_lower(k, n, alpha=0.05), lo, atol=1e-12)
    np.testing.assert_allclose(clopper_pearson_upper(k, n, alpha=0.05), hi, atol=1e-12)


def test_jeffreys_matches_direct_beta_quantiles() -> None:
    k, n = _grid()
    alpha = 0.05
    inner = (k > 0) & (k < n)
    lo, hi = jeffreys(k, n, alpha)
    a, b = k + 0.5, n - k + 0.5
    np.testing.assert_allclose(lo[inner], stats.beta.ppf(alpha / 2, a, b)[inner], atol=1e-12)
    np.testing.assert_allclose(hi[inner], stats.beta.ppf(1 - alpha / 2, a, b)[inner], atol=1e-12)
    # Jeffreys is the equal-tailed interval of the Beta(1/2, 1/2)-prior posterior.
    np.testing.assert_allclose(
        beta_posterior_quantile(k, n, alpha / 2, prior=(0.5, 0.5))[inner], lo[inner], atol=1e-12
    )


def test_beta_posterior_quantile_uniform_prior() -> None:
    assert beta_posterior_quantile(3, 10, 0.5) == pytest.approx(stats.beta.ppf(0.5, 4, 8))
    q = beta_posterior_quantile(3, 10, np.array([0.1, 0.5, 0.9]))
    assert np.all(np.diff(q) > 0)
    assert beta_posterior_quantile(3, 10, 0.0) == 0.0
    assert beta_posterior_quantile(3, 10, 1.0) == 1.0


@pytest.mark.parametrize("n", [10, 37, 120])
def test_clopper_pearson_exact_coverage_on_a_grid_of_p(n: int) -> None:
    """Coverage is computed exactly (summing the binomial pmf), not simulated."""
    alpha = 0.05
    k = np.arange(n + 1)
    lo, hi = clopper_pearson(k, n, alpha)
    lo_u = clopper_pearson_upper(k, n, alpha)
    for p in np.linspace(0.001, 0.999, 211):
        pmf = stats.binom.pmf(k, n, p)
        assert pmf[(lo <= p) & (p <= hi)].sum() >= 1 - alpha - 1e-12
        assert pmf[p <= lo_u].sum() >= 1 - alpha - 1e-12


@pytest.mark.parametrize("p", [0.02, 0.3, 0.5, 0.85])
def test_clopper_pearson_simulated_coverage(p: float) -> None:
    n, reps, alpha = 40, 20_000, 0.1
    k = np.random.default_rng(int(p * 100)).binomial(n, p, size=reps)
    lo, hi = clopper_pearson(k, n, alpha)
    coverage = np.mean((lo <= p) & (p <= hi))
    assert coverage >= 1 - alpha - 4 * np.sqrt(alpha * (1 - alpha) / reps)


def test_hoeffding_width_and_containment_of_clopper_pearson() -> None:
    lo, hi = hoeffding(30, 100, alpha=0.05)
    half = np.sqrt(np.log(2 / 0.05) / 200)
    assert lo == pytest.approx(0.3 - half) and hi == pytest.approx(0.3 + half)
    for n in (20, 100, 1000):
        k = np.arange(n + 1)
        h_lo, h_hi = hoeffding(k, n, alpha=0.05)
        c_lo, c_hi = clopper_pearson(k, n, alpha=0.05)
        assert np.all(h_lo <= c_lo + 1e-12) and np.all(h_hi >= c_hi - 1e-12)
    lo, hi = hoeffding(0, 5)
    assert lo == 0.0 and 0 < hi <= 1.0


@pytest.mark.parametrize("interval", [clopper_pearson, wilson, jeffreys, hoeffding])
@pytest.mark.parametrize(
    ("k", "n", "alpha", "match"),
    [
        (11, 10, 0.05, "must be <= n"),
        (-1, 10, 0.05, "'k' parameter .* must be >= 0"),
        (0, 0, 0.05, "'n' parameter .* must be >= 1"),
        (1.5, 10, 0.05, "whole numbers"),
        (3, 10, 1.5, r"'alpha' parameter of \w+ must be in \(0, 1\). Got 1.5."),
        (3, 10, 0.0, "must be in"),
        ([1, 2], [10, 10, 10], 0.05, "broadcast"),
    ],
)
def test_bad_inputs_raise(interval, k, n, alpha, match: str) -> None:
    with pytest.raises(InputError, match=match):
        interval(k, n, alpha=alpha)


def test_bad_posterior_arguments_raise() -> None:
    with pytest.raises(InputError, match="'q' parameter"):
        beta_posterior_quantile(3, 10, 1.5)
    with pytest.raises(InputError, match="'prior' parameter"):
        beta_posterior_quantile(3, 10, 0.5, prior=(0.0, 1.0))
    with pytest.raises(InputError, match="must be <= n"):
        clopper_pearson_upper(5, 4)
