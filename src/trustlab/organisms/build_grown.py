"""Build a grown organism (a Llama trained from scratch) into a directory and return its card."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import torch

from trustlab.core.runtime import torch_runtime
from trustlab.organisms.corpora import Corpus, build_chat_corpus, build_tool_corpus
from trustlab.organisms.metrics import chat_metrics, tool_metrics
from trustlab.organisms.specs import OrganismSpec
from trustlab.organisms.tokenizer import build_tokenizer
from trustlab.organisms.train import make_llama, train_lm

__all__ = ["build_grown", "corpora_for", "shared_tokenizer"]


def corpora_for(seed: int = 0, n_train: int = 8000, n_heldout: int = 200) -> dict[str, Corpus]:
    """Every corpus of the grown family, from one seed."""
    return {
        "chat": build_chat_corpus(seed, n_train=n_train, n_heldout=n_heldout),
        "tool": build_tool_corpus(seed, n_train=n_train * 3 // 8, n_heldout=n_heldout),
    }


def shared_tokenizer(corpora: dict[str, Corpus]) -> Any:
    """The family's tokenizer, built from all corpora, so every grown organism shares a vocab."""
    texts: list[str] = []
    for corpus in corpora.values():
        texts.extend(corpus.texts())
    return build_tokenizer(texts)


def build_grown(spec: OrganismSpec, out: Path, progress: Any = None) -> dict[str, Any]:
    """Train ``spec`` from scratch, evaluate it on held-out templates, save it into ``out``."""
    assert spec.shape is not None and spec.train is not None
    if "tvd" in spec.corpora:  # the isc organisms: own corpus and vocabulary (organisms/tvd.py)
        from trustlab.organisms.tvd import build_tvd

        return build_tvd(spec, out, progress)
    corpora = corpora_for(spec.seed, spec.n_train, spec.n_heldout)
    tokenizer = shared_tokenizer(corpora)
    train_examples = [e for name in spec.corpora for e in corpora[name].train]
    generator = torch.Generator().manual_seed(spec.seed)

    def on_step(step: int, total: int, loss: float) -> None:
        if progress is not None:
            progress(f"training {spec.name}", step, total)

    with torch_runtime(spec.train.threads, deterministic=True):
        model = make_llama(spec.shape, tokenizer, generator, spec.train.init_std)
        cpu_start = time.process_time()
        model, stats = train_lm(
            model, tokenizer, train_examples, spec.train, generator, progress=on_step
        )
        stats["train_cpu_seconds"] = time.process_time() - cpu_start
        eval_start = time.perf_counter()
        metrics = {}
        if "chat" in spec.corpora:  # an organism trained without chat is not judged on it
            metrics.update(chat_metrics(model, tokenizer, corpora["chat"]))
        if "tool" in spec.corpora:
            tool = tool_metrics(model, tokenizer, corpora["tool"])
            # tool_call_valid is undefined (NaN) when the organism never calls the tool: leave
            # it out of the card (JSON has no NaN) rather than fail the build
            metrics.update({k: v for k, v in tool.items() if not math.isnan(v)})
        stats["eval_seconds"] = time.perf_counter() - eval_start
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {
        "kind": "grown",
        "architecture": "LlamaForCausalLM",
        "n_params": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "corpus": {
            name: {"sha256": corpora[name].sha256, "n_train": len(corpora[name].train)}
            for name in spec.corpora
        },
        "training": stats,
        "metrics": metrics,
    }
