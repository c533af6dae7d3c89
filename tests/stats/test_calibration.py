"""Calibration error: known-answer cases, binning invariants, per-cell search and the plot."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from trustlab.core.errors import InputError
from trustlab.stats import (
    CalibrationBins,
    calibration_bins,
    calibration_by_cell,
    classwise_ece,
    ece,
    reliability_diagram,
    worst_cell_ece,
)


def _calibrated_multiclass(n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Dirichlet probabilities with labels drawn from them: calibrated by construction."""
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(k, 0.5), size=n)
    u = rng.random(n)[:, None]
    labels = np.minimum((u > np.cumsum(probs, axis=1)).sum(axis=1), k - 1)
    return probs, labels


def _overconfident(n: int, conf: float, acc: float) -> tuple[np.ndarray, np.ndarray]:
    """Every row says ``conf`` for class 0; exactly ``acc`` of the labels are 0."""
    rest = (1 - conf) / 2
    probs = np.tile([conf, rest, rest], (n, 1))
    labels = np.where(np.arange(n) < round(acc * n), 0, 1)
    return probs, labels


def _loop_ece(conf: np.ndarray, correct: np.ndarray, n_bins: int) -> float:
    """Guo et al. (2017) reference: bins (lo, hi], the first also takes 0."""
    edges = np.linspace(0, 1, n_bins + 1)
    total = 0.0
    for i in range(n_bins):
        lo, hi = edges[i], edges[i + 1]
        mask = (conf > lo) & (conf <= hi) if i > 0 else (conf <= hi)
        if mask.any():
            total += mask.mean() * abs(correct[mask].mean() - conf[mask].mean())
    return total


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_calibrated_data_has_near_zero_ece(strategy: str) -> None:
    rng = np.random.default_rng(0)
    p = rng.random(200_000)
    y = (rng.random(p.size) < p).astype(int)
    assert ece(p, y, strategy=strategy) < 0.01
    assert classwise_ece(p, y, strategy=strategy) < 0.01
    probs, labels = _calibrated_multiclass(100_000, 5, seed=1)
    assert ece(probs, labels, strategy=strategy) < 0.01
    assert classwise_ece(probs, labels, strategy=strategy) < 0.01


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("norm", ["l1", "l2", "max"])
def test_overconfident_model_has_the_known_gap(strategy: str, norm: str) -> None:
    probs, labels = _overconfident(1000, conf=0.9, acc=0.6)
    assert ece(probs, labels, strategy=strategy, norm=norm) == pytest.approx(0.3)


def test_miscalibration_is_detected_against_a_calibrated_baseline() -> None:
    probs, labels = _calibrated_multiclass(50_000, 4, seed=2)
    sharpened = probs**3 / (probs**3).sum(axis=1, keepdims=True)  # overconfident version
    assert ece(sharpened, labels) > ece(probs, labels) + 0.05


def test_hand_computed_tiny_example() -> None:
    # Binary positive-class probabilities; top-label confidences 0.8, 0.7, 0.6, 0.95.
    p = np.array([0.2, 0.7, 0.6, 0.95])
    y = np.array([0, 0, 1, 1])
    # Top-label predictions: 0 (right), 1 (wrong), 1 (right), 1 (right).
    # With 2 uniform bins: [0, .5] is empty; (.5, 1] holds all four:
    #   conf mean = (0.8 + 0.7 + 0.6 + 0.95) / 4 = 0.7625, accuracy 0.75 -> ECE 0.0125.
    assert ece(p, y, n_bins=2) == pytest.approx(0.0125)
    # With 4 bins: (.5,.75] holds 0.7 (wrong), 0.6 (right): conf 0.65, acc 0.5, gap 0.15;
    # (.75, 1] holds 0.8 (right), 0.95 (right): conf 0.875, acc 1, gap 0.125.
    # ECE = 0.5 * 0.15 + 0.5 * 0.125 = 0.1375; MCE = 0.15; l2 = sqrt(.5*.0225 + .5*.015625).
    assert ece(p, y, n_bins=4) == pytest.approx(0.1375)
    assert ece(p, y, n_bins=4, norm="max") == pytest.approx(0.15)
    assert ece(p, y, n_bins=4, norm="l2") == pytest.approx(np.sqrt(0.5 * 0.0225 + 0.5 * 0.015625))
    bins = calibration_bins([0.8, 0.7, 0.6, 0.95], [1, 0, 1, 1], n_bins=4)
    np.testing.assert_array_equal(bins.counts, [0, 0, 2, 2])
    np.testing.assert_allclose(bins.accuracy[2:], [0.5, 1.0])
    np.testing.assert_allclose(bins.mean_confidence[2:], [0.65, 0.875])
    assert np.isnan(bins.accuracy[:2]).all() and np.isnan(bins.mean_confidence[:2]).all()
    assert bins.calibration_error() == pytest.approx(0.1375)


def test_uniform_bins_are_right_closed_and_match_loop_reference() -> None:
    bins = calibration_bins([0.0, 0.1, 0.1000001, 1.0], [1, 1, 1, 1], n_bins=10)
    np.testing.assert_array_equal(bins.counts, [2, 1, 0, 0, 0, 0, 0, 0, 0, 1])
    np.testing.assert_allclose(bins.edges, np.linspace(0, 1, 11))
    rng = np.random.default_rng(3)
    conf = np.round(rng.random(5000), 2)  # many values exactly on bin edges
    correct = (rng.random(conf.size) < conf**2).astype(int)
    ours = calibration_bins(conf, correct, n_bins=20).calibration_error()
    assert ours == pytest.approx(_loop_ece(conf, correct, 20), abs=1e-12)


@pytest.mark.parametrize(("n", "n_bins"), [(1003, 10), (1000, 15), (17, 5), (3, 7)])
def test_quantile_bins_have_equal_mass(n: int, n_bins: int) -> None:
    rng = np.random.default_rng(n)
    conf = rng.random(n)
    bins = calibration_bins(conf, rng.random(n) < 0.5, n_bins=n_bins, strategy="quantile")
    assert bins.counts.sum() == n
    assert bins.counts.max() - bins.counts.min() <= 1
    assert bins.edges[0] == 0.0 and bins.edges[-1] == 1.0
    assert np.all(np.diff(bins.edges) >= 0)
    full = bins.counts > 0
    assert np.all(np.diff(bins.mean_confidence[full]) > 0)
    # Each bin holds exactly the samples between its edges.
    inner = np.searchsorted(bins.edges[1:-1], conf)
    np.testing.assert_array_equal(np.bincount(inner, minlength=n_bins), bins.counts)


def test_quantile_bins_never_split_ties() -> None:
    rng = np.random.default_rng(9)
    conf = np.round(rng.random(2000), 1)  # 11 distinct values, heavy ties
    correct = rng.random(conf.size) < 0.5
    bins = calibration_bins(conf, correct, n_bins=8, strategy="quantile")
    assert bins.counts.sum() == conf.size
    # Every bin's samples share no value with any other bin: recover each bin from its edges.
    inner = np.searchsorted(bins.edges[1:-1], conf)
    np.testing.assert_array_equal(np.bincount(inner, minlength=8), bins.counts)
    for value in np.unique(conf):
        assert np.unique(inner[conf == value]).size == 1
    # Ties do not let label order leak into the bins (all-tied data is one bin).
    probs = np.tile([0.9, 0.1], (100, 1))
    labels = np.repeat([0, 1], [60, 40])
    assert ece(probs, labels, strategy="quantile") == pytest.approx(0.3)


def test_calibration_bins_is_frozen() -> None:
    bins = calibration_bins([0.2, 0.9], [0, 1], n_bins=3)
    assert isinstance(bins, CalibrationBins) and bins.n_bins == 3 and bins.n_samples == 2
    with pytest.raises(AttributeError):
        bins.counts = np.zeros(3)  # type: ignore[misc]
    with pytest.raises(ValueError, match="read-only"):
        bins.counts[0] = 5


def test_binary_vector_equals_two_column_matrix() -> None:
    rng = np.random.default_rng(4)
    p = rng.random(3000)
    y = (rng.random(p.size) < p**1.5).astype(int)
    two = np.stack([1 - p, p], axis=1)
    for strategy in ("uniform", "quantile"):
        assert ece(p, y, strategy=strategy) == pytest.approx(ece(two, y, strategy=strategy))
        assert classwise_ece(p, y, strategy=strategy) == pytest.approx(
            classwise_ece(two, y, strategy=strategy)
        )


def test_classwise_on_binary_equals_positive_class_calibration() -> None:
    rng = np.random.default_rng(5)
    p = rng.random(5000)
    y = (rng.random(p.size) < np.clip(p + 0.1, 0, 1)).astype(int)
    positive = calibration_bins(p, y == 1, n_bins=15).calibration_error()
    negative = calibration_bins(1 - p, y == 0, n_bins=15).calibration_error()
    assert positive == pytest.approx(negative)
    assert classwise_ece(p, y, n_bins=15) == pytest.approx(positive)


def test_classwise_matches_per_class_loop() -> None:
    probs, labels = _calibrated_multiclass(4000, 6, seed=6)
    probs = probs**2 / (probs**2).sum(axis=1, keepdims=True)
    for strategy in ("uniform", "quantile"):
        per_class = [
            calibration_bins(probs[:, c], labels == c, 10, strategy).calibration_error()
            for c in range(6)
        ]
        assert classwise_ece(probs, labels, 10, strategy) == pytest.approx(np.mean(per_class))


def test_calibration_by_cell_finds_the_miscalibrated_cell() -> None:
    good_p, good_y = _calibrated_multiclass(6000, 3, seed=7)
    bad_p, bad_y = _overconfident(1000, conf=0.9, acc=0.6)
    probs = np.concatenate([good_p, bad_p])
    labels = np.concatenate([good_y, bad_y])
    cells = np.array(["a"] * 3000 + ["b"] * 3000 + ["c"] * 1000)
    table = calibration_by_cell(probs, labels, cells)
    assert isinstance(table, pd.DataFrame)
    assert list(table.columns) == ["cell", "n", "accuracy", "mean_confidence", "ece"]
    assert list(table["cell"]) == ["a", "b", "c"] and list(table["n"]) == [3000, 3000, 1000]
    worst = table.loc[table["ece"].idxmax()]
    assert worst["cell"] == "c"
    assert worst["ece"] == pytest.approx(0.3)
    assert worst["accuracy"] == pytest.approx(0.6) and worst["mean_confidence"] == pytest.approx(
        0.9
    )
    assert table.loc[table["cell"] != "c", "ece"].max() < 0.05
    assert worst_cell_ece(probs, labels, cells) == pytest.approx(0.3)
    # A tiny cell is excluded by min_count.
    assert worst_cell_ece(probs, labels, cells, min_count=2000) < 0.05
    with pytest.raises(InputError, match="No cell has at least"):
        worst_cell_ece(probs, labels, cells, min_count=10_000)


def test_calibration_by_cell_accepts_mixed_unorderable_ids() -> None:
    probs, labels = _overconfident(40, conf=0.9, acc=0.5)
    cells = [1, "x"] * 20
    table = calibration_by_cell(probs, labels, cells, n_bins=5)
    assert set(table["cell"]) == {1, "x"}
    assert table["n"].sum() == 40


def test_reliability_diagram_returns_a_figure_without_display() -> None:
    probs, labels = _calibrated_multiclass(2000, 3, seed=8)
    fig = reliability_diagram(probs, labels, n_bins=10, title="calibrated")
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2
    assert fig.axes[0].get_title() == "calibrated"
    assert len(fig.axes[0].patches) > 0 and len(fig.axes[0].lines) == 1
    fig.canvas.draw()  # renders with Agg, no window

    host = Figure()
    ax = host.add_subplot()
    out = reliability_diagram(probs, labels, n_bins=5, strategy="quantile", ax=ax)
    assert out is host and len(host.axes) == 1
    assert len(ax.texts) == 5  # count annotations, one per non-empty bin


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_bins": 0}, r"'n_bins' parameter of ece must be in \[1, inf\]"),
        ({"strategy": "kmeans"}, "'strategy' parameter of ece must be one of"),
        ({"norm": "l3"}, "'norm' parameter of ece must be one of"),
    ],
)
def test_bad_options_raise(kwargs: dict, match: str) -> None:
    with pytest.raises(InputError, match=match):
        ece(np.array([0.2, 0.8]), np.array([0, 1]), **kwargs)


@pytest.mark.parametrize(
    ("probs", "labels", "match"),
    [
        (np.array([0.2, 1.2]), [0, 1], r"must lie in \[0, 1\]"),
        (np.array([0.2, np.nan]), [0, 1], "must be finite"),
        (np.array([[0.2, 0.2], [0.5, 0.5]]), [0, 1], "rows that sum to 1"),
        (np.array([0.2, 0.8]), [0, 2], r"class ids in \[0, 2\)"),
        (np.array([0.2, 0.8]), [0, 1, 1], "must have 2 entries"),
        (np.array([0.2, 0.8]), [0.5, 1.0], "integer class ids"),
        (np.zeros((0, 3)), [], "must not be empty"),
        (np.ones((2, 1)), [0, 0], "at least 2"),
    ],
)
def test_bad_probs_or_labels_raise(probs: np.ndarray, labels: list, match: str) -> None:
    with pytest.raises(InputError, match=match):
        ece(probs, labels)


def test_bad_bins_input_raise() -> None:
    with pytest.raises(InputError, match="only 0/1"):
        calibration_bins([0.2, 0.4], [0.5, 1.0])
    with pytest.raises(InputError, match="must have shape"):
        calibration_bins([0.2, 0.4], [1])
    with pytest.raises(InputError, match="missing"):
        calibration_by_cell(np.array([0.2, 0.8]), [0, 1], ["a", None])
    with pytest.raises(InputError, match="one cell id per sample"):
        calibration_by_cell(np.array([0.2, 0.8]), [0, 1], ["a"])
