"""trustlab.stats' public functions on malformed input: InputError in one line, or the
canonical result (issue 38's contract, the harness in tests/malformed.py).

Covers the statistics that predate the contract: binomial intervals, the bootstrap,
calibration metrics and conformal quantiles.
"""

from __future__ import annotations

import hypothesis  # noqa: F401 - the property tests are built by malformed_input_tests
import numpy as np
import pytest

from trustlab import stats as api
from trustlab.core.errors import InputError

from ..malformed import (
    ARRAY,
    CHOICE,
    INT,
    LABELS,
    PROBS,
    RNG,
    UNIT,
    Case,
    Kind,
    Mutation,
    malformed_input_tests,
    scalar,
)

_rng = np.random.default_rng(0)
P = _rng.dirichlet(np.ones(3), size=40)
Y = (P.cumsum(1) > _rng.random((40, 1))).argmax(1)
CELLS = np.arange(40) % 3
CONF = _rng.random(30)
CORRECT = (_rng.random(30) < CONF).astype(float)
SCORES = _rng.normal(size=50)


def _count(*bad: float) -> Kind:
    """A whole count (k or n) given as one number."""
    return Kind("count", tuple(m for m in INT(*bad, lo=0).mutations if m.name != "list"))


K, N = _count(41), _count(-1)
PRIOR = Kind("prior", (
    Mutation("three numbers", lambda p, r: (1.0, 1.0, 1.0)),
    Mutation("zero", lambda p, r: (0.0, 1.0)),
    Mutation("nan", lambda p, r: (np.nan, 1.0)),
    Mutation("strings", lambda p, r: ("1", "1")),
    Mutation("list", lambda p, r: list(p), same=True),
))
PROBS_1D = ARRAY.extend(
    Mutation("above 1", lambda x, r: np.asarray(x) + 1.0),
    Mutation("one short", lambda x, r: np.asarray(x)[:-1]),
).without("extra dimension")
CORRECT_KIND = Kind("correct", (
    Mutation("booleans", lambda c, r: np.asarray(c) > 0.5, same=True),
    Mutation("a 2", lambda c, r: np.r_[2.0, c[1:]]),
    Mutation("one short", lambda c, r: c[:-1]),
    Mutation("nan", lambda c, r: np.r_[np.nan, c[1:]]),
    Mutation("strings", lambda c, r: np.asarray(c).astype(str)),
    Mutation("None", lambda c, r: None),
    Mutation("list", lambda c, r: list(c), same=True),
))
CELL_KIND = Kind("cells", (
    Mutation("list", lambda c, r: list(c), same=True),
    Mutation("None id", lambda c, r: np.array([None, *c[1:]], dtype=object)),
    Mutation("one short", lambda c, r: c[:-1]),
    Mutation("2-D", lambda c, r: c[:, None]),
    Mutation("None", lambda c, r: None),
))
SCORE_KIND = ARRAY.without("inf", "-inf").extend(Mutation("2-D", lambda s, r: np.asarray(s)[:, None]))


def _interval(fn):
    return lambda k, n, alpha: fn(k, n, alpha)


def _bootstrap(data, n_resamples, confidence_level, rng):
    return api.bootstrap_ci(data, np.mean, n_resamples=n_resamples,
                            confidence_level=confidence_level, rng=rng)


CASES = [
    *[
        Case(fn.__name__, _interval(fn), {"k": 7, "n": 40, "alpha": 0.1},
             {"k": K, "n": N, "alpha": UNIT})
        for fn in (api.clopper_pearson, api.clopper_pearson_lower, api.clopper_pearson_upper,
                   api.wilson, api.jeffreys, api.hoeffding)
    ],
    Case("beta_posterior_quantile", api.beta_posterior_quantile,
         {"k": 7, "n": 40, "q": 0.9, "prior": (0.5, 0.5)},
         {"k": K, "n": N, "q": scalar("q", -0.1, 1.1).without("list", "array"), "prior": PRIOR}),
    Case("bootstrap_ci", _bootstrap,
         {"data": SCORES, "n_resamples": 50, "confidence_level": 0.9, "rng": 4},
         {"data": Kind("data", (
             Mutation("empty", lambda d, r: d[:0]),
             Mutation("a scalar", lambda d, r: 1.0),
             Mutation("empty tuple", lambda d, r: ()),
             Mutation("list", lambda d, r: list(d), same=True))),
          "n_resamples": INT(lo=2), "confidence_level": UNIT, "rng": RNG}),
    Case("check_random_state", lambda rng: api.check_random_state(rng).integers(1000, size=3),
         {"rng": 11}, {"rng": RNG}),
    Case("calibration_bins", lambda confidences, correct, n_bins, strategy: api.calibration_bins(
        confidences, correct, n_bins=n_bins, strategy=strategy),
         {"confidences": CONF, "correct": CORRECT, "n_bins": 5, "strategy": "quantile"},
         {"confidences": PROBS_1D, "correct": CORRECT_KIND, "n_bins": INT(lo=1),
          "strategy": CHOICE()}),
    *[
        Case(fn.__name__, lambda probs, labels, n_bins, strategy, norm, fn=fn: fn(
            probs, labels, n_bins=n_bins, strategy=strategy, norm=norm),
             {"probs": P, "labels": Y, "n_bins": 6, "strategy": "uniform", "norm": "l2"},
             {"probs": PROBS, "labels": LABELS, "n_bins": INT(lo=1), "strategy": CHOICE(),
              "norm": CHOICE()})
        for fn in (api.ece, api.classwise_ece)
    ],
    Case("ece(binary)", lambda probs, labels: api.ece(probs, labels),
         {"probs": P[:, 0], "labels": (Y == 0).astype(int)},
         {"probs": PROBS_1D, "labels": LABELS}),
    Case("calibration_by_cell", lambda probs, labels, cells, n_bins: api.calibration_by_cell(
        probs, labels, cells, n_bins=n_bins),
         {"probs": P, "labels": Y, "cells": CELLS, "n_bins": 4},
         {"probs": PROBS, "labels": LABELS, "cells": CELL_KIND, "n_bins": INT(lo=1)}),
    Case("worst_cell_ece", lambda probs, labels, cells, min_count: api.worst_cell_ece(
        probs, labels, cells, min_count=min_count),
         {"probs": P, "labels": Y, "cells": CELLS, "min_count": 5},
         {"probs": PROBS, "labels": LABELS, "cells": CELL_KIND, "min_count": INT(100, lo=1)}),
    Case("reliability_diagram", lambda probs, labels, n_bins: len(api.reliability_diagram(
        probs, labels, n_bins=n_bins).axes),
         {"probs": P, "labels": Y, "n_bins": 5},
         {"probs": PROBS, "labels": LABELS, "n_bins": INT(lo=1)}),
    Case("conformal_quantile", api.conformal_quantile, {"scores": SCORES, "alpha": 0.1},
         {"scores": SCORE_KIND, "alpha": UNIT.extend(Mutation("too small for n", lambda a, r: 0.001))}),
    Case("conformal_rank", api.conformal_rank, {"n": 50, "alpha": 0.1},
         {"n": INT(5, lo=0), "alpha": UNIT}),
    Case("conformal_pvalues", api.conformal_pvalues,
         {"cal_scores": SCORES, "test_scores": SCORES[:7]},
         {"cal_scores": SCORE_KIND,
          "test_scores": ARRAY.without("inf", "-inf", "empty", "extra dimension")}),
]


test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


def test_every_function_of_the_four_modules_has_a_case():
    from trustlab.stats import binomial, bootstrap, calibration, conformal

    names = {n for mod in (binomial, bootstrap, calibration, conformal) for n in mod.__all__}
    covered = {c.name.split("(")[0] for c in CASES} | {"BootstrapResult", "CalibrationBins"}
    missing = names - covered
    assert not missing, f"no malformed-input case for {sorted(missing)}"


def test_counts_are_not_read_from_text():
    """Strings and booleans used to be read as numbers by the binomial intervals."""
    with pytest.raises(InputError, match="'k' parameter of clopper_pearson"):
        api.clopper_pearson("3", 10)
    with pytest.raises(InputError, match="'n' parameter of wilson"):
        api.wilson(3, True)
