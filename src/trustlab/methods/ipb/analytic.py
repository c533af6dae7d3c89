"""Closed forms and analytic outer bounds for the boundary of all tests ([0, 1]-valued f).

* ``gaussian_roc``: the exact boundary between N(0, I) and N(mu, I) -- the Neyman-Pearson /
  ROC trade-off ``B(t) = Phi(Phi^-1(t) + |mu|)``.
* ``gaussian_hockey_stick``: ``H_gamma(Q || P) = sup_A Q(A) - gamma P(A)``, the intercept of the
  boundary's supporting line of slope ``gamma``; ``hockey_stick_envelope`` rebuilds the boundary
  as ``inf_gamma gamma t + H_gamma``.
* ``fdiv_boundary``: the data-processing outer bound. A test pushes P and Q to Bernoulli(t)
  and Bernoulli(q), so ``D(Bern(q) || Bern(t)) <= D(Q || P)`` for every f-divergence D; the
  boundary is bounded by the largest such ``q`` (binary-divergence inversion; for KL it is
  also what Donsker-Varadhan gives after optimising over the tilt).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special, stats

from trustlab.core.errors import InputError
from trustlab.core.validation import as_float_array, check_choice
from trustlab.methods.ipb.base import check_in_range

__all__ = [
    "Divergence",
    "binary_divergence",
    "fdiv_boundary",
    "fdiv_lower_boundary",
    "gaussian_divergence",
    "gaussian_hockey_stick",
    "gaussian_roc",
    "hockey_stick_envelope",
]

Divergence = Literal["kl", "reverse_kl", "hellinger", "chi2", "tv"]
_DIVERGENCES = ("kl", "reverse_kl", "hellinger", "chi2", "tv")


def _out(x: NDArray[np.float64]) -> float | NDArray[np.float64]:
    return float(x) if np.ndim(x) == 0 else x


def _finite(value: float, name: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise InputError(f"The '{name}' parameter of {where} must be a number. Got {value!r}.")
    if not np.isfinite(value):
        raise InputError(f"The '{name}' parameter of {where} must be finite. Got {value}.")
    return float(value)


def _divergence_value(value: float, divergence: str, where: str) -> float:
    if divergence not in _DIVERGENCES:
        raise InputError(
            f"The 'divergence' parameter of {where} must be one of {_DIVERGENCES}. Got {divergence!r}."
        )
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise InputError(f"The 'value' parameter of {where} must be a number. Got {value!r}.")
    if not float(value) >= 0:  # NaN fails too; +inf is allowed (the bound is then trivial)
        raise InputError(f"The 'value' parameter of {where} must be >= 0. Got {value}.")
    return float(value)


def gaussian_roc(t: ArrayLike, mu: float) -> float | NDArray[np.float64]:
    """Exact upper boundary of all tests between P = N(0, I) and Q = N(mu, I), ``mu = |mean shift|``.

    ``B(t) = Phi(Phi^-1(t) + mu)``; the lower boundary is ``Phi(Phi^-1(t) - mu)``
    (pass ``-mu``). The IPM (total variation) is ``2 Phi(mu / 2) - 1``.
    """
    t = check_in_range(t, "t", "gaussian_roc")
    mu = _finite(mu, "mu", "gaussian_roc")
    return _out(special.ndtr(special.ndtri(t) + mu))


def gaussian_hockey_stick(gamma: ArrayLike, mu: float) -> float | NDArray[np.float64]:
    """``H_gamma(Q || P)`` for P = N(0, 1), Q = N(mu, 1), mu > 0, gamma > 0 (Gaussian-DP formula)."""
    gamma = as_float_array(gamma, "gamma", "gaussian_hockey_stick", ndim=(0, 1))
    mu = _finite(mu, "mu", "gaussian_hockey_stick")
    if not np.all(np.isfinite(gamma)) or np.any(gamma <= 0) or mu <= 0:
        raise InputError(
            "The 'gamma' and 'mu' parameters of gaussian_hockey_stick must be finite and > 0. "
            f"Got mu={mu:g} and gamma in [{np.min(gamma):g}, {np.max(gamma):g}]."
        )
    c = np.log(gamma) / mu
    return _out(special.ndtr(mu / 2 - c) - gamma * special.ndtr(-mu / 2 - c))


def hockey_stick_envelope(
    t: ArrayLike, gammas: ArrayLike, h: ArrayLike
) -> float | NDArray[np.float64]:
    """``min_k gamma_k t + H_k``: the envelope of supporting lines, an outer bound of ``B(t)``."""
    where = "hockey_stick_envelope"
    t = check_in_range(t, "t", where)
    gammas = as_float_array(gammas, "gammas", where, ndim=1)
    h = as_float_array(h, "h", where, ndim=1)
    if gammas.ndim != 1 or gammas.shape != h.shape or gammas.size == 0:
        raise InputError(
            f"The 'gammas' and 'h' parameters of {where} must be 1-D arrays of one length. "
            f"Got shapes {gammas.shape} and {h.shape}."
        )
    if not (np.all(np.isfinite(gammas)) and np.all(np.isfinite(h)) and np.all(gammas > 0)):
        raise InputError(f"The 'gammas' (> 0) and 'h' parameters of {where} must be finite.")
    lines = np.multiply.outer(t, gammas) + h
    return _out(np.minimum(np.min(lines, axis=-1), 1.0))


def binary_divergence(
    q: ArrayLike, t: ArrayLike, divergence: Divergence = "kl"
) -> float | NDArray[np.float64]:
    """``D(Bern(q) || Bern(t))`` with ``D(Q || P) = E_P phi(dQ/dP)``; ``q`` plays Q, ``t`` plays P.

    ``kl``: KL(Q||P); ``reverse_kl``: KL(P||Q); ``hellinger``: ``int (sqrt dQ - sqrt dP)^2``
    (no 1/2); ``chi2``: chi^2(Q||P); ``tv``: total variation.
    """
    check_choice(divergence, "divergence", _DIVERGENCES, "binary_divergence")
    q = check_in_range(q, "q", "binary_divergence")
    t = check_in_range(t, "t", "binary_divergence")
    try:
        np.broadcast_shapes(q.shape, t.shape)
    except ValueError:
        raise InputError(
            "The 'q' and 't' parameters of binary_divergence must broadcast together. "
            f"Got shapes {q.shape} and {t.shape}."
        ) from None
    if divergence == "kl":
        d = special.rel_entr(q, t) + special.rel_entr(1 - q, 1 - t)
    elif divergence == "reverse_kl":
        d = special.rel_entr(t, q) + special.rel_entr(1 - t, 1 - q)
    elif divergence == "hellinger":
        d = (np.sqrt(q) - np.sqrt(t)) ** 2 + (np.sqrt(1 - q) - np.sqrt(1 - t)) ** 2
    elif divergence == "chi2":
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.where(q == t, 0.0, (q - t) ** 2 / (t * (1 - t)))
        d = np.nan_to_num(d, nan=np.inf)
    elif divergence == "tv":
        d = np.abs(q - t)
    else:
        raise InputError(f"The 'divergence' parameter must be one of {_DIVERGENCES}. Got {divergence!r}.")
    return _out(d)


def gaussian_divergence(mu: float, divergence: Divergence = "kl") -> float:
    """``D(N(mu, I) || N(0, I))`` for the divergences of ``binary_divergence``."""
    check_choice(divergence, "divergence", _DIVERGENCES, "gaussian_divergence")
    mu = abs(_finite(mu, "mu", "gaussian_divergence"))
    values = {
        "kl": mu**2 / 2,
        "reverse_kl": mu**2 / 2,
        "hellinger": 2 * (1 - np.exp(-(mu**2) / 8)),
        "chi2": float(np.expm1(mu**2)),
        "tv": 2 * stats.norm.cdf(mu / 2) - 1,
    }
    if divergence not in values:
        raise InputError(f"The 'divergence' parameter must be one of {_DIVERGENCES}. Got {divergence!r}.")
    return float(values[divergence])


def _invert(t: float, value: float, divergence: Divergence, upper: bool) -> float:
    end = 1.0 if upper else 0.0
    if float(binary_divergence(end, t, divergence)) <= value:
        return end

    def excess(q: float) -> float:
        return float(binary_divergence(q, t, divergence)) - value

    return float(optimize.brentq(excess, *((t, end) if upper else (end, t)), xtol=1e-15))


def fdiv_boundary(
    t: ArrayLike, value: float, divergence: Divergence = "kl"
) -> float | NDArray[np.float64]:
    """Outer bound on the test boundary from ``D(Q || P) <= value``: ``max{q : D(q || t) <= value}``."""
    value = _divergence_value(value, divergence, "fdiv_boundary")
    t = check_in_range(t, "t", "fdiv_boundary")
    res = np.vectorize(lambda s: _invert(float(s), value, divergence, True))(t)
    return _out(np.asarray(res, dtype=np.float64))


def fdiv_lower_boundary(
    t: ArrayLike, value: float, divergence: Divergence = "kl"
) -> float | NDArray[np.float64]:
    """Outer bound on the lower boundary: ``min{q : D(q || t) <= value}``."""
    value = _divergence_value(value, divergence, "fdiv_lower_boundary")
    t = check_in_range(t, "t", "fdiv_lower_boundary")
    res = np.vectorize(lambda s: _invert(float(s), value, divergence, False))(t)
    return _out(np.asarray(res, dtype=np.float64))
