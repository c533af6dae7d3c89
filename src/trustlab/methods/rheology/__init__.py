"""LLM Rheology: Fisher–Rao manifold sensitivity along the refusal direction, coupling cosines
and causal injection with matched-norm placebo controls (see docs/methods/rheology.md).

The steering tools it stands on (the refusal direction, placebos, the harm gate, per-row
additions and the early-stopping decoder) live in :mod:`trustlab.lm`, its prompt splits in
:mod:`trustlab.datasets.prompt_sets`; they are re-exported here under rheology's names.
"""

from trustlab.datasets.prompt_sets import SteeringSplits as PromptSets
from trustlab.datasets.prompt_sets import organism_steering_splits as organism_prompt_sets
from trustlab.datasets.prompt_sets import public_steering_splits as public_prompt_sets
from trustlab.lm.decoding import exact_match_settled, greedy_rows, refusal_settled
from trustlab.lm.steering import (
    HarmGate,
    RefusalDirection,
    layer_candidates,
    layer_cosines,
    placebo_directions,
    row_additions,
)
from trustlab.methods.rheology.audit import AuditSettings, ModelAudit, audit_model
from trustlab.methods.rheology.sensitivity import (
    SensitivityCurve,
    fisher_metric_speed,
    fisher_speed,
    ratio_ci,
    sensitivity_curve,
    typical_norm,
)

__all__ = [
    "AuditSettings",
    "HarmGate",
    "ModelAudit",
    "PromptSets",
    "RefusalDirection",
    "SensitivityCurve",
    "audit_model",
    "exact_match_settled",
    "fisher_metric_speed",
    "fisher_speed",
    "greedy_rows",
    "layer_candidates",
    "layer_cosines",
    "organism_prompt_sets",
    "placebo_directions",
    "public_prompt_sets",
    "ratio_ci",
    "refusal_settled",
    "row_additions",
    "sensitivity_curve",
    "typical_norm",
]
