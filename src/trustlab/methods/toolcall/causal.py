"""Causal tests of μΔ: necessity (remove it, calls stop) and sufficiency (add it, calls start).

* **Necessity by directional ablation** — ``h ← h − (h·r) r`` with ``r`` the unit μΔ, on the
  embeddings and every attention and MLP output at every position (Arditi et al., 2024), on
  held-out execution prompts.
* **Necessity by clamping** — set the projection on ``r`` to the *analysis mean* of each layer
  at the position μΔ was read (the affine form of Marshall et al., 2024): zero is not the
  neutral value in these models (measured on chat-s's refusal direction, docs/organisms.md), so
  removing the projection is not the same as making a prompt look like an analysis request.
* **Sufficiency by addition** — add ``alpha · μΔ`` to the residual stream entering the chosen
  layer at the chosen position of held-out analysis prompts.

Each test has matched controls, one per random direction (isotropic, orthogonal to μΔ): the
same ablation of a random direction, the same clamp of a random direction to its own analysis
mean, and the addition of a random vector with ‖alpha · μΔ‖. The test's flip rate, each
control's flip rate and the worst control (the one that flips most) are reported with
Clopper–Pearson intervals, and μΔ against the worst control as a paired difference with
Newcombe's interval. A flip is a changed tool-call decision of the greedy reply
(:meth:`ToolDecision.calls`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab.core.errors import InputError
from trustlab.core.validation import (
    as_float_array,
    check_choice,
    check_open_unit,
    check_scalar,
)
from trustlab.lm import (
    AblateDirection,
    AddVector,
    ClampProjection,
    Intervention,
    LanguageModel,
    Positions,
    Rate,
    binomial_rate,
    intervene,
    parse_tool_call,
    placebo_directions,
)
from trustlab.methods.toolcall.decision import ToolDecision
from trustlab.methods.toolcall.direction import ToolDirection, layer_names
from trustlab.methods.toolcall.pairs import check_pairs
from trustlab.stats import DifferenceInterval, bootstrap_ci, paired_difference

__all__ = [
    "CandidateChoice",
    "CausalTest",
    "ablation",
    "addition",
    "causal_test",
    "choose_candidate",
    "clamp",
    "induced_call_quality",
    "random_directions",
]

Interventions = Sequence[Intervention]


# ------------------------------------------------------------------------- interventions
def _vector(value: Any, name: str, where: str, d: int | None = None) -> torch.Tensor:
    """A finite, non-zero 1-D vector (of length ``d`` when given) as float32."""
    arr = as_float_array(value, name, where, ndim=1)
    if d is not None and arr.shape[0] != d:
        raise InputError(
            f"The '{name}' parameter of {where} must have length d_model = {d}. Got {arr.shape[0]}."
        )
    if not np.any(arr):
        raise InputError(f"The '{name}' parameter of {where} must not be the zero vector.")
    return torch.from_numpy(arr).float()


def _model(model: Any, where: str) -> LanguageModel:
    if not isinstance(model, LanguageModel):
        raise InputError(
            f"The 'model' parameter of {where} must be a trustlab.lm.LanguageModel. "
            f"Got {type(model).__name__}."
        )
    return model


def _position(position: Any, where: str) -> int:
    return check_scalar(position, "position", where, kind=int, hi=-1)


def ablation(direction: torch.Tensor) -> list[Intervention]:
    """Directional ablation of ``direction`` from every write into the stream, all positions."""
    return [AblateDirection(_vector(direction, "direction", "ablation"))]


def clamp(
    model: LanguageModel, direction: torch.Tensor, values: Sequence[float], position: int = -1
) -> list[Intervention]:
    """Clamp the projection on unit ``direction`` to ``values[i]`` at layer ``i`` (every
    ``resid_pre`` and the final ``resid_post``) at ``position`` (an offset from the end)."""
    where = "clamp"
    sites = layer_names(_model(model, where))
    r = _vector(direction, "direction", where, model.d_model)
    vals = as_float_array(values, "values", where, ndim=1)
    if len(vals) != len(sites):
        raise InputError(
            f"The 'values' parameter of {where} must give one value per layer ({len(sites)}). "
            f"Got {len(vals)}."
        )
    pos = Positions.at([_position(position, where)])
    return [
        ClampProjection(r, float(v), s, positions=pos) for s, v in zip(sites, vals, strict=True)
    ]


def addition(
    model: LanguageModel, vector: torch.Tensor, layer: int, position: int = -1, alpha: float = 1.0
) -> list[Intervention]:
    """Add ``alpha · vector`` to the stream entering block ``layer`` (``resid_pre``; ``layer =
    n_layers`` is the final ``resid_post``) at ``position`` (an offset from the end)."""
    where = "addition"
    site = layer_names(_model(model, where))[
        check_scalar(layer, "layer", where, kind=int, lo=0, hi=model.n_layers)
    ]
    return [
        AddVector(
            _vector(vector, "vector", where, model.d_model),
            site,
            alpha=check_scalar(alpha, "alpha", where),
            positions=Positions.at([_position(position, where)]),
        )
    ]


def random_directions(direction: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` random unit directions [n, d] orthogonal to ``direction`` (the controls)."""
    where = "random_directions"
    d = _vector(direction, "direction", where)
    n = check_scalar(n, "n", where, kind=int, lo=1)
    if not isinstance(generator, torch.Generator):
        raise InputError(
            f"The 'generator' parameter of {where} must be a torch.Generator. "
            f"Got {type(generator).__name__}."
        )
    return placebo_directions(n, int(d.shape[0]), generator, exclude=d)


# ------------------------------------------------------------------------- one test
@dataclass(frozen=True)
class CausalTest:
    """One causal test on ``n`` prompts, with its controls (see the module doc).

    ``calls_before`` [n], ``calls_after`` [n]: the decision without and with the intervention;
    ``logit_before``/``logit_after`` [n]: the first-token decision logit difference;
    ``control_calls`` / ``control_logit`` [K, n]: the same under each control.
    ``control_band``: the controls pass when the worst one's Clopper–Pearson upper bound on
    its flip rate is at most this.
    """

    name: str
    population: str
    calls_before: np.ndarray
    calls_after: np.ndarray
    logit_before: np.ndarray
    logit_after: np.ndarray
    control_calls: np.ndarray
    control_logit: np.ndarray
    control_band: float = 0.1
    alpha: float = 0.05

    @property
    def n(self) -> int:
        return int(self.calls_before.size)

    @property
    def flips(self) -> np.ndarray:
        return self.calls_after != self.calls_before

    @property
    def control_flips(self) -> np.ndarray:
        return self.control_calls != self.calls_before[None, :]

    def flip_rate(self) -> Rate:
        return binomial_rate(self.flips.tolist(), self.alpha)

    def control_rates(self) -> list[Rate]:
        return [binomial_rate(f.tolist(), self.alpha) for f in self.control_flips]

    def worst_control(self) -> int:
        """The control that flips most (ties: the larger mean |logit shift|); -1 if none."""
        if self.control_flips.shape[0] == 0:
            return -1
        shift = np.abs(self.control_logit - self.logit_before[None, :]).mean(1)
        keys = [(int(f.sum()), float(s)) for f, s in zip(self.control_flips, shift, strict=True)]
        return int(max(range(len(keys)), key=lambda k: keys[k]))

    def worst_control_rate(self) -> Rate | None:
        k = self.worst_control()
        return None if k < 0 else self.control_rates()[k]

    def difference(self) -> DifferenceInterval | None:
        """μΔ's flip rate minus the worst control's, paired over prompts (Newcombe)."""
        k = self.worst_control()
        if k < 0:
            return None
        return paired_difference(self.flips, self.control_flips[k], self.alpha)

    def controls_within_band(self) -> bool:
        worst = self.worst_control_rate()
        return worst is None or worst.upper <= self.control_band + 1e-12

    def logit_shift(self, rng: np.random.Generator | int | None = 0) -> dict[str, float]:
        """Mean change of the decision logit with a percentile-bootstrap 95% interval."""
        d = self.logit_after - self.logit_before
        if d.size < 2:
            return {"mean": float(d.mean()), "low": float("nan"), "high": float("nan")}
        res = bootstrap_ci(d, np.mean, n_resamples=1000, rng=rng, vectorized=True)
        return {"mean": float(d.mean()), "low": float(res.low), "high": float(res.high)}

    def summary(self) -> dict[str, Any]:
        rate = self.flip_rate()
        worst = self.worst_control_rate()
        diff = self.difference()
        shift = self.logit_shift()
        out: dict[str, Any] = {
            "test": self.name,
            "prompts": self.population,
            "n": self.n,
            "flip_rate": rate.rate,
            "flip_low": rate.lower,
            "flip_high": rate.upper,
            "flips": rate.k,
            "logit_before": float(self.logit_before.mean()),
            "logit_after": float(self.logit_after.mean()),
            "logit_shift": shift["mean"],
            "logit_shift_low": shift["low"],
            "logit_shift_high": shift["high"],
            "n_controls": int(self.control_flips.shape[0]),
        }
        if worst is not None and diff is not None:
            k = self.worst_control()
            out.update(
                {
                    "worst_control": k,
                    "worst_control_flip_rate": worst.rate,
                    "worst_control_low": worst.lower,
                    "worst_control_high": worst.upper,
                    "worst_control_logit_shift": float(
                        (self.control_logit[k] - self.logit_before).mean()
                    ),
                    "minus_worst_control": diff.estimate,
                    "minus_worst_control_low": diff.lower,
                    "minus_worst_control_high": diff.upper,
                    "control_band": self.control_band,
                    "controls_within_band": self.controls_within_band(),
                }
            )
        return out

    def control_rows(self) -> list[dict[str, Any]]:
        rows = []
        worst = self.worst_control()
        for k, rate in enumerate(self.control_rates()):
            rows.append(
                {
                    "test": self.name,
                    "control": k,
                    "flip_rate": rate.rate,
                    "flip_low": rate.lower,
                    "flip_high": rate.upper,
                    "logit_shift": float((self.control_logit[k] - self.logit_before).mean()),
                    "worst": k == worst,
                }
            )
        return rows


def check_interventions(value: Any, name: str, where: str) -> list[Intervention]:
    if isinstance(value, Intervention):
        return [value]
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InputError(
            f"The '{name}' parameter of {where} must be a list of trustlab.lm interventions. "
            f"Got {type(value).__name__}."
        )
    for v in value:
        if not isinstance(v, Intervention):
            raise InputError(
                f"The '{name}' parameter of {where} must hold trustlab.lm interventions. Got "
                f"{type(v).__name__}."
            )
    return list(value)


def _decision(decision: Any, where: str) -> ToolDecision:
    if not isinstance(decision, ToolDecision):
        raise InputError(
            f"The 'decision' parameter of {where} must be a ToolDecision. "
            f"Got {type(decision).__name__}."
        )
    return decision


def _measure(
    decision: ToolDecision, prompts: list[Any], interventions: Interventions
) -> tuple[np.ndarray, np.ndarray]:
    with intervene(decision.model, *interventions):
        return decision.calls(prompts), decision.logit_diff(prompts)


def causal_test(
    decision: ToolDecision,
    prompts: Sequence[Any],
    intervention: Interventions,
    controls: Sequence[Interventions],
    *,
    name: str,
    population: str,
    calls_before: np.ndarray | None = None,
    logit_before: np.ndarray | None = None,
    control_band: float = 0.1,
    alpha: float = 0.05,
    progress: Callable[..., Any] | None = None,
) -> CausalTest:
    """Measure the decision on ``prompts`` without and with ``intervention`` and each control."""
    where = "causal_test"
    _decision(decision, where)
    if isinstance(prompts, str) or not isinstance(prompts, Sequence) or not prompts:
        raise InputError(f"The 'prompts' parameter of {where} must be a non-empty list.")
    intervention = check_interventions(intervention, "intervention", where)
    if isinstance(controls, str) or not isinstance(controls, Sequence):
        raise InputError(f"The 'controls' parameter of {where} must be a list of lists.")
    controls = [check_interventions(c, "controls", where) for c in controls]
    band = check_scalar(control_band, "control_band", where, lo=0.0, hi=1.0)
    alpha = check_open_unit(alpha, "alpha", where)
    prompts = list(prompts)
    if calls_before is None:
        calls_before = decision.calls(prompts)
    else:
        arr = np.asarray(calls_before)
        if arr.dtype != bool or arr.shape != (len(prompts),):
            raise InputError(
                f"The 'calls_before' parameter of {where} must be {len(prompts)} booleans. "
                f"Got an array of shape {arr.shape} and dtype {arr.dtype}."
            )
    if logit_before is None:
        logit_before = decision.logit_diff(prompts)
    else:
        logit_before = as_float_array(logit_before, "logit_before", where, ndim=1)
        if logit_before.shape != (len(prompts),):
            raise InputError(
                f"The 'logit_before' parameter of {where} must have {len(prompts)} values. "
                f"Got {logit_before.shape[0]}."
            )
    calls_after, logit_after = _measure(decision, prompts, intervention)
    c_calls, c_logit = [], []
    items: Any = list(controls)
    if progress is not None:
        items = progress(items, description=f"{name} controls", total=len(items))
    for control in items:
        cc, cl = _measure(decision, prompts, control)
        c_calls.append(cc)
        c_logit.append(cl)
    n = len(prompts)
    return CausalTest(
        name,
        population,
        np.asarray(calls_before, dtype=bool),
        calls_after,
        np.asarray(logit_before, dtype=float),
        logit_after,
        np.array(c_calls, dtype=bool).reshape(len(c_calls), n),
        np.array(c_logit, dtype=float).reshape(len(c_logit), n),
        band,
        alpha,
    )


# ------------------------------------------------------------------------- layer choice
@dataclass(frozen=True)
class CandidateChoice:
    """The (layer, position) the causal tests use, chosen on selection pairs (never the
    held-out ones): per candidate the share of analysis prompts whose decision logit turns
    positive under ``alpha · μΔ`` (``add_flips``), the share of execution prompts whose logit
    turns negative under directional ablation (``ablate_flips``), and the score
    ``min(add_flips, ablate_flips)``; ties go to the larger mean logit shift, then the earlier
    layer."""

    layer: int
    position: int
    rows: list[dict[str, Any]]


def choose_candidate(
    decision: ToolDecision,
    direction: ToolDirection,
    pairs: Sequence[Any],
    *,
    alpha: float = 1.0,
    max_layer_fraction: float = 0.8,
    progress: Callable[..., Any] | None = None,
) -> CandidateChoice:
    """Pick the μΔ candidate for the causal tests on ``pairs`` (a slice of the analysis pairs)."""
    where = "choose_candidate"
    _decision(decision, where)
    if not isinstance(direction, ToolDirection):
        raise InputError(f"The 'direction' parameter of {where} must be a ToolDirection.")
    pairs = check_pairs(pairs, "pairs", where)
    alpha = check_scalar(alpha, "alpha", where, lo=0.0, closed="neither")
    candidates = direction.candidates(max_layer_fraction=max_layer_fraction)
    if not candidates:
        raise InputError("μΔ is zero at every candidate layer and position; nothing to test.")
    ex = [p.execution for p in pairs]
    an = [p.analysis for p in pairs]
    base_e = decision.logit_diff(ex)
    base_a = decision.logit_diff(an)
    gap = max(float(base_e.mean() - base_a.mean()), 1e-9)
    rows = []
    items: Any = candidates
    if progress is not None:
        items = progress(candidates, description="layer choice", total=len(candidates))
    for layer, pos in items:
        with intervene(
            decision.model,
            *addition(decision.model, direction.vector(layer, pos), layer, pos, alpha),
        ):
            added = decision.logit_diff(an)
        with intervene(decision.model, *ablation(direction.unit(layer, pos))):
            ablated = decision.logit_diff(ex)
        add_flips = float(((base_a <= 0) & (added > 0)).sum() / max(1, (base_a <= 0).sum()))
        abl_flips = float(((base_e > 0) & (ablated <= 0)).sum() / max(1, (base_e > 0).sum()))
        shift = 0.5 * (float((added - base_a).mean()) + float((base_e - ablated).mean())) / gap
        rows.append(
            {
                "layer": layer,
                "site": direction.layers_[layer],
                "position": pos,
                "mu_norm": float(direction.vector(layer, pos).norm()),
                "add_flips": add_flips,
                "ablate_flips": abl_flips,
                "score": min(add_flips, abl_flips),
                "mean_shift_over_gap": shift,
            }
        )
    best = max(rows, key=lambda r: (r["score"], r["mean_shift_over_gap"], -r["layer"]))
    for r in rows:
        r["chosen"] = r is best
    return CandidateChoice(int(best["layer"]), int(best["position"]), rows)


# ------------------------------------------------------------------------- induced calls
def induced_call_quality(
    decision: ToolDecision,
    pairs: Sequence[Any],
    interventions: Interventions,
    *,
    max_new_tokens: int = 64,
    languages: dict[str, str] | None = None,
    alpha: float = 0.05,
    variant: str = "analysis",
) -> dict[str, Any]:
    """Under ``interventions``, generate full replies to the ``variant`` prompts (analysis by
    default; ``execution`` with no intervention is the model's own calls, the reference) and
    check the calls: ``valid`` (the payload parses with ``name`` and ``arguments``) and, where a pair
    records its language and task, ``arguments_match`` (the call's ``language`` and ``task``
    are the request's). Rates over the replies that call, with Clopper–Pearson intervals."""
    where = "induced_call_quality"
    _decision(decision, where)
    pairs = check_pairs(pairs, "pairs", where)
    interventions = check_interventions(interventions, "interventions", where)
    max_new_tokens = check_scalar(max_new_tokens, "max_new_tokens", where, kind=int, lo=1)
    alpha = check_open_unit(alpha, "alpha", where)
    check_choice(variant, "variant", ("analysis", "execution"), where)
    prompts = [getattr(p, variant) for p in pairs]
    with intervene(decision.model, *interventions):
        replies = decision.replies(prompts, max_new_tokens=max_new_tokens)
    opener = decision.fmt.call.strip()
    called = [r.lstrip().startswith(opener) for r in replies]
    payloads = [parse_tool_call(r) if c else None for r, c in zip(replies, called, strict=True)]
    valid = [p is not None for p, c in zip(payloads, called, strict=True) if c]
    match = []
    langs = languages or {}
    for pair, payload, c in zip(pairs, payloads, called, strict=True):
        if not c or not pair.language or not pair.task:
            continue
        args = payload.get("arguments") if isinstance(payload, dict) else None
        ok = (
            isinstance(args, dict)
            and str(args.get("language", "")).lower()
            == langs.get(pair.language, pair.language).lower()
            and str(args.get("task", "")).strip() == pair.task
        )
        match.append(bool(ok))
    out: dict[str, Any] = {"replies": len(replies), "calls": int(sum(called))}
    for key, flags in (("valid", valid), ("arguments_match", match)):
        if flags:
            r = binomial_rate(flags, alpha)
            out.update(
                {key: r.rate, f"{key}_low": r.lower, f"{key}_high": r.upper, f"{key}_n": r.n}
            )
        else:
            out.update({key: None, f"{key}_low": None, f"{key}_high": None, f"{key}_n": 0})
    return out
