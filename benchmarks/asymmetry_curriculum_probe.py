"""Issue 27's development probe (session 46): does a cipher-translation curriculum teach
smol-chat what an encoded word *means*? A paired comparison at one short budget, on development
tasks only (held-out prompts untouched); docs/methods/asymmetry.md ("Session 46") gives the
settings, fixed and committed before the run, and the measured figures.

    python benchmarks/asymmetry_curriculum_probe.py --out runs/asymmetry_curriculum_probe

(the defaults, so ``make bench`` runs it too: about 600 CPU-s on one thread, most of it the two
100-step LoRA fine-tunes of smol-chat.)

Two arms, everything equal but the data: **recipe** — session 45's recipe (``adaptation_data``
with ``refusal_share`` 0.2, a quarter of the benign rest plain, the rest encoded);
**curriculum** — the same call with ``curriculum_share`` (default 0.4) of the examples replaced
by ``cipher_curriculum`` examples (words and short sentences of the benign train split next to
their encoding, both directions; Halawi et al. 2024's first phase, mixed in, not staged). Same
transform (caesar, k = 3), LoRA r 16, alpha 32 on all layers, lr 1e-3, warm-up 20, cosine,
batch 4, seed 0, ``--steps`` steps (default 100), one thread.

Development sets (train-split tasks whose instruction is in neither arm's data): ``dev`` — 30
tasks drawn as the session-45 run draws them (rng 11); ``meaning`` — 12 capital and 12
translate tasks not in ``dev`` (rng 12): the two tasks that need an encoded word's meaning, 0/4
at every point of session 45's curve. Exact match of the decoded 32-token reply.

Decision rule (fixed before the run): the curriculum *moves* the meaning tasks when, on the
24 ``meaning`` tasks, the exact one-sided sign test on the discordant pairs (curriculum right
and recipe wrong, against the reverse) gives p <= 0.05. Writes ``probe.json`` (settings,
losses, CPU-s, per-task counts and per-item verdicts; never reply text).
"""

from __future__ import annotations

import argparse
import json
import time
from math import comb
from pathlib import Path

import numpy as np

from _asymmetry_lora import cpu_logger, development_tasks, smol_lora_config


def sign_test(wins: int, losses: int) -> float:
    """Exact one-sided sign test: P(X >= wins) for X ~ Binomial(wins + losses, 1/2)."""
    n = wins + losses
    if n == 0:
        return 1.0
    return sum(comb(n, k) for k in range(wins, n + 1)) / 2**n


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/asymmetry_curriculum_probe")
    ap.add_argument("--model", default="organism:smol-chat")
    ap.add_argument("--transform", default="caesar")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--curriculum-share", type=float, default=0.4)
    ap.add_argument("--n-dev", type=int, default=30)
    ap.add_argument("--n-meaning", type=int, default=12, help="per task (capital, translate)")
    ap.add_argument("--dev-tokens", type=int, default=32)
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    import trustlab.lm as lm
    from trustlab.datasets.prompt_sets import PromptSet
    from trustlab.finetune import finetune
    from trustlab.methods.asymmetry import adaptation_data, make_transform
    from trustlab.methods.asymmetry.adaptation import ForEvaluation
    from trustlab.methods.asymmetry.study import chat_corpus

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cpu0 = time.process_time()

    log = cpu_logger(cpu0)

    t = make_transform(args.transform)
    name = t.label
    n = 4 * args.steps
    cfg = smol_lora_config(args.steps)
    corpus = chat_corpus(0)
    shares = {"recipe": 0.0, "curriculum": args.curriculum_share}
    arms = {arm: adaptation_data(t, n, seed=0, plain_share=0.25, refusal_share=0.2,
                                 curriculum_share=share, corpus=corpus)
            for arm, share in shares.items()}  # fmt: skip
    tasks, pick, meaning_pick = development_tasks(t, arms.values(), corpus, args.n_dev,
                                                  args.n_meaning)  # fmt: skip

    def subset(set_name: str, idx: list[int]) -> PromptSet:
        return PromptSet(set_name, tuple(tasks.prompts[i] for i in idx),
                         tuple(tasks.references[i] for i in idx),
                         tuple(tasks.item_meta(i) for i in idx))  # fmt: skip

    sets = [subset("dev", pick), subset("meaning", meaning_pick)]
    judge = lm.ExactMatchJudge()
    judges = {s.name: [judge] for s in sets}
    dec = lm.Decoding(max_new_tokens=args.dev_tokens)
    ev = ForEvaluation(t, name=name)
    result: dict = {"transform": name, "model": args.model, "config": cfg, "n_examples": n,
                    "curriculum_share": args.curriculum_share,
                    "n_curriculum": round(args.curriculum_share * n),
                    "dev_size": len(pick), "meaning_size": len(meaning_pick), "arms": {}}  # fmt: skip

    def score(model: object, label: str, transform: object) -> dict:
        c = time.process_time()
        r = lm.evaluate({label: model}, sets, judges, transforms={"t": transform}, decoding=dec)
        per: dict[str, dict[str, list[int]]] = {s.name: {} for s in sets}
        verdicts: dict[str, list[int]] = {s.name: [0] * len(s) for s in sets}
        by_name = {s.name: s for s in sets}
        for it in r.items:
            s = by_name[it["prompts"]]
            cat = s.item_meta(it["index"])["category"]
            cell = per[s.name].setdefault(cat, [0, 0])
            cell[0] += bool(it["value"])
            cell[1] += 1
            verdicts[s.name][it["index"]] = int(bool(it["value"]))
        point = {s.name: {"utility": float(np.mean(verdicts[s.name])),
                          "per_task": {k: f"{a}/{b}" for k, (a, b) in sorted(per[s.name].items())},
                          "verdicts": verdicts[s.name]} for s in sets}  # fmt: skip
        point["eval_cpu_s"] = time.process_time() - c
        log(label, {k: (v["utility"], v["per_task"]) for k, v in point.items() if k in by_name})
        return point

    base = lm.load(args.model)
    result["base_plain"] = score(base, "base plain", None)
    del base
    for arm, data in arms.items():
        model = lm.load(args.model)

        def progress(step: int, total: int, loss: float, arm: str = arm) -> None:
            if step % 25 == 0:
                log(f"{arm} step {step}/{total} loss {loss:.3f}")

        c = time.process_time()
        res = finetune(model, data, cfg, progress=progress)
        train_cpu = time.process_time() - c
        point = score(model, arm, ev)
        point.update(train_cpu_s=train_cpu, loss_first=float(res.losses[0]),
                     loss_last=float(np.mean(res.losses[-20:])))
        result["arms"][arm] = point
        (out / "probe.json").write_text(json.dumps(result, indent=2))
        del model
    a = result["arms"]["recipe"]["meaning"]["verdicts"]
    b = result["arms"]["curriculum"]["meaning"]["verdicts"]
    wins = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    losses = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    p = sign_test(wins, losses)
    result["meaning_test"] = {"curriculum_only": wins, "recipe_only": losses, "p_one_sided": p,
                              "moves": p <= 0.05}  # fmt: skip
    result["cpu_s_total"] = time.process_time() - cpu0
    (out / "probe.json").write_text(json.dumps(result, indent=2))
    log("meaning tasks:", result["meaning_test"])


if __name__ == "__main__":
    main()
