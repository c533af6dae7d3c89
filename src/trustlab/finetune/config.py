"""Fine-tuning settings: one frozen, validated object that also keys the derived-model cache.

Every field has a type, a default and a description; bad values raise
:class:`~trustlab.core.errors.InputError` naming the field. ``FinetuneConfig.key()`` is a
stable hash of the settings (used with the base model and data hashes to name a derived model).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, model_validator

from trustlab.core.errors import InputError

__all__ = ["FinetuneConfig", "LoraSettings", "parse_config"]


class LoraSettings(BaseModel):
    """LoRA adapters (``peft``): rank ``r``, scale ``alpha / r``, on ``target_modules``."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    r: int = Field(16, gt=0, description="Adapter rank.")
    alpha: float = Field(32.0, gt=0, description="LoRA alpha (the update is scaled by alpha / r).")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout on the adapter input.")
    target_modules: tuple[str, ...] = Field(
        ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj"),
        min_length=1,
        description="Module names (suffixes) that get adapters, as peft's target_modules.",
    )
    layers: Literal["all", "upper_half"] | tuple[int, ...] = Field(
        "all", description="Decoder layers that get adapters: all, the upper half, or indices."
    )
    merge: bool = Field(
        True, description="Merge the adapters into the weights after training (a plain model)."
    )


class FinetuneConfig(BaseModel):
    """How to fine-tune: optimiser, schedule, clipping, what is trained, batch order, threads.

    The defaults are plain supervised fine-tuning (AdamW, warm-up then cosine decay, no gradient
    clipping: clipping is a choice, e.g. a counter-measure gmu is measured against, not a
    hidden default). The organisms' own recipes set their values explicitly.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    steps: int = Field(100, gt=0, description="Optimiser steps (a fixed count, never a time).")
    batch_size: int = Field(8, gt=0, description="Examples per step.")
    lr: float = Field(1e-3, gt=0, description="Peak learning rate.")
    optimizer: Literal["adamw", "adam", "sgd"] = Field(
        "adamw", description="adamw (decoupled decay), adam (L2 decay in the gradient), sgd."
    )
    betas: tuple[float, float] = Field((0.9, 0.999), description="Adam/AdamW betas.")
    eps: float = Field(1e-8, gt=0, description="Adam/AdamW epsilon.")
    momentum: float = Field(0.9, ge=0, lt=1, description="SGD momentum (sgd only).")
    weight_decay: float = Field(0.0, ge=0, description="Weight decay.")
    schedule: Literal["warmup_cosine", "warmup_linear", "warmup_constant", "constant"] = Field(
        "warmup_cosine", description="Learning-rate schedule (multiplies lr)."
    )
    warmup: int = Field(
        0, ge=0, description="Linear warm-up steps (warmup_* schedules; may exceed steps)."
    )
    min_lr_ratio: float = Field(
        0.05, ge=0, le=1, description="Final lr / peak lr of the cosine and linear decays."
    )
    clip_grad_norm: float | None = Field(
        None, gt=0, description="Clip the global gradient norm to this value; None: no clipping."
    )
    trainable: tuple[str, ...] | None = Field(
        None,
        description=(
            "Parameter mask: fnmatch patterns over parameter names (e.g. 'model.layers.2.mlp.*'); "
            "only matching parameters train. None: every parameter (or the LoRA adapters)."
        ),
    )
    lora: LoraSettings | None = Field(None, description="Train LoRA adapters instead of weights.")
    word_dropout: float = Field(
        0.0, ge=0, lt=1, description="Share of prompt tokens replaced by the unknown token."
    )
    max_length: int | None = Field(
        None, gt=1, description="Truncate encoded examples to this many tokens (None: keep all)."
    )
    seed: int = Field(0, ge=0, description="Seeds batch order, word dropout and LoRA init.")
    threads: int = Field(1, gt=0, description="torch threads while training (fixed: repeatable).")
    deterministic: bool = Field(
        True,
        description="torch.use_deterministic_algorithms on while training (False: left as is).",
    )
    module_grad_norms: bool = Field(
        True, description="Report per-module gradient norms at every step."
    )
    stop_on_nonfinite: bool = Field(
        True, description="Stop (and flag the result diverged) when the loss is not finite."
    )

    @model_validator(mode="after")
    def _check(self) -> FinetuneConfig:
        if not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas must lie in [0, 1). Got {self.betas}")
        if self.trainable is not None and len(self.trainable) == 0:
            raise ValueError("trainable must name at least one pattern (or be None)")
        return self

    def key(self) -> str:
        """SHA-256 of the settings that change the weights (``threads`` included: it can)."""
        payload = self.model_dump(mode="json", exclude={"module_grad_norms"})
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def parse_config(value: FinetuneConfig | dict[str, Any] | None, **overrides: Any) -> FinetuneConfig:
    """A :class:`FinetuneConfig` from a config, a dict or None (defaults), with overrides.

    Raises InputError naming the offending field: "The 'lr' setting of finetune must be
    greater than 0. Got -1."
    """
    if isinstance(value, FinetuneConfig):
        base = value.model_dump()
    elif value is None:
        base = {}
    elif isinstance(value, dict):
        base = dict(value)
    else:
        raise InputError(
            f"The 'config' parameter of finetune must be a FinetuneConfig or a dict. "
            f"Got {type(value).__name__}."
        )
    base.update(overrides)
    try:
        return FinetuneConfig(**base)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "config"
        raise InputError(
            f"The '{field}' setting of finetune is invalid: {err['msg']}. "
            f"Got {err.get('input')!r:.80}."
        ) from None
