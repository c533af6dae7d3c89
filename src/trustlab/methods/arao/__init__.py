"""ARAO: Adaptive Rhetorical Adversarial Optimization for harmful-content detectors.

    from trustlab.methods.arao import (StrategySpace, TemplateRewriter, ClaimCheck,
                                       ThompsonPlanner, RhetoricalAttack, attribute)
    space = StrategySpace()                               # ten signed rhetorical axes
    attack = RhetoricalAttack(detector, TemplateRewriter(space), ThompsonPlanner(space),
                              ClaimCheck(), threshold=0.5, budget=10)
    result = attack.run(flagged_texts, rng=0)             # per-item success, strategy, queries
    attribution = attribute(result, flagged_texts, detector, TemplateRewriter(space))

The experiment (``trustlab run arao``) lives in ``experiment.py`` and is not imported here.
"""

from trustlab.methods.arao.attack import (
    AttackResult,
    ItemResult,
    RandomSearch,
    RhetoricalAttack,
    ThompsonPlanner,
    WordNeighbours,
    WordSubstitution,
    calibrate_threshold,
    logit,
)
from trustlab.methods.arao.attribution import (
    Attribution,
    AxisSweep,
    PlantedAxisDetector,
    attribute,
    axis_sweep,
    failing_axes,
)
from trustlab.methods.arao.axes import AXES, Axis, StrategySpace, format_strategy
from trustlab.methods.arao.constraints import (
    ClaimCheck,
    ClaimVerdicts,
    ConsistencyJudge,
    char_similarity,
    fluency_ratio,
    levenshtein,
)
from trustlab.methods.arao.data import Splits, default_corpus, split
from trustlab.methods.arao.repair import (
    ALL_REPAIRS,
    AXIS_VARIANTS,
    REPAIRS,
    Augmentation,
    RepairOutcome,
    augment,
    evaluate_repairs,
    repair,
)
from trustlab.methods.arao.rewriters import EUPHEMISMS, PHRASES, LLMRewriter, TemplateRewriter

__all__ = [
    "ALL_REPAIRS",
    "AXES",
    "AXIS_VARIANTS",
    "EUPHEMISMS",
    "PHRASES",
    "REPAIRS",
    "AttackResult",
    "Attribution",
    "Augmentation",
    "Axis",
    "AxisSweep",
    "ClaimCheck",
    "ClaimVerdicts",
    "ConsistencyJudge",
    "ItemResult",
    "LLMRewriter",
    "PlantedAxisDetector",
    "RandomSearch",
    "RepairOutcome",
    "RhetoricalAttack",
    "Splits",
    "StrategySpace",
    "TemplateRewriter",
    "ThompsonPlanner",
    "WordNeighbours",
    "WordSubstitution",
    "attribute",
    "augment",
    "axis_sweep",
    "calibrate_threshold",
    "char_similarity",
    "default_corpus",
    "evaluate_repairs",
    "failing_axes",
    "fluency_ratio",
    "format_strategy",
    "levenshtein",
    "logit",
    "repair",
    "split",
]
