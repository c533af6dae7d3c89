"""Cost of one full sensitivity curve (all eps × (1 + placebos), batched) relative to one plain
forward pass over the same prompts, and of the exact Fisher–Rao speed (autograd JVP).

    python benchmarks/rheology.py [--quick]

Uses `chat-xs` when it is built, else a tiny random Llama with the organisms' tokenizer.
"""

from __future__ import annotations

import argparse
import time

import torch


def _model():
    from trustlab import lm
    from trustlab.organisms import is_built

    if is_built("chat-xs"):
        return lm.load("organism:chat-xs"), "chat-xs"
    from trustlab.methods.rheology.experiment import _stand_in

    return _stand_in(0), "untrained stand-in"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from trustlab import lm
    from trustlab.methods.rheology import fisher_speed, placebo_directions, sensitivity_curve
    from trustlab.organisms import build_chat_corpus

    model, name = _model()
    corpus = build_chat_corpus(0, n_train=400, n_heldout=40)
    n = 16 if args.quick else 32
    prompts = [e.messages() for e in corpus.heldout("jailbreak")[:n]]
    eps = [-0.4, -0.1, 0.1, 0.4] if args.quick else [-0.8, -0.4, -0.2, -0.1, 0.1, 0.2, 0.4, 0.8]
    k = 10
    site = "blocks.1.resid_pre"
    g = torch.Generator().manual_seed(0)
    u = torch.randn(model.d_model, generator=g)
    plac = placebo_directions(k, model.d_model, g)
    reps = 2 if args.quick else 4
    t_plain = t_curve = t_speed = 0.0
    for _ in range(reps):  # alternate to be robust to machine load
        t = time.perf_counter()
        lm.next_token_logprobs(model, prompts)
        t_plain += time.perf_counter() - t
        t = time.perf_counter()
        sensitivity_curve(model, prompts, site, u, eps, plac, scale=1.0)
        t_curve += time.perf_counter() - t
        t = time.perf_counter()
        fisher_speed(model, prompts, site, torch.cat([u[None], plac]))
        t_speed += time.perf_counter() - t
    n_pert = len(eps) * (1 + k)
    print(f"model: {name}; {n} prompts; {len(eps)} eps x (1 + {k}) directions = {n_pert} curves")
    print(f"plain forward:            {1000 * t_plain / reps:8.1f} ms  (x1.00)")
    print(
        f"full sensitivity curve:   {1000 * t_curve / reps:8.1f} ms  (x{t_curve / t_plain:.1f}; "
        f"x{t_curve / t_plain / (n_pert + 1):.2f} per perturbation)"
    )
    print(f"exact speeds (1+{k} dirs): {1000 * t_speed / reps:8.1f} ms  (x{t_speed / t_plain:.1f})")


if __name__ == "__main__":
    main()
