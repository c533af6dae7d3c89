"""`trustlab run toolcall`: the tool-calling decision as a single vector μΔ.

Per model: minimal pairs (the organisms' corpus frames, English frames with a Hermes-style
scaffold for other models, or the user's JSONL file), the flip check, μΔ per layer and position
with the separation sweep, necessity (ablation, clamp) and sufficiency (addition) on held-out
pairs with random controls, the read-out (attribution, patching, transmission, logit lens) and
the scaffold analysis. The study itself is :func:`trustlab.methods.toolcall.study_model`; this
module wires it to models and writes the report. Default: ``tool-s``; ``--full`` adds
``smol-chat`` (English pairs; it is run only as far as it shows a tool decision); ``--quick``:
``tool-xs``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from trustlab.core import ExperimentConfig, Report, RunContext, register
from trustlab.core.errors import DataError
from trustlab.core.runtime import Threads, torch_runtime

DEFAULT_MODELS = ["organism:tool-s"]
FULL_MODELS = ["organism:tool-s", "organism:smol-chat"]
QUICK_MODELS = ["organism:tool-xs"]


class ToolcallConfig(ExperimentConfig):
    models: list[str] = Field(
        DEFAULT_MODELS,
        min_length=1,
        description="LM specs to study (organism:<name> or hf:/path). Tool organisms get the "
        "corpus pairs, other models English pairs with a Hermes-style tool scaffold (see "
        "'pairs').",
    )
    build_missing: bool = Field(
        True,
        description="Build organisms that are not cached; if false, an unbuilt one is an error.",
    )
    pairs: Literal["auto", "organism", "natural"] = Field(
        "auto",
        description="Pair source when no pairs_file is given: 'organism' (the tool corpus's "
        "frames and scaffold), 'natural' (English frames, Hermes-style scaffold) or 'auto' "
        "(organism for organism:tool-*, natural otherwise).",
    )
    pairs_file: str | None = Field(
        None,
        description="A JSONL file of your own pairs ({'execution': P, 'analysis': P}) or "
        "scaffolded prompts to convert ({'prompt': P, 'verb': optional}); P is a string or a "
        "list of role/content messages. Used for every model.",
    )
    heldout_fraction: float = Field(
        0.2, gt=0, lt=1, description="Share of a pairs_file's lines held out for the causal tests."
    )
    n_analysis: int = Field(
        1200,
        ge=10,
        description="Built-in pairs for mechanistic analysis (μΔ, read-out, layer choice).",
    )
    n_heldout: int = Field(
        300,
        ge=10,
        description="Built-in held-out pairs (frames never seen in training) for the tests.",
    )
    n_select: int = Field(
        200, ge=5, description="Analysis pairs on which the layer and position are chosen."
    )
    n_readout: int = Field(
        300, ge=5, description="Analysis pairs for attribution, patching and the scaffold fit."
    )
    fit_on: Literal["flipping", "all"] = Field(
        "flipping", description="Fit μΔ on the analysis pairs that flip, or on all of them."
    )
    n_positions: int = Field(
        4, ge=1, description="Prompt tokens, counted back from the last, that get a μΔ candidate."
    )
    call_format: str = Field("<tool_call>", min_length=1, description="The tool-call opener.")
    prose_format: str = Field(
        "Sure",
        min_length=1,
        description="The first word of a prose reply (the decision's contrast).",
    )
    alpha: float = Field(1.0, gt=0, description="Scale of μΔ in the sufficiency test.")
    alphas: list[float] = Field(
        [0.25, 0.5, 1.0, 2.0, 4.0], min_length=1, description="Scales of the dose-response sweep."
    )
    n_controls: int = Field(
        8, ge=1, description="Random directions per causal test (matched norm for addition)."
    )
    n_sweep_controls: int = Field(
        3, ge=0, description="Random controls at each scale of the dose-response sweep."
    )
    control_band: float = Field(
        0.1,
        ge=0,
        le=1,
        description="The controls pass when the worst one's 95% upper bound on its flip rate is "
        "at most this.",
    )
    min_flipping: int = Field(
        20, ge=2, description="Pairs that must flip (analysis and held-out) to fit and test μΔ."
    )
    n_probe: int = Field(
        64,
        ge=4,
        description="Held-out pairs probed first; a model below min_probe_flip_share stops.",
    )
    min_probe_flip_share: float = Field(
        0.25, ge=0, le=1, description="Share of probe pairs that must flip to continue the study."
    )
    max_layer_fraction: float = Field(
        0.8, gt=0, le=1, description="Candidate layers lie below this fraction of the depth."
    )
    neutral_verb: str = Field(
        "auto",
        min_length=1,
        description="Word put in the verb's place for the scaffold analysis ('auto': [UNK] for "
        "organisms, 'handle' otherwise).",
    )
    patch_positions: Literal["last", "all"] = Field(
        "last", description="Positions patched along each pair ('all' needs equal token counts)."
    )
    max_new_tokens: int = Field(
        64, ge=8, description="Reply length for checking the payload of induced tool calls."
    )
    batch_size: int = Field(64, ge=1, description="Prompts per forward pass.")
    threads: Threads = Field(1, description="torch CPU threads (fixed for determinism).")

    # `trustlab run toolcall --full`: the second family too (smol-chat builds in tens of CPU
    # minutes and is studied with English pairs and a Hermes-style scaffold)
    FULL: ClassVar[dict[str, Any]] = {"models": FULL_MODELS}
    QUICK: ClassVar[dict[str, Any]] = {
        "models": QUICK_MODELS,
        "n_analysis": 64,
        "n_heldout": 40,
        "n_select": 16,
        "n_readout": 16,
        "n_controls": 2,
        "n_sweep_controls": 1,
        "alphas": [0.5, 1.0],
        "n_probe": 16,
    }

    @field_validator("models", mode="before")
    @classmethod
    def _one(cls, v: Any) -> Any:
        if isinstance(v, str):
            named = {"quick": QUICK_MODELS, "default": DEFAULT_MODELS, "full": FULL_MODELS}
            return named.get(v.strip(), [v])
        return v

    @field_validator("models")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"the models must be distinct; got {v}")
        return v

    @field_validator("alphas")
    @classmethod
    def _positive(cls, v: list[float]) -> list[float]:
        if any(not a > 0 for a in v):
            raise ValueError(f"alphas must be positive; got {v}")
        return v

    @model_validator(mode="after")
    def _sizes(self) -> ToolcallConfig:
        if self.n_probe > self.n_heldout:
            raise ValueError(f"n_probe ({self.n_probe}) must be <= n_heldout ({self.n_heldout})")
        if self.n_select > self.n_analysis or self.n_readout > self.n_analysis:
            raise ValueError("n_select and n_readout must be <= n_analysis")
        return self


def _short(spec: str) -> str:
    name = spec.split(":", 1)[-1].rstrip("/").split("/")[-1]
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").lower() or "model"


def _load(spec: str, config: ToolcallConfig) -> Any:
    from trustlab import lm

    if spec.startswith("organism:") and not config.build_missing:
        from trustlab.organisms import is_built

        name = spec.removeprefix("organism:")
        if not is_built(name):
            raise DataError(
                f"{spec} is not built on this machine and build_missing is false. Build it with "
                f"'trustlab organisms build {name}' or pass --set build_missing=true."
            )
    return lm.load(spec)


def _pairs(spec: str, config: ToolcallConfig, seed: int) -> Any:
    from trustlab.methods.toolcall.pairs import natural_pairs, organism_pairs, read_pairs

    if config.pairs_file:
        return read_pairs(config.pairs_file, heldout_fraction=config.heldout_fraction, seed=seed)
    source = config.pairs
    if source == "auto":
        source = "organism" if spec.startswith("organism:tool") else "natural"
    make = organism_pairs if source == "organism" else natural_pairs
    return make(config.n_analysis, config.n_heldout, seed)


def _neutral(spec: str, config: ToolcallConfig) -> str:
    if config.neutral_verb != "auto":
        return config.neutral_verb
    return "[UNK]" if spec.startswith("organism:tool") else "handle"


@register("toolcall", config=ToolcallConfig)
def run(config: ToolcallConfig, ctx: RunContext) -> Report:
    from trustlab.methods.toolcall.decision import DecisionFormat, ToolDecision
    from trustlab.methods.toolcall.study import StudySettings, study_model

    studies = []
    with torch_runtime(config.threads):
        for spec in ctx.progress(config.models, description="models"):
            label = _short(spec)
            with ctx.stage(f"load {spec}"):
                model = _load(spec, config)
            with ctx.stage(f"pairs {spec}"):
                pairs = _pairs(spec, config, ctx.seed)
            settings = StudySettings(
                n_select=config.n_select,
                n_readout=config.n_readout,
                fit_on=config.fit_on,
                n_positions=config.n_positions,
                alpha=config.alpha,
                alphas=tuple(config.alphas),
                n_controls=config.n_controls,
                n_sweep_controls=config.n_sweep_controls,
                control_band=config.control_band,
                min_flipping=config.min_flipping,
                n_probe=min(config.n_probe, len(pairs.heldout)),
                min_probe_flip_share=config.min_probe_flip_share,
                max_layer_fraction=config.max_layer_fraction,
                neutral_verb=_neutral(spec, config),
                patch_positions=config.patch_positions,
                max_new_tokens=config.max_new_tokens,
                batch_size=config.batch_size,
            )
            decision = ToolDecision(
                model,
                DecisionFormat(config.call_format, config.prose_format),
                batch_size=config.batch_size,
            )
            with ctx.stage(f"study {spec}"):
                studies.append(
                    study_model(
                        model,
                        decision,
                        pairs,
                        settings,
                        generator=ctx.torch_generator(f"controls:{label}"),
                        rng=ctx.child_rng(f"slices:{label}"),
                        label=label,
                        progress=ctx.progress,
                    )
                )
            del model
    with ctx.stage("report"):
        from trustlab.methods.toolcall.report import write_report

        write_report(ctx.report, config, studies)
    return ctx.report
