"""Where FIHS's time goes, and whether LoRA-only gradients keep its ranking (issue 33).

    python benchmarks/gradshield_cost.py --model organism:smol-chat --probes 4 --benign 8 --n 16
    python benchmarks/gradshield_cost.py --model organism:chat-s           # 32 probes, 256 benign

One process, one torch thread, CPU seconds of this process (``time.process_time``: the figures
hold on a loaded machine, unlike wall time):

* **profile**: ``FIHS.fit`` and ``FIHS.score`` split by pass — pass 1 (per-example gradients of
  the compliance and refusal probes, summed in float64), pass 2 (gradients of the held-out
  probes and the trusted benign half, with the per-slice cosines that choose the slices) and
  scoring (gradients of the parameters that own a kept slice, one cosine each) — and, within
  each pass, the **gradient** (forward and backward per example) against the **reduction** run
  on each chunk of gradients; seconds per example, and every pass as a ratio to pass 1's
  gradient seconds per example (the baseline measured in the same run);
* **LoRA-only gradients**: the same FIHS (same probes, benign half, data, slice share) on the
  gradients of LoRA ``B`` matrices only (peft adapters on the fine-tuning protocol's modules,
  rank ``--rank``; ``A`` random, ``B`` zero, so the adapted model computes the base model's
  function). ``∂L/∂B = (∂L/∂W) Aᵀ`` is a random sketch of every row's weight gradient
  (``E[AᵀA] ∝ I``), so cosines and the row slices carry over approximately, for a backward
  pass that skips every frozen weight's gradient. Printed: the Spearman rank correlation of the
  two scores on the same examples, each score's ROC-AUC against the harmful labels, and the
  CPU-seconds ratio of the two (fit and scoring). ``--modules`` adds FIHS on the *full*
  gradients of the adapted modules only, to tell what the modules LoRA leaves out cost the
  ranking from what the rank-``r`` sketch costs it.

The data scored: a mix with ``--harmful`` explicit harmful examples (placeholders; HarmBench
behaviours for smol-chat/``hf:``) among utility examples.
"""

from __future__ import annotations

import argparse
import copy
import math
import time

import numpy as np
import torch

import trustlab.lm as lm
from trustlab.core.runtime import torch_runtime
from trustlab.methods.gradshield import FIHS, build_mix, organism_references, public_references

#: The modules the fine-tuning protocol's LoRA adapts (``trustlab.finetune.LoraSettings``).
LORA_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj")


class TimedFIHS(FIHS):
    """FIHS that records, per call of its per-example gradient pass, the examples, the CPU
    seconds of the whole pass and of the reductions run on its chunks."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.calls: list[tuple[int, float, float]] = []

    def _grads(self, model, data, tokenizer, params, reduce):
        spent = [0.0]

        def timed(g: torch.Tensor) -> torch.Tensor:
            start = time.process_time()
            out = reduce(g)
            spent[0] += time.process_time() - start
            return out

        start = time.process_time()
        out = super()._grads(model, data, tokenizer, params, timed)
        self.calls.append((len(data), time.process_time() - start - spent[0], spent[0]))
        return out


def lora_copy(model: lm.LanguageModel, rank: int, seed: int = 0) -> lm.LanguageModel:
    """A copy of ``model`` with zero-initialised LoRA adapters (same function, new params)."""
    from peft import LoraConfig, inject_adapter_in_model

    names = {n.rsplit(".", 1)[-1] for n, _ in model.model.named_modules()}
    targets = [m for m in LORA_MODULES if m in names]
    net = inject_adapter_in_model(  # adapters inside the model's own class (no PeftModel wrapper)
        LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=targets, lora_dropout=0.0),
        copy.deepcopy(model.model),
    )
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in net.named_parameters():
            if "lora_A" in name:
                param.normal_(0.0, 1.0 / math.sqrt(param.shape[1]), generator=gen)
    return lm.LanguageModel(net, model.tokenizer, spec=f"{model.spec}+lora{rank}")


def _auc(scores: np.ndarray, labels: np.ndarray) -> float:
    pos, neg = scores[labels], scores[~labels]
    return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())


def _profile(fihs: TimedFIHS, model, refs, data) -> tuple[np.ndarray, dict[str, float]]:
    start = time.process_time()
    fihs.fit(model, list(refs.harmful), list(refs.refusal), list(refs.benign_slices))
    fit = time.process_time() - start
    start = time.process_time()
    scores = fihs.score(model, data)
    score = time.process_time() - start
    return scores, {"fit": fit, "score": score}


def _print_profile(title: str, fihs: TimedFIHS, totals: dict[str, float],
                   base: float | None = None) -> float:  # fmt: skip
    names = ("pass 1: probe gradients, float64 sums",
             "pass 2: held-out probes + benign half, per-slice cosines",
             "scoring: kept-slice owners, one cosine")  # fmt: skip
    base = base if base is not None else fihs.calls[0][1] / max(1, fihs.calls[0][0])
    print(f"\n{title}: fit {totals['fit']:.1f} CPU-s, scoring {totals['score']:.1f} CPU-s "
          f"({fihs.n_values_} kept values of {fihs.slices_.n_values})")  # fmt: skip
    print(f"  {'pass':58s} {'n':>4s} {'gradient s/ex':>14s} {'reduce s/ex':>12s} "
          f"{'x pass-1 gradient':>18s}")  # fmt: skip
    for name, (n, grad, red) in zip(names, fihs.calls, strict=False):
        print(f"  {name:58s} {n:4d} {grad / n:14.3f} {red / n:12.3f} "
              f"{(grad + red) / n / base:18.2f}")  # fmt: skip
    return base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="organism:chat-s")
    parser.add_argument("--probes", type=int, default=32)
    parser.add_argument("--benign", type=int, default=256, help="trusted benign sample (half used)")
    parser.add_argument("--n", type=int, default=200, help="examples scored")
    parser.add_argument("--harmful", type=float, default=0.2, help="their harmful share")
    parser.add_argument("--rank", type=int, default=16, help="LoRA rank")
    parser.add_argument("--slice-fraction", type=float, default=0.01)
    parser.add_argument("--no-lora", action="store_true")
    parser.add_argument("--modules", action="store_true",
                        help="also FIHS on the full gradients of LoRA's modules only")  # fmt: skip
    args = parser.parse_args()

    pretrained = args.model.startswith("hf:") or args.model == "organism:smol-chat"
    with torch_runtime(1):
        model = lm.load(args.model)
        if pretrained:
            refs = public_references(args.probes, args.benign, seed=0)
        else:
            refs = organism_references(args.probes, args.benign, seed=0)
        source = "public" if pretrained else "organism"
        mix = build_mix("explicit", args.harmful, args.n, seed=9, source=source)  # type: ignore[arg-type]
        data, labels = list(mix.examples), np.array(mix.harmful, dtype=bool)
        full = TimedFIHS(slice_fraction=args.slice_fraction, batch_size=32)
        s_full, t_full = _profile(full, model, refs, data)
        base = _print_profile(f"{args.model}, full gradients", full, t_full)
        print(f"  ROC-AUC {_auc(s_full, labels):.3f} ({labels.sum()} harmful of {labels.size})")
        if args.no_lora:
            return
        adapted = lora_copy(model, args.rank)
        lora = TimedFIHS(slice_fraction=args.slice_fraction, batch_size=32, params=["*lora_B*"])
        s_lora, t_lora = _profile(lora, adapted, refs, data)
        _print_profile(f"{args.model}, LoRA-B gradients (rank {args.rank})", lora, t_lora, base)
        from scipy.stats import spearmanr

        print(f"  ROC-AUC {_auc(s_lora, labels):.3f}")
        if args.modules:  # full gradients of the adapted modules only: coverage vs sketch noise
            names = {n.rsplit(".", 1)[-1] for n, _ in model.model.named_modules()}
            patterns = [f"*.{m}.weight" for m in LORA_MODULES if m in names]
            same = TimedFIHS(slice_fraction=args.slice_fraction, batch_size=32, params=patterns)
            s_same, t_same = _profile(same, model, refs, data)
            _print_profile(f"{args.model}, full gradients of LoRA's modules only", same, t_same,
                           base)  # fmt: skip
            print(f"  ROC-AUC {_auc(s_same, labels):.3f}; Spearman vs full "
                  f"{spearmanr(s_full, s_same).statistic:.3f}, vs LoRA-B "
                  f"{spearmanr(s_same, s_lora).statistic:.3f}")  # fmt: skip

        rho = spearmanr(s_full, s_lora).statistic
        rho_benign = spearmanr(s_full[~labels], s_lora[~labels]).statistic
        print(f"\nSpearman rank correlation, full vs LoRA-B FIHS: {rho:.3f} over all {labels.size} "
              f"examples, {rho_benign:.3f} among the benign ones")  # fmt: skip
        print(f"CPU seconds LoRA-B / full: fit {t_lora['fit'] / t_full['fit']:.2f}, scoring "
              f"{t_lora['score'] / t_full['score']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
