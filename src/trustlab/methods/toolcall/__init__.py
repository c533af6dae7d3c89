"""toolcall: the tool-calling decision as a single vector μΔ from minimal contrastive pairs.

Pairs of agentic prompts that differ by one request verb (execution vs analysis) flip whether
a model calls a tool; the difference in means of the residual stream between the two variants,
μΔ, is tested for necessity (ablate or clamp it: calls stop) and sufficiency (add it: calls
start) against matched-norm random controls, and the components that read it out into the
first output token are found by direct logit attribution and activation patching (see
docs/methods/toolcall.md).
"""

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
from trustlab.methods.toolcall.decision import DecisionFormat, FlipCheck, ToolDecision, check_flips
from trustlab.methods.toolcall.direction import SeparationSweep, ToolDirection, layer_names
from trustlab.methods.toolcall.pairs import (
    ANALYSIS_VERBS,
    EXECUTION_VERBS,
    NATURAL_SCAFFOLD,
    ContrastivePair,
    PairSet,
    natural_pairs,
    organism_pairs,
    pairs_from_prompt,
    read_pairs,
)
from trustlab.methods.toolcall.readout import (
    ComponentAttribution,
    ComponentPatching,
    component_attribution,
    patch_components,
    transmission,
)
from trustlab.methods.toolcall.scaffold import ScaffoldAnalysis, scaffold_analysis
from trustlab.methods.toolcall.study import ModelStudy, StudySettings, study_model

__all__ = [
    "ANALYSIS_VERBS",
    "EXECUTION_VERBS",
    "NATURAL_SCAFFOLD",
    "CandidateChoice",
    "CausalTest",
    "ComponentAttribution",
    "ComponentPatching",
    "ContrastivePair",
    "DecisionFormat",
    "FlipCheck",
    "ModelStudy",
    "PairSet",
    "ScaffoldAnalysis",
    "SeparationSweep",
    "StudySettings",
    "ToolDecision",
    "ToolDirection",
    "ablation",
    "addition",
    "causal_test",
    "check_flips",
    "choose_candidate",
    "clamp",
    "component_attribution",
    "induced_call_quality",
    "layer_names",
    "natural_pairs",
    "organism_pairs",
    "pairs_from_prompt",
    "patch_components",
    "random_directions",
    "read_pairs",
    "scaffold_analysis",
    "study_model",
    "transmission",
]
