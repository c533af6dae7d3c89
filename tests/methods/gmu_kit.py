"""Tiny models for gmu's tests: a random Llama (gated FFN) with a word-level tokenizer over the
fine-tuning substrate's task texts, and a random ViT (ungated GELU FFN). Built in well under a
second, so the properties run in the default suite without an organism."""

from __future__ import annotations

import functools

import torch

from trustlab.finetune import NEW_TASK_TEMPLATES, utility_examples

TASKS = tuple(NEW_TASK_TEMPLATES)


@functools.cache
def tokenizer():
    from trustlab.organisms.tokenizer import build_tokenizer

    texts = []
    for split, seed in (("train", 0), ("heldout", 1)):
        for e in utility_examples(300, seed, tasks=TASKS, split=split):
            texts += [m["content"] for m in e.messages()] + [e.response]
    return build_tokenizer(texts)


def llama(seed: int = 0, width: int = 48, layers: int = 2):
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = tokenizer()
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=width,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=128, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id, tie_word_embeddings=True)  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config).eval()
    return model


def vit(seed: int = 0):
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(image_size=16, patch_size=8, num_channels=3, hidden_size=16,
                       num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=4)  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = ViTForImageClassification(config).eval()
    return model


def ids(n: int = 4, length: int = 12, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(6, len(tokenizer()), (n, length), generator=gen)


def pixels(n: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, 16, 16, generator=gen) * 2 - 1, torch.randint(4, (n,), generator=gen)


def examples(n: int, seed: int = 0, split: str = "train"):
    return utility_examples(n, seed, tasks=TASKS, split=split)
