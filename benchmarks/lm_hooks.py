"""Overhead of trustlab.lm hooks relative to a plain forward pass of the same batch.

A 4-layer Llama-style (SwiGLU) model, randomly initialised, batch 32 of left-padded prompts.
Figures are ratios of median wall times against the plain HF forward measured in the same
process (target: capture and an active intervention under +10%; the embeddings-in path under
+10%; per-head capture is stated, not targeted: it computes every head's [.., H, D] term).

    python benchmarks/lm_hooks.py [--quick] [--threads N] [--only TEXT]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from trustlab import lm
from trustlab.core.runtime import torch_runtime


def build(d_model: int, vocab: int) -> lm.LanguageModel:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = [f"w{i}" for i in range(vocab - 4)]
    vocab_map = {t: i for i, t in enumerate(["<pad>", "<unk>", "<bos>", "<eos>", *words])}
    tok = Tokenizer(models.WordLevel(vocab=vocab_map, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<bos>",
        eos_token="<eos>",
    )
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=d_model,
        intermediate_size=4 * d_model,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=512,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=3,
    )
    torch.manual_seed(0)
    return lm.LanguageModel(LlamaForCausalLM(config), tokenizer)


def paired(base: Callable[[], object], case: Callable[[], object], repeats: int) -> tuple:
    """Median times of ``base`` and ``case`` run alternately, and the median per-pair ratio.

    Alternating the two keeps the ratio honest on a machine whose load changes over time.
    """
    base(), case()  # warm-up
    tb, tc, ratios = [], [], []
    for _ in range(repeats):
        start = time.perf_counter()
        base()
        mid = time.perf_counter()
        case()
        end = time.perf_counter()
        tb.append(mid - start)
        tc.append(end - mid)
        ratios.append((end - mid) / (mid - start))
    return statistics.median(tb), statistics.median(tc), statistics.median(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller model, fewer repeats")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    parser.add_argument(
        "--only", default="", help="run only the cases whose name contains this text"
    )
    args = parser.parse_args()
    with torch_runtime(args.threads):
        run(args)


def run(args: argparse.Namespace) -> None:
    d_model, seq, repeats = (128, 32, 5) if args.quick else (512, 128, 9)
    model = build(d_model, vocab=2000)
    g = torch.Generator().manual_seed(1)
    prompts = [
        " ".join(f"w{int(i)}" for i in torch.randint(0, 1990, (int(n),), generator=g))
        for n in torch.randint(seq // 2, seq + 1, (32,), generator=g)
    ]
    batch = model.encode(prompts)
    resid = model.sites("resid_post")
    direction = torch.randn(model.d_model, generator=g)

    def plain() -> object:
        with torch.no_grad():
            return model.model(
                input_ids=batch.input_ids,
                attention_mask=batch.attention_mask,
                position_ids=batch.position_ids,
                use_cache=False,
            ).logits

    def captured() -> object:
        with lm.capture(model, resid, "last") as cap:
            model.forward(batch)
        return cap.stacked()

    def captured_last8() -> object:
        with lm.capture(model, resid, lm.Positions.last(8)) as cap:
            model.forward(batch)
        return cap.stacked()

    def steered() -> object:
        with lm.add_vector(model, direction, model.sites("resid_pre", [2]), alpha=4.0):
            return model.forward(batch)

    def steered_last() -> object:
        with lm.add_vector(model, direction, resid, alpha=4.0, positions="last"):
            return model.forward(batch)

    def ablated() -> object:
        with lm.ablate_direction(model, direction):
            return model.forward(batch)

    def embeds_in() -> object:
        # lm.embed + the forward on inputs_embeds (a Batch carrying them), as attacks run it
        return model.forward(model.with_embeds(batch))

    prepared = model.with_embeds(batch)

    def embeds_prepared() -> object:
        return model.forward(prepared)

    heads_out = model.sites("head_out")
    heads_z = model.sites("head_z")

    def heads_captured() -> object:
        with lm.capture(model, heads_out, "last") as cap:
            model.forward(batch)
        return cap.stacked()

    def heads_z_captured() -> object:
        with lm.capture(model, heads_z, "last") as cap:
            model.forward(batch)
        return cap.stacked()

    def get_acts_early_stop() -> object:
        return lm.get_activations(model, prompts, model.sites("resid_post", [1]), batch_size=32)

    print(
        f"model: Llama-style, 4 layers, d_model={d_model}, batch 32, up to {seq} tokens, "
        f"{torch.get_num_threads()} threads; each case alternates with a plain HF forward"
    )
    cases = [
        ("capture resid_post x4, last token", captured),
        ("capture resid_post x4, last 8 tokens", captured_last8),
        ("add_vector at one layer, all tokens", steered),
        ("add_vector at 4 layers, last token", steered_last),
        ("directional ablation, 9 sites, all tokens", ablated),
        ("get_activations at layer 1 (stops early)", get_acts_early_stop),
        ("embeddings in (embed + forward)", embeds_in),
        ("embeddings in (prepared inputs_embeds)", embeds_prepared),
        ("capture head_out x4 layers, last token", heads_captured),
        ("capture head_z x4 layers, last token", heads_z_captured),
    ]
    for name, fn in cases:
        if args.only and args.only not in name:
            continue
        tb, tc, ratio = paired(plain, fn, repeats)
        print(f"{name:<44} {tc * 1e3:8.1f} ms vs plain {tb * 1e3:8.1f} ms   ratio {ratio:.3f}")


if __name__ == "__main__":
    main()
