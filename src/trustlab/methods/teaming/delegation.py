"""Delegation: a meta-classifier decides whether the human or the model predicts.

* :class:`ConfidenceDelegator` — confidence comparison (Raghu et al. 2019): a meta-classifier
  estimates ``P(human correct | x)``; the human predicts when that beats the model's own
  top-label confidence.
* :class:`L2DSurrogateDelegator` — learning to defer with the cross-entropy surrogate
  ``L_CE^α`` of Mozannar & Sontag (2020): ``K + 1`` outputs (classes and "defer"),
  ``-(α·[m = y] + [m ≠ y]) log g_y(x) - [m = y] log g_⊥(x)``; defer when ``g_⊥`` is the
  largest output.
* :class:`OneVsAllDelegator` — the one-vs-all surrogate of Verma & Nalisnick (2022): ``K + 1``
  binary logistic heads, the class heads one-vs-rest on ``y`` and the defer head on
  ``[m = y]``; defer when ``σ(g_⊥) > max_y σ(g_y)``.
* :class:`OracleDelegator` — sends each point to whichever of human and model has the higher
  true probability of being right (known on synthetic data); the ceiling for delegation.

Every learned delegator takes a ``capacity``: ``"logistic"`` (linear), ``"boosting"``
(histogram gradient boosting) or ``"mlp"`` (two hidden layers), all from scikit-learn, so
the same loss can be fit at increasing meta-classifier capacity. Delegation never mixes the
two predictions: the team's prediction on a point is the human's or the model's row, which
is why it keeps the calibration each of them has on the points it gets.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trustlab.core.errors import InputError, NotFittedError

__all__ = [
    "CAPACITIES",
    "ConfidenceDelegator",
    "L2DSurrogateDelegator",
    "OneVsAllDelegator",
    "OracleDelegator",
    "delegation_features",
    "make_meta_classifier",
    "team_probs",
]

Capacity = Literal["logistic", "boosting", "mlp"]
CAPACITIES: tuple[str, ...] = ("logistic", "boosting", "mlp")


def make_meta_classifier(capacity: str, random_state: int | None = 0, multilabel: bool = False) -> Any:
    """A scikit-learn classifier of the given capacity (features are standardised by the caller).

    ``multilabel=True`` returns one that accepts an indicator matrix ``(n, L)`` and fits
    independent logistic outputs (shared hidden layers for the MLP).
    """
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.neural_network import MLPClassifier

    if capacity == "logistic":
        est: Any = LogisticRegression(C=1.0, max_iter=2000)
    elif capacity == "boosting":
        est = HistGradientBoostingClassifier(
            max_iter=100, learning_rate=0.1, max_leaf_nodes=15, early_stopping=False,
            random_state=random_state,
        )
    elif capacity == "mlp":
        return MLPClassifier(
            hidden_layer_sizes=(64, 64), alpha=1e-3, learning_rate_init=3e-3, max_iter=100,
            batch_size=128, early_stopping=False, random_state=random_state,
        )
    else:
        raise InputError(
            f"The 'capacity' of a meta-classifier must be one of {', '.join(CAPACITIES)}. "
            f"Got {capacity!r}."
        )
    return OneVsRestClassifier(est) if multilabel else est


def delegation_features(features: ArrayLike, model_probs: ArrayLike) -> NDArray[np.float64]:
    """What a delegator sees: the features next to the model's log-probabilities.

    The learned-to-defer surrogates need the model's output to learn their class heads; the
    human's output is never a feature (the delegator decides before asking the human).
    """
    x = np.asarray(features, dtype=np.float64)
    pm = np.asarray(model_probs, dtype=np.float64)
    if x.ndim != 2 or pm.ndim != 2 or x.shape[0] != pm.shape[0]:
        raise InputError(
            f"delegation_features needs features (n, d) and model_probs (n, K). Got {x.shape}, {pm.shape}."
        )
    return np.concatenate([x, np.log(np.clip(pm, 1e-6, 1.0))], axis=1)


def team_probs(
    defer: ArrayLike, model_probs: ArrayLike, human_probs: ArrayLike
) -> NDArray[np.float64]:
    """The delegated team's probabilities: the human's row where ``defer``, else the model's."""
    d = np.asarray(defer, dtype=bool)
    pm = np.asarray(model_probs, dtype=np.float64)
    ph = np.asarray(human_probs, dtype=np.float64)
    if pm.shape != ph.shape or pm.ndim != 2 or d.shape != (pm.shape[0],):
        raise InputError(
            "team_probs needs defer (n,), model_probs (n, K) and human_probs (n, K). "
            f"Got {d.shape}, {pm.shape}, {ph.shape}."
        )
    return np.where(d[:, None], ph, pm)


def _check_fit_inputs(
    where: str, features: ArrayLike, model_probs: ArrayLike, human_labels: ArrayLike,
    labels: ArrayLike,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.intp], NDArray[np.intp]]:
    x = np.asarray(features, dtype=np.float64)
    pm = np.asarray(model_probs, dtype=np.float64)
    if x.ndim != 2 or pm.ndim != 2 or x.shape[0] != pm.shape[0] or x.shape[0] < 2:
        raise InputError(
            f"{where} needs features (n, d) and model_probs (n, K) with the same n >= 2. "
            f"Got {x.shape} and {pm.shape}."
        )
    k = pm.shape[1]
    h = np.asarray(human_labels)
    y = np.asarray(labels)
    for name, arr in (("human_labels", h), ("labels", y)):
        if arr.shape != (x.shape[0],) or arr.dtype.kind not in "iu" or np.any(arr < 0) or np.any(
            arr >= k
        ):
            raise InputError(
                f"The '{name}' parameter of {where} must be {x.shape[0]} integer labels in [0, {k})."
            )
    if not np.all(np.isfinite(x)):
        raise InputError(f"The 'features' parameter of {where} must be finite.")
    return x, pm, h.astype(np.intp), y.astype(np.intp)


class _LearnedDelegator:
    """Shared plumbing: standardise the features, expose ``defer`` and ``predict_proba``."""

    def __init__(self, capacity: Capacity = "logistic", random_state: int | None = 0) -> None:
        self.capacity = capacity
        self.random_state = random_state

    def _standardise_fit(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        self.mean_ = x.mean(axis=0)
        self.scale_ = np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
        return (x - self.mean_) / self.scale_

    def _standardise(self, features: ArrayLike) -> NDArray[np.float64]:
        if not hasattr(self, "mean_"):
            raise NotFittedError(
                f"{type(self).__name__} needs fit(features, model_probs, human_labels, labels) first."
            )
        x = np.asarray(features, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.mean_.size:
            raise InputError(
                f"{type(self).__name__} was fit on {self.mean_.size} features. Got shape {x.shape}."
            )
        return (x - self.mean_) / self.scale_

    def defer(self, features: ArrayLike, model_probs: ArrayLike) -> NDArray[np.bool_]:
        raise NotImplementedError

    def predict_proba(
        self, features: ArrayLike, model_probs: ArrayLike, human_probs: ArrayLike
    ) -> NDArray[np.float64]:
        """The team's probabilities: the human's row where deferred, else the model's."""
        return team_probs(self.defer(features, model_probs), model_probs, human_probs)


class ConfidenceDelegator(_LearnedDelegator):
    """Confidence comparison (Raghu et al. 2019).

    A meta-classifier of ``capacity`` estimates ``P(human correct | features)``; the human
    predicts where that exceeds the model's top-label probability (taken as the model's
    probability of being right, i.e. assuming the model is calibrated).

    Learned: ``meta_`` (the human-correctness classifier).
    """

    def fit(
        self, features: ArrayLike, model_probs: ArrayLike, human_labels: ArrayLike,
        labels: ArrayLike,
    ) -> ConfidenceDelegator:
        x, _, h, y = _check_fit_inputs("ConfidenceDelegator.fit", features, model_probs,
                                       human_labels, labels)
        correct = (h == y).astype(np.int64)
        xs = self._standardise_fit(x)
        if correct.min() == correct.max():  # constant human: nothing to learn
            self.constant_ = float(correct[0])
            self.meta_ = None
        else:
            self.meta_ = make_meta_classifier(self.capacity, self.random_state).fit(xs, correct)
        return self

    def human_correct_proba(self, features: ArrayLike) -> NDArray[np.float64]:
        """The meta-classifier's ``P(human correct | features)``."""
        xs = self._standardise(features)
        if self.meta_ is None:
            return np.full(xs.shape[0], self.constant_)
        return self.meta_.predict_proba(xs)[:, 1]

    def defer(self, features: ArrayLike, model_probs: ArrayLike) -> NDArray[np.bool_]:
        pm = np.asarray(model_probs, dtype=np.float64)
        return self.human_correct_proba(features) > pm.max(axis=1)


class L2DSurrogateDelegator(_LearnedDelegator):
    """Learning to defer with the ``L_CE^α`` surrogate of Mozannar & Sontag (2020).

    The loss is a weighted multiclass cross-entropy over ``K + 1`` outputs, so it is fit
    exactly by any multiclass log-loss classifier with sample weights: each point appears
    with target ``y`` (weight ``α`` if the human is right, else 1) and, when the human is
    right, again with target ``⊥`` (weight 1).

    Parameters
    ----------
    capacity:
        ``"logistic"``, ``"boosting"`` or ``"mlp"``.
    alpha:
        The paper's ``α`` (``α = 1`` is the consistent surrogate; ``α < 1`` down-weights the
        classifier term where the human is right).
    random_state:
        Seed of the meta-classifier.

    Learned: ``meta_`` with ``K + 1`` classes (``K`` = defer).
    """

    def __init__(
        self, capacity: Capacity = "logistic", alpha: float = 1.0, random_state: int | None = 0
    ) -> None:
        super().__init__(capacity, random_state)
        self.alpha = alpha

    def fit(
        self, features: ArrayLike, model_probs: ArrayLike, human_labels: ArrayLike,
        labels: ArrayLike,
    ) -> L2DSurrogateDelegator:
        where = "L2DSurrogateDelegator.fit"
        x, pm, h, y = _check_fit_inputs(where, features, model_probs, human_labels, labels)
        if not float(self.alpha) > 0.0:
            raise InputError(f"The 'alpha' parameter of L2DSurrogateDelegator must be > 0. Got {self.alpha}.")
        k = pm.shape[1]
        xs = self._standardise_fit(x)
        right = h == y
        x_aug = np.concatenate([xs, xs[right]])
        t_aug = np.concatenate([y, np.full(int(right.sum()), k)])
        w_aug = np.concatenate([np.where(right, float(self.alpha), 1.0), np.ones(int(right.sum()))])
        self.n_classes_ = k
        self.meta_ = make_meta_classifier(self.capacity, self.random_state)
        self.meta_.fit(x_aug, t_aug, sample_weight=w_aug)
        return self

    def scores(self, features: ArrayLike) -> NDArray[np.float64]:
        """``(n, K + 1)`` surrogate probabilities ``g``; column ``K`` is "defer"."""
        xs = self._standardise(features)
        out = np.zeros((xs.shape[0], self.n_classes_ + 1))
        out[:, self.meta_.classes_.astype(int)] = self.meta_.predict_proba(xs)
        return out

    def defer(self, features: ArrayLike, model_probs: ArrayLike) -> NDArray[np.bool_]:
        g = self.scores(features)
        return g[:, -1] > g[:, :-1].max(axis=1)


class OneVsAllDelegator(_LearnedDelegator):
    """Learning to defer with the one-vs-all surrogate of Verma & Nalisnick (2022).

    ``K + 1`` binary logistic heads: ``σ(g_y)`` one-vs-rest for each class and ``σ(g_⊥)`` for
    "the human is right". The loss separates into those binary log-losses, so it is fit as a
    multilabel classifier (independent heads for logistic/boosting, shared hidden layers for
    the MLP). ``σ(g_⊥)`` estimates ``P(human correct | x)``; the paper's point is that it is
    calibrated for that, unlike the softmax surrogate.

    Learned: ``meta_`` (multilabel, ``K + 1`` outputs).
    """

    def fit(
        self, features: ArrayLike, model_probs: ArrayLike, human_labels: ArrayLike,
        labels: ArrayLike,
    ) -> OneVsAllDelegator:
        x, pm, h, y = _check_fit_inputs("OneVsAllDelegator.fit", features, model_probs,
                                        human_labels, labels)
        k = pm.shape[1]
        xs = self._standardise_fit(x)
        targets = np.zeros((x.shape[0], k + 1), dtype=np.int64)
        targets[np.arange(x.shape[0]), y] = 1
        targets[:, k] = h == y
        # a constant column cannot be fit by a binary classifier: remember it instead
        self.constant_cols_ = {
            j: float(targets[0, j]) for j in range(k + 1) if targets[:, j].min() == targets[:, j].max()
        }
        self.fit_cols_ = [j for j in range(k + 1) if j not in self.constant_cols_]
        self.n_classes_ = k
        self.meta_ = make_meta_classifier(self.capacity, self.random_state, multilabel=True)
        self.meta_.fit(xs, targets[:, self.fit_cols_])
        return self

    def scores(self, features: ArrayLike) -> NDArray[np.float64]:
        """``(n, K + 1)`` head probabilities ``σ(g)``; column ``K`` is ``P̂(human correct)``."""
        xs = self._standardise(features)
        out = np.zeros((xs.shape[0], self.n_classes_ + 1))
        for j, v in self.constant_cols_.items():
            out[:, j] = v
        out[:, self.fit_cols_] = self.meta_.predict_proba(xs)
        return out

    def defer(self, features: ArrayLike, model_probs: ArrayLike) -> NDArray[np.bool_]:
        g = self.scores(features)
        return g[:, -1] > g[:, :-1].max(axis=1)


class OracleDelegator:
    """Delegate to whoever has the higher true probability of being right.

    Needs the true correctness probabilities (known by construction on synthetic data;
    on CIFAR-10H the human's is the annotator agreement with the label). It is the ceiling a
    learned delegator can reach with infinite capacity and data; since it looks at no
    outcome, it keeps calibration like any delegator.
    """

    def fit(self, *args: Any, **kwargs: Any) -> OracleDelegator:
        self.fitted_ = True
        return self

    def defer(self, human_correct_prob: ArrayLike, model_correct_prob: ArrayLike) -> NDArray[np.bool_]:
        a = np.asarray(human_correct_prob, dtype=np.float64)
        b = np.asarray(model_correct_prob, dtype=np.float64)
        if a.shape != b.shape or a.ndim != 1:
            raise InputError(
                "OracleDelegator.defer needs two 1-D arrays of equal length. "
                f"Got {a.shape} and {b.shape}."
            )
        return a > b
