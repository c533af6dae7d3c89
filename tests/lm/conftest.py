"""Tiny randomly initialised HF models and word-level tokenizers, built once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the llm extra (torch, transformers) is not installed")
sys.path.insert(0, str(Path(__file__).parent))  # tests import helpers from lm_testkit

from lm_testkit import CHAT_TEMPLATE, save_checkpoint

from trustlab import lm


@pytest.fixture(scope="session")
def llama_dir(tmp_path_factory):
    return save_checkpoint(tmp_path_factory.mktemp("llama"), "llama", CHAT_TEMPLATE)


@pytest.fixture(scope="session")
def gpt2_dir(tmp_path_factory):
    return save_checkpoint(tmp_path_factory.mktemp("gpt2"), "gpt2", None, seed=1)


@pytest.fixture(scope="session")
def llama(llama_dir):
    """Llama (SwiGLU) with a chat template."""
    return lm.load(f"hf:{llama_dir}")


@pytest.fixture(scope="session")
def gpt2(gpt2_dir):
    """GPT-2 with no chat template (plain template path)."""
    return lm.load(f"hf:{gpt2_dir}")


@pytest.fixture(params=["llama", "gpt2"])
def any_lm(request):
    return request.getfixturevalue(request.param)


FAMILIES = ["llama", "gpt2", "qwen2", "gpt_neox", "gemma2", "phi3"]


@pytest.fixture(scope="session")
def family_lms():
    """One random model of every family in the test kit (no chat template), by family name."""
    from lm_testkit import build_model, make_tokenizer

    return {f: lm.LanguageModel(build_model(f, seed=3), make_tokenizer(None)) for f in FAMILIES}


@pytest.fixture(scope="session")
def chat_xs_lm(chat_xs):
    """The chat-xs organism (built once per session) as a LanguageModel."""
    return lm.LanguageModel(chat_xs.model, chat_xs.tokenizer, spec="organism:chat-xs")


@pytest.fixture(params=[*FAMILIES, "chat-xs"])
def white_box_lm(request):
    """Every test-kit family, then the chat-xs organism: the models the equalities run on."""
    if request.param == "chat-xs":
        return request.getfixturevalue("chat_xs_lm")
    return request.getfixturevalue("family_lms")[request.param]
