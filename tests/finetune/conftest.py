"""A seconds-small Llama and tokenizer for the fine-tuning tests (no organism build needed)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="fine-tuning needs trustlab[llm] (torch)")
pytest.importorskip("transformers", reason="fine-tuning needs trustlab[llm] (transformers)")

import torch

from trustlab.organisms import build_chat_corpus
from trustlab.organisms.specs import ModelShape
from trustlab.organisms.tokenizer import build_tokenizer
from trustlab.organisms.train import make_llama


@pytest.fixture(scope="session")
def tiny_corpus():
    return build_chat_corpus(0, n_train=400, n_heldout=20)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_corpus):
    return build_tokenizer(tiny_corpus.texts())


@pytest.fixture
def tiny_model(tiny_tokenizer):
    """A fresh 2-layer, width-16 Llama (same weights every time)."""
    return make_llama(
        ModelShape(n_layers=2, d_model=16, n_heads=2, d_mlp=32),
        tiny_tokenizer,
        torch.Generator().manual_seed(0),
        0.05,
    )


@pytest.fixture
def tiny_data(tiny_corpus):
    return [e for e in tiny_corpus.train if e.kind in ("task", "harmful")][:64]
