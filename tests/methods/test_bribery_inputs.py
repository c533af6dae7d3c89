"""bribery's public API on malformed input: InputError with one line, or the canonical result.

Every name in ``trustlab.methods.bribery.__all__`` that takes arguments is a case below (issue
38's contract); the corruptions per argument kind are in tests/malformed.py. A score table may
hold NaN (a missing score); infinities, strings, booleans and other shapes are errors, and a
target index is never wrapped around or truncated.
"""

from __future__ import annotations

import hypothesis  # noqa: F401 - the property tests are built by malformed_input_tests
import numpy as np
import pytest

from trustlab.core.errors import InputError
from trustlab.datasets.leaderboards import Leaderboard
from trustlab.methods import bribery as api
from trustlab.methods.bribery import (
    BribeModel,
    BribeResult,
    ExactSolution,
    Options,
    RobustnessProfile,
)

from ..malformed import (
    ARRAY,
    CHOICE,
    INT,
    RNG,
    Case,
    Kind,
    Mutation,
    malformed_input_tests,
    run_one,
    scalar,
)

S = np.array(
    [
        [0.90, 0.40, 0.55, 0.30],
        [0.80, 0.70, 0.55, np.nan],
        [0.20, 0.90, 0.60, 0.50],
        [0.50, 0.50, 0.10, 0.70],
        [0.60, 0.20, 0.30, 0.40],
    ]
)
LB = Leaderboard(S, tuple("abcde"), ("w", "x", "y", "z"))
SCORES = ARRAY.without("nan").extend(
    Mutation("a Leaderboard of it", lambda s, r: Leaderboard(s, tuple("abcde"), tuple("wxyz")),
             same=True),
    Mutation("1-D", lambda s, r: np.asarray(s)[0]),
    Mutation("one model", lambda s, r: np.asarray(s)[:1]),
    Mutation("booleans", lambda s, r: np.asarray(s) > 0.5),
)
SCORES_ANY_SIZE = SCORES.without("one model")  # the rules aggregate any table
TARGET = INT(5, -1, lo=0)
RULE = CHOICE()
TIME = scalar("time_limit", 0.0, -1.0)
MARGIN = scalar("margin", -0.1)
MARGINS = Kind("margins", (
    Mutation("wrong size", lambda m, r: np.zeros((4, 4), dtype=int)),
    Mutation("not antisymmetric", lambda m, r: np.ones((5, 5), dtype=int)),
    Mutation("floats", lambda m, r: np.asarray(m) + 0.5),
    Mutation("strings", lambda m, r: np.asarray(m).astype(str)),
    Mutation("list", lambda m, r: np.asarray(m).tolist(), same=True),
))
MODEL = Kind("model", (
    Mutation("a dict", lambda m, r: {"margin": 0.1}),
    Mutation("a number", lambda m, r: 0.1),
    Mutation("the default", lambda m, r: BribeModel(), same=True),
))
AGG = ARRAY.without("nan").extend(Mutation("2-D", lambda a, r: np.asarray(a)[:, None]))
DATASETS = Kind("datasets", (
    Mutation("negative index", lambda d, r: [-1]),
    Mutation("index past the end", lambda d, r: [4]),
    Mutation("twice", lambda d, r: [1, 1]),
    Mutation("float index", lambda d, r: [1.5]),
    Mutation("a string", lambda d, r: "x"),
    Mutation("None", lambda d, r: None),
    Mutation("tuple", lambda d, r: tuple(d), same=True),
    Mutation("numpy", lambda d, r: np.asarray(d), same=True),
))
SHIFTS = Kind("shifts", (
    Mutation("negative shift", lambda d, r: {0: -1}),
    Mutation("dataset past the end", lambda d, r: {9: 1}),
    Mutation("too many positions", lambda d, r: {0: 99}),
    Mutation("half a position", lambda d, r: {0: 0.5}),
    Mutation("wrong length", lambda d, r: [1, 0]),
    Mutation("a string", lambda d, r: "1"),
    Mutation("a list of the same", lambda d, r: [d.get(j, 0) for j in range(4)], same=True),
))


def _result(r: BribeResult) -> tuple:
    """What a result says, by index (a Leaderboard carries names, an array does not)."""
    return r.k, r.dataset_indices, r.feasible, r.optimal, r.lower_bound, r.upper_bound


def _robustness(scores, target, rule, model, time_limit, margins):
    return _result(api.robustness(scores, target, rule, model=model, time_limit=time_limit,
                                  margins=margins))


def _profile(scores, rule, targets, time_limit):
    p = api.robustness_all(scores, rule, targets=targets, time_limit=time_limit)
    return p.k, p.sets, p.targets


def _bribe_model(margin, ceiling, target):
    m = BribeModel(margin=margin, ceiling=ceiling)
    return m.bribed_matrix(S), m.bribed_values(S, target), m.bribable(S, target)


def _exact(w, v, cost, target, rule, time_limit):
    opts = api.build_options(w, v, cost)
    sol = api.solve_exact(S, target, rule, opts, time_limit=time_limit)
    return sol.chosen, sol.cost, sol.optimal


MARGINS_S = api.pairwise_margins(S)
TARGETS = Kind("targets", (
    Mutation("index past the end", lambda t, r: [0, 5]),
    Mutation("twice", lambda t, r: [1, 1]),
    Mutation("float", lambda t, r: [1.5]),
    Mutation("a string", lambda t, r: "ab"),
    Mutation("a number", lambda t, r: 3),
    Mutation("numpy", lambda t, r: np.asarray(t), same=True),
))
COST = Kind("cost", (
    Mutation("negative", lambda c, r: -np.asarray(c)),
    Mutation("nan", lambda c, r: np.asarray(c) * np.nan),
    Mutation("wrong length", lambda c, r: np.asarray(c)[:-1]),
    Mutation("strings", lambda c, r: np.asarray(c).astype(str)),
    Mutation("callable of the same", lambda c, r: (lambda d, k: c[d] * k), same=True),
    Mutation("callable returning text", lambda c, r: (lambda d, k: "one")),
))

CASES = [
    Case("aggregate", api.aggregate, {"scores": S, "rule": "mwr"},
         {"scores": SCORES_ANY_SIZE, "rule": RULE}),
    Case("mean_scores", api.mean_scores, {"scores": S}, {"scores": SCORES_ANY_SIZE}),
    Case("median_scores", api.median_scores, {"scores": S}, {"scores": SCORES_ANY_SIZE}),
    Case("mean_win_rate", api.mean_win_rate, {"scores": S, "ties": "loss"},
         {"scores": SCORES_ANY_SIZE, "ties": CHOICE()}),
    Case("borda_scores", api.borda_scores, {"scores": S}, {"scores": SCORES_ANY_SIZE}),
    Case("pairwise_margins", api.pairwise_margins, {"scores": S}, {"scores": SCORES_ANY_SIZE}),
    Case("target_margins", api.target_margins, {"scores": S, "target": 2},
         {"scores": SCORES_ANY_SIZE, "target": TARGET}),
    Case("copeland_scores", api.copeland_scores, {"scores": S, "margins": MARGINS_S},
         {"scores": SCORES_ANY_SIZE.without("a Leaderboard of it", "list", "torch tensor",
                                            "pandas"), "margins": MARGINS}),
    Case("condorcet_winner", api.condorcet_winner, {"scores": S, "margins": MARGINS_S},
         {"margins": MARGINS}),
    Case("is_unique_winner", api.is_unique_winner, {"agg": api.mean_scores(S), "target": 1},
         {"agg": AGG, "target": TARGET}),
    Case("unique_winner", api.unique_winner, {"agg": api.mean_scores(S)}, {"agg": AGG}),
    Case("is_winner", lambda scores, target, rule: api.is_winner(scores, target, rule),
         {"scores": S, "target": 2, "rule": "condorcet"},
         {"scores": SCORES, "target": TARGET, "rule": CHOICE()}),
    Case("robustness", _robustness,
         {"scores": S, "target": 4, "rule": "borda", "model": BribeModel(), "time_limit": 5.0,
          "margins": None},
         {"scores": SCORES, "target": TARGET, "rule": RULE, "model": MODEL, "time_limit": TIME}),
    Case("robustness(copeland)", _robustness,
         {"scores": S, "target": 4, "rule": "copeland", "model": None, "time_limit": 5.0,
          "margins": MARGINS_S},
         {"margins": MARGINS}),
    Case("robustness_all", _profile, {"scores": S, "rule": "mwr", "targets": [0, 3, 4],
                                      "time_limit": 5.0},
         {"scores": SCORES, "rule": RULE, "targets": TARGETS, "time_limit": TIME}),
    Case("mean_robustness_all", lambda scores, model: api.mean_robustness_all(scores, model),
         {"scores": S, "model": None}, {"scores": SCORES, "model": MODEL}),
    Case("median_robustness_all", lambda scores, model: api.median_robustness_all(scores, model),
         {"scores": S, "model": None}, {"scores": SCORES, "model": MODEL}),
    Case("brute_force_robustness",
         lambda scores, target, max_datasets: _result(api.brute_force_robustness(
             scores, target, "median", max_datasets=max_datasets)),
         {"scores": S, "target": 4, "max_datasets": 8},
         {"scores": SCORES, "target": TARGET, "max_datasets": INT(lo=0)}),
    Case("greedy_robustness",
         lambda scores, target, rule: _result(api.greedy_robustness(scores, target, rule)),
         {"scores": S, "target": 4, "rule": "copeland"},
         {"scores": SCORES, "target": TARGET, "rule": RULE}),
    Case("min_cost_shift_bribery",
         lambda scores, target, cost, time_limit: _result(api.min_cost_shift_bribery(
             scores, target, "borda", cost, time_limit=time_limit)),
         {"scores": S, "target": 4, "cost": np.array([1.0, 2.0, 1.0, 3.0]), "time_limit": 5.0},
         {"scores": SCORES, "target": TARGET, "cost": COST, "time_limit": TIME}),
    Case("brute_force_shift_bribery",
         lambda scores, target, cost: api.brute_force_shift_bribery(scores, target, "borda", cost),
         {"scores": S, "target": 4, "cost": np.array([1.0, 2.0, 1.0, 3.0])},
         {"scores": SCORES, "target": TARGET, "cost": COST}),
    Case("BribeModel", _bribe_model, {"margin": 0.01, "ceiling": 0.95, "target": 3},
         {"margin": MARGIN, "ceiling": scalar("ceiling").extend(
             Mutation("wrong count", lambda c, r: [c] * 3)).without("list", "array", "None"),
          "target": TARGET}),
    Case("apply_bribe", lambda scores, target, datasets, model: api.apply_bribe(
        scores, target, datasets, model),
         {"scores": S, "target": 4, "datasets": [0, 2], "model": BribeModel()},
         {"scores": SCORES, "target": TARGET, "datasets": DATASETS, "model": MODEL}),
    Case("shift_options", lambda scores, target, margin: api.shift_options(scores, target, margin),
         {"scores": S, "target": 4, "margin": 0.01},
         {"scores": SCORES, "target": TARGET, "margin": MARGIN}),
    Case("shift_scores", lambda scores, target, shifts: api.shift_scores(scores, target, shifts),
         {"scores": S, "target": 4, "shifts": {0: 2, 2: 1}},
         {"scores": SCORES, "target": TARGET, "shifts": SHIFTS}),
    Case("build_options + solve_exact", _exact,
         {"w": BribeModel().bribed_values(S, 4), "v": S[4], "cost": np.ones(4), "target": 4,
          "rule": "mwr", "time_limit": 5.0},
         {"w": ARRAY.without("nan", "empty").extend(Mutation("one short", lambda w, r: w[:-1])),
          "v": ARRAY.without("nan", "empty"), "cost": COST.without("callable of the same",
                                                                   "callable returning text"),
          "target": TARGET, "rule": CHOICE(), "time_limit": TIME}),
    Case("Options", lambda dataset, value, cost: Options(dataset, value, cost),
         {"dataset": np.array([0, 2]), "value": np.array([0.9, 0.7]), "cost": np.ones(2)},
         {"dataset": ARRAY.without("empty", "extra dimension").extend(
             Mutation("negative", lambda d, r: -np.asarray(d) - 1)),
          "value": ARRAY.without("empty", "extra dimension"),
          "cost": ARRAY.without("empty", "extra dimension")}),
    Case("synthetic_leaderboard", lambda n_models, n_datasets, rank, rng: api.synthetic_leaderboard(
        n_models, n_datasets, rank=rank, rng=rng).scores,
         {"n_models": 6, "n_datasets": 3, "rank": 2, "rng": 3},
         {"n_models": INT(lo=2), "n_datasets": INT(lo=1), "rank": INT(lo=1), "rng": RNG}),
]


test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


def test_every_public_callable_has_a_case():
    covered = {part.split("(")[0] for c in CASES for part in c.name.split(" + ")}
    results = {"BribeResult", "ExactSolution", "RobustnessProfile"}  # returned, never given
    constants = {"ALL_RULES", "DEFAULT_MARGIN", "RULES"}
    missing = set(api.__all__) - covered - results - constants
    assert not missing, f"no malformed-input case for {sorted(missing)}"
    assert isinstance(api.robustness(S, 4, "mean"), BribeResult)
    assert isinstance(api.robustness_all(S, "mean"), RobustnessProfile)
    opts = api.build_options(BribeModel().bribed_values(S, 4), S[4])
    assert isinstance(api.solve_exact(S, 4, "borda", opts), ExactSolution)


def test_the_reported_reproductions():
    """Issue 38's bribery library items that are not about reading files (see
    tests/datasets/test_leaderboards.py for those): a model with no score blocks pairwise
    majority with a message that names it; a bad margin is one line."""
    s = np.vstack([S, np.full(4, np.nan)])
    r = api.robustness(s, 2, "condorcet")
    assert not r.feasible and "'m5' (they share no dataset)" in r.reason
    with pytest.raises(InputError, match="'margin' parameter of BribeModel"):
        BribeModel(margin="0.1")
    with pytest.raises(InputError, match=r"'target' parameter of robustness must be in \[0, 4\]"):
        api.robustness(S, -1, "mean")  # a negative index used to wrap around to the last model
    run_one(CASES[12], "scores", SCORES.mutations[-4])
