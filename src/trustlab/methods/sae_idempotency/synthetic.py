"""Synthetic activations with known sparse ground-truth features (the LRH made literal)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trustlab.core.errors import InputError

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
    if n < 1 or d_in < 1 or n_features < 1:
        raise InputError(f"n, d_in and n_features must be >= 1. Got {n}, {d_in}, {n_features}.")
    if not 0.0 < p_active <= 1.0:
        raise InputError(f"The 'p_active' parameter must be in (0, 1]. Got {p_active}.")
    lo, hi = magnitude
    if not 0.0 <= lo <= hi:
        raise InputError(f"The 'magnitude' range must satisfy 0 <= low <= high. Got {magnitude}.")
    features = torch.randn(n_features, d_in, generator=generator)
    features = features / features.norm(dim=1, keepdim=True)
    fires = torch.rand(n, n_features, generator=generator) < p_active
    mags = lo + (hi - lo) * torch.rand(n, n_features, generator=generator)
    codes = fires.to(torch.float32) * mags
    x = codes @ features
    if noise > 0:
        x = x + noise * torch.randn(n, d_in, generator=generator)
    return SparseFeatureData(x=x, features=features, codes=codes)
