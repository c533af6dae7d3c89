"""Directions in activation space: difference in means, cosine matrices, direction selection.

The standard recipe from the refusal-direction literature (Arditi et al., 2024, "Refusal in
language models is mediated by a single direction"), and the choices made here:

1. Capture activations of two prompt sets (e.g. harmful vs harmless instructions) at every
   layer's ``resid_pre`` and at the post-instruction positions of the chat template
   (:func:`get_activations` with ``positions="post_instruction"``).
2. One candidate per (layer, position): ``mu_a - mu_b`` (:func:`diff_in_means`), unnormalised
   (its norm is kept for activation addition) and unit-normalised for ablation.
3. Score each candidate by a behavioural metric the caller supplies, typically the mean
   refusal score on held-out harmful prompts while the candidate is ablated at every layer
   (:func:`ablation_metric`), lower is better. Arditi et al. also discard candidates whose
   ablation changes harmless next-token distributions by KL > 0.1 or whose addition fails to
   induce refusal; pass such checks as ``candidate_filter``.
4. Skip the last 20% of layers (``max_layer_fraction=0.8``): directions there mostly act on the
   unembedding, not on the decision. The best-scoring remaining candidate wins.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from trustlab.core.errors import InputError
from trustlab.lm._checks import prompt_list
from trustlab.lm.interventions import ablate_direction
from trustlab.lm.model import LanguageModel, Prompt

__all__ = [
    "DirectionChoice",
    "ablation_metric",
    "cosine_similarity_matrix",
    "diff_in_means",
    "normalize",
    "select_direction",
]


def diff_in_means(acts_a: torch.Tensor, acts_b: torch.Tensor) -> torch.Tensor:
    """``mean(acts_a, 0) - mean(acts_b, 0)``, e.g. [n_layers, n_positions, d_model] candidates.

    Means are taken in float64 and returned as float32.
    """
    a, b = torch.as_tensor(acts_a), torch.as_tensor(acts_b)
    if a.shape[1:] != b.shape[1:] or a.dim() < 2 or a.shape[0] == 0 or b.shape[0] == 0:
        raise InputError(
            "diff_in_means needs two non-empty sets of activations with equal trailing shapes. "
            f"Got {tuple(a.shape)} and {tuple(b.shape)}."
        )
    return (a.double().mean(0) - b.double().mean(0)).float()


def normalize(v: torch.Tensor, dim: int = -1, eps: float = 1e-12) -> torch.Tensor:
    """Unit vectors along ``dim``; a zero vector is an error (it has no direction)."""
    v = torch.as_tensor(v)
    norms = v.norm(dim=dim, keepdim=True)
    if bool((norms <= eps).any()):
        raise InputError("Cannot normalise a zero vector: it has no direction.")
    return v / norms


def cosine_similarity_matrix(a: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """Cosine similarities ``[n, m]`` between rows of ``a`` [n, D] and ``b`` [m, D] (default a).

    Leading axes are flattened, so ``[n_layers, n_positions, D]`` gives one row per candidate.
    """
    a = torch.as_tensor(a).double()
    b = a if b is None else torch.as_tensor(b).double()
    if a.shape[-1] != b.shape[-1]:
        raise InputError(
            f"Cosine similarity needs equal widths. Got {a.shape[-1]} and {b.shape[-1]}."
        )
    a2, b2 = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    return (normalize(a2) @ normalize(b2).T).clamp(-1.0, 1.0).float()


@dataclass(frozen=True)
class DirectionChoice:
    """The selected candidate: ``layer``/``position`` index the candidate tensor's first axes."""

    layer: int
    position: int
    direction: torch.Tensor  # unit vector [D]
    raw: torch.Tensor  # the unnormalised candidate [D] (diff in means)
    score: float
    scores: torch.Tensor  # [n_layers, n_positions], NaN where skipped or filtered out


def select_direction(
    candidates: torch.Tensor,
    metric: Callable[[torch.Tensor, int, int], float],
    *,
    higher_is_better: bool = False,
    max_layer_fraction: float = 0.8,
    layers: Sequence[int] | None = None,
    candidate_filter: Callable[[torch.Tensor, int, int], bool] | None = None,
) -> DirectionChoice:
    """Pick the candidate direction with the best behavioural ``metric`` (see module recipe).

    ``candidates``: [n_layers, n_positions, D] (or [n_layers, D]); ``metric(unit_direction,
    layer, position) -> float``; layers at or beyond ``max_layer_fraction * n_layers`` are
    skipped unless ``layers`` lists the layers to try explicitly.
    """
    cand = torch.as_tensor(candidates).float()
    if cand.dim() == 2:
        cand = cand.unsqueeze(1)
    if cand.dim() != 3:
        raise InputError(
            f"candidates must be [n_layers, (n_positions,) D]. Got {tuple(cand.shape)}."
        )
    if not 0.0 < max_layer_fraction <= 1.0:
        raise InputError(f"max_layer_fraction must be in (0, 1]. Got {max_layer_fraction}.")
    n_layers, n_pos, _ = cand.shape
    tried = (
        list(layers)
        if layers is not None
        else list(range(max(1, math.ceil(max_layer_fraction * n_layers))))
    )
    scores = torch.full((n_layers, n_pos), float("nan"), dtype=torch.float64)
    best: tuple[float, int, int] | None = None
    for layer in tried:
        for pos in range(n_pos):
            raw = cand[layer, pos]
            if float(raw.norm()) == 0.0:
                continue
            unit = raw / raw.norm()
            if candidate_filter is not None and not candidate_filter(unit, layer, pos):
                continue
            value = float(metric(unit, layer, pos))
            if math.isnan(value):
                continue
            scores[layer, pos] = value
            key = -value if higher_is_better else value
            if best is None or key < best[0]:
                best = (key, layer, pos)
    if best is None:
        raise InputError("No candidate direction passed the filter with a finite metric.")
    _, layer, pos = best
    raw = cand[layer, pos]
    return DirectionChoice(
        layer=layer,
        position=pos,
        direction=raw / raw.norm(),
        raw=raw.clone(),
        score=float(scores[layer, pos]),
        scores=scores,
    )


def ablation_metric(
    lm: LanguageModel,
    prompts: Sequence[Prompt],
    score: Callable[[LanguageModel, Sequence[Prompt]], torch.Tensor],
) -> Callable[[torch.Tensor, int, int], float]:
    """A ``select_direction`` metric: mean ``score(lm, prompts)`` with the direction ablated
    at every layer (e.g. ``score = refusal_score`` from :mod:`trustlab.lm.judges`)."""

    prompts = prompt_list(prompts, "prompts", "ablation_metric")
    if not callable(score):
        raise InputError(f"The 'score' parameter of ablation_metric must be callable. Got {score!r:.40}.")

    def metric(direction: torch.Tensor, layer: int, position: int) -> float:
        with ablate_direction(lm, direction):
            return float(torch.as_tensor(score(lm, prompts)).double().mean())

    return metric
