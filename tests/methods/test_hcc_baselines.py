"""Baselines: agreement with MAPIE / direct references, coverage, and HCC against the LCA lift."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from trustlab.core.errors import NotFittedError
from trustlab.methods.hcc import HCC, Hierarchy, NodeSets
from trustlab.methods.hcc.baselines import (
    FlatConformal,
    LCAFlat,
    MortierRNode,
    MortierSingleNode,
    budget_cover,
)

from .test_hcc import antichains, random_tree, synthetic


def dirichlet_data(rng, k, n, conc=0.5):
    p = rng.dirichlet(np.full(k, conc), size=n)
    y = (p.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return p, y


def test_flat_lac_matches_mapie():
    mapie = pytest.importorskip("mapie.classification", reason="mapie is not installed")
    from sklearn.base import BaseEstimator, ClassifierMixin

    class PassThrough(ClassifierMixin, BaseEstimator):
        def fit(self, x, y):
            self.classes_ = np.arange(x.shape[1])
            return self

        def predict_proba(self, x):
            return np.asarray(x)

        def predict(self, x):
            return np.argmax(x, axis=1)

    rng = np.random.default_rng(0)
    h = random_tree(rng, 8)
    p, y = dirichlet_data(rng, 8, 3000)
    for alpha in (0.05, 0.1, 0.2):
        ref = mapie.SplitConformalClassifier(
            PassThrough().fit(p, y), confidence_level=1 - alpha, conformity_score="lac", prefit=True
        )
        ref.conformalize(p[:1000], y[:1000])
        _, sets = ref.predict_set(p[1000:])
        ours = FlatConformal(h, alpha).fit(p[:1000], y[:1000]).predict_leaves(p[1000:])
        assert np.array_equal(sets[:, :, 0], ours)


def reference_aps(p_cal, y_cal, p_test, alpha, lam=0.0, k_reg=1):
    """APS / RAPS written point by point from the definition (non-randomised)."""

    def score(row, k):
        order = sorted(range(len(row)), key=lambda j: (-row[j], j))
        rank = order.index(k) + 1
        return sum(row[j] for j in order[:rank]) + lam * max(0, rank - k_reg)

    cal = sorted(score(p_cal[i], y_cal[i]) for i in range(len(y_cal)))
    q = cal[math.ceil((len(cal) + 1) * (1 - alpha)) - 1]
    return np.array([[score(r, k) <= q + 1e-12 for k in range(len(r))] for r in p_test])


@pytest.mark.parametrize(("score", "lam"), [("aps", 0.0), ("raps", 0.05)])
def test_flat_aps_raps_match_reference(score, lam):
    rng = np.random.default_rng(1)
    h = random_tree(rng, 7)
    p, y = dirichlet_data(rng, 7, 600)
    ref = reference_aps(p[:300], y[:300], p[300:], 0.1, lam=lam, k_reg=2)
    ours = FlatConformal(h, 0.1, score=score, raps_lambda=lam, raps_k_reg=2).fit(p[:300], y[:300])
    assert np.array_equal(ours.predict_leaves(p[300:]), ref)


def all_baselines(h):
    return {
        "flat_lac": FlatConformal(h, 0.1),
        "flat_aps": FlatConformal(h, 0.1, score="aps"),
        "flat_raps": FlatConformal(h, 0.1, score="raps"),
        "lca": LCAFlat(h, 0.1),
        "lca_naive": LCAFlat(h, 0.1, recalibrate=False),
        "mortier_1": MortierSingleNode(h, 0.1),
        "mortier_r3": MortierRNode(h, 0.1, max_nodes=3),
    }


@pytest.mark.parametrize(
    "name",
    ["flat_lac", "flat_aps", "flat_raps", "lca", "lca_naive", "mortier_1", "mortier_r3"],
)
def test_baseline_coverage_over_random_splits(name):
    rng = np.random.default_rng(11)
    h = random_tree(rng, 12)
    covs = []
    for _ in range(30):
        p, y = synthetic(rng, h, 1000)
        m = all_baselines(h)[name].fit(p[:500], y[:500])
        sets = m.predict(p[500:])
        covs.append(sets.coverage(y[500:]))
        # every set is an antichain: no class lies under two of its nodes
        overlap = sets.membership.astype(np.int64) @ h.membership.astype(np.int64)
        assert overlap.max() <= 1
    # mean of 30 splits (500 calibration, 500 test points): SE = sqrt(2 * 0.09 / 500 / 30),
    # about 0.0035; the bound is 2.9 SE below nominal
    assert np.mean(covs) >= 0.9 - 0.01


def test_single_node_baselines_return_one_node():
    rng = np.random.default_rng(2)
    h = random_tree(rng, 10)
    p, y = synthetic(rng, h, 800)
    for m in (LCAFlat(h, 0.1), MortierSingleNode(h, 0.1)):
        sets = m.fit(p[:400], y[:400]).predict(p[400:])
        assert (sets.n_nodes <= 1).all()
    sets = MortierSingleNode(h, 0.1).fit(p[:400], y[:400]).predict(p[400:])
    assert (sets.n_nodes == 1).all()


def test_mortier_single_node_score_agrees_with_its_sets():
    """y is covered at threshold q exactly when its calibration score is <= q (nestedness)."""
    rng = np.random.default_rng(3)
    h = random_tree(rng, 14)
    p, y = synthetic(rng, h, 600)
    m = MortierSingleNode(h, 0.1).fit(p, y)
    for q in np.quantile(m.cal_scores_, [0.1, 0.5, 0.8, 0.95]):
        m.threshold_ = float(q)
        assert np.array_equal(m.predict(p).contains(y), m.cal_scores_ <= q)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("r", [1, 2, 3])
def test_budget_cover_equals_brute_force(seed, r):
    rng = np.random.default_rng(seed)
    h = random_tree(rng, int(rng.integers(4, 8)))
    chains = antichains(h)
    req = rng.random((40, h.n_classes)) < 0.35
    sel = budget_cover(h, req, r)
    for i in range(40):
        need = set(np.flatnonzero(req[i]))
        best = math.inf
        for a in chains:
            if len(a) > r:
                continue
            cov = set(np.flatnonzero(h.membership[list(a)].any(axis=0))) if a else set()
            if need <= cov:
                best = min(best, len(cov))
        got = np.flatnonzero(sel[i])
        cov = set(np.flatnonzero(h.membership[got].any(axis=0))) if got.size else set()
        assert len(got) <= r and need <= cov and len(cov) == best
        assert (h.membership[got].sum(axis=0) <= 1).all()


def test_budget_one_is_the_lca():
    rng = np.random.default_rng(5)
    h = random_tree(rng, 15)
    req = rng.random((100, 15)) < 0.2
    sel = budget_cover(h, req, 1)
    lca = h.lca(req)
    lifted = np.zeros_like(sel)
    lifted[np.flatnonzero(lca >= 0), lca[lca >= 0]] = True
    # same covered classes (on a unary chain the DP keeps the coarser of equal nodes)
    assert np.array_equal(NodeSets(h, sel).covered, NodeSets(h, lifted).covered)
    assert (sel.sum(axis=1) == (lca >= 0)).all()


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0, 3.0, 50.0])
@pytest.mark.parametrize("score", ["lac", "aps"])
def test_hcc_covers_no_more_leaves_than_lca_lift(lam, score):
    """At one threshold HCC's set lies inside the LCA of the flat set (a theorem); after each is
    calibrated, HCC covers fewer classes on average on sibling-confusion data (measured)."""
    rng = np.random.default_rng(int(lam * 10) + 7)
    h = random_tree(rng, 20)
    diffs = []
    for _ in range(8):
        p, y = synthetic(rng, h, 1200)
        hcc = HCC(h, 0.1, node_penalty=lam, score=score).fit(p[:600], y[:600])
        lca = LCAFlat(h, 0.1, score=score).fit(p[:600], y[:600])
        naive = LCAFlat(h, 0.1, score=score, recalibrate=False).fit(p[:600], y[:600])
        req = hcc.required(p[600:])
        same_tau = NodeSets(h, np.zeros((600, h.n_nodes), dtype=bool))
        lifted = h.lca(req)
        mem = same_tau.membership
        mem[np.flatnonzero(lifted >= 0), lifted[lifted >= 0]] = True
        assert (hcc.predict(p[600:]).covered <= NodeSets(h, mem).covered).all()
        a, b, c = hcc.predict(p[600:]), lca.predict(p[600:]), naive.predict(p[600:])
        assert (b.covered <= c.covered).all()  # recalibrating the lift only shrinks it
        diffs.append(a.mean_leaves() - b.mean_leaves())
    assert np.mean(diffs) <= 1e-12
    if lam >= h.n_classes:  # one node is always cheapest: HCC is the LCA lift
        assert np.allclose(diffs, 0.0)


def test_when_hcc_can_cover_more_than_lca():
    """The documented exception: leaf scores rank the true class low, but its wrong siblings
    high, so the LCA of the top classes covers it cheaply while HCC must wait for its score."""
    h = Hierarchy.build({"G": ["a", "b", "c"], "H": [f"h{i}" for i in range(8)]})
    rng = np.random.default_rng(0)
    n = 2000
    p = np.zeros((n, 11))
    p[:, 0] = p[:, 2] = 0.3  # a and c: confidently (and wrongly) preferred
    p[:, 3:] = 0.05 + 0.01 * rng.random((n, 8))  # the H classes, in between
    p[:, 1] = 0.01  # b, the true class, ranked last
    p /= p.sum(axis=1, keepdims=True)
    y = np.full(n, 1)
    flip = rng.random(n) < 0.5
    y[flip] = 0
    hcc = HCC(h, 0.1, node_penalty=0.5).fit(p[:1000], y[:1000]).predict(p[1000:])
    lca = LCAFlat(h, 0.1).fit(p[:1000], y[:1000]).predict(p[1000:])
    assert hcc.mean_leaves() > lca.mean_leaves()
    big = HCC(h, 0.1, node_penalty=float(h.n_classes)).fit(p[:1000], y[:1000]).predict(p[1000:])
    assert big.mean_leaves() == pytest.approx(lca.mean_leaves())


def test_predict_before_fit_names_fit():
    h = Hierarchy.build({"r": ["a", "b"]})
    for m in all_baselines(h).values():
        with pytest.raises(NotFittedError, match="'fit'"):
            m.predict(np.full((1, 2), 0.5))


def test_rnode_sets_respect_budget():
    rng = np.random.default_rng(9)
    h = random_tree(rng, 12)
    p, y = synthetic(rng, h, 800)
    for r in (1, 2, 4):
        sets = MortierRNode(h, 0.1, max_nodes=r).fit(p[:400], y[:400]).predict(p[400:])
        assert (sets.n_nodes <= r).all()
        assert isinstance(sets, NodeSets)


def test_reference_enumeration_is_exhaustive():
    """Sanity of the brute-force helper used above: antichains of a 2-leaf tree."""
    h = Hierarchy.build({"r": ["a", "b"]})
    got = {frozenset(h.names[v] for v in a) for a in antichains(h)}
    want = {frozenset(s) for s in [(), ("r",), ("a",), ("b",), ("a", "b")]}
    assert got == want
    assert len(list(itertools.chain(got))) == 5
