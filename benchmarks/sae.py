"""Benchmark of sae-idempotency: SAE training throughput and the cost of the idempotency loss.

Prints, for each architecture, training throughput (activations/s) without the idempotency loss
and the time ratio of training with it (λ > 0) against training without it, measured in the same
process on the same synthetic activations (alternating the two to be robust to machine load).

    python benchmarks/sae.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import torch

from trustlab.methods.sae_idempotency import (
    ARCHITECTURES,
    SAETrainer,
    TrainConfig,
    normalization_scale,
    sparse_feature_data,
)


def _time(cfg: TrainConfig, x: torch.Tensor) -> float:
    start = time.perf_counter()
    SAETrainer(cfg).fit(x, generator=torch.Generator().manual_seed(0))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    args = parser.parse_args()
    torch.set_num_threads(1)
    steps, repeats = (40, 2) if args.quick else (150, 3)
    d_in, d_sae, batch = 64, 512, 256
    data = sparse_feature_data(20000, d_in, 256, p_active=16 / 256,
                               generator=torch.Generator().manual_seed(0))
    x = data.x * normalization_scale(data.x)
    print(f"SAE training, d_in={d_in}, d_sae={d_sae}, batch={batch}, {steps} steps, 1 thread, "
          f"best of {repeats}")
    print(f"{'architecture':<12}{'acts/s (λ=0)':>16}{'acts/s (λ=1)':>16}{'idem. overhead':>18}")
    for arch in ARCHITECTURES:
        base = TrainConfig(architecture=arch, d_sae=d_sae, k=16, batch_size=batch, n_steps=steps)
        idem = TrainConfig(architecture=arch, d_sae=d_sae, k=16, batch_size=batch, n_steps=steps,
                           idempotency_lambda=1.0)
        t0, t1 = [], []
        for _ in range(repeats):  # alternate, so load changes hit both alike
            t0.append(_time(base, x))
            t1.append(_time(idem, x))
        a0, a1 = steps * batch / min(t0), steps * batch / min(t1)
        print(f"{arch:<12}{a0:>16,.0f}{a1:>16,.0f}{min(t1) / min(t0):>17.2f}x")


if __name__ == "__main__":
    main()
