"""Hooks on canonical sites: observe or edit activations during forward passes and generation.

Everything here is a context manager; torch hooks are registered on entry and removed in
``finally``, so an exception in the body never leaves a hook behind. Nested contexts compose
in registration order: an outer intervention runs before an inner one on the same site, and a
capture opened inside an intervention sees the edited activations.

Positions are resolved per forward pass from the batch's attention mask (see
:mod:`trustlab.lm.positions`), so they count real tokens under left or right padding and keep
working across the incremental steps of ``generate`` (prompt positions act in the prefill).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from trustlab.core.errors import InputError
from trustlab.lm.model import LanguageModel
from trustlab.lm.positions import Positions

__all__ = ["HookFn", "HookRuntime", "StepState", "as_sites", "hook", "runtime_of"]

HookFn = Callable[[str, torch.Tensor, "StepState"], "torch.Tensor | None"]
"""``fn(site, activation, step) -> None`` (observe) or a tensor of the same shape (replace).

The activation is [B, S, D] at residual sites, [B, S, n_heads, d_head] at ``head_z``,
[B, S, n_heads, D] at ``head_out`` and [B, S, d_mlp] at ``mlp_hidden``."""

_RUNTIMES: weakref.WeakKeyDictionary[LanguageModel, HookRuntime] = weakref.WeakKeyDictionary()


def runtime_of(lm: LanguageModel, *, create: bool = True) -> HookRuntime | None:
    """The hook bookkeeping of ``lm`` (one per model object, created on first use; with
    ``create=False``, None when no hook has run on it yet)."""
    runtime = _RUNTIMES.get(lm)
    if runtime is None and create:
        runtime = _RUNTIMES[lm] = HookRuntime(lm)
    return runtime


@dataclass
class StepState:
    """What the hooks know about the forward pass in flight."""

    attention_mask: torch.Tensor  # [B, offset + S] bool
    offset: int  # tokens already in the cache (0 in a prefill / plain forward)
    seq_len: int  # S, tokens in this pass
    prompt_len: torch.Tensor  # [B] real tokens in the prompt
    n_post_instruction: int | None
    _cache: dict[Positions, torch.Tensor | None] = field(default_factory=dict)
    _columns: dict[tuple[str, Positions], torch.Tensor] = field(default_factory=dict)

    @property
    def batch_size(self) -> int:
        return int(self.attention_mask.shape[0])

    @property
    def valid(self) -> torch.Tensor:
        """[B, S] real (non-pad) tokens of this pass."""
        return self.attention_mask[:, self.offset : self.offset + self.seq_len]

    @property
    def real_index(self) -> torch.Tensor:
        """[B, S] index of each token among its sequence's real tokens."""
        full = self.attention_mask.long().cumsum(1) - 1
        return full[:, self.offset : self.offset + self.seq_len]

    def edit_mask(self, positions: Positions) -> torch.Tensor | None:
        """[B, S] bool of the tokens ``positions`` selects in this pass (None: every token)."""
        if positions.kind == "all":
            return None
        if positions in self._cache:
            return self._cache[positions]
        valid, idx = self.valid, self.real_index
        n = self.prompt_len.view(-1, 1)
        if positions.kind == "prompt":
            mask = valid & (idx < n)
        elif positions.kind == "generated":
            mask = valid & (idx >= n)
        else:
            targets = positions.prompt_targets(self.prompt_len, self.n_post_instruction)
            mask = valid & (idx.unsqueeze(-1) == targets.unsqueeze(1)).any(-1)
        self._cache[positions] = mask
        return mask

    def gather_columns(self, positions: Positions) -> torch.Tensor:
        """[B, P] column in this pass of each selected prompt token (fixed-count kinds)."""
        key = ("gather", positions)
        if key not in self._columns:
            self._columns[key] = self._gather_columns(positions)
        return self._columns[key]

    def _gather_columns(self, positions: Positions) -> torch.Tensor:
        targets = positions.prompt_targets(self.prompt_len, self.n_post_instruction)
        hits = (self.real_index.unsqueeze(-1) == targets.unsqueeze(1)) & self.valid.unsqueeze(-1)
        if not bool(hits.any(1).all()):
            raise InputError(
                f"Positions {positions.describe()} are not in this forward pass (offset "
                f"{self.offset}); capture reads prompt tokens in a full forward."
            )
        return hits.to(torch.int8).argmax(1)


class HookRuntime:
    """Per-model bookkeeping: a top-level pre-hook records the step state while hooks are on."""

    def __init__(self, lm: LanguageModel) -> None:
        self.lm = lm
        self.state: StepState | None = None
        self._users = 0
        self._handle: Any = None
        self._n_post_instruction: int | None = -1  # -1: not computed yet

    @contextlib.contextmanager
    def active(self) -> Iterator[HookRuntime]:
        if self._users == 0:
            self._handle = self.lm.model.register_forward_pre_hook(
                self._record_step, with_kwargs=True
            )
        self._users += 1
        try:
            yield self
        finally:
            self._users -= 1
            if self._users == 0:
                self._handle.remove()
                self._handle = None
                self.state = None

    def _record_step(self, module: Any, args: tuple, kwargs: dict) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            ids = kwargs.get("inputs_embeds")
        if ids is None:
            self.state = None
            return
        batch, seq = int(ids.shape[0]), int(ids.shape[1])
        mask = kwargs.get("attention_mask")
        if mask is None and len(args) > 1 and isinstance(args[1], torch.Tensor):
            mask = args[1]
        if mask is None or mask.dim() != 2:
            cache = kwargs.get("cache", kwargs.get("past_key_values"))
            past = int(cache.get_seq_length()) if hasattr(cache, "get_seq_length") else 0
            mask = torch.ones((batch, past + seq), dtype=torch.bool, device=ids.device)
        mask = mask.bool()
        offset = int(mask.shape[1]) - seq
        if offset == 0 or self.state is None or self.state.batch_size != batch:
            prompt_len = mask.sum(1)
        else:
            prompt_len = self.state.prompt_len
        self.state = StepState(
            attention_mask=mask,
            offset=offset,
            seq_len=seq,
            prompt_len=prompt_len,
            n_post_instruction=self._n_post(),
        )

    def _n_post(self) -> int | None:
        if self._n_post_instruction == -1:
            self._n_post_instruction = self.lm.n_post_instruction_or_none
        return self._n_post_instruction

    def current(self, hidden: torch.Tensor) -> StepState:
        """The step state matching ``hidden`` ([B, S, D]); a fresh all-real one otherwise."""
        state = self.state
        if state is None or hidden.shape[0] != state.batch_size or hidden.shape[1] != state.seq_len:
            b, s = int(hidden.shape[0]), int(hidden.shape[1])
            state = StepState(
                attention_mask=torch.ones((b, s), dtype=torch.bool, device=hidden.device),
                offset=0,
                seq_len=s,
                prompt_len=torch.full((b,), s, dtype=torch.long, device=hidden.device),
                n_post_instruction=self._n_post(),
            )
        return state

    def register(self, site: str, fn: Callable[[torch.Tensor, StepState], torch.Tensor | None]):
        """Register ``fn`` on ``site``; returns the torch handle (caller removes it)."""
        adapter = self.lm.adapter
        module, where = adapter.module(site)
        layer, kind = adapter.parse(site)
        if kind == "head_out":
            return self._register_head_out(module, layer, fn)
        if where == "pre":
            n_heads = adapter.n_heads if kind == "head_z" else None

            def pre_hook(mod: Any, args: tuple, kwargs: dict):
                in_args = bool(args)
                hidden = args[0] if in_args else kwargs[_first_key(kwargs)]
                view = hidden if n_heads is None else hidden.unflatten(-1, (n_heads, -1))
                new = fn(view, self.current(hidden))
                if new is None:
                    return None
                if n_heads is not None:
                    new = new.flatten(-2)
                if in_args:
                    return (new, *args[1:]), kwargs
                return args, {**kwargs, _first_key(kwargs): new}

            return module.register_forward_pre_hook(pre_hook, with_kwargs=True)

        def post_hook(mod: Any, args: tuple, output: Any):
            is_tuple = isinstance(output, tuple)
            hidden = output[0] if is_tuple else output
            new = fn(hidden, self.current(hidden))
            if new is None:
                return None
            return (new, *output[1:]) if is_tuple else new

        return module.register_forward_hook(post_hook)

    def _register_head_out(self, module: Any, layer: int, fn):
        """``head_out``: each head's term ``z_h @ W_O[h]`` [B, S, H, D], computed from the
        projection's input; an edit replaces the projection's output by the sum of the edited
        terms plus its bias."""
        matrix, bias = self.lm.adapter.out_proj(layer)
        n_heads = self.lm.adapter.n_heads
        assert n_heads is not None

        def post_hook(mod: Any, args: tuple, kwargs: dict, output: Any):
            z = args[0] if args else kwargs[_first_key(kwargs)]
            heads = head_terms(z, matrix, n_heads)
            new = fn(heads, self.current(z))
            if new is None:
                return None
            out = new.sum(-2)
            return out if bias is None else out + bias

        return module.register_forward_hook(post_hook, with_kwargs=True)


def head_terms(z: torch.Tensor, matrix: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Per-head terms [..., H, D] of an output projection ``z @ W`` (``W`` [H*d_head, D])."""
    z_h = z.unflatten(-1, (n_heads, -1))  # [..., H, dh]
    w_h = matrix.unflatten(0, (n_heads, -1))  # [H, dh, D]
    return torch.einsum("...hd,hdD->...hD", z_h, w_h.to(z.dtype))


def _first_key(kwargs: dict) -> str:
    for key in ("hidden_states", "input", "x"):
        if key in kwargs:
            return key
    return next(iter(kwargs))


def as_sites(sites: str | Sequence[str]) -> list[str]:
    if not isinstance(sites, str) and not isinstance(sites, Sequence):
        # None and ints used to raise "object is not iterable"
        raise InputError(f"Activation sites are a site name or a list of them. Got {sites!r:.60}.")
    names = [sites] if isinstance(sites, str) else list(sites)
    if not names:
        raise InputError("At least one activation site is needed. Got an empty list.")
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise InputError(f"Activation sites are names such as 'blocks.0.resid_pre'. Got {bad[0]!r:.60}.")
    return names


@contextlib.contextmanager
def hook(lm: LanguageModel, sites: str | Sequence[str], fn: HookFn) -> Iterator[None]:
    """Run ``fn(site, activation, step)`` at each of ``sites`` on every forward pass.

    ``fn`` observes by returning None or edits by returning a tensor of the same shape.
    """
    names = as_sites(sites)
    if not callable(fn):
        raise InputError(f"The 'fn' parameter of hook must be callable. Got {type(fn).__name__}.")
    for name in names:
        lm.adapter.module(name)  # validate every name before registering anything
    handles = []
    runtime = runtime_of(lm)
    assert runtime is not None
    with runtime.active():
        try:
            for name in names:
                handles.append(runtime.register(name, lambda h, st, _n=name: fn(_n, h, st)))
            yield
        finally:
            for handle in handles:
                handle.remove()
