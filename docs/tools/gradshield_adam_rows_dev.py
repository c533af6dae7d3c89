"""Development (session 49, gradshield): the kept rows chosen under Adam's preconditioning
(docs/methods/gradshield.md, *Fidelity*, "Session 49", the caveat). Filter only.

    python docs/tools/gradshield_adam_rows_dev.py W 600 500,501 /tmp/gs49/pW600 [--novocab]

FIHS's slice rule with every candidate value's gradient preconditioned by ``v`` from the
trusted slice half (``v = (mean g)^2 + Var(g)/32`` over all candidate values, ``eps`` 1e-8):
``L``: per-slice ``cos(g/(sqrt v+eps), r_A)``; ``W``: per-slice ``cos(g/sqrt(sqrt v+eps),
r_A/sqrt(sqrt v+eps))``; the top 1 % of slices by the same held-out-probes-minus-benign margin
are kept. The reference on the kept values is the plain probe direction (as FIHS's). Saves the
kept-slice gradients in gradshield_draws_dev.py's format (``g``, ``cal``, ``slice``,
``direction``), so gradshield_adam_dev.py ``score`` re-thresholds them.
"""

from __future__ import annotations

import math
import pickle
import sys
import time

import numpy as np
import torch


def fit_preconditioned(f, model, refs, form: str, batch: int = 32, eps: float = 1e-8):
    from trustlab.finetune import gradient_layout
    from trustlab.methods.gradshield.fihs import _Sums
    from trustlab.methods.gradshield.slices import ParameterSlices

    harmful, refusal = list(refs.harmful), list(refs.refusal)
    benign = list(refs.benign_slices)
    layout = gradient_layout(model, f.params)
    slices = ParameterSlices(tuple((n, tuple(s)) for n, s in layout))
    acc: dict = {"s": 0.0, "q": 0.0, "n": 0}

    def moments(g: torch.Tensor) -> torch.Tensor:
        g = g.double()
        acc["s"] = acc["s"] + g.sum(0)
        acc["q"] = acc["q"] + (g * g).sum(0)
        acc["n"] += g.shape[0]
        return torch.zeros(g.shape[0], 1)

    f._grads(model, benign, None, f.params, moments)
    mean = acc["s"] / acc["n"]
    v = mean**2 + (acc["q"] / acc["n"] - mean**2).clamp_min(0) / batch
    p = (1.0 / (v.sqrt() + eps)).float()
    groups = [i % 2 for i in range(len(harmful))] + [2 + i % 2 for i in range(len(refusal))]
    sums = _Sums(groups, 4)
    f._grads(model, harmful + refusal, None, f.params, sums)
    direction = ((sums.sums[0] + sums.sums[1]) / len(harmful)
                 - (sums.sums[2] + sums.sums[3]) / len(refusal)).float()  # fmt: skip
    direction_a = (sums.mean(0) - sums.mean(2)).float()
    held = [harmful[i] for i in range(1, len(harmful), 2)]
    w = p if form == "L" else p.sqrt()
    ra = direction_a if form == "L" else direction_a * w
    cos = f._grads(model, held + benign, None, f.params,
                   lambda g: slices.cosines(g * w, ra)).numpy()  # fmt: skip
    separation = cos[: len(held)].mean(0) - cos[len(held) :].mean(0)
    k = max(1, math.ceil(f.slice_fraction * slices.n_slices))
    f.slices_, f.separation_ = slices, separation
    f.selected_ = np.sort(np.argsort(-separation, kind="stable")[:k])
    f._setup_scoring(model, direction)
    return f


def main(form: str, ref_seed: int, seeds: list[int], out: str, novocab: bool) -> None:
    from gradshield_draws_dev import FRACTIONS, _pattern
    from gradshield_refine_dev import dev_pool

    import trustlab.lm as lm
    from trustlab.methods.gradshield import FIHS, organism_references

    torch.set_num_threads(1)
    t0 = time.process_time()
    model = lm.load("organism:chat-s")
    refs = organism_references(32, 256, seed=ref_seed, howto_share=0.25)
    params = ["model.layers.*", "model.norm.weight"] if novocab else None
    f = fit_preconditioned(FIHS(slice_fraction=0.01, params=params), model, refs, form)
    t_fit = time.process_time() - t0
    mixes, pool = dev_pool(seeds, FRACTIONS)
    data = list(pool)
    t1 = time.process_time()
    g = f.kept_gradients(model, data)
    t_g = time.process_time() - t1
    cal = f.kept_gradients(model, list(refs.benign_calibration))
    sl = f.kept_gradients(model, list(refs.benign_slices))
    names = f.slices_.names()
    np.savez(out + ".npz", g=g.numpy(), cal=cal.numpy(), slice=sl.numpy(),
             direction=f.direction_.numpy(), widths=f.slices_.sizes()[f.selected_])  # fmt: skip
    meta = {k: (np.array([pool[e] for e in m.examples]), np.array(m.harmful, bool))
            for k, m in mixes.items()}  # fmt: skip
    with open(out + ".pkl", "wb") as fh:
        pickle.dump({"meta": meta, "pattern": [_pattern(e) for e in data],
                     "selected": [names[j] for j in f.selected_],
                     "cpu": {"fit": t_fit, "g": t_g, "n": len(data)}}, fh)  # fmt: skip
    vocab = sum("embed_tokens" in names[j] for j in f.selected_)
    print(form, ref_seed, f"fit {t_fit:.1f} g {t_g:.1f} total {time.process_time() - t0:.1f} "
          f"CPU-s; vocabulary rows kept {vocab}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")], sys.argv[4],
         "--novocab" in sys.argv)  # fmt: skip
