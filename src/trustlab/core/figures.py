"""Figures for reports: Agg-backed matplotlib figures without pyplot, and the shared panels.

Nothing here touches pyplot or the global backend (no ``matplotlib.use``): a figure is a plain
:class:`matplotlib.figure.Figure` with an Agg canvas attached, so experiments can draw in any
process (a test run, a server, a notebook with another backend) and two runs never share state.
``Report.figure(name, fig)`` saves it; nothing needs closing.

The panels are the three plots most experiments draw, with uncertainty shown the same way
everywhere:

- :func:`metric_vs_parameter`: one line per series against a swept parameter, a shaded band
  for each series' interval (``lo``/``hi``), optional reference line (a target, a nominal level);
- :func:`grouped_bars`: a bar per (group, series) with interval whiskers;
- :func:`reliability_curve`: observed against predicted (calibration, coverage against
  nominal level), the diagonal drawn as the ideal, with interval bands.

Each panel draws on ``ax`` when given (lay several out with :func:`new_figure`) or on a new
single-panel figure, and returns the figure. Each adds one sentence to the figure's alt text
(:func:`alt_text`): what is plotted against what, for which series — the text the HTML index and
``report.md`` show to readers who cannot see the image, and that the PNG carries as its
``Description``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from trustlab.core.errors import InputError
from trustlab.core.validation import as_float_array

__all__ = [
    "Series",
    "add_alt_text",
    "alt_text",
    "grouped_bars",
    "metric_vs_parameter",
    "new_figure",
    "reliability_curve",
]

_ALT = "_trustlab_alt_text"


@dataclass(frozen=True)
class Series:
    """Values of one series, with an optional interval ``[lo, hi]`` (same length as ``y``).

    ``x`` is needed only where each series has its own abscissa (reliability curves).
    """

    y: ArrayLike
    lo: ArrayLike | None = None
    hi: ArrayLike | None = None
    x: ArrayLike | None = None


def new_figure(
    nrows: int = 1,
    ncols: int = 1,
    *,
    size: tuple[float, float] | None = None,
    title: str | None = None,
    sharex: bool = False,
    sharey: bool = False,
    squeeze: bool = False,
) -> tuple[Any, Any]:
    """An Agg-backed ``Figure`` (constrained layout) and its ``(nrows, ncols)`` array of axes.

    ``squeeze=True`` returns axes as ``plt.subplots`` does (one Axes, or a 1-D array for one
    row or column), for code that was written against pyplot.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if nrows < 1 or ncols < 1:
        raise InputError(f"new_figure needs nrows, ncols >= 1. Got {nrows}, {ncols}.")
    fig = Figure(figsize=size or (4.4 * ncols, 3.4 * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=squeeze, sharex=sharex, sharey=sharey)
    if title:
        fig.suptitle(title, fontsize=10)
        add_alt_text(fig, f"{title}.")
    return fig, axes


def add_alt_text(fig: Any, sentence: str) -> None:
    """Append a sentence to the figure's alt text."""
    setattr(fig, _ALT, [*getattr(fig, _ALT, []), sentence.strip()])


def alt_text(fig: Any) -> str:
    """The figure's alt text: its title and one sentence per panel ('' for a foreign figure)."""
    return " ".join(getattr(fig, _ALT, []))


def _axis(ax: Any, title: str | None) -> tuple[Any, Any]:
    if ax is None:
        ax = new_figure()[1][0, 0]
    if title:
        ax.set_title(title, fontsize=9)
    return ax.figure, ax


def _sentence(title: str | None, text: str) -> str:
    """A panel's alt-text sentence, led by its title when it has one."""
    return f"{title}: {text[0].lower()}{text[1:]}" if title else text


def _series(name: str, value: Series | ArrayLike, n: int | None, where: str) -> Series:
    s = value if isinstance(value, Series) else Series(value)
    y = as_float_array(s.y, f"{name}.y", where, ndim=1, allow_nonfinite=True)
    if n is not None and y.shape[0] != n:
        raise InputError(
            f"The series '{name}' of {where} must have {n} values (one per x). Got {y.shape[0]}."
        )
    bounds = []
    for part, arr in (("lo", s.lo), ("hi", s.hi)):
        if arr is None:
            bounds.append(None)
            continue
        b = as_float_array(arr, f"{name}.{part}", where, ndim=1, allow_nonfinite=True)
        if b.shape != y.shape:
            raise InputError(
                f"The '{part}' of series '{name}' of {where} must have {y.shape[0]} values like "
                f"its y. Got {b.shape[0]}."
            )
        bounds.append(b)
    if (bounds[0] is None) != (bounds[1] is None):
        raise InputError(f"The series '{name}' of {where} needs both lo and hi, or neither.")
    x = None if s.x is None else as_float_array(s.x, f"{name}.x", where, ndim=1)
    if x is not None and x.shape != y.shape:
        raise InputError(
            f"The x of series '{name}' of {where} must have {y.shape[0]} values like its y. "
            f"Got {x.shape[0]}."
        )
    return Series(y, bounds[0], bounds[1], x)


def _check_series(series: Mapping[str, Any], where: str) -> None:
    if not isinstance(series, Mapping) or not series:
        raise InputError(f"The 'series' parameter of {where} must be a non-empty mapping of "
                         f"label to values. Got {type(series).__name__}.")


def _range_text(values: list[np.ndarray]) -> str:
    finite = np.concatenate([v[np.isfinite(v)] for v in values]) if values else np.array([])
    if finite.size == 0:
        return "no finite values"
    return f"values from {finite.min():.3g} to {finite.max():.3g}"


def metric_vs_parameter(
    x: ArrayLike,
    series: Mapping[str, Series | ArrayLike],
    *,
    ax: Any = None,
    xlabel: str,
    ylabel: str,
    title: str | None = None,
    logx: bool = False,
    logy: bool = False,
    reference: float | None = None,
    reference_label: str = "",
    band_label: str = "interval",
) -> Any:
    """A metric against a swept parameter: one line per series, its interval as a band."""
    where = "metric_vs_parameter"
    _check_series(series, where)
    xs = as_float_array(x, "x", where, ndim=1)
    fig, ax = _axis(ax, title)
    ys = []
    for i, (name, value) in enumerate(series.items()):
        s = _series(name, value, xs.shape[0], where)
        color = f"C{i % 10}"
        ax.plot(xs, s.y, marker="o", ms=3.5, color=color, label=name)
        if s.lo is not None:
            ax.fill_between(xs, s.lo, s.hi, color=color, alpha=0.18, linewidth=0)
        ys.append(np.asarray(s.y))
    if reference is not None:
        ax.axhline(reference, color="0.3", ls="--", lw=1, label=reference_label or None)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if len(series) > 1 or reference_label:
        ax.legend(fontsize=7)
    bands = " with shaded " + band_label + " bands" if any(
        isinstance(v, Series) and v.lo is not None for v in series.values()) else ""
    ref = f"; dashed line at {reference:g}" + (f" ({reference_label})" if reference_label else "") \
        if reference is not None else ""
    add_alt_text(fig, _sentence(title, f"Line chart of {ylabel} against {xlabel} ({xs.min():.3g} to {xs.max():.3g})"
                 f" for {', '.join(series)}{bands}; {_range_text(ys)}{ref}."))
    return fig


def grouped_bars(
    groups: Sequence[str],
    series: Mapping[str, Series | ArrayLike],
    *,
    ax: Any = None,
    ylabel: str,
    title: str | None = None,
    reference: float | None = None,
    reference_label: str = "",
    logy: bool = False,
) -> Any:
    """One cluster of bars per group, one bar per series, each with its interval as whiskers."""
    where = "grouped_bars"
    _check_series(series, where)
    names = [str(g) for g in groups]
    if not names:
        raise InputError(f"The 'groups' parameter of {where} must name at least one group.")
    fig, ax = _axis(ax, title)
    k = len(series)
    width = 0.8 / k
    centres = np.arange(len(names), dtype=float)
    ys = []
    for i, (name, value) in enumerate(series.items()):
        s = _series(name, value, len(names), where)
        pos = centres - 0.4 + width * (i + 0.5)
        yerr = None
        if s.lo is not None:
            low = np.clip(s.y - s.lo, 0, None)
            high = np.clip(s.hi - s.y, 0, None)
            # nested lists, not a (2, n) array: for one group matplotlib would read a size-1 row
            # as a scalar (a NumPy deprecation, an error in a future NumPy)
            yerr = [low.tolist(), high.tolist()]
        ax.bar(pos, s.y, width=width * 0.95, color=f"C{i % 10}", label=name, yerr=yerr,
               capsize=2.5, error_kw={"lw": 0.8})
        ys.append(np.asarray(s.y))
    if reference is not None:
        ax.axhline(reference, color="0.3", ls="--", lw=1, label=reference_label or None)
    ax.set_xticks(centres, names, fontsize=8, rotation=20 if len(names) > 5 else 0)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    if k > 1 or reference_label:
        ax.legend(fontsize=7)
    whiskers = " with interval whiskers" if any(
        isinstance(v, Series) and v.lo is not None for v in series.values()) else ""
    add_alt_text(fig, _sentence(title, f"Grouped bar chart of {ylabel} for {', '.join(names)}, "
                                f"one bar per {', '.join(series)}{whiskers}; {_range_text(ys)}."))
    return fig


def reliability_curve(
    curves: Mapping[str, Series],
    *,
    ax: Any = None,
    xlabel: str = "predicted",
    ylabel: str = "observed",
    title: str | None = None,
    limits: tuple[float, float] = (0.0, 1.0),
) -> Any:
    """Observed against predicted per curve, the diagonal as the ideal, intervals as bands.

    For calibration (confidence vs accuracy per bin) and coverage plots (empirical coverage vs
    nominal ``1 - alpha``). Each curve needs its own ``x`` (``Series(y, lo, hi, x=...)``).
    """
    where = "reliability_curve"
    _check_series(curves, where)
    fig, ax = _axis(ax, title)
    lo_lim, hi_lim = limits
    ax.plot([lo_lim, hi_lim], [lo_lim, hi_lim], color="0.4", ls="--", lw=1, label="ideal")
    ys = []
    for i, (name, value) in enumerate(curves.items()):
        if not isinstance(value, Series) or value.x is None:
            raise InputError(f"The curve '{name}' of {where} must be a Series with x given.")
        s = _series(name, value, None, where)
        order = np.argsort(s.x)
        color = f"C{i % 10}"
        ax.plot(s.x[order], s.y[order], marker="o", ms=3.5, color=color, label=name)
        if s.lo is not None:
            ax.fill_between(s.x[order], s.lo[order], s.hi[order], color=color, alpha=0.18,
                            linewidth=0)
        ys.append(np.asarray(s.y))
    ax.set_xlim(lo_lim, hi_lim)
    ax.set_ylim(lo_lim, hi_lim)
    ax.set_aspect("equal", adjustable="box")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    add_alt_text(fig, _sentence(title, f"Reliability plot of {ylabel} against {xlabel} for "
                                f"{', '.join(curves)}, the dashed diagonal marking perfect "
                                f"agreement; {_range_text(ys)}."))
    return fig
