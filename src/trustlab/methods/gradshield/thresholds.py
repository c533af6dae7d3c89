"""Thresholds on harmfulness scores: which examples a filter removes (score > threshold).

Adaptive (data-driven) rules, compared in docs/methods/gradshield.md:

* :class:`ConformalThreshold` — the split-conformal ``1 − alpha`` quantile of the scores of a
  trusted benign calibration sample. Guarantee: a benign example exchangeable with the
  calibration sample is removed with probability at most ``alpha`` (marginally). It promises
  nothing about recall.
* :class:`MixtureThreshold` — a two-component Gaussian mixture on the dataset's own scores
  (scikit-learn); removes the examples the high component explains better, when BIC prefers
  two components; otherwise nothing. No trusted sample needed.
* :class:`OtsuThreshold` — Otsu's cut: the split of the sorted scores that maximises the
  between-class variance (exact over every cut, computed with cumulative sums). Always removes
  something; no trusted sample needed.
* :class:`SearchThreshold` — our reading of GradShield's search: the largest threshold whose
  kept set's mean score is no higher than an upper confidence bound on the trusted benign mean
  (remove the highest scores until what is left looks like clean data on average). The paper
  describes a binary search; here every cut is scanned (exact, ``O(n log n)``).
* :class:`FixedThreshold` — a constant (GradSafe's fixed cut, or one tuned on a validation
  split).

Every rule is ``fit(scores, calibration=None) -> self`` with ``threshold_`` and
``remove(scores) -> bool mask``; ``+inf`` means "remove nothing".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.validation import as_float_array, check_open_unit, check_scalar

__all__ = [
    "THRESHOLD_RULES",
    "ConformalThreshold",
    "FixedThreshold",
    "MixtureThreshold",
    "OtsuThreshold",
    "SearchThreshold",
    "make_threshold",
]


class _Threshold:
    needs_calibration = False

    def _scores(self, scores: ArrayLike, name: str = "scores") -> NDArray[np.float64]:
        return as_float_array(scores, name, type(self).__name__ + ".fit", ndim=1)

    def _calibration(self, calibration: ArrayLike | None) -> NDArray[np.float64]:
        if calibration is None:
            raise InputError(
                f"{type(self).__name__} needs the scores of a trusted benign 'calibration' sample."
            )
        return as_float_array(calibration, "calibration", type(self).__name__ + ".fit", ndim=1)

    def remove(self, scores: ArrayLike) -> NDArray[np.bool_]:
        """True where an example is removed (its score exceeds ``threshold_``)."""
        if not hasattr(self, "threshold_"):
            raise NotFittedError(
                f"This {type(self).__name__} is not fitted yet; call 'fit' before 'remove'."
            )
        s = as_float_array(scores, "scores", type(self).__name__ + ".remove", ndim=1)
        return s > self.threshold_

    def fit_remove(
        self, scores: ArrayLike, calibration: ArrayLike | None = None
    ) -> NDArray[np.bool_]:
        return self.fit(scores, calibration).remove(scores)

    def fit(
        self, scores: ArrayLike, calibration: ArrayLike | None = None
    ) -> Any:  # pragma: no cover
        raise NotImplementedError


class FixedThreshold(_Threshold):
    """Remove scores above ``value`` (the data are not looked at)."""

    def __init__(self, value: float = 0.25) -> None:
        self.value = value

    def fit(self, scores: ArrayLike, calibration: ArrayLike | None = None) -> FixedThreshold:
        self._scores(scores)
        self.threshold_ = check_scalar(self.value, "value", "FixedThreshold")
        return self


class ConformalThreshold(_Threshold):
    """The split-conformal ``1 − alpha`` quantile of trusted benign calibration scores.

    With ``m`` calibration scores the threshold is the ``ceil((m + 1)(1 − alpha))``-th smallest;
    when that exceeds ``m`` (too few scores for ``alpha``) it is the largest, and
    ``attained_alpha_`` = ``1 / (m + 1)`` says what the guarantee then is.
    """

    needs_calibration = True

    def __init__(self, alpha: float = 0.01) -> None:
        self.alpha = alpha

    def fit(self, scores: ArrayLike, calibration: ArrayLike | None = None) -> ConformalThreshold:
        alpha = check_open_unit(self.alpha, "alpha", "ConformalThreshold")
        self._scores(scores)
        cal = np.sort(self._calibration(calibration))
        m = cal.size
        k = math.ceil((m + 1) * (1 - alpha))
        self.attained_alpha_ = max(alpha, 1.0 / (m + 1)) if k > m else alpha
        self.threshold_ = float(cal[min(k, m) - 1])
        return self


class MixtureThreshold(_Threshold):
    """Two-component Gaussian mixture on the scores; cut where the high component's posterior
    reaches ``posterior`` (between the two means). If BIC does not prefer two components by
    more than ``bic_margin``, or the high component holds more than ``max_share`` of the data,
    nothing is removed (``threshold_ = inf``)."""

    def __init__(
        self,
        posterior: float = 0.5,
        bic_margin: float = 10.0,
        max_share: float = 0.5,
        seed: int = 0,
    ) -> None:
        self.posterior = posterior
        self.bic_margin = bic_margin
        self.max_share = max_share
        self.seed = seed

    def fit(self, scores: ArrayLike, calibration: ArrayLike | None = None) -> MixtureThreshold:
        from sklearn.mixture import GaussianMixture

        where = "MixtureThreshold"
        post = check_open_unit(self.posterior, "posterior", where)
        margin = check_scalar(self.bic_margin, "bic_margin", where, lo=0.0)
        share = check_scalar(self.max_share, "max_share", where, lo=0.0, hi=1.0, closed="right")
        s = self._scores(scores)
        self.threshold_ = math.inf
        self.components_ = 1
        if s.size < 4 or np.ptp(s) == 0:
            return self
        x = s[:, None]
        one = GaussianMixture(1, random_state=self.seed).fit(x)
        two = GaussianMixture(2, random_state=self.seed, n_init=3).fit(x)
        self.bic_gain_ = float(one.bic(x) - two.bic(x))
        high = int(np.argmax(two.means_[:, 0]))
        if self.bic_gain_ <= margin or two.weights_[high] > share:
            return self
        lo, hi = float(two.means_[1 - high, 0]), float(two.means_[high, 0])
        grid = np.linspace(lo, hi, 2001)
        p_high = two.predict_proba(grid[:, None])[:, high]
        above = np.nonzero(p_high >= post)[0]
        self.threshold_ = float(grid[above[0]]) if above.size else hi
        self.components_ = 2
        return self


class OtsuThreshold(_Threshold):
    """Otsu's cut of the scores (maximal between-class variance over every split)."""

    def fit(self, scores: ArrayLike, calibration: ArrayLike | None = None) -> OtsuThreshold:
        s = np.sort(self._scores(scores))
        n = s.size
        if n < 2 or s[0] == s[-1]:
            self.threshold_ = math.inf
            return self
        csum = np.cumsum(s)
        k = np.arange(1, n)  # k lowest scores in the low class
        mean_lo = csum[:-1] / k
        mean_hi = (csum[-1] - csum[:-1]) / (n - k)
        between = k * (n - k) * (mean_hi - mean_lo) ** 2
        between[s[1:] == s[:-1]] = -1.0  # a cut must separate distinct values
        best = int(np.argmax(between))
        self.threshold_ = float(s[best])
        return self


class SearchThreshold(_Threshold):
    """Remove the highest scores until the kept set's mean is at most the upper
    ``1 − alpha`` confidence bound of the trusted benign mean (t interval).

    Every cut between distinct sorted scores is checked (the largest kept set that passes
    wins), so the rule needs no guess of the harmful share. The mean of the lowest ``k`` scores
    grows with ``k``, so the passing cuts are a prefix (a binary search would find the same
    one). Harmful examples can hide in the slack when the data's benign mean sits below the
    bound.
    """

    needs_calibration = True

    def __init__(self, alpha: float = 0.05) -> None:
        self.alpha = alpha

    def fit(self, scores: ArrayLike, calibration: ArrayLike | None = None) -> SearchThreshold:
        from scipy import stats

        alpha = check_open_unit(self.alpha, "alpha", "SearchThreshold")
        s = np.sort(self._scores(scores))
        cal = self._calibration(calibration)
        if cal.size < 2:
            raise InputError("SearchThreshold needs at least 2 calibration scores.")
        sd = float(np.std(cal, ddof=1))
        self.bound_ = float(
            np.mean(cal) + stats.t.ppf(1 - alpha, cal.size - 1) * sd / np.sqrt(cal.size)
        )
        means = np.cumsum(s) / np.arange(1, s.size + 1)  # mean of the k lowest scores
        # a cut can only fall between distinct scores (tied examples stay together)
        boundary = np.append(s[1:] != s[:-1], True)
        ok = np.nonzero((means <= self.bound_) & boundary)[0]
        if ok.size == 0:  # even the lowest score is above the bound: keep nothing
            self.threshold_ = float(s[0]) - 1.0
        elif ok[-1] == s.size - 1:
            self.threshold_ = math.inf
        else:
            self.threshold_ = float(s[ok[-1]])
        return self


THRESHOLD_RULES = ("conformal", "mixture", "otsu", "search", "fixed")


def make_threshold(rule: str, **options: Any) -> _Threshold:
    """A threshold rule by name (``conformal``, ``mixture``, ``otsu``, ``search``, ``fixed``)."""
    classes = {
        "conformal": ConformalThreshold,
        "mixture": MixtureThreshold,
        "otsu": OtsuThreshold,
        "search": SearchThreshold,
        "fixed": FixedThreshold,
    }
    if not isinstance(rule, str) or rule not in classes:
        raise InputError(
            f"The 'rule' of a threshold must be one of {THRESHOLD_RULES}. Got {rule!r}."
        )
    return classes[rule](**options)
