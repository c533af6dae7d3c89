"""The fine-tuning attack on a protected model, its unprotected twin and a model trained from
scratch, and the counter-attacks, as library functions (the experiment only wires them).

A *task* is what the attacker fine-tunes on: :class:`LMTask` (organism Examples, scored by
teacher-forced exact match and held-out loss) or :class:`ImageTask` (pixels and labels, scored by
accuracy and held-out cross-entropy; the classifier gets a fresh head for the new task, drawn
from the run's seed, the same for every arm). :func:`attack` fine-tunes one copy of a model and
returns an :class:`AttackOutcome`; :func:`compare` decides, per held-out item and with a paired
Newcombe interval, whether the protected model's fine-tuning was destabilised against its twin.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar
from trustlab.finetune import (
    FinetuneConfig,
    LoraSettings,
    classifier_accuracy,
    finetune,
    finetune_classifier,
    parse_config,
)
from trustlab.methods.gmu.counter import prune_units, reinit_units, suspect_units
from trustlab.methods.gmu.evaluation import response_scores
from trustlab.methods.gmu.planting import _check_model, find_ffn_layers

__all__ = [
    "COUNTER_ATTACKS",
    "AttackOutcome",
    "ImageTask",
    "LMTask",
    "attack",
    "compare",
    "counter_attack",
    "fresh_like",
]

#: The counter-attacks :func:`counter_attack` knows.
COUNTER_ATTACKS = ("clip", "prune", "reinit", "weight_decay", "low_lr", "lora_attention")
ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass(frozen=True)
class LMTask:
    """Chat examples to fine-tune on and held-out ones to score (with the tokenizer)."""

    tokenizer: Any
    train: Sequence[Any]
    heldout: Sequence[Any]


@dataclass(frozen=True)
class ImageTask:
    """Images to fine-tune on and held-out ones to score; ``n_classes`` of the new head."""

    pixels: torch.Tensor
    labels: torch.Tensor
    heldout_pixels: torch.Tensor
    heldout_labels: torch.Tensor
    n_classes: int


@dataclass
class AttackOutcome:
    """One fine-tuning run: curves, divergence, per-item held-out correctness and loss."""

    label: str
    losses: list[float]
    grad_norms: list[float]
    diverged: bool
    correct: np.ndarray
    heldout_loss: float
    cpu_seconds: float
    module_grad_norms: list[dict[str, float]] = field(default_factory=list, repr=False)

    @property
    def accuracy(self) -> float:
        return float(self.correct.mean())

    @property
    def steps_run(self) -> int:
        return len(self.losses)

    def row(self) -> dict[str, Any]:
        finite = [g for g in self.grad_norms if math.isfinite(g)]
        tail = self.losses[-max(1, len(self.losses) // 10) :]
        return {
            "arm": self.label,
            "steps_run": self.steps_run,
            "diverged": self.diverged,
            "first_loss": self.losses[0] if self.losses else math.nan,
            "final_train_loss": float(np.mean(tail)) if tail else math.nan,
            "max_train_loss": float(max(self.losses)) if self.losses else math.nan,
            "max_grad_norm": max(finite) if finite else math.nan,
            "heldout_loss": self.heldout_loss,
            "heldout_accuracy": self.accuracy,
            "cpu_seconds": round(self.cpu_seconds, 2),
        }


def _check_task(task: Any) -> LMTask | ImageTask:
    if not isinstance(task, LMTask | ImageTask):
        raise InputError(
            f"The 'task' parameter must be an LMTask or an ImageTask. Got {type(task).__name__}."
        )
    return task


def fresh_like(model: Any, seed: int = 0) -> torch.nn.Module:
    """A freshly initialised model of ``model``'s class and config (the *scratch* arm)."""
    if not isinstance(model, torch.nn.Module) or not hasattr(model, "config"):
        raise InputError(
            f"The 'model' parameter of fresh_like must be a transformers model. Got "
            f"{type(model).__name__}."
        )
    seed = check_scalar(seed, "seed", "fresh_like", kind=int, lo=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        out = type(model)(copy.deepcopy(model.config))
    return out.to(next(model.parameters()).dtype)


def _new_head(model: torch.nn.Module, n_classes: int, seed: int) -> None:
    head = model.classifier
    gen = torch.Generator().manual_seed(seed)
    new = torch.nn.Linear(head.in_features, n_classes)
    with torch.no_grad():
        new.weight.normal_(0.0, float(getattr(model.config, "initializer_range", 0.02)),
                           generator=gen)  # fmt: skip
        new.bias.zero_()
    model.classifier = new
    model.config.num_labels = n_classes


def attack(
    model: Any, task: Any, config: FinetuneConfig | dict[str, Any] | None = None, *,
    label: str = "model", seed: int = 0,
) -> AttackOutcome:  # fmt: skip
    """Fine-tune a copy of ``model`` on ``task`` under ``config`` and score it on held-out items.

    ``seed`` seeds the batch order (``config.seed`` is replaced) and, for images, the new head.
    A run that hits a non-finite loss or gradient stops there (``diverged``); it is scored on
    the weights it reached.
    """
    task = _check_task(task)
    seed = check_scalar(seed, "seed", "attack", kind=int, lo=0)
    cfg = parse_config(config, seed=seed)
    net = _check_model(model, "attack")
    if not hasattr(net, "config") or (isinstance(task, ImageTask) and not hasattr(net, "classifier")):
        raise InputError(
            f"The 'model' parameter of attack must be a transformers "
            f"{'image classifier' if isinstance(task, ImageTask) else 'causal LM'} for this "
            f"task. Got {type(net).__name__}."
        )
    net = copy.deepcopy(net)
    start = time.process_time()
    if isinstance(task, LMTask):
        result = finetune(net, list(task.train), cfg, tokenizer=task.tokenizer)
        trained = result.model
        correct, loss = response_scores(trained, task.heldout, tokenizer=task.tokenizer)
        correct_np = correct.numpy()
    else:
        _new_head(net, task.n_classes, seed)
        result = finetune_classifier(net, task.pixels, task.labels, cfg)
        trained = result.model
        correct_np = classifier_accuracy(trained, task.heldout_pixels, task.heldout_labels).numpy()
        with torch.no_grad():
            logits = trained(pixel_values=task.heldout_pixels).logits.double()
            loss = float(F.cross_entropy(logits, task.heldout_labels.long()))
        loss = loss if math.isfinite(loss) else math.inf
    return AttackOutcome(label, list(result.losses), list(result.grad_norms), result.diverged,
                         correct_np.astype(bool), loss, time.process_time() - start,
                         list(result.module_grad_norms))  # fmt: skip


def compare(
    protected: AttackOutcome, twin: AttackOutcome, margin: float = 0.05, alpha: float = 0.05
) -> dict[str, Any]:
    """Protected vs twin on the same held-out items: accuracy difference with the paired
    Newcombe interval, and ``destabilised`` = the protected run diverged, or its accuracy is
    below the twin's by at least ``margin`` with the interval's upper end below 0."""
    from trustlab.stats import newcombe_paired_difference

    for name, value in (("protected", protected), ("twin", twin)):
        if not isinstance(value, AttackOutcome):
            raise InputError(f"The '{name}' parameter of compare must be an AttackOutcome. Got "
                             f"{type(value).__name__}.")  # fmt: skip
    if protected.correct.shape != twin.correct.shape:
        raise InputError("compare: the two outcomes were scored on different held-out sets.")
    margin = check_scalar(margin, "margin", "compare", lo=0.0, hi=1.0)
    a, b = protected.correct, twin.correct
    n11, n10 = int((a & b).sum()), int((a & ~b).sum())
    n01, n00 = int((~a & b).sum()), int((~a & ~b).sum())
    diff = newcombe_paired_difference(n11, n10, n01, n00, alpha=alpha)
    below = diff.upper < 0 and diff.estimate <= -margin
    return {
        "protected_accuracy": protected.accuracy,
        "twin_accuracy": twin.accuracy,
        "difference": diff.estimate,
        "lower": diff.lower,
        "upper": diff.upper,
        "protected_diverged": protected.diverged,
        "twin_diverged": twin.diverged,
        "protected_heldout_loss": protected.heldout_loss,
        "twin_heldout_loss": twin.heldout_loss,
        "destabilised": bool(protected.diverged or below),
        "n_heldout": int(a.size),
    }


def counter_attack(
    name: str,
    protected: Any,
    config: FinetuneConfig,
    *,
    threshold: float = 6.0,
    clip: float = 1.0,
    weight_decay: float = 0.1,
    low_lr: float = 1e-5,
    lora_rank: int = 8,
) -> tuple[Any, FinetuneConfig, dict[str, Any]]:
    """``(model, fine-tuning config, facts)`` of one counter-attack on ``protected``.

    ``clip``: global-norm clipping; ``weight_decay``: AdamW decay; ``low_lr``: the learning
    rate; ``lora_attention``: LoRA of rank ``lora_rank`` on the attention projections only;
    ``prune`` / ``reinit``: :func:`suspect_units` at ``threshold`` then zeroed / re-initialised
    (facts: how many units were flagged).
    """
    if name not in COUNTER_ATTACKS:
        raise InputError(f"The 'name' parameter of counter_attack must be one of "
                         f"{COUNTER_ATTACKS}. Got {name!r}.")  # fmt: skip
    model = _check_model(protected, "counter_attack")
    find_ffn_layers(model)  # a model gmu can protect (InputError otherwise)
    cfg = parse_config(config)
    facts: dict[str, Any] = {}
    if name == "clip":
        cfg = parse_config(cfg, clip_grad_norm=clip)
    elif name == "weight_decay":
        cfg = parse_config(cfg, weight_decay=weight_decay)
    elif name == "low_lr":
        cfg = parse_config(cfg, lr=low_lr)
    elif name == "lora_attention":
        cfg = parse_config(cfg, lora=LoraSettings(r=lora_rank, alpha=2.0 * lora_rank,
                                                  target_modules=ATTENTION))  # fmt: skip
    else:
        units = suspect_units(model, threshold=threshold)
        facts["flagged_units"] = sum(len(v) for v in units.values())
        model = (prune_units if name == "prune" else reinit_units)(model, units)
    return model, cfg, facts
