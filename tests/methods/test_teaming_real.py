"""teaming: cross-check against torchmetrics, CIFAR-10H (realdata), the experiment end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trustlab.core import run_experiment
from trustlab.methods.teaming import (
    ConfusionMatrixCombiner,
    TemperatureScaling,
    make_teaming_data,
    partition_calibration,
)


def _cifar10h_dir() -> Path:
    from trustlab.datasets.cifar10h import default_cifar10h_dir

    root = default_cifar10h_dir()
    if not root.is_dir():
        pytest.skip(f"CIFAR-10H not available here: {root} (CC BY-NC-SA, never bundled)")
    return root


# ----------------------------------------------------------------------------- torchmetrics


def test_per_cell_ece_matches_torchmetrics():
    torch = pytest.importorskip("torch")
    tm = pytest.importorskip("torchmetrics.classification")
    d = make_teaming_data(6000, model_temperature=0.7, rng=4)  # overconfident model: ECE > 0
    res = partition_calibration(d.model_probs, d.labels, d.cells, n_bins=10)
    metric = tm.MulticlassCalibrationError(num_classes=d.n_classes, n_bins=10, norm="l1")
    for _, row in res.table.iterrows():
        m = d.cells == row["cell"]
        ref = float(metric(torch.tensor(d.model_probs[m]), torch.tensor(d.labels[m])))
        assert row["ece"] == pytest.approx(ref, abs=1e-6)
    assert res.worst_cell_ece > 0.03  # the overconfidence is seen


# ----------------------------------------------------------------------------- CIFAR-10H


@pytest.mark.realdata
def test_cifar10h_loader_layouts_agree():
    from trustlab.datasets.cifar10h import CIFAR10H_MODELS, load_cifar10h, sample_human_labels

    root = _cifar10h_dir()
    ref = load_cifar10h("resnet-110", root=root)
    assert ref.probs.shape == (10000, 10) and ref.labels.min() == 0 and ref.labels.max() == 9
    for model in CIFAR10H_MODELS:
        other = load_cifar10h(model, root=root)
        # the 1-indexed file must line up with the 0-indexed ones after conversion
        np.testing.assert_array_equal(other.labels, ref.labels)
        np.testing.assert_allclose(other.human_counts, ref.human_counts)
        assert np.mean(other.probs.argmax(1) == other.labels) > 0.85
    h = sample_human_labels(ref.human_counts, rng=0)
    share = ref.human_counts[np.arange(10000), ref.labels] / ref.human_counts.sum(1)
    assert np.mean(h == ref.labels) == pytest.approx(share.mean(), abs=0.01)
    np.testing.assert_array_equal(h, sample_human_labels(ref.human_counts, rng=0))


@pytest.mark.realdata
def test_cifar10h_combination_beats_both_teammates():
    """Kerrigan et al.: the calibrated confusion-matrix combination beats human and model."""
    from trustlab.datasets.cifar10h import load_cifar10h, sample_human_labels

    data = load_cifar10h("resnet-110", root=_cifar10h_dir())
    rng = np.random.default_rng(0)
    h = sample_human_labels(data.human_counts, rng)
    order = rng.permutation(10000)
    fit, ev = order[:7000], order[7000:]
    comb = ConfusionMatrixCombiner().fit(data.probs[fit], h[fit], data.labels[fit])
    out = comb.predict_proba(data.probs[ev], h[ev])
    acc = np.mean(out.argmax(1) == data.labels[ev])
    human = np.mean(h[ev] == data.labels[ev])
    model = np.mean(data.probs[ev].argmax(1) == data.labels[ev])
    assert acc > max(human, model) + 0.01, (acc, human, model)
    # temperature scaling fixes most of the CNN's overconfidence
    ts = TemperatureScaling().fit(data.probs[fit], data.labels[fit])
    from trustlab.stats import ece

    assert ece(ts.transform(data.probs[ev]), data.labels[ev]) < ece(data.probs[ev], data.labels[ev])


# ----------------------------------------------------------------------------- experiment


def test_quick_experiment_reports_the_central_finding(tmp_path):
    run_experiment("teaming", quick=True, seed=3, out_dir=tmp_path / "run",
                   overrides=["cifar10h=false"])
    data = json.loads((tmp_path / "run" / "report.json").read_text())
    m = {k: v["value"] for k, v in data["metrics"].items()}
    assert m["synthetic_confusion_matrix_mean_cell_ece"] > m["synthetic_human_mean_cell_ece"]
    assert m["synthetic_weighted_average_mean_cell_ece"] > 0.05
    assert m["synthetic_oracle_delegation_accuracy"] > max(m["synthetic_human_accuracy"],
                                                           m["synthetic_model_accuracy"])
    assert {"synthetic_methods", "synthetic_calibration_preservation"} <= set(data["tables"])
    assert "synthetic_capacity_curve" in data["figures"]
    assert (tmp_path / "run" / "figures" / "synthetic_capacity_curve.png").is_file()
