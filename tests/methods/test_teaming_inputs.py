"""teaming's public API on malformed input: InputError with one line, or the canonical result.

Every name in ``trustlab.methods.teaming.__all__`` that takes arguments is a case below (issue
38's contract); the corruptions per argument kind are in tests/malformed.py. The reported
reproductions (NaN model probabilities given to ConfidenceDelegator, human probabilities outside
[0, 1], a one-row human_probs broadcast by the combiners, shape mismatches, min_count=-5) are
replayed in test_the_reported_reproductions.
"""

from __future__ import annotations

import hypothesis  # noqa: F401 - the property tests are built by malformed_input_tests
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from trustlab.core.errors import InputError
from trustlab.methods import teaming as api
from trustlab.methods.teaming import (
    CAPACITIES,
    ConfidenceDelegator,
    ConfusionMatrixCombiner,
    KMeansPartition,
    L2DSurrogateDelegator,
    OneVsAllDelegator,
    OracleDelegator,
    PrecisionAnnotator,
    ProductOfExpertsCombiner,
    TeamingData,
    TemperatureScaling,
    WeightedAverageCombiner,
)

from ..malformed import (
    ARRAY,
    BOOL,
    CHOICE,
    INT,
    LABELS,
    PROBS,
    RNG,
    SAMPLES,
    UNIT,
    Case,
    Kind,
    Mutation,
    malformed_input_tests,
    scalar,
)

D = api.make_teaming_data(240, n_classes=4, rng=0)
FIT, EV = D.subset(np.arange(170)), D.subset(np.arange(170, 240))
F_FIT = api.delegation_features(FIT.features, FIT.model_probs)
F_EV = api.delegation_features(EV.features, EV.model_probs)
POSITIVE = scalar("positive", 0.0, -1.0)
RATE_NO_NONE = Kind("rate", tuple(m for m in scalar("rate", -0.1, 1.5).mutations
                                  if m.name != "None"))


def _pair_kind(lo_bad: float) -> Kind:
    return Kind(
        "pair",
        (
            Mutation("one number", lambda v, r: 1.0),
            Mutation("three numbers", lambda v, r: (1.0, 1.0, 1.0)),
            Mutation("negative", lambda v, r: (lo_bad, 1.0)),
            Mutation("nan", lambda v, r: (float("nan"), 1.0)),
            Mutation("strings", lambda v, r: ("1", "1")),
            Mutation("list", lambda v, r: list(v), same=True),
            Mutation("array", lambda v, r: np.asarray(v), same=True),
        ),
    )


def _cm(model_probs, human_labels, labels, model_probs_ev, human_labels_ev, prior_accuracy,
        prior_strength, calibrate_model):
    c = ConfusionMatrixCombiner(prior_accuracy, prior_strength, calibrate_model)
    return c.fit(model_probs, human_labels, labels).predict_proba(model_probs_ev, human_labels_ev)


def _pooled(cls, setting):
    def run(model_probs, human_probs, labels, model_probs_ev, human_probs_ev, **kw):
        c = cls(kw[setting]).fit(model_probs, human_probs, labels)
        return c.predict_proba(model_probs_ev, human_probs_ev)

    return run


def _temperature(probs, labels, probs_ev, bounds):
    return TemperatureScaling(bounds).fit(probs, labels).transform(probs_ev)


def _delegator(cls):
    def run(features, model_probs, human_labels, labels, features_ev, model_probs_ev,
            human_probs_ev, capacity, random_state):
        with threadpool_limits(1):
            d = cls(capacity, random_state=random_state)
            d.fit(features, model_probs, human_labels, labels)
            return d.predict_proba(features_ev, model_probs_ev, human_probs_ev)

    return run


DELEGATOR_ARGS = {
    "features": F_FIT, "model_probs": FIT.model_probs, "human_labels": FIT.human_labels,
    "labels": FIT.labels, "features_ev": F_EV, "model_probs_ev": EV.model_probs,
    "human_probs_ev": EV.human_probs, "capacity": "logistic", "random_state": 3,
}
DELEGATOR_KINDS = {
    "features": SAMPLES, "model_probs": PROBS, "human_labels": LABELS, "labels": LABELS,
    "features_ev": SAMPLES, "model_probs_ev": PROBS, "human_probs_ev": PROBS,
    "capacity": CHOICE(), "random_state": INT(2**40, lo=0).without("None"),
}
LABELS_FREE = LABELS.without("one label short")  # a label list that no other argument sizes
RATES = ARRAY.extend(
    Mutation("above 1", lambda x, r: np.asarray(x) + 1.0),
    Mutation("negative", lambda x, r: np.asarray(x) - 2.0),
    Mutation("one short", lambda x, r: np.asarray(x)[:-1]),
    Mutation("2-D", lambda x, r: np.asarray(x)[:, None]),
)
DEFER = Kind(
    "defer",
    (
        Mutation("0/1 integers", lambda d, r: d.astype(int), same=True),
        Mutation("list", lambda d, r: d.tolist(), same=True),
        Mutation("probabilities", lambda d, r: np.where(d, 0.7, 0.2)),
        Mutation("one short", lambda d, r: d[:-1]),
        Mutation("2-D", lambda d, r: d[:, None]),
        Mutation("None", lambda d, r: None),
        Mutation("nan", lambda d, r: np.where(d, np.nan, 0.0)),
        Mutation("strings", lambda d, r: d.astype(str)),
    ),
)
CELLS = Kind(
    "cells",
    (
        Mutation("list", lambda c, r: list(c), same=True),
        Mutation("torch tensor", lambda c, r: __import__("torch").as_tensor(c), same=True),
        Mutation("nan id", lambda c, r: np.where(np.arange(c.size) == 0, np.nan, c.astype(float))),
        Mutation("None id", lambda c, r: np.array([None, *c[1:]], dtype=object)),
        Mutation("one short", lambda c, r: c[:-1]),
        Mutation("2-D", lambda c, r: c[:, None]),
        Mutation("None", lambda c, r: None),
        Mutation("string", lambda c, r: "cells"),
        Mutation("dict", lambda c, r: {"a": 1}),
    ),
)
DEFER_EV = OracleDelegator().defer(EV.human_correct_prob, EV.model_correct_prob)


def _partition(probs, labels, cells, n_bins, min_count):
    return api.partition_calibration(probs, labels, cells, n_bins=n_bins, min_count=min_count)


def _partition_ci(probs, labels, cells, statistic, n_resamples, confidence_level, rng):
    return api.partition_calibration_ci(
        probs, labels, cells, statistic=statistic, n_bins=4, min_count=5,
        n_resamples=n_resamples, confidence_level=confidence_level, rng=rng,
    )


def _reliability(probs, labels, cells, n_bins, max_cells):
    fig = api.reliability_diagrams_by_cell(probs, labels, cells, n_bins=n_bins, max_cells=max_cells)
    return sum(ax.get_visible() for ax in fig.axes)


def _kmeans(features, features_ev, n_cells, random_state):
    return KMeansPartition(n_cells, random_state=random_state).fit(features).assign(features_ev)


def _meta(capacity, random_state, multilabel):
    return repr(api.make_meta_classifier(capacity, random_state, multilabel))


def _teaming_data(labels, model_probs, human_probs):
    return TeamingData(EV.features, labels, EV.cells, EV.human_labels, human_probs, model_probs,
                       EV.human_correct_prob, EV.model_correct_prob).n


def _annotator(human_labels, labels, human_labels_ev, n_classes):
    return PrecisionAnnotator(n_classes).fit(human_labels, labels).predict_proba(human_labels_ev)


def _votes(model_probs, labels, human_counts, human_labels, fit_idx, eval_idx):
    return api.votes_team(model_probs, labels, human_counts, human_labels, fit_idx, eval_idx)[1]


COUNTS = (np.random.default_rng(1).integers(0, 5, (70, 4)) + np.eye(4)[EV.labels] * 10).astype(float)
INDEX = LABELS.without("label above range", "one label short").extend(
    Mutation("index past the end", lambda v, r: np.r_[v[:-1], 70]),
    Mutation("a repeated index", lambda v, r: np.r_[v[:-1], v[0]]),
)

CASES = [
    Case("ConfusionMatrixCombiner", _cm,
         {"model_probs": FIT.model_probs, "human_labels": FIT.human_labels, "labels": FIT.labels,
          "model_probs_ev": EV.model_probs, "human_labels_ev": EV.human_labels,
          "prior_accuracy": 0.75, "prior_strength": 1.0, "calibrate_model": True},
         {"model_probs": PROBS, "human_labels": LABELS, "labels": LABELS,
          "model_probs_ev": PROBS, "human_labels_ev": LABELS, "prior_accuracy": UNIT,
          "prior_strength": POSITIVE, "calibrate_model": BOOL}),
    Case("WeightedAverageCombiner", _pooled(WeightedAverageCombiner, "weight"),
         {"model_probs": FIT.model_probs, "human_probs": FIT.human_probs, "labels": FIT.labels,
          "model_probs_ev": EV.model_probs, "human_probs_ev": EV.human_probs, "weight": 0.3},
         {"model_probs": PROBS, "human_probs": PROBS, "labels": LABELS,
          "model_probs_ev": PROBS, "human_probs_ev": PROBS, "weight": RATE_NO_NONE}),
    Case("ProductOfExpertsCombiner", _pooled(ProductOfExpertsCombiner, "weights"),
         {"model_probs": FIT.model_probs, "human_probs": FIT.human_probs, "labels": FIT.labels,
          "model_probs_ev": EV.model_probs, "human_probs_ev": EV.human_probs,
          "weights": (1.5, 0.5)},
         {"model_probs": PROBS, "human_probs": PROBS, "labels": LABELS,
          "model_probs_ev": PROBS, "human_probs_ev": PROBS, "weights": _pair_kind(-1.0)}),
    Case("TemperatureScaling", _temperature,
         {"probs": FIT.model_probs, "labels": FIT.labels, "probs_ev": EV.model_probs,
          "bounds": (0.05, 20.0)},
         {"probs": PROBS, "labels": LABELS, "probs_ev": PROBS, "bounds": _pair_kind(0.0)}),
    Case("ConfidenceDelegator", _delegator(ConfidenceDelegator), DELEGATOR_ARGS, DELEGATOR_KINDS),
    Case("L2DSurrogateDelegator", _delegator(L2DSurrogateDelegator), DELEGATOR_ARGS,
         DELEGATOR_KINDS),
    Case("OneVsAllDelegator", _delegator(OneVsAllDelegator), DELEGATOR_ARGS, DELEGATOR_KINDS),
    Case("OracleDelegator", lambda human_correct_prob, model_correct_prob: OracleDelegator().defer(
        human_correct_prob, model_correct_prob),
         {"human_correct_prob": EV.human_correct_prob, "model_correct_prob": EV.model_correct_prob},
         {"human_correct_prob": RATES, "model_correct_prob": RATES}),
    Case("team_probs", api.team_probs,
         {"defer": DEFER_EV, "model_probs": EV.model_probs, "human_probs": EV.human_probs},
         {"defer": DEFER, "model_probs": PROBS, "human_probs": PROBS}),
    Case("delegation_features", api.delegation_features,
         {"features": EV.features, "model_probs": EV.model_probs},
         {"features": SAMPLES.without("empty"), "model_probs": PROBS}),
    Case("make_meta_classifier", _meta,
         {"capacity": "boosting", "random_state": 5, "multilabel": True},
         {"capacity": CHOICE(), "random_state": INT(lo=0).without("None"), "multilabel": BOOL}),
    Case("partition_calibration", _partition,
         {"probs": EV.model_probs, "labels": EV.labels, "cells": EV.cells, "n_bins": 5,
          "min_count": 10},
         {"probs": PROBS, "labels": LABELS, "cells": CELLS, "n_bins": INT(lo=1),
          "min_count": INT(-5, lo=1)}),
    Case("partition_calibration_ci", _partition_ci,
         {"probs": EV.model_probs, "labels": EV.labels, "cells": EV.cells,
          "statistic": "worst_cell_ece", "n_resamples": 20, "confidence_level": 0.9, "rng": 2},
         {"probs": PROBS, "labels": LABELS, "cells": CELLS, "statistic": CHOICE(),
          "n_resamples": INT(lo=2), "confidence_level": UNIT, "rng": RNG}),
    Case("confidence_class_cells", api.confidence_class_cells,
         {"probs": EV.model_probs, "n_bins": 3}, {"probs": PROBS, "n_bins": INT(lo=1)}),
    Case("labels_to_probs", api.labels_to_probs,
         {"labels": EV.human_labels, "confidences": 0.6, "n_classes": 4},
         {"labels": LABELS_FREE,
          "confidences": scalar("confidence", 0.1, 1.5).extend(
              Mutation("one per label", lambda v, r: np.full(70, v), same=True),
              Mutation("wrong count", lambda v, r: np.full(69, v))),
          "n_classes": INT(lo=2)}),
    Case("function_cells", lambda fn, features: api.function_cells(fn, features),
         {"fn": lambda x: (x[:, 0] > 0.5).astype(int), "features": EV.features},
         {"fn": Kind("fn", (
             Mutation("not callable", lambda f, r: 3),
             Mutation("one id short", lambda f, r: lambda x: np.zeros(len(x) - 1)),
             Mutation("2-D ids", lambda f, r: lambda x: np.zeros((len(x), 2))),
             Mutation("NaN ids", lambda f, r: lambda x: np.full(len(x), np.nan)),
         )), "features": SAMPLES}),
    Case("KMeansPartition", _kmeans,
         {"features": FIT.features, "features_ev": EV.features, "n_cells": 3, "random_state": 1},
         {"features": SAMPLES, "features_ev": SAMPLES, "n_cells": INT(10**6, lo=1),
          "random_state": INT(lo=0).without("None")}),
    Case("reliability_diagrams_by_cell", _reliability,
         {"probs": EV.model_probs, "labels": EV.labels, "cells": EV.cells, "n_bins": 5,
          "max_cells": 2},
         {"probs": PROBS, "labels": LABELS, "cells": CELLS, "n_bins": INT(lo=1),
          "max_cells": INT(lo=1)}),
    Case("make_teaming_data", lambda n, n_classes, grid, human_accuracy, rng: api.make_teaming_data(
        n, n_classes=n_classes, grid=grid, human_accuracy=human_accuracy, rng=rng),
         {"n": 40, "n_classes": 3, "grid": 2, "human_accuracy": (0.9, 0.5), "rng": 4},
         {"n": INT(lo=2), "n_classes": INT(lo=2), "grid": INT(lo=1),
          "human_accuracy": _pair_kind(0.1), "rng": RNG}),
    Case("TeamingData", _teaming_data,
         {"labels": EV.labels, "model_probs": EV.model_probs, "human_probs": EV.human_probs},
         {"labels": Kind("rows", (Mutation("one short", lambda v, r: v[:-1]),)),
          "model_probs": Kind("rows", (Mutation("one short", lambda v, r: v[:-1]),)),
          "human_probs": Kind("rows", (Mutation("one extra", lambda v, r: np.vstack([v, v[:1]])),))}),
    Case("PrecisionAnnotator", _annotator,
         {"human_labels": FIT.human_labels, "labels": FIT.labels,
          "human_labels_ev": EV.human_labels, "n_classes": 4},
         {"human_labels": LABELS, "labels": LABELS, "human_labels_ev": LABELS_FREE,
          "n_classes": INT(lo=2)}),
    Case("votes_team", _votes,
         {"model_probs": EV.model_probs, "labels": EV.labels, "human_counts": COUNTS,
          "human_labels": EV.human_labels, "fit_idx": np.arange(40), "eval_idx": np.arange(40, 70)},
         {"model_probs": PROBS, "labels": LABELS, "human_counts": ARRAY.extend(
             Mutation("negative count", lambda c, r: c - 100.0)),
          "human_labels": LABELS, "fit_idx": INDEX, "eval_idx": INDEX}),
]


test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


def test_every_public_callable_has_a_case():
    covered = {c.name for c in CASES} | {"SyntheticTeam", "PartitionCalibration"}
    missing = set(api.__all__) - covered - {"CAPACITIES"}
    assert not missing, f"no malformed-input case for {sorted(missing)}"
    assert CAPACITIES == ("logistic", "boosting", "mlp")


def test_the_reported_reproductions():
    """Issue 38's teaming items, one by one."""
    d = ConfidenceDelegator("logistic").fit(F_FIT, FIT.model_probs, FIT.human_labels, FIT.labels)
    nan_model = EV.model_probs.copy()
    nan_model[3] = np.nan
    with pytest.raises(InputError, match=r"'model_probs' .* must be finite"):
        d.defer(F_EV, nan_model)
    bad_human = EV.human_probs * 1.5
    with pytest.raises(InputError, match=r"'human_probs' .* \[0, 1\]"):
        d.predict_proba(F_EV, EV.model_probs, bad_human)
    with pytest.raises(InputError, match=r"'human_probs' .* must have 70 rows"):
        WeightedAverageCombiner(0.5).fit(FIT.model_probs, FIT.human_probs, FIT.labels).predict_proba(
            EV.model_probs, EV.human_probs[:1])
    with pytest.raises(InputError, match=r"'human_probs' .* must have 70 rows"):
        ProductOfExpertsCombiner((1, 1)).fit(FIT.model_probs, FIT.human_probs, FIT.labels
                                             ).predict_proba(EV.model_probs, EV.human_probs[:1])
    with pytest.raises(InputError, match="'features'"):
        d.defer(F_EV[:, :2], EV.model_probs)
    with pytest.raises(InputError, match=r"'model_probs' .* must have 70 rows"):
        d.defer(F_EV, EV.model_probs[:5])
    with pytest.raises(InputError, match=r"'min_count' parameter of partition_calibration"):
        api.partition_calibration(EV.model_probs, EV.labels, EV.cells, min_count=-5)
