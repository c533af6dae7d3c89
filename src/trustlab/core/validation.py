"""Argument checks shared by the library: one place for the messages users read.

The contract (docs/architecture.md, "Validation"): every public entry point converts and checks
its inputs here and raises :class:`~trustlab.core.errors.InputError` naming the parameter, what
was expected and what was given, e.g.::

    The 'probs' parameter of HCC.calibrate must have rows that sum to 1 (tolerance 0.001).
    Got a row off by 0.2 (row 3).

Conversion is explicit: numpy arrays, torch tensors (detached, moved to CPU), lists, tuples and
pandas Series/DataFrames become numpy arrays; strings, mappings, sets, generators, ``None`` and
objects numpy cannot read as numbers are rejected by name (never read as a one-element or
object array). A DataFrame is accepted by value: its column *names* carry no meaning here, so a
caller whose columns must follow an order (class probabilities) says so with ``classes=``.

scikit-learn's parameter validation (``check_array``, ``check_scalar``,
``check_consistent_length``) is the model; these functions are smaller and name the caller in
every message because trustlab's users call many methods from one script.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from trustlab.core.errors import InputError

__all__ = [
    "PROB_ATOL",
    "as_float_array",
    "check_choice",
    "check_consistent_length",
    "check_labels",
    "check_open_unit",
    "check_path",
    "check_probs",
    "check_samples",
    "check_scalar",
]

#: How far a probability row may sum from 1 (float32 softmax outputs and CSV rounding pass).
PROB_ATOL = 1e-3


def _param(name: str, where: str) -> str:
    return f"The '{name}' parameter of {where}" if where else f"The '{name}' parameter"


def _describe(value: Any) -> str:
    """A short description of what a user passed (type and shape, never a huge repr)."""
    shape = getattr(value, "shape", None)
    kind = type(value).__name__
    if shape is not None:
        dtype = getattr(value, "dtype", None)
        return f"a {kind} of shape {tuple(shape)}" + (f" and dtype {dtype}" if dtype is not None else "")
    if isinstance(value, list | tuple) and len(value) > 6:
        return f"a {kind} of {len(value)} items"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------------------- conversion


def _to_numpy(value: Any, name: str, where: str) -> np.ndarray:
    """Convert array-likes to numpy; reject what would be silently reinterpreted."""
    if value is None or isinstance(value, str | bytes | Mapping | set | frozenset):
        raise InputError(f"{_param(name, where)} must be an array-like. Got {_describe(value)}.")
    module = type(value).__module__
    if module.startswith("torch") and hasattr(value, "detach"):  # a tensor; torch stays unimported
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        value = value.numpy()
    elif hasattr(value, "to_numpy") and module.startswith("pandas"):
        value = value.to_numpy()
    elif isinstance(value, Iterable) and not isinstance(
        value, np.ndarray | list | tuple | range | np.generic
    ):
        raise InputError(
            f"{_param(name, where)} must be an array, tensor, list or DataFrame, not an "
            f"iterator or stream. Got {_describe(value)}."
        )
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged lists
        raise InputError(
            f"{_param(name, where)} must be a rectangular array. Got {_describe(value)} ({exc})."
        ) from None
    return arr


def as_float_array(
    value: Any,
    name: str,
    where: str = "",
    *,
    ndim: int | tuple[int, ...] | None = None,
    allow_empty: bool = False,
    allow_nonfinite: bool = False,
    allow_bool: bool = False,
) -> NDArray[np.float64]:
    """``value`` as a float64 array with the checks every numeric input needs.

    Rejects non-numeric dtypes (strings, objects), booleans unless ``allow_bool`` (a mask passed
    where numbers are expected is almost always a mistake), the wrong number of dimensions,
    empty arrays unless ``allow_empty``, and NaN/inf unless ``allow_nonfinite``.
    """
    arr = _to_numpy(value, name, where)
    if arr.dtype.kind == "b" and not allow_bool:
        raise InputError(f"{_param(name, where)} must be numeric, not boolean. Got {_describe(arr)}.")
    if arr.dtype.kind not in "biufc":
        raise InputError(f"{_param(name, where)} must be numeric. Got {_describe(arr)}.")
    if arr.dtype.kind == "c":
        raise InputError(f"{_param(name, where)} must be real, not complex. Got {_describe(arr)}.")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            want = " or ".join(f"{d}-D" for d in allowed)
            raise InputError(f"{_param(name, where)} must be {want}. Got {_describe(arr)}.")
    if arr.size == 0 and not allow_empty:
        raise InputError(f"{_param(name, where)} must not be empty. Got {_describe(arr)}.")
    out = arr.astype(np.float64, copy=True)
    if not allow_nonfinite and not np.all(np.isfinite(out)):
        bad = int(np.size(out) - np.count_nonzero(np.isfinite(out)))
        raise InputError(
            f"{_param(name, where)} must be finite. Got {bad} NaN or infinite value(s)."
        )
    return out


# ---------------------------------------------------------------------------- arrays


def check_samples(
    x: Any,
    name: str = "x",
    where: str = "",
    *,
    min_n: int = 1,
    n_features: int | None = None,
    n_samples: int | None = None,
) -> NDArray[np.float64]:
    """Samples as a finite ``(n, d)`` float array; a 1-D input is ``n`` points in one dimension.

    ``min_n``: the fewest points the caller can work with (named in the message);
    ``n_features`` / ``n_samples``: the shape they must match (another argument's).
    """
    arr = as_float_array(x, name, where, ndim=(1, 2), allow_empty=min_n == 0)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.shape[0] < min_n:
        raise InputError(
            f"{_param(name, where)} must hold at least {min_n} point(s). Got {arr.shape[0]}."
        )
    _check_shape(arr, name, where, n_samples, n_features, "feature column(s)")
    return arr


def _check_shape(arr: np.ndarray, name: str, where: str, n_rows: int | None,
                 n_cols: int | None, cols: str) -> None:
    """Rows and columns against what another argument fixed (``None``: free)."""
    for axis, want, what in ((1, n_cols, cols), (0, n_rows, "rows (one per sample)")):
        if want is not None and arr.shape[axis] != want:
            raise InputError(
                f"{_param(name, where)} must have {want} {what}. Got shape {arr.shape}."
            )


def _check_unit_interval(arr: np.ndarray, name: str, where: str) -> None:
    if np.any((arr < 0) | (arr > 1)):
        raise InputError(
            f"{_param(name, where)} must lie in [0, 1]. "
            f"Got values in [{arr.min():.4g}, {arr.max():.4g}]."
        )


def check_probs(
    probs: Any,
    name: str = "probs",
    where: str = "",
    *,
    n_classes: int | None = None,
    n_samples: int | None = None,
    binary_1d: bool = False,
    sum_to_one: bool = True,
    atol: float = PROB_ATOL,
) -> NDArray[np.float64]:
    """Class probabilities as a finite ``(n, K)`` float array with entries in [0, 1].

    - ``binary_1d``: a 1-D input ``p`` is the positive-class probability and becomes the rows
      ``[1 - p, p]``; otherwise a 1-D input is an error (it could be one row or one column).
    - ``n_classes`` / ``n_samples``: the shape the caller expects (e.g. the hierarchy's classes,
      the number of labels); ``K >= 2`` always.
    - ``sum_to_one``: rows must sum to 1 within ``atol`` (turn off for scores of a sub-model).
    """
    p = as_float_array(probs, name, where, ndim=(1, 2) if binary_1d else 2)
    if p.ndim == 1:
        _check_unit_interval(p, name, where)
        p = np.stack([1.0 - p, p], axis=1)
    if p.shape[1] < 2:
        raise InputError(
            f"{_param(name, where)} must have one column per class (at least 2). "
            f"Got shape {p.shape}."
        )
    _check_shape(p, name, where, n_samples, n_classes, "columns (one per class)")
    _check_unit_interval(p, name, where)
    if sum_to_one:
        off = np.abs(p.sum(axis=1) - 1.0)
        worst = int(np.argmax(off))
        if off[worst] > atol:
            raise InputError(
                f"{_param(name, where)} must have rows that sum to 1 (tolerance {atol:g}). "
                f"Got a row off by {off[worst]:.3g} (row {worst})."
            )
    return p


def check_labels(
    labels: Any,
    name: str = "labels",
    where: str = "",
    *,
    classes: Sequence[Any] | None = None,
    allow_empty: bool = False,
    n_samples: int | None = None,
    n_classes: int | None = None,
) -> NDArray[np.int64]:
    """Class labels as a 1-D int64 array of indices.

    - With ``classes`` (the class names in column order), labels may be names or indices; names
      are mapped to their index and a name outside ``classes`` is an error that lists it.
    - With ``n_classes`` (or ``classes``), indices must lie in ``[0, n_classes)``.
    - Float labels are accepted only when integer-valued (``2.0``); booleans are rejected.
    - ``n_samples``: the length they must have (the number of probability rows).
    """
    if classes is not None:
        names = list(classes)
        if len(set(map(str, names))) != len(names):
            raise InputError(f"The classes given for '{name}' of {where or 'the caller'} repeat a name.")
        if n_classes is not None and n_classes != len(names):
            raise InputError(
                f"{_param(name, where)}: {len(names)} class names for {n_classes} classes."
            )
        n_classes = len(names)
    y = _to_numpy(labels, name, where)
    if y.ndim != 1:
        raise InputError(f"{_param(name, where)} must be 1-D (one label per sample). Got {_describe(y)}.")
    if y.size == 0 and not allow_empty:
        raise InputError(f"{_param(name, where)} must not be empty.")
    if n_samples is not None and y.shape[0] != n_samples:
        raise InputError(
            f"{_param(name, where)} must have {n_samples} entries (one per sample). "
            f"Got {y.shape[0]}."
        )
    if y.dtype.kind in "USO" and classes is not None:
        index = {str(c): i for i, c in enumerate(names)}
        unknown = sorted({str(v) for v in y.tolist()} - set(index))
        if unknown:
            raise InputError(
                f"{_param(name, where)} holds label(s) that are not classes: "
                f"{', '.join(map(repr, unknown[:5]))}{' ...' if len(unknown) > 5 else ''}. "
                f"Classes: {', '.join(map(str, names[:12]))}{' ...' if len(names) > 12 else ''}."
            )
        return np.array([index[str(v)] for v in y.tolist()], dtype=np.int64)
    if y.dtype.kind == "b":
        raise InputError(f"{_param(name, where)} must hold integer class ids, not booleans.")
    if y.dtype.kind not in "iuf":
        raise InputError(
            f"{_param(name, where)} must hold integer class ids"
            + (" or class names" if classes is not None else "")
            + f". Got {_describe(y)}."
        )
    if y.dtype.kind == "f" and (not np.all(np.isfinite(y)) or np.any(y != np.round(y))
                                or np.any(np.abs(y) > 2**62)):
        raise InputError(
            f"{_param(name, where)} must hold integer class ids. Got non-integer values."
        )
    y = y.astype(np.int64)
    if n_classes is not None and y.size and (y.min() < 0 or y.max() >= n_classes):
        raise InputError(
            f"{_param(name, where)} must hold class ids in [0, {n_classes}). "
            f"Got values in [{y.min()}, {y.max()}]."
        )
    if n_classes is None and y.size and y.min() < 0:
        raise InputError(f"{_param(name, where)} must hold class ids >= 0. Got {y.min()}.")
    return y


def check_consistent_length(where: str = "", **arrays: Any) -> int:
    """All arrays have the same first dimension; the message names each and its length."""
    lengths = {name: len(value) if not hasattr(value, "shape") else value.shape[0]
               for name, value in arrays.items()}
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"'{k}' has {v}" for k, v in lengths.items())
        raise InputError(
            f"The inputs of {where or 'this call'} must have the same number of samples. Got {detail}."
        )
    return next(iter(lengths.values()), 0)


# ---------------------------------------------------------------------------- scalars


def check_scalar(
    value: Any,
    name: str,
    where: str = "",
    *,
    kind: type[int] | type[float] = float,
    lo: float | None = None,
    hi: float | None = None,
    closed: Literal["both", "left", "right", "neither"] = "both",
) -> Any:
    """A finite int or float within ``[lo, hi]`` (ends open per ``closed``), as ``kind``.

    An int is accepted where a float is expected; a float is never silently truncated to an int
    (``24.5`` for an integer is an error, ``24.0`` is 24); bools and strings are rejected.
    """
    want = "an integer" if kind is int else "a number"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"{_param(name, where)} must be {want}. Got {_describe(value)}.")
    if kind is int:
        if not float(value).is_integer():
            raise InputError(f"{_param(name, where)} must be an integer. Got {value!r}.")
        out: Any = int(value)
    else:
        out = float(value)
        if not np.isfinite(out):
            raise InputError(f"{_param(name, where)} must be finite. Got {value!r}.")
    lo_ok = lo is None or (out >= lo if closed in ("both", "left") else out > lo)
    hi_ok = hi is None or (out <= hi if closed in ("both", "right") else out < hi)
    if not (lo_ok and hi_ok):
        left = "[" if closed in ("both", "left") else "("
        right = "]" if closed in ("both", "right") else ")"
        span = f"in {left}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}{right}"
        raise InputError(f"{_param(name, where)} must be {span}. Got {value!r}.")
    return out


def check_open_unit(value: float, name: str, where: str) -> float:
    """``value`` as a float in the open interval (0, 1), e.g. a miscoverage ``alpha`` or ``delta``.

    Raises InputError: "The 'alpha' parameter of HCC must be in (0, 1). Got 1.5."
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(
            f"The '{name}' parameter of {where} must be a float in (0, 1). Got {value!r}."
        )
    if not 0.0 < float(value) < 1.0:
        raise InputError(f"The '{name}' parameter of {where} must be in (0, 1). Got {value}.")
    return float(value)


def check_choice(value: Any, name: str, choices: Iterable[Any], where: str = "") -> Any:
    """``value`` if it is one of ``choices``; otherwise an error listing them."""
    options = tuple(choices)
    if value not in options:
        listed = ", ".join(repr(c) for c in options)
        raise InputError(f"{_param(name, where)} must be one of {listed}. Got {value!r}.")
    return value


def check_path(
    path: str | os.PathLike[str],
    name: str,
    where: str = "",
    *,
    kind: Literal["file", "dir", "any"] = "any",
) -> Path:
    """A path the user gave that must exist (as a file, a directory, or either)."""
    if not isinstance(path, str | os.PathLike) or not str(path):
        raise InputError(f"{_param(name, where)} must be a path. Got {_describe(path)}.")
    p = Path(path).expanduser()
    if not p.exists():
        raise InputError(f"{_param(name, where)} names a path that does not exist: '{p}'.")
    if kind == "file" and not p.is_file():
        raise InputError(f"{_param(name, where)} must be a file. '{p}' is a directory.")
    if kind == "dir" and not p.is_dir():
        raise InputError(f"{_param(name, where)} must be a directory. '{p}' is a file.")
    return p
