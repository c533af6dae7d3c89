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
