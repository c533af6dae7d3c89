"""Max- and average-pooling on shares (square windows, stride = window, no padding).

``max_pool`` reduces the window by a tree of pairwise maxima, ``max(a, b) = b + ReLU(a - b)``
(one ReLU per pair, all pairs of a level in one batch): needs ``|a - b| < 2^(ell-1)``.
``sum_pool`` is local. ``avg_pool`` is the sum followed by the known-MSB truncation by
``log2(k*k)`` bits (non-negative inputs, power-of-two window area): ``floor(mean) - {0, 1}``.
The network converter instead folds ``1/k^2`` into the next linear layer (exact); see
``network``.
"""

from __future__ import annotations

import numpy as np

from trustlab.core.errors import InputError
from trustlab.methods.jaguar.checks import as_ring_array, check_int
from trustlab.methods.jaguar.party import Party, check_party
from trustlab.methods.jaguar.relu import relu, truncate
from trustlab.methods.jaguar.ring import mask

__all__ = ["avg_pool", "max_pool", "sum_pool", "windows"]


def windows(x: np.ndarray, k: int) -> np.ndarray:
    """(..., C, H, W) -> (..., C, H//k, W//k, k*k): the pooling windows (floor on the borders)."""
    x = np.asarray(x)
    if x.ndim < 3:
        raise InputError(f"The 'x' parameter of a pooling layer must be (..., C, H, W). Got shape "
                         f"{x.shape}.")
    *lead, c, h, w = x.shape
    if k < 1 or h < k or w < k:
        raise InputError(f"The pooling window 'k'={k} does not fit an input of {h}x{w}.")
    ho, wo = h // k, w // k
    x = x[..., : ho * k, : wo * k].reshape(*lead, c, ho, k, wo, k)
    return np.moveaxis(x, -3, -2).reshape(*lead, c, ho, wo, k * k)


def _args(x: np.ndarray, k: int, ell: int, where: str) -> tuple[np.ndarray, int, int]:
    ell = check_int(ell, "ell", where, lo=2, hi=64)
    k = check_int(k, "k", where, lo=1)
    return as_ring_array(x, "x", where, ell, allow_empty=False), k, ell


def max_pool(p: Party, x: np.ndarray, k: int, ell: int, m: int = 4) -> np.ndarray:
    """Shares of the window maxima (mod ``2^ell``)."""
    check_party(p, "max_pool")
    x, k, ell = _args(x, k, ell, "max_pool")
    m = check_int(m, "m", "max_pool", lo=1, hi=8)
    cur = mask(windows(x, k).astype(np.uint64), ell)
    while cur.shape[-1] > 1:
        half = cur.shape[-1] // 2
        a, b = cur[..., :half], cur[..., half : 2 * half]
        best = mask(b + relu(p, mask(a - b, ell), ell, m), ell)
        if cur.shape[-1] % 2:
            best = np.concatenate([best, cur[..., -1:]], axis=-1)
        cur = best
    return cur[..., 0]


def sum_pool(x: np.ndarray, k: int, ell: int) -> np.ndarray:
    """Window sums (local; exact mod ``2^ell``)."""
    x, k, ell = _args(x, k, ell, "sum_pool")
    return mask(windows(x, k).astype(np.uint64).sum(axis=-1, dtype=np.uint64), ell)


def avg_pool(p: Party, x: np.ndarray, k: int, ell: int) -> np.ndarray:
    """``floor(window mean) - {0, 1}`` for non-negative inputs; ``k*k`` a power of two."""
    check_party(p, "avg_pool")
    x, k, ell = _args(x, k, ell, "avg_pool")
    area = k * k
    if area & (area - 1):
        raise InputError(f"The 'k' parameter of avg_pool must make k*k a power of two (it "
                         f"divides by truncation). Got {k}.")
    s = sum_pool(x, k, ell)
    return s if area == 1 else truncate(p, s, ell, area.bit_length() - 1)
