"""Benchmark: SPA-Conv vs the NTT baseline at ImageNet scale, matched compiled kernels.

    python benchmarks/jaguar_linear.py [--quick] [--repeats 5] [--build generic|default|both]
                                       [--networks resnet18,resnet50,mobilenetv2] [--json PATH]

Both servers run numba kernels compiled by the same LLVM, single-threaded (BLAS pinned to one
thread with threadpoolctl): Jaguar's scalar uint64 SPA accumulation, the baseline's Harvey/Shoup
lazy NTTs with weight NTTs prepared offline. ``--build generic`` compiles with
``NUMBA_CPU_NAME=generic`` (no AVX, as the paper measures), ``default`` for this CPU; ``both``
runs the two builds as child processes, one after the other.

Every distinct convolution of ResNet-18, ResNet-50 and MobileNetV2 (depthwise included) and
each network's FC layer runs at full channel counts and 224x224 spatial sizes, ``--repeats``
times (median and IQR of thread CPU time; the two systems' items interleaved in a shuffled
order per repeat). Layers shared by networks are timed once. Beside each time: the
operation-count model (SPA multiply-adds, baseline mulmods and NTTs, bytes) and the time it
predicts from unit costs calibrated in the same run; ``!`` marks layers where the measured and
predicted ratios differ by more than 2x (explained in docs/methods/jaguar.md).
Two treatments of c1 for both systems: ``online`` (all work after the query, Cheetah's model)
and ``c1-off`` (the seed-expanded c1 processed before the input exists; online = c0 only).
Network totals weight each layer by its occurrences; the 95% interval is a percentile
bootstrap over repeats (resampled independently per layer).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

BUILDS = {"generic": {"NUMBA_CPU_NAME": "generic"}, "default": {}}
MODES = ("online", "c1-offline")
QUICK_LAYERS = {"mobilenetv2": ("dw_3x3_960_7", "pw_project_960_160_7"),
                "resnet18": ("layer4_3x3",)}


def _iqr(v) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    return float(med), float(q1), float(q3)


def _calibrate(jp, cp, repeats: int = 5) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Unit costs in this run: ns per SPA multiply-add, per baseline mulmod, per NTT."""
    from trustlab.methods.jaguar import kernels as K

    rng = np.random.default_rng(0)
    n = jp.n
    ext = K.extend_negacyclic(rng.integers(0, 2**64, (8, 1, n), dtype=np.uint64))
    shifts = rng.choice(n, 36, replace=False)
    w = rng.integers(1, 2**11, (8, 8, 36))
    tab = K.ntt_tables(n, cp.primes)
    x = np.stack([rng.integers(0, p, (16, 1, 2, n), dtype=np.uint64) for p in cp.primes], 3)
    wh = np.stack([rng.integers(0, p, (8, 16, n), dtype=np.uint64) for p in cp.primes], 2)
    ws = K.shoup_quotients(wh, cp.primes)
    polys = np.stack([rng.integers(0, p, (32, n), dtype=np.uint64) for p in cp.primes], 1)
    res: dict[str, list[float]] = {"ma": [], "mm_shoup": [], "mm_mac128": [], "ntt": []}
    for _ in range(repeats + 1):
        t0 = time.thread_time()
        K.spa_full(ext, shifts, w)
        t1 = time.thread_time()
        K.ntt_accumulate(x, wh, ws, cp.primes, (0, 1))
        t2 = time.thread_time()
        K.ntt_accumulate(x, wh, None, cp.primes, (0, 1))
        t3 = time.thread_time()
        K.ntt_forward(polys.copy(), tab)
        t4 = time.thread_time()
        res["ma"].append((t1 - t0) / (8 * 8 * 36 * n) * 1e9)
        res["mm_shoup"].append((t2 - t1) / (8 * 16 * 2 * 2 * n) * 1e9)
        res["mm_mac128"].append((t3 - t2) / (8 * 16 * 2 * 2 * n) * 1e9)
        res["ntt"].append((t4 - t3) / (32 * 2) * 1e9)
    return {k: float(np.median(v[1:])) for k, v in res.items()}


def run_build(args) -> dict:  # type: ignore[no-untyped-def]
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    from trustlab.methods.jaguar import JaguarClient, Sampler, cheetah_params, jaguar_params
    from trustlab.methods.jaguar import kernels as K
    from trustlab.methods.jaguar.cheetah import CheetahClient
    from trustlab.methods.jaguar.matched import NETWORKS, op_count, time_layer

    jp = jaguar_params()
    cp = cheetah_params(ell=jp.ell_in)
    cal = _calibrate(jp, cp)
    accumulate = "shoup" if cal["mm_shoup"] <= cal["mm_mac128"] else "mac128"
    unit_mm = min(cal["mm_shoup"], cal["mm_mac128"])
    avx = {name: K.vector_registers(name) for name in ("spa", "ntt_forward", "ntt_accumulate")}
    print(f"\n=== build: {args.build} (numba CPU {K.cpu_name()}; ymm/zmm registers used: "
          + ", ".join(f"{k} {v['ymm']}/{v['zmm']}" for k, v in avx.items()) + ")")
    print(f"calibration: SPA {cal['ma']:.3f} ns/multiply-add; baseline mulmod Shoup "
          f"{cal['mm_shoup']:.3f} / 128-bit lazy {cal['mm_mac128']:.3f} ns (uses {accumulate}); "
          f"NTT {cal['ntt'] / 1e3:.1f} us per N={jp.n} transform")
    sampler = Sampler.seeded(0)
    clients = (JaguarClient(jp, sampler).keygen(), CheetahClient(cp, sampler).keygen())
    nets = args.networks.split(",")
    distinct: dict[tuple, tuple] = {}
    for net in nets:
        for layer in NETWORKS[net]:
            if args.quick and layer.name not in QUICK_LAYERS.get(net, ()):
                continue
            e = layer.effective()
            key = (e.c, e.h, e.c_out, e.kernel, e.stride, e.pad, e.groups)
            distinct.setdefault(key, (layer, []))[1].append((net, layer.name, layer.count))
    order = sorted(distinct, key=lambda k: op_count(distinct[k][0], jp, cp).spa("online"))
    if args.skip:
        done = {tuple(rec["key"]) for path in args.skip for rec in
                json.loads(Path(path).read_text())["layers"]}
        order = [k for k in order if k not in done]
        print(f"skipping {len(done)} layers measured in {', '.join(args.skip)}")
    if args.part:
        i, n_parts = (int(v) for v in args.part.split("/"))
        order = order[i - 1 :: n_parts]  # round-robin over the cost order: similar work per part
        print(f"part {i} of {n_parts}: {len(order)} of the distinct layers")
    if args.sample:
        order = stratified_sample(order, distinct, jp, cp)
        print(f"stratified sample: {len(order)} of the distinct layers (per kind -- depthwise, "
              "1x1, 3x3, stem, FC -- the cheapest, the median and the dearest by SPA operations)")
    predicted_cpu = sum(
        args.repeats * (op_count(distinct[k][0], jp, cp).spa("online") * cal["ma"]
                        + 1.5 * op_count(distinct[k][0], jp, cp).mulmods("online") * unit_mm)
        for k in order) / 1e9
    print(f"{len(order)} distinct layers, {args.repeats} repeats; predicted CPU "
          f"{predicted_cpu / 60:.1f} min for this build")
    hdr = (f"{'layer (networks x count)':<44}{'SPA Gma c0/c1':>15}{'NTT Gmm':>9}{'#NTT':>7}"
           f"{'MB J/C':>13} | {'mode':<7}{'SPA s [IQR]':>22}{'NTT s [IQR]':>22}"
           f"{'ratio':>7}{'model':>7}  client J/C s")
    print(hdr)
    layers_out = []
    t_start = time.thread_time()
    for key in order:
        layer, uses = distinct[key]
        ops = op_count(layer, jp, cp)
        times = time_layer(layer, jp, cp, repeats=args.repeats, seed=len(layers_out),
                           accumulate=accumulate, clients=clients)
        label = f"{layer.name} (" + ", ".join(f"{n[:2]}{n[6:] if n.startswith('resnet') else ''}"
                                               f"x{c}" for n, _, c in uses) + ")"
        rec = {"key": list(key), "name": layer.name, "uses": uses, "ops": ops.__dict__,
               "spa_c0": times.spa_c0, "spa_c1": times.spa_c1, "ntt_c0": times.ntt_c0,
               "ntt_both": times.ntt_both, "client_jaguar": times.client_jaguar,
               "client_cheetah": times.client_cheetah, "prepare_s": times.prepare_s}
        cj, cc = np.median(times.client_jaguar), np.median(times.client_cheetah)
        for mode in MODES:
            sj, sc = times.server("jaguar", mode), times.server("cheetah", mode)
            mj, qj1, qj3 = _iqr(sj)
            mc, qc1, qc3 = _iqr(sc)
            pj = ops.spa(mode) * cal["ma"]
            pc = ops.mulmods(mode) * unit_mm + ops.ntts(mode) * cal["ntt"]
            ratio, model = mc / mj, pc / pj
            flag = "!" if max(ratio / model, model / ratio) > 2 else " "
            rec[f"predicted_{mode}"] = {"jaguar_s": pj / 1e9, "cheetah_s": pc / 1e9}
            first = mode == "online"
            lead = (f"{label[:43]:<44}{ops.spa_c0 / 1e9:>7.2f}/{ops.spa_c1 / 1e9:<7.2f}"
                    f"{ops.mulmods(mode) / 1e9:>9.3f}{ops.ntts(mode):>7}"
                    f"{ops.bytes_jaguar / 1e6:>6.1f}/{ops.bytes_cheetah / 1e6:<6.1f}") if first \
                else f"{'':<44}{'':>15}{ops.mulmods(mode) / 1e9:>9.3f}{ops.ntts(mode):>7}{'':>13}"
            print(f"{lead} | {mode[:7]:<7}{mj:>8.3f} [{qj1:.3f},{qj3:.3f}]{mc:>8.3f} "
                  f"[{qc1:.3f},{qc3:.3f}]{ratio:>6.2f}x{model:>6.2f}{flag}"
                  + (f"  {cj:.3f}/{cc:.3f}" if first else ""), flush=True)
        layers_out.append(rec)
        if args.json:  # after every layer, so an interrupted run keeps what it measured
            partial = {"build": args.build, "cpu": K.cpu_name(), "calibration": cal,
                       "accumulate": accumulate, "repeats": args.repeats, "layers": layers_out,
                       "networks": nets, "quick": True, "partial": True}
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(partial))
    used = time.thread_time() - t_start
    print(f"CPU time of the timed layers: {used / 60:.1f} min")
    result = {"build": args.build, "cpu": K.cpu_name(), "calibration": cal,
              "accumulate": accumulate, "repeats": args.repeats, "layers": layers_out,
              "networks": nets, "quick": args.quick or args.sample, "cpu_minutes": used / 60,
              "load_average": os.getloadavg()}
    _summary(result)
    return result


def _kind(layer) -> str:  # type: ignore[no-untyped-def]
    if layer.kernel == 0:
        return "fc"
    if layer.depthwise:
        return "depthwise"
    if layer.kernel >= 7 or layer.c == 3:
        return "stem"
    return f"{layer.kernel}x{layer.kernel}"


def stratified_sample(order: list, distinct: dict, jp, cp) -> list:  # type: ignore[no-untyped-def]
    """Per kind of layer, the cheapest, the median and the dearest (by SPA operations)."""
    from trustlab.methods.jaguar.matched import op_count

    keep: list = []
    for kind in ("depthwise", "1x1", "3x3", "stem", "fc"):
        ks = [k for k in order if _kind(distinct[k][0]) == kind]
        ks.sort(key=lambda k: op_count(distinct[k][0], jp, cp).spa("online"))
        for idx in sorted({0, len(ks) // 2, len(ks) - 1}) if ks else []:
            if ks[idx] not in keep:
                keep.append(ks[idx])
    return [k for k in order if k in keep]


def network_totals(result: dict, net: str, mode: str, part: str = "server",
                   n_boot: int = 4000, seed: int = 0) -> dict | None:
    """Weighted totals of one network from a build's layer records: medians, the ratio
    Cheetah / Jaguar and its 95% percentile-bootstrap interval over repeats."""
    rows = [(rec, c) for rec in result["layers"] for n, _, c in rec["uses"] if n == net]
    if not rows:
        return None
    rng = np.random.default_rng(seed)
    tj = np.zeros(n_boot)
    tc = np.zeros(n_boot)
    med_j = med_c = 0.0
    for rec, count in rows:
        sj = np.array(rec["spa_c0"]) + (np.array(rec["spa_c1"]) if mode == "online" else 0)
        sc = np.array(rec["ntt_both"] if mode == "online" else rec["ntt_c0"])
        if part == "server+client":
            sj = sj + np.array(rec["client_jaguar"])
            sc = sc + np.array(rec["client_cheetah"])
        med_j += count * float(np.median(sj))
        med_c += count * float(np.median(sc))
        k = len(sj)
        # resample the repeats of this layer, take the median of the resample
        idx = rng.integers(0, k, (n_boot, k))
        tj += count * np.median(sj[idx], axis=1)
        tc += count * np.median(sc[idx], axis=1)
    lo, hi = np.percentile(tc / tj, [2.5, 97.5])
    bytes_j = sum(c * rec["ops"]["bytes_jaguar"] for rec, c in rows)
    bytes_c = sum(c * rec["ops"]["bytes_cheetah"] for rec, c in rows)
    return {"jaguar_s": med_j, "cheetah_s": med_c, "ratio": med_c / med_j, "ci": (lo, hi),
            "bytes_jaguar": bytes_j, "bytes_cheetah": bytes_c,
            "layers": len({tuple(rec["key"]) for rec, _ in rows})}


def _summary(result: dict) -> None:
    from trustlab.methods.jaguar.matched import NETWORKS as NETWORKS_ALL

    print(f"\nNetwork totals, build {result['build']} (layers weighted by occurrences; "
          "Cheetah / Jaguar, > 1: SPA-Conv faster; 95% bootstrap interval over repeats):")
    for net in result["networks"]:
        for mode in MODES:
            for part in ("server", "server+client"):
                t = network_totals(result, net, mode, part)
                if t is None:
                    continue
                claim = "above 2" if t["ci"][0] > 2 else "not above 2"
                n_net = len({(x.effective().c, x.effective().h, x.effective().c_out,
                              x.effective().kernel, x.effective().stride, x.effective().pad,
                              x.groups) for x in NETWORKS_ALL[net]})
                cover = (f"all {n_net} distinct layers" if t["layers"] == n_net else
                         f"ONLY {t['layers']} of {n_net} distinct layers: not a network total")
                print(f"  {net:<12}{mode:<11}{part:<14} SPA {t['jaguar_s']:8.2f} s  NTT "
                      f"{t['cheetah_s']:8.2f} s  ratio {t['ratio']:5.2f}x  [{t['ci'][0]:.2f}, "
                      f"{t['ci'][1]:.2f}]  ({claim}; {cover})")
        t = network_totals(result, net, "online")
        if t:
            print(f"  {net:<12}linear bytes: Jaguar {t['bytes_jaguar'] / 2**20:.1f} MiB, "
                  f"Cheetah {t['bytes_cheetah'] / 2**20:.1f} MiB = "
                  f"{t['bytes_cheetah'] / t['bytes_jaguar']:.3f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="three small layers (smoke test)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--build", choices=("generic", "default", "both"), default="both")
    ap.add_argument("--networks", default="resnet18,resnet50,mobilenetv2")
    ap.add_argument("--part", default="",
                    help="i/n: time every n-th distinct layer from the i-th (parallel runs; "
                    "merge their JSON files with --merge)")
    ap.add_argument("--merge", nargs="+", default=None,
                    help="merge the JSON files of --part runs of one build into --json")
    ap.add_argument("--skip", nargs="+", default=None,
                    help="JSON files of earlier (interrupted) runs whose layers are not re-timed")
    ap.add_argument("--sample", action="store_true",
                    help="a stratified sample of the distinct layers (documented in the output)")
    ap.add_argument("--json", default="runs/jaguar_linear.json",
                    help="where to write per-layer repeats (read by jaguar_e2e.py)")
    args = ap.parse_args()
    if args.repeats < 5:
        ap.error("--repeats must be >= 5")
    if args.merge:
        parts = [json.loads(Path(p).read_text()) for p in args.merge]
        seen: set = set()
        layers = []
        for part in parts:
            for rec in part["layers"]:
                if tuple(rec["key"]) not in seen:
                    seen.add(tuple(rec["key"]))
                    layers.append(rec)
        merged = {**parts[0], "layers": layers, "merged_from": args.merge,
                  "cpu_minutes": sum(p.get("cpu_minutes", 0.0) for p in parts)}
        merged.pop("partial", None)
        merged["quick"] = False
        print(f"merged {len(parts)} parts: {len(layers)} distinct layers")
        _summary(merged)
        Path(args.json).write_text(json.dumps(merged))
        return
    if args.build == "both":
        results = []
        for build in ("generic", "default"):
            path = Path(args.json).with_suffix(f".{build}.json")
            cmd = [sys.executable, __file__, "--build", build, "--repeats", str(args.repeats),
                   "--networks", args.networks, "--json", str(path)] + (
                       ["--quick"] if args.quick else []) + (["--sample"] if args.sample else [])
            env = {**os.environ, **BUILDS[build]}
            if build == "default":
                env.pop("NUMBA_CPU_NAME", None)
            subprocess.run(cmd, env=env, check=True)
            results.append(json.loads(path.read_text()))
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"builds": results}))
        return
    if (os.environ.get("NUMBA_CPU_NAME") == "generic") != (args.build == "generic"):
        env = {**os.environ, **BUILDS[args.build]}
        if args.build == "default":
            env.pop("NUMBA_CPU_NAME", None)
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    result = run_build(args)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
