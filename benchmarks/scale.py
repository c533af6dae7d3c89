"""Scale-out benchmark (issue 36): Ray's speed-up of 2 workers over 1, and its per-unit overhead.

1. Speed-up. An embarrassingly parallel sweep: flowreach's `verify --benchmark` unit over known-
   unsat ACAS Xu instances, each with the same CPU budget (``--budget`` process seconds; the
   falsifier keeps searching until the budget is spent, so every unit costs about the same).
   The same 1-CPU units (one thread each) run on a local Ray started with 1 CPU ("1 worker")
   and with 2 CPUs ("2 workers"), and on the local backend in this process. Speed-up = wall
   time of 1 worker / wall time of 2 workers (median and range over all pairs of repeats).
2. Overhead. ``--tiny`` no-op units (return the key): wall time per unit on Ray minus on the
   local backend, per repeat.

Every configuration is warmed up once (worker processes start, imports load), then timed
``--repeats`` times (>= 5); the median and the min-max spread are printed. The machine's load
average is printed with the figures: on a shared machine the speed-up is bounded by the cores
other processes leave free. Ray's workers run at the driver's priority here
(``RAY_worker_niceness=0``; Ray's default, 15, lets every other process go first). Needs ../shared/data/vnncomp for part 1 (else it says so and
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
    # Ray starts its workers at niceness 15 (they yield to every other process); the local
    # baseline runs in this process at normal priority. Same priority for both, unless set:
    nice_var = "RAY_worker_niceness"  # Ray's config name (lower case after RAY_)
    os.environ.setdefault(nice_var, "0")
    print(f"Ray worker niceness: {os.environ[nice_var]} (this process: {os.nice(0)})")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} CPUs")
    local = LocalBackend(retries=0)
    ray_backend = RayBackend(num_cpus=2, retries=0)
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
    finally:
        ray_backend.close()
    # -- speed-up: the same 1-CPU units on a 1-CPU Ray and on a 2-CPU Ray ----------------------
    if not DATA.is_dir():
        print(f"\nspeed-up: not measured, the VNN-COMP data is absent ({DATA}); no figure.")
        return
    sweep = Sweep("acas", _verify_unit, acas_units(n, budget, 1.0))
    times: dict[str, list[float]] = {}
    for workers in (1, 2):
        backend = RayBackend(num_cpus=workers, retries=0)
        try:
            timed(sweep, backend)  # warm-up: the workers start and import torch / onnxruntime
            times[f"ray{workers}"] = [timed(sweep, backend) for _ in range(repeats)]
        finally:
            backend.close()
    timed(sweep, local)
    times["local"] = [timed(sweep, local) for _ in range(repeats)]
    t1, t2, tl = times["ray1"], times["ray2"], times["local"]
    print(f"\nACAS Xu sweep: {n} known-unsat instances, {budget:g} process-s budget each, one "
          "thread per unit (wall seconds):")
    print(f"  local backend (this process): {summary(tl)}")
    print(f"  ray, 1 worker (1-CPU Ray):    {summary(t1)}")
    print(f"  ray, 2 workers (2-CPU Ray):   {summary(t2)}")
    print(f"  speed-up 2 workers over 1:    {summary([a / b for a in t1 for b in t2])} "
          "(all pairs; ideal 2.0)")
    print(f"  ray 1 worker / local:         {summary([a / c for a in t1 for c in tl])}")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
