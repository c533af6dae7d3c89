"""Benchmark of research-net: time per optimisation step vs one forward evaluation.

For n = 100, 1,000 and 5,000 agents (complete support at 100, sparse random support with
k candidate links per agent above) and each formulation, prints the wall time of one forward
evaluation of total knowledge (the baseline, measured in the same process) and the time of
one optimisation step (forward + backward + Adam) as a ratio of it.

    python benchmarks/research_net.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from trustlab.methods.research_net import ResearchModel, Support, softmax_budget


def _time(fn, repeats: int) -> float:
    fn()  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def _measure(model: ResearchModel, support: Support, repeats: int) -> tuple[float, float]:
    """Seconds per forward evaluation and per optimisation step (forward, backward, Adam)."""
    ts = torch.zeros(support.n, dtype=torch.float64, requires_grad=True)
    te = torch.zeros(support.n_edges, dtype=torch.float64, requires_grad=True)
    te.data.normal_(0, 0.5, generator=torch.Generator().manual_seed(0))
    opt = torch.optim.Adam([ts, te], lr=0.05)

    def forward() -> None:
        with torch.no_grad():
            model.total_knowledge(softmax_budget(ts, te, support))

    def step() -> None:
        opt.zero_grad()
        (-model.total_knowledge(softmax_budget(ts, te, support))).backward()
        opt.step()

    return _time(forward, repeats), _time(step, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 100 and 1,000 only")
    args = parser.parse_args()
    torch.set_num_threads(1)
    sizes = [100, 1000] if args.quick else [100, 1000, 5000]
    rng = np.random.default_rng(0)
    print(f"{'formulation':<10} {'n':>5} {'links':>7} {'forward ms':>11} {'step ms':>9} {'step/fwd':>9}")
    for n in sizes:
        support = Support.complete(n) if n <= 100 else Support.random_sparse(n, 20, rng)
        for formulation in ("one_hop", "diffusion", "coverage"):
            model = ResearchModel(formulation=formulation, n_ideas=24, idea_affinity=0.05)
            repeats = 20 if n <= 1000 else 5
            fwd, stp = _measure(model, support, repeats)
            print(f"{formulation:<10} {n:>5} {support.n_edges:>7} {1e3 * fwd:>11.2f} "
                  f"{1e3 * stp:>9.2f} {stp / fwd:>9.2f}")


if __name__ == "__main__":
    main()
