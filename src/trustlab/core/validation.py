"""Argument checks shared by the library: one place for the messages users read."""

from __future__ import annotations

import numbers

from trustlab.core.errors import InputError

__all__ = ["check_open_unit"]


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
