"""How much a tokenizer fragments each character-level transform (asymmetry's transform rule).

For a model's tokenizer and a development set of benign texts (train-split task and how-to
prompts and responses of the organisms' chat corpus; never the held-out evaluation prompts),
prints per character-level transform, against the plain text measured in the same run:

* ``tokens/plain`` — tokens of the encoded text per token of the plain text (fragmentation);
* ``kept`` — share of the plain text's tokens (as a multiset) that survive encoding.

The rule written before the smol-chat run of docs/methods/asymmetry.md (session 44): the
character-level transform that keeps the most plain tokens, ties broken by fewer tokens per
plain token. On smol-chat the six letter ciphers keep 0.312-0.321 (their surviving tokens are
digits, spaces and punctuation), which was read as a tie (``--tie 0.01``) after seeing these
numbers and before any model run, so rot13 (1.98 tokens per plain token) was picked; whole-text
reversal fragments least (1.83) but keeps far fewer tokens (0.19). Cheap: a few CPU-s, no model
weights.

    python benchmarks/asymmetry_fragmentation.py --model organism:smol-chat
    python benchmarks/asymmetry_fragmentation.py --model hf:/path/to/model --n 300
"""

from __future__ import annotations

import argparse
import collections
import sys
import time

import numpy as np


def _tokenizer(spec: str):
    from transformers import AutoTokenizer

    if spec.startswith("organism:"):
        from trustlab.organisms.registry import organism_dir

        return AutoTokenizer.from_pretrained(organism_dir(spec.split(":", 1)[1]))
    if spec.startswith("hf:"):
        return AutoTokenizer.from_pretrained(spec[3:])
    sys.exit(f"--model must be organism:<name> or hf:<folder>. Got {spec!r}.")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="organism:smol-chat")
    ap.add_argument("--n", type=int, default=300, help="development examples (x2 texts)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tie", type=float, default=0.01, help="kept shares this close are tied")
    args = ap.parse_args(argv)
    from trustlab.methods.asymmetry.transforms import TRANSFORMS, make_transform
    from trustlab.organisms.corpora import build_chat_corpus

    cpu0 = time.process_time()
    tok = _tokenizer(args.model)
    pool = [e for e in build_chat_corpus(0).examples
            if e.split == "train" and e.kind in ("task", "howto")]  # fmt: skip
    rng = np.random.default_rng(args.seed)
    dev = [pool[int(i)] for i in rng.choice(len(pool), min(args.n, len(pool)), replace=False)]
    texts = [e.prompt for e in dev] + [e.response for e in dev]

    def ids(s: str) -> list[int]:
        return tok(s, add_special_tokens=False)["input_ids"]

    rows = []
    for name, cls in sorted(TRANSFORMS.items()):
        if cls.level != "character":
            continue
        t = make_transform(name, key=0) if name == "substitution" else make_transform(name)
        ok = [s for s in texts if t.rejects(s) is None]
        plain = [ids(s) for s in ok]
        enc = [ids(t.encode(s)) for s in ok]
        kept = sum(sum((collections.Counter(p) & collections.Counter(e)).values())
                   for p, e in zip(plain, enc, strict=True))  # fmt: skip
        n_plain = sum(map(len, plain))
        rows.append((name, sum(map(len, enc)) / n_plain, kept / n_plain, len(ok)))
    print(f"{args.model}: {len(texts)} development texts (train split, tasks and how-to)")
    print(f"{'transform':14s} {'tokens/plain':>12s} {'kept':>6s} {'texts':>6s}")
    for name, ratio, kept, n in sorted(rows, key=lambda r: r[1]):
        print(f"{name:14s} {ratio:12.2f} {kept:6.3f} {n:6d}")
    best = max(r[2] for r in rows)
    tied = [r for r in rows if r[2] >= best - args.tie]
    pick = min(tied, key=lambda r: r[1])
    print(f"rule (most kept tokens, ties within {args.tie} -> fewest tokens per plain token): "
          f"{pick[0]}  [{time.process_time() - cpu0:.1f} CPU-s]")


if __name__ == "__main__":
    main()
