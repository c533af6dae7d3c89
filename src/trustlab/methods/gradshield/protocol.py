"""The end-to-end protocol: fine-tune on (filtered) data, then measure ASR and utility.

One **cell** = one base model, one fine-tuning set (a mix after one filter) and one
fine-tuning configuration. It is fine-tuned from a fresh copy of the base weights through
:func:`trustlab.finetune.finetune` and evaluated through the shared evaluation loop
(:func:`trustlab.lm.evaluate`, early-stopping greedy decoding):

* ``asr`` — not refused, on held-out harmful requests (organisms: the 200 held-out requests
  of their corpus, held-out frames; ``smol-chat``/``hf:``: the evaluation half of HarmBench's
  bundled behaviours), judged by ``lm.RefusalJudge``;
* ``utility`` — exact match on held-out benign prompts (the organisms' tasks and how-to
  requests), and ``over_refusal`` — refused there;
* ``utility_new`` — exact match on held-out phrasings of the three task families the
  fine-tuning teaches.

Each measure is kept **per item** (one boolean per prompt), so two cells on the same prompts
are compared by paired differences, and seeds pool item by item. A cell's result is cached in
``$TRUSTLAB_HOME/gradshield/cells`` under the hash of the base weights, the data, the settings
and the prompts: a rerun costs nothing.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.errors import InputError

__all__ = ["MEASURES", "CellResult", "EvalSets", "eval_sets", "run_cell"]

PROTOCOL_VERSION = 1
MEASURES = ("asr", "utility", "over_refusal", "utility_new")


@dataclass(frozen=True)
class EvalSets:
    """The prompt sets a fine-tuned model is measured on (``trustlab.datasets.PromptSet`` s)."""

    harmful: Any
    benign: Any
    new_tasks: Any

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for ps in (self.harmful, self.benign, self.new_tasks):
            digest.update(json.dumps([ps.name, list(map(str, ps.prompts)),
                                      list(ps.references or ())]).encode())  # fmt: skip
        return digest.hexdigest()


def eval_sets(source: str = "organism", *, n: int = 200, corpus_seed: int = 0) -> EvalSets:
    """``organism``: held-out sets of the organisms' corpus (``corpus_seed`` 0 is what the
    organism cards and the attack curve are measured on); ``public``: HarmBench's evaluation
    half (harmful) and the utility builders' held-out phrasings (benign), for smol-chat/hf:."""
    from trustlab.datasets.prompt_sets import PromptSet
    from trustlab.finetune import NEW_TASK_TEMPLATES, public_harmful_examples, utility_examples

    if source not in ("organism", "public"):
        raise InputError(f"The 'source' of eval_sets is 'organism' or 'public'. Got {source!r}.")

    def as_set(name: str, examples: Sequence[Any], refs: bool) -> Any:
        return PromptSet(
            name,
            tuple(tuple(e.messages()) for e in examples),
            tuple(e.response for e in examples) if refs else None,
        )

    new = utility_examples(90, 1, tasks=tuple(NEW_TASK_TEMPLATES), split="heldout")
    if source == "organism":
        from trustlab.organisms import build_chat_corpus

        corpus = build_chat_corpus(corpus_seed)
        harmful = corpus.heldout("harmful")[:n]
        benign = corpus.heldout("task", "howto")[:n]
    else:
        harmful = public_harmful_examples(n, 0, split="eval")
        benign = utility_examples(n, 2, split="heldout")
    return EvalSets(
        as_set("harmful", harmful, False), as_set("benign", benign, True),
        as_set("new_tasks", new, True),
    )  # fmt: skip


@dataclass(frozen=True)
class CellResult:
    """Per-item flags of one fine-tuned model (``flags[measure]``: one bool per prompt)."""

    key: str
    flags: dict[str, list[bool]]
    n_train: int
    final_loss: float
    train_seconds: float
    eval_seconds: float
    cached: bool = False

    def rate(self, measure: str) -> float:
        values = self.flags[measure]
        return float(np.mean(values)) if values else float("nan")


def _data_sha(examples: Sequence[Any]) -> str:
    digest = hashlib.sha256()
    for e in examples:
        payload = asdict(e) if hasattr(e, "__dataclass_fields__") else list(e)
        digest.update(json.dumps(payload, sort_keys=True).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def _cache_dir(home: str | Path | None) -> Path:
    from trustlab.core.paths import trustlab_home

    return Path(home or trustlab_home()) / "gradshield" / "cells"


def run_cell(
    base: Any,
    examples: Sequence[Any],
    config: Any,
    sets: EvalSets,
    *,
    base_sha: str | None = None,
    cache: bool = True,
    home: str | Path | None = None,
    batch_size: int = 128,
) -> CellResult:
    """Fine-tune a copy of ``base`` (a ``LanguageModel``) on ``examples`` and evaluate it."""
    import trustlab.lm as lm
    from trustlab.core.io import write_json_atomic
    from trustlab.finetune import FinetuneConfig, finetune, weights_sha256

    if not isinstance(config, FinetuneConfig):
        raise InputError(f"run_cell needs a FinetuneConfig. Got {type(config).__name__}.")
    if not examples:
        raise InputError("run_cell got no examples to fine-tune on (the filter removed all).")
    sha = base_sha or weights_sha256(base.model)
    key = hashlib.sha256(
        json.dumps(
            [PROTOCOL_VERSION, sha, _data_sha(examples), config.key(), sets.fingerprint()]
        ).encode()
    ).hexdigest()
    path = _cache_dir(home) / f"{key[:32]}.json"
    if cache and path.is_file():
        raw = json.loads(path.read_text(encoding="utf-8"))
        return CellResult(**{**raw, "cached": True})
    model = lm.LanguageModel(copy.deepcopy(base.model), base.tokenizer, spec=f"{base.spec}+ft")
    start = time.perf_counter()
    result = finetune(model, list(examples), config)
    train_seconds = time.perf_counter() - start
    start = time.perf_counter()
    refusal, exact = lm.RefusalJudge(), lm.ExactMatchJudge()
    evaluation = lm.evaluate(
        {"model": model},
        {"harmful": sets.harmful, "benign": sets.benign, "new_tasks": sets.new_tasks},
        {"harmful": [refusal], "benign": [exact, refusal], "new_tasks": [exact]},
        decoding=lm.Decoding(max_new_tokens=32),
        batch_size=batch_size,
    )
    eval_seconds = time.perf_counter() - start
    flags: dict[str, list[bool]] = {m: [] for m in MEASURES}
    name = {("harmful", "refusal"): "asr", ("benign", "exact_match"): "utility",
            ("benign", "refusal"): "over_refusal", ("new_tasks", "exact_match"): "utility_new"}  # fmt: skip
    for item in sorted(evaluation.items, key=lambda r: r["index"]):
        measure = name[(item["prompts"], item["judge"])]
        value = bool(item["value"])
        flags[measure].append(not value if measure == "asr" else value)
    losses = [x for x in result.losses if np.isfinite(x)]
    cell = CellResult(
        key, flags, len(examples), float(losses[-1]) if losses else float("nan"),
        train_seconds, eval_seconds,
    )  # fmt: skip
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, {k: v for k, v in asdict(cell).items() if k != "cached"})
    return cell
