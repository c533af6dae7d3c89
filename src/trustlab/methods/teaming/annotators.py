"""A human teammate from crowd votes: one simulated annotator per item, stating its precision.

CIFAR-10H-style data give, per image, the votes of about 50 annotators. A *human* for the
teaming experiments is one vote drawn per image (:func:`trustlab.datasets.cifar10h.sample_human_labels`);
what that human says about its own certainty is modelled here:

* :class:`PrecisionAnnotator` states, for label ``h``, the annotator's precision
  ``P(y = h | h)`` measured on a fit split (Beta(1, 1)-smoothed, floored at ``1/K`` so the
  label stays the top class). By construction it is calibrated with respect to the partition
  by the annotator's label -- the strongest calibration a human who reports only "label, how
  sure" can have without seeing the item.
* :func:`votes_team` assembles a fit and an evaluation :class:`TeamingData` from model
  probabilities, true labels and vote counts: the model temperature-scaled on the fit split,
  cells = the scaled model's predicted class x confidence bins, and the human's true chance of
  being right = the share of votes for the true label (what the oracle delegator knows).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.validation import as_float_array, check_labels, check_probs, check_scalar
from trustlab.methods.teaming.combination import TemperatureScaling
from trustlab.methods.teaming.partitions import confidence_class_cells, labels_to_probs
from trustlab.methods.teaming.synthetic import TeamingData

__all__ = ["PrecisionAnnotator", "votes_team"]


class PrecisionAnnotator:
    """A labeller whose stated confidence in label ``h`` is its precision ``P(y = h | h)``.

    Parameters
    ----------
    n_classes:
        ``K``.
    prior:
        Beta prior ``(a, b)`` on each label's precision: ``(hits + a) / (told + a + b)``.

    Learned: ``precision_`` (``(K,)``), ``told_`` (how often each label was given on the fit
    split).
    """

    def __init__(self, n_classes: int, prior: tuple[float, float] = (1.0, 1.0)) -> None:
        self.n_classes = n_classes
        self.prior = prior

    def fit(self, human_labels: ArrayLike, labels: ArrayLike) -> PrecisionAnnotator:
        where = "PrecisionAnnotator.fit"
        k = check_scalar(self.n_classes, "n_classes", "PrecisionAnnotator", kind=int, lo=2)
        if not isinstance(self.prior, tuple | list) or len(self.prior) != 2:
            raise InputError(f"The 'prior' parameter of {where} must be two numbers > 0. Got {self.prior!r}.")
        a, b = (check_scalar(v, "prior", where, lo=0.0, closed="neither") for v in self.prior)
        h = check_labels(human_labels, "human_labels", where, n_classes=k)
        y = check_labels(labels, "labels", where, n_samples=h.shape[0], n_classes=k)
        hits = np.bincount(h, weights=(h == y).astype(np.float64), minlength=k)
        self.told_ = np.bincount(h, minlength=k)
        self.precision_ = np.clip((hits + a) / (self.told_ + a + b), 1.0 / k, 1.0)
        return self

    def predict_proba(self, human_labels: ArrayLike) -> NDArray[np.float64]:
        """Probability rows: the stated precision on the label, the rest spread evenly."""
        if not hasattr(self, "precision_"):
            raise NotFittedError("PrecisionAnnotator.predict_proba needs fit(human_labels, labels) first.")
        h = check_labels(
            human_labels, "human_labels", "PrecisionAnnotator.predict_proba", n_classes=self.n_classes
        )
        return labels_to_probs(h, self.precision_[h], self.n_classes)


def votes_team(
    model_probs: ArrayLike,
    labels: ArrayLike,
    human_counts: ArrayLike,
    human_labels: ArrayLike,
    fit_idx: ArrayLike,
    eval_idx: ArrayLike,
    *,
    n_bins: int = 2,
) -> tuple[TeamingData, TeamingData]:
    """Fit and evaluation teams from crowd votes (see the module docstring).

    Everything learned (the model's temperature, the annotator's precisions) uses ``fit_idx``
    only; ``fit_idx`` and ``eval_idx`` must be disjoint.
    """
    where = "votes_team"
    pm = check_probs(model_probs, "model_probs", where)
    n, k = pm.shape
    y = check_labels(labels, "labels", where, n_samples=n, n_classes=k)
    h = check_labels(human_labels, "human_labels", where, n_samples=n, n_classes=k)
    counts = as_float_array(human_counts, "human_counts", where, ndim=2)
    if counts.shape != (n, k):
        raise InputError(
            f"The 'human_counts' parameter of {where} must have shape ({n}, {k}) like "
            f"model_probs. Got {counts.shape}."
        )
    if (counts < 0).any() or (counts.sum(axis=1) <= 0).any():
        raise InputError(
            f"The 'human_counts' parameter of {where} must be vote counts >= 0 with a vote per row."
        )
    fit = check_labels(fit_idx, "fit_idx", where, n_classes=n)
    ev = check_labels(eval_idx, "eval_idx", where, n_classes=n)
    for name, idx in (("fit_idx", fit), ("eval_idx", ev)):
        if np.unique(idx).size != idx.size:
            raise InputError(f"The '{name}' parameter of {where} repeats a row.")
    if np.intersect1d(fit, ev).size:
        raise InputError(f"The 'fit_idx' and 'eval_idx' parameters of {where} must be disjoint.")
    model = TemperatureScaling().fit(pm[fit], y[fit]).transform(pm)
    human_probs = PrecisionAnnotator(k).fit(h[fit], y[fit]).predict_proba(h)
    share_right = counts[np.arange(n), y] / counts.sum(axis=1)
    data = TeamingData(
        features=np.zeros((n, 0)), labels=y.astype(np.int64),
        cells=confidence_class_cells(model, n_bins=n_bins),
        human_labels=h.astype(np.int64), human_probs=human_probs, model_probs=model,
        human_correct_prob=share_right, model_correct_prob=model.max(axis=1),
    )
    return data.subset(fit), data.subset(ev)
