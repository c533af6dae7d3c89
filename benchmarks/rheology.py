"""Cost of one full sensitivity curve (all eps × (1 + placebos), batched) relative to one plain
forward pass over the same prompts, and of the exact Fisher–Rao speed (autograd JVP), per model.

    python benchmarks/rheology.py [--quick] [--models organism:chat-xs hf:/path ...]

Default models: every organism of the family ``chat-xs … chat-l`` that is built on this machine
(``--quick``: chat-xs only); when none is built, an untrained stand-in with chat-xs's shape and
the organisms' tokenizer. Nothing is built or downloaded.
"""

from __future__ import annotations

import argparse
import time

import torch


def _stand_in():
    from trustlab import lm
    from trustlab.organisms.build_grown import corpora_for, shared_tokenizer
    from trustlab.organisms.specs import get_spec
    from trustlab.organisms.train import make_llama

    spec = get_spec("chat-xs")
    tok = shared_tokenizer(corpora_for(0, n_train=400, n_heldout=40))
    model = make_llama(spec.shape, tok, torch.Generator().manual_seed(0), 0.05)
    return lm.LanguageModel(model, tok, spec="stand-in")


def _models(specs: list[str] | None, quick: bool):
    from trustlab import lm
    from trustlab.methods.rheology.experiment import FAMILY
    from trustlab.organisms import is_built

    if specs:
        return [(s, lm.load(s)) for s in specs]
    family = FAMILY[:1] if quick else FAMILY
    built = [s for s in family if is_built(s.removeprefix("organism:"))]
    if not built:
        return [("untrained stand-in (chat-xs shape)", _stand_in())]
    return [(s, lm.load(s)) for s in built]


def _bench(model, prompts, eps, k: int, reps: int) -> tuple[float, float, float]:
    from trustlab import lm
    from trustlab.lm import placebo_directions
    from trustlab.methods.rheology import fisher_speed, sensitivity_curve

    site = f"blocks.{model.n_layers // 2}.resid_pre"
    g = torch.Generator().manual_seed(0)
    u = torch.randn(model.d_model, generator=g)
    plac = placebo_directions(k, model.d_model, g)
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
    return t_plain / reps, t_curve / reps, t_speed / reps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--models", nargs="*", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from trustlab.organisms import build_chat_corpus

    corpus = build_chat_corpus(0, n_train=400, n_heldout=40)
    n = 16 if args.quick else 32
    prompts = [e.messages() for e in corpus.heldout("jailbreak")[:n]]
    eps = [-0.4, -0.1, 0.1, 0.4] if args.quick else [-0.8, -0.4, -0.2, -0.1, 0.1, 0.2, 0.4, 0.8]
    k = 10
    reps = 2 if args.quick else 3
    n_pert = len(eps) * (1 + k)
    print(f"{n} jailbreak prompts; {len(eps)} eps x (1 + {k}) directions = {n_pert} curves")
    print(f"{'model':<22} {'params':>9} {'plain ms':>9} {'curve ms':>9} {'xplain':>7} "
          f"{'/pert':>6} {'speed ms':>9} {'xplain':>7}")  # fmt: skip
    for name, model in _models(args.models, args.quick):
        plain, curve, speed = _bench(model, prompts, eps, k, reps)
        params = sum(p.numel() for p in model.model.parameters())
        print(
            f"{name:<22} {params:>9,} {1000 * plain:>9.1f} {1000 * curve:>9.1f} "
            f"{curve / plain:>7.1f} {curve / plain / (n_pert + 1):>6.2f} {1000 * speed:>9.1f} "
            f"{speed / plain:>7.1f}"
        )
    print("xplain: cost as a multiple of one plain forward pass; /pert: per perturbed copy.")


if __name__ == "__main__":
    main()
