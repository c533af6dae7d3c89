"""`trustlab run gmu`: plant GMUs, check the release, attack by fine-tuning, try counter-attacks.

Per organism (chat-s and vit-xs by default; chat-xs with ``--quick``): GMUs are planted
data-free (:class:`~trustlab.methods.gmu.GMUPlanter`); the release check compares logits with
the original per dtype and after a ``save_pretrained`` / ``from_pretrained`` round trip in plain
transformers; then the attacker fine-tunes the protected model, its unprotected twin and (at the
default AdamW setting) a model of the same architecture from scratch on a downstream task the
organism never learned (chat organisms: the three new utility task families; vit-xs: counting
objects, with a fresh head), for every optimiser and learning rate asked, full and LoRA; then
each counter-attack. Held-out accuracy after k steps is compared per item against the twin with
a paired Newcombe interval.
"""

from __future__ import annotations

import tempfile
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from pydantic import Field

from trustlab.core import ExperimentConfig, Report, RunContext, register
from trustlab.core.figures import add_alt_text, new_figure
from trustlab.core.runtime import torch_runtime
from trustlab.finetune import FinetuneConfig, LoraSettings
from trustlab.methods.gmu.planting import GMUPlanter, release_equality
from trustlab.methods.gmu.study import (
    COUNTER_ATTACKS,
    AttackOutcome,
    ImageTask,
    LMTask,
    attack,
    compare,
    counter_attack,
    fresh_like,
)

Organism = Literal["chat-xs", "chat-s", "vit-xs"]
CounterAttack = Literal["clip", "prune", "reinit", "weight_decay", "low_lr", "lora_attention"]


class GMUConfig(ExperimentConfig):
    organisms: list[Organism] = Field(
        ["chat-s", "vit-xs"], min_length=1, description="Organisms to protect and attack."
    )
    lm_units: int = Field(8, ge=1, le=4096, description="GMUs per FFN layer of a chat organism.")
    lm_scale: float = Field(
        1000.0, gt=0, le=1e8, description="Norm of the GMUs' up rows and down columns (gate lock)."
    )
    vit_units: int = Field(8, ge=1, le=4096, description="GMUs per FFN layer of vit-xs.")
    vit_scale: float = Field(
        1000.0, gt=0, le=1e12, description="Bias of the GMUs in vit-xs (bias lock)."
    )
    lm_steps: int = Field(40, ge=1, description="Fine-tuning steps k on a chat organism.")
    lm_batch_size: int = Field(16, ge=1, description="Batch size on a chat organism.")
    lm_n_train: int = Field(400, ge=16, description="Downstream training examples (new tasks).")
    lm_n_heldout: int = Field(200, ge=10, description="Held-out downstream examples scored.")
    vit_steps: int = Field(100, ge=1, description="Fine-tuning steps k on vit-xs.")
    vit_batch_size: int = Field(64, ge=1, description="Batch size on vit-xs.")
    vit_n_train: int = Field(2000, ge=64, description="Training images of the count task.")
    vit_n_heldout: int = Field(500, ge=10, description="Held-out images of the count task.")
    lr: float = Field(1e-3, gt=0, description="The headline attack's AdamW learning rate.")
    lrs: list[float] = Field(
        [1e-3, 1e-4], min_length=1, description="Learning rates of the optimiser sweep."
    )
    optimizers: list[Literal["adamw", "adam", "sgd"]] = Field(
        ["adamw", "adam", "sgd"], min_length=1, description="Optimisers of the sweep."
    )
    lora: bool = Field(True, description="Also attack with LoRA (attention and FFN inputs).")
    lora_rank: int = Field(8, ge=1, description="LoRA rank of the LoRA attacks.")
    counter_attacks: list[CounterAttack] = Field(
        list(COUNTER_ATTACKS), description="Counter-attacks to measure (empty: none)."
    )
    seeds: int = Field(3, ge=1, le=10, description="Training seeds of the headline comparison.")
    margin: float = Field(
        0.05, ge=0, le=1, description="Accuracy gap below the twin that counts as destabilised."
    )
    prune_threshold: float = Field(
        6.0, gt=0, description="Robust z-score over log unit norms that flags a suspect unit."
    )
    clip: float = Field(1.0, gt=0, description="Global gradient-norm clip of the clip attack.")
    weight_decay: float = Field(0.1, gt=0, description="AdamW decay of the weight-decay attack.")
    low_lr: float = Field(1e-5, gt=0, description="Learning rate of the lower-lr attack.")
    dtypes: list[Literal["float32", "float64", "bfloat16", "float16"]] = Field(
        ["float32", "float64", "bfloat16"], min_length=1, description="dtypes of the release check."
    )
    threads: int = Field(1, ge=1, description="torch threads.")

    QUICK: ClassVar[dict[str, Any]] = {
        "organisms": ["chat-xs"],
        "seeds": 1,
        "lm_steps": 8,
        "lm_n_train": 64,
        "lm_n_heldout": 40,
        "lrs": [1e-3],
        "optimizers": ["adamw"],
        "lora": False,
    }


def _load(name: str) -> tuple[torch.nn.Module, Any, Any]:
    """(model, tokenizer or None, task builder input) of an organism."""
    if name.startswith("vit"):
        from trustlab.organisms.vit_build import load_vit

        model, _ = load_vit(name)
        return model, None, None
    import trustlab.lm as lm

    wrapped = lm.load(f"organism:{name}")
    return wrapped.model, wrapped.tokenizer, wrapped


def _task(name: str, tokenizer: Any, config: GMUConfig, seed: int) -> LMTask | ImageTask:
    if name.startswith("vit"):
        from trustlab.organisms.vit_build import vit_task_data
        from trustlab.vision.generator import CLASSIFICATION_TASKS

        x, y = vit_task_data("count", "train", config.vit_n_train)
        xh, yh = vit_task_data("count", "heldout", config.vit_n_heldout)
        return ImageTask(x, y, xh, yh, len(CLASSIFICATION_TASKS["count"]))
    from trustlab.finetune import NEW_TASK_TEMPLATES, utility_examples

    tasks = tuple(NEW_TASK_TEMPLATES)
    return LMTask(tokenizer, utility_examples(config.lm_n_train, seed, tasks=tasks),
                  utility_examples(config.lm_n_heldout, seed + 1, tasks=tasks,
                                   split="heldout"))  # fmt: skip


def _release_inputs(task: LMTask | ImageTask) -> dict[str, torch.Tensor]:
    if isinstance(task, ImageTask):
        return {"pixel_values": task.heldout_pixels[:64]}
    from trustlab.finetune import encode_data

    enc = encode_data(task.tokenizer, list(task.heldout[:32]))
    width = max(len(e.ids) for e in enc)
    ids = torch.zeros((len(enc), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, e in enumerate(enc):
        ids[i, : len(e.ids)], mask[i, : len(e.ids)] = torch.tensor(e.ids), 1
    return {"input_ids": ids, "attention_mask": mask}


def _roundtrip(protected: torch.nn.Module, inputs: dict[str, torch.Tensor], image: bool) -> bool:
    """save_pretrained (safetensors) then plain transformers Auto* loading: same logits?"""
    from transformers import AutoModelForCausalLM, AutoModelForImageClassification

    auto = AutoModelForImageClassification if image else AutoModelForCausalLM
    with tempfile.TemporaryDirectory() as tmp:
        protected.save_pretrained(tmp, safe_serialization=True)
        loaded = auto.from_pretrained(tmp, local_files_only=True).eval()
    with torch.no_grad():
        return bool(torch.equal(protected.eval()(**inputs).logits, loaded(**inputs).logits))


def _curves_figure(name: str, runs: dict[str, AttackOutcome], lr: float):
    fig, axes = new_figure(1, 2, size=(10.0, 3.6))
    for ax, key in zip(axes[0], ("losses", "grad_norms"), strict=True):
        for arm, style in (("twin", "-"), ("protected", "-"), ("scratch", ":")):
            if arm not in runs:
                continue
            values = np.asarray(getattr(runs[arm], key), dtype=float)
            values = np.where(np.isfinite(values), values, np.nan)
            ax.plot(np.arange(1, len(values) + 1), values, style, label=arm,
                    color={"twin": "tab:blue", "protected": "tab:red", "scratch": "0.4"}[arm])  # fmt: skip
        ax.set_yscale("log")
        ax.set_xlabel("fine-tuning step")
        ax.set_ylabel("training loss" if key == "losses" else "global gradient norm")
        ax.set_title(f"{name}, AdamW lr {lr:g}", fontsize=9)
        ax.legend(fontsize=7)
    add_alt_text(fig, f"Training loss and gradient norm of {name} per step under AdamW at lr "
                      f"{lr:g}: the GMU-protected model (red), its unprotected twin (blue) and the "
                      "same architecture from scratch (grey).")  # fmt: skip
    return fig


def _sweep_figure(name: str, sweep: dict[tuple[str, float, str], AttackOutcome]):
    keys = sorted({(o, lr) for o, lr, _ in sweep})
    fig, axes = new_figure(1, len(keys), size=(3.2 * len(keys), 3.0), sharey=True)
    for ax, (opt, lr) in zip(axes[0], keys, strict=True):
        for arm, colour in (("twin", "tab:blue"), ("protected", "tab:red")):
            if (opt, lr, arm) in sweep:
                values = np.asarray(sweep[(opt, lr, arm)].losses, dtype=float)
                ax.plot(np.arange(1, len(values) + 1),
                        np.where(np.isfinite(values), values, np.nan), color=colour, label=arm)  # fmt: skip
        ax.set_yscale("log")
        ax.set_title(f"{opt} lr {lr:g}", fontsize=9)
        ax.set_xlabel("step")
    axes[0][0].set_ylabel("training loss")
    axes[0][-1].legend(fontsize=7)
    add_alt_text(fig, f"Training loss of {name}, protected (red) and twin (blue), for every "
                      "optimiser and learning rate of the sweep.")  # fmt: skip
    return fig


def _organism(name: str, config: GMUConfig, ctx: RunContext, report: Report) -> None:
    image = name.startswith("vit")
    with ctx.stage(f"{name}: load and plant"):
        model, tokenizer, _ = _load(name)
        task = _task(name, tokenizer, config, int(ctx.child_rng(f"data-{name}").integers(0, 10_000)))
        planter = GMUPlanter(n_units=config.vit_units if image else config.lm_units,
                             scale=config.vit_scale if image else config.lm_scale,
                             seed=int(ctx.child_rng(f"plant-{name}").integers(0, 2**31)))  # fmt: skip
        protected = planter.fit_plant(model)
    with ctx.stage(f"{name}: release check"):
        inputs = _release_inputs(task)
        rows = release_equality(model, protected, inputs, dtypes=config.dtypes)
        same_after_save = _roundtrip(protected, inputs, image)
    for row in rows:
        row["organism"] = name
    report.table(f"release_{name}", rows,
                 caption=f"{name}: logits of the protected model against the original on "
                         f"{len(next(iter(inputs.values())))} held-out inputs, per dtype.")  # fmt: skip
    fp32 = next((r for r in rows if r["dtype"] == "float32"), rows[0])
    report.metric(f"{name}.release_bit_identical_{fp32['dtype']}", fp32["bit_identical"],
                  headline=True, description="Protected logits equal the original's bit for bit.")  # fmt: skip
    report.metric(f"{name}.release_max_abs_diff_{fp32['dtype']}", fp32["max_abs_diff"],
                  headline=True, description="Largest |logit difference| protected vs original.")  # fmt: skip
    report.metric(f"{name}.release_argmax_agreement", min(r["argmax_agreement"] for r in rows),
                  description="Smallest share of positions whose top logit agrees, over dtypes.")  # fmt: skip
    report.metric(f"{name}.roundtrip_identical", same_after_save, headline=True,
                  description="save_pretrained + plain transformers from_pretrained gives the same "
                              "logits bit for bit.")  # fmt: skip
    n_gmu = sum(len(v) for v in planter.units_.values())
    report.note(f"{name}: {n_gmu} GMUs in {len(planter.units_)} FFN layers "
                f"(lock {sorted(set(planter.locks_.values()))}, scale {planter.scale_:g}).")  # fmt: skip

    steps, batch = (config.vit_steps, config.vit_batch_size) if image else (config.lm_steps, config.lm_batch_size)
    base = FinetuneConfig(steps=steps, batch_size=batch, lr=config.lr, optimizer="adamw",
                          threads=config.threads)  # fmt: skip
    runs: dict[str, AttackOutcome] = {}
    table: list[dict[str, Any]] = []
    comparisons: list[dict[str, Any]] = []
    seed_rng = ctx.child_rng(f"seeds-{name}")
    seeds = [int(s) for s in seed_rng.integers(0, 2**31, size=config.seeds)]
    with ctx.stage(f"{name}: headline attack"):
        for i, s in enumerate(ctx.progress(seeds, description=f"{name} AdamW")):
            out = {arm: attack(m, task, base, label=arm, seed=s)
                   for arm, m in (("twin", model), ("protected", protected))}  # fmt: skip
            if i == 0:
                out["scratch"] = attack(fresh_like(model, s), task, base, label="scratch", seed=s)
                runs = out
            for o in out.values():
                table.append({"organism": name, "setting": "adamw (headline)", "seed": s, **o.row()})
            comparisons.append({"seed": s, **compare(out["protected"], out["twin"], config.margin)})
    worst = max(comparisons, key=lambda c: c["upper"])
    report.table(f"headline_{name}", comparisons,
                 caption=f"{name}: default AdamW (lr {config.lr:g}, {steps} steps of batch {batch}); "
                         "held-out accuracy protected vs twin per training seed, paired Newcombe "
                         "95% interval of the difference.")  # fmt: skip
    for key, desc in (("protected_accuracy", "Held-out accuracy of the protected model after k steps"),
                      ("twin_accuracy", "Held-out accuracy of the unprotected twin after k steps"),
                      ("upper", "Upper end of the paired 95% interval, protected - twin (worst seed)")):  # fmt: skip
        report.metric(f"{name}.adamw.{key}", worst[key], headline=True, description=f"{desc}.")
    report.metric(f"{name}.adamw.scratch_accuracy", runs["scratch"].accuracy,
                  description="Held-out accuracy of the architecture trained from scratch.")  # fmt: skip
    report.metric(f"{name}.adamw.destabilised", all(c["destabilised"] for c in comparisons),
                  headline=True, description="Protected diverged or fell below the twin by the "
                  "margin with the interval's upper end below 0, on every seed.")  # fmt: skip
    report.metric(f"{name}.adamw.protected_diverged", any(c["protected_diverged"] for c in comparisons),
                  description="A protected run hit a non-finite loss or gradient.")  # fmt: skip

    sweep: dict[tuple[str, float, str], AttackOutcome] = {}
    sweep_rows = []
    settings = [(o, lr, None) for o in config.optimizers for lr in config.lrs]
    if config.lora:
        targets = ("q_proj", "k_proj", "v_proj", "o_proj", "fc1") if image else \
            ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj")  # fmt: skip
        settings.append(("adamw", config.lr, LoraSettings(r=config.lora_rank,
                                                          alpha=2.0 * config.lora_rank,
                                                          target_modules=targets)))  # fmt: skip
    with ctx.stage(f"{name}: optimiser sweep"):
        for opt, lr, lora in ctx.progress(settings, description=f"{name} sweep"):
            cfg = FinetuneConfig(**{**base.model_dump(), "optimizer": opt, "lr": lr, "lora": lora})
            label = f"{opt} lr {lr:g}" + (" LoRA" if lora else "")
            if opt == "adamw" and lr == config.lr and lora is None:
                out = {"twin": runs["twin"], "protected": runs["protected"]}
            else:
                out = {arm: attack(m, task, cfg, label=arm, seed=seeds[0])
                       for arm, m in (("twin", model), ("protected", protected))}  # fmt: skip
            if lora is None:
                for arm, o in out.items():
                    sweep[(opt, lr, arm)] = o
            for o in out.values():
                table.append({"organism": name, "setting": label, "seed": seeds[0], **o.row()})
            c = compare(out["protected"], out["twin"], config.margin)
            sweep_rows.append({"setting": label, **c})
    report.table(f"finetuning_{name}", table,
                 caption=f"{name}: every fine-tuning run (train loss, max gradient norm before "
                         "clipping, held-out loss and accuracy after k steps).")  # fmt: skip
    report.table(f"sweep_{name}", sweep_rows,
                 caption=f"{name}: protected vs twin per optimiser, learning rate and LoRA.")

    counter_rows = []
    with ctx.stage(f"{name}: counter-attacks"):
        for which in ctx.progress(config.counter_attacks, description=f"{name} counter-attacks"):
            m, cfg, facts = counter_attack(which, protected, base, threshold=config.prune_threshold,
                                           clip=config.clip, weight_decay=config.weight_decay,
                                           low_lr=config.low_lr, lora_rank=config.lora_rank)  # fmt: skip
            o = attack(m, task, cfg, label=which, seed=seeds[0])
            # the twin under the same fine-tuning settings (prune/reinit change only the weights)
            twin = runs["twin"] if which in ("prune", "reinit") else attack(
                model, task, cfg, label=f"{which} twin", seed=seeds[0])
            c = compare(o, twin, config.margin)
            if which in ("prune", "reinit"):
                _, _, twin_facts = counter_attack(which, model, base, threshold=config.prune_threshold)
                facts["flagged_in_twin"] = twin_facts["flagged_units"]
            counter_rows.append({
                "counter_attack": which, **facts, **c,
                "defeats_gmu": (not c["destabilised"]
                                and c["protected_accuracy"] >= runs["twin"].accuracy - config.margin),
                "twin_accuracy_at_default": runs["twin"].accuracy,
                "cost_vs_default_twin": c["protected_accuracy"] - runs["twin"].accuracy,
                "cpu_seconds": round(o.cpu_seconds, 2),
            })  # fmt: skip
            table.append({"organism": name, "setting": f"counter: {which}", "seed": seeds[0], **o.row()})
    if counter_rows:
        report.table(f"counter_attacks_{name}", counter_rows,
                     caption=f"{name}: each counter-attack on the protected model against the twin "
                             "fine-tuned with the same settings; destabilised = against that "
                             "twin; defeats_gmu = not destabilised and within the margin of the "
                             "twin's default accuracy (the attacker gets a usable model); cost_vs_default_twin = accuracy lost against the twin's "
                             "default run.")  # fmt: skip
        defeats = [r["counter_attack"] for r in counter_rows if r["defeats_gmu"]]
        report.metric(f"{name}.counter_attacks_that_defeat", ",".join(defeats) or "none",
                      headline=True, description="Counter-attacks after which the protected "
                      "model fine-tunes as well as the twin's default run (measured, not hidden).")  # fmt: skip
    with ctx.stage(f"{name}: figures"):
        report.figure(f"curves_{name}", _curves_figure(name, runs, config.lr),
                      caption=f"{name}: protected vs twin vs scratch under default AdamW.")
        if len({(o, lr) for o, lr, _ in sweep}) > 1:
            report.figure(f"sweep_{name}", _sweep_figure(name, sweep),
                          caption=f"{name}: loss curves per optimiser and learning rate.")


@register("gmu", config=GMUConfig)
def run(config: GMUConfig, ctx: RunContext) -> Report:
    report = ctx.report
    with torch_runtime(config.threads, deterministic=True):
        for name in config.organisms:
            _organism(name, config, ctx, report)
    report.note(
        "Accuracy after k steps: chat organisms, teacher-forced exact match of the whole "
        "response on held-out phrasings of the three new task families (equal to greedy exact "
        "match); vit-xs, accuracy on held-out count images with a fresh head. Intervals are "
        "paired Newcombe 95% over the held-out items of one training run per seed; they do not "
        "cover the spread over training seeds beyond the seeds run."
    )
    return report
