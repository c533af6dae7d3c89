"""Benchmark: inference and fine-tuning-step overhead of a GMU-protected model vs the original.

    python benchmarks/gmu.py [--quick] [--repeats 7]

Same process, same inputs, 1 torch thread, one warm-up, then ``--repeats`` interleaved
measurements (original, protected, original, ...) of CPU time per call; prints the median and
the min..max of each and the ratio of medians. Models: chat-s (``--quick``: chat-xs) with the
experiment's default GMUs (8 per FFN layer, gate lock) and vit-xs (8 per FFN layer, bias
lock). The operation count predicts the ratio: GMUs widen every FFN by ``n_units`` hidden units,
so the FFN's multiply-adds grow by ``n_units / width`` and the whole forward by that share of
the FFN's part (printed as ``flop ratio``). On models this small a few added units are a visible
share (vit-xs: 8 on 128); on a 7B model 8 units on 11,008 are 0.07%.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def _cpu(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        out.append(time.process_time() - start)
    return out


def _interleaved(fa, fb, repeats: int, inner: int) -> tuple[list[float], list[float]]:
    fa(), fb()  # warm-up
    a, b = [], []
    for _ in range(repeats):
        a.append(sum(_cpu(fa, inner)) / inner)
        b.append(sum(_cpu(fb, inner)) / inner)
    return a, b


def _line(name: str, a: list[float], b: list[float], flops: float) -> None:
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{name:<34} original {ma * 1e3:8.2f} ms [{min(a) * 1e3:.2f}..{max(a) * 1e3:.2f}]   "
          f"protected {mb * 1e3:8.2f} ms [{min(b) * 1e3:.2f}..{max(b) * 1e3:.2f}]   "
          f"ratio {mb / ma:5.3f} (range {min(b) / max(a):.3f}..{max(b) / min(a):.3f})   "
          f"flop ratio {flops:5.3f}")  # fmt: skip


def _flop_ratio(model, protected, tokens: int) -> float:
    """Multiply-adds of the linear layers per token (attention scores ignored: equal)."""
    def count(m):
        return sum(x.in_features * x.out_features for x in m.modules()
                   if isinstance(x, torch.nn.Linear))  # fmt: skip

    return count(protected) / count(model)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="chat-xs instead of chat-s")
    parser.add_argument("--repeats", type=int, default=7, help="measurements per model (>= 5)")
    args = parser.parse_args()
    if args.repeats < 5:
        parser.error("--repeats must be at least 5")
    torch.set_num_threads(1)

    import trustlab.lm as lm
    from trustlab.finetune import (
        NEW_TASK_TEMPLATES,
        FinetuneConfig,
        finetune,
        finetune_classifier,
        utility_examples,
    )
    from trustlab.methods.gmu import GMUPlanter
    from trustlab.organisms.vit_build import load_vit, vit_task_data

    name = "chat-xs" if args.quick else "chat-s"
    chat = lm.load(f"organism:{name}")
    model = chat.model.eval()
    protected = GMUPlanter(n_units=8, scale=1e3).fit_plant(model).eval()
    ids = torch.randint(6, model.config.vocab_size, (16, 48), generator=torch.Generator().manual_seed(0))
    print(f"torch {torch.__version__}, 1 thread, CPU time per call, {args.repeats} repeats "
          f"after one warm-up (machine load is shared: read the ratios)")  # fmt: skip

    def fwd(m):
        def run():
            with torch.no_grad():
                m(input_ids=ids)
        return run

    a, b = _interleaved(fwd(model), fwd(protected), args.repeats, 5)
    _line(f"{name} forward 16x48 tokens", a, b, _flop_ratio(model, protected, 48))

    data = utility_examples(64, 0, tasks=tuple(NEW_TASK_TEMPLATES))
    cfg = FinetuneConfig(steps=1, batch_size=16, lr=1e-3, module_grad_norms=False)

    def step(m):
        def run():
            finetune(m, data, cfg, tokenizer=chat.tokenizer)  # one AdamW step (weights change)
        return run

    import copy

    a, b = _interleaved(step(copy.deepcopy(model)), step(copy.deepcopy(protected)), args.repeats, 1)
    _line(f"{name} fine-tuning step, batch 16", a, b, _flop_ratio(model, protected, 48))

    vit, _ = load_vit("vit-xs")
    vit.eval()
    pvit = GMUPlanter(n_units=8, scale=1e3).fit_plant(vit).eval()  # bias lock
    x, y = vit_task_data("count", "heldout", 64)

    def vfwd(m):
        def run():
            with torch.no_grad():
                m(pixel_values=x)
        return run

    a, b = _interleaved(vfwd(vit), vfwd(pvit), args.repeats, 5)
    _line("vit-xs forward 64 images", a, b, _flop_ratio(vit, pvit, 17))

    def vstep(m):
        def run():
            finetune_classifier(m, x, y, FinetuneConfig(steps=1, batch_size=64,
                                                        module_grad_norms=False))  # fmt: skip
        return run

    a, b = _interleaved(vstep(copy.deepcopy(vit)), vstep(copy.deepcopy(pvit)), args.repeats, 1)
    _line("vit-xs fine-tuning step, batch 64", a, b, _flop_ratio(vit, pvit, 17))


if __name__ == "__main__":
    main()
