"""Replies per second of the evaluation loop (``lm.evaluate``) against ``HFChatModel.generate``
as it was before the loop existed (``transformers``' ``generate``, batches of 16 sorted by
length), on the same prompts and the same model, and the speed-up of a second run served from
the reply cache.

    python benchmarks/lm_eval.py [--quick] [--model organism:chat-xs] [--repeats 5]

Prompts: the organisms' held-out harmful, jailbreak and task sets (600 by default; ``--quick``
150), judged for refusal, placeholder compliance and exact match; 48 new tokens at most (the
organism cards' budget). Three loop settings are timed: early stopping on (the default), early
stopping off (the decoder alone: KV cache, finished rows leaving the batch), and a warm reply
cache. Each side runs with one torch thread, after a warm-up, alternating baseline and loop
``--repeats`` times; medians and the spread (min-max) are printed, and the ratio of medians.
Both sides are greedy and the verdicts they give are checked to agree prompt by prompt.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time


def _baseline_generate(lm, convs, max_new_tokens: int, batch_size: int = 16) -> list[str]:
    """HFChatModel.generate before the loop: transformers' generate, greedy, length-sorted."""
    import torch
    from transformers import GenerationConfig

    config = GenerationConfig(
        max_new_tokens=max_new_tokens, do_sample=False, top_p=1.0,
        pad_token_id=lm.pad_token_id, eos_token_id=lm.eos_token_ids or None,
    )  # fmt: skip
    ids = lm.tokenize(convs)
    out = [""] * len(convs)
    order = sorted(range(len(convs)), key=lambda i: len(ids[i]))
    with torch.no_grad():
        for s in range(0, len(order), batch_size):
            chunk = order[s : s + batch_size]
            batch = lm.pad([ids[i] for i in chunk], "left")
            gen = lm.model.generate(
                input_ids=batch.input_ids,
                attention_mask=batch.attention_mask,
                generation_config=config,
            )
            new = gen[:, batch.input_ids.shape[1] :]
            for row, i in enumerate(chunk):
                out[i] = lm.tokenizer.decode(new[row], skip_special_tokens=True).strip()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--model", default="organism:chat-xs")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--batch-size", type=int, default=256, help="rows per batch of the loop")
    args = ap.parse_args()

    from trustlab import lm
    from trustlab.core.runtime import torch_runtime
    from trustlab.datasets.prompt_sets import load_prompt_set

    n = 50 if args.quick else 200
    sets = [load_prompt_set(f"organism:{k}", n=n) for k in ("harmful", "jailbreak", "task")]
    judges = [lm.RefusalJudge(), lm.ComplianceJudge(), lm.ExactMatchJudge()]
    model = lm.load(args.model)
    convs = [lm.formatting.as_conversation(p) for s in sets for p in s.prompts]
    total = len(convs)
    dec = lm.Decoding(max_new_tokens=args.max_new_tokens)
    dec_full = lm.Decoding(max_new_tokens=args.max_new_tokens, stop_early=False)

    def loop(decoding, cache_dir=None):
        return lm.evaluate({"m": model}, sets, judges, decoding=decoding, cache_dir=cache_dir,
                           batch_size=args.batch_size, keep_text=True)  # fmt: skip

    times: dict[str, list[float]] = {"baseline": [], "loop": [], "loop_no_early_stop": []}
    with torch_runtime(threads=1):
        base_replies = _baseline_generate(model, convs[:32], args.max_new_tokens)  # warm-up
        loop(dec)
        for _ in range(args.repeats):
            t = time.perf_counter()
            base_replies = _baseline_generate(model, convs, args.max_new_tokens)
            times["baseline"].append(time.perf_counter() - t)
            t = time.perf_counter()
            res = loop(dec)
            times["loop"].append(time.perf_counter() - t)
            t = time.perf_counter()
            full = loop(dec_full)
            times["loop_no_early_stop"].append(time.perf_counter() - t)
        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            loop(dec, tmp)
            cold = time.perf_counter() - t
            warm = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                hit = loop(dec, tmp)
                warm.append(time.perf_counter() - t)
            assert hit.stats["generated"] == 0, hit.stats

    # the same verdicts, prompt by prompt: the full-length loop replies equal the baseline's,
    # and the early-stopped replies give the same verdicts
    full_replies = [it["reply"] for it in full.items if it["judge"] == "refusal"]
    same_text = sum(a == b for a, b in zip(full_replies, base_replies, strict=True))
    refusal = lm.RefusalJudge()
    early = [it["value"] for it in res.items if it["judge"] == "refusal"]
    agree = sum(a == refusal.is_refusal(b) for a, b in zip(early, base_replies, strict=True))

    def show(name: str, xs: list[float]) -> float:
        med = statistics.median(xs)
        print(f"{name:<34} {total / med:9.1f} replies/s   median {med:7.3f} s "
              f"(min {min(xs):.3f}, max {max(xs):.3f}, n={len(xs)})")  # fmt: skip
        return med

    print(f"model {args.model}, {total} prompts ({', '.join(s.name for s in sets)}), "
          f"max {args.max_new_tokens} new tokens, 1 thread, {args.repeats} alternating repeats")  # fmt: skip
    b = show("HFChatModel.generate (before)", times["baseline"])
    lo = show("lm.evaluate, early stopping", times["loop"])
    lf = show("lm.evaluate, no early stopping", times["loop_no_early_stop"])
    print(f"{'lm.evaluate, cold cache (1 run)':<34} {total / cold:9.1f} replies/s")
    w = show("lm.evaluate, warm reply cache", warm)
    print(
        f"speed-up of the loop over the former generate: x{b / lo:.2f} "
        f"(decoder alone, no early stopping: x{b / lf:.2f})"
    )
    print(f"cache-hit speed-up (second run vs the loop without cache): x{lo / w:.1f}")
    print(
        f"check: full-length replies equal to the baseline's {same_text}/{total}; refusal "
        f"verdicts with early stopping equal {agree}/{total}"
    )


if __name__ == "__main__":
    main()
