"""Fine-tuning substrate: one training loop for organisms and any local HF causal LM.

    from trustlab.finetune import finetune, FinetuneConfig
    result = finetune(lm.load("organism:chat-s"), pairs, FinetuneConfig(steps=100, lr=1e-3))

See ``docs/finetune.md``.
"""

from trustlab.finetune.config import FinetuneConfig, LoraSettings, parse_config
from trustlab.finetune.loop import (
    EncodedExample,
    FinetuneResult,
    StepInfo,
    encode_data,
    finetune,
    hardware_fingerprint,
    lr_multiplier,
    weights_sha256,
)

__all__ = [
    "EncodedExample",
    "FinetuneConfig",
    "FinetuneResult",
    "LoraSettings",
    "StepInfo",
    "encode_data",
    "finetune",
    "hardware_fingerprint",
    "lr_multiplier",
    "parse_config",
    "weights_sha256",
]
