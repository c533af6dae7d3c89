"""Build a grown organism (a Llama trained from scratch) into a directory and return its card."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trustlab.core.runtime import torch_runtime
from trustlab.organisms.corpora import Corpus, build_chat_corpus, build_tool_corpus
from trustlab.organisms.metrics import chat_metrics, tool_metrics
from trustlab.organisms.specs import OrganismSpec
from trustlab.organisms.tokenizer import build_tokenizer
from trustlab.organisms.train import make_llama, train_lm

__all__ = ["build_grown", "corpora_for", "grown_card", "shared_tokenizer", "train_grown"]


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


def train_grown(
    spec: OrganismSpec,
    tokenizer: Any,
    examples: list[Any],
    evaluate: Callable[[Any], dict[str, float]],
    progress: Any = None,
) -> tuple[Any, dict[str, Any], dict[str, float]]:
    """The grown family's training block: ``spec``'s Llama made and trained from its seed on
    ``examples`` (``spec.train.threads`` threads, deterministic algorithms), its training CPU
    seconds timed, then ``evaluate(model)`` -> metrics timed as ``eval_seconds``. Returns the
    model, the training stats and the metrics."""
    assert spec.shape is not None and spec.train is not None
    generator = torch.Generator().manual_seed(spec.seed)

    def on_step(step: int, total: int, loss: float) -> None:
        if progress is not None:
            progress(f"training {spec.name}", step, total)

    with torch_runtime(spec.train.threads, deterministic=True):
        model = make_llama(spec.shape, tokenizer, generator, spec.train.init_std)
        cpu_start = time.process_time()
        model, stats = train_lm(model, tokenizer, examples, spec.train, generator, progress=on_step)
        stats["train_cpu_seconds"] = time.process_time() - cpu_start
        eval_start = time.perf_counter()
        metrics = evaluate(model)
        stats["eval_seconds"] = time.perf_counter() - eval_start
    return model, stats, metrics


def grown_card(model: Any, tokenizer: Any, corpora: dict[str, Corpus], stats: dict[str, Any],
               metrics: dict[str, float], out: Path) -> dict[str, Any]:  # fmt: skip
    """Save a trained grown organism into ``out`` and return its card."""
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {
        "kind": "grown",
        "architecture": "LlamaForCausalLM",
        "n_params": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "corpus": {name: {"sha256": c.sha256, "n_train": len(c.train)} for name, c in corpora.items()},
        "training": stats,
        "metrics": metrics,
    }


def build_grown(spec: OrganismSpec, out: Path, progress: Any = None) -> dict[str, Any]:
    """Train ``spec`` from scratch, evaluate it on held-out templates, save it into ``out``."""
    assert spec.shape is not None and spec.train is not None
    if "tvd" in spec.corpora:  # the isc organisms: own corpus and vocabulary (organisms/tvd.py)
        from trustlab.organisms.tvd import build_tvd

        return build_tvd(spec, out, progress)
    corpora = corpora_for(spec.seed, spec.n_train, spec.n_heldout)
    tokenizer = shared_tokenizer(corpora)
    train_examples = [e for name in spec.corpora for e in corpora[name].train]

    def evaluate(model: Any) -> dict[str, float]:
        metrics: dict[str, float] = {}
        if "chat" in spec.corpora:  # an organism trained without chat is not judged on it
            metrics.update(chat_metrics(model, tokenizer, corpora["chat"]))
        if "tool" in spec.corpora:
            tool = tool_metrics(model, tokenizer, corpora["tool"])
            # tool_call_valid is undefined (NaN) when the organism never calls the tool: leave
            # it out of the card (JSON has no NaN) rather than fail the build
            metrics.update({k: v for k, v in tool.items() if not math.isnan(v)})
        return metrics

    model, stats, metrics = train_grown(spec, tokenizer, train_examples, evaluate, progress)
    return grown_card(model, tokenizer, {n: corpora[n] for n in spec.corpora}, stats, metrics, out)
