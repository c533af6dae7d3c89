"""`trustlab run rheology`: Fisher–Rao manifold sensitivity along the refusal direction across a
model family, coupling cosines, and the causal injection test with matched-norm placebos.

Per model (default: the organism family ``chat-xs … chat-l``; any ``hf:`` checkpoints the user
lists): the refusal direction and its layer, sensitivity curves on jailbreak / harmful / benign
prompts (ratio to placebo directions), the small-eps and area scalars with bootstrap CIs, the
cosine between refusal and task-generation directions per layer, and the alpha sweep of
unconditional and conditional injection. ``--quick`` runs ``chat-xs`` alone (built on first use,
about a minute; the test session builds it once before the contract runs).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import Field, field_validator, model_validator

from trustlab.core import ExperimentConfig, Report, RunContext, Sweep, WorkUnit, register
from trustlab.core.errors import DataError
from trustlab.core.figures import new_figure
from trustlab.core.runtime import Threads, torch_runtime
from trustlab.methods.rheology.settings import AuditSettings

FAMILY = ["organism:chat-xs", "organism:chat-s", "organism:chat-m", "organism:chat-l"]
# The default audits the two smallest organisms (results within minutes on a fresh machine); the
# whole scaling axis is one flag away (`--full`, or `--set models=full`); `--quick` audits
# chat-xs alone.
QUICK_FAMILY = FAMILY[:2]
DEFAULT_MODELS = QUICK_FAMILY
ORGANISM_PROMPTS = "organism"


def _check_prompt_source(v: str, kind: str) -> str:
    from trustlab.datasets.behaviours import BEHAVIOUR_LISTS

    v = v.strip()
    if v == ORGANISM_PROMPTS or v in BEHAVIOUR_LISTS:
        return v
    if any(c in v for c in "/\\.") or v.startswith("~"):
        return v
    raise ValueError(
        f"{kind} must be 'organism', a behaviour list ({', '.join(BEHAVIOUR_LISTS)}) or a path "
        f"to a .txt/.csv/.jsonl prompt file; got {v!r}"
    )


class RheologyConfig(ExperimentConfig):
    models: list[str] = Field(
        DEFAULT_MODELS,
        min_length=1,
        description="LM specs to audit (organism:<name> or hf:/path), or 'quick' (chat-xs, "
        "chat-s: the default) or 'full' (the scaling family chat-xs, chat-s, chat-m, chat-l).",
    )
    build_missing: bool = Field(
        True,
        description="Build organisms that are not cached (about a minute for chat-xs); if false, "
        "an unbuilt organism is an error.",
    )
    corpus_seed: int = Field(0, ge=0, description="Seed of the organisms chat corpus (prompts).")
    n_fit: int = Field(64, ge=4, description="Prompts per set for directions and calibration.")
    n_eval: int = Field(48, ge=4, description="Held-out prompts per set for evaluation.")
    n_val: int = Field(
        48,
        ge=4,
        description="Validation jailbreaks and tasks (disjoint from evaluation) on which the "
        "injection operating point is chosen.",
    )
    harmful_prompts: str = Field(
        ORGANISM_PROMPTS,
        description="Harmful requests: 'organism' (the organisms' held-out templates), a "
        "behaviour list (harmbench = its 200 standard behaviours, harmbench_val, "
        "harmbench_test, advbench, strongreject, xstest_unsafe) or a .txt/.csv/.jsonl file.",
    )
    harmless_prompts: str = Field(
        ORGANISM_PROMPTS,
        description="Harmless requests: 'organism', 'xstest' (its 250 safe prompts) or a "
        ".txt/.csv/.jsonl file. Public lists are for hf: models and smol-chat (the grown "
        "organisms' word vocabulary turns most public prompts into [UNK]).",
    )
    benign_tasks: str = Field(
        ORGANISM_PROMPTS,
        description="Benign exact-match tasks: 'organism' or a .csv/.jsonl file with 'prompt' "
        "and 'answer' columns (a reply counts when it equals the answer after stripping).",
    )
    audit: AuditSettings = Field(
        default_factory=AuditSettings,
        description="The audit's algorithm settings (trustlab.methods.rheology.AuditSettings): "
        "eps, n_placebo, n_sensitivity_prompts, alphas, gate_benign_rates, jailbreak_tokens, "
        "task_tokens, max_layer_fraction, n_bootstrap, em_drop_tolerance, placebo_tolerance, "
        "placebo_criterion, refusal_phrases; override one with --set audit.<key>=<value>.",
    )
    threads: Threads = Field(1, description="torch CPU threads (fixed for determinism).")

    QUICK: ClassVar[dict[str, Any]] = {
        "models": ["organism:chat-xs"],
        "n_fit": 32,
        "n_eval": 16,
        "n_val": 16,
        "audit": {
            "n_sensitivity_prompts": 8,
            "eps": [-0.4, -0.1, 0.1, 0.4],
            "alphas": [0.5, 1.0, 2.0],
            "n_placebo": 2,
            "gate_benign_rates": [0.05],
            "n_bootstrap": 100,
        },
    }

    # `trustlab run rheology --full` / `make run FULL=1`: the whole organism scaling family
    FULL: ClassVar[dict[str, Any]] = {"models": FAMILY}

    @field_validator("models", mode="before")
    @classmethod
    def _family(cls, v: Any) -> Any:
        if isinstance(v, str):
            return {"quick": QUICK_FAMILY, "full": FAMILY}.get(v.strip(), [v])
        return v

    @field_validator("models")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"the models must be distinct; got {v}")
        return v

    @model_validator(mode="after")
    def _cross_field(self) -> RheologyConfig:
        if self.audit.n_sensitivity_prompts > self.n_eval:
            raise ValueError(
                f"audit.n_sensitivity_prompts ({self.audit.n_sensitivity_prompts}) must be <= "
                f"n_eval ({self.n_eval}): the curves use the evaluation prompts"
            )
        return self

    @field_validator("harmful_prompts")
    @classmethod
    def _harmful_source(cls, v: str) -> str:
        return _check_prompt_source(v, "harmful_prompts")

    @field_validator("harmless_prompts")
    @classmethod
    def _harmless_source(cls, v: str) -> str:
        return _check_prompt_source(v, "harmless_prompts")


def _short(spec: str) -> str:
    name = spec.split(":", 1)[-1].rstrip("/").split("/")[-1]
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").lower() or "model"


def _load(spec: str, config: RheologyConfig, ctx: RunContext) -> tuple[Any, str]:
    from trustlab import lm

    if spec.startswith("organism:") and not config.build_missing:
        from trustlab.organisms import is_built

        name = spec.removeprefix("organism:")
        if not is_built(name):
            raise DataError(
                f"{spec} is not built on this machine and build_missing is false. Build it with "
                f"'trustlab organisms build {name}' or pass --set build_missing=true."
            )
    return lm.load(spec), _short(spec)


def _organism_texts(corpus: Any, kind: str) -> list[str]:
    """Held-out organism requests of one kind (for mixing organism and public prompt sets)."""
    return [e.prompt for e in corpus.examples if e.kind == kind and e.split == "heldout"] + [
        e.prompt for e in corpus.examples if e.kind == kind and e.split == "train"
    ]


def _public_sets(config: RheologyConfig, corpus: Any, seed: int) -> Any:
    """Prompt sets with public behaviour lists or user files for any of the three sources."""
    from trustlab.datasets.behaviours import load_behaviour_list
    from trustlab.datasets.prompt_sets import public_steering_splits, read_tasks

    def texts(spec: str, harmful: bool) -> list[str]:
        if spec == ORGANISM_PROMPTS:
            kinds = ("harmful",) if harmful else ("howto", "task")
            return [t for k in kinds for t in _organism_texts(corpus, k)]
        name = "harmbench_standard" if spec == "harmbench" else spec
        name = {"xstest": "xstest_safe"}.get(name, name) if not harmful else name
        items = load_behaviour_list(name, harmful=harmful)
        keep = [
            b.text
            for b in items
            if b.harmful == harmful and b.context is None and b.functional != "copyright"
        ]
        if not keep:
            raise DataError(
                f"'{spec}' holds no {'harmful' if harmful else 'harmless'} prompts usable here "
                "(contextual and copyright HarmBench behaviours are skipped)."
            )
        return keep

    tasks = None if config.benign_tasks == ORGANISM_PROMPTS else read_tasks(config.benign_tasks)
    return public_steering_splits(
        texts(config.harmful_prompts, True),
        texts(config.harmless_prompts, False),
        config.n_fit,
        config.n_eval,
        n_val=config.n_val,
        seed=seed,
        tasks=tasks,
        corpus=corpus,
    )


def _figures(report: Report, audits: dict[str, Any]) -> None:
    fig, axes = new_figure(1, 3, size=(13, 3.6), sharey=True, squeeze=True)
    for ax, name in zip(axes, ("jailbreak", "harmful", "benign"), strict=True):
        for label, a in audits.items():
            c = a.curves[name]
            ax.plot(c.eps, c.ratio, marker="o", label=f"{label} ({a.n_params / 1e6:.2f}M)")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_title(f"{name} prompts")
        ax.set_xlabel("eps (× typical residual norm)")
    axes[0].set_ylabel("FR response / placebo response")
    axes[0].legend(fontsize=7)
    report.figure("sensitivity_curves", fig, caption="Sensitivity ratio per eps, every model.")

    # models in order of size, so the scaling lines join neighbours on the axis
    ordered = sorted(audits.items(), key=lambda kv: kv[1].n_params)
    xs = np.array([a.n_params for _, a in ordered], dtype=float)
    fig, axes = new_figure(1, 2, size=(10, 3.6), squeeze=True)
    for j, name in enumerate(("jailbreak", "harmful", "benign")):
        xj = xs * (1.0 + 0.04 * (j - 1))  # small offsets so the three CIs do not overlap
        for key, ax in (("speed_ratio", axes[0]), ("auc_ratio", axes[1])):
            y = np.array([a.scalars[name][key] for _, a in ordered])
            lo = np.array([a.scalars[name][f"{key}_low"] for _, a in ordered])
            hi = np.array([a.scalars[name][f"{key}_high"] for _, a in ordered])
            err = np.nan_to_num(np.stack([y - lo, hi - y]), nan=0.0).clip(min=0.0)
            ax.errorbar(xj, y, yerr=err, marker="o", capsize=3, label=name)
    for ax, t in zip(axes, ("small-eps speed ratio", "AUC ratio"), strict=True):
        ax.set_xscale("log")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("parameters")
        ax.set_title(t)
        ax.legend(fontsize=7)
        for x, (label, _) in zip(xs, ordered, strict=True):
            ax.annotate(label, (x, 1.0), textcoords="offset points", xytext=(0, -12),
                        ha="center", fontsize=6, color="grey")  # fmt: skip
    report.figure(
        "scaling",
        fig,
        caption=f"Per-model sensitivity scalars (95% CI) vs size, {len(ordered)} model(s).",
    )

    fig, ax = new_figure(size=(5, 3.6), squeeze=True)
    ax.plot(xs, [a.cos_task[a.layer] for _, a in ordered], marker="o", label="task")
    ax.plot(xs, [a.cos_harm[a.layer] for _, a in ordered], marker="s", label="harm recog.")
    for x, (label, a) in zip(xs, ordered, strict=True):
        ax.annotate(f"{label} (L{a.layer})", (x, a.cos_task[a.layer]), fontsize=6,
                    textcoords="offset points", xytext=(3, 3))  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlabel("parameters")
    ax.set_ylabel("cosine with refusal direction")
    ax.legend(fontsize=7)
    report.figure("cosine_vs_scale", fig, caption="Cosine at each model's chosen layer.")


@register("rheology", config=RheologyConfig)
def run(config: RheologyConfig, ctx: RunContext) -> Report:
    from trustlab.datasets.prompt_sets import organism_steering_splits
    from trustlab.organisms import build_chat_corpus

    report = ctx.report
    settings = config.audit
    with ctx.stage("prompts"):
        corpus = build_chat_corpus(config.corpus_seed, n_train=1200, n_heldout=200)
        if (config.harmful_prompts, config.harmless_prompts, config.benign_tasks) == (
            ORGANISM_PROMPTS,
        ) * 3:
            prompts = organism_steering_splits(
                corpus, config.n_fit, config.n_eval, seed=ctx.seed, n_val=config.n_val
            )
        else:
            prompts = _public_sets(config, corpus, ctx.seed)
    # One work unit per model of the family (issue 36): a Ray task with --backend ray, recorded
    # in the run directory as it finishes; the seeds are the per-model streams used before.
    payloads = {
        spec: (spec, config, prompts, settings,
               int(ctx.child_rng(f"placebo:{_short(spec)}").integers(0, 2**62)),
               ctx.child_rng(f"bootstrap:{_short(spec)}"))
        for spec in config.models
    }
    cpus = config.threads if isinstance(config.threads, int) and config.threads > 0 else 1
    sweep = Sweep("rheology-models", _audit_unit,
                  tuple(WorkUnit(spec, p, 0, cpus) for spec, p in payloads.items()))
    with ctx.stage("audit models"):
        results = ctx.run_sweep(sweep)
    audits: dict[str, Any] = {_short(spec): results[spec] for spec in config.models}

    with ctx.stage("report"):
        _report(report, config, audits)
    return report


def _audit_unit(unit: WorkUnit) -> Any:
    """Load and audit one model of the family (a work unit: a Ray task or a local call)."""
    import torch

    from trustlab.methods.rheology.audit import audit_model

    spec, config, prompts, settings, torch_seed, rng = unit.payload
    with torch_runtime(config.threads):
        model, _ = _load(spec, config, None)
        generator = torch.Generator()
        generator.manual_seed(torch_seed)  # = RunContext.torch_generator(f"placebo:{label}")
        return audit_model(model, prompts, settings, generator, rng)


def _scalars(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not k.endswith("_list")}


def _pts(values: list[float]) -> str:
    return " ".join(f"{100 * v:+.0f}" for v in values) or "-"


def _report(report: Report, config: RheologyConfig, audits: dict[str, Any]) -> None:
    from trustlab.methods.rheology.audit import placebo_ok

    first = next(iter(audits))
    settings = config.audit
    k = settings.n_placebo
    tol = settings.placebo_tolerance
    rows, inj, inj_val, cos_rows, plac_rows = [], [], [], [], []
    for label, a in audits.items():
        for name, s in a.scalars.items():
            rows.append({"model": label, "params": a.n_params, "prompts": name, **s})
        for r in a.injection:
            inj.append({"model": label, **_scalars(r)})
        for r in a.injection_val:
            inj_val.append({"model": label, **_scalars(r)})
        b = a.best
        for j, (g, e) in enumerate(
            zip(b.get("placebo_gains_list", []), b.get("placebo_exact_match_drops_list", []),
                strict=True)
        ):  # fmt: skip
            plac_rows.append({
                "model": label, "placebo": j, "refusal_gain": g, "abs_refusal_change": abs(g),
                "exact_match_drop": e,
                "reproduces_effect": tol is not None and g > tol + 1e-12,
                "moves_refusal_over_tolerance": tol is not None and abs(g) > tol + 1e-12,
            })  # fmt: skip
        for layer, (ct, ch) in enumerate(zip(a.cos_task, a.cos_harm, strict=True)):
            cos_rows.append(
                {
                    "model": label,
                    "layer": layer,
                    "chosen": layer == a.layer,
                    "cos_task": ct,
                    "cos_harm": ch,
                }
            )
        head = label == first
        s = a.scalars["jailbreak"]
        report.metric(
            f"{label}_speed_ratio_jailbreak",
            s["speed_ratio"],
            headline=head,
            description="Small-eps Fisher–Rao speed along r / mean placebo speed "
            "(jailbreak prompts).",
        )
        report.metric(
            f"{label}_auc_ratio_jailbreak",
            s["auc_ratio"],
            headline=head,
            description="Area under the FR response curve, r / placebo (jailbreak).",
        )
        where = b["selected_on"]
        report.metric(
            f"{label}_injection_refusal_gain",
            b["refusal_gain"],
            headline=head,
            description=f"Jailbreak refusal gain on the evaluation prompts at the operating point "
            f"({b['variant']}, alpha={b['alpha']}"
            + (f", gate q={b['gate_rate']}" if b.get("gate_rate") is not None else "")
            + f"; chosen on the {where} prompts).",
        )
        report.metric(
            f"{label}_jailbreak_refusal_before",
            a.injection[0]["jailbreak_refusal"],
            description="Jailbreak refusal rate without injection (evaluation prompts).",
        )
        report.metric(
            f"{label}_jailbreak_refusal_after",
            b["jailbreak_refusal"],
            description="Jailbreak refusal rate at the operating point (evaluation prompts).",
        )
        report.metric(
            f"{label}_placebo_refusal_gain_worst",
            b.get("placebo_refusal_gain_worst", 0.0),
            headline=head,
            description=f"Largest jailbreak refusal gain of any single one of the {k} "
            "matched-norm placebos at the operating point (evaluation prompts); the criterion "
            f"'no placebo reproduces the effect' holds when it is <= {tol}.",
        )
        report.metric(
            f"{label}_placebo_refusal_change_worst",
            b.get("placebo_refusal_change_worst", 0.0),
            description="Largest |jailbreak refusal change| of any single placebo at the "
            "operating point (evaluation prompts): how much a matched-norm random vector "
            "disturbs refusal either way.",
        )
        report.metric(
            f"{label}_placebo_refusal_gain",
            b.get("placebo_refusal_gain", 0.0),
            description=f"Mean placebo refusal gain at that point over the {k} placebos "
            f"(95% t interval over placebos: {b.get('placebo_refusal_gain_mean_low', 0.0):+.3f} "
            f"to {b.get('placebo_refusal_gain_mean_high', 0.0):+.3f}).",
        )
        report.metric(
            f"{label}_placebo_n_moving_over_10_points",
            b.get("placebo_n_over_10_points", 0),
            description=f"Placebos (of {k}) that move jailbreak refusal by more than 10 points "
            "either way at the operating point.",
        )
        report.metric(
            f"{label}_exact_match_drop",
            b["exact_match_drop"],
            headline=head,
            description="Benign exact-match drop at the operating point (evaluation tasks).",
        )
        report.metric(f"{label}_layer", a.layer, description="Chosen refusal layer (resid_pre).")
        report.metric(
            f"{label}_cos_task",
            a.cos_task[a.layer],
            description="cos(refusal, task-generation) at the chosen layer.",
        )
        report.metric(
            f"{label}_gate_recall",
            a.gate["calibration_recall"],
            description="Harm gate: calibration jailbreaks let through at the chosen q.",
        )
        o = a.best_on_eval
        report.note(
            f"**{label}** ({a.n_params:,} parameters): refusal layer {a.layer} ({a.site}), "
            f"‖r_raw‖ = {a.raw_norm:.2f}, typical residual norm {a.scale:.2f}. Operating point "
            f"(chosen on the {where} prompts): {b['variant']} injection at alpha = {b['alpha']} "
            f"raises jailbreak refusal from {100 * a.injection[0]['jailbreak_refusal']:.0f}% to "
            f"{100 * b['jailbreak_refusal']:.0f}% ({100 * b['refusal_gain']:+.0f} points). "
            f"Placebos, each at that point: gains {_pts(b.get('placebo_gains_list', []))} "
            f"(worst {100 * b.get('placebo_refusal_gain_worst', 0.0):+.1f}; mean "
            f"{100 * b.get('placebo_refusal_gain', 0.0):+.1f}, 95% t interval over placebos "
            f"{100 * b.get('placebo_refusal_gain_mean_low', 0.0):+.1f} to "
            f"{100 * b.get('placebo_refusal_gain_mean_high', 0.0):+.1f}; "
            f"{b.get('placebo_n_over_10_points', 0)} of {k} move refusal by more than 10 points "
            f"either way); criterion ({settings.placebo_criterion}, tolerance {tol}) "
            f"{'passes' if placebo_ok(b, tol, settings.placebo_criterion) else 'FAILS'} on the "
            "evaluation prompts. Benign exact-match drop "
            f"of {100 * b['exact_match_drop']:.1f} points on the evaluation prompts. Chosen on "
            f"the evaluation prompts instead (optimistic), the point would be {o['variant']} at "
            f"alpha = {o['alpha']} (gain {100 * o['refusal_gain']:+.0f}, placebo "
            f"{100 * o.get('placebo_refusal_gain', 0.0):+.1f}, drop "
            f"{100 * o['exact_match_drop']:.1f}). Harm gate (q = {a.gate['benign_rate']}, "
            f"chosen with the operating point) at {a.gate['site']}: "
            f"{100 * a.gate['jailbreak_gated']:.0f}% of held-out jailbreaks and "
            f"{100 * a.gate['task_gated']:.0f}% of benign tasks pass."
        )
    report.table("sensitivity_scalars", rows, caption="Per model and prompt set; CIs 95%.")
    report.table(
        "injection",
        inj,
        caption=f"Alpha sweep on the evaluation prompts, both variants (read at the point chosen "
        f"on validation; no choice uses this table); per point the {k} matched-norm placebos: "
        "each placebo's gain (placebo_refusal_gains), the worst gain and |change|, the mean "
        "with a 95% t interval over placebos; Clopper–Pearson 95% intervals for rates.",
    )
    report.table(
        "placebos",
        plac_rows,
        caption=f"Every placebo at each model's operating point (evaluation prompts); "
        f"tolerance {tol}: reproduces_effect = gain > tolerance, moves_refusal_over_tolerance "
        "= |change| > tolerance.",
    )
    if inj_val:
        report.table(
            "injection_validation",
            inj_val,
            caption="Alpha sweep on the validation prompts (disjoint from the evaluation ones), "
            "refusal vector only: the operating point is chosen here.",
        )
    report.table("cosines", cos_rows, caption="cos(r, task) and cos(r, harm) per layer.")
    curve_rows = []
    for label, a in audits.items():
        for name, c in a.curves.items():
            for e, d, pdist, ratio, shift in zip(
                c.eps,
                c.mean_distance,
                c.mean_placebo_distance,
                c.ratio,
                c.refusal_shift.mean(-1),
                strict=True,
            ):
                curve_rows.append(
                    {
                        "model": label,
                        "prompts": name,
                        "eps": float(e),
                        "fr_direction": float(d),
                        "fr_placebo": float(pdist),
                        "ratio": float(ratio),
                        "refusal_shift": float(shift),
                    }
                )
    report.table("curves", curve_rows, caption="Mean FR distance per eps (direction, placebo).")
    _figures(report, audits)
