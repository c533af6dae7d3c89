"""Token positions, counted over each prompt's real tokens (padding never counts).

A position spec says *which* tokens an activation is read at or an intervention acts on:

    Positions.last(k=1)          the last k prompt tokens
    Positions.at([0, -1])        explicit prompt-token indices (negative counts from the end)
    Positions.post_instruction() the tokens a chat template puts after the user's instruction
                                 (e.g. ``<|im_end|>\\n<|im_start|>assistant\\n``): Arditi et al.'s
                                 "post-instruction" positions
    Positions.prompt()           every prompt token
    Positions.generated()        every token produced during generation (none in a plain forward)
    Positions.all()              every token, prompt and generated

The strings ``"last"``, ``"all"``, ``"prompt"``, ``"generated"`` and ``"post_instruction"`` are
accepted as aliases of the argument-free constructors; a list of ints means ``Positions.at``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar

__all__ = ["PositionLike", "Positions", "as_positions"]

_Kind = Literal["last", "at", "post_instruction", "prompt", "generated", "all"]


@dataclass(frozen=True)
class Positions:
    """Which tokens of each sequence a capture or an intervention uses (see module docstring)."""

    kind: _Kind
    k: int = 1
    indices: tuple[int, ...] = ()

    @classmethod
    def last(cls, k: int = 1) -> Positions:
        # 2.5 used to mean last(2) and "a" raised a raw ValueError
        return cls("last", k=check_scalar(k, "k", "Positions.last", kind=int, lo=1))

    @classmethod
    def at(cls, indices: Sequence[int]) -> Positions:
        if isinstance(indices, str | bytes | Mapping) or not isinstance(indices, Iterable):
            raise InputError(
                f"Positions.at takes a list of token indices. Got {type(indices).__name__}."
            )
        # 1.5 used to mean index 1
        idx = tuple(
            check_scalar(i.item() if hasattr(i, "item") else i, "indices", "Positions.at", kind=int)
            for i in indices
        )
        if not idx:
            raise InputError("Positions.at needs at least one index. Got an empty list.")
        return cls("at", indices=idx)

    @classmethod
    def post_instruction(cls) -> Positions:
        return cls("post_instruction")

    @classmethod
    def prompt(cls) -> Positions:
        return cls("prompt")

    @classmethod
    def generated(cls) -> Positions:
        return cls("generated")

    @classmethod
    def all(cls) -> Positions:
        return cls("all")

    @property
    def is_fixed_count(self) -> bool:
        """True when every prompt yields the same number of positions (capturable as a tensor)."""
        return self.kind in ("last", "at", "post_instruction")

    def count(self, n_post_instruction: int | None = None) -> int:
        if self.kind == "last":
            return self.k
        if self.kind == "at":
            return len(self.indices)
        if self.kind == "post_instruction":
            if n_post_instruction is None:
                raise InputError("post_instruction positions need a chat template to count from.")
            return n_post_instruction
        raise InputError(f"Positions.{self.kind}() has no fixed count per prompt.")

    def prompt_targets(
        self, prompt_len: torch.Tensor, n_post_instruction: int | None = None
    ) -> torch.Tensor:
        """Real-token indices ``[B, P]`` selected in each prompt (fixed-count kinds only)."""
        kind = self.kind
        if kind == "post_instruction":
            kind, k = "last", self.count(n_post_instruction)
        else:
            k = self.k
        n = prompt_len.view(-1, 1)
        if kind == "last":
            offsets = torch.arange(-k, 0, device=prompt_len.device).view(1, -1)
            targets = n + offsets
        elif kind == "at":
            idx = torch.tensor(self.indices, device=prompt_len.device).view(1, -1)
            targets = torch.where(idx < 0, n + idx, idx.expand(n.shape[0], -1))
        else:
            raise InputError(f"Positions.{self.kind}() has no fixed count per prompt.")
        if bool(((targets < 0) | (targets >= n)).any()):
            shortest = int(prompt_len.min())
            raise InputError(
                f"Positions {self.describe()} fall outside a prompt of {shortest} tokens."
            )
        return targets

    def describe(self) -> str:
        if self.kind == "last":
            return f"last({self.k})"
        if self.kind == "at":
            return f"at({list(self.indices)})"
        return f"{self.kind}()"


PositionLike = (
    Positions | Literal["last", "all", "prompt", "generated", "post_instruction"] | Sequence[int]
)

_ALIASES = {
    "last": Positions.last(),
    "all": Positions("all"),
    "prompt": Positions("prompt"),
    "generated": Positions("generated"),
    "post_instruction": Positions("post_instruction"),
}


def as_positions(spec: PositionLike) -> Positions:
    """Normalise a position spec (object, alias string or list of indices) to ``Positions``."""
    if isinstance(spec, Positions):
        return spec
    if isinstance(spec, str):
        if spec not in _ALIASES:
            raise InputError(
                f"Position aliases are {sorted(_ALIASES)}; use Positions.last(k) or a list of "
                f"indices otherwise. Got {spec!r}."
            )
        return _ALIASES[spec]
    if isinstance(spec, bool):  # True used to mean index 1
        raise InputError(f"A position spec is not a boolean. Got {spec!r}.")
    if isinstance(spec, int):
        return Positions.at([spec])
    if isinstance(spec, Sequence):
        return Positions.at(spec)
    raise InputError(f"Unrecognised position spec of type {type(spec).__name__}: {spec!r}.")
