"""ipb's public API on malformed input: InputError with one line, or the canonical result.

Every name in ``trustlab.methods.ipb.__all__`` that takes arguments is a case below (issue 38's
contract); the corruptions per argument kind are in tests/malformed.py. Rates and source values
outside [0, 1] are errors (they used to be clipped), and a score with two columns is an error
(it used to be read as its first column).
"""

from __future__ import annotations

import hypothesis  # noqa: F401 - the property tests are built by malformed_input_tests
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from trustlab.core.errors import InputError
from trustlab.methods import ipb as api
from trustlab.methods.ipb import (
    BoundaryEstimator,
    DigitsGenerator,
    KernelBoundary,
    LipschitzBoundary,
    MixtureShift,
    TargetBound,
    TestBoundary,
)

from ..malformed import (
    ARRAY,
    CHOICE,
    INT,
    RNG,
    SAMPLES,
    UNIT,
    Case,
    Kind,
    Mutation,
    malformed_input_tests,
    scalar,
)

_rng = np.random.default_rng(0)
XP1, XQ1 = _rng.normal(size=60), _rng.normal(1.0, size=50)
XP2, XQ2 = _rng.normal(size=(60, 2)), _rng.normal(size=(50, 2)) + np.array([1.0, 0.0])
SCORE = lambda x: x[:, 0]  # noqa: E731 - the identity score of a 1-D sample
FITTED = TestBoundary(score=SCORE, random_state=0).fit(XP1, XQ1)
KERNEL = KernelBoundary(bandwidth=1.0).fit(XP2[:30], XQ2[:30])
POSITIVE = scalar("positive", 0.0, -1.0)
NUMBER = scalar("number")
SEED = INT(2**40, lo=0).without("None")


def _t(name: str, *bad: float) -> Kind:
    """A source value (a rate for [0, 1]-valued classes); an array of them is fine too."""
    base = scalar(name, *bad)
    return Kind(name, tuple(m for m in base.mutations if m.name not in ("list", "array")))


T = _t("t", -0.1, 1.5)
RATES = ARRAY.extend(
    Mutation("above 1", lambda x, r: np.asarray(x) + 1.5),
    Mutation("negative", lambda x, r: np.asarray(x) - 1.5),
).without("empty", "extra dimension")
SCORES1 = SAMPLES.without("extra dimension").extend(
    Mutation("two columns", lambda x, r: np.c_[np.asarray(x), np.asarray(x)]),
)


def _score_kind() -> Kind:
    return Kind("score", (
        Mutation("two columns", lambda f, r: lambda x: np.c_[x[:, 0], x[:, 0]]),
        Mutation("one value short", lambda f, r: lambda x: x[:-1, 0]),
        Mutation("NaN scores", lambda f, r: lambda x: np.full(len(x), np.nan)),
        Mutation("strings", lambda f, r: lambda x: x[:, 0].astype(str)),
        Mutation("not callable", lambda f, r: 3.0),
        Mutation("(n, 1) column", lambda f, r: lambda x: x[:, :1], same=True),
    ))


def _test_boundary(x_p, x_q, t, delta, band, n_thresholds, random_state, score):
    tb = TestBoundary(score=score, band=band, delta=delta, n_thresholds=n_thresholds,
                      random_state=random_state).fit(x_p, x_q)
    return tb.upper(t), tb.lower(t), tb.boundary(t), tb.propagate(3, 500, 0.05)


def _classifier_boundary(x_p, x_q, train_fraction, classifier):
    tb = TestBoundary(classifier=classifier, train_fraction=train_fraction, random_state=0)
    return tb.fit(x_p, x_q).upper(0.1)


def _lipschitz(x_p, x_q, t, lipschitz, n_grid, n_rademacher, random_state):
    lb = LipschitzBoundary(lipschitz=lipschitz, n_grid=n_grid, n_rademacher=n_rademacher,
                           random_state=random_state).fit(x_p, x_q)
    return lb.boundary(t), lb.upper(t), lb.ipm_lp(bounded=True), lb.witness(t)(x_p[:5])


def _kernel(x_p, x_q, t, bandwidth, max_points, random_state):
    kb = KernelBoundary(bandwidth=bandwidth, max_points=max_points,
                        random_state=random_state).fit(x_p, x_q)
    return kb.boundary(t), kb.upper(t), kb.mmd(), kb.witness(t)[0](x_p[:5])


def _methods(t, q, band, k, n, alpha):
    return (FITTED.lower_boundary(t), FITTED.interval(t), FITTED.ipm_interval(t),
            FITTED.source_range(q), FITTED.ipm(band=band), FITTED.propagate(k, n, alpha))


def _mixture(means_p, weights_p, means_q, weights_q, sigma, n, rng, u, c, which, rate):
    m = MixtureShift(means_p, weights_p, means_q, weights_q, sigma)
    return (m.sample_p(n, rng), m.halfspace_rate(u, c, which), m.threshold_for_rate(u, rate),
            m.log_ratio(XP2[:4]), m.sample_q(n, 2), m.kl_qp(1, n=50))


GEN = DigitsGenerator(n_components_pca=6, n_mixture=1).fit()


def _digits(digit, n, rng, share, z, digits):
    return (GEN.sample(digit, n, rng), GEN.sample_population(digit, share, n, 1)[1],
            GEN.judge_prob(z, digits))


def _digits_settings(n_components_pca, n_mixture, seed):
    gen = DigitsGenerator(n_components_pca=n_components_pca, n_mixture=n_mixture, seed=seed).fit()
    return gen.n_components_pca, gen.n_mixture, gen.seed, gen.judge_.coef_


WEIGHTS = ARRAY.extend(
    Mutation("do not sum to 1", lambda w, r: np.asarray(w) * 0.5),
    Mutation("a negative weight", lambda w, r: np.asarray(w) * np.r_[-1.0, np.ones(len(w) - 1)]),
    Mutation("one short", lambda w, r: np.asarray(w)[:-1]),
).without("extra dimension", "empty")
MEANS = ARRAY.extend(
    Mutation("one dimension more", lambda m, r: np.c_[m, m[:, :1]]),
    Mutation("1-D", lambda m, r: np.asarray(m)[0]),
)
UNIT_VECTOR = ARRAY.extend(
    Mutation("not unit", lambda u, r: np.asarray(u) * 2.0),
    Mutation("wrong dimension", lambda u, r: np.r_[u, 0.0]),
).without("empty")
EDGES = Kind("edges", (
    Mutation("two arrays", lambda e, r: e[:2]),
    Mutation("index out of range", lambda e, r: (e[0] + 1000, e[1], e[2])),
    Mutation("negative distance", lambda e, r: (e[0], e[1], -e[2])),
    Mutation("lengths differ", lambda e, r: (e[0][:-1], e[1], e[2])),
    Mutation("None", lambda e, r: None),
    Mutation("lists", lambda e, r: tuple(np.asarray(a).tolist() for a in e), same=True),
))
GRAM = Kind("gram", (
    Mutation("not symmetric", lambda g, r: g + np.array([[0, 0.1], [0, 0]])),
    Mutation("not a Gram matrix", lambda g, r: np.array([[1.0, 2.0], [2.0, 1.0]])),
    Mutation("3 x 3", lambda g, r: np.eye(3)),
    Mutation("nan", lambda g, r: g * np.nan),
    Mutation("negative A", lambda g, r: -g),
    Mutation("list", lambda g, r: np.asarray(g).tolist(), same=True),
))
Z_EDGES = api.lipschitz_edges(XP2[:8], None)

CASES = [
    Case("TestBoundary", _test_boundary,
         {"x_p": XP1, "x_q": XQ1, "t": 0.05, "delta": 0.1, "band": "cp", "n_thresholds": 16,
          "random_state": 1, "score": SCORE},
         {"x_p": SAMPLES, "x_q": SAMPLES, "t": T, "delta": UNIT, "band": CHOICE(),
          "n_thresholds": INT(lo=2), "random_state": SEED, "score": _score_kind()}),
    Case("TestBoundary(classifier)", _classifier_boundary,
         {"x_p": XP2, "x_q": XQ2, "train_fraction": 0.5, "classifier": LogisticRegression()},
         {"x_p": SAMPLES, "x_q": SAMPLES.extend(
             Mutation("another dimension", lambda x, r: np.c_[x, x[:, :1]])),
          "train_fraction": UNIT,
          "classifier": Kind("classifier", (
              Mutation("not a classifier", lambda c, r: "logistic"),
              Mutation("a number", lambda c, r: 3)))}),
    Case("TestBoundary.fit_scores", lambda s_p, s_q: TestBoundary(random_state=0).fit_scores(
        s_p, s_q).upper(0.2), {"s_p": XP1, "s_q": XQ1}, {"s_p": SCORES1, "s_q": SCORES1}),
    Case("BoundaryEstimator methods", _methods,
         {"t": 0.3, "q": 0.5, "band": True, "k": 4, "n": 300, "alpha": 0.05},
         {"t": T, "q": _t("q", -0.2, 1.2), "band": Kind("bool", (
             Mutation("string", lambda v, r: "yes"), Mutation("None", lambda v, r: None))),
          "k": INT(301, lo=0), "n": INT(lo=1), "alpha": UNIT}),
    Case("LipschitzBoundary", _lipschitz,
         {"x_p": XP1[:20], "x_q": XQ1[:20], "t": 0.3, "lipschitz": 1.0, "n_grid": 5,
          "n_rademacher": 2, "random_state": 0},
         {"x_p": SAMPLES, "x_q": SAMPLES, "t": T, "lipschitz": POSITIVE, "n_grid": INT(lo=3),
          "n_rademacher": INT(lo=0), "random_state": SEED}),
    Case("KernelBoundary", _kernel,
         {"x_p": XP2[:30], "x_q": XQ2[:30], "t": 0.1, "bandwidth": 1.0, "max_points": 25,
          "random_state": 0},
         {"x_p": SAMPLES, "x_q": SAMPLES, "t": _t("t", -1.5, 1.5),
          "bandwidth": Kind("bw", tuple(m for m in POSITIVE.mutations if m.name != "None")),
          "max_points": INT(lo=2), "random_state": SEED}),
    Case("gaussian_roc", api.gaussian_roc, {"t": 0.1, "mu": 1.0}, {"t": T, "mu": NUMBER}),
    Case("gaussian_hockey_stick", api.gaussian_hockey_stick, {"gamma": 2.0, "mu": 1.0},
         {"gamma": _t("gamma", 0.0, -1.0), "mu": POSITIVE}),
    Case("hockey_stick_envelope", api.hockey_stick_envelope,
         {"t": 0.2, "gammas": np.array([0.5, 2.0]), "h": np.array([0.4, 0.1])},
         {"t": T, "gammas": ARRAY.extend(
             Mutation("negative", lambda g, r: -np.asarray(g)),
             Mutation("one short", lambda g, r: np.asarray(g)[:-1])), "h": ARRAY}),
    Case("binary_divergence", api.binary_divergence, {"q": 0.3, "t": 0.1, "divergence": "kl"},
         {"q": T, "t": T, "divergence": CHOICE()}),
    Case("gaussian_divergence", api.gaussian_divergence, {"mu": 1.0, "divergence": "hellinger"},
         {"mu": NUMBER, "divergence": CHOICE()}),
    Case("fdiv_boundary", api.fdiv_boundary, {"t": 0.05, "value": 0.5, "divergence": "kl"},
         {"t": T, "value": Kind("value", tuple(m for m in scalar("v", -1.0).mutations
                                               if m.name != "inf")), "divergence": CHOICE()}),
    Case("fdiv_lower_boundary", api.fdiv_lower_boundary,
         {"t": 0.5, "value": 0.2, "divergence": "tv"},
         {"t": T, "value": scalar("v", -1.0).without("inf"), "divergence": CHOICE()}),
    Case("gaussian_kernel", api.gaussian_kernel, {"x": XP2[:5], "y": XQ2[:4], "bandwidth": 0.7},
         {"x": SAMPLES, "y": SAMPLES.extend(Mutation("3 columns", lambda y, r: np.c_[y, y[:, :1]])),
          "bandwidth": POSITIVE}),
    Case("median_bandwidth", api.median_bandwidth, {"z": XP2, "max_points": 40, "seed": 3},
         {"z": SAMPLES, "max_points": INT(lo=2), "seed": SEED}),
    Case("gaussian_embedding_gram", api.gaussian_embedding_gram,
         {"mean_p": np.zeros(2), "mean_q": np.array([1.0, 0.5]), "sigma": 1.0, "bandwidth": 1.0},
         {"mean_p": ARRAY.without("empty", "extra dimension").extend(
             Mutation("3-D mean", lambda m, r: np.r_[m, 0.0])),
          "mean_q": ARRAY.without("empty", "extra dimension"),
          "sigma": scalar("sigma", -1.0), "bandwidth": POSITIVE}),
    Case("ellipse_boundary", api.ellipse_boundary,
         {"t": np.linspace(-0.5, 0.5, 7), "gram": KERNEL.gram_},
         {"t": ARRAY.without("empty", "extra dimension"), "gram": GRAM}),
    Case("lipschitz_edges", api.lipschitz_edges, {"z": XP2[:12], "neighbors": 3},
         {"z": SAMPLES, "neighbors": INT(lo=1).without("None")}),
    Case("lipschitz_lp", lambda c, edges, lipschitz: api.lipschitz_lp(c, edges, lipschitz),
         {"c": np.r_[np.full(4, 0.25), np.full(4, -0.25)], "edges": Z_EDGES, "lipschitz": 1.0},
         {"c": ARRAY, "edges": EDGES, "lipschitz": POSITIVE}),
    Case("dkw_epsilon", api.dkw_epsilon, {"n": 100, "delta": 0.05},
         {"n": INT(lo=1), "delta": UNIT}),
    Case("roc_points", api.roc_points, {"s_p": XP1, "s_q": XQ1},
         {"s_p": SCORES1, "s_q": SCORES1}),
    Case("roc_hull", api.roc_hull, {"s_p": XP1, "s_q": XQ1}, {"s_p": SCORES1, "s_q": SCORES1}),
    Case("upper_hull", api.upper_hull, {"x": XP1[:10], "y": XQ1[:10]},
         {"x": SCORES1.extend(Mutation("one short", lambda x, r: x[:-1])), "y": SCORES1}),
    Case("MixtureShift", _mixture,
         {"means_p": np.zeros((2, 2)), "weights_p": np.array([0.7, 0.3]),
          "means_q": np.ones((1, 2)), "weights_q": np.ones(1), "sigma": 1.0, "n": 7, "rng": 3,
          "u": np.array([1.0, 0.0]), "c": 0.5, "which": "q", "rate": 0.05},
         {"means_p": MEANS, "weights_p": WEIGHTS, "means_q": MEANS, "weights_q": WEIGHTS,
          "sigma": POSITIVE, "n": INT(lo=1), "rng": RNG, "u": UNIT_VECTOR, "c": NUMBER,
          "which": CHOICE(), "rate": scalar("rate", 0.0, 1.0, -0.1)}),
    Case("gaussian_shift", lambda d, mu: api.gaussian_shift(d, mu), {"d": 3, "mu": 1.2},
         {"d": INT(lo=1), "mu": NUMBER}),
    Case("tilted_policy", api.tilted_policy,
         {"d": 2, "harmful_share": 0.02, "harmful_shift": 3.0, "reward_angle": 1.2, "beta": 1.0},
         {"d": INT(lo=1), "harmful_share": UNIT, "harmful_shift": NUMBER, "reward_angle": NUMBER,
          "beta": POSITIVE}),
    Case("rare_group", api.rare_group, {"d": 2, "share": 0.05, "shift": 1.0},
         {"d": INT(lo=1), "share": UNIT, "shift": NUMBER}),
    Case("DigitsGenerator", _digits,
         {"digit": 3, "n": 5, "rng": 2, "share": 0.3, "z": XP2[:4, :1].repeat(6, 1),
          "digits": np.array([0, 1, 2, 9])},
         {"digit": INT(10, lo=0), "n": INT(lo=1), "rng": RNG, "share": scalar("share", -0.1, 1.1),
          "z": SAMPLES.extend(Mutation("5 columns", lambda z, r: z[:, :5])),
          "digits": ARRAY.without("empty").extend(
              Mutation("digit 10", lambda d, r: np.r_[d[:-1], 10]),
              Mutation("one short", lambda d, r: d[:-1]))}),
    Case("DigitsGenerator(settings)", _digits_settings,
         {"n_components_pca": 2, "n_mixture": 1, "seed": 0},
         {"n_components_pca": INT(65, lo=1), "n_mixture": INT(lo=1), "seed": SEED}),
    Case("compare_bounds", api.compare_bounds,
         {"boundary": FITTED, "k_source": 3, "n_source": 400, "k_target": 1, "n_target": 50,
          "alpha": 0.05},
         {"boundary": Kind("boundary", (
             Mutation("not fitted", lambda b, r: TestBoundary()),
             Mutation("an RKHS boundary", lambda b, r: KERNEL),
             Mutation("None", lambda b, r: None))),
          "k_source": INT(401, lo=0), "n_source": INT(lo=1), "k_target": INT(51, lo=0),
          "n_target": INT(lo=1), "alpha": UNIT}),
    Case("compare_gap_bounds", api.compare_gap_bounds,
         {"boundary": FITTED, "k_population": 3, "n_population": 400, "k_group": 1,
          "n_group": 20, "alpha": 0.05},
         {"boundary": Kind("boundary", (Mutation("a string", lambda b, r: "tests"),)),
          "k_population": INT(401, lo=0), "n_population": INT(lo=1), "k_group": INT(21, lo=0),
          "n_group": INT(lo=1), "alpha": UNIT}),
]


test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


def test_every_public_callable_has_a_case():
    covered = {c.name.split("(")[0].split(".")[0] for c in CASES}
    covered |= {"BoundaryEstimator", "TargetBound"}  # the base class (its methods: a case) and a result
    missing = set(api.__all__) - covered
    assert not missing, f"no malformed-input case for {sorted(missing)}"
    assert issubclass(TestBoundary, BoundaryEstimator)
    assert isinstance(FITTED.propagate(1, 10), TargetBound)


def test_the_reported_reproductions():
    """Issue 38's ipb items: rates outside [0, 1]; a custom score with two columns."""
    with pytest.raises(InputError, match=r"'t' parameter of TestBoundary.upper must lie in \[0, 1\]"):
        FITTED.upper(1.3)
    with pytest.raises(InputError, match=r"'t' parameter of gaussian_roc"):
        api.gaussian_roc(-0.2, 1.0)
    with pytest.raises(InputError, match="one value per point"):
        TestBoundary(score=lambda x: np.c_[x[:, 0], -x[:, 0]]).fit(XP1, XQ1)
    lb = LipschitzBoundary(n_grid=3, n_rademacher=0).fit(XP1[:10], XQ1[:10])
    with pytest.raises(InputError, match="n_rademacher=0"):
        lb.upper(0.3)  # it used to return NaN
