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
from trustlab.core.validation import (
    as_float_array,
    check_choice,
    check_labels,
    check_probs,
    check_samples,
    check_scalar,
)
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
    return check_probs(probs, name, where)


def _cells(cells: ArrayLike, n: int, where: str) -> NDArray[Any]:
    """One hashable, non-missing cell id per sample."""
    if cells is None or isinstance(cells, str | bytes | dict | set):
        raise InputError(
            f"The 'cells' parameter of {where} must be one cell id per sample. "
            f"Got {type(cells).__name__}."
        )
    if hasattr(cells, "detach"):
        cells = cells.detach().cpu().numpy()
    c = np.asarray(cells)
    if c.ndim != 1 or c.shape[0] != n:
        raise InputError(
            f"The 'cells' parameter of {where} must be 1-D with {n} entries (one cell id per "
            f"sample). Got shape {c.shape}."
        )
    if c.dtype.kind == "f" and not np.all(np.isfinite(c)):
        raise InputError(f"The 'cells' parameter of {where} contains NaN or inf cell ids.")
    if c.dtype.kind == "O" and any(v is None or (isinstance(v, float) and v != v) for v in c):
        raise InputError(f"The 'cells' parameter of {where} contains missing (None/NaN) ids.")
    if c.dtype.kind == "c":
        raise InputError(f"The 'cells' parameter of {where} must not be complex.")
    return c


def labels_to_probs(
    labels: ArrayLike, confidences: ArrayLike | float, n_classes: int
) -> NDArray[np.float64]:
    """Turn hard labels with a confidence each into probability rows.

    The label gets ``confidence``; the rest is spread evenly over the other ``K - 1``
    classes. This is how a human who reports "label, how sure" becomes a probabilistic
    predictor whose top-label confidence is exactly the stated one.
    """
    where = "labels_to_probs"
    n_classes = check_scalar(n_classes, "n_classes", where, kind=int, lo=2)
    y = check_labels(labels, "labels", where, n_classes=n_classes)
    conf = as_float_array(confidences, "confidences", where, ndim=(0, 1))
    if conf.ndim == 1 and conf.shape != y.shape:
        raise InputError(
            f"The 'confidences' parameter of {where} must be one number or {y.size} (one per "
            f"label). Got {conf.shape[0]}."
        )
    conf = np.broadcast_to(conf, y.shape)
    if np.any(conf < 1.0 / n_classes) or np.any(conf > 1.0):
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
    where = "function_cells"
    if not callable(fn):
        raise InputError(f"The 'fn' parameter of {where} must be callable. Got {type(fn).__name__}.")
    x = check_samples(features, "features", where)
    return _cells(fn(x), x.shape[0], f"{where} (the partition function's output)")


def confidence_class_cells(probs: ArrayLike, n_bins: int = 3) -> NDArray[np.int64]:
    """Cells = predicted class × equal-width bin of the top-label confidence.

    Cell id is ``predicted_class * n_bins + bin``; bins split ``[1/K, 1]`` evenly (a top-label
    confidence is never below ``1/K``).
    """
    where = "confidence_class_cells"
    p = _as_prob_matrix(probs, where)
    n_bins = check_scalar(n_bins, "n_bins", where, kind=int, lo=1)
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

        where = "KMeansPartition.fit"
        n_cells = check_scalar(self.n_cells, "n_cells", "KMeansPartition", kind=int, lo=1)
        seed = self.random_state
        if seed is not None:
            seed = check_scalar(seed, "random_state", "KMeansPartition", kind=int, lo=0, hi=2**32 - 1)
        x = check_samples(features, "features", where, min_n=n_cells)
        self.kmeans_ = KMeans(n_cells, n_init=4, random_state=seed).fit(x)
        return self

    def assign(self, features: ArrayLike) -> NDArray[np.int64]:
        if not hasattr(self, "kmeans_"):
            raise NotFittedError("KMeansPartition.assign needs fit(features) first.")
        x = check_samples(
            features, "features", "KMeansPartition.assign",
            n_features=self.kmeans_.cluster_centers_.shape[1],
        )
        return self.kmeans_.predict(x).astype(np.int64)


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


def _partition_inputs(
    probs: ArrayLike, labels: ArrayLike, cells: ArrayLike, n_bins: int, where: str
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[Any], int]:
    """Probabilities, labels and cells checked against each other, and the bin count."""
    p = _as_prob_matrix(probs, where)
    y = check_labels(labels, "labels", where, n_samples=p.shape[0], n_classes=p.shape[1])
    c = _cells(cells, p.shape[0], where)
    return p, y, c, check_scalar(n_bins, "n_bins", where, kind=int, lo=1)


def _cell_codes(cells: NDArray[Any]) -> NDArray[np.intp]:
    import pandas as pd

    try:
        return pd.factorize(cells, sort=True)[0]
    except TypeError:  # ids that cannot be ordered
        return pd.factorize(cells, sort=False)[0]


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
    where = "partition_calibration"
    p, y, c, n_bins = _partition_inputs(probs, labels, cells, n_bins, where)
    min_count = check_scalar(min_count, "min_count", where, kind=int, lo=1)
    table = calibration_by_cell(p, y, c, n_bins=n_bins)
    mean, worst = _cell_summary(table, min_count)
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
    where = "partition_calibration_ci"
    check_choice(statistic, "statistic", ("mean_cell_ece", "worst_cell_ece"), where)
    p, y, c, n_bins = _partition_inputs(probs, labels, cells, n_bins, where)
    min_count = check_scalar(min_count, "min_count", where, kind=int, lo=1)
    c_codes = _cell_codes(c)

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
    from trustlab.core.figures import add_alt_text, new_figure

    where = "reliability_diagrams_by_cell"
    p, y, c, n_bins = _partition_inputs(probs, labels, cells, n_bins, where)
    max_cells = check_scalar(max_cells, "max_cells", where, kind=int, lo=1)
    ids, counts = np.unique(c, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:max_cells]
    chosen = ids[order]
    ncol = min(3, len(chosen))
    nrow = int(np.ceil(len(chosen) / ncol))
    fig, grid = new_figure(nrow, ncol, size=(3.6 * ncol, 3.4 * nrow))
    axes = grid.ravel()
    for ax, cell in zip(axes, chosen, strict=False):
        mask = c == cell
        reliability_diagram(p[mask], y[mask], n_bins=n_bins, ax=ax, title=f"cell {cell}")
    for ax in axes[len(chosen):]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    add_alt_text(
        fig,
        (f"{title}: " if title else "")
        + f"reliability diagrams (accuracy against confidence, {n_bins} bins) for the "
        f"{len(chosen)} largest cells ({', '.join(map(str, chosen))}), against the diagonal.",
    )
    return fig
