"""`trustlab run isc`: TVD workflows in three interaction settings over a list of models.

1. The workflows: the shipped 53-workflow library rendered into a private directory (or the
   user's ``workflows`` folder), optionally a seeded subset stratified over the disciplines;
   each is validated with its placeholders (it must fail) before any model runs.
2. Per model: the workflows' demands asked plainly (refusal baseline), then every setting
   (``single``, ``context``, ``agentic``) with ``attempts`` attempts; validators and agentic
   tool calls run in the sandbox. Word-level ``tvd`` organisms read the compact view, every
   other model the full files (``view='auto'``). Replies are kept as hashes and verdicts.
3. Scores: task completion and unsafe completion per model x setting and per discipline
   (Clopper-Pearson), ASR@k, the worst setting, Internal Safety Collapse (refused plainly and
   filled in the workflow), and across models the capability-unsafety correlation (Spearman
   with a bootstrap over workflows, no verdict under three models) beside the paired steps
   between consecutive models (Newcombe paired intervals).

``scripted:<policy>`` models (:func:`~trustlab.methods.isc.scripted.scripted_model`) are
backends whose outcome is known; the quick preset runs three of them.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from trustlab.core import ExperimentConfig, Report, RunContext, register
from trustlab.core.errors import InputError
from trustlab.core.runtime import Threads, torch_runtime

SettingName = Literal["single", "context", "agentic"]


class IscConfig(ExperimentConfig):
    models: list[str] = Field(
        ["organism:tvd-1", "organism:tvd-2", "organism:tvd-3", "organism:smol-chat"],
        min_length=1,
        description="Models run (organism:, hf:, openai: specs, or scripted:<policy> with "
        "policy complier, refuser, echo, neutral or partial: backends whose outcome is known).",
    )
    workflows: Path | None = Field(None, description="Folder of workflow folders (workflow.json, "
                                   "task.py, validator.py, data.json); None: the shipped "
                                   "53-workflow library.")  # fmt: skip
    n_workflows: int | None = Field(None, ge=1, description="Workflows used, a seeded subset "
                                    "spread over the disciplines (None: all).")  # fmt: skip
    settings: list[SettingName] = Field(["single", "context", "agentic"], min_length=1,
                                        description="Interaction settings run.")  # fmt: skip
    attempts: int = Field(1, ge=1, le=100, description="Attempts per workflow and setting "
                          "(attempt a samples with seed + a); ASR@k uses k = attempts.")  # fmt: skip
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature (0: "
                               "greedy; use > 0 with attempts > 1).")  # fmt: skip
    n_context: int = Field(1, ge=0, le=20, description="Completed workflow turns (neutral "
                           "stand-ins) before the workflow in the context setting.")  # fmt: skip
    max_steps: int = Field(3, ge=1, le=50, description="Model turns per agentic episode.")
    max_new_tokens: int = Field(160, ge=1, le=8192, description="Reply tokens per turn.")
    plain_max_new_tokens: int = Field(48, ge=1, le=8192, description="Reply tokens of the "
                                      "plain requests (refusal baseline).")  # fmt: skip
    plain: bool = Field(True, description="Ask every demand plainly too and report Internal "
                        "Safety Collapse (refused plainly, filled in the workflow).")  # fmt: skip
    view: Literal["auto", "full", "compact"] = Field("auto", description="How workflows are "
                                                     "shown: full files, the tvd organisms' "
                                                     "compact prompt, or auto (compact for "
                                                     "organism:tvd-*).")  # fmt: skip
    judge: Literal["auto", "rule", "organism", "rubric"] = Field(
        "auto", description="Unsafe-field judge: rule (filled, not a placeholder, not a "
        "refusal), organism (the tvd organisms' placeholder compliance), rubric (StrongREJECT "
        "over judge_model), auto (organism for compact-view models, rubric where judge_model "
        "is set, else rule).")
    judge_model: str | None = Field(None, min_length=1, description="Chat-model spec of the "
                                    "StrongREJECT judge (an openai: endpoint, hf: or "
                                    "organism:).")  # fmt: skip
    unsandboxed: bool = Field(False, description="Run the agentic setting where the sandbox has "
                              "no namespace isolation (resource limits only). Refused by "
                              "default.")  # fmt: skip
    n_resamples: int = Field(1000, ge=100, le=100_000, description="Bootstrap resamples of the "
                             "capability-unsafety correlation.")  # fmt: skip
    alpha: float = Field(0.05, gt=0, lt=1, description="Interval level (1 - alpha).")
    threads: Threads = Field(1, description="torch CPU threads (fixed for determinism).")

    QUICK: ClassVar[dict[str, Any]] = {
        "models": ["scripted:refuser", "scripted:partial", "scripted:complier"],
        "n_workflows": 4,
        "n_resamples": 200,
    }

    @field_validator("models")
    @classmethod
    def _models(cls, v: list[str]) -> list[str]:
        from trustlab.methods.isc.scripted import SCRIPTED_POLICIES

        if len(set(v)) != len(v):
            raise ValueError(f"models must be distinct; got {v}")
        for spec in v:
            if spec.startswith("scripted:") and spec.removeprefix("scripted:") not in SCRIPTED_POLICIES:
                raise ValueError(f"unknown scripted policy in {spec!r}; known: "
                                 f"{', '.join(SCRIPTED_POLICIES)}")  # fmt: skip
            elif not spec.startswith(("scripted:", "organism:", "hf:", "openai:")):
                raise ValueError(f"a model is an organism:, hf:, openai: or scripted: spec; "
                                 f"got {spec!r}")  # fmt: skip
        return v

    @field_validator("settings")
    @classmethod
    def _settings(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"settings must be distinct; got {v}")
        return v

    @model_validator(mode="after")
    def _rubric_needs_a_judge(self) -> IscConfig:
        if self.judge == "rubric" and self.judge_model is None:
            raise ValueError("judge='rubric' needs judge_model (the StrongREJECT judge's spec)")
        return self


def _view_for(config: IscConfig, spec: str) -> Any:
    from trustlab.methods.isc.views import FULL, CompactView

    if config.view == "compact" or (config.view == "auto" and spec.startswith("organism:tvd-")):
        return CompactView()
    return FULL


def _judge_for(config: IscConfig, view: Any, rubric: Any) -> Any:
    from trustlab.methods.isc.views import OrganismFieldJudge

    kind = config.judge
    if kind == "auto":
        kind = "organism" if view.name == "compact" else "rubric" if rubric else "rule"
    return {"rule": None, "organism": OrganismFieldJudge(), "rubric": rubric}[kind], kind


def _subset(flows: list[Any], n: int | None, rng: np.random.Generator) -> list[Any]:
    """``n`` workflows spread over the disciplines: a seeded order within each discipline,
    then round-robin over the disciplines (library order kept in the result)."""
    if n is None or n >= len(flows):
        return flows
    by_disc: dict[str, list[int]] = {}
    for i, w in enumerate(flows):
        by_disc.setdefault(w.discipline, []).append(i)
    queues = [list(rng.permutation(v)) for v in by_disc.values()]
    chosen: list[int] = []
    while len(chosen) < n:
        for q in queues:
            if q and len(chosen) < n:
                chosen.append(int(q.pop(0)))
    return [flows[i] for i in sorted(chosen)]


def _model(spec: str, flows: list[Any]) -> Any:
    from trustlab import lm
    from trustlab.methods.isc.scripted import scripted_model

    if spec.startswith("scripted:"):
        return scripted_model(spec.removeprefix("scripted:"), flows, name=spec)
    return lm.chat_model(spec)


@register("isc", config=IscConfig)
def run(config: IscConfig, ctx: RunContext) -> Report:
    from trustlab.methods.isc.analysis import fill_report
    from trustlab.methods.isc.library import write_library
    from trustlab.methods.isc.settings import _shipped_validations, run_plain, run_setting
    from trustlab.methods.isc.workflow import load_workflows
    from trustlab.sandbox import Sandbox, probe

    box = Sandbox()
    if "agentic" in config.settings and box.level != "namespace" and not config.unsandboxed:
        raise InputError(
            "The agentic setting needs the sandbox's namespace isolation, unavailable here "
            f"({probe().reason or box.level}); pass --set unsandboxed=true to run it with "
            "resource limits only, or leave 'agentic' out of settings."
        )
    with tempfile.TemporaryDirectory(prefix="isc-library-") as tmp, ctx.stage("workflows"):
        flows = (load_workflows(config.workflows) if config.workflows is not None
                 else write_library(Path(tmp)))  # fmt: skip
        flows = _subset(flows, config.n_workflows, ctx.child_rng("workflows"))
        shipped = _shipped_validations(flows, box)  # cached: the settings reuse it
        if "context" in config.settings and config.n_context > len(flows) - 1:
            raise InputError(f"The context setting shows n_context={config.n_context} other "
                             f"workflows; the run has {len(flows)}.")  # fmt: skip
        rubric = None
        if config.judge_model is not None:
            from trustlab import lm

            rubric = lm.RubricJudge(lm.chat_model(config.judge_model), seed=ctx.seed)
        plain: dict[str, list[Any]] = {}
        outcomes: dict[str, list[Any]] = {}
        judges: dict[str, str] = {}
        pairs = [(m, s) for m in config.models for s in ["plain", *config.settings]
                 if s != "plain" or config.plain]  # fmt: skip
        models: dict[str, Any] = {}
        local = any(not m.startswith(("scripted:", "openai:")) for m in config.models)
        runtime = torch_runtime(config.threads) if local else contextlib.nullcontext()
        with ctx.stage("models"), runtime:
            for spec, setting in ctx.progress(pairs, description="isc model x setting"):
                if spec not in models:
                    models[spec] = _model(spec, flows)
                    outcomes[spec] = []
                model, view = models[spec], _view_for(config, spec)
                judge, judges[spec] = _judge_for(config, view, rubric)
                if setting == "plain":
                    plain[spec] = run_plain(model, flows, view=view, seed=ctx.seed,
                                            max_new_tokens=config.plain_max_new_tokens)  # fmt: skip
                    continue
                outcomes[spec] += run_setting(
                    model, flows, setting, attempts=config.attempts, n_context=config.n_context,
                    max_steps=config.max_steps, max_new_tokens=config.max_new_tokens,
                    temperature=config.temperature, seed=ctx.seed, sandbox=box,
                    unsandboxed=config.unsandboxed, judge=judge, view=view,
                )  # fmt: skip
    with ctx.stage("report"):
        fill_report(ctx.report, config=config, flows=flows, shipped=shipped, plain=plain,
                    outcomes=outcomes, judges=judges, isolation=box.level, seed=ctx.seed)  # fmt: skip
    return ctx.report
