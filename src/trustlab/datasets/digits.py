"""The 8x8 handwritten digits (UCI, bundled with scikit-learn): one loader for every method.

1,797 grey-scale images of the digits 0-9 (Alpaydin & Kaynak, UCI "Optical Recognition of
Handwritten Digits", CC BY 4.0), shipped inside scikit-learn, so they need no download. Pixel
values are counts 0-16 of set pixels in 4x4 blocks of the original 32x32 bitmaps.

:func:`load_digits` returns a :class:`Digits` with the images in [0, 1] and the labels;
``Digits.counts`` gives scikit-learn's raw ``(n, 64)`` 0-16 features (what feature pipelines such as
PCA were fitted on), ``Digits.split`` a seeded train/test split. Used by hcc (a classifier whose
held-out probabilities feed conformal sets), ipb (a class-conditional generator) and jaguar
(the private-inference CNN).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from trustlab.core.errors import InputError

__all__ = ["DIGIT_CLASSES", "Digits", "load_digits"]

DIGIT_CLASSES = tuple(str(k) for k in range(10))


@dataclass(frozen=True)
class Digits:
    """Images ``(n, 8, 8)`` in [0, 1] and integer labels 0-9 ``(n,)``."""

    images: NDArray[np.float64]
    labels: NDArray[np.int64]

    def __post_init__(self) -> None:
        if self.images.ndim != 3 or self.images.shape[1:] != (8, 8):
            raise InputError(f"Digits.images must have shape (n, 8, 8). Got {self.images.shape}.")
        if self.labels.shape != (self.images.shape[0],):
            raise InputError(
                f"Digits.labels must have shape ({self.images.shape[0]},). Got {self.labels.shape}."
            )

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @property
    def features(self) -> NDArray[np.float64]:
        """Flattened images ``(n, 64)`` in [0, 1]."""
        return self.images.reshape(len(self), 64)

    @property
    def counts(self) -> NDArray[np.float64]:
        """scikit-learn's ``(n, 64)`` features: counts 0-16 (``load_digits(return_X_y=True)[0]``)."""
        return np.rint(self.features * 16.0)

    @property
    def channels_first(self) -> NDArray[np.float64]:
        """Images as ``(n, 1, 8, 8)`` (a CNN's NCHW layout)."""
        return self.images[:, None]

    def subset(self, index: NDArray[np.integer] | slice) -> Digits:
        return Digits(self.images[index], self.labels[index])

    def split(
        self, train_fraction: float, rng: np.random.Generator | int
    ) -> tuple[Digits, Digits]:
        """A random ``(train, test)`` split: the first ``int(train_fraction * n)`` of a permutation.

        ``rng`` is a Generator (one permutation is drawn from it) or a seed.
        """
        if isinstance(train_fraction, bool) or not 0.0 < float(train_fraction) < 1.0:
            raise InputError(
                f"The 'train_fraction' parameter of Digits.split must be in (0, 1). "
                f"Got {train_fraction!r}."
            )
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        order = gen.permutation(len(self))
        cut = int(train_fraction * len(self))
        if cut == 0 or cut == len(self):
            raise InputError(f"Digits.split: train_fraction {train_fraction} leaves a side empty.")
        return self.subset(order[:cut]), self.subset(order[cut:])


def load_digits(*, classes: tuple[int, ...] | None = None) -> Digits:
    """The 1,797 digits in scikit-learn's order; ``classes`` keeps only those digits."""
    from sklearn.datasets import load_digits as _sk_load_digits

    bunch = _sk_load_digits()
    digits = Digits(np.asarray(bunch.images, dtype=np.float64) / 16.0,
                    np.asarray(bunch.target, dtype=np.int64))
    if classes is None:
        return digits
    wanted = sorted({int(c) for c in classes})
    if not wanted or wanted[0] < 0 or wanted[-1] > 9:
        raise InputError(f"The 'classes' parameter of load_digits must be digits 0-9. Got {classes!r}.")
    return digits.subset(np.flatnonzero(np.isin(digits.labels, wanted)))
