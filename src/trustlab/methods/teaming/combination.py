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
from trustlab.core.validation import check_labels, check_probs, check_scalar

__all__ = [
    "ConfusionMatrixCombiner",
    "ProductOfExpertsCombiner",
    "TemperatureScaling",
    "WeightedAverageCombiner",
]

_EPS = 1e-12


def _probs(
    p: ArrayLike, where: str, name: str, *, n_samples: int | None = None,
    n_classes: int | None = None,
) -> NDArray[np.float64]:
    return check_probs(p, name, where, n_samples=n_samples, n_classes=n_classes)


def _labels(y: ArrayLike, n: int, k: int, where: str, name: str) -> NDArray[np.intp]:
    return check_labels(y, name, where, n_samples=n, n_classes=k).astype(np.intp)


def _nll(logp: NDArray[np.float64], y: NDArray[np.intp]) -> float:
    return float(-np.mean(logp[np.arange(y.size), y]))


class TemperatureScaling:
    """Temperature scaling (Guo et al. 2017): ``softmax(log p / T)``, ``T`` fit by NLL.

    Works on probabilities (their logs are logits up to a constant per row).
    """

    def __init__(self, bounds: tuple[float, float] = (0.05, 20.0)) -> None:
        self.bounds = bounds

    def fit(self, probs: ArrayLike, labels: ArrayLike) -> TemperatureScaling:
        where = "TemperatureScaling.fit"
        b = self.bounds
        if not isinstance(b, tuple | list | np.ndarray) or len(b) != 2:
            raise InputError(f"The 'bounds' parameter of {where} must be (low, high). Got {b!r}.")
        lo = check_scalar(b[0], "bounds[0]", where, lo=0.0, closed="neither")
        check_scalar(b[1], "bounds[1]", where, lo=lo, closed="neither")
        p = _probs(probs, "TemperatureScaling.fit", "probs")
        y = _labels(labels, p.shape[0], p.shape[1], "TemperatureScaling.fit", "labels")
        logits = np.log(np.clip(p, _EPS, 1.0))
        lo, hi = np.log(self.bounds[0]), np.log(self.bounds[1])
        res = minimize_scalar(
            lambda t: _nll(log_softmax(logits / np.exp(t), axis=1), y),
            bounds=(lo, hi), method="bounded", options={"xatol": 1e-6},
        )
        self.temperature_ = float(np.exp(res.x))
        self.n_classes_ = p.shape[1]
        return self

    def transform(self, probs: ArrayLike) -> NDArray[np.float64]:
        if not hasattr(self, "temperature_"):
            raise NotFittedError("TemperatureScaling.transform needs fit(probs, labels) first.")
        p = _probs(probs, "TemperatureScaling.transform", "probs", n_classes=self.n_classes_)
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
        where = "ConfusionMatrixCombiner"
        a = check_scalar(self.prior_accuracy, "prior_accuracy", where, lo=0.0, hi=1.0, closed="neither")
        s = check_scalar(self.prior_strength, "prior_strength", where, lo=0.0, closed="neither")
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
        if not isinstance(self.calibrate_model, bool):
            raise InputError(
                f"The 'calibrate_model' parameter of {where} must be True or False. "
                f"Got {self.calibrate_model!r}."
            )
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
        pm = _probs(model_probs, where, "model_probs", n_classes=self.n_classes_)
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
        ph = _probs(human_probs, where, "human_probs", n_samples=pm.shape[0], n_classes=pm.shape[1])
        y = _labels(labels, pm.shape[0], pm.shape[1], where, "labels")
        if self.weight is not None:
            self.weight_ = check_scalar(self.weight, "weight", "WeightedAverageCombiner", lo=0.0, hi=1.0)
        else:
            rows = np.arange(y.size)
            a, b = ph[rows, y], pm[rows, y]
            res = minimize_scalar(
                lambda w: -np.mean(np.log(np.clip(w * a + (1 - w) * b, _EPS, None))),
                bounds=(0.0, 1.0), method="bounded", options={"xatol": 1e-6},
            )
            self.weight_ = float(res.x)
        self.n_classes_ = pm.shape[1]
        return self

    def predict_proba(self, model_probs: ArrayLike, human_probs: ArrayLike) -> NDArray[np.float64]:
        where = "WeightedAverageCombiner.predict_proba"
        if not hasattr(self, "weight_"):
            raise NotFittedError(f"{where} needs fit(model_probs, human_probs, labels) first.")
        pm = _probs(model_probs, where, "model_probs", n_classes=self.n_classes_)
        ph = _probs(human_probs, where, "human_probs", n_samples=pm.shape[0], n_classes=pm.shape[1])
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
        ph = _probs(human_probs, where, "human_probs", n_samples=pm.shape[0], n_classes=pm.shape[1])
        y = _labels(labels, pm.shape[0], pm.shape[1], where, "labels")
        self.n_classes_ = pm.shape[1]
        if self.weights is not None:
            w = self.weights
            if not isinstance(w, tuple | list | np.ndarray) or len(w) != 2:
                raise InputError(
                    "The 'weights' parameter of ProductOfExpertsCombiner must be two numbers "
                    f">= 0 (w_h, w_m). Got {w!r}."
                )
            self.weights_ = np.array(
                [check_scalar(v, "weights", "ProductOfExpertsCombiner", lo=0.0) for v in w]
            )
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
        pm = _probs(model_probs, where, "model_probs", n_classes=self.n_classes_)
        ph = _probs(human_probs, where, "human_probs", n_samples=pm.shape[0], n_classes=pm.shape[1])
        return np.exp(self._combine(ph, pm, self.weights_))
