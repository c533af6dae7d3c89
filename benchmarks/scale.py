"""Scale-out benchmark (issue 36): Ray's speed-up of 2 workers over 1, and its per-unit overhead.

1. Speed-up. An embarrassingly parallel sweep: flowreach's `verify --benchmark` unit over known-
   unsat ACAS Xu instances, each with the same CPU budget (``--budget`` process seconds; the
   falsifier keeps searching until the budget is spent, so every unit costs about the same).
   One local Ray with 2 CPUs runs the sweep with units requesting 2 CPUs (at most one runs at a
   time: "1 worker") and 1 CPU ("2 workers"), and the local backend runs it in this process.
   Speed-up = wall time of 1 worker / wall time of 2 workers, per repeat.
2. Overhead. ``--tiny`` no-op units (return the key): wall time per unit on Ray minus on the
   local backend, per repeat.

Every configuration is warmed up once (worker processes start, imports load), then timed
``--repeats`` times (>= 5); the median and the min-max spread are printed. The machine's load
average is printed with the figures: on a shared machine the speed-up is bounded by the cores
other processes leave free. Needs ../shared/data/vnncomp for part 1 (else it says so and
measures part 2 only); needs ray (trustlab[dist]).

Run: python benchmarks/scale.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from trustlab.core.units import LocalBackend, RayBackend, Sweep, WorkUnit, run_sweep
from trustlab.datasets.onnx_nets import _load_model_bytes, load_instances
from trustlab.datasets.vnncomp import load_known_results
from trustlab.datasets.vnnlib import read_text_maybe_gz
from trustlab.methods.flowreach.cli import _verify_unit
from trustlab.methods.flowreach.verifier import VerifySettings

DATA = Path(os.environ.get("TRUSTLAB_SHARED_DATA", Path(__file__).resolve().parents[1].parent
                           / "shared" / "data")) / "vnncomp" / "acasxu"


def noop(unit: WorkUnit) -> str:
    return unit.key


def acas_units(n: int, budget: float, cpus: float) -> tuple[WorkUnit, ...]:
    """``n`` known-unsat ACAS Xu instances (the first in the file's order), one unit each."""
    known = load_known_results(DATA)
    picks = [i for i in load_instances(DATA) if known[i.key].expected == "unsat"][:n]
    settings = VerifySettings(baselines=False, sound=False, timeout=budget, clock="process")
    return tuple(WorkUnit(f"{i.key[0]}__{i.key[1]}", {
        "onnx": _load_model_bytes(i.onnx), "onnx_name": i.onnx.name,
        "vnnlib": read_text_maybe_gz(i.vnnlib), "vnnlib_name": str(i.vnnlib),
        "settings": settings.model_dump()}, 0, cpus) for i in picks)


def timed(sweep: Sweep, backend) -> float:
    start = time.perf_counter()
    res = run_sweep(sweep, backend=backend).raise_failed()
    assert len(res.results) == len(sweep.units)
    return time.perf_counter() - start


def summary(xs: list[float], fmt: str = "{:.3g}") -> str:
    return (f"median {fmt.format(statistics.median(xs))} "
            f"[{fmt.format(min(xs))}, {fmt.format(max(xs))}] over {len(xs)}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--instances", type=int, default=None)
    parser.add_argument("--budget", type=float, default=None, help="process s per instance")
    parser.add_argument("--tiny", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n = args.instances or (4 if args.quick else 8)
    budget = args.budget or (0.5 if args.quick else 1.0)
    tiny = args.tiny or (100 if args.quick else 400)
    repeats = max(5, args.repeats)
    os.environ.pop("RAY_ADDRESS", None)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} CPUs")
    ray_backend = RayBackend(num_cpus=2, retries=0)
    local = LocalBackend(retries=0)
    try:
        # -- per-unit overhead -------------------------------------------------------------
        units = tuple(WorkUnit(f"u{i}") for i in range(tiny))
        sweep = Sweep("noop", noop, units)
        timed(sweep, ray_backend), timed(sweep, local)  # warm-up
        per_ray, per_local, overhead = [], [], []
        for _ in range(repeats):
            r, loc = timed(sweep, ray_backend) / tiny, timed(sweep, local) / tiny
            per_ray.append(r * 1e3)
            per_local.append(loc * 1e3)
            overhead.append((r - loc) * 1e3)
        print(f"\nper-unit cost of {tiny} no-op units (ms per unit):")
        print(f"  local backend: {summary(per_local)}")
        print(f"  ray backend:   {summary(per_ray)}")
        print(f"  ray overhead over local: {summary(overhead)} ms per unit")
        # -- speed-up ----------------------------------------------------------------------
        if not DATA.is_dir():
            print(f"\nspeed-up: not measured, the VNN-COMP data is absent ({DATA}); no figure.")
            return
        one, two = Sweep("acas", _verify_unit, acas_units(n, budget, 2.0)), \
            Sweep("acas", _verify_unit, acas_units(n, budget, 1.0))
        timed(one, ray_backend), timed(two, ray_backend)  # warm-up: both workers import torch
        t1, t2, tl, ratio = [], [], [], []
        for _ in range(repeats):
            a, b, c = timed(one, ray_backend), timed(two, ray_backend), timed(one, local)
            t1.append(a)
            t2.append(b)
            tl.append(c)
            ratio.append(a / b)
        print(f"\nACAS Xu sweep: {n} known-unsat instances, {budget:g} process-s budget each "
              "(wall seconds):")
        print(f"  local backend (this process): {summary(tl)}")
        print(f"  ray, 1 worker (2 CPUs/unit):  {summary(t1)}")
        print(f"  ray, 2 workers (1 CPU/unit):  {summary(t2)}")
        print(f"  speed-up 2 workers over 1:    {summary(ratio)} (ideal 2.0)")
        print(f"  ray 1 worker / local:         {summary([a / c for a, c in zip(t1, tl, strict=True)])}")
    finally:
        ray_backend.close()
        print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
