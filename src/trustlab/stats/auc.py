"""ROC-AUC with an interval, and the paired comparison of two scores on the same items.

* :func:`roc_auc_ci` — the AUC (Mann–Whitney form: ties count one half; equals scikit-learn's
  ``roc_auc_score``, tested) with a DeLong interval (DeLong, DeLong & Clarke-Pearson 1988;
  the ``O(n log n)`` mid-rank algorithm of Sun & Xu 2014: ``AUC ± z·se`` clipped to [0, 1], as
  pROC reports it) or a stratified percentile bootstrap (positives and negatives resampled
  separately, so every resample has both classes).
* :func:`roc_auc_difference` — ``AUC_a - AUC_b`` of two scores on the same items with DeLong's
  paired variance (the covariance of the two AUCs' structural components) and its two-sided
  z-test p-value; e.g. a detector on original vs attacked texts scored on the same labels.

DeLong's variance is checked against its definition computed pair by pair (tested), the
bootstrap against DeLong on large samples. Both intervals are asymptotic approximations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import special
from scipy.stats import rankdata

from trustlab.core.errors import InputError
from trustlab.core.validation import check_open_unit

__all__ = ["AUCDifference", "AUCInterval", "delong_components", "roc_auc_ci", "roc_auc_difference"]


@dataclass(frozen=True)
class AUCInterval:
    """``auc`` with a two-sided ``1 - alpha`` interval; ``se`` is DeLong's (None: bootstrap)."""

    auc: float
    lower: float
    upper: float
    alpha: float
    method: str
    n_positive: int
    n_negative: int
    se: float | None = None


@dataclass(frozen=True)
class AUCDifference:
    """``auc_a - auc_b`` on the same items, DeLong's paired ``se``, interval and p-value."""

    auc_a: float
    auc_b: float
    estimate: float
    lower: float
    upper: float
    se: float
    p_value: float
    alpha: float
    n_positive: int
    n_negative: int


def _labels(y_true: object, where: str) -> np.ndarray:
    y = np.asarray(y_true)
    if y.ndim != 1 or y.size == 0:
        raise InputError(
            f"The 'y_true' parameter of {where} must be a non-empty 1-D array of 0/1 labels. "
            f"Got shape {y.shape}."
        )
    if y.dtype == bool:
        out = y
    elif y.dtype.kind in "iuf":
        if not np.all(np.isfinite(y)) or not np.all(np.isin(y, (0, 1))):
            bad = sorted({float(v) for v in np.unique(y[~np.isin(y, (0, 1))])})[:5]
            raise InputError(
                f"The 'y_true' parameter of {where} must hold 0/1 labels. Got also {bad}."
            )
        out = y.astype(bool)
    else:
        raise InputError(
            f"The 'y_true' parameter of {where} must hold 0/1 or boolean labels. Got dtype "
            f"{y.dtype}."
        )
    if out.all() or not out.any():
        raise InputError(
            f"The 'y_true' parameter of {where} needs both classes (an AUC compares positives "
            f"with negatives). Got only {'positives' if out.all() else 'negatives'}."
        )
    return out


def _scores(scores: object, n: int, name: str, where: str) -> np.ndarray:
    try:
        s = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"The '{name}' parameter of {where} must be numbers.") from exc
    if s.ndim != 1 or s.shape[0] != n:
        raise InputError(
            f"The '{name}' parameter of {where} must hold one score per label ({n}). Got shape "
            f"{s.shape}."
        )
    if not np.all(np.isfinite(s)):
        raise InputError(f"The '{name}' parameter of {where} holds NaN or infinite scores.")
    return s


def delong_components(y: np.ndarray, s: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """AUC and DeLong's structural components ``V10`` [m] (per positive) and ``V01`` [n]
    (per negative) by mid-ranks: ``V10_i = P(score_i > negative) + P(tie) / 2``."""
    pos, neg = s[y], s[~y]
    m, n = pos.size, neg.size
    all_ranks = rankdata(np.concatenate([pos, neg]))
    r_pos, r_neg = rankdata(pos), rankdata(neg)
    v10 = (all_ranks[:m] - r_pos) / n
    v01 = 1.0 - (all_ranks[m:] - r_neg) / m
    return float(v10.mean()), v10, v01


def roc_auc_ci(
    y_true: object,
    scores: object,
    *,
    method: Literal["delong", "bootstrap"] = "delong",
    alpha: float = 0.05,
    n_resamples: int = 2000,
    rng: np.random.Generator | int | None = None,
) -> AUCInterval:
    """ROC-AUC of ``scores`` for ``y_true`` (1 = positive) with a two-sided interval."""
    where = "roc_auc_ci"
    alpha = check_open_unit(alpha, "alpha", where)
    y = _labels(y_true, where)
    s = _scores(scores, y.size, "scores", where)
    auc, v10, v01 = delong_components(y, s)
    m, n = v10.size, v01.size
    if method == "delong":
        var = (np.var(v10, ddof=1) / m if m > 1 else 0.0) + (
            np.var(v01, ddof=1) / n if n > 1 else 0.0
        )
        se = float(np.sqrt(var))
        z = float(special.ndtri(1 - alpha / 2))
        lo, hi = max(0.0, auc - z * se), min(1.0, auc + z * se)
        return AUCInterval(auc, lo, hi, alpha, "delong", m, n, se)
    if method != "bootstrap":
        raise InputError(
            f"The 'method' parameter of {where} must be 'delong' or 'bootstrap'. Got {method!r}."
        )
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 100:
        raise InputError(
            f"The 'n_resamples' parameter of {where} must be an integer >= 100. Got "
            f"{n_resamples!r}."
        )
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    pos, neg = s[y], s[~y]
    stats = np.empty(n_resamples)
    labels = np.concatenate([np.ones(m, bool), np.zeros(n, bool)])
    for b in range(n_resamples):
        bp = pos[gen.integers(0, m, m)]
        bn = neg[gen.integers(0, n, n)]
        stats[b] = delong_components(labels, np.concatenate([bp, bn]))[0]
    lo, hi = np.quantile(stats, [alpha / 2, 1 - alpha / 2])
    return AUCInterval(auc, float(lo), float(hi), alpha, "bootstrap", m, n)


def roc_auc_difference(
    y_true: object, scores_a: object, scores_b: object, *, alpha: float = 0.05
) -> AUCDifference:
    """``AUC(scores_a) - AUC(scores_b)`` on the same items with DeLong's paired interval."""
    where = "roc_auc_difference"
    alpha = check_open_unit(alpha, "alpha", where)
    y = _labels(y_true, where)
    sa = _scores(scores_a, y.size, "scores_a", where)
    sb = _scores(scores_b, y.size, "scores_b", where)
    auc_a, v10a, v01a = delong_components(y, sa)
    auc_b, v10b, v01b = delong_components(y, sb)
    m, n = v10a.size, v01a.size
    s10 = np.cov(np.stack([v10a, v10b])) if m > 1 else np.zeros((2, 2))
    s01 = np.cov(np.stack([v01a, v01b])) if n > 1 else np.zeros((2, 2))
    cov = s10 / m + s01 / n
    var = float(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
    se = float(np.sqrt(max(var, 0.0)))
    diff = auc_a - auc_b
    z = float(special.ndtri(1 - alpha / 2))
    p = float(2 * special.ndtr(-abs(diff) / se)) if se > 0 else 1.0 if diff == 0 else 0.0
    return AUCDifference(
        auc_a, auc_b, diff, max(-1.0, diff - z * se), min(1.0, diff + z * se), se, p, alpha, m, n
    )
