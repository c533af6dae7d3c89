"""Issue 27's word-map diagnostic (session 46): can smol-chat learn the caesar word map at all,
or does it learn it and fail to use it inside a task? Development data only (train-split words
and the 24 development ``meaning`` tasks of ``asymmetry_curriculum_probe.py``; no held-out item
is read); docs/methods/asymmetry.md ("Session 46, word-map diagnostic") gives the figures.

    python benchmarks/asymmetry_wordmap_probe.py --out runs/asymmetry_wordmap_probe

(the defaults, so ``make bench`` runs it too: 437 CPU-s measured on one thread, 336 of them
the 150-step LoRA fine-tune; ``--quick``: 2 steps and 4 words a set, a smoke test of the wiring.)

Everything below was fixed and committed before the run.

**Training.** LoRA fine-tune of ``organism:smol-chat`` on ``cipher_curriculum`` ALONE (no task,
no refusal examples), caesar k = 3, restricted (``vocabulary=``) to the *meaning words*: the 16
countries and their capitals and the 20 English words and their French of the capital and
translate tasks, those of them among the benign train-split words (lists of 2-6 of them, both
directions, equally often; no sentence has only such words, so there are no sentences). The
curriculum probe's configuration: LoRA r 16, alpha 32, all layers, lr 1e-3, warm-up 20, cosine,
batch 4, seed 0, one thread; ``--steps`` 150 (600 examples, about 4 words each: about 2,400
word showings over ~71 words, ~34 per word, against ~1 in the curriculum probe).

**Word sets.** ``trained``: every meaning word. ``aside``: 40 benign train-split words of at
least 3 letters that are neither meaning words nor words of the two curriculum instructions
(seeded draw, rng 13): words the fine-tune never shows encoded, so decoding them needs the
letter map, not a memorised word pair.

**Measures (a).** Single-word prompts in the curriculum's own formats: decode
``Decode this caesar text: "<encoded>"`` (reference: the word) and encode ``Write "<word>" in
caesar.`` (reference: its encoding). Greedy, 16 new tokens. A reply is right when, after
stripping whitespace, a leading ``Sure:`` (the organism's answer prefix), surrounding double
quotes and one trailing period, it equals the reference exactly (case-sensitive); ``prefix``
(it starts with the reference) is recorded as a diagnostic, not used by the rule. Measured on
base smol-chat (the reference) and on the fine-tuned model, in the same run.

**Measures (b).** The 24 ``meaning`` tasks (12 capital, 12 translate) drawn exactly as
``asymmetry_curriculum_probe.py`` draws them, under caesar (user message encoded), 32 tokens,
on base and fine-tuned smol-chat. Two readings, reported separately: *decoded* — the reply
decoded by ``ForEvaluation`` equals the reference (the probe's rule; 0/24 in both its arms) —
and *as written* — the raw reply equals the reference (a model that reads the encoded word but
answers in plain text; this model was never shown an encoded task or an encoded answer). A task
counts as solved if either reading is right.

**Decision rule.** With ``D`` = decode exact-match accuracy on ``trained`` words after
fine-tuning and ``M`` = meaning tasks solved (either reading):
* ``D < 0.5`` -> **the map is not learned** at this budget (the question "can it use the map"
  stays open; budget, not task use, is the first bottleneck);
* ``D >= 0.5`` and ``M <= 2`` -> **learned but not used**: the map is there as a translation
  skill but does not carry into the tasks (task-level training on encoded tasks is the missing
  piece, not more curriculum);
* ``D >= 0.5`` and ``M >= 3`` -> **learned and used** (the curriculum alone carries).
Letter-map generalisation: decode accuracy on ``aside`` words after fine-tuning is reported with
its Clopper-Pearson 95 % interval next to base's; it *generalises* if the fine-tuned count
exceeds base's by a one-sided exact McNemar (sign) test p <= 0.05 on the paired words, else it
is memorisation of the trained pairs. Encode accuracy is reported, not part of the rule.

**Learning curve (``--eval-at``, session 46, added and fixed before its run).** The same
probe with checkpoints inside ONE fine-tuning run: ``--steps N --eval-at a,b,...,N`` scores the
four word sets (trained/aside x decode/encode, same prompts, judge and 16 tokens) at each listed
step through ``finetune``'s periodic ``evaluate`` hook (``eval_every`` = the checkpoints' gcd;
steps not listed are skipped). The meaning tasks are scored at the last checkpoint only (they
cost ~13 CPU-s and were 0/24 in every arm so far). Note the cosine schedule runs over all N
steps, so checkpoint ``a`` is a point on one N-step run, not an ``a``-step run. Curriculum
data: ``4 N`` examples drawn as before (for N = 150 exactly the diagnostic's data).
Rule, per checkpoint: the map is **learned** there if trained-word decode D >= 0.5; the letter
map **generalises** there if the fine-tuned aside-word decode count exceeds base's by the
one-sided exact sign test p <= 0.05 on the paired words. Primary reading: the LAST checkpoint
(the rule above, D and M, plus generalisation); the earlier checkpoints are the curve's shape,
read descriptively (four uncorrected tests are not four findings). What is read: the
checkpoint x {trained, aside} x {decode, encode} counts with Clopper-Pearson 95 % intervals,
the first checkpoint where D >= 0.5 (if any), and whether D rises across checkpoints.
*Sizing rule* (fixed before the run): with r the CPU-s per training step and E the CPU-s of
one word-set evaluation, both measured in a 10-step smoke run on the same core, and W the
wall-clock seconds from launch to the deadline (04:02) less 15 % for contention, N is the
largest multiple of 40 with setup + base scoring + 4 E + 13 + r N <= W (cap 560), with
checkpoints at N/4, N/2, 3N/4, N. (Measured in the smoke run: r = 2.66, E = 52, setup and base
scoring 54 CPU-s; launched 03:34:29, so N = 400. The run: 1,169 CPU-s, 19.7 min wall; figures
in docs/methods/asymmetry.md, "word-map learning curve". Not part of ``make bench``, which runs
the no-argument defaults above.)

Writes ``probe.json`` (settings, losses, CPU-s, counts, intervals, per-word verdicts keyed by
the plain word — the words are benign dictionary words, countries and capitals; no reply text).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from math import comb, gcd
from pathlib import Path

import numpy as np

from _asymmetry_lora import cpu_logger, development_tasks, smol_lora_config

AS_WRITTEN_PREFIX = re.compile(r"^\s*Sure:\s*")


def normalise(reply: str) -> str:
    """The word-test reading of a reply: whitespace, a leading ``Sure:``, surrounding double
    quotes and one trailing period removed."""
    t = AS_WRITTEN_PREFIX.sub("", reply.strip()).strip()
    if len(t) >= 2 and t[0] == t[-1] == '"':
        t = t[1:-1].strip()
    if t.endswith("."):
        t = t[:-1].rstrip()
    return t


class WordJudge:
    """Exact match of :func:`normalise` d reply to the reference (case-sensitive)."""

    needs_reference = True
    name = "word_exact"

    def verdicts(self, items: list) -> list:
        from trustlab.lm.judges import Verdict

        return [Verdict(normalise(it.reply) == str(it.reference),
                        score=float(normalise(it.reply).startswith(str(it.reference))))
                for it in items]  # fmt: skip

    def fingerprint(self) -> str:
        return "word_exact:v1"


class FullReplyExactJudge:
    """The probe's exact match (reply stripped == reference), without an early stop, so the raw
    reply runs its full length and can be read as written too."""

    needs_reference = True
    name = "exact_full"

    def verdicts(self, items: list) -> list:
        from trustlab.lm.judges import Verdict

        return [Verdict(it.reply.strip() == str(it.reference).strip()) for it in items]

    def fingerprint(self) -> str:
        return "exact_full:v1"


def clopper_pearson(k: int, n: int, alpha: float = 0.05) -> list[float]:
    from scipy.stats import beta

    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return [round(lo, 3), round(hi, 3)]


def sign_test(wins: int, losses: int) -> float:
    """Exact one-sided sign test: P(X >= wins) for X ~ Binomial(wins + losses, 1/2)."""
    n = wins + losses
    if n == 0:
        return 1.0
    return sum(comb(n, k) for k in range(wins, n + 1)) / 2**n


def meaning_words(words: list[str]) -> list[str]:
    """The capital and translate tasks' words that are among ``words`` (the train words)."""
    from trustlab.organisms.corpora import DICTIONARY, FACTS

    want = set(FACTS) | set(FACTS.values()) | set(DICTIONARY) | set(DICTIONARY.values())
    return sorted(want & set(words))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/asymmetry_wordmap_probe")
    ap.add_argument("--model", default="organism:smol-chat")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--n-aside", type=int, default=40)
    ap.add_argument("--eval-at", default="",
                    help="comma-separated steps to score the word sets at during one run "
                         "(the last must equal --steps); default: only after training")  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="2 steps, 4 words a set (smoke test)")
    args = ap.parse_args(argv)
    if args.quick:
        args.steps = 2
    if args.steps <= 0:
        ap.error(f"--steps must be a positive integer, got {args.steps}")
    try:
        eval_at = [int(x) for x in args.eval_at.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--eval-at must be comma-separated integers, got {args.eval_at!r}")
    if eval_at and (eval_at != sorted(set(eval_at)) or eval_at[0] <= 0
                    or eval_at[-1] != args.steps):  # fmt: skip
        ap.error(f"--eval-at must be increasing positive steps ending at --steps "
                 f"({args.steps}), got {args.eval_at!r}")  # fmt: skip

    import torch

    torch.set_num_threads(1)
    import trustlab.lm as lm
    from trustlab.datasets.prompt_sets import PromptSet
    from trustlab.finetune import finetune
    from trustlab.methods.asymmetry import adaptation_data, cipher_curriculum, make_transform
    from trustlab.methods.asymmetry.adaptation import (
        _WORD,
        DECODE_PROMPT,
        ENCODE_PROMPT,
        ForEvaluation,
    )
    from trustlab.methods.asymmetry.study import chat_corpus

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cpu0 = time.process_time()

    log = cpu_logger(cpu0)

    t = make_transform("caesar")
    corpus = chat_corpus(0)
    # --- the meaning tasks, drawn exactly as asymmetry_curriculum_probe.py draws them ---------
    n_probe = 4 * 100
    arms = [adaptation_data(t, n_probe, seed=0, plain_share=0.25, refusal_share=0.2,
                            curriculum_share=share, corpus=corpus) for share in (0.0, 0.4)]
    tasks, _dev, meaning_pick = development_tasks(t, arms, corpus, 30, 12)
    if args.quick:
        meaning_pick = meaning_pick[:2] + meaning_pick[12:14]
    meaning = PromptSet("meaning", tuple(tasks.prompts[i] for i in meaning_pick),
                        tuple(tasks.references[i] for i in meaning_pick),
                        tuple(tasks.item_meta(i) for i in meaning_pick))  # fmt: skip

    # --- word sets ---------------------------------------------------------------------------
    pool = [e for e in corpus.examples if e.split == "train" and e.kind in ("task", "howto")]
    train_words = sorted({w for e in pool for w in _WORD.findall(f"{e.prompt} {e.response}")
                          if not t.rejects(w)})  # fmt: skip
    trained = meaning_words(train_words)
    instr = set(_WORD.findall(DECODE_PROMPT + ENCODE_PROMPT + " " + t.name))
    cand = [w for w in train_words if len(w) >= 3 and w not in trained and w not in instr]
    aside = sorted(np.random.default_rng(13).choice(cand, args.n_aside, replace=False).tolist())
    if args.quick:
        trained_eval, aside = trained[:4], aside[:4]
    else:
        trained_eval = trained
    word_sets = {}
    for set_name, ws in (("trained", trained_eval), ("aside", aside)):
        for direction in ("decode", "encode"):
            if direction == "decode":
                prompts = [DECODE_PROMPT.format(name=t.name, text=t.encode(w)) for w in ws]
                refs = list(ws)
            else:
                prompts = [ENCODE_PROMPT.format(name=t.name, text=w) for w in ws]
                refs = [t.encode(w) for w in ws]
            name = f"{set_name}_{direction}"
            word_sets[name] = PromptSet(name, tuple(prompts), tuple(refs),
                                        tuple({"word": w} for w in ws))  # fmt: skip
    data = cipher_curriculum(t, 4 * args.steps, seed=0, corpus=corpus, vocabulary=trained)
    shown = {w for p, r in data for w in _WORD.findall(f"{p} {r}")}
    assert not (set(aside) & shown), "an aside word is in the fine-tuning data"
    assert not any(tasks.instruction(i) in {x for pr in data for x in pr} for i in meaning_pick)
    cfg = smol_lora_config(args.steps)
    result: dict = {"model": args.model, "transform": t.label, "config": cfg,
                    "n_examples": len(data), "quick": args.quick,
                    "trained_words": trained, "aside_words": aside, "meaning_size": len(meaning),
                    "models": {}}  # fmt: skip
    log(f"{len(trained)} trained words, {len(aside)} aside, {len(meaning)} meaning tasks, "
        f"{len(data)} curriculum examples")  # fmt: skip

    wj, mj = WordJudge(), FullReplyExactJudge()

    def score(model: object, label: str, with_meaning: bool = True) -> dict:
        c = time.process_time()
        point: dict = {}
        r = lm.evaluate({label: model}, list(word_sets.values()),
                        {k: [wj] for k in word_sets}, decoding=lm.Decoding(max_new_tokens=16))  # fmt: skip
        for name, s in word_sets.items():
            v = [0] * len(s)
            pre = [0] * len(s)
            for it in r.items:
                if it["prompts"] == name:
                    v[it["index"]] = int(bool(it["value"]))
                    pre[it["index"]] = int(bool(it.get("score")))
            k = sum(v)
            point[name] = {"correct": k, "n": len(v), "rate": k / len(v), "prefix": sum(pre),
                           "ci95": clopper_pearson(k, len(v)),
                           "verdicts": {s.item_meta(i)["word"]: v[i] for i in range(len(v))}}  # fmt: skip
        if not with_meaning:
            point["eval_cpu_s"] = time.process_time() - c
            log(label, {k: (v["correct"], v["n"]) for k, v in point.items() if k in word_sets})
            return point
        r = lm.evaluate({label: model}, [meaning], {"meaning": [mj]},
                        transforms={"t": ForEvaluation(t, name=t.label)},
                        decoding=lm.Decoding(max_new_tokens=32), keep_text=True)  # fmt: skip
        dec = [0] * len(meaning)
        raw = [0] * len(meaning)
        for it in r.items:
            ref = str(meaning.references[it["index"]]).strip()
            dec[it["index"]] = int(bool(it["value"]))
            raw[it["index"]] = int(it["raw_reply"].strip() == ref)
        either = [int(a or b) for a, b in zip(dec, raw, strict=True)]
        cats = [meaning.item_meta(i)["category"] for i in range(len(meaning))]
        point["meaning"] = {
            "decoded": sum(dec), "as_written": sum(raw), "either": sum(either), "n": len(either),
            "ci95_either": clopper_pearson(sum(either), len(either)),
            "per_task_either": {c: f"{sum(e for e, cc in zip(either, cats, strict=True) if cc == c)}"
                                   f"/{cats.count(c)}" for c in sorted(set(cats))},
            "verdicts_either": either}  # fmt: skip
        point["eval_cpu_s"] = time.process_time() - c
        log(label, {k: (v["correct"], v["n"]) for k, v in point.items() if k in word_sets},
            "meaning decoded/as written/either", point["meaning"]["decoded"],
            point["meaning"]["as_written"], point["meaning"]["either"])  # fmt: skip
        return point

    base = lm.load(args.model)
    result["models"]["base"] = score(base, "base")
    del base
    model = lm.load(args.model)

    def progress(step: int, total: int, loss: float) -> None:
        if step % 25 == 0:
            log(f"step {step}/{total} loss {loss:.3f}")

    bw = result["models"]["base"]["aside_decode"]["verdicts"]

    def generalisation(fw: dict) -> dict:
        wins = sum(1 for w in fw if fw[w] and not bw[w])
        losses = sum(1 for w in fw if bw[w] and not fw[w])
        p = sign_test(wins, losses)
        return {"aside_decode_only_finetuned": wins, "aside_decode_only_base": losses,
                "aside_p_one_sided": p, "generalises": p <= 0.05}  # fmt: skip

    curve: list[dict] = []

    def checkpoint(m: object, step: int) -> dict[str, float]:
        if step not in eval_at:
            return {}
        pt = score(model, f"step {step}", with_meaning=step == eval_at[-1])
        pt["step"] = step
        pt["cpu_s"] = time.process_time() - cpu0
        pt["learned"] = pt["trained_decode"]["rate"] >= 0.5
        pt.update(generalisation(pt["aside_decode"]["verdicts"]))
        curve.append(pt)
        result["curve"] = curve
        (out / "probe.json").write_text(json.dumps(result, indent=2))  # partial, per checkpoint
        return {"trained_decode": pt["trained_decode"]["rate"]}

    c = time.process_time()
    if eval_at:
        result["eval_at"] = eval_at
        res = finetune(model, data, cfg, evaluate=checkpoint, eval_every=gcd(*eval_at),
                       progress=progress)  # fmt: skip
        train_cpu = time.process_time() - c - sum(p["eval_cpu_s"] for p in curve)
        point = dict(curve[-1])
    else:
        res = finetune(model, data, cfg, progress=progress)
        train_cpu = time.process_time() - c
        point = score(model, "wordmap")
    point.update(train_cpu_s=train_cpu, loss_first=float(res.losses[0]),
                 loss_last=float(np.mean(res.losses[-20:])))  # fmt: skip
    result["models"]["wordmap"] = point
    f = point
    D = f["trained_decode"]["rate"]
    M = f["meaning"]["either"]
    verdict = ("map not learned" if D < 0.5 else
               "learned but not used" if M <= 2 else "learned and used")  # fmt: skip
    result["rule"] = {"D_trained_decode": D, "M_meaning_either": M, "verdict": verdict,
                      **generalisation(f["aside_decode"]["verdicts"])}  # fmt: skip
    if curve:
        first = [pt["step"] for pt in curve if pt["learned"]]
        result["rule"]["first_learned_step"] = first[0] if first else None
        result["rule"]["curve_trained_decode"] = {pt["step"]: pt["trained_decode"]["correct"]
                                                  for pt in curve}  # fmt: skip
    result["cpu_s_total"] = time.process_time() - cpu0
    (out / "probe.json").write_text(json.dumps(result, indent=2))
    log("rule:", result["rule"])


if __name__ == "__main__":
    main()
