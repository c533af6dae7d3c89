"""hcc's public API on malformed input: InputError with one line, or the canonical result.

Every name in ``trustlab.methods.hcc.__all__`` that takes arguments is a case below (issue 38's
contract); the corruptions per argument kind are in tests/malformed.py.
"""

from __future__ import annotations

import hypothesis  # noqa: F401 - the property tests are built by malformed_input_tests
import networkx as nx
import numpy as np
import pytest

from trustlab.core.errors import InputError
from trustlab.methods import hcc as api
from trustlab.methods.hcc import (
    CIFAR10_TREE,
    HCC,
    FlatConformal,
    Hierarchy,
    LCAFlat,
    MortierRNode,
    MortierSingleNode,
    NodeSets,
)

from ..malformed import (
    BOOL,
    CHOICE,
    INT,
    LABELS,
    MASK,
    OBJECT,
    PROBS,
    RNG,
    UNIT,
    Case,
    Kind,
    Mutation,
    malformed_input_tests,
    run_one,
    scalar,
)

H = Hierarchy.build(CIFAR10_TREE)
_rng = np.random.default_rng(0)
P_CAL = _rng.dirichlet(np.full(10, 0.4), size=60)
Y_CAL = (P_CAL.cumsum(1) > _rng.random((60, 1))).argmax(1)
P_TEST = _rng.dirichlet(np.full(10, 0.4), size=23)
Y_TEST = (P_TEST.cumsum(1) > _rng.random((23, 1))).argmax(1)
REQ = _rng.random((17, 10)) < 0.3


def _names_frame(x, rng):
    import pandas as pd

    order = rng.permutation(10)
    return pd.DataFrame(np.asarray(x)[:, order], columns=[H.classes[i] for i in order])


def _wrong_names_frame(x, rng):
    frame = _names_frame(x, rng)
    return frame.rename(columns={frame.columns[0]: "zebra"})


PROBS_H = PROBS.extend(
    Mutation("DataFrame named by class, shuffled", _names_frame, same=True),
    Mutation("DataFrame with a column that is no class", _wrong_names_frame),
)
LABELS_H = LABELS.extend(
    Mutation("class names", lambda y, r: np.array([H.classes[i] for i in y]), same=True),
    Mutation("unknown class name", lambda y, r: np.array(["zebra"] + [H.classes[i] for i in y[1:]])),
)
NON_NEG = scalar("non-negative", -1.0, -1e-9)


def _sets(model):
    def run(probs_cal, y_cal, probs_test, alpha, **params):
        m = model(H, alpha, **params).fit(probs_cal, y_cal)
        return m.predict(probs_test).membership

    return run


MODEL_KINDS = {"probs_cal": PROBS_H, "y_cal": LABELS_H, "probs_test": PROBS_H, "alpha": UNIT}
MODEL_ARGS = {"probs_cal": P_CAL, "y_cal": Y_CAL, "probs_test": P_TEST, "alpha": 0.2}


def _hcc_run(probs_cal, y_cal, probs_test, alpha, node_penalty, score, mondrian):
    m = HCC(H, alpha, node_penalty=node_penalty, score=score, mondrian=mondrian)
    return m.fit(probs_cal, y_cal).predict(probs_test).membership


def _build(tree, classes):
    h = Hierarchy.build(tree, classes=classes)
    return h.classes, h.names, h.parent


TREE = Kind(
    "tree",
    (
        Mutation("None", lambda v, r: None),
        Mutation("string", lambda v, r: "animals"),
        Mutation("list", lambda v, r: list(v)),
        Mutation("one edge", lambda v, r: {"animals": "cat"}),
        Mutation("one leaf", lambda v, r: {"animals": ["cat"]}),
        Mutation("empty dict", lambda v, r: {}),
        Mutation("a leaf twice", lambda v, r: {**v, "more": ["cat", "bird2"]}),
        Mutation("parent-map cycle", lambda v, r: {"a": "b", "b": "a"}),
        Mutation("two roots", lambda v, r: {"a": "r", "b": "r", "c": "s"}),
        Mutation("DAG", lambda v, r: nx.DiGraph([("r", "a"), ("r", "b"), ("a", "c"), ("b", "c")])),
        Mutation("graph cycle", lambda v, r: nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a")])),
        Mutation("empty graph", lambda v, r: nx.DiGraph()),
        Mutation("unsortable leaves", lambda v, r: nx.DiGraph([("r", 0), ("r", "a")])),
        Mutation("graph of the same tree", lambda v, r: _graph(v), same=True),
        Mutation("parent map of the same tree", lambda v, r: _parents(v), same=True),
    ),
)
CLASSES = Kind(
    "classes",
    (
        Mutation("a duplicate", lambda c, r: [*c[:-1], c[0]]),
        Mutation("a leaf missing", lambda c, r: list(c[:-1])),
        Mutation("an internal node", lambda c, r: [*c[:-1], "animals"]),
        Mutation("not a node", lambda c, r: [*c[:-1], "zebra"]),
        Mutation("a string", lambda c, r: "airplane"),
        Mutation("tuple", lambda c, r: tuple(c), same=True),
        Mutation("numpy array", lambda c, r: np.array(c), same=True),
    ),
)


def _parents(tree):
    out = {}
    for top, sub in tree.items():
        out[top] = "root"
        for mid, leaves in sub.items():
            out[mid] = top
            out.update(dict.fromkeys(leaves, mid))
    return out


def _graph(tree):
    return nx.DiGraph([(p, c) for c, p in _parents(tree).items()])


def _node_sets_run(membership, y):
    return NodeSets(H, membership).contains(y)


MEMBERSHIP = Kind(
    "membership",
    (
        Mutation("0/1 integers", lambda m, r: m.astype(int), same=True),
        Mutation("a 2", lambda m, r: np.where(m, 2, 0)),
        Mutation("one node column short", lambda m, r: m[:, :-1]),
        Mutation("1-D", lambda m, r: m[0]),
        Mutation("None", lambda m, r: None),
        Mutation("strings", lambda m, r: m.astype(str)),
    ),
)
MEM = HCC(H, 0.2).fit(P_CAL, Y_CAL).predict(P_TEST).membership
SETS = NodeSets(H, MEM)

CASES = [
    Case(
        "HCC",
        _hcc_run,
        {**MODEL_ARGS, "node_penalty": 1.0, "score": "aps", "mondrian": False},
        {**MODEL_KINDS, "node_penalty": NON_NEG, "score": CHOICE(), "mondrian": BOOL},
    ),
    Case("FlatConformal", _sets(FlatConformal), {**MODEL_ARGS, "score": "raps"},
         {**MODEL_KINDS, "score": CHOICE()}),
    Case("LCAFlat", _sets(LCAFlat), {**MODEL_ARGS, "recalibrate": True},
         {**MODEL_KINDS, "recalibrate": BOOL}),
    Case("MortierSingleNode", _sets(MortierSingleNode), MODEL_ARGS, MODEL_KINDS),
    Case("MortierRNode", _sets(MortierRNode), {**MODEL_ARGS, "max_nodes": 2},
         {**MODEL_KINDS, "max_nodes": INT(lo=1)}),
    Case("Hierarchy.build", _build, {"tree": CIFAR10_TREE, "classes": list(H.classes)},
         {"tree": TREE, "classes": CLASSES}),
    Case("min_cost_cover", lambda required, node_penalty: api.min_cost_cover(H, required, node_penalty),
         {"required": REQ, "node_penalty": 0.7}, {"required": MASK, "node_penalty": NON_NEG}),
    Case("budget_cover", lambda required, max_nodes: api.budget_cover(H, required, max_nodes),
         {"required": REQ, "max_nodes": 2}, {"required": MASK, "max_nodes": INT(lo=1)}),
    Case("Hierarchy.lca", lambda leaf_mask: H.lca(leaf_mask), {"leaf_mask": REQ},
         {"leaf_mask": MASK}),
    Case("Hierarchy.node_scores", lambda probs: H.node_scores(probs), {"probs": P_TEST},
         {"probs": PROBS_H}),
    Case("leaf_scores", api.leaf_scores,
         {"probs": P_TEST, "score": "raps", "raps_lambda": 0.05, "raps_k_reg": 2},
         {"probs": PROBS, "score": CHOICE(), "raps_lambda": NON_NEG, "raps_k_reg": INT(lo=0)}),
    Case("NodeSets", _node_sets_run, {"membership": MEM, "y": Y_TEST},
         {"membership": MEMBERSHIP, "y": LABELS_H}),
    Case("coverage", api.coverage, {"sets": SETS, "y": Y_TEST}, {"sets": OBJECT, "y": LABELS_H}),
    Case("mean_leaves", api.mean_leaves, {"sets": SETS}, {"sets": OBJECT}),
    Case("mean_nodes", api.mean_nodes, {"sets": SETS}, {"sets": OBJECT}),
    Case("mean_depth", api.mean_depth, {"sets": SETS}, {"sets": OBJECT}),
    Case("NodeSets.nodes", lambda i: SETS.nodes(i), {"i": 3},
         {"i": INT(10**6, 23, -24)}),
    Case("random_hierarchy", lambda rng, n_classes, max_branching: _build(
        api.random_hierarchy(rng, n_classes, max_branching=max_branching), None),
         {"rng": 3, "n_classes": 9, "max_branching": 3},
         {"rng": RNG, "n_classes": INT(lo=2), "max_branching": INT(lo=2)}),
    Case("synthetic_scores", lambda n, rng, signal, noise: api.synthetic_scores(
        H, n, rng, signal=signal, noise=noise),
         {"n": 30, "rng": 4, "signal": 4.0, "noise": 1.5},
         {"n": INT(lo=1), "rng": RNG, "signal": NON_NEG, "noise": NON_NEG}),
]


test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


def test_every_public_callable_has_a_case():
    """A new public function or class must come with its malformed-input case."""
    covered = {c.name.split(".")[0] for c in CASES} | {"SyntheticTask"}
    constants = {"CIFAR10_TREE"}
    no_input = {"cifar10_hierarchy"}  # takes no argument
    slow = {"digits_task"}  # trains a classifier; its scalar checks are tested below
    missing = set(api.__all__) - covered - constants - no_input - slow
    assert not missing, f"no malformed-input case for {sorted(missing)}"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_components": 0}, "n_components"),
        ({"n_components": 65}, "n_components"),
        ({"n_components": 2.5}, "n_components"),
        ({"train_fraction": 1.0}, "train_fraction"),
        ({"train_fraction": float("nan")}, "train_fraction"),
        ({"rng": "seed"}, "'rng'"),
    ],
)
def test_digits_task_rejects_bad_settings(kwargs, match):
    args = {"rng": 0, **kwargs}
    with pytest.raises(InputError, match=match):
        api.digits_task(**args)


def test_the_reported_reproductions():
    """Issue 38's hcc items, replayed one by one."""
    with pytest.raises(InputError, match="single class"):
        Hierarchy.build({"animals": "cat"})
    with pytest.raises(InputError, match=r"'i' parameter of NodeSets.nodes"):
        SETS.nodes(10**6)
    run_one(CASES[0], "probs_cal", PROBS_H.mutations[-2])  # named, shuffled DataFrame
