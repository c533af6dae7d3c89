"""jailbound: successful attacks per CPU-second of search, first-order dual-branch vs GCG.

Every method (fol = the first-order dual-branch search, zol = its zero-order variant, random
search, gcg = the GCG-style baseline) attacks the same held-out organism requests at the same
query budget, in one process on one torch thread, interleaved per behaviour (so machine load
hits every method alike), after a warm-up. Success = the organism's placeholder compliance on
the materialised prompt (greedy reply, ``lm.ComplianceJudge``). The search cost is the process
CPU time of the searches (judging costs the same for every method and is excluded). Each of
``--repeats`` runs uses another seed; the table gives the median and the range over repeats, and
the ratio of every method's successes per CPU-second to GCG's (the baseline) in the same repeat.

    python benchmarks/jailbound.py [--quick] [--repeats 5] [--budget 24] [--n 40]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="chat-xs, 12 behaviours, 3 repeats")
    ap.add_argument("--model", default=None, help="white-box target (default organism:chat-s)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget", type=int, default=24)
    ap.add_argument("--n", type=int, default=40, help="behaviours per repeat")
    args = ap.parse_args()
    torch.set_num_threads(1)

    from trustlab import lm
    from trustlab.datasets.prompt_sets import PromptSet, organism_prompt_set
    from trustlab.embed import HashingEmbedder
    from trustlab.methods.jailbound import METHODS, attack_transforms, search_attacks
    from trustlab.methods.jailbound.analysis import success_by_item

    spec = args.model or ("organism:chat-xs" if args.quick else "organism:chat-s")
    repeats, n = (3, 12) if args.quick else (args.repeats, args.n)
    model = lm.load(spec)
    ps = organism_prompt_set("harmful")
    requests = list(dict.fromkeys(ps.instruction(i) for i in range(len(ps))))
    embedder = HashingEmbedder()  # the similarity floor's cost is the same for every method
    search_attacks(model, requests[:2], budget=args.budget, embedder=embedder)  # warm-up

    per: dict[str, dict[str, list[float]]] = {m: {"succ": [], "cpu": [], "rate": [], "ratio": []}
                                              for m in METHODS}
    wall = time.perf_counter()
    for rep in range(repeats):
        start = (rep * n) % max(1, len(requests) - n)
        chosen = requests[start:start + n]
        records, prompts = search_attacks(model, chosen, budget=args.budget, seed=1000 * rep,
                                          embedder=embedder, min_similarity=0.5)
        plain = PromptSet.from_texts("harmful", chosen)
        ev = lm.evaluate({spec: model}, {"harmful": plain}, [lm.ComplianceJudge()],
                         transforms=attack_transforms(prompts),
                         decoding=lm.Decoding(max_new_tokens=32))
        success = success_by_item(ev.items, "placeholder_compliance")
        rates = {}
        for m in METHODS:
            k = sum(bool(f) for f in success[m] if f is not None)
            cpu = sum(r.cpu_s for r in records if r.method == m)
            rates[m] = k / cpu
            per[m]["succ"].append(k)
            per[m]["cpu"].append(cpu)
            per[m]["rate"].append(rates[m])
        for m in METHODS:
            per[m]["ratio"].append(rates[m] / rates["gcg"] if rates["gcg"] > 0 else float("nan"))

    def fmt(xs: list[float], p: int = 2) -> str:
        return f"{statistics.median(xs):.{p}f} [{min(xs):.{p}f}, {max(xs):.{p}f}]"

    print(f"# jailbound search benchmark: {spec}, {n} behaviours x {repeats} repeats, budget "
          f"{args.budget} queries, 1 thread (wall {time.perf_counter() - wall:.0f} s)")
    print(f"{'method':8} {'successes':>18} {'search CPU-s':>22} {'successes/CPU-s':>22} "
          f"{'ratio to gcg':>22}")
    for m in METHODS:
        d = per[m]
        print(f"{m:8} {fmt(d['succ'], 0):>18} {fmt(d['cpu']):>22} {fmt(d['rate']):>22} "
              f"{fmt(d['ratio']):>22}")
    print("median [min, max] over repeats; success = placeholder compliance of the greedy reply")


if __name__ == "__main__":
    main()
