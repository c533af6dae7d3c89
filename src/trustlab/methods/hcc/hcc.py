"""Hierarchical Conformal Classification (HCC): conformal prediction sets made of hierarchy nodes.

For a test point with class scores ``s(x, k)`` (LAC, APS or RAPS) and a threshold ``tau``, let
``L_tau(x) = {k : s(x, k) <= tau}`` be the flat conformal set. HCC answers with the antichain
of nodes ``C_tau(x)`` that covers ``L_tau(x)`` at the least cost

    cost(A) = sum_{v in A} (n_leaves(v) + lambda)        (lambda = ``node_penalty``)

computed by a bottom-up tree DP. The covered sets are nested in ``tau``, so calibrating ``tau``
by split conformal on the score ``s_HCC(x, y) = min{tau : y covered by C_tau(x)}`` gives
``P(Y in C(X)) >= 1 - alpha`` in finite samples. The proofs are in docs/methods/hcc.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.validation import (
    check_choice,
    check_labels,
    check_open_unit,
    check_probs,
    check_scalar,
)
from trustlab.methods.hcc.hierarchy import Hierarchy, NodeSets, _min_cost_cover
from trustlab.stats import conformal_quantile

__all__ = [
    "HCC",
    "ScoreName",
    "check_params",
    "coverage",
    "first_cover_scores",
    "leaf_scores",
    "mean_depth",
    "mean_leaves",
    "mean_nodes",
]

ScoreName = Literal["lac", "aps", "raps"]
_SCORES = ("lac", "aps", "raps")


def check_params(
    where: str, score: str, raps_lambda: float, raps_k_reg: int
) -> tuple[str, float, int]:
    """The class-score settings shared by HCC and the flat baselines."""
    check_choice(score, "score", _SCORES, where)
    lam = check_scalar(raps_lambda, "raps_lambda", where, lo=0.0)
    k_reg = check_scalar(raps_k_reg, "raps_k_reg", where, kind=int, lo=0)
    return score, lam, k_reg


def _check_sets(sets: object, where: str) -> NodeSets:
    if not isinstance(sets, NodeSets):
        raise InputError(
            f"The 'sets' parameter of {where} must be the NodeSets a model's predict returns. "
            f"Got {type(sets).__name__}."
        )
    return sets


def leaf_scores(
    probs: NDArray[np.float64],
    score: str = "lac",
    *,
    raps_lambda: float = 0.01,
    raps_k_reg: int = 1,
) -> NDArray[np.float64]:
    """Non-conformity score of every class, ``(n, n_classes)``; large means unlikely.

    - ``lac``: ``1 - p_k`` (least ambiguous set-valued classifier, Sadinle et al. 2019).
    - ``aps``: the probability mass of the classes ranked at or above ``k`` (Romano et al.
      2020), not randomised, so the sets are deterministic.
    - ``raps``: APS plus ``raps_lambda * max(0, rank_k - raps_k_reg)`` with 1-based ranks
      (Angelopoulos et al. 2021).
    For every score, ``{k : s_k <= tau}`` grows with ``tau``. Ties in ``p`` are ranked by
    class index so that APS/RAPS sets stay nested prefixes of one ranking.
    """
    score, raps_lambda, raps_k_reg = check_params("leaf_scores", score, raps_lambda, raps_k_reg)
    probs = check_probs(probs, "probs", "leaf_scores")
    return _leaf_scores(probs, score, raps_lambda, raps_k_reg)


def _leaf_scores(
    probs: NDArray[np.float64], score: str, raps_lambda: float, raps_k_reg: int
) -> NDArray[np.float64]:
    if score == "lac":
        return 1.0 - probs
    order = np.argsort(-probs, axis=1, kind="stable")
    sorted_p = np.take_along_axis(probs, order, axis=1)
    cum = np.cumsum(sorted_p, axis=1)
    out = np.empty_like(probs)
    np.put_along_axis(out, order, cum, axis=1)
    if score == "raps":
        ranks = np.empty_like(order)
        np.put_along_axis(ranks, order, np.arange(1, probs.shape[1] + 1)[None, :], axis=1)
        out = out + raps_lambda * np.maximum(0, ranks - raps_k_reg)
    return out


def first_cover_scores(
    hierarchy: Hierarchy,
    scores: NDArray[np.float64],
    y: NDArray[np.int64],
    cover: Callable[[NDArray[np.bool_]], NDArray[np.bool_]],
) -> NDArray[np.float64]:
    """The least threshold at which ``cover`` of the flat set covers the label, per row.

    ``cover`` maps a ``(n, n_classes)`` mask of required classes to an ``(n, n_nodes)`` node
    membership. The covered set changes only at a row's own class scores and, for the covers
    used here, grows with the threshold, so a vectorised binary search over each row's sorted
    scores is exact (see docs/methods/hcc.md). At the label's own score the label is in the
    flat set and therefore covered, which bounds the search.
    """
    n = scores.shape[0]
    sorted_s = np.sort(scores, axis=1)
    rows = np.arange(n)
    lo = np.zeros(n, dtype=np.int64)
    hi = (sorted_s <= scores[rows, y][:, None]).sum(axis=1) - 1
    while True:
        idx = np.flatnonzero(lo < hi)
        if not idx.size:
            break
        mid = (lo[idx] + hi[idx]) // 2
        tau = sorted_s[idx, mid]
        sel = cover(scores[idx] <= tau[:, None])
        cov = NodeSets(hierarchy, sel).covered[np.arange(idx.size), y[idx]]
        hi[idx] = np.where(cov, mid, hi[idx])
        lo[idx] = np.where(cov, lo[idx], mid + 1)
    return sorted_s[rows, lo]


class HCC:
    """Hierarchical Conformal Classification: coverage-guaranteed sets of hierarchy nodes.

    Parameters
    ----------
    hierarchy
        A :class:`Hierarchy`, a parent map, a nested dict or a ``networkx.DiGraph``.
    alpha
        Miscoverage level (the paper's alpha): sets cover the true class with probability
        at least ``1 - alpha`` over calibration and test draws.
    node_penalty
        lambda in the cost ``leaves covered + lambda * nodes``: how many extra classes one is
        willing to cover to save one node. ``0`` gives the flat conformal set; a value above
        the number of classes gives a single node (the LCA of the flat set).
    score
        Class non-conformity score: ``"lac"`` (default), ``"aps"`` or ``"raps"``.
    mondrian
        Class-conditional (Mondrian) calibration: coverage ``>= 1 - alpha`` for every class.
    raps_lambda, raps_k_reg
        RAPS regularisation (used only with ``score="raps"``).

    Attributes (after ``fit``): ``hierarchy_``, ``threshold_`` (the calibrated tau; per class
    with ``mondrian=True``), ``cal_scores_`` (the calibration HCC scores), ``n_cal_``.
    """

    def __init__(
        self,
        hierarchy: object,
        alpha: float = 0.1,
        *,
        node_penalty: float = 1.0,
        score: ScoreName = "lac",
        mondrian: bool = False,
        raps_lambda: float = 0.01,
        raps_k_reg: int = 1,
    ) -> None:
        self.hierarchy = hierarchy
        self.alpha = alpha
        self.node_penalty = node_penalty
        self.score = score
        self.mondrian = mondrian
        self.raps_lambda = raps_lambda
        self.raps_k_reg = raps_k_reg

    def _check_params(self) -> None:
        check_open_unit(self.alpha, "alpha", "HCC")
        check_scalar(self.node_penalty, "node_penalty", "HCC", lo=0.0)
        check_params("HCC", self.score, self.raps_lambda, self.raps_k_reg)
        check_choice(self.mondrian, "mondrian", (True, False), "HCC")

    def _scores(self, probs: NDArray[np.float64]) -> NDArray[np.float64]:
        return _leaf_scores(probs, self.score, float(self.raps_lambda), int(self.raps_k_reg))

    def fit(self, probs_cal: ArrayLike, y_cal: ArrayLike) -> HCC:
        """Calibrate the threshold on held-out class probabilities and true class indices."""
        self._check_params()
        h = Hierarchy.build(self.hierarchy)
        p = h.check_probs(probs_cal, "probs_cal", "HCC.fit")
        y = check_labels(y_cal, "y_cal", "HCC.fit", n_samples=p.shape[0], classes=h.classes)
        s = self._scores(p)
        if self.mondrian:
            thr = np.empty(h.n_classes)
            for k in range(h.n_classes):
                sk = s[y == k, k]
                if sk.size == 0:
                    raise InputError(
                        f"Mondrian calibration needs calibration points of every class; "
                        f"class '{h.classes[k]}' has none."
                    )
                thr[k] = conformal_quantile(sk, self.alpha)
            self.cal_scores_ = s[np.arange(p.shape[0]), y]
            self.threshold_ = thr
            self.y_cal_ = y
        else:
            lam = float(self.node_penalty)
            cal = first_cover_scores(h, s, y, lambda req: _min_cost_cover(h, req, lam))
            self.cal_scores_ = cal
            self.threshold_ = conformal_quantile(cal, self.alpha)
        self.hierarchy_ = h
        self.n_cal_ = int(p.shape[0])
        return self

    def set_alpha(self, alpha: float) -> HCC:
        """Re-derive the threshold for a new ``alpha`` from the stored calibration scores.

        The calibration scores do not depend on ``alpha``, so this equals a fresh ``fit``.
        """
        self._check_fitted("set_alpha")
        self.alpha = check_open_unit(alpha, "alpha", "HCC")
        if self.mondrian:
            self.threshold_ = np.array(
                [
                    conformal_quantile(self.cal_scores_[self.y_cal_ == k], self.alpha)
                    for k in range(self.hierarchy_.n_classes)
                ]
            )
        else:
            self.threshold_ = conformal_quantile(self.cal_scores_, self.alpha)
        return self

    def _check_fitted(self, step: str) -> None:
        if not hasattr(self, "threshold_"):
            raise NotFittedError(f"This HCC is not fitted yet; call 'fit' before '{step}'.")

    def required(self, probs_test: ArrayLike) -> NDArray[np.bool_]:
        """The flat conformal set ``L_tau(x)`` that each HCC set must cover, ``(n, n_classes)``."""
        self._check_fitted("required")
        p = self.hierarchy_.check_probs(probs_test, "probs_test", "HCC.predict")
        s = self._scores(p)
        return s <= (self.threshold_[None, :] if self.mondrian else self.threshold_)

    def predict(self, probs_test: ArrayLike) -> NodeSets:
        """Prediction sets of nodes, one antichain per test point."""
        self._check_fitted("predict")
        req = self.required(probs_test)
        sel = _min_cost_cover(self.hierarchy_, req, float(self.node_penalty))
        return NodeSets(self.hierarchy_, sel)


# -- metrics (functions, for symmetry with sklearn.metrics) -------------------------------
def coverage(sets: NodeSets, y: ArrayLike) -> float:
    """Fraction of points whose set covers the true class (``y``: indices or class names)."""
    return _check_sets(sets, "coverage").coverage(y)


def mean_leaves(sets: NodeSets) -> float:
    """Mean number of classes covered per set."""
    return _check_sets(sets, "mean_leaves").mean_leaves()


def mean_nodes(sets: NodeSets) -> float:
    """Mean number of nodes per set."""
    return _check_sets(sets, "mean_nodes").mean_nodes()


def mean_depth(sets: NodeSets) -> float:
    """Mean (over non-empty sets) of the mean node depth of each set; root has depth 0."""
    return _check_sets(sets, "mean_depth").mean_depth()
