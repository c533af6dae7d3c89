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


def _as_scores(scores: np.ndarray) -> np.ndarray:
    arr = np.asarray(getattr(scores, "scores", scores), dtype=float)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise InputError(f"Scores must be a non-empty 2-D array (models × datasets). Got {arr.shape}.")
    return arr


def check_rule(rule: str, allowed: tuple[str, ...] = RULES) -> str:
    if rule not in allowed:
        raise InputError(f"Unknown aggregation rule '{rule}'. Choose one of: {', '.join(allowed)}.")
    return rule


def wins2(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per (model, dataset): twice the number of other models beaten (a tie counts 1), and the
    number of models with a score on each dataset. Missing cells get 0 wins."""
    s = _as_scores(scores)
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
    s = _as_scores(scores)
    present = ~np.isnan(s)
    total = np.where(present, s, 0.0).sum(axis=1)
    cnt = present.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, total / np.maximum(cnt, 1), np.nan)


def median_scores(scores: np.ndarray) -> np.ndarray:
    s = _as_scores(scores)
    out = np.full(s.shape[0], np.nan)
    ok = (~np.isnan(s)).any(axis=1)
    if ok.any():
        out[ok] = np.nanmedian(s[ok], axis=1)
    return out


def mean_win_rate(scores: np.ndarray, ties: Literal["half", "loss", "win"] = "half") -> np.ndarray:
    """HELM mean win rate (see module docstring). ``ties``: how a tied pair counts ("half" is
    HELM's rule; "loss"/"win" bracket it, useful when scores were rounded)."""
    s = _as_scores(scores)
    w2, counts = wins2(s)
    present = ~np.isnan(s)
    if ties != "half":
        if ties not in ("loss", "win"):
            raise InputError(f"The 'ties' parameter must be 'half', 'loss' or 'win'. Got '{ties}'.")
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
    s = _as_scores(scores)
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
    s = _as_scores(scores)
    diff = np.sign(s[target][None, :] - s)
    return np.nansum(diff, axis=1).astype(np.int64)


def copeland_scores(scores: np.ndarray, margins: np.ndarray | None = None) -> np.ndarray:
    """Copeland score: pairwise-majority wins + ½ pairwise ties."""
    M = pairwise_margins(scores) if margins is None else margins
    c2 = 2 * (M > 0).sum(axis=1) + (M == 0).sum(axis=1) - 1  # the diagonal is a "tie" with itself
    return c2 / 2.0


def condorcet_winner(scores: np.ndarray, margins: np.ndarray | None = None) -> int | None:
    """The model beating every other in pairwise majority, or None."""
    M = pairwise_margins(scores) if margins is None else margins
    n = M.shape[0]
    wins = (M > 0).sum(axis=1)
    hit = np.flatnonzero(wins == n - 1)
    return int(hit[0]) if hit.size else None


def aggregate(scores: np.ndarray, rule: str) -> np.ndarray:
    """One aggregate per model under ``rule`` (higher is better; NaN = no score at all)."""
    check_rule(rule)
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
    agg = np.asarray(agg, dtype=float)
    if np.isnan(agg[target]):
        return False
    others = np.delete(agg, target)
    others = others[~np.isnan(others)]
    if others.size == 0:
        return True
    return bool(agg[target] > _threshold(others.max()))


def unique_winner(agg: np.ndarray) -> int | None:
    """Index of the unique winner of an aggregate vector, or None if the top is tied."""
    agg = np.asarray(agg, dtype=float)
    if np.isnan(agg).all():
        return None
    best = int(np.nanargmax(agg))
    return best if is_unique_winner(agg, best) else None
