"""Geolocation metrics and POPI (Person-Origin Perturbation Indicators).

Definitions (docs/methods/geobias.md states them with their assumptions):

* **error**: haversine distance (km) between prediction and truth; a missing prediction (NaN
  row: an unparseable answer) has error NaN and counts as a miss at every threshold.
* **POPI pull** (km): for a counterfactual pair -- the same background with a *reference*
  insertion (a neutral subject, or none) and with a subject of group g -- the mean over pairs
  of ``d(ref, c_g) - d(edit, c_g)``, where ``c_g`` is the centroid of the region associated
  with g: how much closer the inserted subject moved the prediction to its group's region.
  Zero for a model that ignores the subject; pairs with a missing prediction are left out of
  the pull (and counted in ``n_missing``).
* **POPI flip rate**: among pairs whose reference prediction is *outside* the group's region,
  the share whose edited prediction is *inside* it (a missing edited prediction is not a flip).
  ``flip_out_rate`` is the reverse (inside -> outside), the flip rate a model with no pull but
  noisy predictions would also show; ``net_flip`` is their difference.
* Intervals: percentile bootstrap over ``clusters`` (the backgrounds: pairs sharing a background
  are resampled together), of the ratio of cluster sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trustlab.core.errors import InputError
from trustlab.core.validation import as_float_array, check_open_unit, check_scalar
from trustlab.methods.geobias.geo import EARTH_RADIUS_KM, as_coordinates
from trustlab.stats.bootstrap import bootstrap_ci, check_random_state

__all__ = [
    "POPI",
    "AccuracyDrop",
    "accuracy_drop",
    "as_predictions",
    "attribution_share",
    "popi",
    "prediction_errors_km",
]


def as_predictions(value: ArrayLike, name: str = "predictions", where: str = "") -> NDArray[np.float64]:
    """Predictions as ``(n, 2)`` (lat, lon) floats; a ``(NaN, NaN)`` row is a missing one."""
    arr = as_float_array(value, name, where, allow_nonfinite=True)
    if arr.ndim == 1 and arr.shape[0] == 2:
        arr = arr[None]
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise InputError(f"The '{name}' parameter of {where} must be (lat, lon) pairs of shape "
                         f"(n, 2). Got shape {arr.shape}.")
    if np.isinf(arr).any():
        raise InputError(f"The '{name}' parameter of {where} must not hold infinities "
                         "(NaN rows mean 'no prediction').")
    half = np.isnan(arr).any(axis=1) & ~np.isnan(arr).all(axis=1)
    if half.any():
        raise InputError(f"The '{name}' parameter of {where} has a row with one NaN coordinate "
                         f"(row {int(np.flatnonzero(half)[0])}); a missing prediction is (NaN, NaN).")
    ok = ~np.isnan(arr).any(axis=1)
    if ok.any():
        as_coordinates(arr[ok], name, where)
    return arr


def _hav(p: NDArray[np.float64], q: NDArray[np.float64]) -> NDArray[np.float64]:
    la1, lo1, la2, lo2 = (np.radians(v) for v in (p[:, 0], p[:, 1], q[:, 0], q[:, 1]))
    h = np.sin((la2 - la1) / 2) ** 2 + np.cos(la1) * np.cos(la2) * np.sin((lo2 - lo1) / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))


def prediction_errors_km(predictions: ArrayLike, truth: ArrayLike) -> NDArray[np.float64]:
    """Haversine error per row; NaN where the prediction is missing (a NaN row)."""
    where = "prediction_errors_km"
    p = as_predictions(predictions, "predictions", where)
    t = as_coordinates(truth, "truth", where)
    if len(t) == 1 and len(p) > 1:
        t = np.repeat(t, len(p), axis=0)
    if len(p) != len(t):
        raise InputError(f"The inputs of {where} must have the same number of samples. "
                         f"Got 'predictions' {len(p)}, 'truth' {len(t)}.")
    return _hav(p, t)


def _flags(value: Any, name: str, n: int, where: str) -> NDArray[np.bool_]:
    arr = np.asarray(value)
    if arr.dtype.kind != "b":
        if arr.dtype.kind in "iuf" and arr.size and np.isin(arr, (0, 1)).all():
            arr = arr.astype(bool)
        else:
            raise InputError(f"The '{name}' parameter of {where} must be booleans. "
                             f"Got dtype {arr.dtype}.")
    if arr.shape != (n,):
        raise InputError(f"The '{name}' parameter of {where} must have shape ({n},). "
                         f"Got {arr.shape}.")
    return arr


def _clusters(clusters: Any, n: int, where: str) -> NDArray[np.intp]:
    if clusters is None:
        return np.arange(n)
    arr = np.asarray(clusters)
    if arr.shape != (n,) or arr.dtype.kind not in "iuUSO":
        raise InputError(f"The 'clusters' parameter of {where} must be one label per pair "
                         f"(shape ({n},)). Got shape {arr.shape}.")
    return np.unique(arr.astype(str), return_inverse=True)[1]


def _ratio_ci(num: NDArray[np.float64], den: NDArray[np.float64], cl: NDArray[np.intp],
              n_resamples: int, level: float, rng: np.random.Generator) -> tuple[float, float, float]:
    k = int(cl.max()) + 1
    sn = np.bincount(cl, weights=num, minlength=k)
    sd = np.bincount(cl, weights=den, minlength=k)
    if sd.sum() <= 0:
        return float("nan"), float("nan"), float("nan")

    def stat(a: NDArray[np.float64], b: NDArray[np.float64], axis: int = -1) -> Any:
        d = b.sum(axis=axis)
        return np.where(d > 0, a.sum(axis=axis) / np.where(d > 0, d, 1), np.nan)

    if k < 2:
        est = float(sn.sum() / sd.sum())
        return est, est, est
    res = bootstrap_ci((sn, sd), stat, n_resamples=n_resamples, confidence_level=level, rng=rng,
                       paired=True, vectorized=True)
    return res.estimate, res.low, res.high


@dataclass(frozen=True)
class POPI:
    """POPI over ``n`` pairs: pull (km) and flip rates with bootstrap intervals."""

    pull_km: float
    pull_low: float
    pull_high: float
    flip_rate: float
    flip_low: float
    flip_high: float
    flip_out_rate: float
    net_flip: float
    net_flip_low: float
    net_flip_high: float
    n: int
    n_eligible: int
    n_missing: int
    confidence_level: float


def popi(
    reference: ArrayLike,
    edited: ArrayLike,
    target: ArrayLike,
    reference_in_target: ArrayLike,
    edited_in_target: ArrayLike,
    *,
    clusters: ArrayLike | None = None,
    n_resamples: int = 2000,
    confidence_level: float = 0.95,
    rng: np.random.Generator | int | None = 0,
) -> POPI:
    """POPI of paired predictions (module docstring): ``reference``/``edited`` ``(n, 2)``
    predictions (NaN rows: missing), ``target`` the group region's centroid per pair (``(n, 2)``
    or one pair), ``*_in_target`` whether each prediction lies in the group's region."""
    where = "popi"
    ref = as_predictions(reference, "reference", where)
    edit = as_predictions(edited, "edited", where)
    n = len(ref)
    if len(edit) != n:
        raise InputError(f"The inputs of {where} must have the same number of samples. "
                         f"Got 'reference' {n}, 'edited' {len(edit)}.")
    tgt = as_coordinates(target, "target", where)
    if len(tgt) == 1:
        tgt = np.repeat(tgt, n, axis=0)
    if len(tgt) != n:
        raise InputError(f"The 'target' parameter of {where} must be one pair or one per pair "
                         f"({n}). Got {len(tgt)}.")
    rin = _flags(reference_in_target, "reference_in_target", n, where)
    ein = _flags(edited_in_target, "edited_in_target", n, where)
    cl = _clusters(clusters, n, where)
    check_scalar(n_resamples, "n_resamples", where, kind=int, lo=2)
    level = check_open_unit(confidence_level, "confidence_level", where)
    gen = check_random_state(rng, "rng", where)
    ok = ~(np.isnan(ref).any(1) | np.isnan(edit).any(1))
    pull = np.zeros(n)
    pull[ok] = _hav(ref[ok], tgt[ok]) - _hav(edit[ok], tgt[ok])
    ref_known = ~np.isnan(ref).any(1)
    rin = rin & ref_known
    ein = ein & ~np.isnan(edit).any(1)
    out_ref = ref_known & ~rin
    p, pl, ph = _ratio_ci(pull, ok.astype(float), cl, n_resamples, level, gen)
    f, fl, fh = _ratio_ci((out_ref & ein).astype(float), out_ref.astype(float), cl, n_resamples,
                          level, gen)
    fo = float(((rin & ~ein).sum() / rin.sum()) if rin.any() else np.nan)
    net = (out_ref & ein).astype(float) - (rin & ~ein).astype(float)
    nf, nfl, nfh = _ratio_ci(net, ref_known.astype(float), cl, n_resamples, level, gen)
    return POPI(p, pl, ph, f, fl, fh, fo, nf, nfl, nfh, n, int(out_ref.sum()),
                int((~ok).sum()), level)


@dataclass(frozen=True)
class AccuracyDrop:
    """Accuracy with the reference insertion vs with the edit, and the drop between them.

    ``drop = acc_reference - acc_edited`` (points), ``relative = drop / acc_reference``.
    """

    acc_reference: float
    acc_edited: float
    drop: float
    drop_low: float
    drop_high: float
    relative: float
    relative_low: float
    relative_high: float
    n_reference: int
    n_edited: int


def accuracy_drop(
    correct_reference: ArrayLike,
    correct_edited: ArrayLike,
    *,
    clusters_reference: ArrayLike | None = None,
    clusters_edited: ArrayLike | None = None,
    n_resamples: int = 2000,
    confidence_level: float = 0.95,
    rng: np.random.Generator | int | None = 0,
) -> AccuracyDrop:
    """The drop from ``correct_reference`` (e.g. matched-group insertions) to
    ``correct_edited`` (mismatched ones), bootstrapped over shared clusters (backgrounds):
    a cluster's reference and edited items are resampled together."""
    where = "accuracy_drop"
    a = np.asarray(correct_reference)
    b = np.asarray(correct_edited)
    a = _flags(a, "correct_reference", a.shape[0] if a.ndim == 1 else -1, where)
    b = _flags(b, "correct_edited", b.shape[0] if b.ndim == 1 else -1, where)
    if not len(a) or not len(b):
        raise InputError(f"{where} needs at least one reference and one edited item.")
    if (clusters_reference is None) != (clusters_edited is None):
        raise InputError(f"{where} needs both clusters_reference and clusters_edited, or neither.")
    check_scalar(n_resamples, "n_resamples", where, kind=int, lo=2)
    level = check_open_unit(confidence_level, "confidence_level", where)
    gen = check_random_state(rng, "rng", where)
    if clusters_reference is None:
        ca, cb = np.arange(len(a)), np.arange(len(b)) + len(a)
        k = len(a) + len(b)
        resample_both = False
    else:
        ca_raw = np.asarray(clusters_reference).astype(str)
        cb_raw = np.asarray(clusters_edited).astype(str)
        if ca_raw.shape != a.shape or cb_raw.shape != b.shape:
            raise InputError(f"The clusters of {where} must have one label per item.")
        _, inv = np.unique(np.concatenate([ca_raw, cb_raw]), return_inverse=True)
        ca, cb = inv[: len(a)], inv[len(a):]
        k = int(inv.max()) + 1
        resample_both = True
    acc_a, acc_b = float(a.mean()), float(b.mean())
    drop = acc_a - acc_b
    rel = drop / acc_a if acc_a > 0 else float("nan")
    sums = np.stack([np.bincount(ca, a.astype(float), k), np.bincount(ca, None, k),
                     np.bincount(cb, b.astype(float), k), np.bincount(cb, None, k)], 1)
    if resample_both:
        idx = gen.integers(0, k, size=(int(n_resamples), k))
        s = sums[idx].sum(axis=1)
    else:  # independent items: resample each side on its own
        ia = gen.integers(0, len(a), size=(int(n_resamples), len(a)))
        ib = gen.integers(0, len(b), size=(int(n_resamples), len(b)))
        s = np.stack([a[ia].sum(1), np.full(len(ia), len(a)), b[ib].sum(1),
                      np.full(len(ib), len(b))], 1).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        ra, rb = s[:, 0] / s[:, 1], s[:, 2] / s[:, 3]
        d = ra - rb
        r = np.where(ra > 0, d / ra, np.nan)
    q = [(1 - level) / 2 * 100, (1 + level) / 2 * 100]
    dl, dh = np.nanpercentile(d, q)
    rl, rh = np.nanpercentile(r, q) if np.isfinite(r).any() else (np.nan, np.nan)
    return AccuracyDrop(acc_a, acc_b, drop, float(dl), float(dh), rel, float(rl), float(rh),
                        len(a), len(b))


def attribution_share(maps: ArrayLike, masks: ArrayLike) -> NDArray[np.float64]:
    """Share of each attribution map's mass inside its mask: ``sum(map * mask) / sum(map)``.

    ``maps``: non-negative ``(n, h, w)`` (e.g. Grad-CAM); ``masks``: ``(n, h, w)`` or ``(h, w)``
    weights in [0, 1] (bool, or a subject's alpha). NaN for an all-zero map.
    """
    where = "attribution_share"
    m = as_float_array(maps, "maps", where)
    if m.ndim == 2:
        m = m[None]
    if m.ndim != 3:
        raise InputError(f"The 'maps' parameter of {where} must be (n, h, w). Got {m.shape}.")
    if (m < 0).any():
        raise InputError(f"The 'maps' parameter of {where} must be non-negative.")
    k = as_float_array(masks, "masks", where, allow_bool=True)
    if k.ndim == 2 and k.shape == m.shape[1:]:
        k = np.broadcast_to(k, m.shape)
    if k.shape != m.shape:
        raise InputError(f"The 'masks' parameter of {where} must match maps' shape {m.shape}. "
                         f"Got {k.shape}.")
    if (k < 0).any() or (k > 1).any():
        raise InputError(f"The 'masks' parameter of {where} must hold weights in [0, 1].")
    tot = m.sum(axis=(1, 2))
    inside = (m * k).sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tot > 0, inside / np.where(tot > 0, tot, 1), np.nan)
