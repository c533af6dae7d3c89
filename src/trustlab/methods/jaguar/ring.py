"""Arithmetic in ``Z_{2^K}[X]/(X^N+1)`` on uint64 arrays, and exact slow references.

Coefficients are uint64 words; for ``K < 64`` they are kept reduced by a mask, for ``K = 64``
the hardware wrap-around *is* the reduction. Multiplying by the monomial ``X^k`` is a
negacyclic rotation: coefficients that pass ``X^N`` come back negated. The reference
products use Python integers (numpy object arrays) and are exact for any modulus.
"""

from __future__ import annotations

import numpy as np

from trustlab.core.errors import InputError
from trustlab.methods.jaguar.checks import as_int_array, check_int

__all__ = [
    "centered",
    "mask",
    "monomial_mul",
    "negacyclic_mul_exact",
    "rotation_stack",
    "to_ring",
]


def mask(values: np.ndarray, k: int) -> np.ndarray:
    """Reduce uint64 values mod ``2^k`` (no-op at ``k = 64``)."""
    if k >= 64:
        return values
    return values & np.uint64((1 << k) - 1)


def to_ring(values: np.ndarray | int, k: int) -> np.ndarray:
    """Signed integers (int64 or Python ints) to their residues mod ``2^k`` as uint64."""
    k = check_int(k, "k", "to_ring", lo=1, hi=64)
    arr = values if isinstance(values, np.ndarray) and values.dtype.kind in "iu" else (
        as_int_array(values, "values", "to_ring", allow_empty=True))
    if arr.dtype == object:
        m = (1 << k) - 1
        return np.array([int(v) & m for v in arr.ravel()], dtype=np.uint64).reshape(arr.shape)
    return mask(arr.astype(np.int64).view(np.uint64) if arr.dtype != np.uint64 else arr, k)


def centered(values: np.ndarray, k: int) -> np.ndarray:
    """Residues mod ``2^k`` (uint64) to the signed representative in ``[-2^(k-1), 2^(k-1))``."""
    k = check_int(k, "k", "centered", lo=1, hi=64)
    if not (isinstance(values, np.ndarray) and values.dtype.kind in "iu"):
        values = as_int_array(values, "values", "centered", allow_empty=True, lo=0, hi=2**64 - 1)
    v = mask(np.asarray(values).astype(np.uint64, copy=False), k)
    if k >= 64:
        return v.view(np.int64)
    half = np.uint64(1 << (k - 1))
    return v.astype(np.int64) - np.where(v >= half, np.int64(1 << k), np.int64(0))


def monomial_mul(poly: np.ndarray, shift: int) -> np.ndarray:
    """``X^shift * poly`` in ``Z_{2^64}[X]/(X^N+1)`` over the last axis (negacyclic rotation)."""
    shift = check_int(shift, "shift", "monomial_mul")
    if not isinstance(poly, np.ndarray) or poly.dtype != np.uint64 or poly.ndim < 1:
        raise InputError("The 'poly' parameter of monomial_mul must be a uint64 array of ring "
                         f"elements (use to_ring). Got {getattr(poly, 'dtype', type(poly).__name__)}.")
    n = poly.shape[-1]
    shift %= 2 * n
    sign_flip = shift >= n
    shift %= n
    out = np.empty_like(poly)
    out[..., shift:] = poly[..., : n - shift]
    out[..., :shift] = np.negative(poly[..., n - shift :])  # wrap-around negation mod 2^64
    if sign_flip:
        np.negative(out, out=out)
    return out


def rotation_stack(poly: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """``X^shift * poly`` for every shift in ``shifts`` (all in ``[0, N)``), stacked on axis -2.

    One gather with a sign table: ``poly`` (..., N) -> (..., len(shifts), N).
    """
    n = poly.shape[-1]
    shifts = np.asarray(shifts, dtype=np.int64)
    idx = np.arange(n)[None, :] - shifts[:, None]  # coefficient j of X^s p is p[j - s]
    wrapped = idx < 0
    gathered = poly[..., idx % n]
    np.negative(gathered, out=gathered, where=wrapped)
    return gathered


def negacyclic_mul_exact(a: np.ndarray, b: np.ndarray, modulus: int | None = None) -> np.ndarray:
    """Schoolbook product in ``Z[X]/(X^N+1)`` with Python integers (the slow exact reference).

    ``a`` and ``b`` are 1-D integer arrays (any dtype) of the same length N; reduced mod
    ``modulus`` (a positive integer) when given.
    """
    where = "negacyclic_mul_exact"
    a_arr = as_int_array(a, "a", where, ndim=1)
    b_arr = as_int_array(b, "b", where, shape=(a_arr.shape[0],))
    if modulus is not None:
        modulus = check_int(modulus, "modulus", where, lo=1)
    a_int = [int(x) for x in a_arr]
    b_int = [int(x) for x in b_arr]
    n = len(a_int)
    out = [0] * n
    for i, ai in enumerate(a_int):
        if ai == 0:
            continue
        for j, bj in enumerate(b_int):
            k = i + j
            if k < n:
                out[k] += ai * bj
            else:
                out[k - n] -= ai * bj
    if modulus is not None:
        out = [v % modulus for v in out]
    return np.array(out, dtype=object)
