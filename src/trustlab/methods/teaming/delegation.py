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
from trustlab.core.validation import (
    as_float_array,
    check_choice,
    check_labels,
    check_probs,
    check_samples,
    check_scalar,
)

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

    where = "make_meta_classifier"
    check_choice(capacity, "capacity", CAPACITIES, where)
    random_state = _check_seed(random_state, where)
    check_choice(multilabel, "multilabel", (True, False), where)
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
    return OneVsRestClassifier(est) if multilabel else est


def _check_seed(random_state: int | None, where: str) -> int | None:
    if random_state is None:
        return None
    return check_scalar(random_state, "random_state", where, kind=int, lo=0, hi=2**32 - 1)


def delegation_features(features: ArrayLike, model_probs: ArrayLike) -> NDArray[np.float64]:
    """What a delegator sees: the features next to the model's log-probabilities.

    The learned-to-defer surrogates need the model's output to learn their class heads; the
    human's output is never a feature (the delegator decides before asking the human).
    """
    where = "delegation_features"
    x = check_samples(features, "features", where, min_n=0)
    pm = check_probs(model_probs, "model_probs", where, n_samples=x.shape[0])
    return np.concatenate([x, np.log(np.clip(pm, 1e-6, 1.0))], axis=1)


def team_probs(
    defer: ArrayLike, model_probs: ArrayLike, human_probs: ArrayLike
) -> NDArray[np.float64]:
    """The delegated team's probabilities: the human's row where ``defer``, else the model's."""
    where = "team_probs"
    pm = check_probs(model_probs, "model_probs", where)
    ph = check_probs(human_probs, "human_probs", where, n_samples=pm.shape[0], n_classes=pm.shape[1])
    d = _check_defer(defer, pm.shape[0], where)
    return np.where(d[:, None], ph, pm)


def _check_defer(defer: ArrayLike, n: int, where: str) -> NDArray[np.bool_]:
    d = as_float_array(defer, "defer", where, ndim=1, allow_bool=True)
    if d.shape[0] != n or not np.all((d == 0) | (d == 1)):
        raise InputError(
            f"The 'defer' parameter of {where} must be {n} booleans (or 0/1), one per row. "
            f"Got shape {d.shape}" + ("" if np.all((d == 0) | (d == 1)) else " with other values")
            + "."
        )
    return d.astype(bool)


def _check_fit_inputs(
    where: str, features: ArrayLike, model_probs: ArrayLike, human_labels: ArrayLike,
    labels: ArrayLike,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.intp], NDArray[np.intp]]:
    x = check_samples(features, "features", where, min_n=2)
    pm = check_probs(model_probs, "model_probs", where, n_samples=x.shape[0])
    n, k = pm.shape
    h = check_labels(human_labels, "human_labels", where, n_samples=n, n_classes=k)
    y = check_labels(labels, "labels", where, n_samples=n, n_classes=k)
    return x, pm, h.astype(np.intp), y.astype(np.intp)


class _LearnedDelegator:
    """Shared plumbing: standardise the features, expose ``defer`` and ``predict_proba``."""

    def __init__(self, capacity: Capacity = "logistic", random_state: int | None = 0) -> None:
        self.capacity = capacity
        self.random_state = random_state

    def _check_settings(self, where: str) -> None:
        check_choice(self.capacity, "capacity", CAPACITIES, where)
        _check_seed(self.random_state, where)

    def _standardise_fit(self, x: NDArray[np.float64], k: int) -> NDArray[np.float64]:
        self.n_classes_ = k
        self.mean_ = x.mean(axis=0)
        self.scale_ = np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
        return (x - self.mean_) / self.scale_

    def _standardise(self, features: ArrayLike) -> NDArray[np.float64]:
        if not hasattr(self, "mean_"):
            raise NotFittedError(
                f"{type(self).__name__} needs fit(features, model_probs, human_labels, labels) first."
            )
        x = check_samples(
            features, "features", f"{type(self).__name__}.defer", n_features=self.mean_.size
        )
        return (x - self.mean_) / self.scale_

    def _inputs(
        self, features: ArrayLike, model_probs: ArrayLike
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Standardised features and the model's probabilities, checked against each other."""
        xs = self._standardise(features)
        pm = check_probs(
            model_probs, "model_probs", f"{type(self).__name__}.defer", n_samples=xs.shape[0],
            n_classes=self.n_classes_,
        )
        return xs, pm

    def defer(self, features: ArrayLike, model_probs: ArrayLike) -> NDArray[np.bool_]:
        raise NotImplementedError

    def predict_proba(
        self, features: ArrayLike, model_probs: ArrayLike, human_probs: ArrayLike
    ) -> NDArray[np.float64]:
        """The team's probabilities: the human's row where deferred, else the model's."""
        defer = self.defer(features, model_probs)
        return team_probs(defer, model_probs, human_probs)


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
        where = "ConfidenceDelegator.fit"
        self._check_settings(where)
        x, pm, h, y = _check_fit_inputs(where, features, model_probs, human_labels, labels)
        correct = (h == y).astype(np.int64)
        xs = self._standardise_fit(x, pm.shape[1])
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
        _, pm = self._inputs(features, model_probs)
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
        self._check_settings(where)
        check_scalar(self.alpha, "alpha", "L2DSurrogateDelegator", lo=0.0, closed="neither")
        x, pm, h, y = _check_fit_inputs(where, features, model_probs, human_labels, labels)
        k = pm.shape[1]
        xs = self._standardise_fit(x, k)
        right = h == y
        x_aug = np.concatenate([xs, xs[right]])
        t_aug = np.concatenate([y, np.full(int(right.sum()), k)])
        w_aug = np.concatenate([np.where(right, float(self.alpha), 1.0), np.ones(int(right.sum()))])
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
        self._inputs(features, model_probs)  # the model's rows must match (they are not used)
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
        where = "OneVsAllDelegator.fit"
        self._check_settings(where)
        x, pm, h, y = _check_fit_inputs(where, features, model_probs, human_labels, labels)
        k = pm.shape[1]
        xs = self._standardise_fit(x, k)
        targets = np.zeros((x.shape[0], k + 1), dtype=np.int64)
        targets[np.arange(x.shape[0]), y] = 1
        targets[:, k] = h == y
        # a constant column cannot be fit by a binary classifier: remember it instead
        self.constant_cols_ = {
            j: float(targets[0, j]) for j in range(k + 1) if targets[:, j].min() == targets[:, j].max()
        }
        self.fit_cols_ = [j for j in range(k + 1) if j not in self.constant_cols_]
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
        self._inputs(features, model_probs)  # the model's rows must match (they are not used)
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
        where = "OracleDelegator.defer"
        a = as_float_array(human_correct_prob, "human_correct_prob", where, ndim=1)
        b = as_float_array(model_correct_prob, "model_correct_prob", where, ndim=1)
        if a.shape != b.shape:
            raise InputError(
                f"The 'human_correct_prob' and 'model_correct_prob' parameters of {where} must "
                f"have one length. Got {a.shape[0]} and {b.shape[0]}."
            )
        for name, v in (("human_correct_prob", a), ("model_correct_prob", b)):
            if np.any((v < 0) | (v > 1)):
                raise InputError(
                    f"The '{name}' parameter of {where} must be probabilities in [0, 1]. "
                    f"Got values in [{v.min():.3g}, {v.max():.3g}]."
                )
        return a > b
