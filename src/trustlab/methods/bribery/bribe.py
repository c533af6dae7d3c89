"""The manipulation model: what bribing a dataset does to the target's scores.

Bribing dataset ``d`` (training the target on it) moves the target to the top of ``d``: its score
becomes ``best other score on d + margin`` (:class:`BribeModel`), or a user-given ``ceiling``
(e.g. 100 for accuracy in %), never lower than its current score. Other models' scores never move.
Only datasets on which the target has a score can be bribed (a missing evaluation stays missing),
and a dataset where bribing changes nothing is not counted as a bribe.

General shift bribery (:func:`shift_scores`) shifts the target ``k`` positions up on a dataset: its
score becomes that of the ``k``-th model above it plus the margin (models tied at that score are
passed together), at a per-dataset, per-shift cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from trustlab.core.errors import InputError
from trustlab.core.validation import as_float_array, check_scalar
from trustlab.methods.bribery.rules import _as_scores, check_target

__all__ = ["DEFAULT_MARGIN", "BribeModel", "apply_bribe", "shift_options", "shift_scores"]

#: Default margin above the best other score: small against any score scale in use (accuracies in
#: [0, 1] or [0, 100]) yet far above float rounding, so a bribed target is strictly on top.
DEFAULT_MARGIN = 1e-6


@dataclass(frozen=True)
class BribeModel:
    """How a bribe changes the target's score on a dataset.

    ``margin``: amount added to the best other score on the dataset (> 0 makes the target the
    strict top of the dataset). ``ceiling``: if given, a bribed score becomes this value instead
    (a scalar, or one value per dataset); if it is not above the other scores the target gains less.
    """

    margin: float = DEFAULT_MARGIN
    ceiling: float | Sequence[float] | None = None

    def __post_init__(self) -> None:
        margin = check_scalar(self.margin, "margin", "BribeModel", lo=0.0)
        object.__setattr__(self, "margin", margin)
        if self.ceiling is not None:
            ceil = as_float_array(self.ceiling, "ceiling", "BribeModel", ndim=(0, 1))
            object.__setattr__(self, "ceiling", float(ceil) if ceil.ndim == 0 else tuple(ceil))

    def bribed_matrix(self, scores: np.ndarray) -> np.ndarray:
        """W[t, d]: the score target ``t`` would have on ``d`` after bribing ``d`` (NaN where the
        target has no score), for every model at once."""
        s = _as_scores(scores, "BribeModel.bribed_matrix")
        return self._bribed(s)

    def _bribed(self, s: np.ndarray) -> np.ndarray:
        n, m = s.shape
        present = ~np.isnan(s)
        if self.ceiling is not None:
            ceil = np.asarray(self.ceiling, dtype=float)
            if ceil.ndim == 1 and ceil.shape != (m,):
                raise InputError(
                    f"The 'ceiling' of a BribeModel must be one number or {m} (one per dataset). "
                    f"Got {ceil.shape[0]}."
                )
            ceil = np.broadcast_to(ceil, (m,))
            w = np.maximum(s, ceil[None, :])
            return np.where(present, w, np.nan)
        filled = np.where(present, s, -np.inf)
        if n == 1:
            return np.where(present, s, np.nan)
        order = np.argsort(-filled, axis=0, kind="stable")
        top1 = filled[order[0], np.arange(m)]
        top2 = filled[order[1], np.arange(m)]
        is_top = np.zeros_like(present)
        is_top[order[0], np.arange(m)] = True
        best_other = np.where(is_top, top2[None, :], top1[None, :])
        with np.errstate(invalid="ignore"):
            w = np.where(np.isfinite(best_other), np.maximum(s, best_other + self.margin), s)
        return np.where(present, w, np.nan)

    def bribed_values(self, scores: np.ndarray, target: int) -> np.ndarray:
        """The target's score on each dataset after bribing it (NaN where missing)."""
        s = _as_scores(scores, "BribeModel.bribed_values")
        target = check_target(target, s.shape[0], "BribeModel.bribed_values")
        return self._bribed(s)[target]

    def bribable(self, scores: np.ndarray, target: int) -> np.ndarray:
        """Boolean mask of datasets where a bribe changes the target's score."""
        s = _as_scores(scores, "BribeModel.bribable")
        target = check_target(target, s.shape[0], "BribeModel.bribable")
        w = self._bribed(s)[target]
        with np.errstate(invalid="ignore"):
            return ~np.isnan(w) & (w > s[target])


def apply_bribe(
    scores: np.ndarray, target: int, datasets: Sequence[int], model: BribeModel | None = None
) -> np.ndarray:
    """A copy of ``scores`` with ``target`` bribed on the given dataset indices."""
    where = "apply_bribe"
    s = _as_scores(scores, where).copy()
    target = check_target(target, s.shape[0], where)
    if model is not None and not isinstance(model, BribeModel):
        raise InputError(f"The 'model' parameter of {where} must be a BribeModel. Got {type(model).__name__}.")
    model = model or BribeModel()
    w = model._bribed(s)[target]
    idx = _dataset_indices(datasets, s.shape[1], where)
    if idx.size:
        ok = ~np.isnan(s[target, idx])
        s[target, idx[ok]] = w[idx[ok]]
    return s


def _dataset_indices(datasets: object, m: int, where: str) -> np.ndarray:
    """Distinct dataset indices in ``[0, m)`` (a negative index would wrap around silently)."""
    if isinstance(datasets, str) or not isinstance(datasets, Iterable):
        raise InputError(
            f"The 'datasets' parameter of {where} must be dataset indices. Got {datasets!r}."
        )
    idx = np.array(
        [check_scalar(d, "datasets", where, kind=int, lo=0, hi=m - 1) for d in datasets], dtype=int
    )
    if np.unique(idx).size != idx.size:
        raise InputError(f"The 'datasets' parameter of {where} names a dataset twice.")
    return idx


def shift_options(scores: np.ndarray, target: int, margin: float = DEFAULT_MARGIN) -> list[np.ndarray]:
    """For each dataset, the target's score after shifting it up k = 1, 2, ... positions
    (distinct score levels above it; tied models are passed together)."""
    s = _as_scores(scores, "shift_options")
    target = check_target(target, s.shape[0], "shift_options")
    margin = check_scalar(margin, "margin", "shift_options", lo=0.0)
    out = []
    for d in range(s.shape[1]):
        v = s[target, d]
        if np.isnan(v):
            out.append(np.empty(0))
            continue
        others = np.delete(s[:, d], target)
        above = np.unique(others[~np.isnan(others) & (others >= v)])
        out.append(above + margin)
    return out


def shift_scores(
    scores: np.ndarray,
    target: int,
    shifts: Mapping[int, int] | Sequence[int],
    margin: float = DEFAULT_MARGIN,
) -> np.ndarray:
    """A copy of ``scores`` with the target shifted ``shifts[d]`` positions up on dataset ``d``."""
    where = "shift_scores"
    s = _as_scores(scores, where).copy()
    target = check_target(target, s.shape[0], where)
    opts = shift_options(s, target, margin)
    if isinstance(shifts, Mapping):
        items = list(shifts.items())
    elif isinstance(shifts, str) or not isinstance(shifts, Sequence | np.ndarray):
        raise InputError(
            f"The 'shifts' parameter of {where} must map dataset index -> positions, or list one "
            f"count per dataset. Got {type(shifts).__name__}."
        )
    else:
        if len(shifts) != s.shape[1]:
            raise InputError(
                f"The 'shifts' parameter of {where} must list {s.shape[1]} counts (one per "
                f"dataset). Got {len(shifts)}."
            )
        items = list(enumerate(shifts))
    for d, k in items:
        d = check_scalar(d, "shifts (dataset index)", where, kind=int, lo=0, hi=s.shape[1] - 1)
        k = check_scalar(k, "shifts (positions)", where, kind=int, lo=0)
        if k == 0:
            continue
        if k > len(opts[d]):
            raise InputError(
                f"Cannot shift the target {k} positions on dataset {d}: only {len(opts[d])} above it."
            )
        s[target, d] = opts[d][k - 1]
    return s
