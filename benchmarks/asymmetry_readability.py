"""How much of each character-level transform a pretrained model already reads (asymmetry's
session-45 transform screen; docs/methods/asymmetry.md, "smol-chat").

For a model and development tasks (train-split task prompts of the organisms' chat corpus with
their reference answers; never the held-out evaluation prompts), prints per character-level
transform the teacher-forced ``-log P(encoded reference answer | conversation)`` in nats, where
the conversation is the CipherChat-style in-context adaptation of the experiment
(``InContext``: a system message naming the encoding, ``k`` encoded benign worked examples,
the encoded request). The plain text is measured in the same run as the floor. The gap to plain
is the information about the answer the model cannot yet take from the encoded request and
write back encoded: the smaller, the more of the transform the model already reads before any
fine-tuning.

The rule written before the session-45 run (docs/methods/asymmetry.md): among the character-
level transforms that fragment at most ``--max-frag`` tokens per plain token (the fragmentation
table of ``asymmetry_fragmentation.py``; longer sequences do not fit the run budget), pick the
lowest mean nats; transforms within ``--tie`` nats of the best are tied and the tie goes to
fewer tokens per plain token. One forward pass per task and transform, base weights only.

    python benchmarks/asymmetry_readability.py --model organism:smol-chat
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="organism:smol-chat")
    ap.add_argument("--n", type=int, default=30, help="development tasks")
    ap.add_argument("--k", type=int, default=3, help="encoded worked examples in context")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-frag", type=float, default=3.5)
    ap.add_argument("--tie", type=float, default=1.0, help="nats within which transforms tie")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    import trustlab.lm as lm
    from trustlab.methods.asymmetry.adaptation import InContext
    from trustlab.methods.asymmetry.transforms import TRANSFORMS, make_transform
    from trustlab.organisms.corpora import build_chat_corpus

    cpu0 = time.process_time()
    corpus = build_chat_corpus(0)
    tasks = [e for e in corpus.examples if e.split == "train" and e.kind == "task"]
    howto = [e for e in corpus.examples if e.split == "train" and e.kind in ("task", "howto")]
    rng = np.random.default_rng(args.seed)
    dev = [tasks[int(i)] for i in rng.choice(len(tasks), args.n, replace=False)]
    dev_prompts = {e.prompt for e in dev}
    shots = [(e.prompt, e.response) for e in howto if e.prompt not in dev_prompts]
    shots = [shots[int(i)] for i in rng.choice(len(shots), 4 * args.k, replace=False)]
    model = lm.load(args.model)
    tok = model.tokenizer

    def n_tokens(texts: list[str]) -> int:
        return sum(len(tok(s, add_special_tokens=False)["input_ids"]) for s in texts)

    plain_texts = [e.prompt for e in dev] + [e.response for e in dev]
    n_plain = n_tokens(plain_texts)
    names = ["plain", *sorted(n for n, c in TRANSFORMS.items() if c.level == "character")]
    rows = []
    for name in names:
        t = make_transform("rot13" if name == "plain" else name)
        if name == "plain":
            t = make_transform("caesar", k=0)  # the identity map through the same code path
        if any(t.rejects(s) for s in plain_texts):
            continue
        frag = n_tokens([t.encode(s) for s in plain_texts]) / n_plain
        if name != "plain" and frag > args.max_frag:
            rows.append((name, frag, float("nan"), 0.0))
            continue
        icl = InContext(t, shots, k=args.k)
        c0 = time.process_time()
        nats = []
        with torch.no_grad():
            for e in dev:
                conv = icl.encode_conversation([{"role": "user", "content": e.prompt}])
                lp = lm.target_logprob(model, [conv], t.encode(e.response))
                nats.append(-float(lp[0]))
        rows.append((name, frag, float(np.mean(nats)), time.process_time() - c0))
    print(f"{args.model}: {len(dev)} development tasks (train split), {args.k} encoded shots")
    print(f"{'transform':14s} {'tokens/plain':>12s} {'nats/answer':>11s} {'gap':>7s} {'CPU-s':>6s}")
    floor = next(r[2] for r in rows if r[0] == "plain")
    for name, frag, nats, cpu in sorted(rows, key=lambda r: (np.isnan(r[2]), r[2])):
        shown = "(skipped)" if np.isnan(nats) else f"{nats:11.2f} {nats - floor:7.2f}"
        print(f"{name:14s} {frag:12.2f} {shown} {cpu:6.1f}")
    cands = [r for r in rows if r[0] != "plain" and not np.isnan(r[2])]
    best = min(r[2] for r in cands)
    pick = min((r for r in cands if r[2] <= best + args.tie), key=lambda r: r[1])
    print(f"rule (tokens/plain <= {args.max_frag}; lowest nats, ties within {args.tie} -> fewest "
          f"tokens per plain token): {pick[0]}  [{time.process_time() - cpu0:.1f} CPU-s]")


if __name__ == "__main__":
    main()
