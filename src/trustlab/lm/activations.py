"""Read activations at canonical sites for many prompts, batched and padding-aware."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from trustlab.core.errors import InputError
from trustlab.lm.hooks import StepState, as_sites, hook
from trustlab.lm.model import LanguageModel, Prompt
from trustlab.lm.positions import PositionLike, Positions, as_positions

__all__ = [
    "Capture",
    "Progress",
    "TokenActivations",
    "batches",
    "capture",
    "get_activations",
    "token_activations",
]

Progress = Callable[..., Iterable[Any]]
"""``progress(items, description=..., total=...)`` such as ``RunContext.progress``."""

_ORDER = {"embed": -1, "resid_pre": 0, "attn_out": 1, "mlp_out": 2, "resid_post": 3}


class _StopForward(Exception):
    """Raised by a hook once every requested site has been read (skips the rest of the model)."""


@dataclass
class Capture:
    """Activations recorded by :func:`capture`, one entry per forward pass."""

    sites: list[str]
    positions: Positions
    records: list[torch.Tensor] = field(default_factory=list)  # each [B, n_sites, P, D]

    def stacked(self) -> torch.Tensor:
        """All recorded passes concatenated along the batch axis."""
        if not self.records:
            raise InputError("Nothing was captured: no forward pass ran inside the capture.")
        return torch.cat(self.records, 0)


@contextlib.contextmanager
def capture(
    lm: LanguageModel,
    sites: str | Sequence[str],
    positions: PositionLike = "last",
    *,
    dtype: torch.dtype = torch.float32,
    to_cpu: bool = True,
) -> Iterator[Capture]:
    """Record ``[B, n_sites, P, D]`` at fixed-count ``positions`` on every full forward pass.

    Incremental generation steps (which hold only new tokens) are skipped.
    """
    names = as_sites(sites)
    pos = as_positions(positions)
    if not pos.is_fixed_count:
        raise InputError(
            f"capture needs a fixed number of positions per prompt (last/at/post_instruction); "
            f"got {pos.describe()}. Use token_activations for every token."
        )
    result = Capture(names, pos)
    index = {name: i for i, name in enumerate(names)}
    pending: dict[int, torch.Tensor] = {}

    def fn(site: str, h: torch.Tensor, step: StepState) -> None:
        if step.offset > 0:
            return None
        cols = step.gather_columns(pos)
        rows = torch.arange(h.shape[0], device=h.device).unsqueeze(1)
        got = h[rows, cols].detach().to(dtype)
        got = got.cpu() if to_cpu else got
        pending[index[site]] = got
        if len(pending) == len(names):
            result.records.append(torch.stack([pending[i] for i in range(len(names))], 1))
            pending.clear()
        return None

    with hook(lm, names, fn):
        yield result


def _deepest(lm: LanguageModel, names: list[str]) -> str:
    def key(name: str) -> tuple[int, int]:
        layer, kind = lm.adapter.parse(name)
        return layer, _ORDER[kind]

    return max(names, key=key)


@contextlib.contextmanager
def _stop_after(lm: LanguageModel, site: str) -> Iterator[None]:
    def stop(_site: str, h: torch.Tensor, step: StepState) -> None:
        raise _StopForward

    with hook(lm, [site], stop):
        yield


def batches(
    lm: LanguageModel,
    prompts: Sequence[Prompt],
    batch_size: int,
    *,
    sort_by_length: bool = True,
    padding_side: Literal["left", "right"] = "left",
    progress: Progress | None = None,
    description: str = "forward",
) -> Iterator[tuple[list[int], Any]]:
    """Yield ``(prompt indices, Batch)``; sorting by length keeps padding small."""
    if int(batch_size) < 1:
        raise InputError(f"batch_size must be >= 1. Got {batch_size}.")
    token_ids = lm.tokenize(prompts)
    order = list(range(len(token_ids)))
    if sort_by_length:
        order.sort(key=lambda i: len(token_ids[i]))
    chunks = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    items: Iterable[list[int]] = chunks
    if progress is not None:
        items = progress(chunks, description=description, total=len(chunks))
    for chunk in items:
        yield chunk, lm.pad([token_ids[i] for i in chunk], padding_side)


def get_activations(
    lm: LanguageModel,
    prompts: Sequence[Prompt],
    sites: str | Sequence[str],
    positions: PositionLike = "last",
    *,
    batch_size: int = 32,
    padding_side: Literal["left", "right"] = "left",
    progress: Progress | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Activations ``[n_prompts, n_sites, n_positions, d_model]`` (float32, on CPU).

    ``prompts``: raw strings or conversations (chat-formatted); ``sites``: canonical names,
    e.g. ``lm.sites("resid_pre")`` or ``["embed", *lm.sites("resid_post")]``; ``positions``:
    ``"last"``, ``Positions.last(k)``, a list of indices, or ``"post_instruction"``. The
    forward pass stops after the deepest requested site; active interventions apply.
    """
    names = as_sites(sites)
    if len(prompts) == 0:
        raise InputError("get_activations needs at least one prompt.")
    out: torch.Tensor | None = None
    deepest = _deepest(lm, names)
    with (
        torch.no_grad(),
        capture(lm, names, positions, dtype=dtype) as cap,
        _stop_after(lm, deepest),
    ):
        for chunk, batch in batches(
            lm,
            prompts,
            batch_size,
            padding_side=padding_side,
            progress=progress,
            description="activations",
        ):
            with contextlib.suppress(_StopForward):
                lm.forward(batch)
            acts = cap.records.pop()
            if out is None:
                out = torch.empty((len(prompts), *acts.shape[1:]), dtype=acts.dtype)
            out[torch.as_tensor(chunk)] = acts
    assert out is not None
    return out


@dataclass(frozen=True)
class TokenActivations:
    """Per-token activations: ``acts`` [n_tokens, n_sites, D]; ``prompt_index`` [n_tokens]."""

    acts: torch.Tensor
    prompt_index: torch.Tensor
    token_ids: torch.Tensor


def token_activations(
    lm: LanguageModel,
    prompts: Sequence[Prompt],
    sites: str | Sequence[str],
    positions: PositionLike = "prompt",
    *,
    batch_size: int = 32,
    progress: Progress | None = None,
    dtype: torch.dtype = torch.float32,
) -> TokenActivations:
    """Activations at every selected token (e.g. all prompt tokens, for training an SAE).

    Tokens come prompt by prompt in the order given, each prompt's tokens in order.
    """
    names = as_sites(sites)
    pos = as_positions(positions)
    per_prompt: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    pending: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def fn(site: str, h: torch.Tensor, step: StepState) -> None:
        mask = step.edit_mask(pos)
        if mask is None:
            mask = step.valid
        pending[site] = (h.detach().to(dtype).cpu(), mask.cpu())
        return None

    deepest = _deepest(lm, names)
    with torch.no_grad(), hook(lm, names, fn), _stop_after(lm, deepest):
        for chunk, batch in batches(
            lm, prompts, batch_size, progress=progress, description="token activations"
        ):
            with contextlib.suppress(_StopForward):
                lm.forward(batch)
            mask = pending[names[0]][1]
            stacked = torch.stack([pending[n][0] for n in names], 2)  # [B, T, n_sites, D]
            ids = batch.input_ids.cpu()
            for row, prompt_idx in enumerate(chunk):
                per_prompt[prompt_idx] = (stacked[row][mask[row]], ids[row][mask[row]])
            pending.clear()
    order = range(len(prompts))
    acts = torch.cat([per_prompt[i][0] for i in order], 0)
    token_ids = torch.cat([per_prompt[i][1] for i in order], 0)
    prompt_index = torch.cat(
        [torch.full((per_prompt[i][0].shape[0],), i, dtype=torch.long) for i in order]
    )
    return TokenActivations(acts=acts, prompt_index=prompt_index, token_ids=token_ids)
