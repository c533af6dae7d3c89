"""Calibration error of probabilistic classifiers: ECE, class-wise ECE, per-cell ECE, plots.

A classifier is calibrated when, among the samples it gives confidence ``c``, a fraction ``c``
is correct. The expected calibration error (ECE) bins the confidences and averages
``|accuracy - mean confidence|`` over bins, weighted by bin mass.

Conventions (shared by every function here):

* ``probs`` is ``(n, K)`` class probabilities, or ``(n,)`` for the positive-class probability
  of a binary problem (read as the rows ``[1 - p, p]``); ``labels`` are ints in ``[0, K)``.
* ``strategy="uniform"`` uses ``n_bins`` equal-width bins on [0, 1], closed on the right
  (``(a, b]``, the first one ``[0, b]``), as in Guo et al. (2017).
  ``strategy="quantile"`` uses equal-mass bins: samples sorted by confidence are cut into
  ``n_bins`` runs whose sizes differ by at most one, then each group of tied confidences is
  moved whole into the run where it starts (so ties never split and, with ties, counts are
  only roughly equal and some bins may be empty). Reported edges are midpoints between
  neighbouring bins.
* ``norm="l1"`` is the usual ECE, ``"l2"`` the root of the mass-weighted squared gaps and
  ``"max"`` the maximum calibration error (MCE) over non-empty bins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trustlab.core.errors import InputError
from trustlab.core.validation import (
    as_float_array,
    check_choice,
    check_labels,
    check_probs,
    check_scalar,
)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "CalibrationBins",
    "calibration_bins",
    "calibration_by_cell",
    "classwise_ece",
    "ece",
    "reliability_diagram",
    "worst_cell_ece",
]

Strategy = Literal["uniform", "quantile"]
Norm = Literal["l1", "l2", "max"]
_STRATEGIES = ("uniform", "quantile")
_NORMS = ("l1", "l2", "max")
_ROW_SUM_ATOL = 1e-3


@dataclass(frozen=True, eq=False)
class CalibrationBins:
    """Per-bin summary of a reliability diagram; arrays are read-only.

    ``edges`` has ``n_bins + 1`` entries; ``counts``, ``mean_confidence`` and ``accuracy``
    have ``n_bins`` (the last two are NaN in empty bins).
    """

    edges: NDArray[np.float64]
    counts: NDArray[np.int64]
    mean_confidence: NDArray[np.float64]
    accuracy: NDArray[np.float64]
    strategy: str

    def __post_init__(self) -> None:
        for name in ("edges", "counts", "mean_confidence", "accuracy"):
            getattr(self, name).setflags(write=False)

    @property
    def n_bins(self) -> int:
        """Number of bins, empty ones included."""
        return int(self.counts.size)

    @property
    def n_samples(self) -> int:
        """Number of samples binned."""
        return int(self.counts.sum())

    @property
    def gap(self) -> NDArray[np.float64]:
        """Signed ``accuracy - mean_confidence`` per bin (negative = overconfident)."""
        return self.accuracy - self.mean_confidence

    def calibration_error(self, norm: Norm = "l1") -> float:
        """Mass-weighted calibration error of these bins (``l1`` = ECE, ``max`` = MCE)."""
        _check_choice(norm, "norm", _NORMS, "CalibrationBins.calibration_error")
        sums_conf = np.nan_to_num(self.mean_confidence) * self.counts
        sums_out = np.nan_to_num(self.accuracy) * self.counts
        return float(_errors(self.counts[None], sums_conf[None], sums_out[None], norm)[0])


# ---------------------------------------------------------------------------- validation


def _check_choice(value: object, name: str, choices: tuple[str, ...], where: str) -> None:
    if not isinstance(value, str):
        raise InputError(
            f"The '{name}' parameter of {where} must be one of {', '.join(map(repr, choices))}. "
            f"Got {value!r}."
        )
    check_choice(value, name, choices, where)


def _check_n_bins(n_bins: int, where: str) -> int:
    return check_scalar(n_bins, "n_bins", where, kind=int, lo=1)


def _as_probs(probs: ArrayLike, where: str) -> NDArray[np.float64]:
    """Return ``(n, K)`` probabilities; a 1-D input becomes the binary rows ``[1 - p, p]``."""
    return check_probs(probs, "probs", where, binary_1d=True, atol=_ROW_SUM_ATOL)


def _as_labels(labels: ArrayLike, n: int, n_classes: int, where: str) -> NDArray[np.intp]:
    return check_labels(labels, "labels", where, n_samples=n, n_classes=n_classes).astype(np.intp)


def _top_label(
    probs: ArrayLike, labels: ArrayLike, where: str
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return the top-label confidence and 0/1 correctness of each sample."""
    p = _as_probs(probs, where)
    y = _as_labels(labels, p.shape[0], p.shape[1], where)
    pred = np.argmax(p, axis=1)
    conf = p[np.arange(p.shape[0]), pred]
    return conf, (pred == y).astype(np.float64)


# ---------------------------------------------------------------------------- binning core


def _bin_rows(
    conf: NDArray[np.float64], n_bins: int, strategy: str
) -> tuple[NDArray[np.float64], NDArray[np.intp], NDArray[np.int64], NDArray[np.float64]]:
    """Bin each row of ``conf`` (m groups, n samples) separately.

    Returns edges (m, n_bins + 1), bin ids (m, n), counts (m, n_bins) and per-bin confidence
    sums (m, n_bins). Rows are C-contiguous so sorting and bincount stay cache-friendly.
    """
    m, n = conf.shape
    offset = n_bins * np.arange(m)[:, None]
    if strategy == "uniform":
        edges = np.broadcast_to(np.linspace(0.0, 1.0, n_bins + 1), (m, n_bins + 1)).copy()
        idx = np.searchsorted(edges[0, 1:-1], conf, side="left").astype(np.intp)  # (a, b]
        counts, sum_conf = _bincount_rows(idx + offset, conf, m * n_bins)
        return edges, idx, counts.reshape(m, n_bins), sum_conf.reshape(m, n_bins)
    order = np.argsort(conf, axis=1)  # ties are regrouped below, so stability is not needed
    sorted_conf = np.take_along_axis(conf, order, axis=1)
    # Cut the sorted samples into runs whose sizes differ by at most one, then move every tie
    # group into the run where it starts, so equal confidences always share a bin.
    rank_bin = (np.arange(n) * n_bins) // n
    starts_group = np.ones((m, n), dtype=bool)
    starts_group[:, 1:] = sorted_conf[:, 1:] != sorted_conf[:, :-1]
    group_start = np.maximum.accumulate(np.where(starts_group, np.arange(n)[None, :], 0), axis=1)
    idx = np.empty((m, n), dtype=np.intp)
    np.put_along_axis(idx, order, rank_bin[group_start], axis=1)
    counts, sum_conf = _bincount_rows(idx + offset, conf, m * n_bins)
    counts, sum_conf = counts.reshape(m, n_bins), sum_conf.reshape(m, n_bins)
    # Edge between bins b-1 and b: midpoint of the last sample before bin b and its first one.
    first = np.cumsum(counts, axis=1)[:, :-1]  # sorted position where bin b starts
    lo = np.take_along_axis(sorted_conf, np.clip(first - 1, 0, n - 1), axis=1)
    hi = np.take_along_axis(sorted_conf, np.clip(first, 0, n - 1), axis=1)
    edges = np.concatenate([np.zeros((m, 1)), (lo + hi) / 2.0, np.ones((m, 1))], axis=1)
    return edges, idx, counts, sum_conf


def _bincount_rows(
    flat_idx: NDArray[np.intp], weights: NDArray[np.float64], size: int
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    flat = flat_idx.ravel()
    counts = np.bincount(flat, minlength=size).astype(np.int64)
    return counts, np.bincount(flat, weights=weights.ravel(), minlength=size)


def _single_bin_sums(
    conf: NDArray[np.float64], outcome: NDArray[np.float64], n_bins: int, strategy: str
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """Edges, counts, confidence sums and outcome sums (shapes (1, ...)) of one 1-D sample."""
    edges, idx, counts, sum_conf = _bin_rows(conf[None, :], n_bins, strategy)
    sum_out = np.bincount(idx[0], weights=outcome, minlength=n_bins)[None, :]
    return edges, counts, sum_conf, sum_out


def _errors(
    counts: NDArray[np.int64],
    sum_conf: NDArray[np.float64],
    sum_out: NDArray[np.float64],
    norm: str,
) -> NDArray[np.float64]:
    """Calibration error per row of per-bin sums (rows = columns/classes)."""
    total = counts.sum(axis=1, keepdims=True)
    gap = np.abs(sum_out - sum_conf) / np.maximum(counts, 1)  # |acc - conf|, 0 in empty bins
    weight = counts / np.maximum(total, 1)
    if norm == "l1":
        return np.sum(weight * gap, axis=1)
    if norm == "l2":
        return np.sqrt(np.sum(weight * gap**2, axis=1))
    return np.max(gap, axis=1)  # empty bins have gap 0, so they never win


def _mean_or_nan(sums: NDArray[np.float64], counts: NDArray[np.int64]) -> NDArray[np.float64]:
    out = np.full(sums.shape, np.nan)
    np.divide(sums, counts, out=out, where=counts > 0)
    return out


# ---------------------------------------------------------------------------- public API


def calibration_bins(
    confidences: ArrayLike,
    correct: ArrayLike,
    n_bins: int = 15,
    strategy: Strategy = "uniform",
) -> CalibrationBins:
    """Bin confidences and report count, mean confidence and accuracy per bin.

    ``correct`` is 0/1 (or bool) per sample: whether the prediction the confidence belongs to
    was right (for one-vs-rest calibration: whether the sample is of that class).
    """
    where = "calibration_bins"
    n_bins = _check_n_bins(n_bins, where)
    _check_choice(strategy, "strategy", _STRATEGIES, where)
    conf = as_float_array(confidences, "confidences", where, ndim=1)
    out = as_float_array(correct, "correct", where, allow_bool=True, allow_empty=True)
    if not np.all((conf >= 0.0) & (conf <= 1.0)):
        raise InputError(f"The 'confidences' parameter of {where} must lie in [0, 1] (no NaN).")
    if out.shape != conf.shape:
        raise InputError(
            f"The 'correct' parameter of {where} must have shape {conf.shape}. Got {out.shape}."
        )
    if not np.all((out == 0.0) | (out == 1.0)):
        raise InputError(f"The 'correct' parameter of {where} must hold only 0/1 or bools.")
    edges, counts, sum_conf, sum_out = _single_bin_sums(conf, out, n_bins, strategy)
    return CalibrationBins(
        edges=edges[0],
        counts=counts[0],
        mean_confidence=_mean_or_nan(sum_conf[0], counts[0]),
        accuracy=_mean_or_nan(sum_out[0], counts[0]),
        strategy=strategy,
    )


def ece(
    probs: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 15,
    strategy: Strategy = "uniform",
    norm: Norm = "l1",
) -> float:
    """Top-label expected calibration error: confidence of the argmax class vs its accuracy.

    0 for a calibrated model; 0.3 for a model that always says 0.9 and is right 60% of the time.
    """
    where = "ece"
    n_bins = _check_n_bins(n_bins, where)
    _check_choice(strategy, "strategy", _STRATEGIES, where)
    _check_choice(norm, "norm", _NORMS, where)
    conf, correct = _top_label(probs, labels, where)
    _, counts, sum_conf, sum_out = _single_bin_sums(conf, correct, n_bins, strategy)
    return float(_errors(counts, sum_conf, sum_out, norm)[0])


def classwise_ece(
    probs: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 15,
    strategy: Strategy = "uniform",
    norm: Norm = "l1",
) -> float:
    """Mean over classes of the one-vs-rest ECE of ``probs[:, c]`` against ``labels == c``.

    Catches miscalibration of non-argmax classes that top-label ECE ignores. For a binary
    ``(n,)`` input it equals the one-vs-rest ECE of the positive class (both classes agree
    up to samples lying exactly on a bin edge).
    """
    where = "classwise_ece"
    n_bins = _check_n_bins(n_bins, where)
    _check_choice(strategy, "strategy", _STRATEGIES, where)
    _check_choice(norm, "norm", _NORMS, where)
    p = _as_probs(probs, where)
    y = _as_labels(labels, p.shape[0], p.shape[1], where)
    n_classes = p.shape[1]
    _, idx, counts, sum_conf = _bin_rows(np.ascontiguousarray(p.T), n_bins, strategy)
    # One-vs-rest outcome is 1 only at (class y_i, sample i): count those, no dense one-hot.
    label_bin = y * n_bins + idx[y, np.arange(y.size)]
    sum_out = np.bincount(label_bin, minlength=n_classes * n_bins).reshape(n_classes, n_bins)
    return float(np.mean(_errors(counts, sum_conf, sum_out, norm)))


def calibration_by_cell(
    probs: ArrayLike,
    labels: ArrayLike,
    cells: ArrayLike,
    n_bins: int = 10,
    strategy: Strategy = "uniform",
) -> pd.DataFrame:
    """Top-label calibration per cell of a user-given partition (one hashable id per sample).

    Returns one row per cell (sorted by id when ids are orderable) with columns
    ``cell, n, accuracy, mean_confidence, ece``. A model can be calibrated on average and
    badly miscalibrated on a subgroup; this finds it.
    """
    import pandas as pd

    where = "calibration_by_cell"
    n_bins = _check_n_bins(n_bins, where)
    _check_choice(strategy, "strategy", _STRATEGIES, where)
    conf, correct = _top_label(probs, labels, where)
    cell_arr = np.asarray(cells, dtype=object) if not isinstance(cells, pd.Series) else cells
    if np.ndim(cell_arr) != 1 or len(cell_arr) != conf.size:
        raise InputError(
            f"The 'cells' parameter of {where} must be 1-D with {conf.size} entries "
            f"(one cell id per sample). Got shape {np.shape(cell_arr)}."
        )
    try:
        codes, uniques = pd.factorize(cell_arr, sort=True)
    except TypeError:  # ids that cannot be ordered: keep order of first appearance
        codes, uniques = pd.factorize(cell_arr, sort=False)
    if np.any(codes < 0):
        raise InputError(f"The 'cells' parameter of {where} contains missing (None/NaN) ids.")
    rows = []
    for code, cell in enumerate(uniques):
        mask = codes == code
        c, o = conf[mask], correct[mask]
        _, counts, sum_conf, sum_out = _single_bin_sums(c, o, n_bins, strategy)
        rows.append(
            {
                "cell": cell,
                "n": int(mask.sum()),
                "accuracy": float(o.mean()),
                "mean_confidence": float(c.mean()),
                "ece": float(_errors(counts, sum_conf, sum_out, "l1")[0]),
            }
        )
    return pd.DataFrame(rows, columns=["cell", "n", "accuracy", "mean_confidence", "ece"])


def worst_cell_ece(
    probs: ArrayLike,
    labels: ArrayLike,
    cells: ArrayLike,
    n_bins: int = 10,
    strategy: Strategy = "uniform",
    min_count: int = 30,
) -> float:
    """Largest per-cell ECE among cells with at least ``min_count`` samples.

    ``min_count`` keeps tiny cells, whose ECE is mostly sampling noise, out of the maximum.
    """
    where = "worst_cell_ece"
    min_count = check_scalar(min_count, "min_count", where, kind=int, lo=1)
    table = calibration_by_cell(probs, labels, cells, n_bins=n_bins, strategy=strategy)
    big = table[table["n"] >= min_count]
    if big.empty:
        raise InputError(
            f"No cell has at least min_count={min_count} samples (largest has "
            f"{int(table['n'].max())}); lower 'min_count' in {where}."
        )
    return float(big["ece"].max())


def reliability_diagram(
    probs: ArrayLike,
    labels: ArrayLike,
    n_bins: int = 15,
    strategy: Strategy = "uniform",
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Draw top-label accuracy per confidence bin against the diagonal; return the Figure.

    Without ``ax`` a new Agg-backed Figure (no pyplot state, never shown) gets a reliability
    panel above a histogram of bin counts. With ``ax``, the diagram is drawn there and the
    counts are written above the bars.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    where = "reliability_diagram"
    n_bins = _check_n_bins(n_bins, where)
    _check_choice(strategy, "strategy", _STRATEGIES, where)
    conf, correct = _top_label(probs, labels, where)
    bins = calibration_bins(conf, correct, n_bins=n_bins, strategy=strategy)
    error = bins.calibration_error("l1")

    count_ax = None
    if ax is None:
        fig = Figure(figsize=(5.0, 6.0), layout="constrained")
        FigureCanvasAgg(fig)
        ax, count_ax = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    else:
        fig = ax.figure

    left, widths = bins.edges[:-1], np.diff(bins.edges)
    full = bins.counts > 0
    ax.bar(
        left[full],
        bins.accuracy[full],
        width=widths[full],
        align="edge",
        color="tab:blue",
        edgecolor="black",
        linewidth=0.5,
        label=f"accuracy (ECE = {error:.3f})",
    )
    ax.bar(
        left[full],
        bins.mean_confidence[full] - bins.accuracy[full],
        bottom=bins.accuracy[full],
        width=widths[full],
        align="edge",
        color="tab:red",
        alpha=0.3,
        edgecolor="tab:red",
        linewidth=0.5,
        label="gap to confidence",
    )
    ax.plot([0.0, 1.0], [0.0, 1.0], linestyle="--", color="gray", label="perfect calibration")
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_ylabel("accuracy")
    ax.legend(loc="upper left", fontsize="small")
    if title is not None:
        ax.set_title(title)

    if count_ax is not None:
        count_ax.bar(
            left,
            bins.counts,
            width=widths,
            align="edge",
            color="gray",
            edgecolor="black",
            linewidth=0.5,
        )
        count_ax.set_ylabel("count")
        count_ax.set_xlabel("confidence")
    else:
        ax.set_xlabel("confidence")
        for x, w, acc, cnt in zip(
            left[full], widths[full], bins.accuracy[full], bins.counts[full], strict=True
        ):
            ax.annotate(str(int(cnt)), (x + w / 2, acc), ha="center", va="bottom", fontsize=6)
    return fig
