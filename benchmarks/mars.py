"""MARS per-token overhead: greedy generation with MARS steering against the same generation
unsteered, on the same image prompts, in the same run.

What MARS adds at inference: one forward pass of each prompt up to the chosen layer (the
position between the centroids, hence the gate and the strength), then the edit, a hook that
adds one vector at the last prompt position in the prefill (the hook is still called at every
decoding step and adds nothing there). The baseline is :func:`trustlab.lm.generate_rows`
unsteered; the case is ``MARS.deltas`` plus ``generate_rows`` with the per-row steering. Both
sides decode the same prompts with the same decoder (KV cache, ``max_new_tokens``, no early
stopping), single-threaded (``--threads``), after a warm-up, alternating, ``--repeats`` times;
times are the process's CPU seconds (``time.process_time``: on a shared machine the wall clock
measures the neighbours). Per-token cost = CPU time / tokens generated (replies re-tokenised),
so replies that differ in length under steering are compared fairly; the ratio of per-token
costs is the overhead. The gate's share (``MARS.deltas`` alone) is printed beside it. Two more
cases memoise the vision tower's output within each call (``MemoTower``, emptied before every
call), unsteered and with MARS: the decoder itself reads each image twice (prompt lengths, then
the prefill) and MARS's gate a third time, so the ratio of these two is what MARS costs once
every image is encoded once.

The fit (typed prompts, neutral images, layer selection) is a one-off and not timed.

    python benchmarks/mars.py [--quick] [--organism vlm-s] [--threads 1] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from trustlab import lm
from trustlab.core.runtime import torch_runtime
from trustlab.lm.decoding import Steering, generate_rows
from trustlab.methods.mars import MARS, neutral_prompts
from trustlab.methods.mars.study import MemoTower


def _prompts(model, n: int):
    from trustlab.organisms import build_chat_corpus
    from trustlab.organisms.vlm_data import CANVAS, build_vision_corpus

    chat = build_chat_corpus(0, n_train=1200, n_heldout=max(100, n))
    train = [e for e in chat.examples if e.split == "train"]
    harm = [e.messages() for e in train if e.kind == "harmful"]
    safe = [e.messages() for e in train if e.kind in ("task", "howto")]
    vis = build_vision_corpus(chat, model.tokenizer, seed=11, n_train=0, n_heldout=n)
    images = [e.messages() for e in vis if e.kind in ("image_harmful", "image_task")][:n]
    neutral = neutral_prompts(["Describe the image.", "Answer the request in the image."], 16,
                              seed=0, size=CANVAS)  # fmt: skip
    return harm, safe, neutral, images


def _tokens(model, replies: list[str]) -> int:
    return sum(len(model.tokenizer(r, add_special_tokens=False)["input_ids"]) + 1 for r in replies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer prompts and repeats")
    parser.add_argument("--organism", default="vlm-xs", help="vision organism (vlm-xs, vlm-s)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (default 5)")
    parser.add_argument("--tokens", type=int, default=24, help="max new tokens per reply")
    args = parser.parse_args()
    with torch_runtime(args.threads):
        run(args)


def run(args: argparse.Namespace) -> None:
    n = 16 if args.quick else 64
    repeats = args.repeats or 5
    model = lm.load(f"organism:{args.organism}")
    harm, safe, neutral, images = _prompts(model, n)
    t0 = time.process_time()
    mars = MARS().fit(model, harm[:48], safe[:48], neutral).select(model, harm[48:72], safe[48:72])
    fit_s = time.process_time() - t0
    forced = mars.with_settings(gated=False, strength="fixed")  # every row steered

    def base():
        return generate_rows(model, images, max_new_tokens=args.tokens)

    def steered(m):
        def go():
            deltas = m.deltas(model, images)
            return generate_rows(model, images, max_new_tokens=args.tokens,
                                 steering=Steering(m.site_, deltas, "last"))  # fmt: skip

        return go

    tower = model.vision
    memo = MemoTower(tower)

    def shared(fn):
        # the tower's output is memoised within one call (the memory is emptied before every
        # call, so nothing carries over between calls or repeats): the decoder reads each image
        # twice (prompt lengths, then the prefill), MARS's gate a third time
        def go():
            memo.memory.clear()
            model.vision = memo
            try:
                return fn()
            finally:
                model.vision = tower

        return go

    cases = {
        "MARS (gated, as fitted)": steered(mars),
        "MARS forced open (every row)": steered(forced),
        "unsteered, tower memoised": shared(base),
        "MARS, tower memoised": shared(steered(mars)),
    }
    for fn in (base, *cases.values()):  # warm-up
        fn()
    times = {k: [] for k in ("base", *cases, "gate")}
    tokens = {k: 0 for k in ("base", *cases)}
    for _ in range(repeats):
        t = time.process_time()
        out = base()
        times["base"].append(time.process_time() - t)
        tokens["base"] = _tokens(model, out)
        for name, fn in cases.items():
            t = time.process_time()
            out = fn()
            times[name].append(time.process_time() - t)
            tokens[name] = _tokens(model, out)
        t = time.process_time()
        mars.deltas(model, images)
        times["gate"].append(time.process_time() - t)
    print(f"model organism:{args.organism}, {len(images)} image prompts (harmful and benign "
          f"requests in word images), up to {args.tokens} new tokens, {args.threads} thread(s), "
          f"{repeats} alternating repeats, CPU seconds; fit (one-off) {fit_s:.2f} s, layer "
          f"{mars.layer_}, radius {mars.trust_radius_}")  # fmt: skip
    per_base = [t / tokens["base"] for t in times["base"]]
    print(f"{'unsteered generate':<30} {1e3 * statistics.median(per_base):8.3f} ms/token "
          f"(min {1e3 * min(per_base):.3f}, max {1e3 * max(per_base):.3f}; {tokens['base']} tokens)")  # fmt: skip
    for name in cases:
        per = [t / tokens[name] for t in times[name]]
        ratios = [p / b for p, b in zip(per, per_base, strict=True)]
        print(f"{name:<30} {1e3 * statistics.median(per):8.3f} ms/token "
              f"(min {1e3 * min(per):.3f}, max {1e3 * max(per):.3f}; {tokens[name]} tokens)   "
              f"overhead x{statistics.median(ratios):.3f} [min {min(ratios):.3f}, "
              f"max {max(ratios):.3f}]")  # fmt: skip
    a, b = "MARS, tower memoised", "unsteered, tower memoised"
    fair = [(x / tokens[a]) / (y / tokens[b]) for x, y in zip(times[a], times[b], strict=True)]
    print(f"{'MARS vs unsteered, both memoised':<30} overhead x{statistics.median(fair):.3f} "
          f"[min {min(fair):.3f}, max {max(fair):.3f}]: the gate's forward to layer "
          f"{mars.layer_} and the hook, once the images are encoded once")  # fmt: skip
    gate = [g / b for g, b in zip(times["gate"], times["base"], strict=True)]
    print(f"the gate alone (MARS.deltas: one forward to layer {mars.layer_}) costs "
          f"{statistics.median(gate):.3f} of the unsteered generation's time "
          f"[min {min(gate):.3f}, max {max(gate):.3f}]")  # fmt: skip


if __name__ == "__main__":
    main()
