"""Distribution pairs with known truth for the three applications, and the bound comparison.

* ``MixtureShift``: P and Q are isotropic Gaussian mixtures; the failure of interest is a
  half-space ``1{u.x > c}``, so both rates are exact normal CDFs and the log density ratio is
  exact. Constructors:
  - ``gaussian_shift`` (judge-free performance estimation under covariate shift),
  - ``tilted_policy`` (alignment: the KL-regularised fine-tuned policy ``Q ∝ P exp(r / beta)``
    of a reference policy P that has a rare harmful mode; a linear reward tilts every
    component, so Q is again a mixture and ``KL(Q || P)`` is known),
  - ``rare_group`` (fairness: a group of share ``pi`` inside the population mixture).
* ``DigitsGenerator``: the realistic case, a class-conditional generative model (one Gaussian
  mixture per digit, fitted on PCA features of scikit-learn's bundled digits) judged by a
  logistic-regression judge; a sample fails when the judge's probability of the intended
  digit is below a threshold. Truths are Monte Carlo estimates on large generated samples.
* ``compare_bounds``: the IPB, IPM and binomial-only intervals for one target rate;
  ``compare_gap_bounds``: the same three routes for a gap ``E_Q f - E_P f`` (fairness: a
  group's failure rate minus the population's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special

from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.validation import (
    as_float_array,
    check_choice,
    check_labels,
    check_samples,
    check_scalar,
)
from trustlab.datasets.digits import load_digits
from trustlab.methods.ipb.base import BoundaryEstimator
from trustlab.stats import check_random_state, clopper_pearson

__all__ = [
    "DigitsGenerator",
    "MixtureShift",
    "compare_bounds",
    "compare_gap_bounds",
    "gaussian_shift",
    "rare_group",
    "tilted_policy",
]


@dataclass(frozen=True)
class MixtureShift:
    """P and Q: isotropic Gaussian mixtures with scale ``sigma`` (means: (K, d) arrays)."""

    means_p: NDArray[np.float64]
    weights_p: NDArray[np.float64]
    means_q: NDArray[np.float64]
    weights_q: NDArray[np.float64]
    sigma: float = 1.0
    name: str = "mixture"

    def __post_init__(self) -> None:
        where = "MixtureShift"
        mp = as_float_array(self.means_p, "means_p", where, ndim=2)
        mq = as_float_array(self.means_q, "means_q", where, ndim=2)
        if mq.shape[1] != mp.shape[1]:
            raise InputError(
                f"The 'means_p' and 'means_q' parameters of {where} must have one dimension d. "
                f"Got {mp.shape[1]} and {mq.shape[1]}."
            )
        for name, w, means in (("weights_p", self.weights_p, mp), ("weights_q", self.weights_q, mq)):
            arr = as_float_array(w, name, where, ndim=1)
            if arr.shape[0] != means.shape[0] or np.any(arr < 0) or abs(arr.sum() - 1.0) > 1e-9:
                raise InputError(
                    f"The '{name}' parameter of {where} must be {means.shape[0]} weights >= 0 "
                    f"that sum to 1 (one per component). Got {arr.tolist()}."
                )
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "means_p", mp)
        object.__setattr__(self, "means_q", mq)
        sigma = check_scalar(self.sigma, "sigma", where, lo=0.0, closed="neither")
        object.__setattr__(self, "sigma", sigma)

    @property
    def dim(self) -> int:
        return int(self.means_p.shape[1])

    def _sample(self, means: NDArray, weights: NDArray, n: int, rng: np.random.Generator) -> NDArray:
        comp = rng.choice(len(weights), size=n, p=weights)
        return means[comp] + self.sigma * rng.standard_normal((n, self.dim))

    def sample_p(self, n: int, rng: np.random.Generator | int | None) -> NDArray[np.float64]:
        n = check_scalar(n, "n", "MixtureShift.sample_p", kind=int, lo=1)
        rng = check_random_state(rng, "rng", "MixtureShift.sample_p")
        return self._sample(self.means_p, self.weights_p, n, rng)

    def sample_q(self, n: int, rng: np.random.Generator | int | None) -> NDArray[np.float64]:
        n = check_scalar(n, "n", "MixtureShift.sample_q", kind=int, lo=1)
        rng = check_random_state(rng, "rng", "MixtureShift.sample_q")
        return self._sample(self.means_q, self.weights_q, n, rng)

    def _log_density(self, x: NDArray, means: NDArray, weights: NDArray) -> NDArray:
        sq = ((x[:, None, :] - means[None, :, :]) ** 2).sum(-1) / (2 * self.sigma**2)
        return special.logsumexp(np.log(weights)[None, :] - sq, axis=1)

    def log_ratio(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """Exact ``log dQ/dP`` (up to nothing: both densities are normalised the same way)."""
        x = check_samples(x, "x", "MixtureShift.log_ratio", n_features=self.dim)
        return self._log_density(x, self.means_q, self.weights_q) - self._log_density(
            x, self.means_p, self.weights_p
        )

    def _unit_vector(self, u: ArrayLike, where: str) -> NDArray[np.float64]:
        v = as_float_array(u, "u", where, ndim=1)
        if v.shape[0] != self.dim or abs(np.linalg.norm(v) - 1.0) > 1e-6:
            raise InputError(
                f"The 'u' parameter of {where} must be a unit vector of dimension {self.dim}. "
                f"Got length {v.shape[0]}, norm {np.linalg.norm(v):.4g}."
            )
        return v

    def halfspace_rate(self, u: NDArray, c: float, which: str = "p") -> float:
        """``P(u.x > c)`` (``which="p"``) or under Q, for a unit vector u."""
        where = "MixtureShift.halfspace_rate"
        u = self._unit_vector(u, where)
        c = check_scalar(c, "c", where)
        check_choice(which, "which", ("p", "q"), where)
        return self._rate(u, c, which)

    def _rate(self, u: NDArray, c: float, which: str) -> float:
        means, weights = (self.means_p, self.weights_p) if which == "p" else (self.means_q, self.weights_q)
        return float(np.sum(weights * special.ndtr((means @ u - c) / self.sigma)))

    def threshold_for_rate(self, u: NDArray, rate: float) -> float:
        """The c with ``P(u.x > c) = rate``."""
        where = "MixtureShift.threshold_for_rate"
        u = self._unit_vector(u, where)
        rate = check_scalar(rate, "rate", where, lo=0.0, hi=1.0, closed="neither")
        reach = float(np.abs(self.means_p @ u).max()) + 10.0 * self.sigma
        span = 50.0 if reach < 40.0 else reach + 10.0
        return float(optimize.brentq(lambda c: self._rate(u, c, "p") - rate, -span, span, xtol=1e-13))

    def kl_qp(self, rng: np.random.Generator, n: int = 200_000) -> float:
        """``KL(Q || P)`` by Monte Carlo with the exact log ratio (exact when both are Gaussian)."""
        n = check_scalar(n, "n", "MixtureShift.kl_qp", kind=int, lo=1)
        rng = check_random_state(rng, "rng", "MixtureShift.kl_qp")
        if len(self.weights_p) == 1 and len(self.weights_q) == 1:
            return float(np.sum((self.means_q - self.means_p) ** 2) / (2 * self.sigma**2))
        return float(np.mean(self.log_ratio(self.sample_q(n, rng))))


def _unit(d: int, angle: float = 0.0) -> NDArray[np.float64]:
    u = np.zeros(d)
    u[0] = np.cos(angle)
    if d > 1:
        u[1] = np.sin(angle)
    return u


def gaussian_shift(d: int = 2, mu: float = 1.0) -> MixtureShift:
    """P = N(0, I_d), Q = N(mu e_1, I_d)."""
    d = check_scalar(d, "d", "gaussian_shift", kind=int, lo=1)
    mu = check_scalar(mu, "mu", "gaussian_shift")
    zero = np.zeros((1, d))
    return MixtureShift(zero, np.ones(1), zero + mu * _unit(d), np.ones(1), name="gaussian_shift")


def tilted_policy(
    d: int = 2, harmful_share: float = 0.02, harmful_shift: float = 3.0, reward_angle: float = 1.2,
    beta: float = 1.0,
) -> MixtureShift:
    """Reference P = (1-e) N(0, I) + e N(m_h, I); fine-tuned Q ∝ P exp(w.x / beta), |w| = 1.

    The reward direction w makes ``reward_angle`` with the harmful direction e_1, so
    fine-tuning for reward partly raises the harmful mode. Each component N(m, I) tilts to
    N(m + w / beta, I) with weight ∝ pi exp(w.m / beta).
    """
    where = "tilted_policy"
    d = check_scalar(d, "d", where, kind=int, lo=1)
    harmful_share = check_scalar(harmful_share, "harmful_share", where, lo=0.0, hi=1.0,
                                 closed="neither")
    harmful_shift = check_scalar(harmful_shift, "harmful_shift", where)
    reward_angle = check_scalar(reward_angle, "reward_angle", where)
    beta = check_scalar(beta, "beta", where, lo=0.0, closed="neither")
    m_h = harmful_shift * _unit(d)
    means_p = np.vstack([np.zeros(d), m_h])
    weights_p = np.array([1 - harmful_share, harmful_share])
    w = _unit(d, reward_angle)
    means_q = means_p + w / beta
    log_w = np.log(weights_p) + means_p @ w / beta
    weights_q = np.exp(log_w - special.logsumexp(log_w))
    return MixtureShift(means_p, weights_p, means_q, weights_q, name="tilted_policy")


def rare_group(d: int = 2, share: float = 0.05, shift: float = 1.0) -> MixtureShift:
    """Population P = (1-pi) N(0, I) + pi N(m_g, I); group Q = N(m_g, I)."""
    d = check_scalar(d, "d", "rare_group", kind=int, lo=1)
    share = check_scalar(share, "share", "rare_group", lo=0.0, hi=1.0, closed="neither")
    shift = check_scalar(shift, "shift", "rare_group")
    m_g = shift * _unit(d)
    means_p = np.vstack([np.zeros(d), m_g])
    return MixtureShift(
        means_p, np.array([1 - share, share]), m_g[None, :], np.ones(1), name="rare_group"
    )


@dataclass
class DigitsGenerator:
    """A class-conditional generative model of digits and its judge (the realistic case).

    ``fit`` embeds scikit-learn's bundled 8x8 digits with PCA, fits one Gaussian mixture per
    digit (the generator) and a logistic-regression judge on the real embeddings.
    ``sample(digit, n, rng)`` generates embeddings; ``judge_prob(z, digit)`` is the judge's
    probability that z shows ``digit``.
    """

    n_components_pca: int = 10
    n_mixture: int = 3
    seed: int = 0
    generators_: list[Any] = field(default_factory=list, repr=False)

    def fit(self) -> DigitsGenerator:
        where = "DigitsGenerator"
        self.n_components_pca = check_scalar(
            self.n_components_pca, "n_components_pca", where, kind=int, lo=1, hi=64
        )
        self.n_mixture = check_scalar(self.n_mixture, "n_mixture", where, kind=int, lo=1, hi=50)
        self.seed = check_scalar(self.seed, "seed", where, kind=int, lo=0, hi=2**32 - 100)
        from sklearn.decomposition import PCA
        from sklearn.linear_model import LogisticRegression
        from sklearn.mixture import GaussianMixture
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):  # tiny fits: BLAS threads only oversubscribe
            return self._fit(load_digits, PCA, LogisticRegression, GaussianMixture)

    def _fit(self, load_digits: Any, pca: Any, logreg: Any, mixture: Any) -> DigitsGenerator:
        digits = load_digits()
        x, y = digits.counts, digits.labels
        self.pca_ = pca(self.n_components_pca, random_state=self.seed).fit(x)
        z = self.pca_.transform(x)
        self.scale_ = float(np.std(z))
        z = z / self.scale_
        self.judge_ = logreg(max_iter=2000, C=0.5).fit(z, y)
        self.generators_ = [
            mixture(self.n_mixture, covariance_type="full", random_state=self.seed + k).fit(
                z[y == k]
            )
            for k in range(10)
        ]
        return self

    def _check_fitted(self, where: str) -> None:
        if not hasattr(self, "judge_"):
            raise NotFittedError(f"This DigitsGenerator is not fitted yet; call fit() before {where}.")

    def sample(self, digit: int, n: int, rng: np.random.Generator | int | None) -> NDArray[np.float64]:
        where = "DigitsGenerator.sample"
        self._check_fitted(where)
        digit = check_scalar(digit, "digit", where, kind=int, lo=0, hi=9)
        n = check_scalar(n, "n", where, kind=int, lo=1)
        return self._sample(digit, n, check_random_state(rng, "rng", where))

    def _sample(self, digit: int, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
        gm = self.generators_[digit]
        comp = rng.choice(gm.n_components, size=n, p=gm.weights_)
        chol = np.linalg.cholesky(gm.covariances_)
        noise = rng.standard_normal((n, gm.means_.shape[1]))
        return gm.means_[comp] + np.einsum("nij,nj->ni", chol[comp], noise)

    def sample_population(
        self, group: int, share: float, n: int, rng: np.random.Generator
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """Population: the group's digit with probability ``share``, else another digit uniformly."""
        where = "DigitsGenerator.sample_population"
        self._check_fitted(where)
        group = check_scalar(group, "group", where, kind=int, lo=0, hi=9)
        share = check_scalar(share, "share", where, lo=0.0, hi=1.0)
        n = check_scalar(n, "n", where, kind=int, lo=1)
        rng = check_random_state(rng, "rng", where)
        others = [k for k in range(10) if k != group]
        is_group = rng.random(n) < share
        digits = np.where(is_group, group, rng.choice(others, size=n))
        z = np.empty((n, self.generators_[0].means_.shape[1]))
        for k in np.unique(digits):
            mask = digits == k
            z[mask] = self._sample(int(k), int(mask.sum()), rng)
        return z, digits.astype(np.int64)

    def judge_prob(self, z: NDArray[np.float64], digits: NDArray[np.int64] | int) -> NDArray[np.float64]:
        where = "DigitsGenerator.judge_prob"
        self._check_fitted(where)
        z = check_samples(z, "z", where, n_features=self.n_components_pca)
        if isinstance(digits, int | np.integer | float | np.floating | bool) or (
            isinstance(digits, np.ndarray) and digits.ndim == 0
        ):
            digits = check_scalar(digits, "digits", where, kind=int, lo=0, hi=9)
            digits = np.full(len(z), digits)
        else:
            digits = check_labels(digits, "digits", where, n_samples=len(z), n_classes=10)
        proba = self.judge_.predict_proba(z)
        return proba[np.arange(len(z)), digits]


def _fitted_boundary(boundary: object, where: str) -> BoundaryEstimator:
    if not isinstance(boundary, BoundaryEstimator):
        raise InputError(
            f"The 'boundary' parameter of {where} must be a fitted IPB estimator "
            f"(TestBoundary, LipschitzBoundary, KernelBoundary). Got {type(boundary).__name__}."
        )
    boundary._check_fitted()
    if boundary.domain_ != (0.0, 1.0):
        raise InputError(
            f"{where} bounds rates, so it needs a boundary of [0, 1]-valued functions "
            f"(TestBoundary or LipschitzBoundary). Got {type(boundary).__name__}."
        )
    return boundary


def _counts(k: int, n: int, what: str, where: str) -> tuple[int, int]:
    """``k`` judged failures of ``n`` (scalars: these functions compare one rate)."""
    n = check_scalar(n, f"n_{what}", where, kind=int, lo=1)
    return check_scalar(k, f"k_{what}", where, kind=int, lo=0, hi=n), n


def compare_bounds(
    boundary: BoundaryEstimator,
    k_source: int,
    n_source: int,
    k_target: int,
    n_target: int,
    alpha: float = 0.05,
) -> dict[str, tuple[float, float]]:
    """Intervals for the target rate ``E_Q f`` from three routes, each at miscoverage <= alpha + delta.

    ``ipb``: the Clopper-Pearson interval on the source rate pushed through the band;
    ``ipm``: the same source interval widened by the band's IPM (``t -/+ d``);
    ``binomial``: Clopper-Pearson on the ``n_target`` judged target samples alone, at
    miscoverage ``alpha + delta`` so the three are compared at the same level.
    """
    where = "compare_bounds"
    boundary = _fitted_boundary(boundary, where)
    k_source, n_source = _counts(k_source, n_source, "source", where)
    k_target, n_target = _counts(k_target, n_target, "target", where)
    pushed = boundary.propagate(k_source, n_source, alpha)
    d = boundary.ipm(band=True)
    ipm = (max(pushed.source_lower - d, 0.0), min(pushed.source_upper + d, 1.0))
    lo, hi = clopper_pearson(k_target, n_target, alpha + boundary.delta)
    return {"ipb": (pushed.lower, pushed.upper), "ipm": ipm, "binomial": (float(lo), float(hi))}


def compare_gap_bounds(
    boundary: BoundaryEstimator,
    k_population: int,
    n_population: int,
    k_group: int,
    n_group: int,
    alpha: float = 0.05,
) -> dict[str, tuple[float, float]]:
    """Intervals for the gap ``E_Q f - E_P f`` (group Q minus population P), each at
    miscoverage <= ``alpha + delta``.

    ``ipb``: with ``[s_lo, s_hi]`` the Clopper-Pearson interval (miscoverage ``alpha``) on the
    population rate ``t = E_P f`` from ``k_population`` of ``n_population`` judged samples,
    ``E_Q f`` lies in ``[lower(s_lo), upper(s_hi)]`` on the band's event, so the gap lies in
    ``[lower(s_lo) - s_hi, upper(s_hi) - s_lo]``.
    ``ipm``: the same with the band's IPM ``d``: ``[max(s_lo - d, 0) - s_hi, min(s_hi + d, 1) - s_lo]``.
    ``binomial``: the group's own ``k_group`` of ``n_group`` judged samples against the
    population's, two Clopper-Pearson intervals at ``(alpha + delta) / 2`` each (union bound),
    so all three are compared at the same level. Only the first two use unlabelled data.
    """
    where = "compare_gap_bounds"
    boundary = _fitted_boundary(boundary, where)
    k_population, n_population = _counts(k_population, n_population, "population", where)
    k_group, n_group = _counts(k_group, n_group, "group", where)
    s_lo, s_hi = (float(v) for v in clopper_pearson(k_population, n_population, alpha))
    half = (float(alpha) + boundary.delta) / 2
    p_lo, p_hi = (float(v) for v in clopper_pearson(k_population, n_population, half))
    g_lo, g_hi = (float(v) for v in clopper_pearson(k_group, n_group, half))
    d = boundary.ipm(band=True)
    return {
        "ipb": (float(boundary.lower(s_lo)) - s_hi, float(boundary.upper(s_hi)) - s_lo),
        "ipm": (max(s_lo - d, 0.0) - s_hi, min(s_hi + d, 1.0) - s_lo),
        "binomial": (g_lo - p_hi, g_hi - p_lo),
    }
