"""Jaguar benchmark, end to end: nonlinear layers at scale and per-network latency estimates.

    python benchmarks/jaguar_e2e.py [--quick] [--linear runs/jaguar_linear.json]
                                    [--elements 1000000] [--chunk 100000] [--skip-digits]

1. **Nonlinear layers at scale** (Cheetah / Jaguar ratios, > 1: Jaguar cheaper): ReLU at
   Jaguar's target ring (ell = 25 bits) vs the baseline's doubled ring (ell + f = 37), then
   Jaguar's extension to ell + f bits before the next linear layer vs the baseline's post-ReLU
   truncation protocol, on ``--elements`` elements in chunks of ``--chunk`` (each chunk a
   separate two-party session over loopback TCP, base OT + IKNP, no dealer; the systems'
   chunks interleaved; the chunks are the repeats). Time = the larger of the two parties'
   thread CPU times (each party would have its own machine), bytes both ways, one-way
   latencies on the critical path.
2. **Per-network estimate** for ResNet-18, ResNet-50 and MobileNetV2 (224x224, one image):
   sum over linear layers (weighted by occurrence) of server + client time from
   ``benchmarks/jaguar_linear.py``'s JSON (the baseline's weight NTTs offline, as there)
   + nonlinear elements x measured per-element costs + bytes / bandwidth + one-way latencies x
   RTT / 2, under LAN (RTT 0.1 ms, 3 Gbit/s) and WAN (RTT 40 ms, 400 Mbit/s), for both
   treatments of c1 and each build; 95% percentile-bootstrap interval over the repeats of
   every measured part. Printed against the abstract's 2.07-3.72x latency and 1.16-1.76x
   communication.
3. **The real two-process run** on the digits CNN (both systems, loopback TCP).
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from pathlib import Path

import numpy as np

from trustlab.methods.jaguar.channel import channel_pair
from trustlab.methods.jaguar.inference import (
    NETWORKS,
    ProtocolConfig,
    estimate_time,
    private_inference,
)
from trustlab.methods.jaguar.matched import NETWORKS as NETS
from trustlab.methods.jaguar.matched import nonlinear_counts
from trustlab.methods.jaguar.network import digits_data, quantise, train_digits_cnn
from trustlab.methods.jaguar.party import Party, share
from trustlab.methods.jaguar.relu import extend, relu, truncate
from trustlab.methods.jaguar.sampling import Sampler

LINKS = {"LAN": (3e9, 0.1e-3), "WAN": (400e6, 40e-3)}  # (bit/s, RTT s), stated assumptions
ABSTRACT = {"latency": (2.07, 3.72), "comm": (1.16, 1.76)}


def nonlinear_chunk(n: int, ell: int, f: int, system: str, seed: int) -> dict:
    """ReLU then extension (Jaguar) / truncation (baseline) on ``n`` elements in one session."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-(2 ** (ell - 3)), 2 ** (ell - 3), n)
    bits = ell if system == "jaguar" else ell + f
    shares = share(x << (0 if system == "jaguar" else f), bits, rng)
    c0, c1 = channel_pair(600)
    out: dict = {}

    def side(ch, i):  # type: ignore[no-untyped-def]
        p = Party(ch, Sampler.seeded(seed * 2 + i)).setup()
        s0, t0 = ch.stats(), time.thread_time()
        y = relu(p, shares[i], bits)
        s1, t1 = ch.stats(), time.thread_time()
        if system == "jaguar":
            extend(p, y, ell, ell + f)
        else:
            truncate(p, y, bits, f)
        s2, t2 = ch.stats(), time.thread_time()
        out[i] = (t1 - t0, t2 - t1, s1.minus(s0), s2.minus(s1))

    t = threading.Thread(target=side, args=(c1, 1))
    t.start()
    side(c0, 0)
    t.join()
    return {"relu_s": max(out[0][0], out[1][0]), "rescale_s": max(out[0][1], out[1][1]),
            "relu_bytes": out[0][2].bytes_total, "rescale_bytes": out[0][3].bytes_total,
            "relu_rounds": max(out[0][2].rounds, out[1][2].rounds),
            "rescale_rounds": max(out[0][3].rounds, out[1][3].rounds), "n": n}


def nonlinear_at_scale(total: int, chunk: int, ell: int, f: int) -> dict[str, list[dict]]:
    res: dict[str, list[dict]] = {"jaguar": [], "cheetah": []}
    order = random.Random(0)
    for i in range(max(1, total // chunk)):
        systems = ["jaguar", "cheetah"]
        order.shuffle(systems)
        for system in systems:
            res[system].append(nonlinear_chunk(chunk, ell, f, system, seed=i))
    return res


def _per_element(chunks: list[dict], key: str) -> np.ndarray:
    return np.array([c[key] / c["n"] for c in chunks])


def print_nonlinear(res: dict[str, list[dict]]) -> None:
    n_total = sum(c["n"] for c in res["jaguar"])
    print(f"\n1. Nonlinear layers, {n_total:,} elements ({len(res['jaguar'])} chunks of "
          f"{res['jaguar'][0]['n']:,}; median [IQR] over chunks; max of the parties' CPU time)")
    for part, jname, cname in (("relu", "ReLU at 25 bits", "ReLU at 37 bits"),
                               ("rescale", "extension 25->37", "truncation 37->25")):
        tj, tc = _per_element(res["jaguar"], f"{part}_s"), _per_element(res["cheetah"], f"{part}_s")
        bj = np.median(_per_element(res["jaguar"], f"{part}_bytes"))
        bc = np.median(_per_element(res["cheetah"], f"{part}_bytes"))
        q = lambda v: np.percentile(v * 1e6, [50, 25, 75])  # noqa: E731
        mj, mc = q(tj), q(tc)
        print(f"  Jaguar {jname:<18} {mj[0]:6.2f} us/elem [{mj[1]:.2f},{mj[2]:.2f}] {bj:7.1f} B/elem "
              f"{res['jaguar'][0][f'{part}_rounds']:>3} lat | Baseline {cname:<18} {mc[0]:6.2f} "
              f"us/elem [{mc[1]:.2f},{mc[2]:.2f}] {bc:7.1f} B/elem "
              f"{res['cheetah'][0][f'{part}_rounds']:>3} lat | time {mc[0] / mj[0]:.2f}x, bytes "
              f"{bc / bj:.2f}x")
    tj = _per_element(res["jaguar"], "relu_s") + _per_element(res["jaguar"], "rescale_s")
    tc = _per_element(res["cheetah"], "relu_s") + _per_element(res["cheetah"], "rescale_s")
    print(f"  ReLU + rescale together: time {np.median(tc) / np.median(tj):.2f}x")


def network_estimates(build: dict, nonlin: dict[str, list[dict]], n_boot: int = 2000,
                      seed: int = 0) -> list[dict]:
    """Per network, treatment of c1 and link: Jaguar and baseline seconds, the ratio and its
    95% bootstrap interval (repeats of every linear layer and the nonlinear chunks resampled)."""
    rng = np.random.default_rng(seed)
    per = {s: {k: _per_element(nonlin[s], k) for k in ("relu_s", "rescale_s", "relu_bytes",
                                                          "rescale_bytes")}
           for s in ("jaguar", "cheetah")}
    rounds = {s: (nonlin[s][0]["relu_rounds"], nonlin[s][0]["rescale_rounds"])
              for s in ("jaguar", "cheetah")}
    out = []
    for net in build["networks"]:
        layers = [(rec, c) for rec in build["layers"] for n, _, c in rec["uses"] if n == net]
        if not layers:
            continue
        counts = nonlinear_counts(net)
        full = len({tuple(rec["key"]) for rec, _ in layers}) == len(
            {(x.effective().c, x.effective().h, x.effective().c_out, x.effective().kernel,
              x.effective().stride, x.effective().pad, x.groups) for x in NETS[net]})
        for mode in ("online", "c1-offline"):
            boot = {"jaguar": np.zeros(n_boot), "cheetah": np.zeros(n_boot)}
            med = {"jaguar": 0.0, "cheetah": 0.0}
            lin_bytes = {"jaguar": 0, "cheetah": 0}
            for rec, count in layers:
                parts = {
                    "jaguar": np.array(rec["spa_c0"]) + (np.array(rec["spa_c1"])
                                                         if mode == "online" else 0)
                    + np.array(rec["client_jaguar"]),
                    "cheetah": np.array(rec["ntt_both" if mode == "online" else "ntt_c0"])
                    + np.array(rec["client_cheetah"]),
                }
                for s, v in parts.items():
                    med[s] += count * float(np.median(v))
                    idx = rng.integers(0, len(v), (n_boot, len(v)))
                    boot[s] += count * np.median(v[idx], axis=1)
                lin_bytes["jaguar"] += count * rec["ops"]["bytes_jaguar"]
                lin_bytes["cheetah"] += count * rec["ops"]["bytes_cheetah"]
            for link, (bw, rtt) in LINKS.items():
                row = {"network": net, "build": build["build"], "mode": mode, "link": link,
                       "complete": full}
                totals, boots = {}, {}
                for s in ("jaguar", "cheetah"):
                    n_rescale = counts.extend if s == "jaguar" else counts.truncate
                    pe = per[s]
                    nl_med = (counts.relu * np.median(pe["relu_s"])
                              + n_rescale * np.median(pe["rescale_s"]))
                    k = len(pe["relu_s"])
                    idx = rng.integers(0, k, (n_boot, k))
                    nl_boot = (counts.relu * np.median(pe["relu_s"][idx], axis=1)
                               + n_rescale * np.median(pe["rescale_s"][idx], axis=1))
                    nbytes = (lin_bytes[s] + counts.relu * np.median(pe["relu_bytes"])
                              + n_rescale * np.median(pe["rescale_bytes"]))
                    lat = (2 * counts.linear_layers + counts.relu_layers * rounds[s][0]
                           + counts.linear_layers * rounds[s][1])
                    net_s = 8 * nbytes / bw + lat * rtt / 2
                    totals[s] = med[s] + nl_med + net_s
                    boots[s] = boot[s] + nl_boot + net_s
                    row[f"{s}_s"] = totals[s]
                    row[f"{s}_linear_s"] = med[s]
                    row[f"{s}_nonlinear_s"] = float(nl_med)
                    row[f"{s}_MiB"] = nbytes / 2**20
                    row[f"{s}_latencies"] = lat
                ratio = boots["cheetah"] / boots["jaguar"]
                row["ratio"] = totals["cheetah"] / totals["jaguar"]
                row["ci"] = tuple(float(v) for v in np.percentile(ratio, [2.5, 97.5]))
                row["comm_ratio"] = row["cheetah_MiB"] / row["jaguar_MiB"]
                out.append(row)
    return out


def print_estimates(rows: list[dict]) -> None:
    """The total's ratio is a weighted mean of the parts' ratios (linear, nonlinear, network),
    so it lies between them whatever their relative speeds: printed beside it."""
    lo, hi = ABSTRACT["latency"]
    clo, chi = ABSTRACT["comm"]
    print(f"\n2. Per-network estimates, one 224x224 image (abstract: {lo}-{hi}x latency, "
          f"{clo}-{chi}x communication vs Cheetah; > 1: Jaguar faster/smaller)")
    print(f"  {'network':<12}{'build':<8}{'c1':<11}{'link':<5}{'Jaguar s':>9}{'(lin/nl)':>15}"
          f"{'Cheetah s':>10}{'(lin/nl)':>15}{'latency x':>10}{'95% CI':>16}{'MiB J/C':>16}"
          f"{'comm x':>8}  verdict")
    for r in rows:
        claim = ("ratio >= 2 (CI above 2)" if r["ci"][0] > 2 else
                 "no 2x claim (CI not above 2)")
        inside = lo <= r["ratio"] <= hi
        print(f"  {r['network']:<12}{r['build']:<8}{r['mode']:<11}{r['link']:<5}"
              f"{r['jaguar_s']:>9.2f}{r['jaguar_linear_s']:>8.2f}/{r['jaguar_nonlinear_s']:<6.2f}"
              f"{r['cheetah_s']:>10.2f}{r['cheetah_linear_s']:>8.2f}/{r['cheetah_nonlinear_s']:<6.2f}"
              f"{r['ratio']:>9.2f}x  [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]"
              f"{r['jaguar_MiB']:>8.0f}/{r['cheetah_MiB']:<7.0f}{r['comm_ratio']:>7.2f}x  "
              f"(linear {r['cheetah_linear_s'] / r['jaguar_linear_s']:.2f}x, nonlinear "
              f"{r['cheetah_nonlinear_s'] / r['jaguar_nonlinear_s']:.2f}x)  {claim}"
              f"{'; inside the abstract range' if inside else ''}"
              f"{'' if r['complete'] else ' (quick subset of layers)'}")


def digits_run(quick: bool, ell: int, f: int, n_images: int = 16) -> None:
    layers = train_digits_cnn(seed=0, epochs=3 if quick else 8)
    net = quantise(layers, f, (1, 8, 8))
    images = digits_data(0)[2][: 2 if quick else n_images]
    res = {s: private_inference(net, images, ProtocolConfig(system=s, ell=ell), seed=1)
           for s in ("jaguar", "cheetah")}
    print(f"\n3. Digits CNN, {len(images)} images, two processes over loopback TCP "
          "(baseline weight NTTs prepared offline):")
    for kind in ("total", "linear", "relu", "maxpool"):
        if kind == "total":
            (tj, bj, rj), (tc, bc, rc) = ((r.seconds, r.bytes, r.rounds)
                                          for r in (res["jaguar"], res["cheetah"]))
        else:
            kj, kc = res["jaguar"].by_kind()[kind], res["cheetah"].by_kind()[kind]
            (tj, bj, rj), (tc, bc, rc) = (kj.seconds, kj.bytes, kj.rounds), (kc.seconds, kc.bytes,
                                                                              kc.rounds)
        line = (f"  {kind:<8} bytes {bc / 2**20:7.2f} / {bj / 2**20:7.2f} MiB = {bc / bj:5.2f}x   "
                f"latencies {rc}/{rj}   wall {tc:6.2f}/{tj:6.2f} s = {tc / tj:5.2f}x")
        for net in NETWORKS:
            line += (f"   {net.upper()} "
                     f"{estimate_time(tc, bc, rc, net) / estimate_time(tj, bj, rj, net):5.2f}x")
        print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20,000 elements, 2 digits images")
    ap.add_argument("--linear", default="runs/jaguar_linear.json",
                    help="JSON written by benchmarks/jaguar_linear.py (one build or both)")
    ap.add_argument("--elements", type=int, default=1_000_000)
    ap.add_argument("--chunk", type=int, default=100_000)
    ap.add_argument("--skip-digits", action="store_true")
    ap.add_argument("--digits-images", type=int, default=16)
    ap.add_argument("--nonlinear", default=None,
                    help="reuse the nonlinear measurements of an earlier run's --json")
    ap.add_argument("--json", default="runs/jaguar_e2e.json")
    args = ap.parse_args()
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    ell, f = 25, 12
    total, chunk = (20_000, 4_000) if args.quick else (args.elements, args.chunk)
    if args.nonlinear:
        nonlin = json.loads(Path(args.nonlinear).read_text())["nonlinear"]
    else:
        nonlin = nonlinear_at_scale(total, chunk, ell, f)
    print_nonlinear(nonlin)
    path = Path(args.linear)
    rows: list[dict] = []
    if path.exists():
        data = json.loads(path.read_text())
        for build in data.get("builds", [data]):
            rows += network_estimates(build, nonlin)
        print_estimates(rows)
    else:
        print(f"\n2. No linear measurements at {path}: run benchmarks/jaguar_linear.py first "
              "(no per-network estimate without them).")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"nonlinear": nonlin, "estimates": rows}))
    if not args.skip_digits:
        digits_run(args.quick, ell, f, args.digits_images)


if __name__ == "__main__":
    main()

