"""Input checks of jaguar's public API, on top of ``trustlab.core.validation``.

Jaguar's arrays are integers (shares, weights, ring elements): a float that is not a whole
number, NaN, a boolean mask, a string or a ragged list is an ``InputError`` naming the
parameter, never truncated or wrapped silently. The core module converts and rejects the types;
this one adds what integers need (exactness, 64-bit range, expected shapes).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from trustlab.core.errors import InputError
from trustlab.core.validation import as_float_array, check_scalar

__all__ = ["as_bits", "as_int_array", "as_ring_array", "check_instance", "check_int", "check_power_of_two"]


def check_int(value: Any, name: str, where: str, lo: int | None = None,
              hi: int | None = None) -> int:
    """An integer parameter in ``[lo, hi]`` (``24.0`` is 24; ``24.5``, bools, strings fail)."""
    return int(check_scalar(value, name, where, kind=int, lo=lo, hi=hi))


def as_int_array(value: Any, name: str, where: str, *, ndim: int | None = None,
                 shape: tuple[int, ...] | None = None, lo: int | None = None,
                 hi: int | None = None, allow_empty: bool = False) -> np.ndarray:
    """``value`` as an int64 (or uint64, or object for Python big ints) array of whole numbers.

    Integer arrays pass as they are; float arrays must hold finite whole numbers below 2^53
    (exactly representable); anything else goes through ``core.validation.as_float_array``'s
    type checks. ``shape`` (``-1`` for any size) and the closed range ``[lo, hi]`` are checked.
    """
    arr = value if isinstance(value, np.ndarray) else None
    if arr is None or arr.dtype.kind not in "iuO":
        as_float_array(value, name, where, ndim=ndim, allow_empty=allow_empty)
        arr = np.asarray(value)
        if arr.dtype.kind == "f":
            if np.any(np.abs(arr) >= 2.0**53) or not np.all(arr == np.round(arr)):
                raise InputError(f"The '{name}' parameter of {where} must hold integers "
                                 "(whole numbers below 2^53 when given as floats).")
            arr = arr.astype(np.int64)
    if arr.dtype.kind == "O":
        if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                   for v in arr.ravel()):
            raise InputError(f"The '{name}' parameter of {where} must hold integers.")
    elif arr.dtype.kind == "b":
        raise InputError(f"The '{name}' parameter of {where} must be integers, not booleans.")
    if ndim is not None and arr.ndim != ndim:
        raise InputError(f"The '{name}' parameter of {where} must be {ndim}-D. Got shape "
                         f"{arr.shape}.")
    if shape is not None and (arr.ndim != len(shape) or any(
            s != -1 and a != s for a, s in zip(arr.shape, shape, strict=True))):
        want = "(" + ", ".join("any" if s == -1 else str(s) for s in shape) + ")"
        raise InputError(f"The '{name}' parameter of {where} must have shape {want}. Got "
                         f"{arr.shape}.")
    if arr.size == 0 and not allow_empty:
        raise InputError(f"The '{name}' parameter of {where} must not be empty.")
    if arr.size and lo is not None and int(arr.min()) < lo:
        raise InputError(f"The '{name}' parameter of {where} must be >= {lo}. Got {arr.min()}.")
    if arr.size and hi is not None and int(arr.max()) > hi:
        raise InputError(f"The '{name}' parameter of {where} must be <= {hi}. Got {arr.max()}.")
    return arr


def check_instance(value: Any, cls: type | tuple[type, ...], name: str, where: str) -> Any:
    """``value`` if it is a ``cls`` (one of the library's own objects), else an InputError."""
    if not isinstance(value, cls):
        want = " or ".join(c.__name__ for c in (cls if isinstance(cls, tuple) else (cls,)))
        raise InputError(f"The '{name}' parameter of {where} must be a {want}. Got "
                         f"{type(value).__name__}.")
    return value


def check_power_of_two(value: Any, name: str, where: str, lo: int = 1,
                       hi: int | None = None) -> int:
    """An integer power of two in ``[lo, hi]``."""
    v = check_int(value, name, where, lo=lo, hi=hi)
    if v & (v - 1):
        raise InputError(f"The '{name}' parameter of {where} must be a power of two. Got {v}.")
    return v


def as_ring_array(value: Any, name: str, where: str, bits: int, *,
                  shape: tuple[int, ...] | None = None, allow_empty: bool = True) -> np.ndarray:
    """Residues mod ``2^bits`` as uint64: whole numbers in ``[0, 2^bits)`` (a share, a message
    word), never wrapped or truncated silently."""
    arr = as_int_array(value, name, where, shape=shape, allow_empty=allow_empty, lo=0,
                       hi=(1 << bits) - 1)
    if arr.dtype == object:
        return np.array([int(v) for v in arr.ravel()], dtype=np.uint64).reshape(arr.shape)
    return arr.astype(np.uint64, copy=False)


def as_bits(value: Any, name: str, where: str, *, size: int | None = None,
            allow_empty: bool = True) -> np.ndarray:
    """Bits (choice bits, boolean shares) as a flat uint8 array of 0/1: booleans and 0/1
    integers pass; a 2, a 0.5 or NaN is an error (never reduced mod 2 silently)."""
    if isinstance(value, np.ndarray) and value.dtype == np.bool_:
        arr = value.astype(np.uint8).ravel()
    elif isinstance(value, bool | np.bool_):
        arr = np.array([int(value)], dtype=np.uint8)
    else:
        arr = as_int_array(value, name, where, allow_empty=True, lo=0, hi=1)
        arr = arr.astype(np.uint8).ravel()
    if arr.size == 0 and not allow_empty:
        raise InputError(f"The '{name}' parameter of {where} must not be empty.")
    if size is not None and arr.size != size:
        raise InputError(f"The '{name}' parameter of {where} must hold {size} bit(s). Got "
                         f"{arr.size}.")
    return arr
