"""Parameter slices: the rows of a model's weight matrices, the unit safety-critical parameters
are chosen in (GradSafe's "slices").

A 2-D parameter ``W [out, in]`` has ``out`` slices of ``in`` values (row ``i`` is the weights
that write output unit ``i``; for the embedding matrix, the vector of token ``i``); a 1-D
parameter (a norm's gain, a bias) is one slice. The flattened gradient layout is
:func:`trustlab.finetune.gradient_layout`'s (``named_parameters()`` order, row-major), so slice
``j`` is a contiguous range of the flattened gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from trustlab.core.errors import InputError
from trustlab.core.validation import as_float_array

__all__ = ["ParameterSlices", "as_tensor"]


def as_tensor(value: object, name: str, where: str, ndim: int) -> torch.Tensor:
    """A finite float tensor of ``ndim`` dimensions from a tensor or any array-like."""
    if isinstance(value, torch.Tensor):
        if value.dim() != ndim or not value.is_floating_point():
            raise InputError(
                f"The '{name}' parameter of {where} must be a {ndim}-D float tensor. Got "
                f"{value.dtype} of shape {tuple(value.shape)}."
            )
        if not bool(torch.isfinite(value).all()):
            raise InputError(f"The '{name}' parameter of {where} must be finite.")
        return value
    return torch.from_numpy(as_float_array(value, name, where, ndim=ndim))


@dataclass(frozen=True)
class ParameterSlices:
    """Rows of the parameters in ``layout`` (``(name, shape)`` pairs, in gradient order)."""

    layout: tuple[tuple[str, tuple[int, ...]], ...]

    def __post_init__(self) -> None:
        layout = self.layout
        if isinstance(layout, str | bytes) or not isinstance(layout, tuple | list) or not layout:
            raise InputError(
                "The 'layout' parameter of ParameterSlices is a non-empty list of (name, shape) "
                f"pairs. Got {layout!r:.80}."
            )
        clean = []
        for entry in layout:
            ok = isinstance(entry, tuple | list) and len(entry) == 2 and isinstance(entry[0], str)
            shape = entry[1] if ok else None
            ok = ok and isinstance(shape, tuple | list) and 1 <= len(shape) <= 2 and all(
                isinstance(d, int | np.integer) and not isinstance(d, bool) and d >= 1
                for d in shape
            )  # fmt: skip
            if not ok:
                raise InputError(
                    "The 'layout' parameter of ParameterSlices takes (name, shape) pairs of 1-D "
                    f"and 2-D parameters. Got {entry!r:.80}."
                )
            clean.append((entry[0], tuple(int(d) for d in shape)))  # type: ignore[union-attr]
        object.__setattr__(self, "layout", tuple(clean))

    # -- geometry ---------------------------------------------------------------------------
    def _blocks(self) -> list[tuple[str, int, int, int]]:
        """(name, offset, rows, row length) per parameter."""
        out, offset = [], 0
        for name, shape in self.layout:
            rows, width = (int(shape[0]), int(shape[1])) if len(shape) == 2 else (1, int(shape[0]))
            out.append((name, offset, rows, width))
            offset += rows * width
        return out

    @property
    def n_values(self) -> int:
        return sum(rows * width for _, _, rows, width in self._blocks())

    @property
    def n_slices(self) -> int:
        return sum(rows for _, _, rows, _ in self._blocks())

    def sizes(self) -> np.ndarray:
        """Values per slice ``[S]``."""
        return np.concatenate([np.full(rows, width) for _, _, rows, width in self._blocks()])

    def names(self) -> list[str]:
        """``param[row]`` per slice (``param`` alone for a 1-D parameter)."""
        out = []
        for (name, shape), (_, _, rows, _) in zip(self.layout, self._blocks(), strict=True):
            out += [f"{name}[{i}]" for i in range(rows)] if len(shape) == 2 else [name]
        return out

    def owners(self) -> list[str]:
        """The parameter name of each slice."""
        return [name for name, _, rows, _ in self._blocks() for _ in range(rows)]

    def indices(self, selected: Sequence[int] | np.ndarray) -> torch.Tensor:
        """Flat gradient indices of the ``selected`` slices, in gradient order."""
        chosen = np.unique(np.asarray(selected, dtype=np.int64))
        if chosen.size == 0 or chosen[0] < 0 or chosen[-1] >= self.n_slices:
            raise InputError(
                f"The 'selected' slices must be ids in [0, {self.n_slices}). Got "
                f"{chosen.size} ids{f' from {chosen[0]} to {chosen[-1]}' if chosen.size else ''}."
            )
        starts, widths = self._starts(), self.sizes()
        parts = [np.arange(starts[j], starts[j] + widths[j]) for j in chosen]
        return torch.from_numpy(np.concatenate(parts))

    def _starts(self) -> np.ndarray:
        return np.concatenate(
            [offset + width * np.arange(rows) for _, offset, rows, width in self._blocks()]
        )

    # -- per-slice statistics ----------------------------------------------------------------
    def dots_and_norms(
        self, grads: torch.Tensor, direction: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-slice dot products ``<g_j, r_j>`` ``[b, S]``, squared norms ``|g_j|^2`` ``[b, S]``
        and ``|r_j|^2`` ``[S]`` of gradients ``[b, d]`` against a direction ``[d]`` (finite
        tensors or array-likes)."""
        grads = as_tensor(grads, "grads", "ParameterSlices.cosines", 2)
        direction = as_tensor(direction, "direction", "ParameterSlices.cosines", 1)
        if (
            grads.dim() != 2
            or grads.shape[1] != self.n_values
            or direction.shape != (self.n_values,)
        ):
            raise InputError(
                f"Per-slice statistics need [b, {self.n_values}] gradients and a "
                f"[{self.n_values}] direction. Got {tuple(grads.shape)} and "
                f"{tuple(direction.shape)}."
            )
        b = grads.shape[0]
        dots, norms, rnorms = [], [], []
        for _, offset, rows, width in self._blocks():
            g = grads[:, offset : offset + rows * width].reshape(b, rows, width).float()
            r = direction[offset : offset + rows * width].reshape(rows, width).float()
            dots.append(torch.einsum("brw,rw->br", g, r))
            norms.append(g.pow(2).sum(-1))
            rnorms.append(r.pow(2).sum(-1))
        return torch.cat(dots, 1), torch.cat(norms, 1), torch.cat(rnorms)

    def cosines(self, grads: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
        """Per-slice cosines ``[b, S]`` (0 where a slice of either vector is zero)."""
        dots, norms, rnorms = self.dots_and_norms(grads, direction)
        denom = (norms * rnorms[None, :]).sqrt()
        return torch.where(denom > 0, dots / denom.clamp_min(1e-30), torch.zeros_like(dots))
