"""Read activations at canonical sites for many prompts, batched and padding-aware."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from trustlab.core.errors import InputError
from trustlab.lm.adapters import SITE_ORDER
from trustlab.lm.hooks import StepState, as_sites, head_terms, hook
from trustlab.lm.model import Batch, LanguageModel, Prompt
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

Inputs = Sequence[Prompt] | Batch
"""Prompts (strings or conversations), or a prepared :class:`Batch` (e.g. with soft vectors)."""


class _StopForward(Exception):
    """Raised by a hook once every requested site has been read (skips the rest of the model)."""


@dataclass
class Capture:
    """Activations recorded by :func:`capture`, one entry per forward pass."""

    sites: list[str]
    positions: Positions
    records: list[torch.Tensor] = field(default_factory=list)  # each [B, n_sites, P, *shape]

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
    """Record ``[B, n_sites, P, *shape]`` at fixed-count ``positions`` on every full forward
    pass (``shape`` is ``[D]`` at residual sites; see :data:`trustlab.lm.hooks.HookFn` for the
    per-head and MLP-hidden sites; sites of different shapes are captured separately).

    Incremental generation steps (which hold only new tokens) are skipped.
    """
    names = as_sites(sites)
    _check_one_shape(lm, names)
    pos = as_positions(positions)
    if not pos.is_fixed_count:
        raise InputError(
            f"capture needs a fixed number of positions per prompt (last/at/post_instruction); "
            f"got {pos.describe()}. Use token_activations for every token."
        )
    result = Capture(names, pos)
    pending: dict[int, torch.Tensor] = {}

    def reader(i: int, name: str):
        # head_out is read as head_z at the selected columns, then projected per head: the
        # per-head terms [.., H, D] are computed for those tokens only, not for every token.
        layer, kind = lm.adapter.parse(name)
        project = None
        if kind == "head_out":
            matrix, _ = lm.adapter.out_proj(layer)
            n_heads = lm.adapter.n_heads
            project = lambda z: head_terms(z.flatten(-2), matrix, n_heads)  # noqa: E731

        def fn(site: str, h: torch.Tensor, step: StepState) -> None:
            if step.offset > 0:
                return None
            cols = step.gather_columns(pos)
            rows = torch.arange(h.shape[0], device=h.device).unsqueeze(1)
            got = h[rows, cols].detach()
            got = (got if project is None else project(got)).to(dtype)
            pending[i] = got.cpu() if to_cpu else got
            if len(pending) == len(names):
                result.records.append(torch.stack([pending[j] for j in range(len(names))], 1))
                pending.clear()
            return None

        site = f"blocks.{layer}.head_z" if kind == "head_out" else name
        return site, fn

    with contextlib.ExitStack() as stack:
        for i, name in enumerate(names):
            site, fn = reader(i, name)
            stack.enter_context(hook(lm, [site], fn))
        yield result


def _check_one_shape(lm: LanguageModel, names: list[str]) -> None:
    kinds = {lm.adapter.parse(n)[1] for n in names}
    shaped = kinds & {"head_z", "head_out", "mlp_hidden"}
    if shaped and len(kinds) > 1 and not (kinds <= {"head_out"} or kinds <= {"head_z"}):
        raise InputError(
            f"Sites of different shapes cannot be stacked in one tensor ({sorted(kinds)}): "
            "read the per-head / mlp_hidden sites separately from the residual ones."
        )


def _deepest(lm: LanguageModel, names: list[str]) -> str:
    def key(name: str) -> tuple[int, int]:
        layer, kind = lm.adapter.parse(name)
        return layer, SITE_ORDER[kind]

    return max(names, key=key)


@contextlib.contextmanager
def _stop_after(lm: LanguageModel, site: str) -> Iterator[None]:
    def stop(_site: str, h: torch.Tensor, step: StepState) -> None:
        raise _StopForward

    with hook(lm, [site], stop):
        yield


def batches(
    lm: LanguageModel,
    prompts: Inputs,
    batch_size: int,
    *,
    sort_by_length: bool = True,
    padding_side: Literal["left", "right"] = "left",
    progress: Progress | None = None,
    description: str = "forward",
) -> Iterator[tuple[list[int], Any]]:
    """Yield ``(prompt indices, Batch)``; sorting by length keeps padding small.

    A prepared :class:`Batch` is cut into row chunks as it is (its padding is kept). Prompts
    with images (a :class:`~trustlab.lm.multimodal.VisionLanguageModel`) are encoded chunk by
    chunk, images expanded into the tower's vectors.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be an integer >= 1. Got {batch_size!r}.")
    if isinstance(prompts, Batch):
        order = list(range(prompts.size))
        if sort_by_length:
            order.sort(key=lambda i: int(prompts.prompt_len[i]))
        parts = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
        steps: Iterable[list[int]] = parts
        if progress is not None:
            steps = progress(parts, description=description, total=len(parts))
        for part in steps:
            yield part, prompts.rows(part)
        return
    from trustlab.lm.multimodal import check_image_prompts

    images = check_image_prompts(lm, prompts, description)
    # image prompts: lengths with the images expanded; each chunk encoded with its images
    token_ids = None if images else lm.tokenize(prompts)
    lengths = lm.prompt_lengths(list(prompts)) if images else [len(t) for t in token_ids]
    order = list(range(len(lengths)))
    if sort_by_length:
        order.sort(key=lambda i: lengths[i])
    chunks = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    items: Iterable[list[int]] = chunks
    if progress is not None:
        items = progress(chunks, description=description, total=len(chunks))
    for chunk in items:
        if token_ids is None:
            yield chunk, lm.encode([prompts[i] for i in chunk], padding_side)
        else:
            yield chunk, lm.pad([token_ids[i] for i in chunk], padding_side)


def _n_inputs(prompts: Inputs, what: str) -> int:
    if isinstance(prompts, Batch):
        return prompts.size
    if isinstance(prompts, str) or not isinstance(prompts, Sequence):
        raise InputError(
            f"{what} takes a list of prompts (or a Batch). Got {type(prompts).__name__}."
        )
    if len(prompts) == 0:
        raise InputError(f"{what} needs at least one prompt.")
    return len(prompts)


def get_activations(
    lm: LanguageModel,
    prompts: Inputs,
    sites: str | Sequence[str],
    positions: PositionLike = "last",
    *,
    batch_size: int = 32,
    padding_side: Literal["left", "right"] = "left",
    progress: Progress | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Activations ``[n_prompts, n_sites, n_positions, d_model]`` (float32, on CPU).

    ``prompts``: raw strings or conversations (chat-formatted), or a :class:`Batch` (e.g. one
    carrying ``inputs_embeds``); ``sites``: canonical names, e.g. ``lm.sites("resid_pre")`` or
    ``["embed", *lm.sites("resid_post")]`` (per-head sites give ``[..., n_heads, d]``);
    ``positions``: ``"last"``, ``Positions.last(k)``, a list of indices, or
    ``"post_instruction"``. The forward pass stops after the deepest requested site; active
    interventions apply.
    """
    names = as_sites(sites)
    n_prompts = _n_inputs(prompts, "get_activations")
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
                out = torch.empty((n_prompts, *acts.shape[1:]), dtype=acts.dtype)
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
    prompts: Inputs,
    sites: str | Sequence[str],
    positions: PositionLike = "prompt",
    *,
    batch_size: int = 32,
    progress: Progress | None = None,
    dtype: torch.dtype = torch.float32,
) -> TokenActivations:
    """Activations at every selected token (e.g. all prompt tokens, for training an SAE).

    Tokens come prompt by prompt in the order given, each prompt's tokens in order. With a
    :class:`Batch` carrying free vectors, their ``token_ids`` entries are the pad id.
    """
    names = as_sites(sites)
    _check_one_shape(lm, names)
    n_prompts = _n_inputs(prompts, "token_activations")
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
    order = range(n_prompts)
    acts = torch.cat([per_prompt[i][0] for i in order], 0)
    token_ids = torch.cat([per_prompt[i][1] for i in order], 0)
    prompt_index = torch.cat(
        [torch.full((per_prompt[i][0].shape[0],), i, dtype=torch.long) for i in order]
    )
    return TokenActivations(acts=acts, prompt_index=prompt_index, token_ids=token_ids)
