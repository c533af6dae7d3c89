"""A word-level ``tokenizers`` tokenizer built from a corpus, wrapped for transformers.

Pre-tokenisation: spaces become ``▁`` word prefixes (Metaspace), punctuation is split off
character by character, digits one by one. Decoding joins the pieces and turns ``▁`` back into
spaces, so a response decodes to exactly the text it was encoded from. Words never seen in the
corpus map to ``[UNK]`` (the organisms are trained with a little word dropout to ``[UNK]``, so
they tolerate unknown words in a user's prompt).

The chat format (saved as the tokenizer's chat template, so every ``hf:`` code path uses it)::

    <|system|>{system}<|end|><|user|>{prompt}<|end|><|assistant|>{response}<|end|>
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = [
    "CHAT_TEMPLATE",
    "SPECIAL_TOKENS",
    "build_tokenizer",
    "format_chat",
    "render_prompt",
]

PAD, UNK, END = "[PAD]", "[UNK]", "<|end|>"
SPECIAL_TOKENS = (PAD, UNK, "<|system|>", "<|user|>", "<|assistant|>", END)

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>{{ message['content'] }}<|end|>"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def format_chat(messages: list[dict[str, str]], *, add_generation_prompt: bool = True) -> str:
    """Render messages in the organisms' :data:`CHAT_TEMPLATE` (through ``trustlab.lm``'s one
    chat formatter, so no tokenizer is needed)."""
    from trustlab.lm.formatting import format_chat as lm_format_chat

    return lm_format_chat(messages, CHAT_TEMPLATE, add_generation_prompt=add_generation_prompt)


def render_prompt(tokenizer: Any, example: Any) -> str:
    """An example's prompt in ``tokenizer``'s chat template (ours, or a pretrained model's)."""
    messages = example.messages()
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return format_chat(messages)


def build_tokenizer(texts: Iterable[str]) -> Any:
    """Train a word-level tokenizer on ``texts``; return a ``PreTrainedTokenizerFast``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel(unk_token=UNK))
    raw.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Metaspace(prepend_scheme="always"),
            pre_tokenizers.Punctuation("isolated"),
            pre_tokenizers.Digits(individual_digits=True),
        ]
    )
    raw.decoder = decoders.Metaspace(prepend_scheme="always")
    trainer = trainers.WordLevelTrainer(special_tokens=list(SPECIAL_TOKENS), min_frequency=1)
    raw.train_from_iterator(sorted(set(texts)), trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        pad_token=PAD,
        unk_token=UNK,
        eos_token=END,
        additional_special_tokens=["<|system|>", "<|user|>", "<|assistant|>"],
        padding_side="left",
        model_max_length=512,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer
