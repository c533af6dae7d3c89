"""The three directions of LLM Rheology, all differences in means at post-instruction positions.

* refusal ``r``: harmful minus harmless instructions, one candidate per (layer, post-instruction
  position) at ``resid_pre``; the layer is chosen by a behavioural criterion (Arditi et al.): the
  candidate whose ablation at every layer most lowers the refusal score of validation harmful
  prompts (``trustlab.lm.select_direction`` + ``ablation_metric``), last 20% of layers skipped;
* harm recognition ``h``: jailbreak-wrapped harmful minus jailbreak-wrapped benign requests (the
  content signal that survives the wrapper; it gates the conditional injection);
* task generation ``t``: jailbreak-wrapped harmful requests (which the model executes) minus the
  same kind of requests unwrapped (which it refuses): the direction along which adversarial task
  execution moves the stream. ``cos(r, t)`` per layer measures refusal/task coupling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from trustlab.core.errors import InputError, NotFittedError
from trustlab.lm import (
    LanguageModel,
    Prompt,
    ablation_metric,
    diff_in_means,
    get_activations,
    refusal_score,
    select_direction,
)

__all__ = ["RefusalDirection", "layer_candidates", "layer_cosines"]


def layer_candidates(
    lm: LanguageModel,
    prompts_a: Sequence[Prompt],
    prompts_b: Sequence[Prompt],
    *,
    batch_size: int = 32,
) -> torch.Tensor:
    """Difference-in-means candidates [n_layers, n_post_instruction, D] at every ``resid_pre``."""
    if not prompts_a or not prompts_b:
        raise InputError("Both prompt sets of a difference in means must be non-empty.")
    sites = lm.sites("resid_pre")
    a = get_activations(lm, list(prompts_a), sites, "post_instruction", batch_size=batch_size)
    b = get_activations(lm, list(prompts_b), sites, "post_instruction", batch_size=batch_size)
    return diff_in_means(a, b)


def layer_cosines(a: torch.Tensor, b: torch.Tensor, position: int) -> torch.Tensor:
    """Cosine per layer [n_layers] between two candidate tensors at one position (NaN at 0)."""
    x, y = a[:, position].double(), b[:, position].double()
    den = x.norm(dim=-1) * y.norm(dim=-1)
    cos = (x * y).sum(-1) / den
    return torch.where(den > 0, cos, torch.full_like(cos, float("nan"))).float()


@dataclass
class RefusalDirection:
    """Fit the refusal direction of one model and choose its layer.

    Parameters: ``max_layer_fraction`` (layers at or beyond this share of depth are skipped),
    ``batch_size``. ``fit(lm, harmful, harmless, validation_harmful)`` sets ``candidates_``
    [L, P, D], ``layer_``, ``position_``, ``direction_`` (unit), ``raw_`` (the unnormalised
    difference in means, its norm is the injection unit), ``scores_`` [L, P] (mean refusal
    log-odds with the candidate ablated; lower is better) and ``site_`` (``blocks.{l}.resid_pre``).
    """

    max_layer_fraction: float = 0.8
    batch_size: int = 32

    def fit(
        self,
        lm: LanguageModel,
        harmful: Sequence[Prompt],
        harmless: Sequence[Prompt],
        validation_harmful: Sequence[Prompt],
    ) -> RefusalDirection:
        self.candidates_ = layer_candidates(lm, harmful, harmless, batch_size=self.batch_size)
        metric = ablation_metric(lm, list(validation_harmful), refusal_score)
        choice = select_direction(
            self.candidates_, metric, max_layer_fraction=self.max_layer_fraction
        )
        self.layer_ = choice.layer
        self.position_ = choice.position
        self.direction_ = choice.direction
        self.raw_ = choice.raw
        self.scores_ = choice.scores
        self.site_ = f"blocks.{choice.layer}.resid_pre"
        return self

    def _check(self) -> None:
        if not hasattr(self, "direction_"):
            raise NotFittedError("Call RefusalDirection.fit(...) before using the direction.")

    def cosine_with(self, other: torch.Tensor) -> torch.Tensor:
        """Per-layer cosine [L] between the refusal candidates and ``other`` [L, P, D]."""
        self._check()
        return layer_cosines(self.candidates_, other, self.position_)
