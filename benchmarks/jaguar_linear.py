"""Benchmark: SPA-Conv (power-of-two ring) vs the NTT baseline (Cheetah-style), same process.

    python benchmarks/jaguar_linear.py [--quick] [--out-channels 16]

For each conv shape of ResNet-18 and MobileNetV2 (ImageNet, N=4096) it prints the server's
online time of SPA-Conv and of the NTT baseline for the *full* layer, and the bytes each sends.
Both costs are ``a + b * C_out`` (per-input work: SPA's rotations, the baseline's forward NTTs;
per-output work: GEMM rows, pointwise products and inverse NTTs), so each layer is timed at
``c`` and ``2c`` output channels (``--out-channels``) and the line is extrapolated to the full
C_out; running every channel would need the baseline's offline kernel NTTs for all of them
(minutes and GiBs). The baseline's kernel NTTs are excluded from its time, which favours it. Layers whose padded input row
is wider than N/kernel (the 224x224 stems) are skipped for timing, as noted.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from trustlab.methods.jaguar import (
    CheetahClient,
    JaguarClient,
    Sampler,
    cheetah_params,
    jaguar_params,
)
from trustlab.methods.jaguar.comparison import (
    MOBILENETV2_CONVS,
    RESNET18_CONVS,
    communication,
    run_layer,
)


def _extrapolate(t_small: float, t_large: float, c: int, c_full: int) -> float:
    """Time at ``c_full`` channels from times at ``c`` and ``2c`` (clamped to be increasing)."""
    per_channel = max(t_large - t_small, 0.0) / c
    fixed = max(t_small - per_channel * c, 0.0)
    return fixed + per_channel * c_full


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two layers, 8/16 output channels")
    parser.add_argument("--out-channels", type=int, default=16)
    args = parser.parse_args()
    c_out = 8 if args.quick else args.out_channels

    jp = jaguar_params()
    cp = cheetah_params(ell=jp.ell_in)
    sampler = Sampler.seeded(0)
    jclient = JaguarClient(jp, sampler).keygen()
    cclient = CheetahClient(cp, sampler).keygen()
    rng = np.random.default_rng(0)
    layers = [("resnet18", s) for s in RESNET18_CONVS] + [("mobilenetv2", s)
                                                          for s in MOBILENETV2_CONVS]
    if args.quick:
        layers = [layers[1], layers[6]]
    print(f"Jaguar N={jp.n} q=2^{jp.k} ell_in={jp.ell_in} s={jp.shift} answer 2^{jp.response_bits}"
          f" | baseline log2 q={cp.log_q:.1f} ({len(cp.primes)} primes) answer 2^{cp.response_bits}")
    print(f"{'net':<12}{'layer':<22}{'SPA s':>8}{'NTT s':>8}{'speedup':>9}"
          f"{'Jaguar MB':>11}{'Cheetah MB':>11}{'comm x':>8}")
    ratios3, ratios_all = [], []
    total_j = total_c = 0
    for net, shape in layers:
        comm = communication(shape, jp, cp)
        bj = comm["jaguar_query"] + comm["jaguar_response"]
        bc = comm["cheetah_query"] + comm["cheetah_response"]
        total_j, total_c = total_j + bj, total_c + bc
        if shape.h >= 224:
            print(f"{net:<12}{shape.name:<22}{'(timing skipped: 224-wide rows)':>25}"
                  f"{bj / 1e6:>11.2f}{bc / 1e6:>11.2f}{bc / bj:>8.2f}")
            continue
        start = time.perf_counter()
        small = run_layer(shape, jclient, cclient, rng, 11, c_out)
        large = run_layer(shape, jclient, cclient, rng, 11, 2 * c_out)
        for run in (small, large):
            assert run.exact_cheetah and np.all(np.abs(run.truncation_errors) <= 1)
        t_j = _extrapolate(small.jaguar_eval_s, large.jaguar_eval_s, c_out, shape.c_out)
        t_c = _extrapolate(small.cheetah_eval_s, large.cheetah_eval_s, c_out, shape.c_out)
        speed = t_c / t_j
        ratios_all.append(speed)
        if shape.kernel == 3:
            ratios3.append(speed)
        print(f"{net:<12}{shape.name:<22}{t_j:>8.2f}{t_c:>8.2f}"
              f"{speed:>8.2f}x{bj / 1e6:>11.2f}{bc / 1e6:>11.2f}{bc / bj:>8.2f}"
              f"   ({time.perf_counter() - start:.0f} s)")
    geo = lambda xs: float(np.exp(np.mean(np.log(xs)))) if xs else float("nan")  # noqa: E731
    print(f"\nSPA-Conv speedup over the NTT baseline (server, online, full C_out): 3x3 layers geomean "
          f"{geo(ratios3):.2f}x, all timed layers {geo(ratios_all):.2f}x")
    print(f"Communication of the linear layers listed: Cheetah / Jaguar = {total_c / total_j:.2f}x")


if __name__ == "__main__":
    main()
