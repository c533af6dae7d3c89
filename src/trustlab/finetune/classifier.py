"""The fine-tuning loop for image classifiers (``vit-xs``, any Hugging Face image classifier).

:func:`finetune_classifier` trains on ``(pixels, labels)`` with cross-entropy through the same
run as :func:`~trustlab.finetune.finetune` (one :class:`~trustlab.finetune.FinetuneConfig`:
optimiser, betas, weight decay, schedule, clipping, parameter mask, LoRA, seed, threads,
determinism, stop on non-finite; one :class:`~trustlab.finetune.FinetuneResult`: losses,
gradient norms before clipping, per-module norms, evaluations, callbacks, progress). Only the
batches differ: drawn uniformly with replacement from the run's generator, with horizontal
flips (as ``vit-xs`` trained). ``max_length`` and ``word_dropout`` do not apply.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch.nn import functional as F

from trustlab.core.errors import InputError
from trustlab.core.runtime import torch_runtime
from trustlab.core.validation import check_scalar
from trustlab.finetune.config import FinetuneConfig, parse_config
from trustlab.finetune.loop import (
    FinetuneResult,
    StepInfo,
    _attach_lora,
    _check_eval_every,
    _fit,
)

__all__ = ["classifier_accuracy", "finetune_classifier"]


def _tensors(pixels: Any, labels: Any, where: str) -> tuple[torch.Tensor, torch.Tensor]:
    if not torch.is_tensor(pixels) or pixels.ndim != 4 or not pixels.is_floating_point():
        raise InputError(
            f"The 'pixels' parameter of {where} must be a float tensor [n, channels, height, "
            f"width]. Got {type(pixels).__name__}{tuple(getattr(pixels, 'shape', ()))}."
        )
    if not bool(torch.isfinite(pixels).all()):
        raise InputError(f"The 'pixels' parameter of {where} holds NaN or infinite values.")
    if not torch.is_tensor(labels) or labels.ndim != 1 or labels.dtype not in (torch.int64, torch.int32):
        raise InputError(
            f"The 'labels' parameter of {where} must be an integer tensor [n]. Got "
            f"{type(labels).__name__}{tuple(getattr(labels, 'shape', ()))}."
        )
    if len(labels) != len(pixels) or len(labels) == 0:
        raise InputError(
            f"{where}: 'pixels' has {len(pixels)} images and 'labels' {len(labels)} labels "
            "(they must match and be non-empty)."
        )
    return pixels, labels.long()


def _model(model: Any, where: str) -> torch.nn.Module:
    if not isinstance(model, torch.nn.Module) or not hasattr(model, "config"):
        raise InputError(
            f"The 'model' parameter of {where} must be a transformers image classifier. Got "
            f"{type(model).__name__}."
        )
    return model


def classifier_accuracy(model: Any, pixels: Any, labels: Any, batch: int = 250) -> torch.Tensor:
    """Per-image correctness (bool tensor ``[n]``) of ``model`` on ``(pixels, labels)``."""
    model = _model(model, "classifier_accuracy")
    x, y = _tensors(pixels, labels, "classifier_accuracy")
    batch = check_scalar(batch, "batch", "classifier_accuracy", kind=int, lo=1)
    was = model.training
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(y), batch):
            logits = model(pixel_values=x[i : i + batch]).logits
            out.append(logits.argmax(-1) == y[i : i + batch])
    model.train(was)
    return torch.cat(out)


def finetune_classifier(
    model: Any,
    pixels: Any,
    labels: Any,
    config: FinetuneConfig | dict[str, Any] | None = None,
    *,
    generator: torch.Generator | None = None,
    callbacks: Sequence[Callable[[StepInfo], bool | None]] = (),
    evaluate: Callable[[Any, int], Mapping[str, float]] | None = None,
    eval_every: int | None = None,
    progress: Callable[[int, int, float], None] | None = None,
    flip: bool = True,
    **overrides: Any,
) -> FinetuneResult:
    """Fine-tune an image classifier in place with cross-entropy; the curves as for LMs.

    ``config``/``overrides``: :class:`~trustlab.finetune.FinetuneConfig`. ``flip``: random
    horizontal flips. With LoRA the module named ``classifier`` (the head) trains fully
    (peft's ``modules_to_save``) and, with ``merge``, ``result.model`` is the merged plain model.
    """
    cfg = parse_config(config, **overrides)
    net = _model(model, "finetune_classifier")
    x, y = _tensors(pixels, labels, "finetune_classifier")
    if cfg.batch_size > len(y):
        raise InputError(
            f"The 'batch_size' setting of finetune_classifier ({cfg.batch_size}) exceeds the "
            f"number of images ({len(y)})."
        )
    _check_eval_every(evaluate, eval_every, "finetune_classifier")
    if not isinstance(flip, bool):
        raise InputError(f"The 'flip' parameter of finetune_classifier must be a bool. Got "
                         f"{type(flip).__name__}.")  # fmt: skip
    if generator is None:
        generator = torch.Generator().manual_seed(cfg.seed)
    result = FinetuneResult(steps=cfg.steps, n_examples=len(y))

    def batch_loss(train_model: Any) -> Callable[[], torch.Tensor]:
        def loss() -> torch.Tensor:  # uniform with replacement, then optional flips
            idx = torch.randint(len(y), (cfg.batch_size,), generator=generator)
            xb = x[idx]
            if flip:
                f = torch.rand(cfg.batch_size, generator=generator) < 0.5
                xb = torch.where(f[:, None, None, None], xb.flip(3), xb)
            return F.cross_entropy(train_model(pixel_values=xb).logits, y[idx])

        return loss

    head = ("classifier",) if isinstance(getattr(net, "classifier", None), torch.nn.Module) else None
    with torch_runtime(cfg.threads, deterministic=cfg.deterministic or None):
        train = (_attach_lora(net, cfg, generator, task_type=None, modules_to_save=head)
                 if cfg.lora else net)  # fmt: skip
        _fit(train, cfg, result, batch_loss, callbacks, evaluate, eval_every, progress,
             "finetune_classifier")  # fmt: skip
    return result
