"""GradShield benchmark: FIHS scoring throughput relative to one training step, against the
baselines' scorers, and the cost of the whole filter relative to the fine-tuning it protects.

    python benchmarks/gradshield.py            # chat-s, 1,000 examples, the attack's 150 steps
    python benchmarks/gradshield.py --quick    # chat-xs, 400 examples, 40 steps of batch 16
    python benchmarks/gradshield.py --refine 0 # the plain score (the default until session 46)

Same run, same process, 1 torch thread, deterministic kernels:

* **one training step** (batch 32, the attack protocol's settings): median of 5 steps after a
  warm-up step, with min..max;
* **scoring**: seconds to score 32 examples (median of 5 repeats after a warm-up, each on 32
  examples not scored before) by FIHS
  (GradShield), GradSafe's per-slice cosines and the MiniLM embedding margin, printed as a
  ratio to one training step;
* **the whole filter**: fitting GradShield (probe gradients, slice selection, scoring the
  benign calibration sample) plus scoring every example of one mix, against the complete
  fine-tuning run on that mix (measured, not extrapolated from steps). Batches are
  length-bucketed, so a step's cost depends on its bucket: the 5 timed steps are a sample, and
  150 steps need not cost 150 times their median.

``--refine`` (default: the library default, ``refine=1`` in the union mode, the compliance
tail only; ``--sides both --top 0.03`` is session 47's opt-in rule): with refine the fit also keeps the kept-slice gradients of
both trusted halves, and scoring keeps each example's kept-slice gradient and re-estimates the
direction per filtered set (on each tail).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import trustlab.lm as lm
from trustlab.core.runtime import torch_runtime
from trustlab.finetune import ATTACK_CONFIG, finetune
from trustlab.methods.gradshield import (
    FIHS,
    EmbeddingScorer,
    GradSafeScorer,
    GradShield,
    build_mix,
    organism_references,
)


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s [{min(values):.3f}, {max(values):.3f}]"


def _repeat(fn, chunks: list[list]) -> list[float]:
    """Seconds of ``fn(chunk)`` per chunk after a warm-up on the first: every repeat scores
    examples it has not seen (the embedding scorer memoises texts)."""
    fn(chunks[0])  # warm-up
    out = []
    for chunk in chunks[1:]:
        start = time.perf_counter()
        fn(chunk)
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="chat-xs, 400 examples, 40 steps")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument(
        "--refine",
        type=int,
        choices=(0, 1, 2),
        default=None,
        help="GradShield's refine (default: the library default, 1)",
    )
    parser.add_argument(
        "--sides",
        choices=("both", "upper"),
        default="upper",
        help="GradShield's refine_sides (default: upper, the library default)",
    )
    parser.add_argument(
        "--top",
        type=float,
        default=0.0,
        help="GradShield's refine_top (default: 0, the library default)",
    )
    args = parser.parse_args()
    spec = "organism:chat-xs" if args.quick else "organism:chat-s"
    n, steps, batch = (400, 40, 16) if args.quick else (1000, 150, 32)
    torch.manual_seed(0)
    with torch_runtime(1):
        model = lm.load(spec)
        refs = organism_references(32, 128 if args.quick else 256, seed=0)
        mix = build_mix("explicit", 0.05, n, seed=0)
        data = list(mix.examples)
        chunks = [data[32 * i : 32 * (i + 1)] for i in range(6)]  # a warm-up and 5 repeats
        print(
            f"{spec}; threads 1; kernel {torch.backends.cpu.get_cpu_capability()}; "
            f"refine {'default (1)' if args.refine is None else args.refine}, "
            f"sides {args.sides}, top {args.top:g}"
        )

        step_cfg = ATTACK_CONFIG.model_copy(update={"steps": 6, "batch_size": 32, "threads": 1})
        copy = lm.load(spec)
        step_s: list[float] = []
        finetune(copy, data, step_cfg, callbacks=[lambda info: step_s.append(info.seconds)])
        step_s = step_s[1:]
        step = statistics.median(step_s)
        print(f"one training step (batch 32): {_summary(step_s)}")

        start = time.perf_counter()
        shield = GradShield(FIHS(slice_fraction=0.01), refine=args.refine, refine_top=args.top,
                            refine_sides=args.sides).fit(model, refs)  # fmt: skip
        fit_s = time.perf_counter() - start
        gradsafe = GradSafeScorer().fit(model, list(refs.harmful), list(refs.benign_slices))
        embedder = None
        if args.embedder == "hashing":
            from trustlab.embed import HashingEmbedder

            embedder = HashingEmbedder()
        emb = EmbeddingScorer(embedder).fit(list(refs.harmful), list(refs.benign_slices))
        rows = [
            ("GradShield (FIHS)", _repeat(lambda c: shield.filter(model, c), chunks)),
            ("GradSafe (per-slice cosines)", _repeat(lambda c: gradsafe.score(model, c), chunks)),
            (f"embedding margin ({args.embedder})", _repeat(emb.score, chunks)),
        ]
        print("\n| scorer | 32 examples | examples/s | 32 scores / one training step |")
        print("|---|---|---|---|")
        for name, secs in rows:
            med = statistics.median(secs)
            print(f"| {name} | {_summary(secs)} | {32 / med:.0f} | {med / step:.2f} |")

        start = time.perf_counter()
        result = shield.filter(model, data)
        score_s = time.perf_counter() - start
        kept = result.kept(data)
        ft_cfg = ATTACK_CONFIG.model_copy(update={"steps": steps, "batch_size": batch})
        start = time.perf_counter()
        finetune(lm.load(spec), kept, ft_cfg)
        ft_s = time.perf_counter() - start
    print(
        f"\nwhole filter on {n} examples: fit {fit_s:.1f} s + score {score_s:.1f} s = "
        f"{fit_s + score_s:.1f} s; fine-tuning it protects ({steps} steps of batch {batch} on "
        f"{len(kept)} kept examples): {ft_s:.1f} s; filter / fine-tuning = "
        f"{(fit_s + score_s) / ft_s:.2f}"
    )
    print(f"removed {result.n_removed} of {n} ({sum(mix.harmful)} harmful)")


if __name__ == "__main__":
    main()
