"""Fine-tuning an image classifier (``vit-xs``) with the fine-tuning substrate's settings.

``trustlab.finetune.finetune`` trains causal LMs on chat examples; gmu also attacks a Vision
Transformer. :func:`finetune_classifier` is the same loop for ``(pixels, labels)`` with
cross-entropy: the same :class:`~trustlab.finetune.FinetuneConfig` (optimiser, betas, weight
decay, schedule through :func:`~trustlab.finetune.lr_multiplier`, clipping, parameter mask,
LoRA, seed, threads, determinism, stop on non-finite) and the same
:class:`~trustlab.finetune.FinetuneResult` (losses, gradient norms before clipping, per-module
norms, evaluations). It lives here while gmu is its only user (a second user moves it to the
substrate). Batches are drawn uniformly with replacement from the run's generator, with
horizontal flips (as ``vit-xs`` trained).
"""

from __future__ import annotations

import fnmatch
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.nn import functional as F

from trustlab.core.errors import InputError, MissingDependencyError
from trustlab.core.runtime import torch_runtime
from trustlab.finetune import FinetuneConfig, FinetuneResult, StepInfo, lr_multiplier, parse_config

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
    was = model.training
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(y), batch):
            logits = model(pixel_values=x[i : i + batch]).logits
            out.append(logits.argmax(-1) == y[i : i + batch])
    model.train(was)
    return torch.cat(out)


def _lora(model: torch.nn.Module, cfg: FinetuneConfig, generator: torch.Generator) -> Any:
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as exc:
        raise MissingDependencyError.for_package("peft", "llm", "LoRA fine-tuning") from exc
    lora = cfg.lora
    assert lora is not None
    n_layers = int(getattr(model.config, "num_hidden_layers", 0) or 0)
    layers = (None if lora.layers == "all" else
              list(range(n_layers // 2, n_layers)) if lora.layers == "upper_half" else list(lora.layers))  # fmt: skip
    try:
        peft_model = get_peft_model(model, LoraConfig(
            r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
            target_modules=list(lora.target_modules), layers_to_transform=layers,
            modules_to_save=["classifier"]))  # fmt: skip
    except ValueError as exc:
        raise InputError(f"LoRA could not be attached: {str(exc).splitlines()[0]}") from exc
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_A" in name:
                param.normal_(0.0, 1.0 / math.sqrt(param.shape[1]), generator=generator)
    return peft_model


def finetune_classifier(
    model: Any,
    pixels: Any,
    labels: Any,
    config: FinetuneConfig | dict[str, Any] | None = None,
    *,
    generator: torch.Generator | None = None,
    callbacks: tuple[Callable[[StepInfo], bool | None], ...] = (),
    evaluate: Callable[[Any, int], Mapping[str, float]] | None = None,
    eval_every: int | None = None,
    flip: bool = True,
    **overrides: Any,
) -> FinetuneResult:
    """Fine-tune an image classifier in place with cross-entropy; the curves as for LMs.

    ``config``/``overrides``: :class:`~trustlab.finetune.FinetuneConfig` (``max_length`` and
    ``word_dropout`` do not apply). With LoRA the classifier head trains fully (peft's
    ``modules_to_save``) and, with ``merge``, ``result.model`` is the merged plain model.
    """
    cfg = parse_config(config, **overrides)
    net = _model(model, "finetune_classifier")
    x, y = _tensors(pixels, labels, "finetune_classifier")
    if cfg.batch_size > len(y):
        raise InputError(
            f"The 'batch_size' setting of finetune_classifier ({cfg.batch_size}) exceeds the "
            f"number of images ({len(y)})."
        )
    if eval_every is not None and (isinstance(eval_every, bool) or not isinstance(eval_every, int)
                                   or eval_every <= 0):  # fmt: skip
        raise InputError(f"The 'eval_every' parameter must be a positive int. Got {eval_every!r}.")
    if generator is None:
        generator = torch.Generator().manual_seed(cfg.seed)
    result = FinetuneResult(steps=cfg.steps, n_examples=len(y))
    with torch_runtime(cfg.threads, deterministic=cfg.deterministic or None):
        train = _lora(net, cfg, generator) if cfg.lora else net
        previous = {n: p.requires_grad for n, p in train.named_parameters()}
        if cfg.trainable is not None:
            for name, p in train.named_parameters():
                p.requires_grad_(p.requires_grad and any(fnmatch.fnmatchcase(name, pat)
                                                         for pat in cfg.trainable))  # fmt: skip
        named = [(n, p) for n, p in train.named_parameters() if p.requires_grad]
        try:
            if not named:
                raise InputError(
                    f"The 'trainable' setting of finetune_classifier matches no parameter: "
                    f"{cfg.trainable}."
                )
            result.n_trainable = sum(p.numel() for _, p in named)
            params = [p for _, p in named]
            if cfg.optimizer == "sgd":
                opt: torch.optim.Optimizer = torch.optim.SGD(
                    params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
            else:
                cls = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
                opt = cls(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps,
                          weight_decay=cfg.weight_decay)  # fmt: skip
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_multiplier(cfg))
            _loop(train, x, y, cfg, generator, named, params, opt, sched, result, callbacks,
                  evaluate, eval_every, flip)  # fmt: skip
        finally:
            for name, p in train.named_parameters():
                if name in previous:
                    p.requires_grad_(previous[name])
        if cfg.lora and cfg.lora.merge:
            result.model = train.merge_and_unload().eval()
        else:
            result.model = train
    return result


def _loop(model, x, y, cfg, generator, named, params, opt, sched, result, callbacks, evaluate,
          eval_every, flip) -> None:  # fmt: skip
    model.train()
    start, cpu = time.perf_counter(), time.process_time()
    try:
        for step in range(cfg.steps):
            t0 = time.perf_counter()
            idx = torch.randint(len(y), (cfg.batch_size,), generator=generator)
            xb = x[idx]
            if flip:
                f = torch.rand(cfg.batch_size, generator=generator) < 0.5
                xb = torch.where(f[:, None, None, None], xb.flip(3), xb)
            loss = F.cross_entropy(model(pixel_values=xb).logits, y[idx])
            value = float(loss.detach())
            if not math.isfinite(value) and cfg.stop_on_nonfinite:
                result.diverged = True
                result.losses.append(value)
                break
            opt.zero_grad(set_to_none=True)
            loss.backward()
            modules: dict[str, float] = {}
            if cfg.module_grad_norms:
                squares: dict[str, float] = {}
                for name, p in named:
                    if p.grad is not None:
                        key = name.rsplit(".", 1)[0]
                        squares[key] = squares.get(key, 0.0) + float(p.grad.double().norm() ** 2)
                modules = {k: math.sqrt(v) for k, v in squares.items()}
            grads = [p.grad for p in params if p.grad is not None]
            if cfg.clip_grad_norm is not None:
                norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.clip_grad_norm))
            else:
                norm = float(torch.nn.utils.get_total_norm(grads))
            lr = float(opt.param_groups[0]["lr"])
            if not math.isfinite(norm):
                result.diverged = True
                if cfg.stop_on_nonfinite:
                    result.losses.append(value)
                    result.grad_norms.append(norm)
                    break
            opt.step()
            sched.step()
            result.losses.append(value)
            result.lrs.append(lr)
            result.grad_norms.append(norm)
            if cfg.module_grad_norms:
                result.module_grad_norms.append(modules)
            info = StepInfo(step + 1, cfg.steps, value, lr, norm, modules,
                            cfg.clip_grad_norm is not None and norm > cfg.clip_grad_norm,
                            time.perf_counter() - t0)  # fmt: skip
            stop = any([bool(cb(info)) for cb in callbacks])
            last = step + 1 == cfg.steps or stop
            if evaluate is not None and eval_every is not None and ((step + 1) % eval_every == 0 or last):
                model.eval()
                with torch.no_grad():
                    metrics = {str(k): float(v) for k, v in evaluate(model, step + 1).items()}
                model.train()
                result.evaluations.append((step + 1, metrics))
            if stop:
                result.stopped_early = step + 1 < cfg.steps
                break
    finally:
        result.train_seconds = time.perf_counter() - start
        result.train_cpu_seconds = time.process_time() - cpu
        model.eval()
