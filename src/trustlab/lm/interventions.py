"""Interventions on the residual stream, as composable context managers.

Each works during plain forward passes and during ``generate`` (HF or :class:`HFChatModel`):

    with add_vector(lm, v, lm.sites("resid_pre", [4]), alpha=8.0):      # activation addition
    with ablate_direction(lm, r):                                     # directional ablation
    with clamp_projection(lm, r, value=3.0, sites=lm.sites("resid_post")):
    with replace_activation(lm, "blocks.2.resid_post", acts, positions="last"):
    with intervene(lm, AddVector(v, sites), AblateDirection(r)):       # several at once

The frozen dataclasses (``AddVector`` ...) describe an intervention without a model, so a
chat backend can apply them around every generation call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar
from trustlab.lm._checks import as_float_tensor
from trustlab.lm.hooks import StepState, as_sites, hook
from trustlab.lm.model import LanguageModel
from trustlab.lm.positions import PositionLike, as_positions

__all__ = [
    "AblateDirection",
    "AddVector",
    "ClampProjection",
    "Intervention",
    "ReplaceActivation",
    "ablate_direction",
    "add_vector",
    "clamp_projection",
    "intervene",
    "replace_activation",
]


_OWNER = {
    "added": ("vector", "add_vector"),
    "ablated": ("direction", "ablate_direction"),
    "clamped": ("direction", "clamp_projection"),
}


def _per_site(
    lm: LanguageModel, vector: torch.Tensor, names: list[str], what: str, normalise: bool
) -> dict[str, torch.Tensor]:
    """One [D] tensor per site, in the model's dtype and device."""
    if len(set(names)) != len(names):
        raise InputError(f"The sites of one {what} must be distinct. Got {names}.")
    # keeps autograd; None, text and booleans used to raise raw torch errors or add 0/1 masks
    param, where = _OWNER[what]
    vec = as_float_tensor(vector, param, where).to(device=lm.device, dtype=torch.float32)
    if vec.dim() == 1:
        vec = vec.unsqueeze(0).expand(len(names), -1)
    if vec.dim() != 2 or vec.shape != (len(names), lm.d_model):
        raise InputError(
            f"The {what} vector must have shape [d_model]={lm.d_model} or [n_sites, d_model]="
            f"[{len(names)}, {lm.d_model}]. Got {tuple(vec.shape)}."
        )
    if not bool(torch.isfinite(vec).all()):
        raise InputError(f"The {what} vector has non-finite entries.")
    if normalise:
        norms = vec.norm(dim=-1, keepdim=True)
        if bool((norms == 0).any()):
            raise InputError(f"The {what} direction is the zero vector; it has no direction.")
        vec = vec / norms
    return {name: vec[i].to(lm.dtype) for i, name in enumerate(names)}


def _masked(h: torch.Tensor, new: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    return new if mask is None else torch.where(mask.unsqueeze(-1), new, h)


@contextlib.contextmanager
def add_vector(
    lm: LanguageModel,
    vector: torch.Tensor,
    sites: str | Sequence[str],
    *,
    alpha: float = 1.0,
    positions: PositionLike = "all",
) -> Iterator[None]:
    """Add ``alpha * vector`` at ``sites`` and ``positions`` (activation addition / steering).

    ``vector`` is [d_model] (same at every site) or [n_sites, d_model].
    """
    names = as_sites(sites)
    alpha = check_scalar(alpha, "alpha", "add_vector")  # NaN used to fill the logits with NaN
    deltas = {k: alpha * v for k, v in _per_site(lm, vector, names, "added", False).items()}
    pos = as_positions(positions)

    def fn(site: str, h: torch.Tensor, step: StepState) -> torch.Tensor:
        mask = step.edit_mask(pos)
        delta = deltas[site]
        if mask is None:
            return h + delta
        return h + mask.unsqueeze(-1).to(h.dtype) * delta

    with hook(lm, names, fn):
        yield


@contextlib.contextmanager
def ablate_direction(
    lm: LanguageModel,
    direction: torch.Tensor,
    sites: str | Sequence[str] | None = None,
    *,
    positions: PositionLike = "all",
) -> Iterator[None]:
    """Project ``direction`` out: ``h <- h - (h . r) r`` with ``r`` the unit direction.

    Default sites: :meth:`LanguageModel.ablation_sites` (the embeddings and every term a
    block writes into the stream), so the residual stream at every layer is orthogonal to r.
    """
    names = as_sites(lm.ablation_sites() if sites is None else sites)
    units = _per_site(lm, direction, names, "ablated", True)
    pos = as_positions(positions)

    def fn(site: str, h: torch.Tensor, step: StepState) -> torch.Tensor:
        r = units[site]
        new = h - (h @ r).unsqueeze(-1) * r
        return _masked(h, new, step.edit_mask(pos))

    with hook(lm, names, fn):
        yield


@contextlib.contextmanager
def clamp_projection(
    lm: LanguageModel,
    direction: torch.Tensor,
    value: float,
    sites: str | Sequence[str],
    *,
    positions: PositionLike = "all",
) -> Iterator[None]:
    """Set the projection on the unit ``direction`` to ``value``: ``h <- h + (value - h.r) r``."""
    names = as_sites(sites)
    units = _per_site(lm, direction, names, "clamped", True)
    pos = as_positions(positions)
    target = check_scalar(value, "value", "clamp_projection")  # NaN used to pass

    def fn(site: str, h: torch.Tensor, step: StepState) -> torch.Tensor:
        r = units[site]
        new = h + (target - h @ r).unsqueeze(-1) * r
        return _masked(h, new, step.edit_mask(pos))

    with hook(lm, names, fn):
        yield


@contextlib.contextmanager
def replace_activation(
    lm: LanguageModel,
    site: str,
    activation: torch.Tensor,
    *,
    positions: PositionLike = "last",
) -> Iterator[None]:
    """Overwrite the activation at ``site`` and ``positions`` (activation patching).

    ``activation`` is [d_model] (written at every selected token) or [B, P, d_model] for a
    fixed-count position spec (e.g. a slice of :func:`get_activations` output).
    """
    names = as_sites(site)
    if len(names) != 1:
        raise InputError(f"replace_activation takes one site. Got {names}.")
    # NaN used to be written into the model; None raised a raw torch error
    act = as_float_tensor(activation, "activation", "replace_activation")
    act = act.to(device=lm.device, dtype=lm.dtype)
    if act.shape[-1] != lm.d_model or act.dim() not in (1, 3):
        raise InputError(
            f"The replacement must be [d_model] or [batch, positions, d_model] with d_model="
            f"{lm.d_model}. Got {tuple(act.shape)}."
        )
    pos = as_positions(positions)
    if act.dim() == 3 and not pos.is_fixed_count:
        raise InputError(
            "A [batch, positions, d_model] replacement needs last/at/post_instruction."
        )

    def fn(name: str, h: torch.Tensor, step: StepState) -> torch.Tensor:
        if act.dim() == 1:
            return _masked(h, act.expand_as(h), step.edit_mask(pos))
        if step.offset > 0:  # incremental generation step: prompt positions are in the cache
            return h
        if act.shape[0] != h.shape[0] or act.shape[1] != pos.count(step.n_post_instruction):
            raise InputError(
                f"The replacement has shape {tuple(act.shape)}, but this batch needs "
                f"[{h.shape[0]}, {pos.count(step.n_post_instruction)}, {lm.d_model}]."
            )
        cols = step.gather_columns(pos)
        out = h.clone()
        out[torch.arange(h.shape[0], device=h.device).unsqueeze(1), cols] = act
        return out

    with hook(lm, names, fn):
        yield


@runtime_checkable
class Intervention(Protocol):
    """Anything with ``apply(lm)`` returning a context manager that intervenes while open."""

    def apply(self, lm: LanguageModel) -> contextlib.AbstractContextManager: ...


@dataclass(frozen=True, eq=False)
class AddVector:
    vector: torch.Tensor
    sites: str | Sequence[str]
    alpha: float = 1.0
    positions: PositionLike = "all"

    def apply(self, lm: LanguageModel) -> contextlib.AbstractContextManager:
        return add_vector(lm, self.vector, self.sites, alpha=self.alpha, positions=self.positions)


@dataclass(frozen=True, eq=False)
class AblateDirection:
    direction: torch.Tensor
    sites: str | Sequence[str] | None = None
    positions: PositionLike = "all"

    def apply(self, lm: LanguageModel) -> contextlib.AbstractContextManager:
        return ablate_direction(lm, self.direction, self.sites, positions=self.positions)


@dataclass(frozen=True, eq=False)
class ClampProjection:
    direction: torch.Tensor
    value: float
    sites: str | Sequence[str]
    positions: PositionLike = "all"

    def apply(self, lm: LanguageModel) -> contextlib.AbstractContextManager:
        return clamp_projection(
            lm, self.direction, self.value, self.sites, positions=self.positions
        )


@dataclass(frozen=True, eq=False)
class ReplaceActivation:
    site: str
    activation: torch.Tensor
    positions: PositionLike = "last"

    def apply(self, lm: LanguageModel) -> contextlib.AbstractContextManager:
        return replace_activation(lm, self.site, self.activation, positions=self.positions)


@contextlib.contextmanager
def intervene(lm: LanguageModel, *interventions: Intervention) -> Iterator[None]:
    """Apply several interventions at once, in order (the first one runs first on a site)."""
    with contextlib.ExitStack() as stack:
        for item in interventions:
            if not isinstance(item, Intervention):
                raise InputError(f"Not an intervention: {item!r:.80}.")
            stack.enter_context(item.apply(lm))
        yield
