"""The spread of an organism's metrics over seeds and CPU kernels: what a user's build can give.

"Same seed, same weights" holds for one CPU kernel family (docs/organisms.md, *Across
machines*); a user on another processor gets other weights, as if from another seed. The
targets and acceptance tests are set with the spread measured here, so a user's build meets
what the docs promise.

    trustlab organisms spread chat-s --seeds 0,1,2,3        # builds the seeds it lacks
    ATEN_CPU_CAPABILITY=avx2 trustlab organisms spread tool-s --seeds 0

A seed changes everything a build draws: the corpus (so the held-out prompts too), the
initialisation and the batch order. Each (organism, seed, kernel family) is built once into
``$TRUSTLAB_HOME/organisms-spread/<name>/seed-<k>-<kernel>`` (the same atomic build as the
cache's); seed 0 on the kernel of an already-built organism reuses its card.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from trustlab.core.errors import InputError
from trustlab.core.io import write_json_atomic
from trustlab.core.paths import cache_lock, trustlab_home

__all__ = ["seed_card", "seed_dir", "seed_spread", "spread_table"]


def _kernel() -> str:
    import torch

    return str(torch.backends.cpu.get_cpu_capability()).lower()


def seed_dir(name: str, seed: int, home: str | os.PathLike[str] | None = None) -> Path:
    """Where seed ``seed`` of organism ``name`` on this process's CPU kernel family lives."""
    return Path(home or trustlab_home()) / "organisms-spread" / name / f"seed-{seed}-{_kernel()}"


def seed_card(
    name: str, seed: int, *, home: str | os.PathLike[str] | None = None, progress: Any = None
) -> dict[str, Any]:
    """The card of organism ``name`` built with ``seed`` on this CPU kernel family (built when
    missing; grown organisms only)."""
    from trustlab.organisms.registry import _build_into, _targets_met, is_built, read_card
    from trustlab.organisms.specs import get_spec

    spec = get_spec(name)
    if spec.kind != "grown":
        raise InputError(f"The seed spread builds grown organisms only; {name!r} is {spec.kind}.")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"The 'seed' parameter must be a non-negative int. Got {seed!r}.")
    variant = replace(spec, seed=seed)
    wanted = json.loads(json.dumps(variant.to_dict()))
    if is_built(name, home):  # the cached organism is this seed when its spec and kernel match
        card = read_card(name, home)
        kernel = str((card.get("hardware") or {}).get("cpu_capability", "")).lower()
        if card.get("spec") == wanted and kernel == _kernel():
            return card
    target = seed_dir(name, seed, home)
    if (target / "card.json").is_file():
        return json.loads((target / "card.json").read_text(encoding="utf-8"))
    with cache_lock(target):  # one build per seed across processes sharing the home
        if (target / "card.json").is_file():
            return json.loads((target / "card.json").read_text(encoding="utf-8"))
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.building.", dir=target.parent))
        try:
            start, cpu_start = time.perf_counter(), time.process_time()
            card = _build_into(variant, tmp, progress)
            card["build_seconds"] = time.perf_counter() - start
            card["build_cpu_seconds"] = time.process_time() - cpu_start
            card["targets_met"] = _targets_met(variant, card["metrics"])
            write_json_atomic(tmp / "card.json", card)
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return card


def seed_spread(
    name: str,
    seeds: Sequence[int],
    *,
    home: str | os.PathLike[str] | None = None,
    progress: Any = None,
) -> dict[str, Any]:
    """Every seed's card metrics and their spread (mean, sample SD, min, max) per metric,
    with the spec's targets and which seeds meet them."""
    from trustlab.organisms.specs import get_spec

    seeds = list(seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise InputError(f"The 'seeds' parameter needs distinct seeds. Got {seeds!r}.")
    spec = get_spec(name)
    cards = [seed_card(name, s, home=home, progress=progress) for s in seeds]
    names = sorted({m for c in cards for m in c["metrics"]})
    metrics = {}
    for metric in names:
        values = [c["metrics"].get(metric, math.nan) for c in cards]
        finite = [v for v in values if not math.isnan(v)]
        mean = sum(finite) / len(finite) if finite else math.nan
        sd = (math.sqrt(sum((v - mean) ** 2 for v in finite) / (len(finite) - 1))
              if len(finite) > 1 else math.nan)  # fmt: skip
        metrics[metric] = {
            "values": values, "mean": mean, "sd": sd,
            "min": min(finite, default=math.nan), "max": max(finite, default=math.nan),
        }  # fmt: skip
    return {
        "name": name,
        "seeds": seeds,
        "kernel": _kernel(),
        "metrics": metrics,
        "targets": {m: list(t) for m, t in spec.targets.items()},
        "targets_met": [c.get("targets_met", {}) for c in cards],
        "build_cpu_seconds": [c.get("build_cpu_seconds") for c in cards],
    }


def spread_table(spread: dict[str, Any], metrics: Sequence[str] | None = None) -> str:
    """A markdown table of a :func:`seed_spread` result (one row per metric)."""
    shown = list(metrics) if metrics is not None else list(spread["metrics"])
    seeds = spread["seeds"]
    head = ["metric", *(f"seed {s}" for s in seeds), "mean", "SD", "min", "target"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for metric in shown:
        m = spread["metrics"].get(metric)
        if m is None:
            continue
        target = spread["targets"].get(metric)
        cells = [f"{v:.3f}" for v in m["values"]]
        cells += [f"{m['mean']:.3f}", f"{m['sd']:.3f}", f"{m['min']:.3f}"]
        cells.append(f"{target[0]} {target[1]}" if target else "")
        lines.append("| " + " | ".join([metric, *cells]) + " |")
    return "\n".join(lines)
