"""Percentile bootstrap confidence intervals for any statistic of one or more samples.

Written here rather than wrapped around ``scipy.stats.bootstrap`` so that the seeding
(``rng`` as Generator, int or None), the resampling scheme and the result type do not
depend on the scipy version; the tests cross-check it against scipy's percentile method.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar

__all__ = ["BootstrapResult", "bootstrap_ci", "check_random_state"]

# Resample in batches of about this many drawn elements, to bound memory on big inputs.
_BATCH_ELEMENTS = 2_000_000


@dataclass(frozen=True)
class BootstrapResult:
    """A bootstrap interval: ``estimate`` is the statistic on the original data,
    ``low``/``high`` the percentile bounds and ``standard_error`` the bootstrap SD."""

    estimate: float
    low: float
    high: float
    standard_error: float


def check_random_state(
    rng: np.random.Generator | int | None, name: str = "rng", where: str = ""
) -> np.random.Generator:
    """A numpy Generator from a Generator (used as is), an int seed >= 0, or None (fresh).

    The one way trustlab's library functions take randomness (scikit-learn's
    ``check_random_state``, for numpy Generators); anything else is an InputError.
    """
    owner = f" of {where}" if where else ""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, int | np.integer) and not isinstance(rng, bool)):
        if rng is not None and rng < 0:
            raise InputError(f"The '{name}' parameter{owner} must be a seed >= 0. Got {rng}.")
        return np.random.default_rng(rng)
    raise InputError(
        f"The '{name}' parameter{owner} must be a numpy Generator, an int seed or None. "
        f"Got {type(rng).__name__}."
    )


def _as_rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    return check_random_state(rng, "rng", "bootstrap_ci")


def _as_samples(data: ArrayLike | tuple[ArrayLike, ...], paired: bool) -> list[NDArray[Any]]:
    raw = list(data) if isinstance(data, tuple) else [data]
    if not raw:
        raise InputError("The 'data' parameter of bootstrap_ci must not be an empty tuple.")
    samples = [np.asarray(s) for s in raw]
    for i, s in enumerate(samples):
        if s.ndim == 0 or s.shape[0] == 0:
            raise InputError(
                f"Sample {i} of 'data' in bootstrap_ci must be a non-empty array. "
                f"Got shape {s.shape}."
            )
    lengths = {s.shape[0] for s in samples}
    if paired and len(lengths) > 1:
        raise InputError(
            "Paired resampling in bootstrap_ci needs samples of equal length. "
            f"Got lengths {[s.shape[0] for s in samples]}."
        )
    return samples


def _scalar(value: Any, what: str) -> float:
    arr = np.asarray(value)
    if arr.size != 1:
        raise InputError(
            f"The statistic passed to bootstrap_ci must return a scalar{what}. "
            f"Got shape {arr.shape}."
        )
    return float(arr.reshape(()))


def bootstrap_ci(
    data: ArrayLike | tuple[ArrayLike, ...],
    statistic: Callable[..., Any],
    *,
    n_resamples: int = 2000,
    confidence_level: float = 0.95,
    rng: np.random.Generator | int | None = None,
    paired: bool = False,
    vectorized: bool = False,
) -> BootstrapResult:
    """Percentile bootstrap interval for ``statistic`` at ``confidence_level``.

    ``data`` is one array or a tuple of arrays; rows (axis 0) are resampled with replacement.
    For a tuple, ``statistic(*samples)`` is called; with ``paired=True`` all samples share the
    same row indices (they must have equal length), otherwise each is resampled on its own.
    With ``vectorized=True`` the samples must be 1-D and ``statistic(*samples, axis=-1)`` gets
    ``(batch, n)`` arrays and must return ``(batch,)``; otherwise it is called per resample.
    The interval assumes the statistic's bootstrap distribution is a fair stand-in for its
    sampling distribution (large samples, smooth statistics); it is not a finite-sample bound.
    """
    where = "bootstrap_ci"
    if not callable(statistic):
        raise InputError(
            f"The 'statistic' parameter of {where} must be callable. Got {type(statistic).__name__}."
        )
    n_resamples = check_scalar(n_resamples, "n_resamples", where, kind=int, lo=2)
    if (
        isinstance(confidence_level, bool)
        or not isinstance(confidence_level, int | float | np.floating)
        or not 0.0 < confidence_level < 1.0
    ):
        raise InputError(
            f"The 'confidence_level' parameter of {where} must be in (0, 1). "
            f"Got {confidence_level}."
        )
    samples = _as_samples(data, paired)
    if vectorized and any(s.ndim != 1 for s in samples):
        raise InputError(
            f"vectorized=True in {where} needs 1-D samples. "
            f"Got shapes {[s.shape for s in samples]}; pass vectorized=False."
        )
    generator = _as_rng(rng)
    original = statistic(*samples, axis=-1) if vectorized else statistic(*samples)
    estimate = _scalar(original, "")

    n_resamples = int(n_resamples)
    lengths = [s.shape[0] for s in samples]
    row_size = max(1, sum(int(np.prod(s.shape)) for s in samples))
    batch = max(1, min(n_resamples, _BATCH_ELEMENTS // row_size))
    theta = np.empty(n_resamples)
    for start in range(0, n_resamples, batch):
        b = min(batch, n_resamples - start)
        if paired:
            shared = generator.integers(0, lengths[0], size=(b, lengths[0]))
            indices = [shared] * len(samples)
        else:
            indices = [generator.integers(0, n, size=(b, n)) for n in lengths]
        if vectorized:
            values = np.asarray(
                statistic(*(s[i] for s, i in zip(samples, indices, strict=True)), axis=-1)
            )
            if values.shape != (b,):
                raise InputError(
                    f"With vectorized=True the statistic in {where} must reduce axis=-1 of "
                    f"({b}, n) inputs to shape ({b},). Got shape {values.shape}."
                )
            theta[start : start + b] = values
        else:
            for j in range(b):
                resampled = (s[i[j]] for s, i in zip(samples, indices, strict=True))
                theta[start + j] = _scalar(statistic(*resampled), " for every resample")

    tail = (1.0 - float(confidence_level)) / 2.0
    low, high = np.percentile(theta, [100.0 * tail, 100.0 * (1.0 - tail)])
    return BootstrapResult(
        estimate=estimate,
        low=float(low),
        high=float(high),
        standard_error=float(np.std(theta, ddof=1)),
    )
