"""A synthetic team whose human and model are calibrated per cell of a known partition.

Features ``x`` are uniform on ``[0, 1]^d``; the first two coordinates fall in a
``grid × grid`` checkerboard whose squares are the cells. Labels are uniform over ``K``
classes and independent of ``x``; what each teammate knows about them is set per cell:

* the **human** reports label ``h``, right with probability ``a(cell)`` and otherwise a
  uniformly drawn wrong class, with stated confidence ``a(cell) + overconfidence`` on ``h``
  (the rest spread evenly). With ``overconfidence = 0`` the human is exactly calibrated on
  every cell: ``P(y = h | cell, h) = a(cell)``.
* the **model** sees ``z = μ(cell)·e_y + ε`` with ``ε ~ N(0, I_K)`` and outputs
  ``softmax(μ(cell)·z)``, which is the exact posterior ``P(y | z)``, hence calibrated on
  every partition that is a function of ``(x, z)``. ``model_temperature ≠ 1`` divides the
  logits by it, to make the model over- (<1) or under-confident (>1).

Human and model noises are independent given ``y`` (the conditional-independence
assumption of the confusion-matrix combination). On "light" squares (``(i + j)`` even) the
human is strong, on "dark" squares weak; the model's strength can differ between them too
(by default it does not, so the model's output says nothing about the cell). The best
delegator must learn the checkerboard (the default ``grid = 2`` is XOR): a linear
meta-classifier cannot, which is the capacity demand.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, model_validator
from scipy.special import softmax

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar
from trustlab.methods.teaming.partitions import labels_to_probs
from trustlab.stats import check_random_state

__all__ = ["SyntheticTeam", "TeamingData", "make_teaming_data"]


@dataclass(frozen=True)
class TeamingData:
    """One synthetic (or loaded) team data set; every array has ``n`` rows.

    ``human_correct_prob`` and ``model_correct_prob`` are the true probabilities that each
    teammate's label is right given what the delegator may see (known here by construction).
    """

    features: NDArray[np.float64]
    labels: NDArray[np.int64]
    cells: NDArray[np.int64]
    human_labels: NDArray[np.int64]
    human_probs: NDArray[np.float64]
    model_probs: NDArray[np.float64]
    human_correct_prob: NDArray[np.float64]
    model_correct_prob: NDArray[np.float64]

    def __post_init__(self) -> None:
        n = len(self.labels)
        bad = [k for k in self.__dataclass_fields__ if len(getattr(self, k)) != n]
        if bad:
            raise InputError(
                f"Every array of a TeamingData must have one row per point ({n}); "
                f"{', '.join(bad)} differ."
            )

    @property
    def n(self) -> int:
        return int(self.labels.size)

    @property
    def n_classes(self) -> int:
        return int(self.model_probs.shape[1])

    def subset(self, idx: NDArray[np.intp]) -> TeamingData:
        """The rows ``idx`` of every array (for splits)."""
        return TeamingData(**{k: getattr(self, k)[idx] for k in self.__dataclass_fields__})


def _pair(value: object, name: str, lo: float, hi: float) -> tuple[float, float]:
    """A (light, dark) pair of numbers in [lo, hi]."""
    where = "make_teaming_data"
    if not isinstance(value, tuple | list | np.ndarray) or len(value) != 2:
        raise InputError(
            f"The '{name}' parameter of {where} must be a pair (light, dark). Got {value!r}."
        )
    return tuple(check_scalar(v, name, where, lo=lo, hi=hi) for v in value)  # type: ignore[return-value]


def make_teaming_data(
    n: int = 10_000,
    *,
    n_classes: int = 10,
    grid: int = 2,
    n_noise_features: int = 0,
    human_accuracy: tuple[float, float] = (0.95, 0.4),
    model_strength: tuple[float, float] = (2.3, 2.3),
    human_overconfidence: float = 0.0,
    model_temperature: float = 1.0,
    rng: np.random.Generator | int | None = 0,
) -> TeamingData:
    """Draw a synthetic human-AI team calibrated per checkerboard cell.

    Parameters
    ----------
    n:
        Number of points.
    n_classes:
        ``K``.
    grid:
        The checkerboard has ``grid × grid`` cells on the first two features (``grid = 1``
        makes one cell: no structure to learn).
    n_noise_features:
        Extra uniform features that carry no information.
    human_accuracy:
        ``a`` on (light, dark) squares: the human's probability of being right.
    model_strength:
        ``μ`` on (light, dark) squares: the model's signal-to-noise ratio.
    human_overconfidence:
        Added to the human's stated confidence (0 = calibrated; clipped to ``[1/K, 1]``).
    model_temperature:
        Divides the model's logits (1 = calibrated).
    rng:
        numpy Generator or seed.
    """
    where = "make_teaming_data"
    n = check_scalar(n, "n", where, kind=int, lo=2)
    n_classes = check_scalar(n_classes, "n_classes", where, kind=int, lo=2)
    grid = check_scalar(grid, "grid", where, kind=int, lo=1)
    n_noise_features = check_scalar(n_noise_features, "n_noise_features", where, kind=int, lo=0)
    human_accuracy = _pair(human_accuracy, "human_accuracy", 1.0 / n_classes, 1.0)
    model_strength = _pair(model_strength, "model_strength", 0.0, 50.0)
    human_overconfidence = check_scalar(
        human_overconfidence, "human_overconfidence", where, lo=-1.0, hi=1.0
    )
    model_temperature = check_scalar(
        model_temperature, "model_temperature", where, lo=0.0, closed="neither"
    )
    gen = check_random_state(rng, "rng", where)
    k = int(n_classes)

    x = gen.uniform(0.0, 1.0, size=(n, 2 + int(n_noise_features)))
    ij = np.minimum((x[:, :2] * grid).astype(np.int64), grid - 1)
    cells = ij[:, 0] * grid + ij[:, 1]
    dark = (ij.sum(axis=1) % 2).astype(np.intp)
    a = np.asarray(human_accuracy, dtype=np.float64)[dark]
    mu = np.asarray(model_strength, dtype=np.float64)[dark]

    y = gen.integers(0, k, size=n)
    wrong = (y + gen.integers(1, k, size=n)) % k  # uniform over the other classes
    human_right = gen.uniform(size=n) < a
    h = np.where(human_right, y, wrong)
    stated = np.clip(a + human_overconfidence, 1.0 / k, 1.0)
    human_probs = labels_to_probs(h, stated, k)

    z = gen.normal(size=(n, k))
    z[np.arange(n), y] += mu
    model_probs = softmax(mu[:, None] * z / model_temperature, axis=1)
    true_posterior = softmax(mu[:, None] * z, axis=1)
    model_pred = np.argmax(model_probs, axis=1)
    return TeamingData(
        features=x,
        labels=y.astype(np.int64),
        cells=cells.astype(np.int64),
        human_labels=h.astype(np.int64),
        human_probs=human_probs,
        model_probs=model_probs,
        human_correct_prob=a,
        model_correct_prob=true_posterior[np.arange(n), model_pred],
    )


class SyntheticTeam(BaseModel):
    """The settings of :func:`make_teaming_data` as a config section, checked as a whole."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_classes: int = Field(10, ge=2, le=100, description="Number of classes K.")
    grid: int = Field(2, ge=1, le=8, description="The checkerboard has grid x grid cells.")
    human_accuracy_light: float = Field(
        0.95, gt=0.0, le=1.0, description="Human accuracy on light cells (must be >= 1/K)."
    )
    human_accuracy_dark: float = Field(
        0.4, gt=0.0, le=1.0, description="Human accuracy on dark cells (must be >= 1/K)."
    )
    model_strength: float = Field(
        2.3, ge=0.0, lt=50.0, description="Signal-to-noise ratio mu of the model (all cells)."
    )
    human_overconfidence: float = Field(
        0.0, ge=-0.5, le=0.5, description="Added to the human's stated confidence (0 = calibrated)."
    )

    @model_validator(mode="after")
    def _accuracies_above_chance(self) -> SyntheticTeam:
        low = min(self.human_accuracy_light, self.human_accuracy_dark)
        if low < 1.0 / self.n_classes:
            raise ValueError(
                f"human accuracies must be >= 1/n_classes = {1.0 / self.n_classes:.3g}; got {low}"
            )
        return self

    def generate(self, n: int, rng: np.random.Generator | int | None = 0) -> TeamingData:
        """``n`` points of this team (see :func:`make_teaming_data`)."""
        return make_teaming_data(
            n, n_classes=self.n_classes, grid=self.grid,
            human_accuracy=(self.human_accuracy_light, self.human_accuracy_dark),
            model_strength=(self.model_strength, self.model_strength),
            human_overconfidence=self.human_overconfidence, rng=rng,
        )
