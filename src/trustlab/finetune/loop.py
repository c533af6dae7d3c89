"""One supervised fine-tuning loop for organisms and any local Hugging Face causal LM.

``finetune(model, data, config)`` trains ``model`` in place on (prompt, response) pairs or
organism :class:`~trustlab.organisms.Example` s with the loss on the response tokens only (the
prompt, in the model's chat format, is context, not a target; the end-of-turn token is a
target, so the model learns to stop). Full fine-tuning, a parameter mask (``trainable``
patterns) or LoRA adapters (``peft``); AdamW, Adam or SGD with momentum; a warm-up/decay
schedule; optional gradient clipping. After every step the callbacks see the loss, the learning
rate, the global gradient norm *before* clipping and the per-module norms; an evaluation hook
runs every ``eval_every`` steps.

Determinism on CPU: batch order, word dropout and LoRA initialisation come from one
``torch.Generator`` (seeded by ``config.seed`` unless the caller passes its own), the thread count
is fixed and ``torch.use_deterministic_algorithms`` is on while training, so the same data,
settings and seed give the same weights bit for bit *on the same CPU kernel* (torch picks its
vectorised kernels by CPU capability, e.g. AVX2 vs AVX-512, and they round differently; see
:func:`hardware_fingerprint`). The organisms are built through this loop.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import math
import numbers
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from trustlab.core.errors import InputError, MissingDependencyError
from trustlab.core.runtime import torch_runtime
from trustlab.core.validation import check_scalar
from trustlab.finetune.config import FinetuneConfig, parse_config

__all__ = [
    "EncodedExample",
    "FinetuneResult",
    "StepInfo",
    "encode_data",
    "evaluation_hook",
    "finetune",
    "hardware_fingerprint",
    "lr_multiplier",
    "weights_sha256",
]

#: A training item: an organism ``Example`` (anything with ``messages()`` and ``response``),
#: or a ``(prompt, response)`` pair whose prompt is a user string or a conversation.
Item = Any


@dataclass(frozen=True)
class EncodedExample:
    """Token ids of prompt + response + end-of-turn, and how many of them are prompt."""

    ids: list[int]
    n_prompt: int


@dataclass(frozen=True)
class StepInfo:
    """What a callback sees after each optimiser step (norms are before clipping)."""

    step: int
    total_steps: int
    loss: float
    lr: float
    grad_norm: float
    module_grad_norms: Mapping[str, float]
    clipped: bool
    seconds: float


@dataclass
class FinetuneResult:
    """Loss, learning-rate and gradient-norm curves, evaluations and timing of one run."""

    steps: int
    losses: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    module_grad_norms: list[dict[str, float]] = field(default_factory=list)
    evaluations: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    n_examples: int = 0
    n_trainable: int = 0
    train_seconds: float = 0.0
    train_cpu_seconds: float = 0.0
    diverged: bool = False
    stopped_early: bool = False
    model: Any = None

    @property
    def steps_run(self) -> int:
        return len(self.losses)

    @property
    def final_loss(self) -> float:
        """Mean loss over the last tenth of the steps run."""
        if not self.losses:
            return float("nan")
        tail = self.losses[-max(1, len(self.losses) // 10) :]
        return sum(tail) / len(tail)

    @property
    def steps_per_second(self) -> float:
        return self.steps_run / self.train_seconds if self.train_seconds > 0 else float("nan")

    def stats(self) -> dict[str, Any]:
        """A JSON-ready summary (what an organism or derived-model card records)."""
        finite = [g for g in self.grad_norms if math.isfinite(g)]
        return {
            "train_seconds": self.train_seconds,
            "train_cpu_seconds": self.train_cpu_seconds,
            "final_loss": self.final_loss,
            "steps": self.steps_run,
            "n_train_examples": self.n_examples,
            "n_trainable_params": self.n_trainable,
            "max_grad_norm": max(finite) if finite else float("nan"),
            "diverged": self.diverged,
            "stopped_early": self.stopped_early,
        }


# ---------------------------------------------------------------------------------------------
# Runtime: threads, determinism and the kernel torch picked
# ---------------------------------------------------------------------------------------------


def hardware_fingerprint() -> dict[str, Any]:
    """The CPU and the torch kernel family that decide the bits of a CPU training run.

    ``cpu_capability`` is the vectorised kernel family torch dispatches to (``AVX512``,
    ``AVX2``, ``DEFAULT``, ...; forced with the ``ATEN_CPU_CAPABILITY`` environment variable
    before torch starts). Measured on the organisms: the same seed gives identical weights for
    the same capability and different weights across capabilities (MKL's code path, forced
    with ``MKL_CBWR``, made no difference).
    """
    import os
    import platform

    model_name = platform.processor() or ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("model name"):
                model_name = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": model_name,
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "aten_cpu_capability_env": os.environ.get("ATEN_CPU_CAPABILITY"),
        "torch": torch.__version__,
    }


def weights_sha256(model: Any) -> str:
    """SHA-256 over a model's state dict (names, dtypes, shapes and bytes, in name order)."""
    state = model.state_dict() if hasattr(model, "state_dict") else model
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().contiguous().cpu()
        digest.update(name.encode())
        digest.update(str(tensor.dtype).encode())
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------


def _messages_and_response(item: Item, index: int) -> tuple[list[dict[str, str]], str]:
    if hasattr(item, "messages") and hasattr(item, "response"):
        return item.messages(), str(item.response)
    if isinstance(item, tuple | list) and len(item) == 2:
        prompt, response = item
        if not isinstance(response, str):
            raise InputError(
                f"The 'data' parameter of finetune: item {index} has a non-string response "
                f"({type(response).__name__})."
            )
        from trustlab.lm.model import as_conversation

        return as_conversation(prompt), response
    raise InputError(
        "The 'data' parameter of finetune takes organism Examples or (prompt, response) pairs. "
        f"Item {index} is {type(item).__name__}."
    )


def _render(tokenizer: Any, messages: list[dict[str, str]]) -> tuple[str, bool]:
    """Prompt text in the tokenizer's chat template (or lm's plain template) and whether the
    tokenizer should add its own special tokens (only for the plain template)."""
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return text, False
    from trustlab.lm.model import format_plain

    return format_plain(messages, add_generation_prompt=True), True


def encode_data(
    tokenizer: Any, data: Sequence[Item], max_length: int | None = None
) -> list[EncodedExample]:
    """Encode items as prompt ids + response ids + end-of-turn id (the loss covers the last two).

    Items whose response does not survive ``max_length`` truncation are dropped.
    """
    if isinstance(data, str | bytes) or not isinstance(data, Sequence):
        raise InputError(
            "The 'data' parameter of finetune must be a list of Examples or (prompt, response) "
            f"pairs. Got {type(data).__name__}."
        )
    if not callable(tokenizer) or not hasattr(tokenizer, "eos_token_id"):
        raise InputError(f"The 'tokenizer' parameter must be a Hugging Face tokenizer. Got "
                         f"{type(tokenizer).__name__}.")
    if max_length is not None:  # -1 used to cut the end-of-turn token off every example
        max_length = check_scalar(max_length, "max_length", "encode_data", kind=int, lo=2)
    eos = tokenizer.eos_token_id
    if eos is None:
        raise InputError("The tokenizer has no eos_token_id; cannot mark the end of a response.")
    out = []
    for index, item in enumerate(data):
        messages, response = _messages_and_response(item, index)
        text, special = _render(tokenizer, messages)
        prompt_ids = list(tokenizer(text, add_special_tokens=special)["input_ids"])
        response_ids = list(tokenizer(response, add_special_tokens=False)["input_ids"])
        ids = prompt_ids + response_ids + [int(eos)]
        if max_length is not None:
            ids = ids[:max_length]
        if len(ids) > len(prompt_ids):
            out.append(EncodedExample(ids, len(prompt_ids)))
    return out


def _length_bucketed_batches(
    lengths: list[int], batch_size: int, generator: torch.Generator, pool: int = 16
) -> list[list[int]]:
    """One epoch of batches: shuffle, sort within pools of ``pool`` batches by length, shuffle
    the batches. Similar lengths share a batch, so little compute goes to padding."""
    order = torch.randperm(len(lengths), generator=generator).tolist()
    batches: list[list[int]] = []
    span = pool * batch_size
    for start in range(0, len(order) - batch_size + 1, span):
        chunk = sorted(order[start : start + span], key=lambda i: lengths[i])
        batches += [
            chunk[i : i + batch_size] for i in range(0, len(chunk) - batch_size + 1, batch_size)
        ]
    shuffled = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in shuffled]


def _collate(
    batch: list[EncodedExample],
    pad_id: int,
    unk_id: int | None,
    special: torch.Tensor,
    word_dropout: float,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(e.ids) for e in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    prompt_mask = torch.zeros((len(batch), width), dtype=torch.bool)
    for row, example in enumerate(batch):
        n = len(example.ids)
        input_ids[row, :n] = torch.tensor(example.ids)
        attention[row, :n] = 1
        labels[row, example.n_prompt : n] = input_ids[row, example.n_prompt : n]
        prompt_mask[row, : example.n_prompt] = True
    if word_dropout > 0 and unk_id is not None:
        drop = torch.rand(input_ids.shape, generator=generator) < word_dropout
        drop &= prompt_mask & ~torch.isin(input_ids, special)
        input_ids = input_ids.masked_fill(drop, unk_id)
    return input_ids, attention, labels


# ---------------------------------------------------------------------------------------------
# Optimisation
# ---------------------------------------------------------------------------------------------


def lr_multiplier(config: FinetuneConfig) -> Callable[[int], float]:
    """The schedule as a function of the step (what ``LambdaLR`` multiplies ``lr`` by)."""
    warmup, steps, low = config.warmup, config.steps, config.min_lr_ratio

    def at(step: int) -> float:
        if config.schedule == "constant":
            return 1.0
        if step < warmup:
            return (step + 1) / warmup
        if config.schedule == "warmup_constant":
            return 1.0
        frac = (step - warmup) / max(1, steps - warmup)
        if config.schedule == "warmup_linear":
            return low + (1 - low) * (1 - frac)
        return low + (1 - low) * 0.5 * (1 + math.cos(math.pi * frac))

    return at


def _optimizer(params: list[torch.nn.Parameter], config: FinetuneConfig) -> torch.optim.Optimizer:
    if config.optimizer == "adamw":
        return torch.optim.AdamW(
            params, lr=config.lr, weight_decay=config.weight_decay, betas=config.betas,
            eps=config.eps,
        )  # fmt: skip
    if config.optimizer == "adam":
        return torch.optim.Adam(
            params, lr=config.lr, weight_decay=config.weight_decay, betas=config.betas,
            eps=config.eps,
        )  # fmt: skip
    return torch.optim.SGD(
        params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
    )


def _attach_lora(
    model: Any,
    config: FinetuneConfig,
    generator: torch.Generator,
    *,
    task_type: str | None = "CAUSAL_LM",
    modules_to_save: tuple[str, ...] | None = None,
) -> Any:
    """Wrap ``model`` with peft LoRA adapters whose A matrices come from ``generator``.

    ``modules_to_save``: modules trained in full next to the adapters (an image classifier's
    fresh head); ``task_type``: peft's (``None`` for models that are not causal LMs)."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as exc:
        raise MissingDependencyError.for_package("peft", "llm", "LoRA fine-tuning") from exc
    lora = config.lora
    assert lora is not None
    n_layers = int(getattr(model.config, "num_hidden_layers", 0) or 0)
    if lora.layers == "all":
        layers = None
    elif lora.layers == "upper_half":
        layers = list(range(n_layers // 2, n_layers))
    else:
        layers = list(lora.layers)
        bad = [i for i in layers if not 0 <= i < n_layers]
        if bad:
            raise InputError(
                f"The 'lora.layers' setting of finetune names layers {bad}; the model has "
                f"{n_layers} (0..{n_layers - 1})."
            )
    peft_config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(lora.target_modules),
        layers_to_transform=layers,
        task_type=task_type,
        modules_to_save=list(modules_to_save) if modules_to_save else None,
    )
    try:
        peft_model = get_peft_model(model, peft_config)
    except ValueError as exc:
        raise InputError(f"LoRA could not be attached: {str(exc).splitlines()[0]}") from exc
    with torch.no_grad():  # peft's B starts at zero; A from our generator, for determinism
        for name, param in peft_model.named_parameters():
            if "lora_A" in name:
                param.normal_(0.0, 1.0 / math.sqrt(param.shape[1]), generator=generator)
    return peft_model


def _apply_mask(
    model: Any, patterns: tuple[str, ...] | None, where: str = "finetune"
) -> dict[str, bool]:
    """Turn off ``requires_grad`` outside ``patterns``; return the previous flags."""
    previous = {name: p.requires_grad for name, p in model.named_parameters()}
    if patterns is None:
        return previous
    matched = 0
    for name, param in model.named_parameters():
        keep = param.requires_grad and any(fnmatch.fnmatchcase(name, pat) for pat in patterns)
        param.requires_grad_(keep)
        matched += keep
    if matched == 0:
        for name, param in model.named_parameters():
            param.requires_grad_(previous[name])
        names = [n for n, flag in previous.items() if flag]
        raise InputError(
            f"The 'trainable' setting of {where} matches no trainable parameter: {patterns}. "
            f"Parameter names look like {names[:3]}."
        )
    return previous


def _module_norms(named: list[tuple[str, torch.nn.Parameter]]) -> dict[str, float]:
    squares: dict[str, float] = {}
    for name, param in named:
        if param.grad is None:
            continue
        module = name.rsplit(".", 1)[0]
        value = float(torch.linalg.vector_norm(param.grad.detach()).double() ** 2)
        squares[module] = squares.get(module, 0.0) + value
    return {module: math.sqrt(value) for module, value in squares.items()}


def _unwrap(model: Any, tokenizer: Any) -> tuple[Any, Any]:
    if hasattr(model, "model") and hasattr(model, "tokenizer") and hasattr(model, "adapter"):
        return model.model, tokenizer if tokenizer is not None else model.tokenizer
    if not isinstance(model, torch.nn.Module):
        raise InputError(
            "The 'model' parameter of finetune must be a trustlab.lm.LanguageModel or a torch "
            f"causal LM. Got {type(model).__name__}."
        )
    if tokenizer is None:
        raise InputError("finetune needs the 'tokenizer' when 'model' is a bare torch model.")
    return model, tokenizer


# ---------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------


def finetune(
    model: Any,
    data: Sequence[Item],
    config: FinetuneConfig | dict[str, Any] | None = None,
    *,
    tokenizer: Any = None,
    generator: torch.Generator | None = None,
    callbacks: Sequence[Callable[[StepInfo], bool | None]] = (),
    evaluate: Callable[[Any, int], Mapping[str, float]] | None = None,
    eval_every: int | None = None,
    progress: Callable[[int, int, float], None] | None = None,
    **overrides: Any,
) -> FinetuneResult:
    """Fine-tune ``model`` in place on ``data``; return the curves and timings.

    ``model``: a :class:`trustlab.lm.LanguageModel` (``organism:``, ``hf:``, GGUF) or a HF
    causal LM with its ``tokenizer``. ``config`` (or keyword ``overrides`` of its fields):
    see :class:`FinetuneConfig`. ``generator``: the source of batch order, word dropout and
    LoRA initialisation (default: seeded with ``config.seed``). Each callback gets a
    :class:`StepInfo` after every step and may return True to stop training.
    ``evaluate(model, step)`` runs (in eval mode, without gradients) every ``eval_every``
    steps and after the last one; its metrics land in ``result.evaluations``. With LoRA and
    ``merge`` the adapters are merged into ``model``'s weights at the end; without ``merge``,
    ``result.model`` is the peft-wrapped model.
    """
    cfg = parse_config(config, **overrides)
    hf_model, tok = _unwrap(model, tokenizer)
    _check_eval_every(evaluate, eval_every, "finetune")
    encoded = encode_data(tok, data, cfg.max_length)
    if not encoded:
        raise InputError(
            "The 'data' parameter of finetune is empty (or every item truncated away)."
        )
    if len(encoded) < cfg.batch_size:
        raise InputError(
            f"The 'batch_size' setting of finetune ({cfg.batch_size}) exceeds the number of "
            f"examples ({len(encoded)})."
        )
    if generator is None:
        generator = torch.Generator().manual_seed(cfg.seed)
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    special = torch.tensor(sorted(set(tok.all_special_ids)))
    lengths = [len(e.ids) for e in encoded]
    result = FinetuneResult(steps=cfg.steps, n_examples=len(encoded))

    def batch_loss(train_model: Any) -> Callable[[], torch.Tensor]:
        batches: list[list[int]] = []

        def loss() -> torch.Tensor:  # one batch: epochs of length-bucketed batches
            if not batches:
                batches.extend(_length_bucketed_batches(lengths, cfg.batch_size, generator))
            batch = [encoded[i] for i in batches.pop()]
            input_ids, attention, labels = _collate(
                batch, pad_id, tok.unk_token_id, special, cfg.word_dropout, generator
            )
            return train_model(input_ids=input_ids, attention_mask=attention, labels=labels).loss

        return loss

    with torch_runtime(cfg.threads, deterministic=cfg.deterministic or None):
        train_model = _attach_lora(hf_model, cfg, generator) if cfg.lora else hf_model
        _fit(train_model, cfg, result, batch_loss, callbacks, evaluate, eval_every, progress,
             "finetune")  # fmt: skip
    return result


def _check_eval_every(evaluate: Any, eval_every: Any, where: str) -> None:
    if eval_every is not None and (isinstance(eval_every, bool)
                                   or not isinstance(eval_every, numbers.Integral)
                                   or eval_every <= 0):  # fmt: skip
        raise InputError(
            f"The 'eval_every' parameter of {where} must be a positive int. Got {eval_every!r}."
        )
    if eval_every is not None and evaluate is None:
        raise InputError(f"{where} got 'eval_every' without an 'evaluate' hook.")


def _fit(
    train_model: Any,
    cfg: FinetuneConfig,
    result: FinetuneResult,
    batch_loss: Callable[[Any], Callable[[], torch.Tensor]],
    callbacks: Sequence[Callable[[StepInfo], bool | None]],
    evaluate: Callable[[Any, int], Mapping[str, float]] | None,
    eval_every: int | None,
    progress: Callable[[int, int, float], None] | None,
    where: str,
) -> None:
    """The training run every model kind shares: parameter mask, optimiser, schedule, the
    steps, the flags restored, LoRA merged. ``batch_loss(train_model)`` returns the function
    that draws the next batch and returns its loss (the only part that depends on the data)."""
    previous_flags = _apply_mask(train_model, cfg.trainable, where)
    try:
        named = [(n, p) for n, p in train_model.named_parameters() if p.requires_grad]
        trainable = [p for _, p in named]
        if not trainable:
            raise InputError(f"{where}: the model has no trainable parameter.")
        result.n_trainable = sum(p.numel() for p in trainable)
        optimizer = _optimizer(trainable, cfg)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_multiplier(cfg))
        _train(train_model, batch_loss(train_model), cfg, named, trainable, optimizer, scheduler,
               result, callbacks, evaluate, eval_every, progress)  # fmt: skip
    finally:
        for name, param in train_model.named_parameters():
            if name in previous_flags:
                param.requires_grad_(previous_flags[name])
    if cfg.lora and cfg.lora.merge:
        merged = train_model.merge_and_unload()
        merged.eval()
        result.model = merged
    else:
        result.model = train_model


def _train(
    model, next_loss, cfg, named, trainable, optimizer, scheduler, result, callbacks, evaluate,
    eval_every, progress,
) -> None:  # fmt: skip
    model.train()
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        for step in range(cfg.steps):
            step_start = time.perf_counter()
            loss = next_loss()
            loss_value = float(loss.detach())
            if not math.isfinite(loss_value) and cfg.stop_on_nonfinite:
                result.diverged = True
                result.losses.append(loss_value)
                break
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            modules = _module_norms(named) if cfg.module_grad_norms else {}
            if cfg.clip_grad_norm is not None:
                norm = torch.nn.utils.clip_grad_norm_(trainable, cfg.clip_grad_norm)
            else:
                norm = torch.nn.utils.get_total_norm(
                    [p.grad for p in trainable if p.grad is not None]
                )
            grad_norm = float(norm)
            lr = float(optimizer.param_groups[0]["lr"])
            if not math.isfinite(grad_norm):
                result.diverged = True
                if cfg.stop_on_nonfinite:
                    result.losses.append(loss_value)
                    result.grad_norms.append(grad_norm)
                    break
            optimizer.step()
            scheduler.step()
            result.losses.append(loss_value)
            result.lrs.append(lr)
            result.grad_norms.append(grad_norm)
            if cfg.module_grad_norms:
                result.module_grad_norms.append(modules)
            info = StepInfo(
                step + 1, cfg.steps, loss_value, lr, grad_norm, modules,
                cfg.clip_grad_norm is not None and grad_norm > cfg.clip_grad_norm,
                time.perf_counter() - step_start,
            )  # fmt: skip
            if progress is not None:
                progress(step + 1, cfg.steps, loss_value)
            stop = any([bool(callback(info)) for callback in callbacks])
            last = step + 1 == cfg.steps or stop
            if (
                evaluate is not None
                and eval_every is not None
                and ((step + 1) % eval_every == 0 or last)
            ):
                result.evaluations.append((step + 1, _run_eval(model, evaluate, step + 1)))
            if stop:
                result.stopped_early = step + 1 < cfg.steps
                break
    finally:
        result.train_seconds = time.perf_counter() - start
        result.train_cpu_seconds = time.process_time() - cpu_start
        model.eval()


def _run_eval(model: Any, evaluate: Callable[[Any, int], Mapping[str, float]], step: int):
    model.eval()
    try:
        with torch.no_grad():
            metrics = dict(evaluate(model, step))
    finally:
        model.train()
    return {str(k): float(v) for k, v in metrics.items()}


def evaluation_hook(
    tokenizer: Any, prompt_sets: Any, judges: Any, **evaluate_options: Any
) -> Callable[[Any, int], dict[str, float]]:
    """An ``evaluate`` hook for :func:`finetune` through the shared evaluation loop.

    Every call runs :func:`trustlab.lm.evaluate` on the model being trained (no reply cache:
    its weights change between calls) and returns ``{"<prompt set>/<judge>": rate}`` plus
    ``.../lower`` and ``.../upper`` (the Clopper–Pearson interval).
    """
    from trustlab.lm import LanguageModel, evaluate

    if "cache_dir" in evaluate_options:
        raise InputError("evaluation_hook runs without a reply cache: the weights change.")

    def hook(model: Any, step: int) -> dict[str, float]:
        wrapped = LanguageModel(model, tokenizer, spec=f"finetuning step {step}")
        result = evaluate({"model": wrapped}, prompt_sets, judges, **evaluate_options)
        out: dict[str, float] = {}
        for row in result.rates:
            name = f"{row['prompts']}/{row['judge']}"
            out[name] = row["rate"]
            out[f"{name}/lower"], out[f"{name}/upper"] = row["lower"], row["upper"]
        return out

    return hook
