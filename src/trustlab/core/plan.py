"""The plan of ``trustlab run all``: which methods, in which order, how long, what gets built.

Printed before any work starts, so a user on a fresh machine knows what the next half hour holds:
each method's estimated wall time (from their own last run of it when ``runs/`` has one, else the
reference time measured for the toolkit on 2 CPU cores), and the organisms its default config
names that are not yet in ``$TRUSTLAB_HOME`` (built on first use, once, by the first method that
needs them). Methods run shortest first, so the first reports arrive within minutes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ORGANISM_BUILD_S",
    "REFERENCE_RUN_S",
    "PlanItem",
    "format_duration",
    "format_plan",
    "organisms_named",
    "plan_run",
]

#: Seconds of each method's default run (``trustlab run <id>``, organisms already built): CPU
#: seconds (user + system) measured on a 2-core machine under load, a stand-in for the wall time
#: on 2 idle cores (the runs are single-threaded); flowreach with the VNN-COMP data present,
#: rheology on its default (quick) family. Re-measure when a default changes a lot.
REFERENCE_RUN_S: dict[str, float] = {
    "jaguar": 21.0,
    "hcc": 29.0,
    "ipb": 29.0,
    "bribery": 33.0,
    "research-net": 49.0,
    "teaming": 54.0,
    "sae-idempotency": 98.0,
    # built from measured parts, not one timed run: 29 fine-tuning runs per organism at 1.5
    # CPU-s (chat-s, 40 steps of batch 16) and 3.1 CPU-s (vit-xs, 100 steps of batch 64) each,
    # plus ~20 CPU-s of loading, release checks and figures (docs/methods/gmu.md, Speed)
    "gmu": 155.0,
    "rheology": 108.0,
    "lisa": 214.0,
    "toolcall": 217.0,
    "arao": 307.0,
    "flowreach": 535.0,
    # an estimate, not a measured run: ~130 chat-s fine-tune+evaluate cells at ~80 s each
    # (docs/methods/gradshield.md, Limits); `--quick` is ~20 s
    "gradshield": 10800.0,
}

#: Quick-preset wall seconds (``--quick``): the contract tests hold each under 60 s.
REFERENCE_QUICK_S = 45.0

#: Build seconds of each organism on 2 CPU cores (docs/organisms.md, build CPU seconds).
ORGANISM_BUILD_S: dict[str, float] = {
    "tool-xs": 50.0,
    "chat-xs": 60.0,
    "chat-s": 210.0,
    "chat-m": 270.0,
    "chat-l": 640.0,
    "tool-s": 660.0,
    # isc's organisms, training + evaluation CPU-s measured under load (docs/methods/isc.md)
    "tvd-1": 80.0,
    "tvd-2": 210.0,
    "tvd-3": 370.0,
}
_UNKNOWN_RUN_S = 120.0
_UNKNOWN_BUILD_S = 300.0


@dataclass
class PlanItem:
    """One method of the plan: its estimate, where the estimate comes from, what it builds."""

    method_id: str
    run_s: float
    basis: str
    builds: list[str] = field(default_factory=list)
    build_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.run_s + self.build_s


_BARE_KEYS = ("organism", "organisms")


def organisms_named(values: Any) -> list[str]:
    """Organism names a config refers to: ``organism:<name>`` strings anywhere in its values,
    and bare names (no ``:`` or ``/``) under a key called ``organism`` or ``organisms``
    (gmu's ``organisms: [chat-s, vit-xs]``)."""
    found: list[str] = []

    def add(name: str) -> None:
        name = name.strip()
        if name and name not in found:
            found.append(name)

    def walk(v: Any, bare: bool = False) -> None:
        if isinstance(v, str) and v.startswith("organism:"):
            add(v.removeprefix("organism:"))
        elif isinstance(v, str) and bare and ":" not in v and "/" not in v:
            add(v)
        elif isinstance(v, dict):
            for key, item in v.items():
                walk(item, bare=key in _BARE_KEYS)
        elif isinstance(v, list | tuple):
            for item in v:
                walk(item, bare)

    walk(values)
    return found


def _last_run_s(runs_root: Path, method_id: str, quick: bool) -> float | None:
    """Wall time of the newest complete run of ``method_id`` under ``runs_root`` (same preset)."""
    folder = runs_root / method_id
    if not folder.is_dir():
        return None
    reports = sorted(folder.glob("*/report.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in reports[:5]:
        try:
            prov = json.loads(path.read_text(encoding="utf-8")).get("provenance", {})
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(prov, dict) and bool(prov.get("quick")) == quick:
            wall = prov.get("wall_time_s")
            if isinstance(wall, int | float) and wall > 0:
                return float(wall)
    return None


def plan_run(
    configs: dict[str, dict[str, Any]],
    *,
    quick: bool = False,
    runs_root: str | os.PathLike[str] = "runs",
    built: Iterable[str] | None = None,
) -> list[PlanItem]:
    """The plan for running every method of ``configs`` (id -> resolved config values).

    ``built``: organisms already cached (by default, asked of :mod:`trustlab.organisms`).
    Items are ordered shortest first (organism builds included).
    """
    if built is None:
        built = _built_organisms()
    cached = set(built)
    root = Path(runs_root)
    items = []
    for method_id in configs:
        last = _last_run_s(root, method_id, quick)
        if last is not None:
            run_s, basis = last, "your last run"
        elif quick:
            run_s, basis = REFERENCE_QUICK_S, "quick preset"
        elif method_id in REFERENCE_RUN_S:
            run_s, basis = REFERENCE_RUN_S[method_id], "reference, 2 cores"
        else:
            run_s, basis = _UNKNOWN_RUN_S, "no measurement yet"
        items.append(PlanItem(method_id, run_s, basis))
    items.sort(key=lambda it: it.run_s)
    for item in items:  # an organism is built once, by the first method (in run order) naming it
        for name in organisms_named(configs[item.method_id]):
            if name not in cached:
                item.builds.append(name)
                item.build_s += ORGANISM_BUILD_S.get(name, _UNKNOWN_BUILD_S)
                cached.add(name)
    items.sort(key=lambda it: it.total_s)
    return items


def _built_organisms() -> list[str]:
    try:
        from trustlab.organisms.registry import is_built
        from trustlab.organisms.specs import SPECS
    except ImportError:  # pragma: no cover - organisms need the llm extra
        return []
    return [name for name in SPECS if is_built(name)]


def format_duration(seconds: float) -> str:
    """``95`` -> ``1 min 35 s``; under a minute in seconds; over an hour in h and min."""
    s = round(max(seconds, 0.0))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


def format_plan(items: list[PlanItem]) -> str:
    """The plan as lines for the terminal."""
    total = sum(it.total_s for it in items)
    lines = [f"plan: {len(items)} method(s), about {format_duration(total)} in all "
             "(estimates; shortest first):"]
    for i, it in enumerate(items, 1):
        build = (f" + build {', '.join(it.builds)} ~{format_duration(it.build_s)}"
                 if it.builds else "")
        lines.append(f"  {i:>2}. {it.method_id:<16} ~{format_duration(it.run_s)} ({it.basis}){build}")
    return "\n".join(lines)
