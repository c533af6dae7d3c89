"""Baselines in HCC's API: flat split conformal, its LCA lift, and Mortier et al.'s node sets.

Every class takes ``(hierarchy, alpha, ...)`` in ``__init__`` (stored only), calibrates in
``fit(probs_cal, y_cal)`` and returns :class:`NodeSets` from ``predict(probs_test)``.

- :class:`FlatConformal`: split-conformal LAC / APS / RAPS sets of leaves.
- :class:`LCAFlat`: the flat set replaced by its lowest common ancestor (one node). With
  ``recalibrate=True`` (default) the threshold is calibrated on the lifted sets themselves,
  otherwise the flat threshold is reused (coverage only goes up).
- :class:`MortierSingleNode`: one node, found by walking down the most probable child while
  the next node's probability mass stays above a calibrated threshold (Mortier et al. 2025,
  first algorithm, in a nested form so the guarantee is exact).
- :class:`MortierRNode`: at most ``r`` nodes covering the flat set with as few classes as
  possible (Mortier et al.'s representation-complexity constraint). That family is not nested
  in the threshold, so it is calibrated on the threshold from which the label *stays* covered,
  which keeps the guarantee (conservatively).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trustlab.core.errors import NotFittedError
from trustlab.core.validation import check_choice, check_labels, check_open_unit, check_scalar
from trustlab.methods.hcc.hcc import (
    ScoreName,
    _leaf_scores,
    check_params,
    first_cover_scores,
)
from trustlab.methods.hcc.hierarchy import _CHUNK, Hierarchy, NodeSets
from trustlab.stats import conformal_quantile

__all__ = ["FlatConformal", "LCAFlat", "MortierRNode", "MortierSingleNode", "budget_cover"]


class _Base:
    _name = "baseline"

    def __init__(self, hierarchy: object, alpha: float = 0.1) -> None:
        self.hierarchy = hierarchy
        self.alpha = alpha

    def _check_params(self) -> None:
        check_open_unit(self.alpha, "alpha", self._name)

    def _prepare(self, probs_cal: ArrayLike, y_cal: ArrayLike):
        self._check_params()
        h = Hierarchy.build(self.hierarchy)
        where = f"{self._name}.fit"
        p = h.check_probs(probs_cal, "probs_cal", where)
        y = check_labels(y_cal, "y_cal", where, n_samples=p.shape[0], classes=h.classes)
        return h, p, y

    def set_alpha(self, alpha: float) -> _Base:
        """Re-derive the threshold for a new ``alpha`` from the stored calibration scores."""
        if not hasattr(self, "cal_scores_"):
            raise NotFittedError(
                f"This {self._name} is not fitted yet; call 'fit' before 'set_alpha'."
            )
        self.alpha = check_open_unit(alpha, "alpha", self._name)
        self.threshold_ = conformal_quantile(self.cal_scores_, self.alpha)
        return self

    def _check_fitted(self, probs_test: ArrayLike) -> NDArray[np.float64]:
        if not hasattr(self, "threshold_"):
            raise NotFittedError(
                f"This {self._name} is not fitted yet; call 'fit' before 'predict'."
            )
        return self.hierarchy_.check_probs(probs_test, "probs_test", f"{self._name}.predict")


class FlatConformal(_Base):
    """Flat split-conformal prediction sets (LAC, APS or RAPS), returned as sets of leaves.

    ``alpha`` is the miscoverage. APS/RAPS are not randomised (deterministic sets).
    """

    _name = "FlatConformal"

    def __init__(
        self,
        hierarchy: object,
        alpha: float = 0.1,
        *,
        score: ScoreName = "lac",
        raps_lambda: float = 0.01,
        raps_k_reg: int = 1,
    ) -> None:
        super().__init__(hierarchy, alpha)
        self.score = score
        self.raps_lambda = raps_lambda
        self.raps_k_reg = raps_k_reg

    def _check_params(self) -> None:
        super()._check_params()
        check_params(self._name, self.score, self.raps_lambda, self.raps_k_reg)

    def _scores(self, p: NDArray[np.float64]) -> NDArray[np.float64]:
        return _leaf_scores(p, self.score, float(self.raps_lambda), int(self.raps_k_reg))

    def fit(self, probs_cal: ArrayLike, y_cal: ArrayLike) -> FlatConformal:
        h, p, y = self._prepare(probs_cal, y_cal)
        self.cal_scores_ = self._scores(p)[np.arange(p.shape[0]), y]
        self.threshold_ = conformal_quantile(self.cal_scores_, self.alpha)
        self.hierarchy_ = h
        return self

    def predict_leaves(self, probs_test: ArrayLike) -> NDArray[np.bool_]:
        """The flat sets as an ``(n, n_classes)`` boolean matrix."""
        p = self._check_fitted(probs_test)
        return self._scores(p) <= self.threshold_

    def predict(self, probs_test: ArrayLike) -> NodeSets:
        leaves = self.predict_leaves(probs_test)
        mem = np.zeros((leaves.shape[0], self.hierarchy_.n_nodes), dtype=bool)
        mem[:, self.hierarchy_.leaf_node] = leaves
        return NodeSets(self.hierarchy_, mem)


def _lca_membership(h: Hierarchy, req: NDArray[np.bool_]) -> NDArray[np.bool_]:
    lca = h.lca(req)
    mem = np.zeros((req.shape[0], h.n_nodes), dtype=bool)
    ok = lca >= 0
    mem[np.flatnonzero(ok), lca[ok]] = True
    return mem


class LCAFlat(FlatConformal):
    """The flat conformal set lifted to its lowest common ancestor (a single node).

    ``recalibrate=True`` calibrates the threshold on the lifted sets (the score is the least
    threshold whose lifted set covers the label); ``False`` reuses the flat threshold.
    """

    _name = "LCAFlat"

    def __init__(
        self,
        hierarchy: object,
        alpha: float = 0.1,
        *,
        score: ScoreName = "lac",
        recalibrate: bool = True,
        raps_lambda: float = 0.01,
        raps_k_reg: int = 1,
    ) -> None:
        super().__init__(
            hierarchy, alpha, score=score, raps_lambda=raps_lambda, raps_k_reg=raps_k_reg
        )
        self.recalibrate = recalibrate

    def _check_params(self) -> None:
        super()._check_params()
        check_choice(self.recalibrate, "recalibrate", (True, False), self._name)

    def fit(self, probs_cal: ArrayLike, y_cal: ArrayLike) -> LCAFlat:
        if not self.recalibrate:
            super().fit(probs_cal, y_cal)
            return self
        h, p, y = self._prepare(probs_cal, y_cal)
        self.cal_scores_ = first_cover_scores(
            h, self._scores(p), y, lambda req: _lca_membership(h, req)
        )
        self.threshold_ = conformal_quantile(self.cal_scores_, self.alpha)
        self.hierarchy_ = h
        return self

    def predict(self, probs_test: ArrayLike) -> NodeSets:
        leaves = self.predict_leaves(probs_test)
        return NodeSets(self.hierarchy_, _lca_membership(self.hierarchy_, leaves))


def _greedy_path(h: Hierarchy, node_p: NDArray[np.float64]) -> tuple[NDArray, NDArray]:
    """Per point, the root-to-leaf path that always steps to the most probable child.

    Returns ``(path, mass)`` of shape ``(n, max_depth + 2)``; past the leaf the path repeats
    the leaf and the mass is 0. Ties go to the first child.
    """
    n = node_p.shape[0]
    d_max = int(h.depth.max())
    n_kids = np.array([len(c) for c in h.children])
    first = np.array([c[0] if c else -1 for c in h.children])
    width = int(n_kids.max())
    path = np.zeros((n, d_max + 2), dtype=np.int64)
    mass = np.zeros((n, d_max + 2))
    cur = np.zeros(n, dtype=np.int64)
    mass[:, 0] = node_p[:, 0]
    rows = np.arange(n)
    for j in range(1, d_max + 2):
        internal = n_kids[cur] > 0
        cand = first[cur][:, None] + np.arange(width)[None, :]
        valid = np.arange(width)[None, :] < n_kids[cur][:, None]
        vals = np.where(valid, node_p[rows[:, None], np.where(valid, cand, 0)], -np.inf)
        step = cand[rows, np.argmax(vals, axis=1)]
        cur = np.where(internal, step, cur)
        path[:, j] = cur
        mass[:, j] = np.where(internal, node_p[rows, cur], 0.0)
    return path, mass


class MortierSingleNode(_Base):
    """One node per point: descend the most probable child while its mass exceeds a threshold.

    The non-conformity of ``(x, y)`` is the probability mass of the first node of the greedy
    path that no longer contains ``y`` (0 when ``y`` is the greedy leaf); the set at threshold
    ``q`` is the deepest greedy-path node whose successor has mass ``> q``. These sets are
    nested in ``q``, so split conformal gives exact finite-sample coverage.
    """

    _name = "MortierSingleNode"

    def _path_scores(self, h: Hierarchy, p: NDArray[np.float64]):
        path, mass = _greedy_path(h, h.node_scores(p))
        return path, mass

    def fit(self, probs_cal: ArrayLike, y_cal: ArrayLike) -> MortierSingleNode:
        h, p, y = self._prepare(probs_cal, y_cal)
        path, mass = self._path_scores(h, p)
        # number of path nodes containing y (the path repeats the leaf, so cap at the leaf)
        contains = h.membership[path, y[:, None]]
        d_star = contains.sum(axis=1) - 1
        d_star = np.minimum(d_star, mass.shape[1] - 2)
        self.cal_scores_ = mass[np.arange(len(y)), d_star + 1]
        self.threshold_ = conformal_quantile(self.cal_scores_, self.alpha)
        self.hierarchy_ = h
        return self

    def predict(self, probs_test: ArrayLike) -> NodeSets:
        p = self._check_fitted(probs_test)
        h = self.hierarchy_
        mem = np.zeros((p.shape[0], h.n_nodes), dtype=bool)
        for s in range(0, p.shape[0], _CHUNK):
            path, mass = self._path_scores(h, p[s : s + _CHUNK])
            below = mass[:, 1:] <= self.threshold_  # always true in the last (padding) column
            i = np.argmax(below, axis=1)  # first j >= 1 with mass_j <= q, minus one
            node = path[np.arange(path.shape[0]), i]
            mem[s + np.arange(path.shape[0]), node] = True
        return NodeSets(h, mem)


def budget_cover(h: Hierarchy, required: ArrayLike, max_nodes: int) -> NDArray[np.bool_]:
    """Antichain of at most ``max_nodes`` nodes covering ``required`` with the fewest classes.

    A tree knapsack DP: ``g_v[j]`` is the fewest classes that cover the required classes of
    the subtree of ``v`` with at most ``j`` nodes; children are merged by min-plus
    convolution and the chosen budgets are kept for the top-down reconstruction. Ties go to
    the coarser node. Vectorised over rows, looping over internal nodes.
    """
    h = Hierarchy.build(h)
    req = h.check_mask(required, "required", "budget_cover")
    r = check_scalar(max_nodes, "max_nodes", "budget_cover", kind=int, lo=1)
    return _budget_cover(h, req, r)


def _budget_cover(h: Hierarchy, req: NDArray[np.bool_], r: int) -> NDArray[np.bool_]:
    n = req.shape[0]
    big = np.inf
    size = h.n_leaves.astype(np.float64)
    cnt = np.zeros((n, h.n_nodes))
    cnt[:, h.leaf_node] = req
    h._sum_up(cnt)
    has = cnt > 0
    g = np.zeros((h.n_nodes, n, r + 1))
    take = np.zeros((h.n_nodes, n, r + 1), dtype=bool)
    splits: dict[int, list[NDArray[np.int64]]] = {}
    budgets = np.arange(r + 1)
    for v in range(h.n_nodes - 1, -1, -1):
        hv = has[:, v]
        own = np.where(budgets[None, :] >= 1, size[v], big)  # (1, r+1)
        if not h.children[v]:
            g[v] = np.where(hv[:, None], own, 0.0)
            take[v] = hv[:, None] & (budgets[None, :] >= 1)
            continue
        acc = g[h.children[v][0]]
        chosen = []
        for c in h.children[v][1:]:
            # new[j] = min_a acc[a] + g_c[j - a]
            tot = np.full((n, r + 1, r + 1), big)  # [row, j, a]
            for j in range(r + 1):
                tot[:, j, : j + 1] = acc[:, : j + 1] + g[c][:, j::-1]
            a = np.argmin(tot, axis=2)
            chosen.append(a)
            acc = np.take_along_axis(tot, a[:, :, None], axis=2)[:, :, 0]
        splits[v] = chosen
        t = hv[:, None] & (own <= acc)
        take[v] = t
        g[v] = np.where(hv[:, None], np.where(t, own, acc), 0.0)
    # top-down: hand each node its budget, select or split among children
    out = np.zeros((n, h.n_nodes), dtype=bool)
    budget = np.zeros((n, h.n_nodes), dtype=np.int64)
    budget[:, 0] = r
    reached = np.zeros((n, h.n_nodes), dtype=bool)
    reached[:, 0] = True
    rows = np.arange(n)
    for v in range(h.n_nodes):
        b = budget[:, v]
        sel = reached[:, v] & take[v][rows, b]
        out[:, v] = sel
        kids = h.children[v]
        if not kids:
            continue
        go = reached[:, v] & ~sel & has[:, v]
        rem = b.copy()
        for idx in range(len(kids) - 1, 0, -1):
            a = splits[v][idx - 1][rows, rem]
            budget[:, kids[idx]] = rem - a
            reached[:, kids[idx]] = go
            rem = a
        budget[:, kids[0]] = rem
        reached[:, kids[0]] = go
    return out


class MortierRNode(_Base):
    """At most ``max_nodes`` nodes covering the flat LAC set with the fewest classes.

    ``max_nodes`` is Mortier et al.'s representation-complexity bound r. The family is not
    nested in the threshold, so a calibration point's score is the least threshold from which
    its label stays covered at every larger threshold; ``y`` is then covered at the calibrated
    threshold whenever its score passes, so coverage ``>= 1 - alpha`` still holds.
    """

    _name = "MortierRNode"

    def __init__(
        self, hierarchy: object, alpha: float = 0.1, *, max_nodes: int = 3, score: ScoreName = "lac"
    ) -> None:
        super().__init__(hierarchy, alpha)
        self.max_nodes = max_nodes
        self.score = score

    def _check_params(self) -> None:
        super()._check_params()
        check_scalar(self.max_nodes, "max_nodes", self._name, kind=int, lo=1)
        check_choice(self.score, "score", ("lac", "aps", "raps"), self._name)

    def fit(self, probs_cal: ArrayLike, y_cal: ArrayLike) -> MortierRNode:
        h, p, y = self._prepare(probs_cal, y_cal)
        r = int(self.max_nodes)
        s = _leaf_scores(p, self.score, 0.01, 1)
        sorted_s = np.sort(s, axis=1)
        rows = np.arange(len(y))
        # scan thresholds downwards; a row stops at the first threshold that drops its label
        stays = np.full(len(y), h.n_classes - 1)
        active = rows.copy()
        for k in range(h.n_classes - 1, -1, -1):
            if not active.size:
                break
            req = s[active] <= sorted_s[active, k : k + 1]
            sel = _budget_cover(h, req, r)
            cov = NodeSets(h, sel).covered[np.arange(active.size), y[active]]
            stays[active[cov]] = k
            active = active[cov]
        self.cal_scores_ = sorted_s[rows, stays]
        self.threshold_ = conformal_quantile(self.cal_scores_, self.alpha)
        self.hierarchy_ = h
        return self

    def predict(self, probs_test: ArrayLike) -> NodeSets:
        p = self._check_fitted(probs_test)
        req = _leaf_scores(p, self.score, 0.01, 1) <= self.threshold_
        out = np.zeros((p.shape[0], self.hierarchy_.n_nodes), dtype=bool)
        for s in range(0, p.shape[0], _CHUNK):
            out[s : s + _CHUNK] = _budget_cover(
                self.hierarchy_, req[s : s + _CHUNK], int(self.max_nodes)
            )
        return NodeSets(self.hierarchy_, out)
