"""The boundary for bounded Lipschitz functions, by linear programming on the pooled sample.

Class: ``F_L = {f : X -> [0, 1], |f(x) - f(y)| <= L |x - y|}``. Between empirical measures the
boundary ``B_hat(t) = max{mean_Q f : mean_P f <= t, f in F_L}`` is a linear program in the
values of f on the pooled points (any feasible values extend to all of X by McShane's formula
``min(1, min_i f_i + L |x - z_i|)``, so the LP is exact). Its dual multiplier on the
``mean_P f <= t`` row is the slope ``lambda`` of a supporting line ``B_hat <= lambda t + h``;
the boundary is evaluated as the envelope of those lines (an upper bound between grid points,
exact on them). The slope-1 line is the Kantorovich-Rubinstein dual with a bound constraint:
the bounded-Lipschitz IPM. Without the bound (``ipm_lp(bounded=False)``) the class is
invariant to constants, its joint range is a strip, and the boundary collapses to the IPM line
``t + L W1`` -- the [0, 1] bound is what makes the boundary non-linear.

Constraints on all pairs are exact; in one dimension the sorted chain is exact too. For large
samples in several dimensions a k-nearest-neighbour graph keeps only some pairs: the feasible
set grows, so the value can only go up -- still a valid upper bound.

Finite-sample correction: ``sup_f |E_P f - E_Pn f| <= 2 R_n + 3 sqrt(log(2/d)/2n)`` (Bartlett and
Mendelson 2002), with the empirical Rademacher complexity ``R_n`` computed by the same LP
(Monte Carlo over signs, plus a McDiarmid term for the Monte Carlo error).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, sparse

from trustlab.core.errors import InputError, SolverError
from trustlab.core.validation import (
    as_float_array,
    check_choice,
    check_open_unit,
    check_samples,
    check_scalar,
)
from trustlab.methods.ipb.base import BoundaryEstimator, check_random_seed
from trustlab.stats import check_random_state

__all__ = ["LipschitzBoundary", "lipschitz_edges", "lipschitz_lp"]

_EXACT_LIMIT = 400  # all pairs up to this many pooled points


def lipschitz_edges(
    z: NDArray[np.float64], neighbors: int | None = None
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """Pairs (i, j, |z_i - z_j|) whose Lipschitz constraints the LP enforces.

    1-D: the sorted chain (exact). Otherwise all pairs when ``neighbors`` is None, else the
    symmetrised k-nearest-neighbour graph (a relaxation: values can only go up).
    """
    z = check_samples(z, "z", "lipschitz_edges", min_n=2)
    if neighbors is not None:
        neighbors = check_scalar(neighbors, "neighbors", "lipschitz_edges", kind=int, lo=1)
    return _edges(z, neighbors)


def _edges(
    z: NDArray[np.float64], neighbors: int | None
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    n = z.shape[0]
    if z.shape[1] == 1:
        order = np.argsort(z[:, 0], kind="stable")
        i, j = order[:-1], order[1:]
    elif neighbors is None:
        i, j = np.triu_indices(n, k=1)
    else:
        from sklearn.neighbors import NearestNeighbors

        k = min(int(neighbors) + 1, n)
        idx = NearestNeighbors(n_neighbors=k).fit(z).kneighbors(z, return_distance=False)
        i = np.repeat(np.arange(n), k - 1)
        j = idx[:, 1:].ravel()
        a, b = np.minimum(i, j), np.maximum(i, j)
        pairs = np.unique(np.stack([a, b], axis=1), axis=0)
        i, j = pairs[:, 0], pairs[:, 1]
    d = np.linalg.norm(z[i] - z[j], axis=1)
    return i.astype(np.int64), j.astype(np.int64), d


def _edge_matrix(n_var: int, i: NDArray, j: NDArray) -> sparse.csr_matrix:
    e = i.size
    rows = np.r_[np.arange(e), np.arange(e), e + np.arange(e), e + np.arange(e)]
    cols = np.r_[i, j, j, i]
    vals = np.r_[np.ones(e), -np.ones(e), np.ones(e), -np.ones(e)]
    return sparse.csr_matrix((vals, (rows, cols)), shape=(2 * e, n_var))


def lipschitz_lp(
    c: NDArray[np.float64],
    edges: tuple[NDArray, NDArray, NDArray],
    lipschitz: float,
    *,
    extra_row: NDArray[np.float64] | None = None,
    extra_rhs: float = 0.0,
    bounded: bool = True,
) -> tuple[float, NDArray[np.float64], float]:
    """``max c.f`` over Lipschitz values f (in [0, 1] if ``bounded``), optionally ``row.f <= rhs``.

    Returns (value, f, multiplier of the extra row, >= 0). Solved with HiGHS.
    """
    where = "lipschitz_lp"
    c = as_float_array(c, "c", where, ndim=1)
    if not isinstance(edges, tuple | list) or len(edges) != 3:
        raise InputError(
            f"The 'edges' parameter of {where} must be (i, j, distance) as lipschitz_edges "
            "returns."
        )
    i = as_float_array(edges[0], "edges[0]", where, ndim=1, allow_empty=True)
    j = as_float_array(edges[1], "edges[1]", where, ndim=1, allow_empty=True)
    d = as_float_array(edges[2], "edges[2]", where, ndim=1, allow_empty=True)
    if not (i.shape == j.shape == d.shape) or np.any(d < 0):
        raise InputError(f"The 'edges' of {where} must be three arrays of one length, distances >= 0.")
    for name, idx in (("i", i), ("j", j)):
        if idx.size and (np.any(idx != np.round(idx)) or idx.min() < 0 or idx.max() >= c.size):
            raise InputError(f"The '{name}' indices of {where}'s edges must lie in [0, {c.size}).")
    i, j = i.astype(np.int64), j.astype(np.int64)
    lipschitz = check_scalar(lipschitz, "lipschitz", where, lo=0.0, closed="neither")
    if extra_row is not None:
        extra_row = as_float_array(extra_row, "extra_row", where, ndim=1)
        if extra_row.shape != c.shape:
            raise InputError(
                f"The 'extra_row' parameter of {where} must have {c.size} entries like c. "
                f"Got {extra_row.size}."
            )
        extra_rhs = check_scalar(extra_rhs, "extra_rhs", where)
    return _lp(c, (i, j, d), lipschitz, extra_row=extra_row, extra_rhs=extra_rhs, bounded=bounded)


def _lp(
    c: NDArray[np.float64],
    edges: tuple[NDArray, NDArray, NDArray],
    lipschitz: float,
    *,
    extra_row: NDArray[np.float64] | None = None,
    extra_rhs: float = 0.0,
    bounded: bool = True,
) -> tuple[float, NDArray[np.float64], float]:
    i, j, d = edges
    n_var = c.size
    a_ub = _edge_matrix(n_var, i, j)
    b_ub = np.r_[lipschitz * d, lipschitz * d]
    if extra_row is not None:
        a_ub = sparse.vstack([sparse.csr_matrix(extra_row[None, :]), a_ub]).tocsr()
        b_ub = np.r_[extra_rhs, b_ub]
    if bounded:
        bounds: list[tuple[float | None, float | None]] | tuple = (0.0, 1.0)
    else:  # the value is invariant to constants: pin the first point
        bounds = [(0.0, 0.0)] + [(None, None)] * (n_var - 1)
    res = optimize.linprog(-c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0:
        raise SolverError(f"The Lipschitz boundary LP failed (HiGHS status {res.status}: {res.message}).")
    mult = -float(res.ineqlin.marginals[0]) if extra_row is not None else 0.0
    return -float(res.fun), np.asarray(res.x), max(mult, 0.0)


class LipschitzBoundary(BoundaryEstimator):
    """Boundary of [0, 1]-valued L-Lipschitz functions between P (source) and Q (target).

    Parameters
    ----------
    lipschitz : float
        L, the Lipschitz constant of the class (Euclidean distance).
    delta : float
        Miscoverage of the confidence band (Rademacher correction on both samples).
    n_grid : int
        Number of source values t at which the LP is solved (denser towards 0 and 1).
    neighbors : int or None
        k of the nearest-neighbour relaxation; None: all pairs up to 400 pooled points,
        else k = 10. Ignored in one dimension (the sorted chain is exact).
    n_rademacher : int
        Sign draws for the empirical Rademacher complexity; 0 skips the band (eps = nan).
    random_state : int or None
        Seeds the sign draws.
    """

    _NAME = "LipschitzBoundary"

    def __init__(
        self,
        *,
        lipschitz: float = 1.0,
        delta: float = 0.05,
        n_grid: int = 25,
        neighbors: int | None = None,
        n_rademacher: int = 8,
        random_state: int | None = None,
    ) -> None:
        self.lipschitz = lipschitz
        self.delta = delta
        self.n_grid = n_grid
        self.neighbors = neighbors
        self.n_rademacher = n_rademacher
        self.random_state = random_state

    def _neighbors_for(self, n: int) -> int | None:
        if self.neighbors is not None:
            return int(check_scalar(self.neighbors, "neighbors", self._NAME, kind=int, lo=1))
        return None if n <= _EXACT_LIMIT else 10

    def fit(self, x_p: ArrayLike, x_q: ArrayLike) -> LipschitzBoundary:
        """Solve the LP on a grid of t and compute the finite-sample correction."""
        where = self._NAME
        x_p = check_samples(x_p, "x_p", where, min_n=2)
        x_q = check_samples(x_q, "x_q", where, min_n=2, n_features=x_p.shape[1])
        lip = check_scalar(self.lipschitz, "lipschitz", where, lo=0.0, closed="neither")
        n_grid = check_scalar(self.n_grid, "n_grid", where, kind=int, lo=3)
        if self.neighbors is not None:
            check_scalar(self.neighbors, "neighbors", where, kind=int, lo=1)
        n_rad = check_scalar(self.n_rademacher, "n_rademacher", where, kind=int, lo=0)
        seed = check_random_seed(self.random_state, "random_state", where)
        delta = check_open_unit(self.delta, "delta", where)
        n, m = len(x_p), len(x_q)
        self.points_ = np.vstack([x_p, x_q])
        self.n_p_, self.n_q_ = n, m
        self.edges_ = _edges(self.points_, self._neighbors_for(n + m))
        self.mean_p_ = np.r_[np.full(n, 1.0 / n), np.zeros(m)]
        self.mean_q_ = np.r_[np.zeros(n), np.full(m, 1.0 / m)]
        half = np.geomspace(1e-3, 0.5, max((n_grid - 2) // 2, 1))
        self.grid_t_ = np.unique(np.r_[0.0, half, 1.0 - half, 1.0])
        values, slopes, witnesses = [], [], []
        for t in self.grid_t_:
            v, f, lam = _lp(self.mean_q_, self.edges_, lip, extra_row=self.mean_p_, extra_rhs=t)
            values.append(v)
            slopes.append(lam)
            witnesses.append(f)
        # the slope-1 supporting line: the bounded-Lipschitz IPM (Kantorovich-Rubinstein dual)
        ipm_value, _, _ = _lp(self.mean_q_ - self.mean_p_, self.edges_, float(self.lipschitz))
        self.ipm_lp_ = ipm_value
        self.grid_v_ = np.asarray(values)
        self.witness_values_ = np.asarray(witnesses)
        self.line_slopes_ = np.r_[slopes, 1.0]
        self.line_intercepts_ = np.r_[self.grid_v_ - np.asarray(slopes) * self.grid_t_, ipm_value]
        self.domain_ = (0.0, 1.0)
        if n_rad > 0:
            rng = np.random.default_rng(seed)
            self.eps_p_ = self._uniform_deviation(x_p, delta / 2, rng)
            self.eps_q_ = self._uniform_deviation(x_q, delta / 2, rng)
        else:
            self.eps_p_ = self.eps_q_ = float("nan")
        return self

    def rademacher(self, x: ArrayLike, rng: np.random.Generator | int | None) -> NDArray[np.float64]:
        """``sup_f (1/n) sum sigma_i f(x_i)`` for ``n_rademacher`` sign draws (one LP each)."""
        where = "LipschitzBoundary.rademacher"
        check_scalar(self.lipschitz, "lipschitz", where, lo=0.0, closed="neither")
        n_rad = check_scalar(self.n_rademacher, "n_rademacher", where, kind=int, lo=0)
        x = check_samples(x, "x", where, min_n=2)
        rng = check_random_state(rng, "rng", where)
        n = len(x)
        edges = _edges(x, self._neighbors_for(n))
        sups = []
        for _ in range(n_rad):
            sigma = rng.choice([-1.0, 1.0], size=n) / n
            sups.append(_lp(sigma, edges, float(self.lipschitz))[0])
        return np.asarray(sups)

    def _check_band(self) -> None:
        if not np.isfinite(self.eps_p_):
            raise InputError(
                "This LipschitzBoundary was fit with n_rademacher=0, so it has no confidence "
                "band; use boundary()/lower_boundary(), or refit with n_rademacher >= 1."
            )

    def upper(self, t: ArrayLike) -> float | NDArray[np.float64]:
        self._check_fitted()
        self._check_band()
        return super().upper(t)

    def lower(self, t: ArrayLike) -> float | NDArray[np.float64]:
        self._check_fitted()
        self._check_band()
        return super().lower(t)

    def _uniform_deviation(self, x: NDArray, delta: float, rng: np.random.Generator) -> float:
        n, k = len(x), int(self.n_rademacher)
        r_hat = float(np.mean(self.rademacher(x, rng)))
        r_bound = r_hat + np.sqrt(2 * np.log(2 / delta) / (n * k))  # Monte Carlo, delta/2
        return float(2 * r_bound + 3 * np.sqrt(np.log(4 / delta) / (2 * n)))  # B-M, delta/2

    # -- evaluation ---------------------------------------------------------------
    def _upper_hat(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        lines = np.multiply.outer(t, self.line_slopes_) + self.line_intercepts_
        return np.minimum(np.min(lines, axis=-1), 1.0)

    def _lower_hat(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        return 1.0 - self._upper_hat(1.0 - t)

    def witness(self, t: float) -> Callable[[ArrayLike], NDArray[np.float64]]:
        """An explicit f in F_L attaining ``B_hat`` at the grid value of t nearest below ``t``.

        The McShane extension of the LP solution, clipped to [0, 1]; it is L-Lipschitz on all
        of X and agrees with the LP values on the pooled points (exact constraints).
        """
        self._check_fitted()
        t = check_scalar(t, "t", "LipschitzBoundary.witness", lo=0.0, hi=1.0)
        k = int(np.searchsorted(self.grid_t_, t, side="right") - 1)
        k = max(k, 0)
        values, z, lip = self.witness_values_[k], self.points_, float(self.lipschitz)

        def f(x: ArrayLike) -> NDArray[np.float64]:
            x = check_samples(x, "x", "LipschitzBoundary.witness(...)", n_features=z.shape[1])
            dist = np.linalg.norm(x[:, None, :] - z[None, :, :], axis=-1)
            return np.clip(np.min(values[None, :] + lip * dist, axis=1), 0.0, 1.0)

        return f

    def ipm_lp(self, *, bounded: bool = True) -> float:
        """The IPM solved directly: bounded-Lipschitz (default) or ``L * W1`` (``bounded=False``)."""
        self._check_fitted()
        check_choice(bounded, "bounded", (True, False), "LipschitzBoundary.ipm_lp")
        if bounded:
            return self.ipm_lp_
        edges = self.edges_
        if self.points_.shape[1] > 1 and len(edges[0]) < self.points_.shape[0] * (self.points_.shape[0] - 1) // 2:
            raise InputError("ipm_lp(bounded=False) needs exact (all-pairs) constraints; set neighbors=None.")
        return _lp(self.mean_q_ - self.mean_p_, edges, float(self.lipschitz), bounded=False)[0]
