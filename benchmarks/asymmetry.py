"""Throughput of asymmetry's transforms and of the evaluation loop on transformed prompts.

    python benchmarks/asymmetry.py [--quick] [--model organism:chat-xs] [--repeats 5]

1. **Encode/decode throughput per transform** (characters of plain text per second) on the
   organisms' held-out prompts (ASCII English, so every transform's domain holds them), against
   a baseline measured in the same run: ``str.translate`` with an empty table (one pass over the
   text that changes nothing, the floor any Python-level transform pays). The ratio says how
   many times slower than that floor each transform is.
2. **Evaluation throughput transformed vs plain**: ``trustlab.lm.evaluate`` on the same model
   and prompts (held-out tasks and harmful requests, exact match and refusal judges, greedy,
   24 new tokens), plain and under each word-level transform (what a grown organism reads),
   early stopping as the loop decides (on for plain; off under a transform unless it is
   ``prefix_safe``). Replies per second, and the ratio transformed / plain.

One torch thread; a warm-up run first; ``--repeats`` alternating runs; medians with the spread
(min-max). Timings taken on a shared machine are comparable only as ratios within one run.
"""

from __future__ import annotations

import argparse
import statistics
import time


def _median_spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f})"


def transform_throughput(texts: list[str], repeats: int) -> list[dict]:
    from trustlab.methods.asymmetry import TRANSFORMS, make_transform, vocabulary_substitution

    vocab = {f"\u2581{w}": i for i, w in enumerate(sorted({w for t in texts for w in t.split()
                                                          if w.isalpha()}))}  # fmt: skip
    n_chars = sum(len(t) for t in texts)
    empty = str.maketrans({})

    def baseline() -> None:
        for t in texts:
            t.translate(empty)

    rows = []
    for name in sorted(TRANSFORMS):
        tr = vocabulary_substitution(vocab, key=0) if name == "word_substitution" else make_transform(name)
        encoded = [tr.encode(t) for t in texts]
        assert [tr.decode(e) for e in encoded] == texts
        enc_rate, dec_rate, base_rate = [], [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            baseline()
            t1 = time.perf_counter()
            for t in texts:
                tr.encode(t)
            t2 = time.perf_counter()
            for e in encoded:
                tr.decode(e)
            t3 = time.perf_counter()
            base_rate.append(n_chars / (t1 - t0))
            enc_rate.append(n_chars / (t2 - t1))
            dec_rate.append(n_chars / (t3 - t2))
        rows.append({
            "transform": name, "level": tr.level, "encode": enc_rate, "decode": dec_rate,
            "baseline": base_rate,
            "slowdown_encode": statistics.median(base_rate) / statistics.median(enc_rate),
            "slowdown_decode": statistics.median(base_rate) / statistics.median(dec_rate),
        })  # fmt: skip
    return rows


def evaluation_throughput(model_spec: str, n: int, repeats: int) -> list[dict]:
    import torch

    import trustlab.lm as lm
    from trustlab.datasets.prompt_sets import organism_prompt_set
    from trustlab.methods.asymmetry import ForEvaluation, make_transform, vocabulary_substitution

    torch.set_num_threads(1)
    model = lm.load(model_spec)
    sets = [organism_prompt_set("task", n=n), organism_prompt_set("harmful", n=n)]
    refusal = lm.RefusalJudge()
    judges = {sets[0].name: [lm.ExactMatchJudge()], sets[1].name: [refusal]}
    levels = {
        "plain": None,
        "word_substitution": ForEvaluation(vocabulary_substitution(model.tokenizer, key=0)),
        "word_reverse": ForEvaluation(make_transform("word_reverse")),
    }
    decoding = lm.Decoding(max_new_tokens=24)
    n_prompts = sum(len(s) for s in sets)
    for level in levels.values():  # warm-up
        lm.evaluate({"m": model}, sets, judges, transforms={"x": level} if level else None,
                    decoding=decoding)  # fmt: skip
    rates: dict[str, list[float]] = {k: [] for k in levels}
    for _ in range(repeats):
        for name, level in levels.items():
            t0 = time.perf_counter()
            lm.evaluate({"m": model}, sets, judges,
                        transforms={name: level} if level else None, decoding=decoding)  # fmt: skip
            rates[name].append(n_prompts / (time.perf_counter() - t0))
    base = statistics.median(rates["plain"])
    return [{"transform": k, "replies_per_s": v, "ratio_vs_plain": statistics.median(v) / base}
            for k, v in rates.items()]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer prompts and repeats")
    parser.add_argument("--model", default="organism:chat-xs", help="model of the loop timing")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from trustlab.datasets.prompt_sets import organism_prompt_set

    repeats = 3 if args.quick else args.repeats
    ps = organism_prompt_set("task")
    texts = [ps.instruction(i) for i in range(len(ps))] * (2 if args.quick else 20)
    print(f"## Transforms: {sum(len(t) for t in texts):,} characters, {repeats} repeats, "
          "characters per second, median (min-max)")  # fmt: skip
    print(f"{'transform':<18} {'level':<9} {'encode':>26} {'decode':>26} "
          "  times slower than the baseline (encode / decode)")  # fmt: skip
    rows = transform_throughput(texts, repeats)
    for r in rows:
        print(f"{r['transform']:<18} {r['level']:<9} {_median_spread(r['encode']):>26} "
              f"{_median_spread(r['decode']):>26} "
              f"{r['slowdown_encode']:>20.1f} / {r['slowdown_decode']:.1f}")  # fmt: skip
    base = [x for r in rows for x in r["baseline"]]
    print(f"baseline str.translate(<empty table>): {_median_spread(base)} chars/s (all runs)")
    n = 40 if args.quick else 150
    print(f"\n## Evaluation loop on {args.model}: {2 * n} prompts (tasks + harmful), "
          f"replies per second, median (min-max), {repeats} repeats")  # fmt: skip
    for r in evaluation_throughput(args.model, n, repeats):
        print(f"{r['transform']:<18} {_median_spread(r['replies_per_s']):>20}   "
              f"x{r['ratio_vs_plain']:.2f} of plain")  # fmt: skip


if __name__ == "__main__":
    main()
