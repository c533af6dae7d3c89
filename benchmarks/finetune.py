"""Fine-tuning substrate benchmark: training steps/s (full and LoRA) on chat-s and smol-chat, and
per-example gradient throughput (loop vs torch.func.vmap) relative to one training step.

    python benchmarks/finetune.py            # chat-s and smol-chat (or its SmolLM2 GGUF base)
    python benchmarks/finetune.py --quick    # chat-xs only

Every timing is a median over >= 5 measured steps after one warm-up step, with the spread
(min..max), on 1 torch thread; ratios are against the training step measured in the same run.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="chat-xs only, fewer steps")
    args = parser.parse_args()
    torch.manual_seed(0)
    small = "organism:chat-xs" if args.quick else "organism:chat-s"
    data = utility_examples(512, 0)
    steps = 6
    full = FinetuneConfig(steps=steps, batch_size=32, lr=1e-3, module_grad_norms=False)
    lora = full.model_copy(update={"lora": LoraSettings(r=16, alpha=32)})
    rows = []
    print(f"threads 1; kernel {torch.backends.cpu.get_cpu_capability()}")
    step_full = time_steps(small, full, data)
    step_lora = time_steps(small, lora, data)
    rows += [(small, "full, batch 32", step_full), (small, "LoRA r16, batch 32", step_lora)]
    if not args.quick:
        spec, label = smol_spec()
        smol_full = full.model_copy(update={"batch_size": 8, "max_length": 128})
        smol_lora = smol_full.model_copy(update={"lora": LoraSettings(r=16, alpha=32)})
        rows += [(label, "full, batch 8", time_steps(spec, smol_full, data))]
        rows += [(label, "LoRA r16, batch 8", time_steps(spec, smol_lora, data))]
    for model, kind, seconds in rows:
        print(
            f"{model:45s} {kind:20s} {1 / statistics.median(seconds):7.2f} steps/s  {_summary(seconds)}"
        )
    # Per-example gradients against one full training step of batch 32 on the same model.
    base_step = statistics.median(step_full)
    n_layers = lm.load(small).n_layers
    slices = {
        f"last MLP (model.layers.{n_layers - 1}.mlp.*)": (f"model.layers.{n_layers - 1}.mlp.*",),
        "all parameters": None,
    }
    for name, params in slices.items():
        for method in ("loop", "vmap"):
            per = time_per_example(small, data[:32], params, method)
            med = statistics.median(per)
            print(
                f"per-example gradients, {name:34s} {method:4s}: {1 / med:7.1f} examples/s "
                f"({_summary(per)} each); 32 of them = {32 * med / base_step:5.2f} x one training "
                "step of batch 32"
            )


if __name__ == "__main__":
    main()
