"""MARS: Modality-Agnostic Refusal Steering (see docs/methods/mars.md).

A textual refusal direction, fitted on the language backbone from typed prompts only, steers a
vision-language model: the modality offset estimated from neutral images is removed before an
input is placed between the safe and unsafe centroids, the strength adapts to that position
inside a trust region, a gate leaves safe-side inputs untouched, and the edit is added once at
the last prompt position in the prefill (the first generated token). The experiment behind
``trustlab run mars`` lives in :mod:`trustlab.methods.mars.experiment` (not imported here).
"""

from trustlab.methods.mars.steering import (
    ABLATIONS,
    MARS,
    MarsSteering,
    ablations,
    neutral_prompts,
    prompt_has_images,
    refusal_probability,
)

__all__ = [
    "ABLATIONS",
    "MARS",
    "MarsSteering",
    "ablations",
    "neutral_prompts",
    "prompt_has_images",
    "refusal_probability",
]
