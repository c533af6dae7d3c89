"""μΔ: the difference in means between execution and analysis variants, per layer and position.

    direction = ToolDirection(n_positions=4).fit(model, pairs.analysis)
    sweep = direction.separation(model, pairs.heldout)       # how well each candidate separates
    mu = direction.vector(layer, position)                    # [d_model], unnormalised

Layers are the residual stream entering each block (``blocks.{i}.resid_pre``, ``i = 0`` is the
embeddings) and the stream leaving the last block (``resid_post``): ``n_layers + 1`` rows, as
TransformerLens's ``resid_pre`` stack plus the final ``resid_post``. Positions are the last
``n_positions`` prompt tokens, counted from the end (``-1`` is the last token, where the first
output token is predicted); a minimal pair has the same tokens there, so at the embeddings μΔ
is exactly zero and the signal at a later layer was moved there by attention.

Activations are read in chunks and only their sums are kept, so the memory does not grow with
the number of pairs (hf models with thousands of prompts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.validation import as_float_array, check_scalar
from trustlab.lm import LanguageModel, Positions, binomial_rate, get_activations
from trustlab.lm.activations import Progress
from trustlab.methods.toolcall.pairs import check_pairs
from trustlab.stats import roc_auc_ci

__all__ = ["SeparationSweep", "ToolDirection", "layer_names"]


def layer_names(model: LanguageModel) -> list[str]:
    """``blocks.0.resid_pre`` … ``blocks.{L-1}.resid_pre`` and ``blocks.{L-1}.resid_post``."""
    if not isinstance(model, LanguageModel):
        raise InputError(
            "The 'model' parameter of layer_names must be a trustlab.lm.LanguageModel. "
            f"Got {type(model).__name__}."
        )
    return [*model.sites("resid_pre"), model.sites("resid_post")[-1]]


def _check_pairs(pairs: Any, where: str) -> list[Any]:
    return check_pairs(pairs, "pairs", where)


@dataclass(frozen=True)
class SeparationSweep:
    """How well the projection on unit μΔ separates held-out execution from analysis prompts,
    per layer and position (arrays ``[n_layers + 1, n_positions]``).

    ``auc`` (execution positive) with DeLong's 95% interval; ``paired_accuracy``: the share of
    pairs whose execution variant projects higher than its analysis variant (Clopper–Pearson
    interval); ``threshold_accuracy``: balanced accuracy of the threshold half-way between the
    fitted means (fixed before the held-out pairs are read); ``norm``: ‖μΔ‖.
    """

    layers: list[str]
    positions: list[int]
    auc: np.ndarray
    auc_low: np.ndarray
    auc_high: np.ndarray
    paired_accuracy: np.ndarray
    paired_low: np.ndarray
    paired_high: np.ndarray
    threshold_accuracy: np.ndarray
    norm: np.ndarray
    n_pairs: int

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for i, layer in enumerate(self.layers):
            for j, pos in enumerate(self.positions):
                out.append(
                    {
                        "layer": i,
                        "site": layer,
                        "position": pos,
                        "mu_norm": float(self.norm[i, j]),
                        "auc": float(self.auc[i, j]),
                        "auc_low": float(self.auc_low[i, j]),
                        "auc_high": float(self.auc_high[i, j]),
                        "paired_accuracy": float(self.paired_accuracy[i, j]),
                        "paired_low": float(self.paired_low[i, j]),
                        "paired_high": float(self.paired_high[i, j]),
                        "threshold_accuracy": float(self.threshold_accuracy[i, j]),
                        "pairs": self.n_pairs,
                    }
                )
        return out


class ToolDirection:
    """Difference in means of the residual stream, execution minus analysis variants.

    Parameters: ``n_positions`` — how many prompt tokens, counted back from the last, get a
    candidate; ``batch_size`` — prompts per forward pass; ``chunk`` — prompts whose
    activations are held at once. Fitted state: ``layers_`` (site names), ``positions_``
    (offsets from the end), ``mu_execution_``/``mu_analysis_``/``mu_delta_``
    ``[n_layers + 1, n_positions, d_model]`` (float64), ``n_pairs_``.
    """

    def __init__(self, *, n_positions: int = 4, batch_size: int = 64, chunk: int = 256) -> None:
        self.n_positions = n_positions
        self.batch_size = batch_size
        self.chunk = chunk

    # ---------------------------------------------------------------- fitting
    def _check(self, where: str) -> None:
        self._sizes = (
            check_scalar(self.n_positions, "n_positions", where, kind=int, lo=1),
            check_scalar(self.batch_size, "batch_size", where, kind=int, lo=1),
            check_scalar(self.chunk, "chunk", where, kind=int, lo=1),
        )

    def _acts(self, model: LanguageModel, prompts: list[Any], progress: Progress | None) -> Any:
        """Yield activation chunks [n, n_layers + 1, n_positions, d_model] (float32)."""
        sites = layer_names(model)
        n_positions, batch_size, chunk = self._sizes
        pos = Positions.last(n_positions)
        for start in range(0, len(prompts), chunk):
            yield get_activations(
                model,
                prompts[start : start + chunk],
                sites,
                pos,
                batch_size=batch_size,
                progress=progress,
            )

    def fit(
        self, model: LanguageModel, pairs: Sequence[Any], *, progress: Progress | None = None
    ) -> ToolDirection:
        """μΔ at every layer and position from the execution and analysis variants of ``pairs``."""
        where = "ToolDirection.fit"
        self._check(where)
        if not isinstance(model, LanguageModel):
            raise InputError(f"The 'model' parameter of {where} must be a LanguageModel.")
        pairs = _check_pairs(pairs, where)
        sums = []
        for variant in ("execution", "analysis"):
            prompts = [getattr(p, variant) for p in pairs]
            total = None
            for acts in self._acts(model, prompts, progress):
                s = acts.double().sum(0)
                total = s if total is None else total + s
            assert total is not None
            sums.append(total / len(pairs))
        self.layers_ = layer_names(model)
        self.positions_ = list(range(-self._sizes[0], 0))
        self.mu_execution_, self.mu_analysis_ = sums
        self.mu_delta_ = sums[0] - sums[1]
        self.n_pairs_ = len(pairs)
        self.d_model_ = model.d_model
        return self

    def _fitted(self, step: str) -> None:
        if not hasattr(self, "mu_delta_"):
            raise NotFittedError(f"ToolDirection.{step} needs fit() first.")

    # ---------------------------------------------------------------- reading
    def _index(self, layer: int, position: int) -> tuple[int, int]:
        n_layers, n_pos = self.mu_delta_.shape[:2]
        layer = check_scalar(layer, "layer", "ToolDirection", kind=int, lo=0, hi=n_layers - 1)
        position = check_scalar(position, "position", "ToolDirection", kind=int, lo=-n_pos, hi=-1)
        return layer, n_pos + position

    def vector(self, layer: int, position: int = -1) -> torch.Tensor:
        """μΔ at ``layer`` (0 … n_layers; n_layers is the final resid_post) and ``position``
        (an offset from the end, -1 the last token), unnormalised, float32 [d_model]."""
        self._fitted("vector")
        i, j = self._index(layer, position)
        return self.mu_delta_[i, j].float().clone()

    def unit(self, layer: int, position: int = -1) -> torch.Tensor:
        """The unit direction of :meth:`vector` (an error where μΔ is zero)."""
        v = self.vector(layer, position).double()
        norm = float(v.norm())
        if norm <= 1e-9 * max(1.0, float(self.mu_execution_.abs().max())):
            raise InputError(
                f"μΔ is zero at layer {layer}, position {position} (the pair's variants are "
                "identical there); it has no direction."
            )
        return (v / norm).float()

    def norms(self) -> np.ndarray:
        """‖μΔ‖ per layer and position ``[n_layers + 1, n_positions]``."""
        self._fitted("norms")
        return self.mu_delta_.norm(dim=-1).numpy()

    def mean_projections(
        self, direction: torch.Tensor, position: int = -1
    ) -> dict[str, np.ndarray]:
        """Mean projections of the fitted execution and analysis activations on the unit
        ``direction`` at every layer (``[n_layers + 1]`` each), at ``position``: the clamp
        values of the affine ablation, and where zero sits relative to the two means."""
        self._fitted("mean_projections")
        _, j = self._index(0, position)
        arr = as_float_array(direction, "direction", "mean_projections", ndim=1)
        if arr.shape[0] != self.d_model_ or not np.any(arr):
            raise InputError(
                "The 'direction' parameter of mean_projections must be a non-zero vector of "
                f"length {self.d_model_}. Got length {arr.shape[0]}."
            )
        r = torch.from_numpy(arr)
        r = r / r.norm()
        return {
            "execution": (self.mu_execution_[:, j] @ r).numpy(),
            "analysis": (self.mu_analysis_[:, j] @ r).numpy(),
        }

    def candidates(self, *, max_layer_fraction: float = 0.8) -> list[tuple[int, int]]:
        """``(layer, position)`` candidates for the causal tests: ``resid_pre`` layers below
        ``max_layer_fraction`` of the depth (Arditi et al.'s rule; the final stream, read
        straight by the unembedding, is left out) where μΔ is not zero."""
        self._fitted("candidates")
        frac = check_scalar(
            max_layer_fraction, "max_layer_fraction", "candidates", lo=0.0, hi=1.0, closed="right"
        )
        n_blocks = self.mu_delta_.shape[0] - 1
        scale = max(1.0, float(self.mu_execution_.abs().max()))
        out = []
        for layer in range(n_blocks):
            if layer >= max(1.0, frac * n_blocks):
                continue
            for j, pos in enumerate(self.positions_):
                if float(self.mu_delta_[layer, j].norm()) > 1e-6 * scale:
                    out.append((layer, pos))
        return out

    # ---------------------------------------------------------------- evaluation
    def projections(
        self,
        model: LanguageModel,
        prompts: Sequence[Any],
        *,
        progress: Progress | None = None,
    ) -> np.ndarray:
        """Projections of ``prompts`` on unit μΔ of every layer and position
        ``[n_prompts, n_layers + 1, n_positions]`` (NaN where μΔ is zero)."""
        self._fitted("projections")
        if isinstance(prompts, str) or not isinstance(prompts, Sequence) or not prompts:
            raise InputError("The 'prompts' parameter of projections must be a non-empty list.")
        if not isinstance(model, LanguageModel):
            raise InputError("The 'model' parameter of projections must be a LanguageModel.")
        norms = self.mu_delta_.norm(dim=-1, keepdim=True)
        units = torch.where(
            norms > 0,
            self.mu_delta_ / norms.clamp_min(1e-30),
            torch.full_like(self.mu_delta_, float("nan")),
        )
        out = []
        for acts in self._acts(model, list(prompts), progress):
            out.append((acts.double() * units).sum(-1).numpy())
        return np.concatenate(out, 0)

    def separation(
        self, model: LanguageModel, pairs: Sequence[Any], *, progress: Progress | None = None
    ) -> SeparationSweep:
        """The layer/position sweep on held-out ``pairs`` (see :class:`SeparationSweep`)."""
        self._fitted("separation")
        pairs = _check_pairs(pairs, "ToolDirection.separation")
        pe = self.projections(model, [p.execution for p in pairs], progress=progress)
        pa = self.projections(model, [p.analysis for p in pairs], progress=progress)
        shape = pe.shape[1:]
        auc, lo, hi = (np.full(shape, np.nan) for _ in range(3))
        acc, alo, ahi, thr_acc = (np.full(shape, np.nan) for _ in range(4))
        units = self.mu_delta_ / self.mu_delta_.norm(dim=-1, keepdim=True).clamp_min(1e-30)
        mid = 0.5 * ((self.mu_execution_ * units).sum(-1) + (self.mu_analysis_ * units).sum(-1))
        y = np.r_[np.ones(len(pairs)), np.zeros(len(pairs))]
        norms = self.norms()
        for i in range(shape[0]):
            for j in range(shape[1]):
                if not np.isfinite(pe[:, i, j]).all() or norms[i, j] == 0:
                    continue
                scores = np.r_[pe[:, i, j], pa[:, i, j]]
                res = roc_auc_ci(y, scores)
                auc[i, j], lo[i, j], hi[i, j] = res.auc, res.lower, res.upper
                rate = binomial_rate((pe[:, i, j] > pa[:, i, j]).tolist())
                acc[i, j], alo[i, j], ahi[i, j] = rate.rate, rate.lower, rate.upper
                m = float(mid[i, j])
                thr_acc[i, j] = 0.5 * ((pe[:, i, j] > m).mean() + (pa[:, i, j] <= m).mean())
        return SeparationSweep(
            list(self.layers_),
            list(self.positions_),
            auc,
            lo,
            hi,
            acc,
            alo,
            ahi,
            thr_acc,
            norms,
            len(pairs),
        )
