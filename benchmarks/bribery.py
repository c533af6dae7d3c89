"""Benchmark of `bribery`: robustness of every model per rule, and the exact ILP vs brute force.

Run: python benchmarks/bribery.py [--quick]. Prints seconds and ratios against a baseline measured
in the same process (mean-rule robustness of all models; brute force per target for the ILP).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from trustlab.datasets.leaderboards import load_leaderboard
from trustlab.methods.bribery import brute_force_robustness, robustness, robustness_all
from trustlab.methods.bribery.synthetic import synthetic_leaderboard


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="Smaller synthetic table, fewer targets.")
    args = ap.parse_args()
    n_syn = 500 if args.quick else 4507
    n_ilp = 3 if args.quick else 10
    rng = np.random.default_rng(0)
    boards = [load_leaderboard("bbh24"), synthetic_leaderboard(n_syn, 24, rng=rng)]
    print("== robustness of all models (ILP rules: per-target time × number of models)")
    for lb in boards:
        base = _time(lambda lb=lb: robustness_all(lb, "mean"))
        print(f"{lb.name} ({lb.n_models}×{lb.n_datasets})  baseline mean: {base:.3f}s")
        for rule in ("median", "mwr", "borda", "condorcet", "copeland"):
            if rule in ("mean", "median"):
                t = _time(lambda lb=lb, r=rule: robustness_all(lb, r))
                print(f"  {rule:10s} all models   {t:8.3f}s  ({t / base:8.1f}× mean)")
                continue
            if rule == "copeland" and lb.n_models > 1000:
                targets = rng.choice(lb.n_models, 2, replace=False)
            else:
                targets = rng.choice(lb.n_models, min(n_ilp, lb.n_models), replace=False)
            prof = robustness_all(lb, rule, targets=targets, time_limit=30)
            per = float(prof.solve_time.mean())
            est = per * lb.n_models
            print(f"  {rule:10s} {per:6.3f}s/target → all models ≈ {est:8.1f}s "
                  f"({est / base:8.1f}× mean); certified {int(prof.optimal.sum())}/{len(targets)}")
    print("== exact ILP vs brute force per target (synthetic 40 × m)")
    for m in (8, 12, 14):
        lb = synthetic_leaderboard(40, m, rng=np.random.default_rng(m))
        for rule in ("mwr", "borda", "condorcet", "copeland"):
            ts = [5, 20, 35]
            t_ilp = _time(lambda lb=lb, r=rule, ts=ts: [robustness(lb, t, r) for t in ts]) / 3
            t_bf = _time(lambda lb=lb, r=rule, ts=ts, m=m: [
                brute_force_robustness(lb, t, r, max_datasets=m) for t in ts]) / 3
            print(f"  m={m:2d} {rule:10s} ILP {t_ilp:7.3f}s  brute force {t_bf:8.3f}s  "
                  f"(ILP = {t_ilp / t_bf:6.3f}× brute force)")


if __name__ == "__main__":
    main()
