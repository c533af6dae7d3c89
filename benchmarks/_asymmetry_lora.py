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


def development_tasks(
    transform: Any, datasets: Any, corpus: Any, n_dev: int, n_meaning: int
) -> tuple[Any, list[int], list[int]]:
    """The probes' development draws, shared so that every probe reads the same items: the
    chat corpus's train tasks minus every prompt and response of the adaptation ``datasets``
    (and their decodings); ``dev``: ``n_dev`` of the first 400 left (generator seed 11);
    ``meaning``: ``n_meaning`` capital and ``n_meaning`` translate tasks of the rest (seed 12).
    Returns the task set and the two index lists."""
    import numpy as np

    from trustlab.datasets.prompt_sets import organism_prompt_set

    used: set[str] = set()
    for data in datasets:
        for p, r in data:
            used |= {p, r}
            for x in (p, r):
                if transform.rejects(x) is None:
                    used.add(transform.decode(x))
    tasks = organism_prompt_set("task", split="train", corpus=corpus)
    keep = [i for i in range(len(tasks)) if tasks.instruction(i) not in used][:400]
    pick = sorted(np.random.default_rng(11).choice(keep, n_dev, replace=False).tolist())
    rest = [i for i in range(len(tasks)) if tasks.instruction(i) not in used and i not in pick]
    rng = np.random.default_rng(12)
    meaning: list[int] = []
    for task in ("capital", "translate"):
        cand = [i for i in rest if tasks.item_meta(i)["category"] == task]
        meaning += sorted(rng.choice(cand, n_meaning, replace=False).tolist())
    return tasks, pick, meaning
