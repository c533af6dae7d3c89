"""GradShield: filtering harmful fine-tuning data by its Finetuning Implicit Harmfulness Score
(FIHS) with an adaptive threshold, and the baselines it is measured against
(see docs/methods/gradshield.md).

The fine-tuning loop, per-example gradients and the data builders it stands on live in
:mod:`trustlab.finetune`; the evaluation loop in :mod:`trustlab.lm`.
"""

from trustlab.methods.gradshield.baselines import (
    EmbeddingScorer,
    GradSafeScorer,
    ModerationScorer,
    example_text,
    random_removal,
)
from trustlab.methods.gradshield.fihs import FIHS, fihs_from_gradients
from trustlab.methods.gradshield.mixes import build_mix, filter_metrics
from trustlab.methods.gradshield.references import (
    ReferenceSets,
    organism_references,
    public_references,
)
from trustlab.methods.gradshield.shield import FilterResult, GradShield
from trustlab.methods.gradshield.slices import ParameterSlices
from trustlab.methods.gradshield.thresholds import (
    THRESHOLD_RULES,
    ConformalThreshold,
    FixedThreshold,
    MixtureThreshold,
    OtsuThreshold,
    SearchThreshold,
    make_threshold,
)

__all__ = [
    "FIHS",
    "THRESHOLD_RULES",
    "ConformalThreshold",
    "EmbeddingScorer",
    "FilterResult",
    "FixedThreshold",
    "GradSafeScorer",
    "GradShield",
    "MixtureThreshold",
    "ModerationScorer",
    "OtsuThreshold",
    "ParameterSlices",
    "ReferenceSets",
    "SearchThreshold",
    "build_mix",
    "example_text",
    "fihs_from_gradients",
    "filter_metrics",
    "make_threshold",
    "organism_references",
    "public_references",
    "random_removal",
]
