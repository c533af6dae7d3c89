"""Combination: one prediction from a human's and a model's.

* :class:`ConfusionMatrixCombiner` — Kerrigan, Smyth & Steyvers (NeurIPS 2021): the model's
  probabilities, temperature-calibrated, times the human's confusion-matrix likelihood,
  ``P(y | h, x) ∝ P(h | y) · P_T(y | x)`` (human and model conditionally independent given
  ``y``). The confusion matrix ``P(h | y)`` is the posterior mean under a Dirichlet prior.
* :class:`WeightedAverageCombiner` — ``w · p_h + (1 - w) · p_m`` with ``w`` fit by NLL.
* :class:`ProductOfExpertsCombiner` — ``p ∝ p_h^{w_h} · p_m^{w_m}`` with the exponents fit
  by NLL (``w_h = w_m = 1`` is the plain product).

Each is fit on one labelled split and evaluated on another. All probabilities are
``(n, K)`` arrays; a human is given as hard labels ``(n,)`` (confusion matrix) or as
probability rows ``(n, K)`` (averaging, product); see :func:`labels_to_probs`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import minimize, minimize_scalar
from scipy.special import log_softmax, softmax

from trustlab.core.errors import InputError, NotFittedError

__all__ = [
    "ConfusionMatrixCombiner",
    "ProductOfExpertsCombiner",
    "TemperatureScaling",
    "WeightedAverageCombiner",
]

_EPS = 1e-12


def _probs(p: ArrayLike, where: str, name: str) -> NDArray[np.float64]:
    arr = np.asarray(p, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] < 2:
        raise InputError(
            f"The '{name}' parameter of {where} must be a non-empty (n, K) probability array. "
            f"Got shape {arr.shape}."
        )
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1):
        raise InputError(f"The '{name}' parameter of {where} must lie in [0, 1] (no NaN).")
    if np.max(np.abs(arr.sum(axis=1) - 1.0)) > 1e-3:
        raise InputError(f"The rows of '{name}' in {where} must sum to 1.")
    return arr


def _labels(y: ArrayLike, n: int, k: int, where: str, name: str) -> NDArray[np.intp]:
    arr = np.asarray(y)
    if arr.ndim != 1 or arr.shape[0] != n or arr.dtype.kind not in "iu":
        raise InputError(
            f"The '{name}' parameter of {where} must be 1-D integer labels with {n} entries. "
            f"Got shape {arr.shape}, dtype {arr.dtype}."
        )
    if np.any((arr < 0) | (arr >= k)):
        raise InputError(f"The '{name}' parameter of {where} must be in [0, {k}).")
    return arr.astype(np.intp)


def _nll(logp: NDArray[np.float64], y: NDArray[np.intp]) -> float:
    return float(-np.mean(logp[np.arange(y.size), y]))


class TemperatureScaling:
    """Temperature scaling (Guo et al. 2017): ``softmax(log p / T)``, ``T`` fit by NLL.

    Works on probabilities (their logs are logits up to a constant per row).
    """

    def __init__(self, bounds: tuple[float, float] = (0.05, 20.0)) -> None:
        self.bounds = bounds

    def fit(self, probs: ArrayLike, labels: ArrayLike) -> TemperatureScaling:
        p = _probs(probs, "TemperatureScaling.fit", "probs")
        y = _labels(labels, p.shape[0], p.shape[1], "TemperatureScaling.fit", "labels")
        logits = np.log(np.clip(p, _EPS, 1.0))
        lo, hi = np.log(self.bounds[0]), np.log(self.bounds[1])
        res = minimize_scalar(
            lambda t: _nll(log_softmax(logits / np.exp(t), axis=1), y),
            bounds=(lo, hi), method="bounded", options={"xatol": 1e-6},
        )
        self.temperature_ = float(np.exp(res.x))
        return self

    def transform(self, probs: ArrayLike) -> NDArray[np.float64]:
        if not hasattr(self, "temperature_"):
            raise NotFittedError("TemperatureScaling.transform needs fit(probs, labels) first.")
        p = _probs(probs, "TemperatureScaling.transform", "probs")
        return softmax(np.log(np.clip(p, _EPS, 1.0)) / self.temperature_, axis=1)


class ConfusionMatrixCombiner:
    """Kerrigan et al. (2021) combination of a human label with model probabilities.

    Parameters
    ----------
    prior_accuracy:
        Prior mean of the human's accuracy per true class: the Dirichlet prior on row ``y``
        of the confusion matrix puts this fraction of ``prior_strength`` on ``h = y`` and the
        rest evenly on the other classes.
    prior_strength:
        Total pseudo-count of the Dirichlet prior per row (the paper's smoothing; small
        values let the data speak, large ones shrink towards ``prior_accuracy``).
    calibrate_model:
        Temperature-scale the model on the fit split before combining (the paper does).

    Learned: ``confusion_`` (``(K, K)``, ``confusion_[y, h] = P(h | y)``), ``temperature_``.
    """

    def __init__(
        self,
        prior_accuracy: float = 0.75,
        prior_strength: float = 1.0,
        calibrate_model: bool = True,
    ) -> None:
        self.prior_accuracy = prior_accuracy
        self.prior_strength = prior_strength
        self.calibrate_model = calibrate_model

    def _prior(self, k: int) -> NDArray[np.float64]:
        a, s = float(self.prior_accuracy), float(self.prior_strength)
        if not 0.0 < a < 1.0:
            raise InputError(
                f"The 'prior_accuracy' parameter of ConfusionMatrixCombiner must be in (0, 1). Got {a}."
            )
        if not s > 0.0:
            raise InputError(
                f"The 'prior_strength' parameter of ConfusionMatrixCombiner must be > 0. Got {s}."
            )
        off = s * (1.0 - a) / (k - 1)
        return np.full((k, k), off) + np.eye(k) * (s * a - off)

    def fit(
        self, model_probs: ArrayLike, human_labels: ArrayLike, labels: ArrayLike
    ) -> ConfusionMatrixCombiner:
        where = "ConfusionMatrixCombiner.fit"
        pm = _probs(model_probs, where, "model_probs")
        n, k = pm.shape
        h = _labels(human_labels, n, k, where, "human_labels")
        y = _labels(labels, n, k, where, "labels")
        counts = np.zeros((k, k))
        np.add.at(counts, (y, h), 1.0)
        posterior = counts + self._prior(k)  # Dirichlet posterior per row; we take its mean
        self.confusion_ = posterior / posterior.sum(axis=1, keepdims=True)
        self.calibrator_ = TemperatureScaling().fit(pm, y) if self.calibrate_model else None
        self.temperature_ = self.calibrator_.temperature_ if self.calibrator_ else 1.0
        self.n_classes_ = k
        return self

    def predict_proba(self, model_probs: ArrayLike, human_labels: ArrayLike) -> NDArray[np.float64]:
        """``P(y | h, x) ∝ P(h | y) · P_T(y | x)`` for each row."""
        where = "ConfusionMatrixCombiner.predict_proba"
        if not hasattr(self, "confusion_"):
            raise NotFittedError(f"{where} needs fit(model_probs, human_labels, labels) first.")
        pm = _probs(model_probs, where, "model_probs")
        if pm.shape[1] != self.n_classes_:
            raise InputError(f"{where} was fit on {self.n_classes_} classes; got {pm.shape[1]}.")
        h = _labels(human_labels, pm.shape[0], self.n_classes_, where, "human_labels")
        pm = self.calibrator_.transform(pm) if self.calibrator_ else pm
        joint = np.clip(pm, _EPS, 1.0) * self.confusion_[:, h].T
        return joint / joint.sum(axis=1, keepdims=True)


class WeightedAverageCombiner:
    """Linear pool ``w · p_h + (1 - w) · p_m``.

    Parameters
    ----------
    weight:
        The human's weight ``w`` in ``[0, 1]``; ``None`` fits it by NLL on the fit split.
    """

    def __init__(self, weight: float | None = None) -> None:
        self.weight = weight

    def fit(
        self, model_probs: ArrayLike, human_probs: ArrayLike, labels: ArrayLike
    ) -> WeightedAverageCombiner:
        where = "WeightedAverageCombiner.fit"
        pm = _probs(model_probs, where, "model_probs")
        ph = _probs(human_probs, where, "human_probs")
        if ph.shape != pm.shape:
            raise InputError(f"{where}: human_probs {ph.shape} and model_probs {pm.shape} differ.")
        y = _labels(labels, pm.shape[0], pm.shape[1], where, "labels")
        if self.weight is not None:
            if not 0.0 <= float(self.weight) <= 1.0:
                raise InputError(
                    f"The 'weight' parameter of WeightedAverageCombiner must be in [0, 1]. "
                    f"Got {self.weight}."
                )
            self.weight_ = float(self.weight)
        else:
            rows = np.arange(y.size)
            a, b = ph[rows, y], pm[rows, y]
            res = minimize_scalar(
                lambda w: -np.mean(np.log(np.clip(w * a + (1 - w) * b, _EPS, None))),
                bounds=(0.0, 1.0), method="bounded", options={"xatol": 1e-6},
            )
            self.weight_ = float(res.x)
        return self

    def predict_proba(self, model_probs: ArrayLike, human_probs: ArrayLike) -> NDArray[np.float64]:
        where = "WeightedAverageCombiner.predict_proba"
        if not hasattr(self, "weight_"):
            raise NotFittedError(f"{where} needs fit(model_probs, human_probs, labels) first.")
        pm = _probs(model_probs, where, "model_probs")
        ph = _probs(human_probs, where, "human_probs")
        return self.weight_ * ph + (1.0 - self.weight_) * pm


class ProductOfExpertsCombiner:
    """Product of experts ``p ∝ p_h^{w_h} · p_m^{w_m}``.

    Parameters
    ----------
    weights:
        ``(w_h, w_m)``, both ``>= 0``; ``None`` fits them by NLL on the fit split
        (L-BFGS-B from ``(1, 1)``).
    """

    def __init__(self, weights: tuple[float, float] | None = None) -> None:
        self.weights = weights

    @staticmethod
    def _combine(ph: NDArray[np.float64], pm: NDArray[np.float64], w: NDArray[np.float64]):
        return log_softmax(
            w[0] * np.log(np.clip(ph, _EPS, 1.0)) + w[1] * np.log(np.clip(pm, _EPS, 1.0)), axis=1
        )

    def fit(
        self, model_probs: ArrayLike, human_probs: ArrayLike, labels: ArrayLike
    ) -> ProductOfExpertsCombiner:
        where = "ProductOfExpertsCombiner.fit"
        pm = _probs(model_probs, where, "model_probs")
        ph = _probs(human_probs, where, "human_probs")
        if ph.shape != pm.shape:
            raise InputError(f"{where}: human_probs {ph.shape} and model_probs {pm.shape} differ.")
        y = _labels(labels, pm.shape[0], pm.shape[1], where, "labels")
        if self.weights is not None:
            w = np.asarray(self.weights, dtype=np.float64)
            if w.shape != (2,) or np.any(w < 0) or not np.all(np.isfinite(w)):
                raise InputError(
                    "The 'weights' parameter of ProductOfExpertsCombiner must be two numbers "
                    f">= 0 (w_h, w_m). Got {self.weights}."
                )
            self.weights_ = w
            return self
        res = minimize(
            lambda w: _nll(self._combine(ph, pm, w), y),
            x0=np.ones(2), method="L-BFGS-B", bounds=[(0.0, 50.0), (0.0, 50.0)],
        )
        self.weights_ = np.asarray(res.x, dtype=np.float64)
        return self

    def predict_proba(self, model_probs: ArrayLike, human_probs: ArrayLike) -> NDArray[np.float64]:
        where = "ProductOfExpertsCombiner.predict_proba"
        if not hasattr(self, "weights_"):
            raise NotFittedError(f"{where} needs fit(model_probs, human_probs, labels) first.")
        pm = _probs(model_probs, where, "model_probs")
        ph = _probs(human_probs, where, "human_probs")
        return np.exp(self._combine(ph, pm, self.weights_))
