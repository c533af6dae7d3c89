"""The boundary for an RKHS ball, in closed form from the kernel mean embeddings.

Class: ``F = {f : ||f||_H <= 1}`` for a Gaussian kernel ``k(x, y) = exp(-|x - y|^2 / 2h^2)``.
With ``a = mu_P`` and ``b = mu_Q`` (kernel mean embeddings), ``E_P f = <f, a>`` and
``E_Q f = <f, b>``, so the joint range is the image of the unit ball under a linear map to R^2:
the ellipse ``{v : v' G^-1 v <= 1}`` with Gram matrix ``G = [[A, C], [C, B]]``,
``A = |a|^2``, ``B = |b|^2``, ``C = <a, b>``. Its upper arc is

    B(t) = t C / A + sqrt(B - C^2 / A) sqrt(1 - t^2 / A)   for -sqrt(A) <= t <= C / sqrt(B),
    B(t) = sqrt(B)                                          beyond,

attained by ``f = c_a a + c_b b``; the lower arc is ``-B(-t)``; the IPM is the MMD
``sqrt(A + B - 2C)``. Finite-sample correction: ``|a_hat - a|_H <= (1 + sqrt(2 log(1/d))) / sqrt(n)``
(the kernel is bounded by 1; mean bound plus McDiarmid), so ``|<f, a_hat> - <f, a>| <= eps_p``
for every f in the ball at once.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial.distance import cdist, pdist

from trustlab.core.errors import InputError
from trustlab.core.validation import (
    as_float_array,
    check_open_unit,
    check_samples,
    check_scalar,
)
from trustlab.methods.ipb.base import BoundaryEstimator, check_random_seed

__all__ = [
    "KernelBoundary",
    "ellipse_boundary",
    "gaussian_embedding_gram",
    "gaussian_kernel",
    "median_bandwidth",
]


def gaussian_kernel(x: ArrayLike, y: ArrayLike, bandwidth: float) -> NDArray[np.float64]:
    """``k(x_i, y_j) = exp(-|x_i - y_j|^2 / 2h^2)`` for all pairs, ``(n, m)``."""
    where = "gaussian_kernel"
    x = check_samples(x, "x", where)
    y = check_samples(y, "y", where, n_features=x.shape[1])
    h = check_scalar(bandwidth, "bandwidth", where, lo=0.0, closed="neither")
    return _kernel(x, y, h)


def _kernel(x: NDArray, y: NDArray, bandwidth: float) -> NDArray[np.float64]:
    return np.exp(-cdist(x, y, "sqeuclidean") / (2.0 * bandwidth**2))


def median_bandwidth(z: NDArray[np.float64], max_points: int = 1000, seed: int = 0) -> float:
    """The median heuristic: median pairwise distance of (a subsample of) the pooled points."""
    where = "median_bandwidth"
    z = check_samples(z, "z", where, min_n=2)
    max_points = check_scalar(max_points, "max_points", where, kind=int, lo=2)
    seed = check_random_seed(seed, "seed", where)
    if len(z) > max_points:
        z = z[np.random.default_rng(seed).choice(len(z), max_points, replace=False)]
    med = float(np.median(pdist(z)))
    return med if med > 0 else 1.0


def _mean_kernel(x: NDArray, y: NDArray, bandwidth: float, block: int = 2048) -> float:
    total = 0.0
    for s in range(0, len(x), block):
        total += float(_kernel(x[s : s + block], y, bandwidth).sum())
    return total / (len(x) * len(y))


def gaussian_embedding_gram(
    mean_p: ArrayLike, mean_q: ArrayLike, sigma: float, bandwidth: float
) -> NDArray[np.float64]:
    """Exact Gram matrix [[A, C], [C, B]] of the embeddings of N(mean_p, s^2 I), N(mean_q, s^2 I)."""
    where = "gaussian_embedding_gram"
    mp = as_float_array(mean_p, "mean_p", where, ndim=(0, 1)).reshape(-1)
    mq = as_float_array(mean_q, "mean_q", where, ndim=(0, 1)).reshape(-1)
    if mp.shape != mq.shape:
        raise InputError(
            f"The 'mean_p' and 'mean_q' parameters of {where} must have one dimension d. "
            f"Got {mp.size} and {mq.size}."
        )
    sigma = check_scalar(sigma, "sigma", where, lo=0.0)
    bandwidth = check_scalar(bandwidth, "bandwidth", where, lo=0.0, closed="neither")
    d = mp.size
    v = bandwidth**2 + 2 * sigma**2
    scale = (bandwidth**2 / v) ** (d / 2)
    c = scale * np.exp(-float(np.sum((mp - mq) ** 2)) / (2 * v))
    return np.array([[scale, c], [c, scale]])


def ellipse_boundary(t: ArrayLike, gram: NDArray[np.float64]) -> NDArray[np.float64]:
    """Upper boundary of the ellipse range with Gram matrix ``[[A, C], [C, B]]``.

    ``t`` must be finite; beyond ``+-sqrt(A)``, where no function of the ball reaches, the
    boundary is the value at the nearest end (constant, as ``sup{E_Q f : E_P f <= t}`` is).
    """
    where = "ellipse_boundary"
    g = as_float_array(gram, "gram", where, ndim=2)
    if g.shape != (2, 2) or g[0, 1] != g[1, 0]:
        raise InputError(
            f"The 'gram' parameter of {where} must be a symmetric 2 x 2 matrix [[A, C], [C, B]]. "
            f"Got {g.tolist()}."
        )
    a2, c, b2 = float(g[0, 0]), float(g[0, 1]), float(g[1, 1])
    if a2 <= 0 or b2 <= 0 or c * c > a2 * b2 * (1 + 1e-9):
        raise InputError(
            f"The 'gram' parameter of {where} must be a Gram matrix: A > 0, B > 0, C^2 <= AB. "
            f"Got A={a2:g}, B={b2:g}, C={c:g}."
        )
    ra = np.sqrt(a2)
    t = np.clip(as_float_array(t, "t", where, ndim=(0, 1)), -ra, ra)
    perp = np.sqrt(max(b2 - c * c / a2, 0.0))
    arc = t * c / a2 + perp * np.sqrt(np.clip(1.0 - t * t / a2, 0.0, 1.0))
    return np.where(t >= c / np.sqrt(b2), np.sqrt(b2), arc)


class KernelBoundary(BoundaryEstimator):
    """Boundary of the unit ball of a Gaussian-kernel RKHS between P (source) and Q (target).

    Parameters
    ----------
    bandwidth : float or None
        h of the Gaussian kernel; None uses the median heuristic on the pooled sample.
    delta : float
        Miscoverage of the confidence band (embedding error on both samples).
    max_points : int
        Each sample is subsampled to at most this many points for the O(n^2) Gram means;
        the band uses the subsample sizes, so it stays valid.
    random_state : int or None
        Seeds the subsampling and the bandwidth heuristic.
    """

    _NAME = "KernelBoundary"

    def __init__(
        self,
        *,
        bandwidth: float | None = None,
        delta: float = 0.05,
        max_points: int = 5000,
        random_state: int | None = None,
    ) -> None:
        self.bandwidth = bandwidth
        self.delta = delta
        self.max_points = max_points
        self.random_state = random_state

    def fit(self, x_p: ArrayLike, x_q: ArrayLike) -> KernelBoundary:
        """Estimate the Gram matrix of the embeddings (V-statistics) and the band."""
        where = self._NAME
        x_p = check_samples(x_p, "x_p", where, min_n=2)
        x_q = check_samples(x_q, "x_q", where, min_n=2, n_features=x_p.shape[1])
        delta = check_open_unit(self.delta, "delta", where)
        if self.bandwidth is not None:
            check_scalar(self.bandwidth, "bandwidth", where, lo=0.0, closed="neither")
        max_points = check_scalar(self.max_points, "max_points", where, kind=int, lo=2)
        rng = np.random.default_rng(check_random_seed(self.random_state, "random_state", where))
        if len(x_p) > max_points:
            x_p = x_p[rng.choice(len(x_p), max_points, replace=False)]
        if len(x_q) > max_points:
            x_q = x_q[rng.choice(len(x_q), max_points, replace=False)]
        h = self.bandwidth
        if h is None:
            h = median_bandwidth(np.vstack([x_p, x_q]), seed=int(rng.integers(2**31)))
        if not h > 0:
            raise InputError(f"The 'bandwidth' parameter of {where} must be > 0. Got {h}.")
        self.bandwidth_ = float(h)
        self.x_p_, self.x_q_ = x_p, x_q
        a2 = _mean_kernel(x_p, x_p, self.bandwidth_)
        b2 = _mean_kernel(x_q, x_q, self.bandwidth_)
        c = _mean_kernel(x_p, x_q, self.bandwidth_)
        self.gram_ = np.array([[a2, c], [c, b2]])
        self.domain_ = (-float(np.sqrt(a2)), float(np.sqrt(a2)))
        self.eps_p_ = float((1 + np.sqrt(2 * np.log(2 / delta))) / np.sqrt(len(x_p)))
        self.eps_q_ = float((1 + np.sqrt(2 * np.log(2 / delta))) / np.sqrt(len(x_q)))
        return self

    def _value_range(self) -> tuple[float, float]:
        return (-np.inf, np.inf)

    def _t_range(self) -> tuple[float, float]:
        # |E_P f| <= |f|_H |mu_P|_H <= 1 for the unit ball of a kernel bounded by 1; the true
        # range (+-|mu_P|) can exceed the estimated domain_, beyond which the boundary is flat
        return (-1.0, 1.0)

    def _upper_hat(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        return ellipse_boundary(t, self.gram_)

    def _lower_hat(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        return -ellipse_boundary(-t, self.gram_)

    def mmd(self) -> float:
        """The plug-in MMD ``|a_hat - b_hat|_H`` (biased V-statistic), the IPM of the ball."""
        self._check_fitted()
        g = self.gram_
        return float(np.sqrt(max(g[0, 0] + g[1, 1] - 2 * g[0, 1], 0.0)))

    def witness(self, t: float) -> tuple[Callable[[ArrayLike], NDArray[np.float64]], float]:
        """An explicit ``f = c_a a_hat + c_b b_hat`` attaining ``B_hat(t)``; returns (f, |f|_H)."""
        self._check_fitted()
        g = self.gram_
        a2, c, b2 = g[0, 0], g[0, 1], g[1, 1]
        t = check_scalar(t, "t", "KernelBoundary.witness", lo=-1.0, hi=1.0)
        t = float(np.clip(t, *self.domain_))
        if t >= c / np.sqrt(b2):
            c_a, c_b = 0.0, 1.0 / np.sqrt(b2)
        else:
            perp = np.sqrt(max(b2 - c * c / a2, 1e-300))
            c_b = np.sqrt(max(1.0 - t * t / a2, 0.0)) / perp
            c_a = t / a2 - c_b * c / a2
        norm = float(np.sqrt(max(c_a**2 * a2 + 2 * c_a * c_b * c + c_b**2 * b2, 0.0)))
        x_p, x_q, h = self.x_p_, self.x_q_, self.bandwidth_

        def f(x: ArrayLike) -> NDArray[np.float64]:
            x = check_samples(x, "x", "KernelBoundary.witness(...)", n_features=x_p.shape[1])
            return c_a * _kernel(x, x_p, h).mean(axis=1) + c_b * _kernel(x, x_q, h).mean(axis=1)

        return f, norm
