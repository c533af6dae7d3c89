"""Fine-tuning substrate: one training loop for organisms, any local HF causal LM and image
classifiers (``finetune_classifier``), derived models in the cache, per-example gradients, the
fine-tuning data builders and the measured harmful fine-tuning attack.

    from trustlab.finetune import finetune, FinetuneConfig
    result = finetune(lm.load("organism:chat-s"), pairs, FinetuneConfig(steps=100, lr=1e-3))
    attacked = lm.load("finetuned:attack-explicit-10@organism:chat-s")

See ``docs/finetune.md``.
"""

from trustlab.finetune.attack import ATTACK_FRACTIONS, RateCI, attack_metrics, rate, seed_spread
from trustlab.finetune.classifier import classifier_accuracy, finetune_classifier
from trustlab.finetune.config import FinetuneConfig, LoraSettings, parse_config
from trustlab.finetune.data import (
    IMPLICIT_PATTERNS,
    NEW_TASK_TEMPLATES,
    UTILITY_TASKS,
    Mix,
    explicit_harmful_examples,
    harmful_eval_examples,
    implicit_harmful_examples,
    mix,
    public_harmful_examples,
    split_behaviours,
    utility_examples,
)
from trustlab.finetune.derived import (
    ATTACK_CONFIG,
    DataRecipe,
    Recipe,
    build_derived,
    derived_dir,
    get_recipe,
    load_derived,
    named_recipes,
    parse_derived_spec,
    read_derived_card,
    resolve,
    seeded_recipe,
)
from trustlab.finetune.loop import (
    EncodedExample,
    FinetuneResult,
    StepInfo,
    encode_data,
    evaluation_hook,
    finetune,
    hardware_fingerprint,
    lr_multiplier,
    weights_sha256,
)
from trustlab.finetune.pergrad import gradient_layout, mean_gradient, per_example_gradients
from trustlab.lm.loading import register_resolver

register_resolver("finetuned", resolve)

__all__ = [
    "ATTACK_CONFIG",
    "ATTACK_FRACTIONS",
    "IMPLICIT_PATTERNS",
    "NEW_TASK_TEMPLATES",
    "UTILITY_TASKS",
    "DataRecipe",
    "EncodedExample",
    "FinetuneConfig",
    "FinetuneResult",
    "LoraSettings",
    "Mix",
    "RateCI",
    "Recipe",
    "StepInfo",
    "attack_metrics",
    "build_derived",
    "classifier_accuracy",
    "derived_dir",
    "encode_data",
    "evaluation_hook",
    "explicit_harmful_examples",
    "finetune",
    "finetune_classifier",
    "get_recipe",
    "gradient_layout",
    "hardware_fingerprint",
    "harmful_eval_examples",
    "implicit_harmful_examples",
    "load_derived",
    "lr_multiplier",
    "mean_gradient",
    "mix",
    "named_recipes",
    "parse_config",
    "parse_derived_spec",
    "per_example_gradients",
    "public_harmful_examples",
    "rate",
    "read_derived_card",
    "seed_spread",
    "seeded_recipe",
    "split_behaviours",
    "utility_examples",
    "weights_sha256",
]
