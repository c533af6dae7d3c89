"""Aggregation rules that turn a score matrix (models × datasets) into one number per model.

Datasets are voters, models are candidates. Every rule is vectorised over models and treats a
missing score (NaN) by skipping the pairs it takes part in:

* ``mean``     arithmetic mean of the model's non-missing scores.
* ``median``   median of the model's non-missing scores (mean of the two middle ones when even).
* ``mwr``      HELM's mean win rate: on each dataset, the fraction of *other* models with a score
               that the model beats, a tie counting one half (HELM's ``value_to_wins``); datasets
               with fewer than two scores are skipped; averaged over the model's datasets.
* ``borda``    Borda count: on each dataset one point per other model beaten (½ per tie).
* ``copeland`` pairwise majority: model i beats j when more datasets rank i above j than j above
               i (datasets where either is missing abstain); Copeland score = wins + ½ ties. A
               Condorcet winner, when there is one, is exactly the model with Copeland score n-1.

Unique winner: the target's aggregate is strictly above every other model's, up to a relative
tolerance of :data:`TIE_RTOL` that absorbs floating-point noise (aggregates equal up to rounding
count as a tie, so the target is then not the unique winner).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from trustlab.core.errors import InputError
from trustlab.core.validation import as_float_array, check_choice, check_scalar

__all__ = [
    "RULES",
    "TIE_RTOL",
    "Rule",
    "aggregate",
    "borda_scores",
    "condorcet_winner",
    "copeland_scores",
    "is_unique_winner",
    "mean_scores",
    "mean_win_rate",
    "median_scores",
    "pairwise_margins",
    "target_margins",
    "unique_winner",
    "wins2",
]

Rule = Literal["mean", "median", "mwr", "borda", "copeland"]
RULES: tuple[str, ...] = ("mean", "median", "mwr", "borda", "copeland")
TIE_RTOL = 1e-9


def _as_scores(scores: np.ndarray, where: str = "") -> np.ndarray:
    """A models x datasets float matrix (a Leaderboard or an array); NaN marks a missing score."""
    where = where or "the bribery rules"
    arr = as_float_array(
        getattr(scores, "scores", scores), "scores", where, ndim=2, allow_nonfinite=True
    )
    if np.isinf(arr).any():
        raise InputError(
            f"The 'scores' parameter of {where} must be finite or NaN (missing). "
            f"Got {int(np.isinf(arr).sum())} infinite value(s)."
        )
    return arr


def check_rule(rule: str, allowed: tuple[str, ...] = RULES) -> str:
    if not isinstance(rule, str) or rule not in allowed:
        raise InputError(f"Unknown aggregation rule {rule!r}. Choose one of: {', '.join(allowed)}.")
    return rule


def check_target(target: object, n: int, where: str, models: tuple[str, ...] | None = None) -> int:
    """A model index in ``[0, n)`` (or, with ``models``, a model name)."""
    if isinstance(target, str):
        if models is not None and target in models:
            return models.index(target)
        raise InputError(
            f"The 'target' parameter of {where} must be a model index in [0, {n})"
            + (" or a model name" if models is not None else "")
            + f". Got {target!r}."
        )
    return check_scalar(target, "target", where, kind=int, lo=0, hi=n - 1)


def check_margins(margins: object, n: int, where: str) -> np.ndarray:
    """Pairwise margins as :func:`pairwise_margins` returns them (an ``(n, n)`` integer matrix)."""
    if isinstance(margins, np.ndarray) and margins.shape == (n, n) and margins.dtype.kind == "i":
        if not np.array_equal(margins, -margins.T):
            raise InputError(
                f"The 'margins' parameter of {where} must be antisymmetric (M[i, j] = -M[j, i]) "
                "as pairwise_margins returns it."
            )
        return margins
    arr = as_float_array(margins, "margins", where, ndim=2)
    if arr.shape != (n, n) or np.any(arr != np.round(arr)) or np.any(arr != -arr.T):
        raise InputError(
            f"The 'margins' parameter of {where} must be the ({n}, {n}) antisymmetric integer "
            f"matrix pairwise_margins returns. Got shape {arr.shape}."
        )
    return arr.astype(np.int64)


def wins2(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per (model, dataset): twice the number of other models beaten (a tie counts 1), and the
    number of models with a score on each dataset. Missing cells get 0 wins."""
    s = _as_scores(scores, "wins2")
    n, m = s.shape
    out = np.zeros((n, m), dtype=np.int64)
    present = ~np.isnan(s)
    counts = present.sum(axis=0)
    for d in range(m):
        mask = present[:, d]
        vals = s[mask, d]
        srt = np.sort(vals)
        less = np.searchsorted(srt, vals, side="left")
        leq = np.searchsorted(srt, vals, side="right")
        out[mask, d] = 2 * less + (leq - less - 1)
    return out, counts


def mean_scores(scores: np.ndarray) -> np.ndarray:
    """Mean of each model's non-missing scores (NaN for a model with none)."""
    s = _as_scores(scores, "mean_scores")
    present = ~np.isnan(s)
    total = np.where(present, s, 0.0).sum(axis=1)
    cnt = present.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, total / np.maximum(cnt, 1), np.nan)


def median_scores(scores: np.ndarray) -> np.ndarray:
    """Median of each model's non-missing scores (NaN for a model with none)."""
    s = _as_scores(scores, "median_scores")
    out = np.full(s.shape[0], np.nan)
    ok = (~np.isnan(s)).any(axis=1)
    if ok.any():
        out[ok] = np.nanmedian(s[ok], axis=1)
    return out


def mean_win_rate(scores: np.ndarray, ties: Literal["half", "loss", "win"] = "half") -> np.ndarray:
    """HELM mean win rate (see module docstring). ``ties``: how a tied pair counts ("half" is
    HELM's rule; "loss"/"win" bracket it, useful when scores were rounded)."""
    s = _as_scores(scores, "mean_win_rate")
    check_choice(ties, "ties", ("half", "loss", "win"), "mean_win_rate")
    w2, counts = wins2(s)
    present = ~np.isnan(s)
    if ties != "half":
        tie_count = np.zeros_like(w2)
        for d in range(s.shape[1]):
            mask = present[:, d]
            vals = s[mask, d]
            srt = np.sort(vals)
            tie_count[mask, d] = (
                np.searchsorted(srt, vals, "right") - np.searchsorted(srt, vals, "left") - 1
            )
        w2 = w2 - tie_count if ties == "loss" else w2 + tie_count
    valid = present & (counts >= 2)[None, :]
    rate = np.where(valid, w2 / (2.0 * np.maximum(counts - 1, 1))[None, :], 0.0)
    n_valid = valid.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_valid > 0, rate.sum(axis=1) / np.maximum(n_valid, 1), np.nan)


def borda_scores(scores: np.ndarray) -> np.ndarray:
    """Borda count: per dataset, other models beaten (½ per tie), summed over datasets."""
    w2, _ = wins2(scores)
    return w2.sum(axis=1) / 2.0


def pairwise_margins(scores: np.ndarray) -> np.ndarray:
    """M[i, j] = #datasets with i above j − #datasets with j above i (pairs with a NaN abstain)."""
    s = _as_scores(scores, "pairwise_margins")
    n, m = s.shape
    dtype = np.int16 if m < 32000 else np.int32
    out = np.zeros((n, n), dtype=dtype)
    filled = np.where(np.isnan(s), 0.0, s)
    present = ~np.isnan(s)
    for d in range(m):
        col = filled[:, d]
        sign = np.sign(col[:, None] - col[None, :]).astype(dtype)
        if not present[:, d].all():
            both = present[:, d][:, None] & present[:, d][None, :]
            sign *= both
        out += sign
    return out


def target_margins(scores: np.ndarray, target: int) -> np.ndarray:
    """Row ``target`` of :func:`pairwise_margins` in O(n·m)."""
    s = _as_scores(scores, "target_margins")
    target = check_target(target, s.shape[0], "target_margins")
    diff = np.sign(s[target][None, :] - s)
    return np.nansum(diff, axis=1).astype(np.int64)


def copeland_scores(scores: np.ndarray, margins: np.ndarray | None = None) -> np.ndarray:
    """Copeland score: pairwise-majority wins + ½ pairwise ties."""
    s = _as_scores(scores, "copeland_scores")
    M = pairwise_margins(s) if margins is None else check_margins(margins, s.shape[0], "copeland_scores")
    c2 = 2 * (M > 0).sum(axis=1) + (M == 0).sum(axis=1) - 1  # the diagonal is a "tie" with itself
    return c2 / 2.0


def condorcet_winner(scores: np.ndarray, margins: np.ndarray | None = None) -> int | None:
    """The model beating every other in pairwise majority, or None."""
    s = _as_scores(scores, "condorcet_winner")
    M = pairwise_margins(s) if margins is None else check_margins(margins, s.shape[0], "condorcet_winner")
    n = M.shape[0]
    wins = (M > 0).sum(axis=1)
    hit = np.flatnonzero(wins == n - 1)
    return int(hit[0]) if hit.size else None


def aggregate(scores: np.ndarray, rule: str) -> np.ndarray:
    """One aggregate per model under ``rule`` (higher is better; NaN = no score at all)."""
    check_rule(rule)
    scores = _as_scores(scores, "aggregate")
    if rule == "mean":
        return mean_scores(scores)
    if rule == "median":
        return median_scores(scores)
    if rule == "mwr":
        return mean_win_rate(scores)
    if rule == "borda":
        return borda_scores(scores)
    return copeland_scores(scores)


def _threshold(values: np.ndarray) -> float:
    return float(values + TIE_RTOL * max(1.0, abs(values)))


def is_unique_winner(agg: np.ndarray, target: int) -> bool:
    """True when ``agg[target]`` is strictly above every other model's aggregate (see TIE_RTOL)."""
    agg = _aggregates(agg, "is_unique_winner")
    target = check_target(target, agg.size, "is_unique_winner")
    return _is_unique_winner(agg, target)


def _aggregates(agg: object, where: str) -> np.ndarray:
    arr = as_float_array(agg, "agg", where, ndim=1, allow_nonfinite=True)
    if np.isinf(arr).any():
        raise InputError(f"The 'agg' parameter of {where} must be finite or NaN (no score).")
    return arr


def _is_unique_winner(agg: np.ndarray, target: int) -> bool:
    if np.isnan(agg[target]):
        return False
    others = np.delete(agg, target)
    others = others[~np.isnan(others)]
    if others.size == 0:
        return True
    return bool(agg[target] > _threshold(others.max()))


def unique_winner(agg: np.ndarray) -> int | None:
    """Index of the unique winner of an aggregate vector, or None if the top is tied."""
    agg = _aggregates(agg, "unique_winner")
    if np.isnan(agg).all():
        return None
    best = int(np.nanargmax(agg))
    return best if _is_unique_winner(agg, best) else None
