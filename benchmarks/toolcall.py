"""toolcall throughput: pairs/s for μΔ extraction and for head patching, each against a baseline
measured in the same run.

* **μΔ extraction** — :meth:`ToolDirection.fit` (every layer and the last ``n_positions`` tokens
  read by hooks in one batched forward per chunk, only running sums kept) against the same code
  with one prompt per forward (``batch_size=1``): the batching is what is measured, the hook
  and reduction code is the same on both sides.
* **Head patching** — :func:`patch_components` over every ``resid_pre``/``attn_out``/``mlp_out``
  and head (rows = pairs × components, many per forward; both directions) against the same call
  with one (pair, component) row per forward pass.

Both sides run in the same process on the same pairs, single-threaded (``--threads``), after a
warm-up, alternating, ``--repeats`` times (median and min–max spread printed). Times are the
process's CPU seconds (``time.process_time``), not wall seconds: on a shared machine the wall
clock measures the neighbours; with one thread the CPU time is the work done. The model is the
tool organism named by ``--organism`` (``tool-xs`` by default: built in under a minute).

    python benchmarks/toolcall.py [--quick] [--organism tool-s] [--threads 1] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from trustlab import lm
from trustlab.core.runtime import torch_runtime
from trustlab.methods.toolcall import (
    ToolDecision,
    ToolDirection,
    organism_pairs,
    patch_components,
)


def paired(
    base: Callable[[], object], case: Callable[[], object], repeats: int
) -> tuple[list[float], list[float], list[float]]:
    """Times of ``base`` and ``case`` run alternately after a warm-up, and per-repeat ratios
    ``base / case`` (the speed-up of ``case``)."""
    base(), case()
    tb, tc, ratios = [], [], []
    for _ in range(repeats):
        t0 = time.process_time()
        base()
        t1 = time.process_time()
        case()
        t2 = time.process_time()
        tb.append(t1 - t0)
        tc.append(t2 - t1)
        ratios.append((t1 - t0) / (t2 - t1))
    return tb, tc, ratios


def _line(name: str, n: int, tb: list[float], tc: list[float], ratios: list[float]) -> str:
    rate_b = n / statistics.median(tb)
    rate_c = n / statistics.median(tc)
    return (
        f"{name:<18} {rate_c:>10.1f} pairs/s (baseline {rate_b:8.1f} pairs/s)   "
        f"speed-up x{statistics.median(ratios):.2f} [min {min(ratios):.2f}, max {max(ratios):.2f}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer pairs and repeats")
    parser.add_argument("--organism", default="tool-xs", help="tool organism (tool-xs, tool-s)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (default 5)")
    args = parser.parse_args()
    with torch_runtime(args.threads):
        run(args)


def run(args: argparse.Namespace) -> None:
    n_fit, n_patch = (64, 4) if args.quick else (256, 16)
    repeats = args.repeats or (3 if args.quick else 5)
    model = lm.load(f"organism:{args.organism}")
    pairs = list(organism_pairs(n_fit, 10, seed=0).analysis)
    decision = ToolDecision(model, batch_size=64)
    n_comp = 3 * model.n_layers + model.n_layers * (model.adapter.n_heads or 0)
    print(
        f"toolcall benchmark: organism {args.organism} ({model.n_layers} layers, "
        f"d_model {model.d_model}), threads {args.threads}, {repeats} repeats, median "
        "CPU seconds"
    )

    def fit_batched() -> object:
        return ToolDirection(n_positions=4, batch_size=64).fit(model, pairs)

    def fit_single() -> object:
        return ToolDirection(n_positions=4, batch_size=1).fit(model, pairs)

    a = fit_batched().mu_delta_
    b = fit_single().mu_delta_
    err = float((a - b).abs().max())
    tb, tc, ratios = paired(fit_single, fit_batched, repeats)
    print(_line("mu_delta extract", len(pairs), tb, tc, ratios))
    print(f"{'':<18} (both sides agree: max |Δμ| = {err:.1e}; {2 * len(pairs)} prompts)")

    few = pairs[:n_patch]

    def patch_batched() -> object:
        return patch_components(decision, few)

    slow = ToolDecision(model, batch_size=1)

    def patch_single() -> object:
        # the same call, one (pair, component) row per forward pass
        from trustlab.methods.toolcall.readout import default_components

        comps = default_components(model)
        ex = [p.execution for p in few]
        an = [p.analysis for p in few]
        call0, prose0 = slow.first_tokens(an)
        lm.patch_activations(model, ex, an, comps, (call0, prose0), batch_size=1)
        call0, prose0 = slow.first_tokens(ex)
        return lm.patch_activations(model, an, ex, comps, (call0, prose0), batch_size=1)

    d1 = patch_batched().noise.patched
    d2 = patch_single().patched
    err = float((d1 - d2).abs().max())
    tb, tc, ratios = paired(patch_single, patch_batched, repeats)
    print(_line("head patching", len(few), tb, tc, ratios))
    print(
        f"{'':<18} ({n_comp} components x 2 directions per pair; both sides agree: "
        f"max |Δ logit| = {err:.1e})"
    )


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
