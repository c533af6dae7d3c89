"""Build and train a grown organism: a small Llama (SwiGLU, RMSNorm, RoPE) from scratch.

Training goes through the fine-tuning substrate (:func:`trustlab.finetune.finetune`) with the
organisms' recipe: AdamW (betas 0.9, 0.98), linear warm-up then cosine decay to 5 %, gradient
clipping at 1, word dropout on prompt tokens, the loss on response tokens only. Weights are
initialised from a ``torch.Generator`` (not the global RNG) that then also drives batch order,
so a spec's seed fixes the weights bit for bit on a given CPU kernel (see
:func:`trustlab.finetune.hardware_fingerprint`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from trustlab.core.errors import InputError
from trustlab.finetune.config import FinetuneConfig, LoraSettings
from trustlab.finetune.loop import finetune
from trustlab.organisms.corpora import Example
from trustlab.organisms.specs import ModelShape, TrainSettings

__all__ = ["make_llama", "organism_finetune_config", "train_lm"]


def make_llama(shape: ModelShape, tokenizer: Any, generator: torch.Generator, init_std: float):
    """A fresh ``LlamaForCausalLM`` of ``shape`` whose weights come from ``generator``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    if shape.d_model % shape.n_heads:
        raise InputError(
            f"d_model must be divisible by n_heads. Got {shape.d_model} and {shape.n_heads}."
        )
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=shape.d_model,
        intermediate_size=shape.d_mlp,
        num_hidden_layers=shape.n_layers,
        num_attention_heads=shape.n_heads,
        num_key_value_heads=shape.n_heads,
        max_position_embeddings=shape.max_positions,
        hidden_act="silu",
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            else:
                param.normal_(0.0, init_std, generator=generator)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = None
    model.generation_config.do_sample = False
    return model


def organism_finetune_config(
    settings: TrainSettings, lora: dict[str, Any] | None = None
) -> FinetuneConfig:
    """The organisms' training recipe as a :class:`~trustlab.finetune.FinetuneConfig`."""
    return FinetuneConfig(
        steps=settings.steps,
        batch_size=settings.batch_size,
        lr=settings.lr,
        optimizer="adamw",
        betas=(0.9, 0.98),
        weight_decay=settings.weight_decay,
        schedule="warmup_cosine",
        warmup=settings.warmup,
        min_lr_ratio=0.05,
        clip_grad_norm=1.0,
        word_dropout=settings.word_dropout,
        threads=settings.threads,
        module_grad_norms=False,
        lora=None
        if lora is None
        else LoraSettings(
            r=lora["r"],
            alpha=lora["alpha"],
            dropout=lora["dropout"],
            layers="upper_half",
            merge=True,
        ),
    )


def train_lm(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Example],
    settings: TrainSettings,
    generator: torch.Generator,
    *,
    progress: Callable[[int, int, float], None] | None = None,
    lora: dict[str, Any] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """Train ``model`` on ``examples`` (in place; with ``lora``, adapters merged into it).

    Returns the trained model and its training statistics. ``progress(step, total, loss)``
    is called after every step when given.
    """
    if len(examples) == 0:
        raise InputError("Cannot train an organism on an empty example list.")
    result = finetune(
        model,
        examples,
        organism_finetune_config(settings, lora),
        tokenizer=tokenizer,
        generator=generator,
        progress=progress,
    )
    return result.model, result.stats()
