"""Benchmark: time to compute each IPB boundary relative to its IPM, for n = 1k, 10k, 100k.

Run ``python benchmarks/ipb.py [--quick]``. Pairs: P = N(0, I_2), Q = N((1, 0), I_2).

* tests: ``TestBoundary`` with a fixed score (ROC hull + CP band) vs the TV/KS statistic
  (``scipy.stats.ks_2samp`` on the same scores);
* bounded Lipschitz: ``LipschitzBoundary`` (grid of LPs, 1-D chain) vs the one slope-1 LP (the IPM);
* RKHS ball: ``KernelBoundary`` (Gram means + closed form) vs the MMD from the same Gram means
  (both subsample to 5000 points per sample).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from trustlab.methods.ipb import (
    KernelBoundary,
    LipschitzBoundary,
    TestBoundary,
    lipschitz_edges,
    lipschitz_lp,
)
from trustlab.methods.ipb.kernel import _mean_kernel


def _time(fn, repeat: int = 1) -> float:
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _bench(n: int, quick: bool, rng: np.random.Generator) -> None:
    x_p = rng.normal(size=(n, 2))
    x_q = rng.normal(size=(n, 2)) + np.array([1.0, 0.0])

    def score(x):
        return x[:, 0]

    s_p, s_q = score(x_p), score(x_q)
    tb = _time(lambda: TestBoundary(score=score).fit(x_p, x_q))
    ks = _time(lambda: stats.ks_2samp(s_p, s_q))
    print(f"{'tests':<12}{n:>8}{tb:>12.4f}{ks:>10.4f}{tb / ks:>8.1f}")

    n_lip = min(n, 2000 if quick else 10000)  # 1-D chain LP: exact
    lp, lq = x_p[:n_lip, 0], x_q[:n_lip, 0]
    lb = _time(lambda: LipschitzBoundary(n_rademacher=0, n_grid=25).fit(lp, lq))
    z = np.r_[lp, lq][:, None]
    c = np.r_[np.full(n_lip, -1.0 / n_lip), np.full(n_lip, 1.0 / n_lip)]
    ipm = _time(lambda: lipschitz_lp(c, lipschitz_edges(z), 1.0))
    print(f"{'lipschitz':<12}{n_lip:>8}{lb:>12.4f}{ipm:>10.4f}{lb / ipm:>8.1f}")

    m = min(n, 5000)
    kp, kq = x_p[:m], x_q[:m]
    kb = _time(lambda: KernelBoundary(bandwidth=1.0, max_points=5000).fit(kp, kq))

    def mmd():
        a, b, cc = _mean_kernel(kp, kp, 1.0), _mean_kernel(kq, kq, 1.0), _mean_kernel(kp, kq, 1.0)
        return np.sqrt(a + b - 2 * cc)

    km = _time(mmd)
    print(f"{'rkhs':<12}{m:>8}{kb:>12.4f}{km:>10.4f}{kb / km:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="n = 1k and 10k only, smaller LPs")
    args = parser.parse_args()
    sizes = [1000, 10000] if args.quick else [1000, 10000, 100000]
    rng = np.random.default_rng(0)
    print(f"{'class':<12}{'n':>8}{'boundary s':>12}{'IPM s':>10}{'ratio':>8}")
    for n in sizes:
        _bench(n, args.quick, rng)


if __name__ == "__main__":
    main()
