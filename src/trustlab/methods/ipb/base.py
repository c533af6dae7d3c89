"""What every Integral Probability Boundary estimator shares.

For a class F of functions, the joint range ``R_F(P, Q) = {(E_P f, E_Q f) : f in F}`` has an
upper boundary ``B(t) = sup{E_Q f : f in F, E_P f <= t}`` and a lower boundary
``L(t) = inf{E_Q f : f in F, E_P f >= t}``; both are nondecreasing, so for every ``f in F``

    L(E_P f) <= E_Q f <= B(E_P f).

An estimator computes the plug-in boundary ``B_hat`` between the empirical measures and two
uniform deviations ``eps_p``/``eps_q`` (``sup_f |E_P f - E_Pn f| <= eps_p`` with the stated
probability, likewise for Q). On that event the true boundary is sandwiched:
``B(t) <= B_hat(t + eps_p) + eps_q`` and ``L(t) >= L_hat(t - eps_p) - eps_q``. Subclasses that
have a sharper band (the Clopper-Pearson staircase of ``TestBoundary``) override ``upper``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.validation import as_float_array, check_choice, check_open_unit, check_scalar
from trustlab.stats import clopper_pearson

__all__ = ["BoundaryEstimator", "TargetBound", "check_in_range", "check_random_seed"]


def check_random_seed(value: int | None, name: str, where: str) -> int | None:
    """``None`` or an int seed scikit-learn and numpy accept."""
    if value is None:
        return None
    return check_scalar(value, name, where, kind=int, lo=0, hi=2**32 - 1)


def check_in_range(
    values: ArrayLike, name: str, where: str, lo: float = 0.0, hi: float = 1.0
) -> NDArray[np.float64]:
    """Finite values in ``[lo, hi]`` (a rounding slack of 1e-9 is clipped, nothing more)."""
    arr = as_float_array(values, name, where, allow_empty=True)
    slack = 1e-9 * max(1.0, abs(lo), abs(hi))
    if arr.size and (arr.min() < lo - slack or arr.max() > hi + slack):
        raise InputError(
            f"The '{name}' parameter of {where} must lie in [{lo:g}, {hi:g}]. "
            f"Got values in [{arr.min():g}, {arr.max():g}]."
        )
    return np.clip(arr, lo, hi)


@dataclass(frozen=True)
class TargetBound:
    """A confidence interval for ``E_Q f`` pushed through the boundary.

    ``source_lower``/``source_upper`` is the Clopper-Pearson interval on ``E_P f``;
    ``lower``/``upper`` bound ``E_Q f``; the statement holds with probability at least
    ``1 - miscoverage`` (union bound of the boundary band and the binomial interval).
    """

    lower: float
    upper: float
    source_lower: float
    source_upper: float
    miscoverage: float

    @property
    def width(self) -> float:
        return self.upper - self.lower


class BoundaryEstimator:
    """Base class: evaluation, band, IPM, inversion and propagation over a fitted boundary.

    Subclasses set ``eps_p_``, ``eps_q_``, ``delta`` and ``domain_`` (the range of ``E_P f``
    over the class) in ``fit`` and implement ``_upper_hat`` (the empirical upper boundary,
    nondecreasing) and ``_lower_hat``.
    """

    delta: float
    eps_p_: float
    eps_q_: float
    domain_: tuple[float, float]
    _NAME = "BoundaryEstimator"

    # -- to implement --------------------------------------------------------------
    def _upper_hat(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        raise NotImplementedError

    def _lower_hat(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        raise NotImplementedError

    def _value_range(self) -> tuple[float, float]:
        """Range of ``E_Q f`` over the class, used to clip the band; [0, 1] for tests."""
        return (0.0, 1.0)

    # -- lifecycle ----------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "eps_p_"):
            raise NotFittedError(f"This {self._NAME} is not fitted yet; call fit(x_p, x_q) first.")

    def _clip_t(self, t: ArrayLike) -> NDArray[np.float64]:
        lo, hi = self.domain_
        return np.clip(np.asarray(t, dtype=np.float64), lo, hi)

    def _check_t(self, t: ArrayLike, name: str, where: str) -> NDArray[np.float64]:
        """User-given source values: finite and inside the class's range of ``E_P f``.

        A value outside ``domain_`` (a rate above 1, a negative rate) is no ``E_P f`` of any
        function in the class, so it is an error rather than silently clipped.
        """
        lo, hi = self._t_range()
        return check_in_range(t, name, f"{self._NAME}.{where}", lo, hi)

    def _t_range(self) -> tuple[float, float]:
        """Values of ``E_P f`` a user may ask about: ``domain_`` unless a class says more."""
        return self.domain_

    @staticmethod
    def _out(x: NDArray[np.float64]) -> float | NDArray[np.float64]:
        return float(x) if np.ndim(x) == 0 else x

    # -- the plug-in boundary -----------------------------------------------------
    def boundary(self, t: ArrayLike) -> float | NDArray[np.float64]:
        """Plug-in upper boundary ``B_hat(t)`` between the empirical measures (no band)."""
        self._check_fitted()
        return self._out(self._upper_hat(self._clip_t(self._check_t(t, "t", "boundary"))))

    def lower_boundary(self, t: ArrayLike) -> float | NDArray[np.float64]:
        """Plug-in lower boundary ``L_hat(t)`` between the empirical measures (no band)."""
        self._check_fitted()
        return self._out(self._lower_hat(self._clip_t(self._check_t(t, "t", "lower_boundary"))))

    # -- the confidence band --------------------------------------------------------
    def upper(self, t: ArrayLike) -> float | NDArray[np.float64]:
        """Upper confidence bound on the true ``B(t)``: ``B_hat(t + eps_p) + eps_q``.

        Holds for all ``t`` at once with probability ``>= 1 - delta``.
        """
        self._check_fitted()
        t = self._check_t(t, "t", "upper")
        value = self._upper_hat(self._clip_t(t + self.eps_p_)) + self.eps_q_
        return self._out(np.clip(value, *self._value_range()))

    def lower(self, t: ArrayLike) -> float | NDArray[np.float64]:
        """Lower confidence bound on the true ``L(t)``: ``L_hat(t - eps_p) - eps_q``."""
        self._check_fitted()
        t = self._check_t(t, "t", "lower")
        value = self._lower_hat(self._clip_t(t - self.eps_p_)) - self.eps_q_
        return self._out(np.clip(value, *self._value_range()))

    def interval(self, t: ArrayLike) -> tuple[float | NDArray, float | NDArray]:
        """``(lower(t), upper(t))``: where ``E_Q f`` lies for any f in the class with ``E_P f = t``."""
        return self.lower(t), self.upper(t)

    # -- derived quantities -------------------------------------------------------
    def _grid(self, n: int = 2001) -> NDArray[np.float64]:
        lo, hi = self.domain_
        return np.linspace(lo, hi, n)

    def ipm(self, *, band: bool = False) -> float:
        """``sup_f |E_Q f - E_P f|``: the largest vertical gap of the boundaries from the diagonal.

        With ``band=True`` it is an upper confidence bound on the true IPM.
        """
        self._check_fitted()
        check_choice(band, "band", (True, False), f"{self._NAME}.ipm")
        t = self._grid()
        up = self.upper(t) if band else self._upper_hat(t)
        lo = self.lower(t) if band else self._lower_hat(t)
        return float(max(np.max(up - t), np.max(t - lo), 0.0))

    def ipm_interval(self, t: ArrayLike, *, band: bool = True) -> tuple[NDArray, NDArray]:
        """The IPM bound ``t -/+ d_F`` that the boundary refines (clipped to the value range)."""
        t = self._check_t(t, "t", "ipm_interval")
        d = self.ipm(band=band)
        lo, hi = self._value_range()
        return np.clip(t - d, lo, hi), np.clip(t + d, lo, hi)

    def source_range(self, q: float) -> tuple[float, float]:
        """Inversion: the source values ``t`` consistent with an observed target value ``q``.

        Returns ``(t_min, t_max)`` with ``lower(t) <= q <= upper(t)`` exactly for ``t`` in between
        (both bounds are nondecreasing in ``t``). Example: a fine-tuned policy that fails at rate
        ``q`` needs a reference failure rate of at least ``t_min``.
        """
        self._check_fitted()
        lo, hi = self.domain_
        v_lo, v_hi = self._value_range()
        q = float(check_in_range(q, "q", f"{self._NAME}.source_range", v_lo, v_hi))

        def first_true(pred) -> float:
            if pred(lo):
                return lo
            if not pred(hi):
                return float("nan")
            a, b = lo, hi
            for _ in range(60):
                mid = 0.5 * (a + b)
                if pred(mid):
                    b = mid
                else:
                    a = mid
            return b

        t_min = first_true(lambda t: float(self.upper(t)) >= q)
        # largest t with lower(t) <= q: first t where lower exceeds q
        t_over = first_true(lambda t: float(self.lower(t)) > q)
        t_max = hi if np.isnan(t_over) else t_over
        return t_min, t_max

    def propagate(self, k: int, n: int, alpha: float = 0.05) -> TargetBound:
        """Push a Clopper-Pearson interval on ``E_P f`` (``k`` of ``n``) through the band.

        For f in the class, ``E_Q f`` lies in the result with probability at least
        ``1 - alpha - delta`` (``alpha``: miscoverage of the binomial interval).
        """
        self._check_fitted()
        where = f"{self._NAME}.propagate"
        alpha = check_open_unit(alpha, "alpha", where)
        n = check_scalar(n, "n", where, kind=int, lo=1)
        k = check_scalar(k, "k", where, kind=int, lo=0, hi=n)
        s_lo, s_hi = clopper_pearson(k, n, alpha)
        return TargetBound(
            lower=float(self.lower(s_lo)),
            upper=float(self.upper(s_hi)),
            source_lower=float(s_lo),
            source_upper=float(s_hi),
            miscoverage=alpha + self.delta,
        )
