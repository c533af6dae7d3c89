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

__all__ = ["as_int_array", "check_int"]


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
