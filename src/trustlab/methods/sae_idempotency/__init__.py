"""Sparse autoencoders and their idempotency (trustlab method ``sae-idempotency``).

Four SAE architectures (ReLU + L1, TopK, BatchTopK, JumpReLU) with a trainer (AuxK dead-latent
loss, unit-norm decoder, the idempotency loss λ·‖E(D(z)) − z‖²), the standard metrics (FVU, L0,
dead latents, delta-loss), idempotency diagnostics for any encoder/decoder pair, and I/O for
activations and SAELens-layout SAEs.
"""

from trustlab.methods.sae_idempotency.idempotency import (
    IdempotencyDiagnostics,
    NormTrajectory,
    ScaleSensitivity,
    active_set_jaccard,
    diagnose,
    norm_trajectory,
    per_latent_reliability,
    reencoding_error,
    scale_sensitivity,
)
from trustlab.methods.sae_idempotency.io import (
    load_activations,
    load_saelens,
    save_activations,
    save_saelens,
)
from trustlab.methods.sae_idempotency.metrics import (
    DeltaLoss,
    EncoderDecoder,
    FunctionalEncoderDecoder,
    dead_latent_fraction,
    delta_loss,
    feature_recovery,
    fraction_of_variance_unexplained,
    l0,
    latent_fire_counts,
    reconstruct,
)
from trustlab.methods.sae_idempotency.sae import (
    ARCHITECTURES,
    JumpReLUFunction,
    SparseAutoencoder,
    StepFunction,
    batch_topk,
    rectangle,
    topk_activation,
)
from trustlab.methods.sae_idempotency.synthetic import SparseFeatureData, sparse_feature_data
from trustlab.methods.sae_idempotency.train import (
    SAETrainer,
    TrainConfig,
    idempotency_penalty,
    normalization_scale,
)

__all__ = [
    "ARCHITECTURES",
    "DeltaLoss",
    "EncoderDecoder",
    "FunctionalEncoderDecoder",
    "IdempotencyDiagnostics",
    "JumpReLUFunction",
    "NormTrajectory",
    "SAETrainer",
    "ScaleSensitivity",
    "SparseAutoencoder",
    "SparseFeatureData",
    "StepFunction",
    "TrainConfig",
    "active_set_jaccard",
    "batch_topk",
    "dead_latent_fraction",
    "delta_loss",
    "diagnose",
    "feature_recovery",
    "fraction_of_variance_unexplained",
    "idempotency_penalty",
    "l0",
    "latent_fire_counts",
    "load_activations",
    "load_saelens",
    "norm_trajectory",
    "normalization_scale",
    "per_latent_reliability",
    "reconstruct",
    "rectangle",
    "reencoding_error",
    "save_activations",
    "save_saelens",
    "scale_sensitivity",
    "sparse_feature_data",
    "topk_activation",
]
