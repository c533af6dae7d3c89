"""Benchmark: HCC fit + predict on a 1,000-leaf tree, as a ratio to flat LAC in the same process.

    python benchmarks/hcc.py [--quick]

Prints wall times for calibration (fit) and prediction on 100,000 test points (10,000 with
--quick), and the ratio HCC / flat LAC. Flat LAC is a threshold on ``1 - p``, so the ratio is
the price of the tree DP (one bottom-up and one top-down pass over the ~1,300 nodes per point,
plus a binary search of ~10 DP passes over the calibration set).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from trustlab.methods.hcc import HCC
from trustlab.methods.hcc.baselines import FlatConformal, LCAFlat
from trustlab.methods.hcc.data import random_hierarchy, synthetic_scores


def _time(model, p_cal, y_cal, p_test) -> tuple[float, float, float, object]:
    """(fit CPU s, predict CPU s, fit+predict wall s, sets). CPU time is this process's,
    which stays meaningful on a shared, loaded machine; wall time is printed alongside."""
    w0, c0 = time.perf_counter(), time.process_time()
    model.fit(p_cal, y_cal)
    c1 = time.process_time()
    sets = model.predict(p_test)
    c2, w2 = time.process_time(), time.perf_counter()
    return c1 - c0, c2 - c1, w2 - w0, sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="10,000 test points instead of 100,000"
    )
    args = parser.parse_args()
    n_test = 10_000 if args.quick else 100_000
    n_cal = 5_000
    rng = np.random.default_rng(0)
    h = random_hierarchy(rng, 1000, max_branching=6)
    p, y = synthetic_scores(h, n_cal + n_test, rng, signal=10.0, noise=1.5)
    p_cal, y_cal, p_test, y_test = p[:n_cal], y[:n_cal], p[n_cal:], y[n_cal:]
    print(
        f"tree: {h.n_classes} leaves, {h.n_nodes} nodes, depth {int(h.depth.max())}; "
        f"calibration {n_cal:,} points, test {n_test:,} points"
    )
    rows = []
    for name, model in (
        ("flat LAC", FlatConformal(h, 0.1)),
        ("HCC (lambda=1)", HCC(h, 0.1, node_penalty=1.0)),
        ("LCA-lifted LAC", LCAFlat(h, 0.1)),
    ):
        fit_s, pred_s, wall_s, sets = _time(model, p_cal, y_cal, p_test)
        rows.append((name, fit_s, pred_s, wall_s, sets))
    base = rows[0][1] + rows[0][2]
    base_wall = rows[0][3]
    print(
        f"{'method':<16} {'fit cpu s':>9} {'pred cpu s':>10} {'x flat LAC':>10} "
        f"{'wall s':>7} {'x wall':>7}  coverage  leaves  nodes"
    )
    for name, fit_s, pred_s, wall_s, sets in rows:
        tot = fit_s + pred_s
        print(
            f"{name:<16} {fit_s:9.3f} {pred_s:10.3f} {tot / base:10.1f} {wall_s:7.2f} "
            f"{wall_s / base_wall:7.1f}  {sets.coverage(y_test):8.3f} "
            f"{sets.mean_leaves():7.2f} {sets.mean_nodes():6.2f}"
        )


if __name__ == "__main__":
    main()
