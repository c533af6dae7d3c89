"""Split-conformal reach sets: the learned one (a flow's latent ball) and fixed-shape baselines.

Every reach set has a nonconformity score ``s(y)`` and is calibrated on fresh samples
``y_i = f(x_i)``, ``x_i`` uniform on the input box, to the threshold ``q``: the
``ceil((n + 1)(1 - alpha))``-th smallest score (marginal coverage ``>= 1 - alpha``), or with a
PAC confidence ``delta`` the smallest order statistic whose coverage is ``>= 1 - alpha`` with
probability ``>= 1 - delta`` over the calibration draw (coverage of the k-th order statistic is
Beta(k, n + 1 - k)). The set is ``{y : s(y) <= q}``.

- ``FlowReachSet``: ``s(y) = ||T^{-1}(y)||`` (latent norm through the inverse flow; the set is
  the image of a latent ball, which is what bounded AMS samples) or ``-log p(y)``.
- ``BoxReachSet`` (scaled L-inf), ``EllipsoidReachSet`` (Mahalanobis), ``ZonotopeReachSet``
  (L-inf in PCA coordinates: a parallelotope, i.e. a zonotope with ``d`` generators); each has an
  exact emptiness check against the spec's polytopes (``intersects``).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, special

from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.validation import (
    as_float_array,
    check_open_unit,
    check_samples,
    check_scalar,
)
from trustlab.datasets.vnnlib import VnnlibRegion
from trustlab.methods.flowreach.flow import FlowMatching
from trustlab.stats import conformal_quantile

__all__ = [
    "BoxReachSet",
    "EllipsoidReachSet",
    "FlowReachSet",
    "ZonotopeReachSet",
    "calibrated_threshold",
    "pac_rank",
]


def pac_rank(n: int, alpha: float, delta: float) -> int:
    """Smallest 1-based rank k with ``P(Beta(k, n + 1 - k) < 1 - alpha) <= delta``.

    The k-th smallest of n calibration scores then covers a fresh score with probability
    ``>= 1 - alpha``, with confidence ``>= 1 - delta`` over the calibration sample.
    Raises InputError when even k = n is not enough.
    """
    n = check_scalar(n, "n", "pac_rank", kind=int, lo=1, hi=10**7)
    alpha = check_open_unit(alpha, "alpha", "pac_rank")
    delta = check_open_unit(delta, "delta", "pac_rank")
    ks = np.arange(1, n + 1)
    fail = special.betainc(ks, n + 1 - ks, 1.0 - alpha)  # P(coverage < 1 - alpha)
    ok = np.flatnonzero(fail <= delta)
    if len(ok) == 0:
        need = math.ceil(math.log(delta) / math.log(1 - alpha))
        raise InputError(
            f"Need at least {need} calibration samples for alpha={alpha}, delta={delta}; got {n}."
        )
    return int(ks[ok[0]])


def _outputs(y: object, name: str, where: str, n_cols: int | None = None) -> NDArray[np.float64]:
    """``y`` as a finite float64 matrix (n >= 1, d), or InputError naming the parameter."""
    arr = as_float_array(y, name, where, ndim=2)
    return check_samples(arr, name, where, min_n=1, n_features=n_cols)


def calibrated_threshold(scores: NDArray[np.floating], alpha: float, delta: float | None) -> float:
    """The conformal threshold (marginal when ``delta`` is None, PAC otherwise)."""
    check_open_unit(alpha, "alpha", "calibrated_threshold")
    if delta is not None:
        check_open_unit(delta, "delta", "calibrated_threshold")
    scores = as_float_array(scores, "scores", "calibrated_threshold", ndim=1)
    if delta is None:
        return conformal_quantile(scores, alpha)
    k = pac_rank(len(scores), alpha, delta)
    return float(np.partition(scores, k - 1)[k - 1])


class _ReachSet:
    alpha: float
    delta: float | None

    def score(self, y: NDArray[np.floating]) -> NDArray[np.float64]:  # pragma: no cover
        raise NotImplementedError

    def calibrate(self, y_cal: NDArray[np.floating]) -> _ReachSet:
        """Set the threshold ``q_`` from fresh calibration outputs."""
        self._require_fit("calibrate")
        y_cal = _outputs(y_cal, "y_cal", f"{type(self).__name__}.calibrate", self.dim_)
        self.cal_scores_ = self.score(y_cal)
        self.q_ = calibrated_threshold(self.cal_scores_, self.alpha, self.delta)
        return self

    def _require_fit(self, step: str) -> None:
        if not hasattr(self, "fitted_"):
            raise NotFittedError(f"Call {type(self).__name__}.fit before {step}.")

    def _require_cal(self, step: str) -> None:
        self._require_fit(step)
        if not hasattr(self, "q_"):
            raise NotFittedError(f"Call {type(self).__name__}.calibrate before {step}.")

    def contains(self, y: NDArray[np.floating]) -> NDArray[np.bool_]:
        self._require_cal("contains")
        y = _outputs(y, "y", f"{type(self).__name__}.contains", self.dim_)
        return self.score(y) <= self.q_

    def _check_levels(self) -> None:
        where = type(self).__name__
        check_open_unit(self.alpha, "alpha", where)
        if self.delta is not None:
            check_open_unit(self.delta, "delta", where)


class FlowReachSet(_ReachSet):
    """The learned reach set ``{y : s(y) <= q}`` of a flow-matching model.

    ``score="latent_norm"`` (default): ``s(y) = ||T^{-1}(y)||``, so the set is ``T(B_q)``.
    ``score="nll"``: ``s(y) = -log p(y)`` (a highest-density region; not usable by AMS).
    """

    def __init__(
        self,
        flow: FlowMatching | None = None,
        *,
        alpha: float = 0.01,
        delta: float | None = None,
        score: Literal["latent_norm", "nll"] = "latent_norm",
    ) -> None:
        self.flow = flow
        self.alpha = alpha
        self.delta = delta
        self.score_kind = score

    def fit(self, y_train: NDArray[np.floating]) -> FlowReachSet:
        if self.score_kind not in ("latent_norm", "nll"):
            raise InputError(f"score must be 'latent_norm' or 'nll'. Got {self.score_kind!r}.")
        self._check_levels()
        y_train = _outputs(y_train, "y_train", "FlowReachSet.fit")
        self.flow_ = (self.flow or FlowMatching()).fit(y_train)
        self.fitted_ = True
        return self

    def score(self, y: NDArray[np.floating]) -> NDArray[np.float64]:
        self._require_fit("score")
        if self.score_kind == "nll":
            return self.flow_.neg_log_density(y)
        return np.linalg.norm(self.flow_.encode(y), axis=1)

    @property
    def dim_(self) -> int:
        """Output dimension (the flow's)."""
        return int(self.flow_.dim_)

    @property
    def radius_(self) -> float:
        """Latent ball radius (only for the latent-norm score)."""
        self._require_cal("radius_")
        if self.score_kind != "latent_norm":
            raise InputError("radius_ exists only for score='latent_norm'.")
        return float(self.q_)


# ---------------------------------------------------------------------------- fixed shapes
class _LinearShape(_ReachSet):
    """A set ``{c + L u : ||u||_p <= q}`` with p = inf (box, zonotope) or 2 (ellipsoid)."""

    norm: float = np.inf

    def __init__(self, *, alpha: float = 0.01, delta: float | None = None) -> None:
        self.alpha = alpha
        self.delta = delta

    def _set_frame(self, y: NDArray[np.float64]) -> None:  # pragma: no cover
        raise NotImplementedError

    def fit(self, y_train: NDArray[np.floating]) -> _LinearShape:
        self._check_levels()
        y = _outputs(y_train, "y_train", f"{type(self).__name__}.fit")
        if len(y) < 2:
            raise InputError(f"{type(self).__name__}.fit needs (n >= 2, d) outputs. Got {y.shape}.")
        self.dim_ = y.shape[1]
        self.center_ = y.mean(axis=0)
        self._set_frame(y)
        self.L_inv_ = np.linalg.pinv(self.L_)
        self.fitted_ = True
        return self

    def score(self, y: NDArray[np.floating]) -> NDArray[np.float64]:
        self._require_fit("score")
        u = (np.atleast_2d(np.asarray(y, np.float64)) - self.center_) @ self.L_inv_.T
        return np.linalg.norm(u, ord=self.norm, axis=1)

    def intersects(self, region: VnnlibRegion) -> bool:
        """Exactly: does the calibrated set meet the region's unsafe output set?"""
        self._require_cal("intersects")
        return any(self._meets(poly.A, poly.b) for poly in region.polytopes)

    def _meets(self, A: NDArray[np.float64], b: NDArray[np.float64]) -> bool:
        if len(b) == 0:
            return True
        G = A @ self.L_  # constraints on u: G u <= b - A c
        h = b - A @ self.center_
        d = G.shape[1]
        q = self.q_
        tol = 1e-9 * (1 + np.abs(h).max())
        if self.norm == np.inf:
            res = optimize.linprog(np.zeros(d), A_ub=G, b_ub=h + tol,
                                   bounds=[(-q, q)] * d, method="highs")
            return bool(res.status == 0)
        # ellipsoid: min ||u||^2 s.t. G u <= h ; meets iff the optimum is <= q^2
        res = optimize.minimize(
            lambda u: float(u @ u), np.zeros(d), jac=lambda u: 2 * u, method="SLSQP",
            constraints=[{"type": "ineq", "fun": lambda u: h - G @ u, "jac": lambda u: -G}],
            options={"ftol": 1e-12, "maxiter": 500},
        )
        feasible = bool(np.all(G @ res.x <= h + 1e-7 * (1 + np.abs(h).max())))
        if not feasible:
            lp = optimize.linprog(np.zeros(d), A_ub=G, b_ub=h + tol, bounds=[(None, None)] * d,
                                  method="highs")
            # status 2: the polytope itself is empty; otherwise solver trouble, so answer
            # conservatively ("meets")
            return lp.status != 2
        return bool(np.sqrt(res.fun) <= q * (1 + 1e-9) + 1e-12)


class BoxReachSet(_LinearShape):
    """Axis-aligned box: ``s(y) = max_j |y_j - c_j| / sd_j``."""

    norm = np.inf

    def _set_frame(self, y: NDArray[np.float64]) -> None:
        sd = y.std(axis=0)
        self.L_ = np.diag(np.where(sd > 0, sd, 1.0))


class EllipsoidReachSet(_LinearShape):
    """Ellipsoid: Mahalanobis distance ``s(y) = ||Sigma^{-1/2} (y - c)||``."""

    norm = 2

    def _set_frame(self, y: NDArray[np.float64]) -> None:
        cov = np.cov(y, rowvar=False).reshape(y.shape[1], y.shape[1])
        vals, vecs = np.linalg.eigh(cov)  # a symmetric square root; robust to degenerate outputs
        sd = np.sqrt(np.clip(vals, 0, None))
        self.L_ = vecs * np.maximum(sd, 1e-9 * max(float(sd.max()), 1e-12))


class ZonotopeReachSet(_LinearShape):
    """PCA zonotope (parallelotope): L-inf of the whitened principal coordinates."""

    norm = np.inf

    def _set_frame(self, y: NDArray[np.float64]) -> None:
        cov = np.cov(y, rowvar=False).reshape(y.shape[1], y.shape[1])
        vals, vecs = np.linalg.eigh(cov)
        sd = np.sqrt(np.clip(vals, 0, None))
        sd = np.where(sd > 1e-12 * max(sd.max(), 1e-300), sd, max(sd.max(), 1.0) * 1e-9)
        self.L_ = vecs * sd
