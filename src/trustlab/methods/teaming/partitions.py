"""Calibration with respect to a partition of the feature space.

A predictor is calibrated with respect to a partition ``{S_1, ..., S_m}`` when it is
calibrated inside every cell: among the samples of cell ``S_j`` that it gives confidence
``c``, a fraction ``c`` is right. The worst cell is the multicalibration-style summary.

Cells come from a user function, from model-confidence bins × predicted class, or from a
k-means clustering of the features. The per-cell numbers come from
:func:`trustlab.stats.calibration_by_cell`; this module adds the partitions, the summaries
(size-weighted mean and worst cell, with bootstrap intervals) and per-cell plots.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trustlab.core.errors import InputError, NotFittedError
from trustlab.stats import bootstrap_ci, calibration_by_cell, reliability_diagram

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = [
    "KMeansPartition",
    "PartitionCalibration",
    "confidence_class_cells",
    "function_cells",
    "labels_to_probs",
    "partition_calibration",
    "partition_calibration_ci",
    "reliability_diagrams_by_cell",
]


def _as_prob_matrix(probs: ArrayLike, where: str, name: str = "probs") -> NDArray[np.float64]:
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] == 0 or p.shape[1] < 2:
        raise InputError(
            f"The '{name}' parameter of {where} must be a non-empty (n, K) array with K >= 2. "
            f"Got shape {p.shape}."
        )
    if not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
        raise InputError(f"The '{name}' parameter of {where} must lie in [0, 1] (no NaN).")
    worst = float(np.max(np.abs(p.sum(axis=1) - 1.0)))
    if worst > 1e-3:
        raise InputError(
            f"The rows of '{name}' in {where} must sum to 1. Worst row is off by {worst:.3g}."
        )
    return p


def labels_to_probs(
    labels: ArrayLike, confidences: ArrayLike | float, n_classes: int
) -> NDArray[np.float64]:
    """Turn hard labels with a confidence each into probability rows.

    The label gets ``confidence``; the rest is spread evenly over the other ``K - 1``
    classes. This is how a human who reports "label, how sure" becomes a probabilistic
    predictor whose top-label confidence is exactly the stated one.
    """
    where = "labels_to_probs"
    y = np.asarray(labels)
    if y.ndim != 1 or y.size == 0 or y.dtype.kind not in "iu":
        raise InputError(f"The 'labels' parameter of {where} must be a non-empty 1-D int array.")
    if isinstance(n_classes, bool) or not isinstance(n_classes, int | np.integer) or n_classes < 2:
        raise InputError(f"The 'n_classes' parameter of {where} must be an int >= 2. Got {n_classes}.")
    if np.any((y < 0) | (y >= n_classes)):
        raise InputError(f"The 'labels' parameter of {where} must be in [0, {n_classes}).")
    conf = np.broadcast_to(np.asarray(confidences, dtype=np.float64), y.shape)
    if np.any(~np.isfinite(conf)) or np.any(conf < 1.0 / n_classes) or np.any(conf > 1.0):
        raise InputError(
            f"The 'confidences' parameter of {where} must lie in [1/K, 1] = "
            f"[{1.0 / n_classes:.3g}, 1] so the label stays the top class."
        )
    out = np.repeat(((1.0 - conf) / (n_classes - 1))[:, None], n_classes, axis=1)
    out[np.arange(y.size), y] = conf
    return out


# ----------------------------------------------------------------------------- partitions


def function_cells(fn: Callable[[NDArray[Any]], ArrayLike], features: ArrayLike) -> NDArray[Any]:
    """Cells from a user function of the features (one hashable id per row)."""
    x = np.asarray(features)
    cells = np.asarray(fn(x))
    if cells.ndim != 1 or cells.shape[0] != x.shape[0]:
        raise InputError(
            f"The partition function must return one cell id per row ({x.shape[0]}). "
            f"Got shape {cells.shape}."
        )
    return cells


def confidence_class_cells(probs: ArrayLike, n_bins: int = 3) -> NDArray[np.int64]:
    """Cells = predicted class × equal-width bin of the top-label confidence.

    Cell id is ``predicted_class * n_bins + bin``; bins split ``[1/K, 1]`` evenly (a top-label
    confidence is never below ``1/K``).
    """
    where = "confidence_class_cells"
    p = _as_prob_matrix(probs, where)
    if isinstance(n_bins, bool) or not isinstance(n_bins, int | np.integer) or n_bins < 1:
        raise InputError(f"The 'n_bins' parameter of {where} must be an integer >= 1. Got {n_bins}.")
    k = p.shape[1]
    pred = np.argmax(p, axis=1)
    conf = p[np.arange(p.shape[0]), pred]
    edges = np.linspace(1.0 / k, 1.0, n_bins + 1)[1:-1]
    b = np.searchsorted(edges, conf, side="left")
    return (pred * n_bins + b).astype(np.int64)


class KMeansPartition:
    """Cells from a k-means clustering of the features (fit on one split, assign on any).

    Parameters
    ----------
    n_cells:
        Number of clusters (cells) ``m``.
    random_state:
        Seed of the k-means initialisation.
    """

    def __init__(self, n_cells: int = 8, random_state: int | None = 0) -> None:
        self.n_cells = n_cells
        self.random_state = random_state

    def fit(self, features: ArrayLike) -> KMeansPartition:
        from sklearn.cluster import KMeans

        if isinstance(self.n_cells, bool) or not isinstance(self.n_cells, int) or self.n_cells < 1:
            raise InputError(
                f"The 'n_cells' parameter of KMeansPartition must be an int >= 1. Got {self.n_cells}."
            )
        x = np.asarray(features, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] < self.n_cells:
            raise InputError(
                f"KMeansPartition.fit needs a 2-D feature array with at least n_cells={self.n_cells} "
                f"rows. Got shape {x.shape}."
            )
        self.kmeans_ = KMeans(self.n_cells, n_init=4, random_state=self.random_state).fit(x)
        return self

    def assign(self, features: ArrayLike) -> NDArray[np.int64]:
        if not hasattr(self, "kmeans_"):
            raise NotFittedError("KMeansPartition.assign needs fit(features) first.")
        return self.kmeans_.predict(np.asarray(features, dtype=np.float64)).astype(np.int64)


# ----------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class PartitionCalibration:
    """Calibration of one predictor with respect to one partition.

    ``table`` has one row per cell (``cell, n, accuracy, mean_confidence, ece``);
    ``mean_cell_ece`` is the size-weighted mean of per-cell ECEs over cells with at least
    ``min_count`` samples, ``worst_cell_ece`` their maximum (NaN when no cell is big enough).
    """

    table: pd.DataFrame
    mean_cell_ece: float
    worst_cell_ece: float
    accuracy: float
    min_count: int


def _cell_summary(table: pd.DataFrame, min_count: int) -> tuple[float, float]:
    big = table[table["n"] >= min_count]
    if big.empty:
        return float("nan"), float("nan")
    w = big["n"].to_numpy(dtype=np.float64)
    mean = float(np.sum(w * big["ece"].to_numpy()) / w.sum())
    return mean, float(big["ece"].max())


def partition_calibration(
    probs: ArrayLike,
    labels: ArrayLike,
    cells: ArrayLike,
    n_bins: int = 10,
    min_count: int = 30,
) -> PartitionCalibration:
    """Per-cell top-label calibration, its size-weighted mean and its worst cell."""
    p = _as_prob_matrix(probs, "partition_calibration")
    table = calibration_by_cell(p, labels, cells, n_bins=n_bins)
    mean, worst = _cell_summary(table, min_count)
    y = np.asarray(labels)
    return PartitionCalibration(
        table=table,
        mean_cell_ece=mean,
        worst_cell_ece=worst,
        accuracy=float(np.mean(np.argmax(p, axis=1) == y)),
        min_count=min_count,
    )


def partition_calibration_ci(
    probs: ArrayLike,
    labels: ArrayLike,
    cells: ArrayLike,
    *,
    statistic: str = "mean_cell_ece",
    n_bins: int = 10,
    min_count: int = 30,
    n_resamples: int = 200,
    confidence_level: float = 0.95,
    rng: np.random.Generator | int | None = 0,
) -> tuple[float, float, float]:
    """Percentile-bootstrap interval ``(estimate, low, high)`` of a partition summary.

    Samples (rows) are resampled jointly with their labels and cells; ``statistic`` is
    ``"mean_cell_ece"`` or ``"worst_cell_ece"``.
    """
    if statistic not in ("mean_cell_ece", "worst_cell_ece"):
        raise InputError(
            "The 'statistic' parameter of partition_calibration_ci must be 'mean_cell_ece' or "
            f"'worst_cell_ece'. Got {statistic!r}."
        )
    p = _as_prob_matrix(probs, "partition_calibration_ci")
    y = np.asarray(labels)
    c_codes = np.unique(np.asarray(cells), return_inverse=True)[1].ravel()

    def stat(idx: NDArray[np.intp]) -> float:
        table = calibration_by_cell(p[idx], y[idx], c_codes[idx], n_bins=n_bins)
        mean, worst = _cell_summary(table, min_count)
        return mean if statistic == "mean_cell_ece" else worst

    res = bootstrap_ci(
        np.arange(y.size), stat, n_resamples=n_resamples, confidence_level=confidence_level,
        rng=rng,
    )
    return res.estimate, res.low, res.high


def reliability_diagrams_by_cell(
    probs: ArrayLike,
    labels: ArrayLike,
    cells: ArrayLike,
    n_bins: int = 10,
    max_cells: int = 9,
    title: str | None = None,
) -> Figure:
    """One reliability diagram per cell (the ``max_cells`` largest), on one Agg figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    p = _as_prob_matrix(probs, "reliability_diagrams_by_cell")
    y = np.asarray(labels)
    c = np.asarray(cells)
    ids, counts = np.unique(c, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:max_cells]
    chosen = ids[order]
    ncol = min(3, len(chosen))
    nrow = int(np.ceil(len(chosen) / ncol))
    fig = Figure(figsize=(3.6 * ncol, 3.4 * nrow), layout="constrained")
    FigureCanvasAgg(fig)
    axes = np.atleast_1d(fig.subplots(nrow, ncol, squeeze=False)).ravel()
    for ax, cell in zip(axes, chosen, strict=False):
        mask = c == cell
        reliability_diagram(p[mask], y[mask], n_bins=n_bins, ax=ax, title=f"cell {cell}")
    for ax in axes[len(chosen):]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    return fig
