"""The whole toolcall study of one model, step by step (what ``trustlab run toolcall`` runs).

1. **Flip check** — both variants of every pair; a pair *flips* when the execution variant
   calls the tool and the analysis variant does not. Pairs that do not flip are counted
   (both call, neither calls, reversed) and reported; μΔ is fitted on the analysis pairs that
   flip (``fit_on="flipping"``) or on all of them, and the causal tests run on the held-out
   pairs that flip (so each test starts from a known decision). A model is first probed on
   ``n_probe`` held-out pairs; below ``min_probe_flip_share`` flips it shows no tool decision
   and the study stops there (the flip rate is the result; no verdict on μΔ).
2. **μΔ** at every layer and position (:class:`ToolDirection`) and the separation sweep on the
   held-out pairs.
3. **The candidate** (layer, position) for the causal tests, chosen on ``n_select`` analysis
   pairs, never on held-out ones (:func:`choose_candidate`).
4. **Causal tests** on the held-out pairs that flip: ablation and clamping (necessity),
   addition (sufficiency), each with ``n_controls`` random controls; the dose-response of
   addition over ``alphas`` with the first ``n_sweep_controls`` controls; the quality of the
   induced calls against the model's own calls on execution prompts.
5. **Read-out** on ``n_readout`` analysis pairs that flip: direct logit attribution, patching
   of every ``resid_pre``/``attn_out``/``mlp_out`` and head, the transmission of an injected
   μΔ, and the logit lens of the two means per layer.
6. **Scaffold** analysis (with and without the system scaffold, neutral verb) where the pairs
   have a scaffold.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from trustlab.core.errors import InputError
from trustlab.core.validation import check_choice, check_scalar
from trustlab.lm import LanguageModel, unembed
from trustlab.methods.toolcall.causal import (
    CandidateChoice,
    CausalTest,
    ablation,
    addition,
    causal_test,
    choose_candidate,
    clamp,
    induced_call_quality,
    random_directions,
)
from trustlab.methods.toolcall.decision import FlipCheck, ToolDecision, check_flips
from trustlab.methods.toolcall.direction import SeparationSweep, ToolDirection
from trustlab.methods.toolcall.pairs import PairSet
from trustlab.methods.toolcall.readout import (
    ComponentAttribution,
    ComponentPatching,
    component_attribution,
    patch_components,
    transmission,
)
from trustlab.methods.toolcall.scaffold import ScaffoldAnalysis, scaffold_analysis

__all__ = ["ModelStudy", "StudySettings", "study_model"]

Progress = Callable[..., Any]


@dataclass(frozen=True)
class StudySettings:
    """The algorithm settings of :func:`study_model` (the experiment config's fields)."""

    n_select: int = 200
    n_readout: int = 300
    fit_on: str = "flipping"
    n_positions: int = 4
    alpha: float = 1.0
    alphas: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)
    n_controls: int = 8
    n_sweep_controls: int = 3
    control_band: float = 0.1
    min_flipping: int = 20
    n_probe: int = 64
    min_probe_flip_share: float = 0.25
    max_layer_fraction: float = 0.8
    neutral_verb: str = "[UNK]"
    patch_positions: str = "last"
    max_new_tokens: int = 64
    batch_size: int = 64
    languages: dict[str, str] = field(
        default_factory=lambda: {"Python": "python", "Java": "java", "C++": "cpp"}
    )

    def check(self) -> StudySettings:
        where = "StudySettings"
        for name in (
            "n_select",
            "n_readout",
            "n_positions",
            "n_controls",
            "min_flipping",
            "n_probe",
            "max_new_tokens",
            "batch_size",
        ):
            check_scalar(getattr(self, name), name, where, kind=int, lo=1)
        check_scalar(self.n_sweep_controls, "n_sweep_controls", where, kind=int, lo=0)
        check_scalar(self.alpha, "alpha", where, lo=0.0, closed="neither")
        check_scalar(self.control_band, "control_band", where, lo=0.0, hi=1.0)
        check_scalar(self.min_probe_flip_share, "min_probe_flip_share", where, lo=0.0, hi=1.0)
        check_scalar(
            self.max_layer_fraction, "max_layer_fraction", where, lo=0.0, hi=1.0, closed="right"
        )
        check_choice(self.fit_on, "fit_on", ("flipping", "all"), where)
        check_choice(self.patch_positions, "patch_positions", ("last", "all"), where)
        if not self.alphas or any(not a > 0 for a in self.alphas):
            raise InputError(f"'alphas' must be positive numbers. Got {self.alphas!r}.")
        return self


@dataclass
class ModelStudy:
    """Everything measured on one model (fields are None where a step did not run)."""

    label: str
    n_params: int
    n_layers: int
    d_model: int
    n_heads: int | None
    pairs: PairSet
    probe: FlipCheck
    decided: bool
    reason: str = ""
    flips_analysis: FlipCheck | None = None
    flips_heldout: FlipCheck | None = None
    direction: ToolDirection | None = None
    sweep: SeparationSweep | None = None
    choice: CandidateChoice | None = None
    tests: dict[str, CausalTest] = field(default_factory=dict)
    dose: list[dict[str, Any]] = field(default_factory=list)
    quality: dict[str, dict[str, Any]] = field(default_factory=dict)
    means: dict[str, list[float]] = field(default_factory=dict)
    lens: list[dict[str, Any]] = field(default_factory=list)
    attribution: ComponentAttribution | None = None
    patching: ComponentPatching | None = None
    transmission: list[dict[str, Any]] = field(default_factory=list)
    scaffold: ScaffoldAnalysis | None = None
    timings: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)


class _Clock:
    def __init__(self, timings: dict[str, float]) -> None:
        self.timings = timings

    def __call__(self, name: str) -> Any:
        clock = self

        class _Stage:
            def __enter__(self) -> None:
                self.start = time.perf_counter()

            def __exit__(self, *exc: object) -> None:
                clock.timings[name] = (
                    clock.timings.get(name, 0.0) + time.perf_counter() - self.start
                )

        return _Stage()


def _flipping(pairs: Any, check: FlipCheck) -> list[Any]:
    return [p for p, f in zip(pairs, check.flips, strict=True) if f]


def study_model(
    model: LanguageModel,
    decision: ToolDecision,
    pairs: PairSet,
    settings: StudySettings,
    *,
    generator: torch.Generator,
    rng: np.random.Generator,
    label: str = "model",
    progress: Progress | None = None,
) -> ModelStudy:
    """Run the study on ``model`` (see the module doc)."""
    if not isinstance(settings, StudySettings):
        raise InputError(f"'settings' must be a StudySettings. Got {type(settings).__name__}.")
    s = settings.check()
    if not isinstance(model, LanguageModel):
        raise InputError(
            f"'model' must be a trustlab.lm.LanguageModel. Got {type(model).__name__}."
        )
    if not isinstance(decision, ToolDecision) or decision.model is not model:
        raise InputError("'decision' must be a ToolDecision of the same model.")
    if not isinstance(generator, torch.Generator):
        raise InputError(f"'generator' must be a torch.Generator. Got {type(generator).__name__}.")
    if not isinstance(rng, np.random.Generator):
        raise InputError(f"'rng' must be a numpy Generator. Got {type(rng).__name__}.")
    if not isinstance(pairs, PairSet):
        raise InputError(f"'pairs' must be a PairSet. Got {type(pairs).__name__}.")
    timings: dict[str, float] = {}
    clock = _Clock(timings)
    n_params = sum(p.numel() for p in model.model.parameters())
    held_all = list(pairs.heldout)
    with clock("probe"):
        probe_pairs = held_all[: s.n_probe]
        probe = check_flips(decision, probe_pairs)
    study = ModelStudy(
        label,
        n_params,
        model.n_layers,
        model.d_model,
        model.adapter.n_heads,
        pairs,
        probe,
        decided=False,
        timings=timings,
    )
    share = float(probe.flips.mean())
    if share < s.min_probe_flip_share:
        study.reason = (
            f"no tool decision: {int(probe.flips.sum())} of {len(probe_pairs)} probe pairs flip "
            f"(share {share:.2f} < {s.min_probe_flip_share}); μΔ and the causal tests were not run"
        )
        return study
    with clock("flip check"):
        rest = check_flips(decision, held_all[s.n_probe :]) if len(held_all) > s.n_probe else None
        study.flips_heldout = _concat(probe, rest)
        study.flips_analysis = check_flips(decision, list(pairs.analysis))
    fit = (
        _flipping(pairs.analysis, study.flips_analysis)
        if s.fit_on == "flipping"
        else list(pairs.analysis)
    )
    held = _flipping(held_all, study.flips_heldout)
    study.counts = {"fit_pairs": len(fit), "test_pairs": len(held)}
    if len(fit) < s.min_flipping or len(held) < s.min_flipping:
        study.reason = (
            f"too few pairs flip ({len(fit)} analysis, {len(held)} held-out; at least "
            f"{s.min_flipping} each are needed): μΔ and the causal tests were not run"
        )
        return study
    study.decided = True
    with clock("mu_delta"):
        direction = ToolDirection(n_positions=s.n_positions, batch_size=s.batch_size).fit(
            model, fit, progress=progress
        )
    study.direction = direction
    with clock("separation"):
        study.sweep = direction.separation(model, held_all, progress=progress)
    select = [fit[int(i)] for i in rng.permutation(len(fit))[: s.n_select]]
    with clock("layer choice"):
        study.choice = choose_candidate(
            decision,
            direction,
            select,
            alpha=s.alpha,
            max_layer_fraction=s.max_layer_fraction,
            progress=progress,
        )
    layer, pos = study.choice.layer, study.choice.position
    v = direction.vector(layer, pos)
    r = direction.unit(layer, pos)
    controls = random_directions(v, s.n_controls, generator)
    means = direction.mean_projections(r, pos)
    study.means = {k: [float(x) for x in val] for k, val in means.items()}
    ex = [p.execution for p in held]
    an = [p.analysis for p in held]
    with clock("causal tests"):
        base_e = np.ones(len(ex), dtype=bool)  # held-out pairs that flip: execution calls
        base_a = np.zeros(len(an), dtype=bool)
        logit_e = study.flips_heldout.execution_logit[study.flips_heldout.flips]
        logit_a = study.flips_heldout.analysis_logit[study.flips_heldout.flips]
        common = {"control_band": s.control_band, "progress": progress}
        study.tests["ablation"] = causal_test(
            decision,
            ex,
            ablation(r),
            [ablation(c) for c in controls],
            name="ablation",
            population="execution",
            calls_before=base_e,
            logit_before=logit_e,
            **common,
        )
        control_values = [direction.mean_projections(c, pos)["analysis"] for c in controls]
        study.tests["clamp"] = causal_test(
            decision,
            ex,
            clamp(model, r, means["analysis"], pos),
            [clamp(model, c, cv, pos) for c, cv in zip(controls, control_values, strict=True)],
            name="clamp",
            population="execution",
            calls_before=base_e,
            logit_before=logit_e,
            **common,
        )
        norm = float(v.norm())
        study.tests["addition"] = causal_test(
            decision,
            an,
            addition(model, v, layer, pos, s.alpha),
            [addition(model, c * norm, layer, pos, s.alpha) for c in controls],
            name="addition",
            population="analysis",
            calls_before=base_a,
            logit_before=logit_a,
            **common,
        )
    with clock("dose response"):
        sweep_controls = controls[: s.n_sweep_controls]
        for a in s.alphas:
            t = causal_test(
                decision,
                an,
                addition(model, v, layer, pos, a),
                [addition(model, c * norm, layer, pos, a) for c in sweep_controls],
                name=f"addition x{a:g}",
                population="analysis",
                calls_before=base_a,
                logit_before=logit_a,
                control_band=s.control_band,
            )
            row = {"alpha": float(a), **t.summary()}
            study.dose.append(row)
    with clock("induced calls"):
        study.quality["steered analysis"] = induced_call_quality(
            decision,
            held,
            addition(model, v, layer, pos, s.alpha),
            max_new_tokens=s.max_new_tokens,
            languages=s.languages,
        )
        study.quality["execution (no intervention)"] = induced_call_quality(
            decision,
            held,
            [],
            max_new_tokens=s.max_new_tokens,
            languages=s.languages,
            variant="execution",
        )
    readout = [fit[int(i)] for i in rng.permutation(len(fit))[: s.n_readout]]
    with clock("attribution"):
        study.attribution = component_attribution(decision, readout, progress=progress)
    with clock("patching"):
        study.patching = patch_components(
            decision, readout, positions=s.patch_positions, progress=progress
        )
    with clock("transmission"):
        study.transmission = transmission(
            decision, readout, addition(model, v, layer, pos, s.alpha), progress=progress
        )
    study.lens = _lens(model, decision, direction, readout, pos)
    if all(p.has_scaffold for p in [*readout, *held]):
        with clock("scaffold"):
            study.scaffold = scaffold_analysis(
                decision,
                direction,
                readout,
                held,
                layer=layer,
                position=pos,
                neutral_verb=s.neutral_verb,
                progress=progress,
            )
    return study


def _concat(a: FlipCheck, b: FlipCheck | None) -> FlipCheck:
    if b is None:
        return a
    return FlipCheck(
        np.r_[a.execution_calls, b.execution_calls],
        np.r_[a.analysis_calls, b.analysis_calls],
        np.r_[a.execution_logit, b.execution_logit],
        np.r_[a.analysis_logit, b.analysis_logit],
    )


def _lens(
    model: LanguageModel,
    decision: ToolDecision,
    direction: ToolDirection,
    pairs: list[Any],
    position: int,
) -> list[dict[str, Any]]:
    """Per layer: the decision logit of the two mean streams read through the final norm and
    unembedding (the logit lens), and cos(μΔ, W_U[call_0] − W_U[prose_0])."""
    call0, prose0 = decision.first_tokens([pairs[0].execution])
    j = len(direction.positions_) + position
    ex = direction.mu_execution_[:, j].float()
    an = direction.mu_analysis_[:, j].float()
    le = unembed(model, ex).double().cpu()
    la = unembed(model, an).double().cpu()
    w = model.model.get_output_embeddings().weight.detach().double().cpu()
    u = w[call0[0]] - w[prose0[0]]
    rows = []
    for i, site in enumerate(direction.layers_):
        d = direction.mu_delta_[i, j]
        cos = float(d @ u) / (float(d.norm()) * float(u.norm())) if float(d.norm()) > 0 else 0.0
        rows.append(
            {
                "layer": i,
                "site": site,
                "lens_execution": float(le[i, call0[0]] - le[i, prose0[0]]),
                "lens_analysis": float(la[i, call0[0]] - la[i, prose0[0]]),
                "cos_unembedding": cos,
            }
        )
    return rows
