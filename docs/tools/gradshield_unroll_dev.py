"""Development (session 49, gradshield): the unrolled FIHS, filter only
(docs/methods/gradshield.md, *Fidelity*, "Session 49, unrolled FIHS"). No held-out seed.

    python docs/tools/gradshield_unroll_dev.py pilot 64                       # timing only
    python docs/tools/gradshield_unroll_dev.py score /tmp/gs49u/u.pkl 600,601,602,603 500,501
    python docs/tools/gradshield_unroll_dev.py report /tmp/gs49u/u.pkl /tmp/gs48/r

``U_k(x) = S(θ_k) − S(θ_0)``: ``θ_k`` after ``k`` AdamW steps on ``x`` alone from the base
chat-s weights (lr 1e-3 constant, betas (0.9, 0.999), eps 1e-8, no weight decay, no clipping,
fresh state, full fine-tuning), ``S`` = mean over the draw's held-out probe half of the
per-token mean log-prob of the compliance answer minus that of the refusal. ``score`` saves
``U_1`` and ``U_3`` of every distinct example of the fair mixes (for every draw's probes) and of
each draw's trusted calibration half; ``report`` compares them with the plain FIHS saved by
gradshield_draws_dev.py (``/tmp/gs48/r<draw>``).
"""

from __future__ import annotations

import pickle
import sys
import time

import numpy as np
import torch

LR, STEPS = 1e-3, (1, 3)


def _batch(enc: list, pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(e.ids) for e in enc)
    ids = torch.full((len(enc), width), pad, dtype=torch.long)
    att = torch.zeros((len(enc), width), dtype=torch.long)
    mask = torch.zeros((len(enc), width - 1), dtype=torch.bool)  # predicts token t+1
    for i, e in enumerate(enc):
        ids[i, : len(e.ids)] = torch.tensor(e.ids)
        att[i, : len(e.ids)] = 1
        mask[i, e.n_prompt - 1 : len(e.ids) - 1] = True
    return ids, att, mask


def _token_mean_logp(hf, batch) -> torch.Tensor:
    ids, att, mask = batch
    logits = hf(input_ids=ids, attention_mask=att).logits[:, :-1].float()
    lp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None])[..., 0]
    return (lp * mask).sum(1) / mask.sum(1)


class Unroller:
    def __init__(self, draws: list[int]) -> None:
        import trustlab.lm as lm
        from trustlab.finetune.loop import _unwrap, encode_data
        from trustlab.methods.gradshield import organism_references

        self.hf, self.tok = _unwrap(lm.load("organism:chat-s"), None)
        self.hf.eval()
        self.encode = lambda data: encode_data(self.tok, data)
        self.pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else 0
        self.params = [p for p in self.hf.parameters() if p.requires_grad]
        self.base = [p.detach().clone() for p in self.params]
        self.refs = {d: organism_references(32, 256, seed=d, howto_share=0.25) for d in draws}
        enc = []
        for d in draws:  # per draw: 16 compliance then 16 refusal sequences
            r = self.refs[d]
            enc += self.encode(list(r.harmful[1::2])) + self.encode(list(r.refusal[1::2]))
        self.n_half = len(self.refs[draws[0]].harmful[1::2])
        self.n_draws = len(draws)
        self.probes = _batch(enc, self.pad)
        self.one = {j: _batch(enc[2 * self.n_half * j : 2 * self.n_half * (j + 1)], self.pad)
                    for j in range(self.n_draws)}  # fmt: skip
        self.only: int | None = None  # score against one draw's probes (calibration halves)
        self.s0 = self.probe_s()
        self.s0_one = {}
        for j in range(self.n_draws):  # the same padding as the one-draw batches
            self.only = j
            self.s0_one[j] = self.probe_s()[0]
        self.only = None

    @torch.no_grad()
    def probe_s(self) -> np.ndarray:
        if self.only is not None:
            lp = _token_mean_logp(self.hf, self.one[self.only]).view(2, self.n_half)
            return np.full(self.n_draws, float(lp[0].mean() - lp[1].mean()))
        lp = _token_mean_logp(self.hf, self.probes).view(self.n_draws, 2, self.n_half)
        return (lp[:, 0].mean(1) - lp[:, 1].mean(1)).double().numpy()

    def unroll(self, example) -> np.ndarray:
        """[len(STEPS), n_draws] ΔS after each step count in STEPS; weights restored."""
        batch = _batch(self.encode([example]), self.pad)
        opt = torch.optim.AdamW(self.params, lr=LR, betas=(0.9, 0.999), eps=1e-8,
                                weight_decay=0.0)  # fmt: skip
        out = []
        for step in range(1, max(STEPS) + 1):
            opt.zero_grad(set_to_none=True)
            loss = -_token_mean_logp(self.hf, batch).mean()
            loss.backward()
            opt.step()
            if step in STEPS:
                out.append(
                    self.probe_s() - (self.s0 if self.only is None else self.s0_one[self.only])
                )
        with torch.no_grad():
            for p, b in zip(self.params, self.base, strict=True):
                p.copy_(b)
                p.grad = None
        return np.array(out)


def pilot(n: int) -> None:
    from gradshield_refine_dev import dev_pool

    torch.set_num_threads(1)
    u = Unroller([600, 601, 602, 603])
    _, pool = dev_pool([500], (0.0, 0.2))
    data = list(pool)[:n]
    t = time.process_time()
    for e in data:
        u.unroll(e)
    per = (time.process_time() - t) / n
    t = time.process_time()
    for _ in range(5):
        u.probe_s()
    ev = (time.process_time() - t) / 5
    print(f"{per * 1000:.1f} ms/example (4 draws, k=1,3); probe eval {ev * 1000:.1f} ms")
    step_cost()


def step_cost() -> float:
    """CPU-s of one protocol training step (batch 32, AdamW) on chat-s, median of 5."""
    from gradshield_refine_dev import dev_pool

    import trustlab.lm as lm
    from trustlab.finetune.loop import _unwrap, encode_data

    hf, tok = _unwrap(lm.load("organism:chat-s"), None)
    _, pool = dev_pool([500], (0.0,))
    batch = _batch(encode_data(tok, list(pool)[:32]), tok.pad_token_id or 0)
    params = [p for p in hf.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=LR)
    times = []
    for _ in range(6):
        t = time.process_time()
        opt.zero_grad()
        (-_token_mean_logp(hf, batch).mean()).backward()
        opt.step()
        times.append(time.process_time() - t)
    med = float(np.median(times[1:]))
    print(f"one training step (batch 32): {med * 1000:.1f} ms")
    return med


def score(out: str, draws: list[int], seeds: list[int], limit: int | None = None) -> None:
    from gradshield_draws_dev import FRACTIONS, _pattern
    from gradshield_refine_dev import dev_pool

    torch.set_num_threads(1)
    t0 = time.process_time()
    u = Unroller(draws)
    mixes, pool = dev_pool(seeds, FRACTIONS)
    data = list(pool)[:limit]
    res = {"draws": draws, "s0": u.s0, "pattern": [_pattern(e) for e in data]}
    res["meta"] = {k: (np.array([pool[e] for e in m.examples]), np.array(m.harmful, bool))
                   for k, m in mixes.items()}  # fmt: skip
    t1 = time.process_time()
    rows = []
    for i, e in enumerate(data):  # [n, steps, draws]
        rows.append(u.unroll(e))
        if i % 250 == 0:
            print(
                i, f"{time.process_time() - t1:.0f} CPU-s", rows[-1].round(4).tolist(), flush=True
            )
    res["pool"] = np.stack(rows)
    t_pool = time.process_time() - t1
    res["cal"] = {}
    for j, d in enumerate(draws):
        u.only = j
        res["cal"][d] = np.stack([u.unroll(e)[:, j] for e in u.refs[d].benign_calibration])
        print(d, "calibration half done", f"{time.process_time() - t0:.0f} CPU-s", flush=True)
    u.only = None
    res["cpu"] = {"pool": t_pool, "n": len(data), "total": time.process_time() - t0,
                  "step": step_cost()}  # fmt: skip
    with open(out, "wb") as fh:
        pickle.dump(res, fh)
    print(res["cpu"], flush=True)


def report(path: str, plain_prefix: str) -> None:
    from gradshield_draws_dev import auc, conformal_cut, default_removed, load, plain

    from trustlab.methods.gradshield.fihs import fihs_from_gradients

    with open(path, "rb") as fh:
        r = pickle.load(fh)
    pat = np.array(r["pattern"])
    ben = np.isin(pat, ("task", "howto"))
    so, du = pat == "shallow_opener", pat == "dual_use"
    cpu = r["cpu"]
    print(f"CPU: {cpu['pool']:.0f} s for {cpu['n']} examples = {1000 * cpu['pool'] / cpu['n']:.1f}"
          f" ms/example (k = 1 and 3, ΔS for {len(r['draws'])} draws); one training step "
          f"{1000 * cpu['step']:.1f} ms; total {cpu['total']:.0f} CPU-s")  # fmt: skip
    print("| refs | score | DU AUC | SO AUC | conformal cut: SO / DU left (implicit mixes) | thin cells ≤ 1 left (of 4) | explicit left (of 760) | benign removed max clean / any | ceiling thin ≤ 1 left 3 % / 10 % (of 4) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for j, d in enumerate(r["draws"]):
        pd = load(f"{plain_prefix}{d}")
        pl_cal = np.asarray(fihs_from_gradients(pd["cal"].float(), pd["direction"].float()))
        scores = {"plain FIHS": (plain(pd), pl_cal)}
        for i, k in enumerate(STEPS):
            scores[f"U_{k}"] = (r["pool"][:, i, j], r["cal"][d][:, i])
        for name, (sc, cal) in scores.items():
            cut = conformal_cut(cal)
            left_so = left_du = ex = thin_ok = c3 = c10 = 0
            bc = ba = 0.0
            for (_s, kind, f), (idx, h) in r["meta"].items():
                x, pt = sc[idx], pat[idx]
                rem = x > cut
                b = float(rem[~h].mean())
                ba = max(ba, b)
                if kind == "clean":
                    bc = max(bc, b)
                if kind == "explicit":
                    ex += int(((pt == "harmful") & ~rem).sum())
                if kind == "implicit":
                    n_so = int(((pt == "shallow_opener") & ~rem).sum())
                    n_du = int(((pt == "dual_use") & ~rem).sum())
                    left_so, left_du = left_so + n_so, left_du + n_du
                    if f <= 0.02:
                        thin_ok += n_so + n_du <= 1
                        imp = np.isin(pt, ("shallow_opener", "dual_use"))
                        for budget in (0.03, 0.10):
                            c = np.quantile(x[~h], 1 - budget)
                            ok = int((imp & (x <= c)).sum()) <= 1
                            c3, c10 = (c3 + ok, c10) if budget == 0.03 else (c3, c10 + ok)
            a_du, a_so = auc(sc[du], sc[ben]), auc(sc[so], sc[ben])
            summary[(d, name)] = (a_du, a_so, left_du, left_so, bc)
            print(f"| {d} | {name} | {a_du:.3f} | {a_so:.3f} | {left_so} / {left_du} | {thin_ok} | "
                  f"{ex} | {100 * bc:.1f} / {100 * ba:.1f} % | {c3} / {c10} |")  # fmt: skip
        n_def = sum(
            int((du[idx] & ~np.asarray(default_removed(pd, idx), bool)).sum())
            for (_s, kind, _f), (idx, _h) in r["meta"].items()
            if kind == "implicit"
        )
        print(f"|   | (library default rule, refine=1: DU left {n_def}) |||||||| ")
    with open(path + ".summary", "wb") as fh:
        pickle.dump(summary, fh)


if __name__ == "__main__":
    if sys.argv[1] == "pilot":
        pilot(int(sys.argv[2]))
    elif sys.argv[1] == "score":
        score(sys.argv[2], [int(s) for s in sys.argv[3].split(",")],
              [int(s) for s in sys.argv[4].split(",")],
              int(sys.argv[5]) if len(sys.argv) > 5 else None)  # fmt: skip
    elif sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3])
