"""Shared by the asymmetry smol-chat scripts (asymmetry_smol_run, asymmetry_curriculum_probe,
asymmetry_wordmap_probe): the LoRA recipe they all fine-tune with (docs/methods/asymmetry.md,
"smol-chat, a character-level transform") and their CPU-clock progress log. Not a benchmark
(`make bench` skips files whose name starts with an underscore)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def smol_lora_config(steps: int, lr: float = 1e-3) -> dict[str, Any]:
    """The fine-tuning config of every smol-chat run: LoRA r 16, alpha 32 on all layers,
    batch 4, warm-up 20, seed 0, one thread."""
    return {"steps": steps, "batch_size": 4, "lr": lr, "warmup": 20, "seed": 0,
            "threads": 1, "lora": {"r": 16, "alpha": 32, "layers": "all"}}  # fmt: skip


def cpu_logger(cpu0: float) -> Callable[..., None]:
    """``print`` prefixed with the process CPU seconds since ``cpu0`` and the wall-clock time."""

    def log(*a: object) -> None:
        print(f"[{time.process_time() - cpu0:7.1f} CPU-s {time.strftime('%H:%M:%S')}]", *a,
              flush=True)  # fmt: skip

    return log
