"""Helpers for tests/lm: tiny randomly initialised HF models and word-level tokenizers."""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors

WORDS = [
    "how",
    "do",
    "i",
    "make",
    "a",
    "cake",
    "bomb",
    "build",
    "weapon",
    "write",
    "poem",
    "about",
    "the",
    "sea",
    "tell",
    "me",
    "story",
    "explain",
    "why",
    "sky",
    "is",
    "blue",
    "sorry",
    "cannot",
    "help",
    "with",
    "that",
    "sure",
    "here",
    "are",
    "steps",
    "to",
    "first",
    "second",
    "then",
    "finally",
    "you",
    "can",
    "it",
    "please",
    "what",
    "who",
    "where",
    "when",
    "and",
    "or",
    "not",
    "of",
    "in",
    "on",
    "for",
    "my",
    "your",
    "code",
    "python",
    "java",
    "run",
    "fix",
    "bug",
    "list",
    "sort",
    "numbers",
    "add",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "hello",
    "world",
]
SPECIALS = [
    "<pad>",
    "<unk>",
    "<bos>",
    "<eos>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|end|>",
]
CHAT_TEMPLATE = (
    "<bos>{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def make_tokenizer(chat_template: str | None):
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        additional_special_tokens=SPECIALS[4:],
    )
    if chat_template is not None:
        fast.chat_template = chat_template
    return fast


VOCAB = len(SPECIALS) + len(WORDS)


def make_config(family: str, n_layers: int = 3, d_model: int = 64):
    from transformers import (
        Gemma2Config,
        GPT2Config,
        GPTNeoXConfig,
        LlamaConfig,
        Phi3Config,
        Qwen2Config,
    )

    common = dict(vocab_size=VOCAB, bos_token_id=2, eos_token_id=3, pad_token_id=0)
    heads = dict(num_attention_heads=4, num_hidden_layers=n_layers, hidden_size=d_model)
    if family == "llama":
        return LlamaConfig(
            **common,
            **heads,
            intermediate_size=2 * d_model,
            num_key_value_heads=2,
            hidden_act="silu",
            max_position_embeddings=256,
            tie_word_embeddings=False,
            initializer_range=0.1,
        )
    if family == "gpt2":
        return GPT2Config(
            **common,
            n_embd=d_model,
            n_layer=n_layers,
            n_head=4,
            n_positions=256,
            initializer_range=0.1,
        )
    if family == "qwen2":
        return Qwen2Config(
            **common,
            **heads,
            intermediate_size=2 * d_model,
            num_key_value_heads=2,
            max_position_embeddings=256,
            initializer_range=0.1,
        )
    if family == "gpt_neox":
        return GPTNeoXConfig(
            **common,
            **heads,
            intermediate_size=2 * d_model,
            max_position_embeddings=256,
            initializer_range=0.1,
        )
    if family == "gemma2":
        return Gemma2Config(
            **common,
            **heads,
            intermediate_size=2 * d_model,
            num_key_value_heads=2,
            head_dim=16,
            max_position_embeddings=256,
            initializer_range=0.1,
        )
    if family == "phi3":
        return Phi3Config(
            **common,
            **heads,
            intermediate_size=2 * d_model,
            num_key_value_heads=4,
            max_position_embeddings=256,
            initializer_range=0.1,
        )
    raise ValueError(family)


def build_model(family: str, seed: int = 0, **kwargs):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(make_config(family, **kwargs)).eval()


def save_checkpoint(path, family: str, chat_template: str | None, seed: int = 0):
    model = build_model(family, seed=seed)
    model.save_pretrained(path)
    make_tokenizer(chat_template).save_pretrained(path)
    return path


def random_prompts(n: int, seed: int = 0, lo: int = 2, hi: int = 12) -> list[str]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        k = int(torch.randint(lo, hi + 1, (1,), generator=g))
        idx = torch.randint(0, len(WORDS), (k,), generator=g)
        out.append(" ".join(WORDS[i] for i in idx))
    return out
