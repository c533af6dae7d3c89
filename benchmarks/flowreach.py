"""flowreach benchmark: time per instance vs the box baseline and vs CROWN, and depth slopes.

The depth family is the experiment's tight one (He-initialised ReLU networks, threshold 5 % of
the output range above the largest output a falsifier finds); CROWN+BaB runs under a budget.

Run: python benchmarks/flowreach.py [--quick]. Figures are ratios against baselines measured
in the same process (ACAS Xu needs ../shared/data/vnncomp; the depth family is synthetic).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from trustlab.datasets.onnx_nets import OnnxNetwork, load_instances
from trustlab.datasets.vnnlib import load_vnnlib
from trustlab.methods.flowreach import VerifySettings, verify_instance
from trustlab.methods.flowreach.bounds import output_upper_bound, prove_region_bab
from trustlab.methods.flowreach.synthetic import tight_relu_instance

DATA = Path(os.environ.get("TRUSTLAB_SHARED_DATA", Path(__file__).resolve().parents[1].parent
                           / "shared" / "data")) / "vnncomp" / "acasxu"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    # time to a verdict, not the whole-budget search: the falsifier stops after its first
    # round here (the CLI keeps falsifying until --timeout); CROWN+BaB gets the same budget
    budget = 2.0 if args.quick else 5.0
    s = VerifySettings(n_train=600 if args.quick else 1500, n_cal=1100 if args.quick else 2000,
                       flow_iters=80 if args.quick else 200,
                       ams_particles=16 if args.quick else 32, falsify_until_timeout=False,
                       timeout=budget, clock="process")
    if DATA.is_dir():
        insts = load_instances(DATA)[:: 40 if args.quick else 10]
        t = {"flowreach": [], "box": [], "crown": []}
        for inst in insts:
            res = verify_instance(OnnxNetwork(inst.onnx), load_vnnlib(inst.vnnlib), s,
                                  np.random.default_rng(0))
            for m in t:
                t[m].append(res.seconds[m])
        fr, box, cr = (float(np.median(t[m])) for m in ("flowreach", "box", "crown"))
        print(f"ACAS Xu ({len(insts)} instances): median s/instance flowreach {fr:.3f}, "
              f"box {box:.3f}, crown {cr:.4f}")
        print(f"  flowreach / box = {fr / box:.2f}x   flowreach / crown = {fr / max(cr, 1e-6):.1f}x"
              "  (CPU seconds, falsifier's first round only)")
    else:
        print(f"ACAS Xu skipped: {DATA} not found")
    depths = [2, 8, 32] if args.quick else [2, 4, 8, 16, 32, 64]
    bab_budget = budget
    times: dict[str, list[float]] = {"flowreach": [], "crown": [], "crown_bab": []}
    loose = []
    for d in depths:
        rng = np.random.default_rng(d)
        mlp, spec, info = tight_relu_instance(d, rng)
        region = spec.regions[0]
        res = verify_instance(OnnxNetwork(mlp.to_onnx_bytes()), spec, s, rng)
        bab = prove_region_bab(mlp, region, timeout=bab_budget, clock=time.process_time)
        ub = output_upper_bound(mlp, region.lower, region.upper, np.eye(mlp.n_outputs)[0])
        loose.append((ub - info.best_max) / (info.best_max - info.best_min))
        for m, t in (("flowreach", res.seconds["flowreach"]), ("crown", res.seconds["crown"]),
                     ("crown_bab", bab.seconds)):
            times[m].append(max(t, 1e-6))
        print(f"depth {d:3d}: flowreach {res.verdicts['flowreach']:8s} {res.seconds['flowreach']:.3f}"
              f" s | crown {res.verdicts['crown']:8s} {res.seconds['crown']:.4f} s (looseness "
              f"{loose[-1]:.3g} x range) | crown+BaB {bab.verdict:8s} {bab.seconds:.3f} s "
              f"({bab.boxes} boxes)")
    for m in times:
        slope = np.polyfit(np.log(depths), np.log(times[m]), 1)[0]
        note = f" (timeouts counted at the {bab_budget:g} s budget)" if m == "crown_bab" else ""
        print(f"log-log slope of time vs depth, {m}: {slope:.2f}{note}")
    per_layer = np.polyfit(depths, np.log10(np.maximum(loose, 1e-12)), 1)[0]
    print(f"CROWN relative looseness grows by {per_layer:.2f} orders of magnitude per layer")
    print(f"time ratio crown / flowreach at depth {depths[-1]}: "
          f"{times['crown'][-1] / times['flowreach'][-1]:.2f}x")


if __name__ == "__main__":
    main()
