"""Fine-tuning substrate benchmark: training steps/s (full and LoRA) on chat-s and smol-chat, and
per-example gradient throughput (loop vs torch.func.vmap) relative to one training step.

    python benchmarks/finetune.py            # chat-s and smol-chat (or its SmolLM2 GGUF base)
    python benchmarks/finetune.py --quick    # chat-xs only
    python benchmarks/finetune.py --smol-only  # smol-chat (or its base) only

Every timing is a median over >= 5 measured steps after one warm-up step, with the spread
(min..max), on 1 torch thread; ratios are against the full training step of the same model and
batch size measured in the same run (chat-s: 32 examples; smol-chat: 8, on parameter slices).
smol-chat is SmolLM2-135M with merged adapters: when it is not built, its GGUF base (the same
architecture and size) is timed instead, and the output says so.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import trustlab.lm as lm
from trustlab.finetune import FinetuneConfig, LoraSettings, finetune, utility_examples
from trustlab.finetune.pergrad import per_example_gradients


def _summary(values: list[float]) -> str:
    return (
        f"median {statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})"
    )


def time_steps(spec: str, config: FinetuneConfig, data) -> list[float]:
    model = lm.load(spec)
    seconds: list[float] = []
    finetune(model, data, config, callbacks=[lambda info: seconds.append(info.seconds)])
    return seconds[1:]  # the first step warms up


def time_per_example(spec: str, data, params, method: str, repeats: int = 5) -> list[float]:
    model = lm.load(spec)
    per_example_gradients(model, data[:2], params=params, method=method)  # warm-up
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        per_example_gradients(model, data, params=params, method=method, batch_size=len(data))
        out.append((time.perf_counter() - start) / len(data))
    return out


def smol_spec() -> tuple[str, str]:
    from trustlab.organisms import is_built

    if is_built("smol-chat"):
        return "organism:smol-chat", "smol-chat"
    from trustlab.organisms.smol import smollm2_gguf_path

    return f"hf:{smollm2_gguf_path()}", "SmolLM2-135M GGUF base (smol-chat not built)"


def per_example_rows(spec: str, data, batch: int, base_step: float, slices) -> None:
    """Per-example gradients (loop and vmap) of ``batch`` examples on each slice, against one
    full training step of the same batch size on the same model, measured in the same run."""
    for name, params in slices.items():
        for method in ("loop", "vmap"):
            per = time_per_example(spec, data[:batch], params, method)
            med = statistics.median(per)
            print(
                f"per-example gradients, {spec}, {name:34s} {method:4s}: {1 / med:7.1f} "
                f"examples/s ({_summary(per)} each); {batch} of them = "
                f"{batch * med / base_step:5.2f} x one full training step of batch {batch}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true", help="chat-xs only, fewer steps")
    group.add_argument("--smol-only", action="store_true", help="smol-chat (or its base) only")
    args = parser.parse_args()
    torch.manual_seed(0)
    small = "organism:chat-xs" if args.quick else "organism:chat-s"
    data = utility_examples(512, 0)
    steps = 6
    full = FinetuneConfig(steps=steps, batch_size=32, lr=1e-3, module_grad_norms=False)
    lora = full.model_copy(update={"lora": LoraSettings(r=16, alpha=32)})
    print(f"threads 1; kernel {torch.backends.cpu.get_cpu_capability()}")
    if not args.smol_only:
        step_full = time_steps(small, full, data)
        step_lora = time_steps(small, lora, data)
        for kind, seconds in (("full, batch 32", step_full), ("LoRA r16, batch 32", step_lora)):
            print(f"{small:45s} {kind:20s} {1 / statistics.median(seconds):7.2f} steps/s  "
                  f"{_summary(seconds)}")  # fmt: skip
        n_layers = lm.load(small).n_layers
        per_example_rows(small, data, 32, statistics.median(step_full), {
            f"last MLP (model.layers.{n_layers - 1}.mlp.*)": (f"model.layers.{n_layers - 1}.mlp.*",),
            "all parameters": None,
        })  # fmt: skip
    if args.quick:
        return
    spec, label = smol_spec()
    smol_full = full.model_copy(update={"batch_size": 8, "max_length": 128})
    smol_lora = smol_full.model_copy(update={"lora": LoraSettings(r=16, alpha=32)})
    step_full = time_steps(spec, smol_full, data)
    step_lora = time_steps(spec, smol_lora, data)
    for kind, seconds in (("full, batch 8", step_full), ("LoRA r16, batch 8", step_lora)):
        print(f"{label:45s} {kind:20s} {1 / statistics.median(seconds):7.2f} steps/s  "
              f"{_summary(seconds)}")  # fmt: skip
    # All 135M parameters per example would hold 0.5 GB per gradient: slices only.
    n_layers = lm.load(spec).n_layers
    per_example_rows(spec, data, 8, statistics.median(step_full), {
        f"last MLP (model.layers.{n_layers - 1}.mlp.*)": (f"model.layers.{n_layers - 1}.mlp.*",),
        f"last layer (model.layers.{n_layers - 1}.*)": (f"model.layers.{n_layers - 1}.*",),
    })  # fmt: skip


if __name__ == "__main__":
    main()
