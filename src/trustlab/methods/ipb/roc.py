"""The boundary for tests ([0, 1]-valued functions), from a P-vs-Q score.

For all tests, the boundary is the Neyman-Pearson trade-off: the ROC curve of the likelihood
ratio ``dQ/dP``. From samples we see P and Q only through a score ``s`` (a density-ratio
estimate: a classifier trained to tell Q from P), so the class we bound exactly is

    F_s = conv{ g(s(x)) : g monotone, [0, 1]-valued }

(every monotone g is a mixture of thresholds, so the joint range is the convex hull of the
threshold ROC points and their reflections, and its upper boundary is the ROC's concave hull).
When ``s`` is a monotone transform of ``dQ/dP`` (a well-specified classifier; the true log
ratio), ``F_s`` has the same boundary as all tests, by the Neyman-Pearson lemma.

Two confidence bands on the true boundary of ``F_s``:

* ``"cp"`` (default): thresholds at K order statistics of the P scores. The P-mass above the
  j-th largest of n P scores is Beta(j, n + 1 - j) whatever P is, and the Q mass above a
  threshold fixed by the P sample is binomial, so each threshold gets exact bounds; a union
  bound over the K thresholds and the staircase that dominates every threshold in between give
  a band that is *relatively* tight at the rare end (where DKW's additive ``eps`` is not).
* ``"dkw"``: ``sup_c |F_n(c) - F(c)| <= sqrt(log(2/delta) / 2n)`` on both score CDFs (Massart).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from trustlab.core.errors import InputError
from trustlab.core.validation import (
    as_float_array,
    check_choice,
    check_open_unit,
    check_samples,
    check_scalar,
)
from trustlab.methods.ipb.base import BoundaryEstimator, check_random_seed
from trustlab.stats import clopper_pearson

__all__ = ["TestBoundary", "dkw_epsilon", "roc_hull", "roc_points", "upper_hull"]


def dkw_epsilon(n: int, delta: float) -> float:
    """Dvoretzky-Kiefer-Wolfowitz-Massart: ``P(sup |F_n - F| > eps) <= delta`` for this eps."""
    n = check_scalar(n, "n", "dkw_epsilon", kind=int, lo=1)
    delta = check_open_unit(delta, "delta", "dkw_epsilon")
    return float(np.sqrt(np.log(2.0 / delta) / (2.0 * n)))


def roc_points(s_p: ArrayLike, s_q: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(FPR, TPR) of the tests ``1{s >= c}`` at every observed score c, plus (0, 0) and (1, 1).

    Higher scores mean "more like Q". FPR is the P mass of the test, TPR its Q mass.
    """
    sp = np.sort(as_float_array(s_p, "s_p", "roc_points", ndim=1))
    sq = np.sort(as_float_array(s_q, "s_q", "roc_points", ndim=1))
    cuts = np.unique(np.concatenate([sp, sq]))
    fpr = (sp.size - np.searchsorted(sp, cuts, side="left")) / sp.size
    tpr = (sq.size - np.searchsorted(sq, cuts, side="left")) / sq.size
    return np.concatenate([[0.0], fpr, [1.0]]), np.concatenate([[0.0], tpr, [1.0]])


def upper_hull(x: ArrayLike, y: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Vertices of the upper concave hull of points, left to right (Andrew's monotone chain).

    Written here because scipy's Qhull rejects the flat point sets that ROC curves often are
    (a useless score gives a diagonal); the chain is 15 lines and exact.
    """
    x = as_float_array(x, "x", "upper_hull", ndim=1)
    y = as_float_array(y, "y", "upper_hull", ndim=1)
    if x.shape != y.shape:
        raise InputError(
            f"The 'x' and 'y' parameters of upper_hull must have one length. "
            f"Got {x.size} and {y.size}."
        )
    return _upper_hull(x, y)


def _upper_hull(
    x: NDArray[np.float64], y: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    order = np.lexsort((y, x))
    xs, ys = x[order], y[order]
    # keep, for each x, only the highest point
    last = np.r_[xs[1:] != xs[:-1], True]
    xs, ys = xs[last], ys[last]
    hx: list[float] = []
    hy: list[float] = []
    for px, py in zip(xs.tolist(), ys.tolist(), strict=True):
        while len(hx) >= 2 and (
            (hx[-1] - hx[-2]) * (py - hy[-2]) - (hy[-1] - hy[-2]) * (px - hx[-2]) >= 0
        ):
            hx.pop()
            hy.pop()
        hx.append(px)
        hy.append(py)
    return np.asarray(hx), np.asarray(hy)


def _symmetric_hull(fpr: NDArray, tpr: NDArray) -> tuple[NDArray, NDArray]:
    """Upper hull of the points and their reflections through (1/2, 1/2), made nondecreasing."""
    hx, hy = _upper_hull(np.r_[fpr, 1 - fpr, 0.0, 1.0], np.r_[tpr, 1 - tpr, 0.0, 1.0])
    return hx, np.maximum.accumulate(hy)


def roc_hull(s_p: ArrayLike, s_q: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Knots (t, B(t)) of the empirical boundary of ``F_s``: the concave hull of the ROC of s."""
    return _symmetric_hull(*roc_points(s_p, s_q))


def _decision_scores(model: Any, x: NDArray[np.float64]) -> NDArray[np.float64]:
    if hasattr(model, "decision_function"):
        return np.asarray(model.decision_function(x), dtype=np.float64).ravel()
    proba = np.asarray(model.predict_proba(x), dtype=np.float64)
    return special.logit(np.clip(proba[:, -1], 1e-12, 1 - 1e-12))


def _one_score_per_point(
    scores: ArrayLike, n: int | None, name: str, where: str
) -> NDArray[np.float64]:
    """Scores as ``(n,)``: a second column is an error, never silently ignored."""
    arr = as_float_array(scores, f"scores of {name}", where)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1 or (n is not None and arr.shape[0] != n):
        want = f"({n},)" if n is not None else "(n,)"
        raise InputError(
            f"The score of {where} must give one value per point of '{name}', shape {want} or "
            f"(n, 1). Got shape {arr.shape} (for a classifier's probabilities, pass the "
            "column of Q, e.g. lambda x: clf.predict_proba(x)[:, 1])."
        )
    if not np.all(np.isfinite(arr)):
        raise InputError(f"The scores of '{name}' in {where} must be finite (no NaN or inf).")
    return arr


class TestBoundary(BoundaryEstimator):
    """Boundary of tests between P (source) and Q (target), estimated through a score.

    Parameters
    ----------
    score : callable, optional
        ``score(x) -> array``: higher means more Q-like (ideally a monotone transform of
        ``dQ/dP``, e.g. the true log ratio). When given, all samples calibrate the band.
    classifier : sklearn classifier, optional
        Trained on ``train_fraction`` of each sample to tell Q (label 1) from P (label 0)
        when ``score`` is not given; default ``LogisticRegression`` (well specified for a
        Gaussian shift with shared covariance).
    band : {"cp", "dkw"}
        Confidence band on the true boundary (see the module docstring).
    delta : float
        Miscoverage of the band: it holds for all t at once with probability >= 1 - delta.
    n_thresholds : int
        K, the thresholds of the "cp" band (spaced geometrically towards both ends).
    train_fraction : float
        Share of each sample used to train the classifier (the rest calibrates the band).
    random_state : int or None
        Seeds the split and the random tie-breaking of equal scores.
    """

    __test__ = False  # not a pytest test class despite the name
    _NAME = "TestBoundary"

    def __init__(
        self,
        *,
        score: Callable[[NDArray[np.float64]], ArrayLike] | None = None,
        classifier: Any = None,
        band: Literal["cp", "dkw"] = "cp",
        delta: float = 0.05,
        n_thresholds: int = 64,
        train_fraction: float = 0.5,
        random_state: int | None = None,
    ) -> None:
        self.score = score
        self.classifier = classifier
        self.band = band
        self.delta = delta
        self.n_thresholds = n_thresholds
        self.train_fraction = train_fraction
        self.random_state = random_state

    # -- fitting ------------------------------------------------------------------
    def _check_settings(self) -> None:
        where = self._NAME
        check_open_unit(self.delta, "delta", where)
        check_choice(self.band, "band", ("cp", "dkw"), where)
        check_scalar(self.n_thresholds, "n_thresholds", where, kind=int, lo=2)
        check_random_seed(self.random_state, "random_state", where)

    def fit(self, x_p: ArrayLike, x_q: ArrayLike) -> TestBoundary:
        """Train the score (unless given) and calibrate the boundary on held-out samples."""
        where = self._NAME
        self._check_settings()
        x_p = check_samples(x_p, "x_p", where, min_n=4)
        x_q = check_samples(x_q, "x_q", where, min_n=4, n_features=x_p.shape[1])
        if self.score is not None:
            if not callable(self.score):
                raise InputError(
                    f"The 'score' parameter of {where} must be a callable x -> scores. "
                    f"Got {type(self.score).__name__}."
                )
            self.score_ = self.score
            return self.fit_scores(
                _one_score_per_point(self.score(x_p), len(x_p), "x_p", where),
                _one_score_per_point(self.score(x_q), len(x_q), "x_q", where),
            )
        frac = check_open_unit(self.train_fraction, "train_fraction", where)
        rng = np.random.default_rng(check_random_seed(self.random_state, "random_state", where))
        ip, iq = rng.permutation(len(x_p)), rng.permutation(len(x_q))
        n_tp, n_tq = int(frac * len(x_p)), int(frac * len(x_q))
        if min(n_tp, n_tq, len(x_p) - n_tp, len(x_q) - n_tq) < 2:
            raise InputError(f"{where} needs at least 2 points per sample on each side of the split.")
        model = self.classifier
        if model is None:
            from sklearn.linear_model import LogisticRegression

            model = LogisticRegression(class_weight="balanced", max_iter=1000)
        else:
            from sklearn.base import clone

            if not hasattr(model, "fit") or not (
                hasattr(model, "decision_function") or hasattr(model, "predict_proba")
            ):
                raise InputError(
                    f"The 'classifier' parameter of {where} must be a scikit-learn classifier "
                    f"(fit, and decision_function or predict_proba). Got {type(model).__name__}."
                )
            model = clone(model)
        x_train = np.vstack([x_p[ip[:n_tp]], x_q[iq[:n_tq]]])
        y_train = np.r_[np.zeros(n_tp), np.ones(n_tq)]
        model.fit(x_train, y_train)
        self.classifier_ = model
        self.score_ = lambda x: _decision_scores(model, np.asarray(x, dtype=np.float64))
        return self.fit_scores(self.score_(x_p[ip[n_tp:]]), self.score_(x_q[iq[n_tq:]]))

    def fit_scores(self, s_p: ArrayLike, s_q: ArrayLike) -> TestBoundary:
        """Calibrate from scores of independent P and Q samples (the score fixed beforehand)."""
        where = self._NAME
        self._check_settings()
        delta = check_open_unit(self.delta, "delta", where)
        s_p = _one_score_per_point(check_samples(s_p, "s_p", where, min_n=2), None, "s_p", where)
        s_q = _one_score_per_point(check_samples(s_q, "s_q", where, min_n=2), None, "s_q", where)
        # random tie-breaking: pooled ranks, so equal scores become a randomised test of F_s
        rng = np.random.default_rng(check_random_seed(self.random_state, "random_state", where))
        pooled = np.r_[s_p, s_q]
        ranks = np.empty(pooled.size)
        ranks[np.lexsort((rng.random(pooled.size), pooled))] = np.arange(pooled.size)
        r_p, r_q = ranks[: s_p.size], ranks[s_p.size :]
        self.n_p_, self.n_q_ = s_p.size, s_q.size
        self.knots_t_, self.knots_v_ = roc_hull(r_p, r_q)
        self.eps_p_ = dkw_epsilon(s_p.size, delta / 2)
        self.eps_q_ = dkw_epsilon(s_q.size, delta / 2)
        self.domain_ = (0.0, 1.0)
        self.ks_ = float(np.max(self.knots_v_ - self.knots_t_))
        if self.band == "cp":
            self.band_t_, self.band_v_ = self._cp_band(r_p, r_q, delta)
        return self

    def _cp_band(self, r_p: NDArray, r_q: NDArray, delta: float) -> tuple[NDArray, NDArray]:
        n, m = r_p.size, r_q.size
        half = np.geomspace(1, max(n / 2, 1), int(self.n_thresholds) // 2)
        ranks = np.unique(np.clip(np.round(np.r_[half, n + 1 - half]), 1, n).astype(int))
        k_thr = ranks.size
        tail = delta / (4 * k_thr)  # two tails on each of the two samples, K thresholds
        thresholds = np.sort(r_p)[::-1][ranks - 1]  # j-th largest P score, j = ranks
        # P mass above the j-th largest of n P scores ~ Beta(j, n + 1 - j)
        fpr_lo = special.betaincinv(ranks, n + 1 - ranks, tail)
        fpr_hi = special.betaincinv(ranks, n + 1 - ranks, 1 - tail)
        k_q = (r_q[None, :] >= thresholds[:, None]).sum(axis=1)
        tpr_lo, tpr_hi = clopper_pearson(k_q, m, 2 * tail)
        tpr_lo, tpr_hi = np.atleast_1d(tpr_lo), np.atleast_1d(tpr_hi)
        # a threshold between c_{j+1} < c <= c_j: FPR >= FPR_j, TPR <= TPR_{j+1}
        xs = np.r_[0.0, fpr_lo]
        ys = np.r_[tpr_hi, 1.0]
        # reflected points (1 - FPR, 1 - TPR) of the decreasing tests: FPR <= FPR_{j+1}, TPR >= TPR_j
        rx = np.r_[1 - fpr_hi, 0.0]
        ry = np.r_[1.0, 1 - tpr_lo]
        hx, hy = _upper_hull(np.r_[xs, rx, 1.0], np.r_[ys, ry, 1.0])
        return hx, np.maximum.accumulate(hy)

    # -- evaluation ---------------------------------------------------------------
    def _upper_hat(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.interp(t, self.knots_t_, self.knots_v_)

    def _lower_hat(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        return 1.0 - np.interp(1.0 - t, self.knots_t_, self.knots_v_)

    def upper(self, t: ArrayLike) -> float | NDArray[np.float64]:
        if getattr(self, "band", None) == "cp" and hasattr(self, "band_t_"):
            t = self._check_t(t, "t", "upper")
            return self._out(np.interp(t, self.band_t_, self.band_v_))
        return super().upper(t)

    def lower(self, t: ArrayLike) -> float | NDArray[np.float64]:
        if getattr(self, "band", None) == "cp" and hasattr(self, "band_t_"):
            t = self._check_t(t, "t", "lower")
            return self._out(1.0 - np.interp(1.0 - t, self.band_t_, self.band_v_))
        return super().lower(t)
