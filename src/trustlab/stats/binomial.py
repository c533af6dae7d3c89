"""Confidence intervals for a binomial proportion, vectorised over ``k`` and ``n``.

Every interval takes ``k`` successes out of ``n`` trials (ints or arrays that broadcast) and
``alpha``, the miscoverage: two-sided intervals have confidence ``1 - alpha`` and put
``alpha / 2`` in each tail; one-sided bounds put all of ``alpha`` in one tail. Results are
clipped to [0, 1] and come back as floats for scalar input, arrays otherwise.
"""

from __future__ import annotations

from numbers import Real

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special, stats

from trustlab.core.errors import InputError
from trustlab.core.validation import as_float_array, check_open_unit

__all__ = [
    "beta_posterior_quantile",
    "clopper_pearson",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "hoeffding",
    "jeffreys",
    "wilson",
]

FloatOrArray = float | NDArray[np.float64]
Interval = tuple[FloatOrArray, FloatOrArray]


def _as_counts(values: ArrayLike, name: str, where: str) -> NDArray[np.float64]:
    arr = as_float_array(values, name, where, allow_empty=True)
    if np.any(arr != np.round(arr)):
        raise InputError(f"The '{name}' parameter of {where} must hold whole numbers.")
    return arr


def _check_kn(k: ArrayLike, n: ArrayLike, where: str) -> tuple[NDArray[np.float64], ...]:
    """Validate counts and broadcast them; floats keep scipy's beta functions happy."""
    k_arr = _as_counts(k, "k", where)
    n_arr = _as_counts(n, "n", where)
    if np.any(n_arr < 1):
        raise InputError(
            f"The 'n' parameter of {where} must be >= 1. Got {float(np.min(n_arr)):g}."
        )
    if np.any(k_arr < 0):
        raise InputError(
            f"The 'k' parameter of {where} must be >= 0. Got {float(np.min(k_arr)):g}."
        )
    try:
        k_arr, n_arr = np.broadcast_arrays(k_arr, n_arr)
    except ValueError as exc:
        raise InputError(
            f"The 'k' and 'n' parameters of {where} must broadcast together. "
            f"Got shapes {np.shape(k_arr)} and {np.shape(n_arr)}."
        ) from exc
    if np.any(k_arr > n_arr):
        raise InputError(f"The 'k' parameter of {where} must be <= n (successes <= trials).")
    return k_arr, n_arr


def _out(x: NDArray[np.float64]) -> FloatOrArray:
    x = np.clip(x, 0.0, 1.0)
    return float(x) if x.ndim == 0 else x


def _cp_lower(k: NDArray[np.float64], n: NDArray[np.float64], tail: float) -> NDArray[np.float64]:
    # Beta(k, n - k + 1) quantile; the bound is exactly 0 when k = 0 (the Beta is degenerate).
    safe_k = np.where(k == 0, 1.0, k)
    return np.where(k == 0, 0.0, special.betaincinv(safe_k, n - safe_k + 1.0, tail))


def _cp_upper(k: NDArray[np.float64], n: NDArray[np.float64], tail: float) -> NDArray[np.float64]:
    # Beta(k + 1, n - k) quantile; the bound is exactly 1 when k = n.
    safe_k = np.where(k == n, n - 1.0, k)
    return np.where(k == n, 1.0, special.betaincinv(safe_k + 1.0, n - safe_k, 1.0 - tail))


def clopper_pearson(k: ArrayLike, n: ArrayLike, alpha: float = 0.05) -> Interval:
    """Exact (Clopper-Pearson) two-sided interval; covers p with probability >= 1 - alpha.

    Conservative for every p and n, which is why certificates use it. Bounds are Beta
    quantiles: ``Beta(k, n-k+1).ppf(alpha/2)`` and ``Beta(k+1, n-k).ppf(1-alpha/2)``,
    with lower = 0 at k = 0 and upper = 1 at k = n.
    """
    alpha = check_open_unit(alpha, "alpha", "clopper_pearson")
    k_arr, n_arr = _check_kn(k, n, "clopper_pearson")
    return _out(_cp_lower(k_arr, n_arr, alpha / 2)), _out(_cp_upper(k_arr, n_arr, alpha / 2))


def clopper_pearson_lower(k: ArrayLike, n: ArrayLike, alpha: float = 0.05) -> FloatOrArray:
    """Exact one-sided lower bound L with ``P(p >= L) >= 1 - alpha`` (0 when k = 0)."""
    alpha = check_open_unit(alpha, "alpha", "clopper_pearson_lower")
    k_arr, n_arr = _check_kn(k, n, "clopper_pearson_lower")
    return _out(_cp_lower(k_arr, n_arr, alpha))


def clopper_pearson_upper(k: ArrayLike, n: ArrayLike, alpha: float = 0.05) -> FloatOrArray:
    """Exact one-sided upper bound U with ``P(p <= U) >= 1 - alpha`` (1 when k = n).

    The usual certificate for an error rate: "the failure rate is at most U".
    """
    alpha = check_open_unit(alpha, "alpha", "clopper_pearson_upper")
    k_arr, n_arr = _check_kn(k, n, "clopper_pearson_upper")
    return _out(_cp_upper(k_arr, n_arr, alpha))


def wilson(k: ArrayLike, n: ArrayLike, alpha: float = 0.05) -> Interval:
    """Wilson score interval (no continuity correction); near-nominal, not guaranteed.

    Matches ``scipy.stats.binomtest(k, n).proportion_ci(1 - alpha, method="wilson")``,
    including lower = 0 at k = 0 and upper = 1 at k = n.
    """
    alpha = check_open_unit(alpha, "alpha", "wilson")
    k_arr, n_arr = _check_kn(k, n, "wilson")
    z = special.ndtri(1.0 - alpha / 2)
    p_hat = k_arr / n_arr
    denom = 2.0 * (n_arr + z**2)
    center = (2.0 * k_arr + z**2) / denom
    delta = z / denom * np.sqrt(4.0 * n_arr * p_hat * (1.0 - p_hat) + z**2)
    lower = np.where(k_arr == 0, 0.0, center - delta)
    upper = np.where(k_arr == n_arr, 1.0, center + delta)
    return _out(lower), _out(upper)


def jeffreys(k: ArrayLike, n: ArrayLike, alpha: float = 0.05) -> Interval:
    """Jeffreys interval: equal-tailed quantiles of the Beta(k + 1/2, n - k + 1/2) posterior.

    Follows Brown, Cai and DasGupta (2001): lower = 0 at k = 0 and upper = 1 at k = n.
    Good average coverage, not a guarantee.
    """
    alpha = check_open_unit(alpha, "alpha", "jeffreys")
    k_arr, n_arr = _check_kn(k, n, "jeffreys")
    a, b = k_arr + 0.5, n_arr - k_arr + 0.5
    lower = np.where(k_arr == 0, 0.0, special.betaincinv(a, b, alpha / 2))
    upper = np.where(k_arr == n_arr, 1.0, special.betaincinv(a, b, 1.0 - alpha / 2))
    return _out(lower), _out(upper)


def beta_posterior_quantile(
    k: ArrayLike, n: ArrayLike, q: ArrayLike, prior: tuple[float, float] = (1.0, 1.0)
) -> FloatOrArray:
    """Return the ``q``-quantile of the Beta(a + k, b + n - k) posterior of a proportion.

    ``prior = (a, b)`` is the Beta prior; (1, 1) is uniform, (0.5, 0.5) is Jeffreys.
    ``q`` broadcasts with ``k`` and ``n``.
    """
    where = "beta_posterior_quantile"
    k_arr, n_arr = _check_kn(k, n, where)
    q_arr = as_float_array(q, "q", where)
    if not np.all((q_arr >= 0.0) & (q_arr <= 1.0)):
        raise InputError(f"The 'q' parameter of {where} must be in [0, 1]. Got {q}.")
    if (
        not isinstance(prior, tuple | list)
        or len(prior) != 2
        or not all(isinstance(v, Real) and np.isfinite(v) and v > 0 for v in prior)
    ):
        raise InputError(
            f"The 'prior' parameter of {where} must be two positive numbers (a, b). Got {prior}."
        )
    a, b = float(prior[0]), float(prior[1])
    return _out(stats.beta.ppf(q_arr, a + k_arr, b + n_arr - k_arr))


def hoeffding(k: ArrayLike, n: ArrayLike, alpha: float = 0.05) -> Interval:
    """Two-sided Hoeffding interval ``p_hat +/- sqrt(log(2 / alpha) / (2 n))``.

    Distribution-free and valid for any bounded mean, hence wider than Clopper-Pearson.
    """
    alpha = check_open_unit(alpha, "alpha", "hoeffding")
    k_arr, n_arr = _check_kn(k, n, "hoeffding")
    p_hat = k_arr / n_arr
    half = np.sqrt(np.log(2.0 / alpha) / (2.0 * n_arr))
    return _out(p_hat - half), _out(p_hat + half)
