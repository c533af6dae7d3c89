"""`trustlab run lisa`: LiSA against memory baselines on three suites under noisy, sparse reports.

One MiniLM + logistic-regression base guardrail is trained once on a generic seed set. For
each suite (ConFaide+, PrivacyLens+, AgentHarm-style) and each label-flip rate, every method
runs the same prequential stream with the same report process (see ``simulator``); the
report holds learning curves over the number of reports, final prequential metrics, memory
sizes, per-decision latency, and a latency-performance plot against a larger base (an MLP on
the same embeddings) without memory.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator

from trustlab.core import ExperimentConfig, Report, RunContext, register
from trustlab.core.figures import add_alt_text, new_figure
from trustlab.embed import HashingEmbedder, MiniLMEmbedder, default_cache_path
from trustlab.methods.lisa.base import EmbeddingGuardrail, LLMJudgeGuardrail
from trustlab.methods.lisa.baselines import (
    BaseOnly,
    ExemplarMemory,
    InsightMemory,
    ReflectionMemory,
)
from trustlab.methods.lisa.guardrail import Lisa, MemoBase
from trustlab.methods.lisa.simulator import classification_metrics, learning_curve, run_stream
from trustlab.methods.lisa.suites import build_suite, generic_seed_set

SuiteName = Literal["confaide_plus", "privacylens_plus", "agentharm_style"]
UNGATED = ("exemplar", "insight", "insight_lisa_keys", "lisa_nogate")


class LisaConfig(ExperimentConfig):
    suites: list[SuiteName] = Field(
        ["confaide_plus", "privacylens_plus", "agentharm_style"],
        min_length=1,
        description="Deployment suites to run.",
    )
    stream_length: int = Field(1500, ge=50, description="Cases per prequential stream.")
    report_rate: float = Field(
        0.1, gt=0.0, le=1.0, description="Probability that a user reports a mistake."
    )
    flip_rates: list[float] = Field(
        [0.0, 0.1, 0.2], min_length=1, description="Shares of label-flipped reports to run."
    )
    n_seed_flows: int = Field(
        400, ge=20, description="Generic CI flows in the base guardrail's seed set."
    )
    n_seed_tool_calls: int = Field(
        400, ge=0, description="Generic tool calls (held-out paraphrase) in the seed set."
    )
    confaide_variants: int = Field(
        4, ge=1, le=16, description="Surface variants per ConfAIde tier-2a flow."
    )
    privacylens_max_seeds: int | None = Field(
        None, ge=10, description="Use only the first N PrivacyLens seeds (None: all 493)."
    )
    gate_alpha: float = Field(
        0.2, gt=0.0, lt=1.0, description="Quantile of the Beta posterior used as lower bound."
    )
    prior_a: float = Field(1.0, gt=0.0, description="Beta prior a of an entry's correctness.")
    prior_b: float = Field(1.0, gt=0.0, description="Beta prior b of an entry's correctness.")
    base_prior_strength: float = Field(
        2.0, ge=0.0, description="m: pseudo-reports behind the base's own confidence."
    )
    report_share: float = Field(
        0.1, gt=0.0, le=1.0,
        description="LiSA's assumed share of base mistakes users report (rho), used to "
        "calibrate the base's confidence on traffic; a prior, not read from the simulator.",
    )
    value_similarity: float = Field(
        0.8, gt=0.0, le=1.0, description="Cosine threshold that groups attribute values."
    )
    exemplar_threshold: float = Field(
        0.9, gt=0.0, le=1.0, description="Exemplar baseline: cosine needed to override."
    )
    insight_min_accuracy: float = Field(
        0.5, gt=0.0, le=1.0, description="Insight baseline: empirical accuracy needed to fire."
    )
    large_base_hidden: int = Field(
        256, ge=0, description="Hidden units of the larger base (MLP); 0 leaves it out."
    )
    embedder: Literal["minilm", "hashing"] = Field(
        "minilm", description="Sentence embedder: MiniLM (offline wheel) or feature hashing."
    )
    embedding_cache: bool = Field(
        True, description="Cache embeddings in $TRUSTLAB_HOME/embed/embeddings.sqlite."
    )
    n_windows: int = Field(10, ge=2, description="Windows of the learning curves.")
    latency_cases: int = Field(
        12, ge=0, description="Uncached cases per suite timed for the latency plot (0: skip)."
    )
    llm: str | None = Field(
        None,
        description="Chat model spec (hf:/path or openai:URL#model) for the LLM judge and "
        "the reflection baseline; None skips them.",
    )
    llm_stream_length: int = Field(
        200, ge=10, description="Stream length for the LLM-judge methods (they are slow)."
    )

    # A smoke run of every stage in seconds: feature hashing instead of MiniLM (MiniLM's load
    # and the cold embedding of ~1,500 texts cost ~35 CPU-s; `--set embedder=minilm` runs it).
    QUICK: ClassVar[dict[str, Any]] = {
        "stream_length": 200,
        "flip_rates": [0.0, 0.2],
        "n_seed_flows": 60,
        "n_seed_tool_calls": 60,
        "confaide_variants": 1,
        "privacylens_max_seeds": 20,
        "large_base_hidden": 16,
        "embedder": "hashing",
        "latency_cases": 0,
        "n_windows": 4,
    }

    @field_validator("flip_rates")
    @classmethod
    def _flip_rates(cls, v: list[float]) -> list[float]:
        for f in v:
            if not 0.0 <= f < 0.5:
                raise ValueError(f"every flip rate must be in [0, 0.5); got {f}")
        return sorted(set(v))


def _memory_options(config: LisaConfig) -> dict[str, Any]:
    """LiSA's memory settings from the config (every LiSA variant, on any base, uses them)."""
    return {
        "gate_alpha": config.gate_alpha,
        "prior": (config.prior_a, config.prior_b),
        "base_prior_strength": config.base_prior_strength,
        "value_similarity": config.value_similarity,
        "report_share": config.report_share,
    }


def _methods(config: LisaConfig, base: MemoBase, emb: Any) -> list[Any]:
    mem = _memory_options(config)
    return [
        BaseOnly(base),
        Lisa(base, embedder=emb, **mem),
        Lisa(base, embedder=emb, name="lisa_nogate", gating=False, **mem),
        Lisa(base, embedder=emb, name="lisa_nolocal", local_rules=False, **mem),
        Lisa(base, embedder=emb, name="lisa_nocal", calibrate=False, **mem),
        ExemplarMemory(base, emb, threshold=config.exemplar_threshold),
        InsightMemory(base, min_accuracy=config.insight_min_accuracy),
        InsightMemory(
            base, min_accuracy=config.insight_min_accuracy, lisa_keys=True,
            name="insight_lisa_keys",
        ),
    ]


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) * 1e3 if len(values) else float("nan")


@register("lisa", config=LisaConfig)
def run(config: LisaConfig, ctx: RunContext) -> Report:
    report = ctx.report
    with ctx.stage("base guardrail"):
        cache = default_cache_path() if config.embedding_cache else None
        emb = MiniLMEmbedder(cache) if config.embedder == "minilm" else HashingEmbedder(384, cache)
        seed_cases, seed_labels = generic_seed_set(
            config.n_seed_flows, ctx.child_rng("seed set"), config.n_seed_tool_calls
        )
        base_model = EmbeddingGuardrail(emb).fit(seed_cases, seed_labels)
        large = None
        if config.large_base_hidden:
            large = EmbeddingGuardrail(
                emb, hidden=config.large_base_hidden, seed=ctx.seed, name="base_large"
            ).fit(seed_cases, seed_labels)
    report.note(
        f"Base guardrail: {base_model.name}, trained once on {len(seed_cases)} generic seed cases "
        f"(training accuracy {base_model.train_accuracy_:.3f}); never updated by any method."
    )

    final_rows: list[dict[str, Any]] = []
    curve_rows: list[dict[str, Any]] = []
    latency: dict[str, list[np.ndarray]] = {}
    curves: dict[tuple[str, float, str], list[dict[str, float]]] = {}
    suites = {}
    for suite_name in config.suites:
        with ctx.stage(f"suite {suite_name}"):
            suite = build_suite(
                suite_name,
                variants=config.confaide_variants,
                max_seeds=config.privacylens_max_seeds,
            )
            suites[suite_name] = suite
            base = MemoBase(base_model)
            order = ctx.child_rng(f"stream {suite_name}").integers(
                0, len(suite.cases), config.stream_length
            )
            streamed = [suite.cases[i] for i in sorted(set(order.tolist()))]
            base.score(streamed)  # embed the streamed cases once (batched)
            emb.encode(sorted({v for c in streamed for v in c.attributes().values()}))
            fb_seed = int(ctx.child_rng(f"feedback {suite_name}").integers(0, 2**31))
            jobs = [(f, g) for f in config.flip_rates for g in _methods(config, base, emb)]
            if large is not None:
                jobs.append((config.flip_rates[0], BaseOnly(MemoBase(large), name="base_large")))
            for flip, g in ctx.progress(jobs, description=f"lisa {suite_name}"):
                res = run_stream(
                    g,
                    suite.cases,
                    suite.labels,
                    order,
                    report_rate=config.report_rate,
                    flip_rate=flip,
                    seed=fb_seed,
                )
                m = classification_metrics(res.predictions, res.labels)
                local = suite.local_mask[order]
                m_local = classification_metrics(res.predictions[local], res.labels[local])
                final_rows.append(
                    {
                        "suite": suite_name,
                        "flip_rate": flip,
                        "method": g.name,
                        **m,
                        "accuracy_local_norm_cases": m_local["accuracy"],
                        "reports": res.n_reports,
                        "flipped_reports": res.n_flipped,
                        "memory_size": res.memory_size,
                        "p50_ms": _pct(res.latencies_s, 50),
                        "p95_ms": _pct(res.latencies_s, 95),
                    }
                )
                latency.setdefault(g.name, []).append(res.latencies_s)
                cur = learning_curve(res, config.n_windows)
                curves[(suite_name, flip, g.name)] = cur
                for row in cur:
                    curve_rows.append(
                        {"suite": suite_name, "flip_rate": flip, "method": g.name, **row}
                    )

    cold: dict[str, float] = {}
    if config.latency_cases:
        with ctx.stage("cold latency"):
            cold = _cold_latency(config, emb, base_model, large, suites, ctx)

    if config.llm:
        with ctx.stage("LLM judge"):
            final_rows += _llm_rows(config, suites, emb, ctx)

    _metrics(report, config, final_rows, latency, cold)
    report.table("final_metrics", final_rows, caption="Prequential metrics over the whole stream.")
    report.table(
        "learning_curves",
        curve_rows,
        caption="Metrics per stream window; 'reports' = reports received by the window's end.",
    )
    report.table(
        "suites",
        [
            {
                "suite": s.name,
                "pool_cases": len(s.cases),
                "block_share": float(s.labels.mean()),
                "local_norm_share": float(s.local_mask.mean()),
                "description": s.description,
            }
            for s in suites.values()
        ],
        caption="Deployment pools; local_norm_share = cases whose local label differs from the "
        "generic one.",
    )
    report.figure(
        "learning_curves", _curve_figure(config, curves), caption="Accuracy vs number of reports."
    )
    report.figure(
        "latency_performance",
        _frontier_figure(final_rows, cold, config),
        caption="Accuracy (mean over suites, highest flip rate) vs cold decision latency p50.",
    )
    report.note(
        "Ungated baselines: exemplar (nearest reported case), insight (ExpeL-style empirical "
        "accuracy, exact (recipient, transmission principle) / (tool, instruction) keys), "
        "insight_lisa_keys (the same over LiSA's derived abstraction keys), lisa_nogate "
        "(LiSA's abstractions and local rules, majority label always fires). lisa_nolocal "
        "keeps the gate but never splits an abstraction; lisa_nocal gates on the base's "
        "uncalibrated confidence (no traffic calibration)."
    )
    return report


def _cold_latency(config, emb, base_model, large, suites, ctx) -> dict[str, float]:
    """p50 ms of one decision on uncached text (fresh embedder memo), base vs larger base."""
    cases = []
    for s in suites.values():
        idx = ctx.child_rng(f"latency {s.name}").choice(len(s.cases), config.latency_cases)
        cases += [s.cases[i] for i in idx]
    fresh_emb = MiniLMEmbedder(None) if config.embedder == "minilm" else HashingEmbedder(384)
    fresh_emb.__dict__.update({k: v for k, v in vars(emb).items() if k in ("_model", "_tokenizer")})
    out = {}
    for name, model in (("base", base_model), ("base_large", large)):
        if model is None:
            continue
        fresh = EmbeddingGuardrail(fresh_emb, hidden=model.hidden, C=model.C)
        fresh.model_ = model.model_
        fresh.score([cases[0]])  # load weights outside the timing
        times = []
        for c in cases[1:]:
            fresh.embedder._memo.clear()  # type: ignore[attr-defined]
            start = time.perf_counter()
            fresh.score([c])
            times.append(time.perf_counter() - start)
        out[name] = float(np.median(times)) * 1e3
    return out


def _llm_rows(config, suites, emb, ctx) -> list[dict[str, Any]]:
    from trustlab.lm import chat_model

    judge = LLMJudgeGuardrail(chat_model(config.llm), seed=ctx.seed)
    rows = []
    for name, suite in suites.items():
        order = ctx.child_rng(f"stream {name}").integers(0, len(suite.cases), config.stream_length)
        order = order[: config.llm_stream_length]
        fb_seed = int(ctx.child_rng(f"feedback {name}").integers(0, 2**31))
        base = MemoBase(judge)
        base.score([suite.cases[i] for i in order])  # the judge's fixed scores, in one batched pass
        jobs = [
            (flip, g)
            for flip in config.flip_rates
            for g in (
                BaseOnly(base, name="llm_judge"),
                Lisa(base, embedder=emb, name="lisa_llm", **_memory_options(config)),
                ReflectionMemory(judge),  # re-asks the judge with its lessons at every check
            )
        ]
        for flip, g in ctx.progress(jobs, description=f"LLM judge {name}"):
            res = run_stream(g, suite.cases, suite.labels, order,
                             report_rate=config.report_rate, flip_rate=flip, seed=fb_seed)
            rows.append({"suite": name, "flip_rate": flip, "method": g.name,
                         **classification_metrics(res.predictions, res.labels),
                         "reports": res.n_reports, "memory_size": res.memory_size,
                         "p50_ms": _pct(res.latencies_s, 50)})
    return rows


def _mean_acc(rows, method: str, flip: float) -> float:
    vals = [r["accuracy"] for r in rows if r["method"] == method and r["flip_rate"] == flip]
    return float(np.mean(vals)) if vals else float("nan")


def _metrics(report, config, rows, latency, cold) -> None:
    hi = max(config.flip_rates)
    lisa_hi = _mean_acc(rows, "lisa", hi)
    base_acc = _mean_acc(rows, "base", config.flip_rates[0])
    best_ungated = max(_mean_acc(rows, m, hi) for m in UNGATED)
    report.metric("lisa_accuracy", lisa_hi, headline=True,
                  description=f"LiSA prequential accuracy, mean over suites, flip rate {hi}.")
    report.metric("base_accuracy", base_acc, headline=True,
                  description="Base guardrail alone, mean over suites.")
    report.metric("lisa_gain_over_base", lisa_hi - base_acc, headline=True,
                  description=f"LiSA minus base accuracy at flip rate {hi}.")
    report.metric("lisa_gain_over_best_ungated", lisa_hi - best_ungated, headline=True,
                  description=f"LiSA minus the best ungated baseline at flip rate {hi}.")
    for f in config.flip_rates:
        for m in ("lisa", "lisa_nogate", "lisa_nolocal", "lisa_nocal", "exemplar", "insight",
                  "insight_lisa_keys"):
            report.metric(f"accuracy_{m}_flip{f:g}", _mean_acc(rows, m, f),
                          description=f"{m}, mean accuracy over suites, flip rate {f}.")
    lisa_sizes = [r["memory_size"] for r in rows if r["method"] == "lisa"]
    report.metric("lisa_memory_entries_max", int(max(lisa_sizes)) if lisa_sizes else 0,
                  description="Largest LiSA memory (leaf entries) at the end of a stream.")
    for name in ("base", "lisa"):
        lat = np.concatenate(latency.get(name, [np.zeros(0)]))
        report.metric(f"{name}_p50_ms_warm", _pct(lat, 50), unit=" ms",
                      description=f"{name}: p50 decision latency with the base score cached.")
        report.metric(f"{name}_p95_ms_warm", _pct(lat, 95), unit=" ms",
                      description=f"{name}: p95 decision latency with the base score cached.")
        if len(lat):
            report.metric(f"{name}_decisions_per_s_warm", float(1.0 / lat.mean()),
                          description=f"{name}: decisions per second, base score cached.")
    for name, ms in cold.items():
        report.metric(f"{name}_p50_ms_cold", ms, unit=" ms",
                      description=f"{name}: p50 latency of one decision on unseen text.")


def _curve_figure(config, curves):
    n_s, n_f = len(config.suites), len(config.flip_rates)
    fig, axes = new_figure(n_s, n_f, size=(4 * n_f, 3 * n_s))
    methods = ("base", "lisa", "lisa_nogate", "lisa_nolocal", "lisa_nocal", "exemplar",
               "insight", "insight_lisa_keys")
    for i, s in enumerate(config.suites):
        for j, f in enumerate(config.flip_rates):
            ax = axes[i][j]
            for m in methods:
                cur = curves.get((s, f, m))
                if cur:
                    ax.plot([r["reports"] for r in cur], [r["accuracy"] for r in cur],
                            marker="o", ms=3, label=m)
            ax.set_title(f"{s}, flip {f:g}", fontsize=9)
            ax.set_xlabel("reports received")
            ax.set_ylabel("window accuracy")
    axes[0][0].legend(fontsize=7)
    add_alt_text(fig, f"Line charts of window accuracy against reports received, one panel per "
                      f"suite ({', '.join(config.suites)}) and flip rate "
                      f"({', '.join(f'{f:g}' for f in config.flip_rates)}), one line per method.")
    return fig


def _frontier_figure(rows, cold, config):
    hi = max(config.flip_rates)
    fig, axes = new_figure(size=(5, 3.5))
    ax = axes[0, 0]
    warm = {r["method"]: r["p50_ms"] for r in rows if r["flip_rate"] == hi}
    points = {
        "base": (cold.get("base"), _mean_acc(rows, "base", hi)),
        "base_large": (cold.get("base_large"), _mean_acc(rows, "base_large", config.flip_rates[0])),
        "lisa": (
            (cold.get("base") or 0.0) + (warm.get("lisa", 0.0) - warm.get("base", 0.0)),
            _mean_acc(rows, "lisa", hi),
        ),
    }
    for name, (x, y) in points.items():
        if x is not None and np.isfinite(y):
            ax.scatter([x], [y])
            ax.annotate(name, (x, y), fontsize=8)
    ax.set_xlabel("p50 latency per decision (ms, unseen text)")
    ax.set_ylabel("accuracy (mean over suites)")
    add_alt_text(fig, "Scatter of mean accuracy over suites against p50 decision latency on "
                      "unseen text for the base guardrail, a larger base and LiSA.")
    return fig
