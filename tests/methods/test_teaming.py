"""teaming: partitions, combination (hand-computed cases), delegation, synthetic generator."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from trustlab.core import InputError, NotFittedError
from trustlab.methods.teaming import (
    ConfidenceDelegator,
    ConfusionMatrixCombiner,
    KMeansPartition,
    L2DSurrogateDelegator,
    OneVsAllDelegator,
    OracleDelegator,
    ProductOfExpertsCombiner,
    TemperatureScaling,
    WeightedAverageCombiner,
    confidence_class_cells,
    delegation_features,
    function_cells,
    labels_to_probs,
    make_teaming_data,
    partition_calibration,
    partition_calibration_ci,
    reliability_diagrams_by_cell,
    team_probs,
)
from trustlab.stats import calibration_by_cell

# ----------------------------------------------------------------------------- partitions


def test_labels_to_probs_puts_confidence_on_label():
    p = labels_to_probs(np.array([0, 2]), np.array([0.7, 0.4]), 3)
    np.testing.assert_allclose(p, [[0.7, 0.15, 0.15], [0.3, 0.3, 0.4]])
    with pytest.raises(InputError):
        labels_to_probs(np.array([0]), 0.2, 3)  # below 1/K: label would not be top


def test_confidence_class_cells_hand_case():
    probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8], [0.45, 0.55]])
    # bins split [1/2, 1] at 0.75: conf 0.9 -> 1, 0.6 -> 0, 0.8 -> 1, 0.55 -> 0
    np.testing.assert_array_equal(confidence_class_cells(probs, n_bins=2), [1, 0, 3, 2])


def test_function_and_kmeans_cells():
    x = np.random.default_rng(0).normal(size=(200, 2)) + np.repeat([[0, 0], [8, 8]], 100, axis=0)
    cells = function_cells(lambda a: (a[:, 0] > 4).astype(int), x)
    np.testing.assert_array_equal(cells, np.repeat([0, 1], 100))
    with pytest.raises(NotFittedError):
        KMeansPartition(2).assign(x)
    km = KMeansPartition(2, random_state=0).fit(x).assign(x)
    assert len(np.unique(km[:100])) == 1 and len(np.unique(km[100:])) == 1 and km[0] != km[150]
    with pytest.raises(InputError):
        function_cells(lambda a: np.zeros(3), x)


def test_partition_calibration_matches_stats_and_finds_the_bad_cell():
    rng = np.random.default_rng(1)
    n = 4000
    cells = np.repeat([0, 1], n // 2)
    conf = np.full(n, 0.8)
    # cell 0 calibrated (80% right), cell 1 overconfident (50% right)
    right = np.where(cells == 0, rng.uniform(size=n) < 0.8, rng.uniform(size=n) < 0.5)
    labels = np.where(right, 0, 1)
    probs = np.stack([conf, 1 - conf], axis=1)
    res = partition_calibration(probs, labels, cells, min_count=30)
    ref = calibration_by_cell(probs, labels, cells, n_bins=10)
    np.testing.assert_allclose(res.table["ece"], ref["ece"])
    assert res.worst_cell_ece == pytest.approx(ref["ece"].max())
    assert res.worst_cell_ece > 0.25 and res.table["ece"].iloc[0] < 0.03
    est, low, high = partition_calibration_ci(probs, labels, cells, statistic="worst_cell_ece",
                                              n_resamples=50, rng=0)
    assert low <= est + 0.02 and 0.25 < low < high < 0.36
    fig = reliability_diagrams_by_cell(probs, labels, cells)
    assert sum(ax.get_visible() for ax in fig.axes) == 2


# ----------------------------------------------------------------------------- combination


def test_confusion_matrix_combiner_hand_case():
    # prior: accuracy 0.75, strength 4 -> pseudo-counts 3 on the diagonal, 1 off it
    y = np.array([0, 0, 1, 1])
    h = np.array([0, 1, 1, 1])
    pm_fit = np.full((4, 2), 0.5)
    comb = ConfusionMatrixCombiner(prior_accuracy=0.75, prior_strength=4.0, calibrate_model=False)
    comb.fit(pm_fit, h, y)
    # row y=0: counts [1, 1] + [3, 1] = [4, 2]; row y=1: [0, 2] + [1, 3] = [1, 5]
    np.testing.assert_allclose(comb.confusion_, [[4 / 6, 2 / 6], [1 / 6, 5 / 6]])
    out = comb.predict_proba(np.array([[0.6, 0.4]]), np.array([1]))
    # joint [0.6 * 1/3, 0.4 * 5/6] = [0.2, 1/3] -> [0.375, 0.625]
    np.testing.assert_allclose(out, [[0.375, 0.625]])
    with pytest.raises(NotFittedError):
        ConfusionMatrixCombiner().predict_proba(np.array([[0.6, 0.4]]), np.array([1]))


def test_weighted_average_hand_case_and_fit():
    ph, pm = np.array([[1.0, 0.0]]), np.array([[0.2, 0.8]])
    wa = WeightedAverageCombiner(weight=0.25).fit(pm, ph, np.array([0]))
    np.testing.assert_allclose(wa.predict_proba(pm, ph), [[0.4, 0.6]])
    # the human always puts more mass on the truth: the NLL-optimal weight is 1
    fitted = WeightedAverageCombiner().fit(np.array([[0.5, 0.5], [0.7, 0.3]]),
                                           np.array([[0.9, 0.1], [0.1, 0.9]]), np.array([0, 1]))
    assert fitted.weight_ == pytest.approx(1.0, abs=1e-4)
    with pytest.raises(InputError):
        WeightedAverageCombiner(weight=1.5).fit(pm, ph, np.array([0]))


def test_product_of_experts_hand_case_and_fit():
    ph, pm = np.array([[0.8, 0.2]]), np.array([[0.6, 0.4]])
    poe = ProductOfExpertsCombiner(weights=(1.0, 1.0)).fit(pm, ph, np.array([0]))
    np.testing.assert_allclose(poe.predict_proba(pm, ph), [[0.48 / 0.56, 0.08 / 0.56]])
    poe2 = ProductOfExpertsCombiner(weights=(2.0, 0.0)).fit(pm, ph, np.array([0]))
    np.testing.assert_allclose(poe2.predict_proba(pm, ph), [[0.64 / 0.68, 0.04 / 0.68]])
    # the fitted weights can only lower the fit-split NLL below the plain product
    d = make_teaming_data(3000, rng=3)
    fitted = ProductOfExpertsCombiner().fit(d.model_probs, d.human_probs, d.labels)
    plain = ProductOfExpertsCombiner((1.0, 1.0)).fit(d.model_probs, d.human_probs, d.labels)
    rows = np.arange(d.n)

    def nll(c):
        return -np.mean(np.log(c.predict_proba(d.model_probs, d.human_probs)[rows, d.labels]))

    assert nll(fitted) <= nll(plain) + 1e-9


def test_temperature_scaling_recovers_the_temperature():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(20000, 5)) * 2.0
    true = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    y = (rng.uniform(size=(20000, 1)) > np.cumsum(true, 1)).sum(1)
    sharp = np.exp(2.0 * logits)
    sharp /= sharp.sum(1, keepdims=True)  # temperature 0.5 applied: T should come back as ~2
    ts = TemperatureScaling().fit(sharp, y)
    assert ts.temperature_ == pytest.approx(2.0, rel=0.05)


# ----------------------------------------------------------------------------- delegation


def test_team_probs_takes_rows_whole():
    ph, pm = np.array([[0.9, 0.1], [0.8, 0.2]]), np.array([[0.3, 0.7], [0.4, 0.6]])
    np.testing.assert_array_equal(team_probs(np.array([True, False]), pm, ph), [ph[0], pm[1]])


def test_oracle_delegates_to_the_more_likely_right():
    d = OracleDelegator().fit().defer(np.array([0.9, 0.2, 0.5]), np.array([0.5, 0.4, 0.6]))
    np.testing.assert_array_equal(d, [True, False, False])


def _toy(human_right: float, n: int = 600, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    y = rng.integers(0, 3, size=n)
    h = np.where(rng.uniform(size=n) < human_right, y, (y + 1) % 3)
    pm = np.full((n, 3), 1 / 3)
    return x, pm, h, y


@pytest.mark.parametrize("cls", [ConfidenceDelegator, L2DSurrogateDelegator, OneVsAllDelegator])
def test_delegators_follow_the_expert_they_should(cls):
    # an always-right human on features that say nothing about y: defer everything
    x, pm, h, y = _toy(1.0)
    assert cls("logistic").fit(x, pm, h, y).defer(x, pm).mean() > 0.95
    # an always-wrong human: defer nothing
    x, pm, h, y = _toy(0.0)
    assert cls("logistic").fit(x, pm, h, y).defer(x, pm).mean() < 0.05
    with pytest.raises(NotFittedError):
        cls("logistic").defer(x, pm)


def test_ova_defer_head_estimates_the_human_accuracy():
    # Verma & Nalisnick: sigma(g_perp) is a calibrated estimate of P(human right | x)
    x, pm, h, y = _toy(0.7, n=4000, seed=1)
    scores = OneVsAllDelegator("logistic").fit(x, pm, h, y).scores(x)
    assert scores[:, -1].mean() == pytest.approx(0.7, abs=0.02)


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_l2d_surrogate_reaches_its_population_optimum(alpha):
    """With uninformative features, L_CE^alpha is minimised at closed-form outputs.

    Expected loss: -sum_j eta_j (alpha p + 1 - p) log g_j - p log g_perp, with p = P(human
    right) and eta_j = 1/3, so g_perp = p / (alpha p + 1 - p + p) and g_j the rest evenly.
    """
    x, pm, h, y = _toy(0.6, n=6000, seed=2)
    p = np.mean(h == y)
    g = L2DSurrogateDelegator("logistic", alpha=alpha).fit(x, pm, h, y).scores(x)
    class_weight = alpha * p + 1 - p
    assert g[:, -1].mean() == pytest.approx(p / (class_weight + p), abs=0.015)
    assert g[:, :-1].mean() == pytest.approx(class_weight / (class_weight + p) / 3, abs=0.01)


def test_bad_capacity_is_rejected():
    x, pm, h, y = _toy(0.5)
    with pytest.raises(InputError):
        ConfidenceDelegator("huge").fit(x, pm, h, y)


# ----------------------------------------------------------------------------- synthetic


def test_synthetic_human_and_model_are_calibrated_per_cell():
    d = make_teaming_data(40000, grid=2, rng=0)
    for cell in range(4):
        m = d.cells == cell
        acc = np.mean(d.human_labels[m] == d.labels[m])
        assert acc == pytest.approx(d.human_probs[m].max(axis=1).mean(), abs=0.02)
    model = partition_calibration(d.model_probs, d.labels, d.cells)
    assert model.worst_cell_ece < 0.02
    over = make_teaming_data(40000, human_overconfidence=0.1, rng=0)
    # +0.1 on dark cells (0.4 -> 0.5), +0.05 on light ones (0.95 -> 1, clipped): mean ~0.075
    over_cal = partition_calibration(over.human_probs, over.labels, over.cells)
    assert over_cal.mean_cell_ece == pytest.approx(0.075, abs=0.01)


def _central(seed: int):
    """Fit on one split, evaluate on another: human, CM combination, averaging, delegation."""
    d = make_teaming_data(26000, rng=seed)
    fit, ev = d.subset(np.arange(6000)), d.subset(np.arange(6000, d.n))
    cal = {}

    def measure(name, probs):
        cal[name] = partition_calibration_ci(probs, ev.labels, ev.cells, n_resamples=40, rng=seed)

    measure("human", ev.human_probs)
    measure("model", ev.model_probs)
    cm = ConfusionMatrixCombiner().fit(fit.model_probs, fit.human_labels, fit.labels)
    measure("confusion_matrix", cm.predict_proba(ev.model_probs, ev.human_labels))
    wa = WeightedAverageCombiner().fit(fit.model_probs, fit.human_probs, fit.labels)
    measure("weighted_average", wa.predict_proba(ev.model_probs, ev.human_probs))
    f_fit = delegation_features(fit.features, fit.model_probs)
    f_ev = delegation_features(ev.features, ev.model_probs)
    defers = {"oracle": OracleDelegator().defer(ev.human_correct_prob, ev.model_correct_prob)}
    with threadpool_limits(1):
        for name, cls in (("confidence", ConfidenceDelegator), ("l2d", L2DSurrogateDelegator),
                          ("ova", OneVsAllDelegator)):
            dl = cls("logistic", random_state=seed).fit(f_fit, fit.model_probs, fit.human_labels,
                                                        fit.labels)
            defers[name] = dl.defer(f_ev, ev.model_probs)
    human_parts = {}
    for name, defer in defers.items():
        measure(name, team_probs(defer, ev.model_probs, ev.human_probs))
        human_parts[name] = partition_calibration(
            ev.human_probs[defer], ev.labels[defer], ev.cells[defer]
        ).mean_cell_ece
    return cal, human_parts


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_delegation_preserves_and_combination_breaks_calibration(seed):
    cal, human_parts = _central(seed)
    human_est, _, human_high = cal["human"]
    floor = max(cal["human"][0], cal["model"][0])
    for name in ("oracle", "confidence", "l2d", "ova"):
        # the delegated team is as calibrated per cell as its members (noise floor + 0.01) ...
        assert cal[name][0] <= floor + 0.01, (name, cal[name], floor)
        # ... and the human stays calibrated on the points it is given
        assert human_parts[name] <= 0.03, (name, human_parts[name])
    # the Kerrigan combination and the linear pool break the human's per-cell calibration:
    # their whole bootstrap interval lies above the human's, by a clear margin
    for name, margin in (("confusion_matrix", 0.015), ("weighted_average", 0.05)):
        est, low, _ = cal[name]
        assert low > human_high, (name, cal[name], cal["human"])
        assert est - human_est > margin, (name, est, human_est)


def test_capacity_demand_boosting_beats_logistic_on_the_checkerboard():
    gains = []
    for seed in (0, 1):
        d = make_teaming_data(12000, rng=seed)
        fit, ev = d.subset(np.arange(6000)), d.subset(np.arange(6000, d.n))
        f_fit = delegation_features(fit.features, fit.model_probs)
        f_ev = delegation_features(ev.features, ev.model_probs)
        acc = {}
        with threadpool_limits(1):
            for cap in ("logistic", "boosting"):
                dl = ConfidenceDelegator(cap, random_state=seed).fit(
                    f_fit, fit.model_probs, fit.human_labels, fit.labels)
                tp = dl.predict_proba(f_ev, ev.model_probs, ev.human_probs)
                acc[cap] = np.mean(tp.argmax(1) == ev.labels)
        oracle = team_probs(OracleDelegator().defer(ev.human_correct_prob, ev.model_correct_prob),
                            ev.model_probs, ev.human_probs)
        acc["oracle"] = np.mean(oracle.argmax(1) == ev.labels)
        assert acc["logistic"] < acc["boosting"] <= acc["oracle"] + 0.01, acc
        gains.append(acc["boosting"] - acc["logistic"])
    assert min(gains) > 0.015, gains


def test_generator_rejects_bad_values():
    with pytest.raises(InputError):
        make_teaming_data(100, human_accuracy=(0.05, 0.5))  # below 1/K
    with pytest.raises(InputError):
        make_teaming_data(1)
    d = make_teaming_data(50, rng=7)
    np.testing.assert_array_equal(d.labels, make_teaming_data(50, rng=7).labels)


# ----------------------------------------------------------------------------- annotators


def test_precision_annotator_states_its_precision_per_label():
    from trustlab.methods.teaming import PrecisionAnnotator

    y = np.array([0, 0, 0, 1, 1, 2])
    h = np.array([0, 0, 1, 1, 0, 2])
    ann = PrecisionAnnotator(3).fit(h, y)
    # label 0 given 3 times, right twice: (2 + 1) / (3 + 2); label 1: (1 + 1) / (2 + 2);
    # label 2: (1 + 1) / (1 + 2)
    np.testing.assert_allclose(ann.precision_, [3 / 5, 2 / 4, 2 / 3])
    probs = ann.predict_proba(np.array([2, 0]))
    np.testing.assert_allclose(probs[0], [1 / 6, 1 / 6, 2 / 3])
    with pytest.raises(NotFittedError):
        PrecisionAnnotator(3).predict_proba(h)
    with pytest.raises(InputError, match="must have 6 entries"):
        PrecisionAnnotator(3).fit(h, y[:5])


def test_votes_team_is_calibrated_per_label_and_fits_on_the_fit_split_only():
    from trustlab.methods.teaming import PrecisionAnnotator, votes_team

    rng = np.random.default_rng(0)
    n, k = 24000, 4
    y = rng.integers(0, k, n)
    skill = rng.uniform(0.3, 0.95, n)  # the share of annotators right on each item
    pvals = np.where(np.arange(k)[None, :] == y[:, None], skill[:, None], (1 - skill[:, None]) / (k - 1))
    counts = rng.multinomial(50, pvals).astype(float)
    human = (counts.cumsum(1) / counts.sum(1, keepdims=True) > rng.random((n, 1))).argmax(1)
    logits = 2.0 * np.eye(k)[y] + rng.normal(size=(n, k))
    probs = np.exp(3 * logits) / np.exp(3 * logits).sum(1, keepdims=True)  # overconfident
    order = rng.permutation(n)
    fit, ev = votes_team(probs, y, counts, human, order[:12000], order[12000:])
    assert fit.n == 12000 and ev.n == 12000
    # the stated precision of each label matches the evaluation split's precision (each label
    # is said ~3,000 times per split: SE about 0.009 each, so 0.03 is over 2 combined SE)
    for lab in range(k):
        said = ev.human_labels == lab
        assert np.mean(ev.labels[said] == lab) == pytest.approx(ev.human_probs[said, lab].mean(), abs=0.03)
    # nothing learned from the evaluation split: refitting on fit rows alone gives the same
    ann = PrecisionAnnotator(k).fit(human[order[:12000]], y[order[:12000]])
    np.testing.assert_allclose(ev.human_probs, ann.predict_proba(ev.human_labels))
    np.testing.assert_allclose(ev.human_correct_prob, counts[order[12000:], y[order[12000:]]] / 50)
    # the model is temperature-scaled on the fit split: its per-cell ECE falls
    from trustlab.stats import ece

    assert ece(ev.model_probs, ev.labels) < ece(probs[order[12000:]], y[order[12000:]])
    with pytest.raises(InputError, match="disjoint"):
        votes_team(probs, y, counts, human, order[:12000], order[11999:])


def test_synthetic_team_settings_check_accuracy_against_chance():
    from pydantic import ValidationError

    from trustlab.methods.teaming import SyntheticTeam

    with pytest.raises(ValidationError, match="1/n_classes"):
        SyntheticTeam(n_classes=10, human_accuracy_dark=0.05)
    team = SyntheticTeam(n_classes=4, grid=1)
    d = team.generate(300, rng=3)
    np.testing.assert_array_equal(
        d.labels, make_teaming_data(300, n_classes=4, grid=1, human_accuracy=(0.95, 0.4), rng=3).labels
    )
