"""Synthetic activations with known sparse ground-truth features (the LRH made literal)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar

__all__ = ["SparseFeatureData", "sparse_feature_data"]


@dataclass(frozen=True)
class SparseFeatureData:
    """``x`` [n, d_in] = ``codes`` [n, n_features] @ ``features`` [n_features, d_in] + noise."""

    x: torch.Tensor
    features: torch.Tensor
    codes: torch.Tensor


def sparse_feature_data(
    n: int,
    d_in: int,
    n_features: int,
    *,
    p_active: float = 0.05,
    magnitude: tuple[float, float] = (0.5, 1.5),
    noise: float = 0.0,
    generator: torch.Generator | None = None,
) -> SparseFeatureData:
    """Inputs built as sparse non-negative combinations of random unit feature directions.

    Each feature fires independently with probability ``p_active`` with a magnitude drawn
    uniformly from ``magnitude``; Gaussian noise of std ``noise`` per coordinate is added.
    """
    where = "sparse_feature_data"
    n = check_scalar(n, "n", where, kind=int, lo=1)
    d_in = check_scalar(d_in, "d_in", where, kind=int, lo=1)
    n_features = check_scalar(n_features, "n_features", where, kind=int, lo=1)
    p_active = check_scalar(p_active, "p_active", where, lo=0.0, hi=1.0, closed="right")
    noise = check_scalar(noise, "noise", where, lo=0.0)
    if not isinstance(magnitude, tuple | list) or len(magnitude) != 2:
        raise InputError(f"The 'magnitude' parameter of {where} must be a (low, high) pair. "
                         f"Got {magnitude!r}.")
    lo = check_scalar(magnitude[0], "magnitude", where, lo=0.0)
    hi = check_scalar(magnitude[1], "magnitude", where, lo=lo)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise InputError(f"The 'generator' parameter of {where} must be a torch.Generator. "
                         f"Got {type(generator).__name__}.")
    features = torch.randn(n_features, d_in, generator=generator)
    features = features / features.norm(dim=1, keepdim=True)
    fires = torch.rand(n, n_features, generator=generator) < p_active
    mags = lo + (hi - lo) * torch.rand(n, n_features, generator=generator)
    codes = fires.to(torch.float32) * mags
    x = codes @ features
    if noise > 0:
        x = x + noise * torch.randn(n, d_in, generator=generator)
    return SparseFeatureData(x=x, features=features, codes=codes)
