"""HCC: hierarchy validation, the covering DP against brute force, nestedness, coverage."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from trustlab.core.errors import InputError, NotFittedError
from trustlab.methods.hcc import HCC, Hierarchy, NodeSets, leaf_scores, min_cost_cover
from trustlab.stats import conformal_quantile

CIFAR_TREE = {
    "vehicles": {"road": ["automobile", "truck"], "other": ["airplane", "ship"]},
    "animals": {"mammals": ["cat", "deer", "dog", "horse"], "non-mammals": ["bird", "frog"]},
}


def random_tree(rng: np.random.Generator, n_leaves: int) -> Hierarchy:
    """A random tree: repeatedly group 2-3 current roots under a new parent (some unary)."""
    parents: dict[str, str | None] = {}
    roots = [f"c{i}" for i in range(n_leaves)]
    nxt = 0
    while len(roots) > 1:
        k = min(len(roots), int(rng.integers(2, 4)))
        pick = rng.choice(len(roots), size=k, replace=False)
        name = f"n{nxt}"
        nxt += 1
        for i in pick:
            parents[roots[i]] = name
        roots = [r for i, r in enumerate(roots) if i not in set(pick)] + [name]
        if rng.random() < 0.15:  # an occasional unary chain
            parents[name] = f"n{nxt}"
            roots[-1] = f"n{nxt}"
            nxt += 1
    return Hierarchy.from_parents(parents, classes=[f"c{i}" for i in range(n_leaves)])


def antichains(h: Hierarchy, v: int = 0) -> list[frozenset[int]]:
    """Every antichain inside the subtree of ``v`` (including the empty one)."""
    out = [frozenset([v])]
    if h.children[v]:
        parts = [antichains(h, c) for c in h.children[v]]
        out += [frozenset().union(*combo) for combo in itertools.product(*parts)]
    else:
        out.append(frozenset())
    return out


def brute_cover(h: Hierarchy, req: np.ndarray, lam: float, chains: list[frozenset[int]]):
    """Min-cost antichain covering ``req``; among optima the one covering the most classes."""
    m = h.membership
    need = set(np.flatnonzero(req))
    best = None
    for a in chains:
        cov = set(np.flatnonzero(m[list(a)].any(axis=0))) if a else set()
        if not need <= cov:
            continue
        cost = sum(h.n_leaves[v] + lam for v in a)
        key = (round(cost, 9), -len(cov))
        if best is None or key < best[0]:
            best = (key, a, cov)
    return best


def test_hierarchy_from_three_formats_agree():
    h1 = Hierarchy.build(CIFAR_TREE)
    parents = {}
    g = nx.DiGraph()
    for top, sub in CIFAR_TREE.items():
        parents[top] = "root"
        g.add_edge("root", top)
        for mid, leaves in sub.items():
            parents[mid] = top
            g.add_edge(top, mid)
            for leaf in leaves:
                parents[leaf] = mid
                g.add_edge(mid, leaf)
    h2 = Hierarchy.build(parents, classes=h1.classes)
    h3 = Hierarchy.build(g, classes=h1.classes)
    for h in (h2, h3):
        assert h.classes == h1.classes
        assert np.array_equal(h.n_leaves[h.leaf_node], h1.n_leaves[h1.leaf_node])
        assert sorted(h.names) == sorted(h1.names)
        assert (h.membership[[h.index(n) for n in h1.names]] == h1.membership).all()
    assert h1.n_leaves[0] == 10 and h1.n_classes == 10


@pytest.mark.parametrize(
    ("tree", "classes", "match"),
    [
        ({"a": "r", "b": "r", "c": "s"}, None, "2 roots"),
        ({"a": "b", "b": "a"}, None, "no root|cycle"),
        ({"r": None, "a": "r", "b": "a", "c": "d", "d": "c"}, None, "cycle"),
        ({"a": "r", "b": "r"}, ["a", "x"], "not in the hierarchy"),
        ({"a": "r", "b": "r"}, ["a", "r"], "internal node"),
        ({"a": "r", "b": "r", "c": "r"}, ["a", "b"], "leaf 'c' is not a class"),
        ({"a": "r", "b": "r"}, ["a", "a"], "duplicates"),
        ({"a": "a"}, None, "own parent"),
        (42, None, "must be a Hierarchy"),
    ],
)
def test_hierarchy_validation_errors(tree, classes, match):
    with pytest.raises(InputError, match=match):
        Hierarchy.build(tree, classes=classes)


def test_networkx_validation_errors():
    g = nx.DiGraph([("r", "a"), ("r", "b"), ("a", "c"), ("b", "c")])
    with pytest.raises(InputError, match="2 parents"):
        Hierarchy.build(g)
    g = nx.DiGraph([("r", "a"), ("a", "b"), ("b", "a")])
    with pytest.raises(InputError, match=r"parents|cycle"):
        Hierarchy.build(g)
    g = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a")])
    with pytest.raises(InputError, match="cycle"):
        Hierarchy.build(g)


def test_node_scores_are_sums_of_leaf_probabilities():
    rng = np.random.default_rng(0)
    h = random_tree(rng, 15)
    p = rng.dirichlet(np.ones(15), size=50)
    ns = h.node_scores(p)
    assert np.allclose(ns, p @ h.membership.T.astype(float))
    assert np.allclose(ns[:, 0], 1.0)


def test_lca_matches_definition():
    rng = np.random.default_rng(1)
    h = random_tree(rng, 12)
    mask = rng.random((200, 12)) < 0.2
    lca = h.lca(mask)
    for i in range(200):
        if not mask[i].any():
            assert lca[i] == -1
            continue
        anc = [v for v in range(h.n_nodes) if h.membership[v][mask[i]].all()]
        assert lca[i] == max(anc, key=lambda v: h.depth[v])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("lam", [0.0, 0.37, 1.0, 2.5, 40.0])
def test_cover_dp_equals_brute_force(seed, lam):
    rng = np.random.default_rng(seed)
    h = random_tree(rng, int(rng.integers(4, 8)))
    chains = antichains(h)
    req = rng.random((60, h.n_classes)) < rng.uniform(0.1, 0.6)
    sel = min_cost_cover(h, req, lam)
    cov = NodeSets(h, sel).covered
    for i in range(req.shape[0]):
        (cost, _), a, c = brute_cover(h, req[i], lam, chains)
        got = np.flatnonzero(sel[i])
        assert cost == round(sum(h.n_leaves[v] + lam for v in got), 9)
        assert set(got) == set(a), (i, got, a)
        assert set(np.flatnonzero(cov[i])) == c
        # an antichain: no chosen node lies under another
        assert (h.membership[got].sum(axis=0) <= 1).all()


@pytest.mark.parametrize("seed", range(4))
def test_covered_sets_are_nested_in_the_threshold(seed):
    rng = np.random.default_rng(seed)
    h = random_tree(rng, 20)
    p = rng.dirichlet(np.full(20, 0.4), size=100)
    s = leaf_scores(p, "lac")
    taus = np.sort(s, axis=1)
    prev = np.zeros_like(p, dtype=bool)
    for j in range(20):
        cov = NodeSets(h, min_cost_cover(h, s <= taus[:, j : j + 1], 1.3)).covered
        assert (cov | ~prev).all()  # prev subset of cov
        prev = cov


def brute_hcc(h, lam, p_cal, y_cal, p_test, alpha):
    """HCC by enumeration: calibration scores, quantile and test sets all by brute force."""
    chains = antichains(h)
    s_cal = leaf_scores(p_cal, "lac")
    cal = []
    for i in range(len(y_cal)):
        for tau in np.sort(s_cal[i]):
            _, _, cov = brute_cover(h, s_cal[i] <= tau, lam, chains)
            if y_cal[i] in cov:
                cal.append(tau)
                break
    q = conformal_quantile(np.array(cal), alpha)
    s_test = leaf_scores(p_test, "lac")
    sets = []
    for i in range(p_test.shape[0]):
        res = brute_cover(h, s_test[i] <= q, lam, chains)
        sets.append(set(res[1]))
    return q, sets


@pytest.mark.parametrize("seed", range(3))
def test_hcc_equals_brute_force_end_to_end(seed):
    rng = np.random.default_rng(100 + seed)
    h = random_tree(rng, 6)
    p = rng.dirichlet(np.full(6, 0.5), size=140)
    y = np.array([rng.choice(6, p=r) for r in p])
    lam = [0.5, 1.0, 3.0][seed]
    q, sets = brute_hcc(h, lam, p[:80], y[:80], p[80:], 0.2)
    model = HCC(h, alpha=0.2, node_penalty=lam).fit(p[:80], y[:80])
    assert model.threshold_ == pytest.approx(q)
    got = model.predict(p[80:])
    for i, s in enumerate(sets):
        assert set(np.flatnonzero(got.membership[i])) == s


def test_zero_penalty_reproduces_flat_lac():
    rng = np.random.default_rng(3)
    h = random_tree(rng, 12)
    p = rng.dirichlet(np.full(12, 0.5), size=600)
    y = np.array([rng.choice(12, p=r) for r in p])
    m = HCC(h, alpha=0.1, node_penalty=0.0).fit(p[:300], y[:300])
    q_flat = conformal_quantile(1.0 - p[np.arange(300), y[:300]], 0.1)
    assert m.threshold_ == pytest.approx(q_flat)
    assert np.array_equal(m.predict(p[300:]).covered, 1.0 - p[300:] <= q_flat)


def test_huge_penalty_gives_single_node():
    rng = np.random.default_rng(4)
    h = random_tree(rng, 12)
    p = rng.dirichlet(np.full(12, 0.5), size=400)
    y = np.array([rng.choice(12, p=r) for r in p])
    sets = HCC(h, alpha=0.1, node_penalty=100.0).fit(p[:200], y[:200]).predict(p[200:])
    assert (sets.n_nodes <= 1).all()


def synthetic(rng, h, n, temp=1.0):
    """Class probabilities with errors concentrated among siblings; labels drawn from them."""
    k = h.n_classes
    logits = rng.normal(size=(n, k)) * 2.0 / temp
    y = rng.integers(0, k, size=n)
    logits[np.arange(n), y] += 2.5
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True), y


@pytest.mark.parametrize("score", ["lac", "aps", "raps"])
@pytest.mark.parametrize("mondrian", [False, True])
def test_marginal_coverage_over_random_splits(score, mondrian):
    rng = np.random.default_rng(7)
    h = random_tree(rng, 16)
    alpha = 0.1
    covs = []
    for _ in range(40):
        p, y = synthetic(rng, h, 1000)
        m = HCC(h, alpha=alpha, score=score, mondrian=mondrian).fit(p[:500], y[:500])
        covs.append(m.predict(p[500:]).coverage(y[500:]))
    covs = np.array(covs)
    # mean of 40 x 500 Bernoulli draws: sd about 0.002; the guarantee is on the mean
    assert covs.mean() >= 1 - alpha - 0.01
    if not mondrian:
        assert covs.mean() <= 1 - alpha + 1 / 501 + 0.02  # not trivially conservative


def test_mondrian_class_conditional_coverage():
    rng = np.random.default_rng(8)
    h = Hierarchy.build(CIFAR_TREE)
    alpha = 0.1
    hits = np.zeros(10)
    totals = np.zeros(10)
    for _ in range(30):
        p, y = synthetic(rng, h, 2000)
        p[:, 0] = p[:, 0] * 0.3  # make class 0 hard
        p /= p.sum(axis=1, keepdims=True)
        sets = HCC(h, alpha=alpha, mondrian=True).fit(p[:1000], y[:1000]).predict(p[1000:])
        c = sets.contains(y[1000:])
        np.add.at(hits, y[1000:], c)
        np.add.at(totals, y[1000:], 1)
    assert (hits / totals >= 1 - alpha - 0.02).all()


def test_predict_before_fit_names_fit():
    with pytest.raises(NotFittedError, match="'fit'"):
        HCC(CIFAR_TREE).predict(np.full((2, 10), 0.1))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"alpha": 1.5}, "'alpha' parameter of HCC must be in \\(0, 1\\). Got 1.5."),
        ({"node_penalty": -1}, "node_penalty"),
        ({"score": "foo"}, "'score'"),
    ],
)
def test_bad_parameters_raise_on_fit(kwargs, match):
    p = np.full((50, 10), 0.1)
    y = np.zeros(50, dtype=int)
    model = HCC(CIFAR_TREE, **kwargs)  # __init__ stores only
    with pytest.raises(InputError, match=match):
        model.fit(p, y)


def test_bad_inputs_raise():
    p = np.full((50, 10), 0.1)
    with pytest.raises(InputError, match="shape"):
        HCC(CIFAR_TREE).fit(p[:, :9], np.zeros(50, dtype=int))
    with pytest.raises(InputError, match=r"class ids in \[0, 10\)"):
        HCC(CIFAR_TREE).fit(p, np.full(50, 10))
    with pytest.raises(InputError, match="calibration scores"):
        HCC(CIFAR_TREE, alpha=0.01).fit(p[:20], np.zeros(20, dtype=int))


def test_node_sets_helpers():
    h = Hierarchy.build(CIFAR_TREE)
    mem = np.zeros((2, h.n_nodes), dtype=bool)
    mem[0, h.index("road")] = True
    mem[0, h.index("cat")] = True
    s = NodeSets(h, mem)
    assert s.to_names() == [["road", "cat"], []]
    assert s.n_leaves.tolist() == [3, 0]
    assert s.n_nodes.tolist() == [2, 0]
    assert s.mean_depth() == pytest.approx(2.5)
    assert s.contains(np.array([h.classes.index("truck"), 0])).tolist() == [True, False]


# -- the column order of the probabilities (issues 22 and 38: one rule) ----------------------


def _int_tree_graph(parent_of_high_first: bool) -> nx.DiGraph:
    """Integer leaves 0-5 under two parents; the insertion order is the only difference."""
    g = nx.DiGraph()
    groups = [("low", [0, 1, 2]), ("high", [3, 4, 5])]
    for parent, leaves in groups[::-1] if parent_of_high_first else groups:
        g.add_edge("root", parent)
        for leaf in leaves:
            g.add_edge(parent, leaf)
    return g


def test_networkx_integer_leaves_default_to_label_order():
    """The reported case: the parent of 3-5 inserted first used to give classes 3,4,5,0,1,2."""
    for first in (False, True):
        h = Hierarchy.build(_int_tree_graph(first))
        assert h.classes == ("0", "1", "2", "3", "4", "5")
    # and the sets are reported under the right names: class 4 is certain, so its set is {4}
    p = np.full((50, 6), 0.0)
    p[:, 4] = 1.0
    y = np.full(50, 4)
    sets = HCC(_int_tree_graph(True), alpha=0.1).fit(p, y).predict(p[:3])
    assert sets.to_names() == [["4"], ["4"], ["4"]]


def _shuffled_formats(rng: np.random.Generator, tree: dict) -> list[object]:
    """The same tree as a parent map, a nested dict and a graph, each in a random order."""
    parents: dict[str, str] = {}
    for top, sub in tree.items():
        parents[top] = "root"
        for mid, leaves in sub.items():
            parents[mid] = top
            for leaf in leaves:
                parents[leaf] = mid
    items = list(parents.items())
    perm = rng.permutation(len(items))
    shuffled_parents = {items[i][0]: items[i][1] for i in perm}
    g = nx.DiGraph()
    edges = [(p, c) for c, p in items]
    for i in rng.permutation(len(edges)):
        g.add_edge(*edges[i])
    tops = list(tree)
    nested = {}
    for i in rng.permutation(len(tops)):
        mids = list(tree[tops[i]])
        nested[tops[i]] = {
            mids[j]: [
                tree[tops[i]][mids[j]][k] for k in rng.permutation(len(tree[tops[i]][mids[j]]))
            ]
            for j in rng.permutation(len(mids))
        }
    return [shuffled_parents, nested, g]


@pytest.mark.parametrize("seed", range(4))
def test_shuffled_insertion_order_gives_the_same_sets(seed):
    rng = np.random.default_rng(seed)
    ref = Hierarchy.build(CIFAR_TREE)
    p = rng.dirichlet(np.full(10, 0.3), size=600)
    y = (p.cumsum(1) > rng.random((600, 1))).argmax(1)
    want = HCC(ref, 0.1).fit(p[:300], y[:300]).predict(p[300:]).to_names()
    for tree in _shuffled_formats(rng, CIFAR_TREE):
        h = Hierarchy.build(tree)
        assert h.classes == tuple(sorted(h.classes)) == ref.classes
        got = HCC(tree, 0.1).fit(p[:300], y[:300]).predict(p[300:]).to_names()
        assert [sorted(s) for s in got] == [sorted(s) for s in want]


def test_default_order_is_scikit_learns_classes_order():
    """A nested dict with probabilities from a scikit-learn model fitted on string labels."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    leaves = [leaf for sub in CIFAR_TREE.values() for group in sub.values() for leaf in group]
    labels = rng.choice(leaves, size=3000)
    x = np.eye(10)[[leaves.index(v) for v in labels]] + rng.normal(0, 0.8, (3000, 10))
    clf = LogisticRegression(max_iter=500).fit(x[:1000], labels[:1000])
    h = Hierarchy.build(CIFAR_TREE)
    assert h.classes == tuple(clf.classes_)
    p = clf.predict_proba(x[1000:])
    y = np.array([h.classes.index(v) for v in labels[1000:]])
    sets = HCC(h, 0.1).fit(p[:1000], y[:1000]).predict(p[1000:])
    # coverage by *name*: the true label is under one of the set's named nodes
    by_name = [
        any(lab == n or lab in _leaves_under(h, n) for n in names)
        for lab, names in zip(labels[2000:], sets.to_names(), strict=True)
    ]
    assert np.mean(by_name) == pytest.approx(sets.coverage(y[1000:]))
    assert np.mean(by_name) >= 0.87


def _leaves_under(h: Hierarchy, node: str) -> set[str]:
    return {h.classes[k] for k in np.flatnonzero(h.membership[h.index(node)])}


def test_dataframe_with_named_columns_is_aligned_by_name():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(1)
    h = Hierarchy.build(CIFAR_TREE)
    p = rng.dirichlet(np.full(10, 0.3), size=400)
    y = (p.cumsum(1) > rng.random((400, 1))).argmax(1)
    want = HCC(h, 0.1).fit(p[:200], y[:200]).predict(p[200:]).to_names()
    order = rng.permutation(10)
    frame = pd.DataFrame(p[:, order], columns=[h.classes[i] for i in order])
    got = HCC(h, 0.1).fit(frame.iloc[:200], y[:200]).predict(frame.iloc[200:]).to_names()
    assert got == want
    bad = frame.rename(columns={h.classes[order[0]]: "zebra"})
    with pytest.raises(InputError, match="zebra"):
        HCC(h, 0.1).fit(bad.iloc[:200], y[:200])
    # default integer columns are positional
    plain = pd.DataFrame(p)
    assert HCC(h, 0.1).fit(plain.iloc[:200], y[:200]).predict(plain.iloc[200:]).to_names() == want


def test_unsortable_leaf_labels_need_classes():
    g = nx.DiGraph([("r", 0), ("r", "a"), ("r", 1)])
    with pytest.raises(InputError, match="classes="):
        Hierarchy.build(g)
    h = Hierarchy.build(g, classes=[0, "a", 1])
    assert h.classes == ("0", "a", "1")


@pytest.mark.parametrize("tree", [{"animals": "cat"}, {"animals": ["cat"]}, {"r": {"a": None}}])
def test_one_class_tree_is_an_error(tree):
    with pytest.raises(InputError, match="single class"):
        Hierarchy.build(tree)


def test_one_edge_parent_map_names_the_reading():
    with pytest.raises(InputError, match=r"read as a parent map; .*\{parent: \[children\]\}"):
        Hierarchy.build({"animals": "cat"})


def test_probabilities_must_be_probabilities():
    h = Hierarchy.build(CIFAR_TREE)
    logits = np.random.default_rng(0).normal(size=(20, 10))
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        HCC(h).fit(logits, np.zeros(20, dtype=int))
    with pytest.raises(InputError, match="sum to 1"):
        HCC(h).fit(np.full((20, 10), 0.5), np.zeros(20, dtype=int))
