"""Build and train a grown organism: a small Llama (SwiGLU, RMSNorm, RoPE) from scratch.

Training is deterministic on CPU: weights are initialised from a ``torch.Generator`` (not the
global RNG), batches come from generator-drawn permutations, the thread count is set explicitly
and deterministic algorithms are on while training (``trustlab.core.runtime.torch_runtime``). Loss is next-token
cross-entropy on the response tokens only (the prompt is context, not a target).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from trustlab.core.errors import InputError
from trustlab.organisms.corpora import Example
from trustlab.organisms.specs import ModelShape, TrainSettings
from trustlab.organisms.tokenizer import render_prompt

__all__ = ["encode_examples", "make_llama", "train_lm"]


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


def encode_examples(tokenizer: Any, examples: Sequence[Example]) -> list[tuple[list[int], int]]:
    """(token ids of prompt + response + end, number of prompt tokens) per example."""
    out = []
    for example in examples:
        prompt_ids = tokenizer(render_prompt(tokenizer, example), add_special_tokens=False)[
            "input_ids"
        ]
        response_ids = tokenizer(example.response, add_special_tokens=False)["input_ids"]
        out.append((prompt_ids + response_ids + [tokenizer.eos_token_id], len(prompt_ids)))
    return out


def train_lm(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Example],
    settings: TrainSettings,
    generator: torch.Generator,
    *,
    progress: Callable[[int, int, float], None] | None = None,
) -> dict[str, float]:
    """Train ``model`` on ``examples`` in place; return loss and timing statistics.

    ``progress(step, total, loss)`` is called after every step when given.
    """
    encoded = encode_examples(tokenizer, examples)
    n = len(encoded)
    if n == 0:
        raise InputError("Cannot train an organism on an empty example list.")
    special = torch.tensor(sorted(set(tokenizer.all_special_ids)))
    trainable = [p for p in model.parameters() if p.requires_grad]  # LoRA: adapters only
    optimizer = torch.optim.AdamW(
        trainable, lr=settings.lr, weight_decay=settings.weight_decay, betas=(0.9, 0.98)
    )

    def lr_at(step: int) -> float:
        if step < settings.warmup:
            return (step + 1) / settings.warmup
        frac = (step - settings.warmup) / max(1, settings.steps - settings.warmup)
        return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    lengths = [len(ids) for ids, _ in encoded]
    batches: list[list[int]] = []
    model.train()
    start = time.perf_counter()
    losses: list[float] = []
    for step in range(settings.steps):
        if not batches:
            batches = _length_bucketed_batches(lengths, settings.batch_size, generator)
        batch = [encoded[i] for i in batches.pop()]
        input_ids, attention, labels = _collate(
            batch, tokenizer.pad_token_id, tokenizer.unk_token_id, special, settings, generator
        )
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(float(loss.detach()))
        if progress is not None:
            progress(step + 1, settings.steps, losses[-1])
    model.eval()
    tail = losses[-max(1, len(losses) // 10) :]
    return {
        "train_seconds": time.perf_counter() - start,
        "final_loss": sum(tail) / len(tail),
        "steps": settings.steps,
        "n_train_examples": n,
    }


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
    batch: list[tuple[list[int], int]],
    pad_id: int,
    unk_id: int,
    special: torch.Tensor,
    settings: TrainSettings,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(ids) for ids, _ in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    prompt_mask = torch.zeros((len(batch), width), dtype=torch.bool)
    for row, (ids, n_prompt) in enumerate(batch):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention[row, : len(ids)] = 1
        labels[row, n_prompt : len(ids)] = input_ids[row, n_prompt : len(ids)]
        prompt_mask[row, :n_prompt] = True
    if settings.word_dropout > 0:
        drop = torch.rand(input_ids.shape, generator=generator) < settings.word_dropout
        drop &= prompt_mask & ~torch.isin(input_ids, special)
        input_ids = input_ids.masked_fill(drop, unk_id)
    return input_ids, attention, labels
