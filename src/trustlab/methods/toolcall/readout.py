"""The read-out: which components carry the decision into the first output token.

* :func:`component_attribution` — direct logit attribution of the first-token decision logit
  (``logit[call_0] − logit[prose_0]``) on both variants of each pair, split over the
  embeddings, every attention and MLP output and every head (TransformerLens's convention:
  the final norm's scale frozen at its value on the real stream; see :mod:`trustlab.lm`). The
  block rows plus the correction sum to the model's logit difference on every prompt (checked:
  :meth:`ComponentAttribution.identity_error`); the head rows split their block's attention
  row (heads plus the output projection's bias).
* :func:`patch_components` — activation patching along the pair: each component's activation
  at the last position copied from the execution variant into the analysis variant
  (*denoising*: how much of the gap it restores) and the reverse (*noising*: how much it
  removes), per pair, with percentile-bootstrap intervals over pairs.
* :func:`transmission` — μΔ injected into analysis prompts, attributed: how much each later
  component's direct attribution changes, and the injected vector's own direct path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.errors import InputError
from trustlab.lm import (
    Intervention,
    LanguageModel,
    LogitAttribution,
    PatchResult,
    direct_logit_attribution,
    head_component,
    intervene,
    patch_activations,
)
from trustlab.methods.toolcall.causal import check_interventions
from trustlab.methods.toolcall.decision import ToolDecision
from trustlab.methods.toolcall.pairs import check_pairs
from trustlab.stats import bootstrap_ci

__all__ = [
    "ComponentAttribution",
    "ComponentPatching",
    "component_attribution",
    "component_kind",
    "patch_components",
    "transmission",
]


def component_kind(name: str) -> tuple[str, int | None, int | None]:
    """``(kind, layer, head)`` of a component name (``embed``, ``blocks.3.attn_out``,
    ``blocks.3.head.1``, ``blocks.3.head_bias``, ``blocks.3.resid_pre``, ``correction`` …)."""
    parts = name.split(".")
    if parts[0] != "blocks":
        return name, None, None
    layer = int(parts[1])
    if parts[2] == "head":
        return "head", layer, int(parts[3])
    return parts[2], layer, None


def _rows_of(att: LogitAttribution) -> tuple[list[str], np.ndarray]:
    """Component names and values [N, C]: block rows, correction, then heads and head bias."""
    names = [*att.components, "correction"]
    cols = [att.values.numpy(), att.correction.numpy()[:, None]]
    if att.heads is not None and att.head_bias is not None:
        n, n_layers, n_heads = att.heads.shape
        names += [head_component(i, h) for i in range(n_layers) for h in range(n_heads)]
        cols.append(att.heads.reshape(n, -1).numpy())
        names += [f"blocks.{i}.head_bias" for i in range(n_layers)]
        cols.append(att.head_bias.numpy())
    return names, np.concatenate(cols, 1)


@dataclass(frozen=True)
class ComponentAttribution:
    """DLA of the decision logit on both variants of ``n`` pairs.

    ``components``: names; ``in_sum`` [C]: True for the rows whose sum (with the correction)
    is the logit difference (embed, every attn_out and mlp_out, correction); head rows split
    attn_out. ``execution``/``analysis`` [N, C]; ``logit_execution``/``logit_analysis`` [N]:
    the model's own logit differences (from its forward pass).
    """

    components: list[str]
    in_sum: np.ndarray
    execution: np.ndarray
    analysis: np.ndarray
    logit_execution: np.ndarray
    logit_analysis: np.ndarray

    @property
    def difference(self) -> np.ndarray:
        """Per pair, execution minus analysis attribution [N, C]."""
        return self.execution - self.analysis

    def identity_error(self) -> float:
        """max over prompts of |sum of block rows + correction − logit difference|."""
        e = np.abs(self.execution[:, self.in_sum].sum(1) - self.logit_execution)
        a = np.abs(self.analysis[:, self.in_sum].sum(1) - self.logit_analysis)
        return float(max(e.max(), a.max()))

    def head_error(self) -> float:
        """max |sum of a block's heads and head bias − its attn_out row| (0 without heads)."""
        idx = {c: i for i, c in enumerate(self.components)}
        worst = 0.0
        for c in self.components:
            kind, layer, _ = component_kind(c)
            if kind != "attn_out":
                continue
            parts = [
                i
                for n, i in idx.items()
                if component_kind(n)[1] == layer and component_kind(n)[0] in ("head", "head_bias")
            ]
            if not parts:
                continue
            for values in (self.execution, self.analysis):
                err = np.abs(values[:, parts].sum(1) - values[:, idx[c]]).max()
                worst = max(worst, float(err))
        return worst

    def table(
        self, rng: np.random.Generator | int | None = 0, n_resamples: int = 1000
    ) -> list[dict[str, Any]]:
        """One row per component: mean attribution on each variant, the mean difference with a
        percentile-bootstrap 95% interval over pairs, and its share of the mean logit gap."""
        gap = float((self.logit_execution - self.logit_analysis).mean())
        rows = []
        diff = self.difference
        for i, name in enumerate(self.components):
            kind, layer, head = component_kind(name)
            d = diff[:, i]
            if d.size >= 2 and float(d.std()) > 0:
                ci = bootstrap_ci(d, np.mean, n_resamples=n_resamples, rng=rng, vectorized=True)
                low, high = float(ci.low), float(ci.high)
            else:
                low = high = float(d.mean())
            rows.append(
                {
                    "component": name,
                    "kind": kind,
                    "layer": layer,
                    "head": head,
                    "in_sum": bool(self.in_sum[i]),
                    "execution": float(self.execution[:, i].mean()),
                    "analysis": float(self.analysis[:, i].mean()),
                    "difference": float(d.mean()),
                    "difference_low": low,
                    "difference_high": high,
                    "share_of_gap": float(d.mean()) / gap if gap != 0 else float("nan"),
                }
            )
        return rows


def _check(decision: Any, pairs: Any, where: str) -> list[Any]:
    if not isinstance(decision, ToolDecision):
        raise InputError(f"The 'decision' parameter of {where} must be a ToolDecision.")
    return check_pairs(pairs, "pairs", where)


def _attribute(
    decision: ToolDecision, prompts: list[Any], progress: Callable[..., Any] | None
) -> LogitAttribution:
    call0, prose0 = decision.first_tokens(prompts)
    return direct_logit_attribution(
        decision.model, prompts, call0, prose0, batch_size=decision.batch_size, progress=progress
    )


def component_attribution(
    decision: ToolDecision, pairs: Sequence[Any], *, progress: Callable[..., Any] | None = None
) -> ComponentAttribution:
    """DLA of the first-token decision logit on the execution and analysis variants."""
    pairs = _check(decision, pairs, "component_attribution")
    ex = _attribute(decision, [p.execution for p in pairs], progress)
    an = _attribute(decision, [p.analysis for p in pairs], progress)
    names, ve = _rows_of(ex)
    _, va = _rows_of(an)
    n_sum = len(ex.components) + 1
    in_sum = np.zeros(len(names), dtype=bool)
    in_sum[:n_sum] = True
    return ComponentAttribution(names, in_sum, ve, va, ex.logit_diff.numpy(), an.logit_diff.numpy())


def default_components(model: LanguageModel) -> list[str]:
    """Every ``resid_pre``, ``attn_out``, ``mlp_out`` and head of the model, layer by layer."""
    out = []
    for i in range(model.n_layers):
        out += [f"blocks.{i}.resid_pre", f"blocks.{i}.attn_out", f"blocks.{i}.mlp_out"]
        if model.adapter.has_heads and model.adapter.n_heads:
            out += [head_component(i, h) for h in range(model.adapter.n_heads)]
    return out


@dataclass(frozen=True)
class ComponentPatching:
    """Patching results in both directions (see :func:`patch_components`)."""

    components: list[str]
    denoise: PatchResult
    noise: PatchResult

    def rows(
        self, rng: np.random.Generator | int | None = 0, n_resamples: int = 1000
    ) -> list[dict[str, Any]]:
        """Per component: the share of the logit gap restored when patching execution into
        analysis (``denoise``) and removed when patching analysis into execution (``noise``),
        as ratios of means with percentile-bootstrap 95% intervals over pairs."""
        rows = []
        for k, name in enumerate(self.components):
            kind, layer, head = component_kind(name)
            row: dict[str, Any] = {"component": name, "kind": kind, "layer": layer, "head": head}
            for label, res in (("denoise", self.denoise), ("noise", self.noise)):
                moved = (res.patched[k] - res.clean).double().numpy()
                gap = (res.source - res.clean).double().numpy()
                est = float(moved.mean() / gap.mean()) if gap.mean() != 0 else float("nan")
                if moved.size >= 2 and np.isfinite(est):
                    ci = bootstrap_ci(
                        (moved, gap),
                        _ratio_of_means,
                        n_resamples=n_resamples,
                        rng=rng,
                        paired=True,
                        vectorized=True,
                    )
                    low, high = float(ci.low), float(ci.high)
                else:
                    low = high = est
                row[label] = est
                row[f"{label}_low"] = low
                row[f"{label}_high"] = high
            rows.append(row)
        return rows

    def effect(self, direction: str = "denoise") -> np.ndarray:
        res = self.denoise if direction == "denoise" else self.noise
        return res.mean_effect().double().numpy()


def _ratio_of_means(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return a.mean(axis) / b.mean(axis)


def patch_components(
    decision: ToolDecision,
    pairs: Sequence[Any],
    components: Sequence[str] | None = None,
    *,
    positions: str = "last",
    progress: Callable[..., Any] | None = None,
) -> ComponentPatching:
    """Activation patching along each pair, both ways, on the first-token decision logit.

    ``components``: sites or heads (``blocks.{i}.head.{h}``); default every ``resid_pre``,
    ``attn_out``, ``mlp_out`` and head. ``positions``: ``"last"`` (the token that predicts the
    first output token) or ``"all"`` (every token; the variants must have equal token counts).
    """
    pairs = _check(decision, pairs, "patch_components")
    if positions not in ("last", "all"):
        raise InputError(f"'positions' must be 'last' or 'all'. Got {positions!r}.")
    if components is None:
        comps = default_components(decision.model)
    elif (
        isinstance(components, str)
        or not isinstance(components, Sequence)
        or not components
        or not all(isinstance(c, str) for c in components)
    ):
        raise InputError(
            "The 'components' parameter of patch_components must be a non-empty list of site "
            f"or head names. Got {components!r:.60}."
        )
    else:
        comps = list(components)
    ex = [p.execution for p in pairs]
    an = [p.analysis for p in pairs]
    call0, prose0 = decision.first_tokens(an)
    size = max(decision.batch_size * 4, len(comps))
    denoise = patch_activations(
        decision.model,
        ex,
        an,
        comps,
        (call0, prose0),
        positions=positions,
        batch_size=size,
        progress=progress,
    )
    call0e, prose0e = decision.first_tokens(ex)
    noise = patch_activations(
        decision.model,
        an,
        ex,
        comps,
        (call0e, prose0e),
        positions=positions,
        batch_size=size,
        progress=progress,
    )
    return ComponentPatching(comps, denoise, noise)


def transmission(
    decision: ToolDecision,
    pairs: Sequence[Any],
    interventions: Sequence[Intervention],
    *,
    progress: Callable[..., Any] | None = None,
) -> list[dict[str, Any]]:
    """How the components carry an injected μΔ to the first output token.

    DLA of the decision logit on the analysis variants, without and with ``interventions``
    (μΔ added at one layer). Rows: every component's mean attribution before and after and the
    change; ``injected (direct path)`` — the injected vector's own share through the final norm
    and the unembedding (the steered logit difference minus every component and the
    correction); and ``total`` — the change of the logit difference, which the changes plus the
    direct path add up to.
    """
    pairs = _check(decision, pairs, "transmission")
    interventions = check_interventions(interventions, "interventions", "transmission")
    prompts = [p.analysis for p in pairs]
    clean = _attribute(decision, prompts, progress)
    with intervene(decision.model, *interventions):
        steered = _attribute(decision, prompts, progress)
    names, before = _rows_of(clean)
    _, after = _rows_of(steered)
    direct = (steered.logit_diff - steered.total()).numpy()
    rows = []
    for i, name in enumerate(names):
        kind, layer, head = component_kind(name)
        rows.append(
            {
                "component": name,
                "kind": kind,
                "layer": layer,
                "head": head,
                "in_sum": i <= len(clean.components),
                "before": float(before[:, i].mean()),
                "after": float(after[:, i].mean()),
                "change": float((after[:, i] - before[:, i]).mean()),
            }
        )
    rows.append(
        {
            "component": "injected (direct path)",
            "kind": "injected",
            "layer": None,
            "head": None,
            "in_sum": True,
            "before": 0.0,
            "after": float(direct.mean()),
            "change": float(direct.mean()),
        }
    )
    total = (steered.logit_diff - clean.logit_diff).numpy()
    rows.append(
        {
            "component": "total (logit difference)",
            "kind": "total",
            "layer": None,
            "head": None,
            "in_sum": False,
            "before": float(clean.logit_diff.mean()),
            "after": float(steered.logit_diff.mean()),
            "change": float(total.mean()),
        }
    )
    return rows
