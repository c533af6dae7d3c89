"""Input checks shared by lm's public functions (issue 38): tensors, prompt lists and counts.

Scalars go through :func:`trustlab.core.validation.check_scalar`; what is torch-specific
(a tensor kept as it is so autograd still flows) lives here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from trustlab.core.errors import InputError
from trustlab.core.validation import as_float_array, check_scalar

__all__ = ["as_float_tensor", "check_count", "prompt_list"]


def _param(name: str, where: str) -> str:
    return f"The '{name}' parameter of {where}" if where else f"The '{name}' parameter"


def as_float_tensor(value: Any, name: str, where: str = "") -> torch.Tensor:
    """``value`` as a finite float tensor; a tensor is returned as it is (autograd kept),
    anything else goes through :func:`~trustlab.core.validation.as_float_array`."""
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bool or value.is_complex():
            raise InputError(
                f"{_param(name, where)} must be a real float tensor. Got dtype {value.dtype}."
            )
        tensor = value if value.is_floating_point() else value.float()
    else:
        tensor = torch.from_numpy(as_float_array(value, name, where, allow_nonfinite=True))
    if tensor.numel() == 0:
        raise InputError(f"{_param(name, where)} must not be empty. Got shape {tuple(tensor.shape)}.")
    if not bool(torch.isfinite(tensor.detach()).all()):
        raise InputError(f"{_param(name, where)} must be finite. Got NaN or infinite values.")
    return tensor


def check_count(value: Any, name: str, where: str = "", lo: int = 1) -> int:
    """A whole number ``>= lo`` (``2.0`` is 2, ``2.5``, ``"2"``, ``True`` and NaN are errors)."""
    return check_scalar(value, name, where, kind=int, lo=lo)


def prompt_list(prompts: Any, name: str, where: str, *, allow_empty: bool = False) -> list[Any]:
    """A list of prompts; a single string (which would be read as its characters) is an error."""
    if isinstance(prompts, str | bytes) or not isinstance(prompts, Sequence):
        raise InputError(
            f"{_param(name, where)} must be a list of prompts (strings or conversations). "
            f"Got {type(prompts).__name__}."
        )
    if not prompts and not allow_empty:
        raise InputError(f"{_param(name, where)} must hold at least one prompt. Got none.")
    return list(prompts)
