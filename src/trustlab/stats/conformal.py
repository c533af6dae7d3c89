"""Split-conformal quantiles and p-values with the finite-sample correction.

Given ``n`` exchangeable calibration scores, the ``k``-th smallest score with
``k = ceil((n + 1)(1 - alpha))`` is a threshold that a fresh exchangeable score stays
below with probability at least ``1 - alpha`` (and, for continuous scores, at most
``1 - alpha + 1 / (n + 1)``). ``alpha`` is the miscoverage throughout.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trustlab.core.errors import InputError
from trustlab.core.validation import as_float_array, check_open_unit, check_scalar

__all__ = ["conformal_pvalues", "conformal_quantile", "conformal_rank"]

# (n + 1)(1 - alpha) is often an integer in exact arithmetic (n = 19, alpha = 0.05) but lands a
# few ulps above it in floating point; without this slack ceil() would ask for one rank too many.
_RANK_SLACK = 1e-9


def _as_scores(scores: ArrayLike, name: str, where: str) -> NDArray[np.float64]:
    """1-D, non-empty scores; +-inf is a legitimate score (never / always conforming), NaN not."""
    arr = as_float_array(scores, name, where, ndim=1, allow_nonfinite=True)
    if np.isnan(arr).any():
        raise InputError(
            f"The '{name}' parameter of {where} contains {int(np.isnan(arr).sum())} NaN values."
        )
    return arr


def conformal_rank(n: int, alpha: float) -> int:
    """Return the 1-based rank ``k = ceil((n + 1)(1 - alpha))`` of the conformal threshold.

    Raises InputError when ``k > n``: too few calibration scores for a finite threshold at
    this ``alpha`` (the threshold would be +infinity).
    """
    alpha = check_open_unit(alpha, "alpha", "conformal_rank")
    n = check_scalar(n, "n", "conformal_rank", kind=int, lo=0)
    k = math.ceil((n + 1) * (1.0 - alpha) - _RANK_SLACK)
    if k > n:
        need = math.ceil((1.0 - alpha) / alpha - _RANK_SLACK)
        raise InputError(f"Need at least {need} calibration scores for alpha={alpha}, got {n}.")
    return k


def conformal_quantile(scores: ArrayLike, alpha: float) -> float:
    """Return the split-conformal threshold: the ``ceil((n + 1)(1 - alpha))``-th smallest score.

    This is the empirical quantile at level ``ceil((n + 1)(1 - alpha)) / n``, the finite-sample
    correction that makes ``P(test score <= threshold) >= 1 - alpha`` under exchangeability.
    """
    alpha = check_open_unit(alpha, "alpha", "conformal_quantile")
    arr = _as_scores(scores, "scores", "conformal_quantile")
    k = conformal_rank(arr.size, alpha)
    return float(np.partition(arr, k - 1)[k - 1])


def conformal_pvalues(cal_scores: ArrayLike, test_scores: ArrayLike) -> NDArray[np.float64]:
    """Return conformal p-values ``(1 + #{cal >= s}) / (n + 1)`` for each test score ``s``.

    Large scores mean "nonconforming". Under exchangeability each p-value is super-uniform,
    ``P(p <= u) <= u``, so ``p > alpha`` is a valid level-``1 - alpha`` acceptance rule.
    The result has the shape of ``test_scores`` (a 0-d array for a scalar).
    """
    cal = np.sort(_as_scores(cal_scores, "cal_scores", "conformal_pvalues"))
    test = as_float_array(
        test_scores, "test_scores", "conformal_pvalues", allow_nonfinite=True, allow_empty=True
    )
    if np.isnan(test).any():
        raise InputError(
            "The 'test_scores' parameter of conformal_pvalues contains "
            f"{int(np.isnan(test).sum())} NaN values."
        )
    n = cal.size
    n_geq = n - np.searchsorted(cal, test, side="left")
    return (1.0 + n_geq) / (n + 1.0)
