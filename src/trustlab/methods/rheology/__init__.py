"""LLM Rheology: Fisher–Rao manifold sensitivity along the refusal direction, coupling cosines
and causal injection with matched-norm placebo controls (see docs/methods/rheology.md).

The steering tools it stands on (the refusal direction, placebos, the harm gate, per-row
additions and the early-stopping decoder) live in :mod:`trustlab.lm`, its prompt splits in
:mod:`trustlab.datasets.prompt_sets`; import them from there
(``lm.RefusalDirection``, ``lm.placebo_directions``, ``lm.HarmGate``, ``lm.greedy_rows``,
``datasets.prompt_sets.organism_steering_splits``...).
"""

from trustlab.methods.rheology.audit import ModelAudit, audit_model
from trustlab.methods.rheology.sensitivity import (
    SensitivityCurve,
    fisher_metric_speed,
    fisher_speed,
    ratio_ci,
    sensitivity_curve,
    typical_norm,
)
from trustlab.methods.rheology.settings import AuditSettings

__all__ = [
    "AuditSettings",
    "ModelAudit",
    "SensitivityCurve",
    "audit_model",
    "fisher_metric_speed",
    "fisher_speed",
    "ratio_ci",
    "sensitivity_curve",
    "typical_norm",
]
