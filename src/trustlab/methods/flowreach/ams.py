"""Bounded adaptive multilevel splitting (AMS) with an exact Poisson confidence bound.

Target: ``p = P(S(Z) >= 0 | ||Z|| <= r)`` for ``Z ~ N(0, I_d)`` (``r = inf``: no ball), where
``S`` is a continuous score (here ``-margin`` of the spec through the flow's decoder).

Algorithm: the parallel, last-particle form of AMS ("moving particles", Walter 2015/2017;
Guyader, Hengartner & Matzner-Løber 2011). Each of ``n`` particles starts from the restricted
law and repeatedly moves to a fresh draw from the law conditioned on ``S > `` its own current
level, until its level reaches 0. With exact conditional draws and continuous ``S``, the number
of levels each particle visits below 0 is Poisson(-log p), independently, so their total ``M``
is Poisson(-n log p):

- ``(1 - 1/n)^M`` is an unbiased estimate of ``p``;
- with ``lambda_lo`` the exact (chi-square) lower ``1 - delta`` Poisson bound for ``M``,
  ``p <= exp(-lambda_lo / n)`` with confidence ``>= 1 - delta``. Stopping early (minimum
  probability ``p_min`` reached, or the round budget spent) only undercounts ``M``, so the
  bound stays valid; it is then simply looser than the estimate would be.

The conditional draws are made by MCMC: a preconditioned Crank–Nicolson proposal
``z' = sqrt(1 - s^2) z + s xi`` (reversible for N(0, I)) accepted iff ``||z'|| <= r`` and
``S(z') > level``, which leaves the restricted, conditioned law invariant. The step ``s`` is
adapted per particle between moves (shrunk when a move accepted nothing). The exactness of the
bound assumes the MCMC mixes; this is the usual AMS assumption and is stated in the docs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from trustlab.core.errors import InputError
from trustlab.core.validation import check_open_unit, check_scalar

__all__ = ["AMSResult", "bounded_ams", "restricted_gaussian", "restricted_tail_exact"]


@dataclass(frozen=True)
class AMSResult:
    """Outcome of bounded AMS; ``upper`` is the certificate's rare-event term."""

    estimate: float  # (1 - 1/n)^M: unbiased when finished, an over-estimate otherwise
    upper: float  # exact (under ideal mixing) 1 - delta upper confidence bound
    lower: float  # 1 - delta lower bound (0 unless every particle finished)
    n_levels: int  # M
    n_particles: int
    n_crossed: int  # particles that reached S >= 0
    finished: bool  # every particle reached S >= 0 (so ``estimate`` is unbiased)
    rounds: int
    n_score_evals: int
    acceptance: float
    level_history: list[float] = field(default_factory=list)  # median level per round
    estimate_history: list[float] = field(default_factory=list)


def restricted_gaussian(
    n: int, dim: int, radius: float, rng: np.random.Generator
) -> NDArray[np.float64]:
    """``n`` draws of N(0, I_dim) conditioned on ``||z|| <= radius`` (exact)."""
    n = check_scalar(n, "n", "restricted_gaussian", kind=int, lo=0, hi=10**8)
    dim = check_scalar(dim, "dim", "restricted_gaussian", kind=int, lo=1, hi=10**6)
    if isinstance(radius, bool) or not isinstance(radius, int | float) or not radius > 0:
        raise InputError(f"The 'radius' parameter of restricted_gaussian must be a positive "
                         f"number (inf: no ball). Got {radius!r}.")
    if not math.isfinite(radius):
        return rng.standard_normal((n, dim))
    direction = rng.standard_normal((n, dim))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    # radius * radius (not radius**2): a huge radius gives inf, not OverflowError.
    cap = stats.chi2.cdf(radius * radius, dim)
    u = rng.random(n) * cap
    r = np.sqrt(stats.chi2.ppf(u, dim))
    return direction * r[:, None]


def restricted_tail_exact(threshold: float, dim: int, radius: float = math.inf) -> float:
    """``P(Z_1 >= threshold | ||Z|| <= radius)`` for ``Z ~ N(0, I_dim)`` (for tests).

    Numerically integrates ``phi(u) F_{chi2(dim-1)}(r^2 - u^2)`` over ``u in [t, r]``.
    """
    from scipy import integrate

    dim = check_scalar(dim, "dim", "restricted_tail_exact", kind=int, lo=1, hi=10**6)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or \
            math.isnan(threshold):
        raise InputError(f"The 'threshold' parameter of restricted_tail_exact must be a number. "
                         f"Got {threshold!r}.")
    if isinstance(radius, bool) or not isinstance(radius, int | float) or not radius > 0:
        raise InputError(f"The 'radius' parameter of restricted_tail_exact must be a positive "
                         f"number (inf: no ball). Got {radius!r}.")
    if not math.isfinite(radius) or stats.chi2.sf(radius * radius, dim) == 0.0:
        # No ball, or one whose outside has probability below the smallest float:
        # conditioning on it changes nothing representable.
        return float(stats.norm.sf(threshold))
    if threshold >= radius:
        return 0.0
    if dim == 1:
        return float((stats.norm.cdf(radius) - stats.norm.cdf(threshold))
                     / (2 * stats.norm.cdf(radius) - 1))

    def integrand(u: float) -> float:
        return float(stats.norm.pdf(u) * stats.chi2.cdf(radius**2 - u**2, dim - 1))

    lo = max(threshold, -radius)
    num, _ = integrate.quad(integrand, lo, radius, epsabs=1e-15, epsrel=1e-10, limit=200)
    return float(num / stats.chi2.cdf(radius**2, dim))


def poisson_lower(m: int, delta: float) -> float:
    """Exact one-sided lower ``1 - delta`` confidence bound on a Poisson mean from count m."""
    return 0.0 if m == 0 else float(stats.chi2.ppf(delta, 2 * m) / 2)


def poisson_upper(m: int, delta: float) -> float:
    return float(stats.chi2.ppf(1 - delta, 2 * m + 2) / 2)


def bounded_ams(
    score: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    dim: int,
    rng: np.random.Generator,
    *,
    radius: float = math.inf,
    n_particles: int = 64,
    p_min: float = 1e-4,
    max_rounds: int = 100,
    n_mcmc: int = 6,
    step: float = 0.5,
    delta: float = 0.05,
    clone: bool = True,
) -> AMSResult:
    """Estimate and bound ``P(score(Z) >= 0 | ||Z|| <= radius)``, ``Z ~ N(0, I_dim)``.

    ``score`` maps a batch (k, dim) to k floats. Stops when every particle has reached 0,
    when the estimate falls below ``p_min`` (``M >= n log(1/p_min)``), or after ``max_rounds``
    rounds of ``n_mcmc`` MCMC steps. ``delta`` is the miscoverage of the upper bound.
    """
    for name, v, lo in (("n_particles", n_particles, 2), ("dim", dim, 1), ("n_mcmc", n_mcmc, 1),
                        ("max_rounds", max_rounds, 0)):
        check_scalar(v, name, "bounded_ams", kind=int, lo=lo, hi=10**7)
    check_open_unit(p_min, "p_min", "bounded_ams")
    check_open_unit(delta, "delta", "bounded_ams")
    check_open_unit(step, "step", "bounded_ams")
    if not isinstance(radius, int | float) or not radius > 0:
        raise InputError(f"The 'radius' parameter of bounded_ams must be a positive number (inf: "
                         f"no ball). Got {radius!r}.")
    n = n_particles
    z = restricted_gaussian(n, dim, radius, rng)
    s = np.asarray(score(z), dtype=np.float64)
    if s.shape != (n,) or np.isnan(s).any():
        raise InputError(f"The 'score' parameter of bounded_ams must map a (k, dim) batch to k "
                         f"non-NaN floats. Got shape {s.shape} for k = {n}.")
    evals = n
    counts = (s < 0).astype(np.int64)
    active = s < 0
    sigma = np.full(n, float(step))
    m_stop = n * math.log(1.0 / p_min)
    accepted = proposed = 0
    rounds = 0
    level_hist: list[float] = []
    est_hist: list[float] = []
    while active.any() and rounds < max_rounds and counts.sum() < m_stop:
        rounds += 1
        idx = np.flatnonzero(active)
        zc, level, sc = z[idx].copy(), s[idx].copy(), s[idx].copy()
        if clone:
            # AMS's cloning step: start each move from a particle already above the level
            order = np.argsort(s)
            sorted_s = s[order]
            first_above = np.searchsorted(sorted_s, level, side="right")
            has = first_above < n
            pick = first_above + (rng.random(len(idx)) * (n - first_above)).astype(int)
            src = order[np.minimum(pick, n - 1)]
            zc[has], sc[has] = z[src[has]], s[src[has]]
        sig = sigma[idx]
        # a move counts only after an accepted MCMC step: a bare clone would duplicate another
        # particle and make the particles (and the Poisson count of levels) dependent
        moved = np.zeros(len(idx), dtype=bool)
        n_acc = np.zeros(len(idx))
        for _ in range(n_mcmc):
            prop = np.sqrt(1 - sig[:, None] ** 2) * zc + sig[:, None] * rng.standard_normal(
                zc.shape
            )
            inside = np.linalg.norm(prop, axis=1) <= radius
            sp = np.full(len(idx), -np.inf)
            if inside.any():
                sp[inside] = score(prop[inside])
                evals += int(inside.sum())
            acc = inside & (sp > level)
            zc[acc], sc[acc] = prop[acc], sp[acc]
            moved |= acc
            n_acc += acc
            proposed += len(idx)
            accepted += int(acc.sum())
        rate = n_acc / n_mcmc
        sig = np.where(rate == 0, sig * 0.5, np.where(rate > 0.4, np.minimum(sig * 1.5, 1.0), sig))
        sigma[idx] = sig
        z[idx[moved]], s[idx[moved]] = zc[moved], sc[moved]
        below = moved & (sc < 0)
        counts[idx[below]] += 1
        active[idx[moved & (sc >= 0)]] = False
        active[idx[sig < 1e-7]] = False  # stuck at a local maximum of S: stop (undercounts M)
        level_hist.append(float(np.median(s)))
        est_hist.append(float((1 - 1 / n) ** counts.sum()))
    m = int(counts.sum())
    crossed = int(np.sum(s >= 0))
    finished = crossed == n
    upper = min(1.0, math.exp(-poisson_lower(m, delta) / n))
    lower = math.exp(-poisson_upper(m, delta) / n) if finished else 0.0
    return AMSResult(
        estimate=float((1 - 1 / n) ** m),
        upper=float(upper),
        lower=float(lower),
        n_levels=m,
        n_particles=n,
        n_crossed=crossed,
        finished=finished,
        rounds=rounds,
        n_score_evals=evals,
        acceptance=accepted / proposed if proposed else 0.0,
        level_history=level_hist,
        estimate_history=est_hist,
    )
