"""Development (session 47, gradshield): rule 4's failures and the refinement candidates,
filter only (docs/methods/gradshield.md, *Fidelity*, "Session 47"). Self-contained copy of the
one-off scripts behind that section's development table.

    python docs/tools/gradshield_refine_dev.py grads 4 4,5 /tmp/r4_s45.npz   # refs seed, data seeds
    python docs/tools/gradshield_refine_dev.py table /tmp/r4_s45.npz ...      # every candidate

``grads``: kept-slice gradients (FIHS at 1 % of rows) of every distinct example of the fair
mixes (both kinds, 0-20 %, 1,000 examples) and of both trusted halves, saved once (18-31 CPU-s
on chat-s). ``table``: re-thresholds them under each candidate; the default and the chosen
candidate go through the library (``refine.two_sided_removal``); the others (clusters, the
benign-tail contrast) are development code only. Rows: shallow_opener + dual_use left per
implicit mix (data seeds separated by /), explicit left, benign removal.
"""

from __future__ import annotations

import pickle
import sys

import numpy as np
import torch


def dev_pool(seeds: list[int], fractions=(0.0, 0.01, 0.02, 0.05, 0.1, 0.2)) -> tuple[dict, dict]:
    """The fair development mixes (both kinds, 1,000 examples; the 0 % mix is one clean set per
    data seed) keyed (seed, kind, fraction), and their distinct examples -> index. Shared with
    gradshield_draws_dev.py."""
    from trustlab.methods.gradshield import build_mix

    mixes: dict = {}
    for s in seeds:
        for kind in ("explicit", "implicit"):
            for f in fractions:
                key = (s, "clean", 0.0) if f == 0 else (s, kind, f)
                mixes.setdefault(key, build_mix(kind, f, 1000, seed=s, howto_share=0.25))
    pool: dict = {}
    for m in mixes.values():
        for e in m.examples:
            pool.setdefault(e, len(pool))
    return mixes, pool


def grads(ref_seed: int, seeds: list[int], out: str) -> None:
    import trustlab.lm as lm
    from trustlab.methods.gradshield import FIHS, GradShield, organism_references

    torch.set_num_threads(1)
    model = lm.load("organism:chat-s")
    refs = organism_references(32, 256, seed=ref_seed, howto_share=0.25)
    shield = GradShield(FIHS(slice_fraction=0.01), refine=1).fit(model, refs)
    mixes, pool = dev_pool(seeds)

    def pattern(e) -> str:
        t = e.template or ""
        return ("dual_use" if "dual_use" in t else "shallow_opener" if "shallow_opener" in t
                else e.kind)  # fmt: skip

    g = shield.fihs_.kept_gradients(model, list(pool)).numpy()
    np.savez(out, grads=g, cal=shield.calibration_grads_.numpy(),
             benign=shield.slice_grads_.numpy(), direction=shield.fihs_.direction_.numpy())  # fmt: skip
    meta = {k: (np.array([pool[e] for e in m.examples]), np.array(m.harmful, bool))
            for k, m in mixes.items()}  # fmt: skip
    with open(out + ".pkl", "wb") as fh:
        pickle.dump({"meta": meta, "pattern": [pattern(e) for e in pool]}, fh)


def _unit(x):
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-30)


def _clusters(g, C, B, r0, q=0.03, K=3, iters=20):
    """Spherical k-means of the top-q self-set; one refined direction and cut per cluster."""
    from trustlab.methods.gradshield.thresholds import ConformalThreshold

    def scored(r):
        s, cal = (g @ _unit(r)).numpy(), (C @ _unit(r)).numpy()
        return s, float(ConformalThreshold(0.01).fit(s, cal).threshold_)

    s0, cut0 = scored(r0)
    rem = s0 > cut0
    top = torch.from_numpy(rem.copy())
    top[torch.from_numpy(np.argsort(-s0)[: max(5, int(np.ceil(q * len(s0))))].copy())] = True
    X = g[top]
    cent = [X[int(torch.argmax(X @ _unit(X.mean(0))))]]
    for _ in range(1, min(K, len(X))):
        cent.append(X[int(torch.argmin(torch.stack([X @ c for c in cent], 1).max(1).values))])
    cent = torch.stack(cent)
    for _ in range(iters):
        a = (X @ cent.T).argmax(1)
        cent = torch.stack([_unit(X[a == j].mean(0)) if (a == j).any() else cent[j]
                            for j in range(len(cent))])  # fmt: skip
    a = (X @ cent.T).argmax(1)
    for j in range(len(cent)):
        if int((a == j).sum()) >= 3:
            s, cut = scored(X[a == j].mean(0) - B.mean(0))
            rem |= s > cut
    return rem


def table(paths: list[str]) -> None:
    from trustlab.methods.gradshield.refine import two_sided_removal

    rules = {
        "default (session 46)": lambda g, C, B, d: two_sided_removal(
            g, C, B, d, top_fraction=0.0, sides="upper")["removed"],
        "top 3 % self-set (upper)": lambda g, C, B, d: two_sided_removal(
            g, C, B, d, top_fraction=0.03, sides="upper")["removed"],
        "two-sided": lambda g, C, B, d: two_sided_removal(
            g, C, B, d, top_fraction=0.0, sides="both")["removed"],
        "candidate (two-sided + top 3 %)": lambda g, C, B, d: two_sided_removal(
            g, C, B, d, top_fraction=0.03, sides="both")["removed"],
        "clusters K=3, top 3 %": lambda g, C, B, d: _clusters(
            _unit(g.double()), _unit(C.double()), _unit(B.double()), _unit(d.double())),
    }  # fmt: skip
    for path in paths:
        z = np.load(path)
        with open(path + ".pkl", "rb") as fh:
            m = pickle.load(fh)
        pat = np.array(m["pattern"])
        G, C, B, d = (torch.from_numpy(z[k]) for k in ("grads", "cal", "benign", "direction"))
        for label, rule in rules.items():
            so: dict = {}
            du: dict = {}
            ex = exn = 0
            clean, every = [], []
            for key, (idx, h) in sorted(m["meta"].items()):
                p = pat[idx]
                rem = np.asarray(rule(G[torch.from_numpy(idx)], C, B, d))
                every.append(rem[~h].mean())
                if key[1] == "clean":
                    clean.append(rem[~h].mean())
                if key[1] == "explicit":
                    ex, exn = ex + int((h & ~rem).sum()), exn + int(h.sum())
                if key[1] == "implicit":
                    so.setdefault(key[2], []).append(int(((p == "shallow_opener") & ~rem).sum()))
                    du.setdefault(key[2], []).append(int(((p == "dual_use") & ~rem).sum()))
            cells = " | ".join(f"{'/'.join(map(str, so[f]))} + {'/'.join(map(str, du[f]))}"
                               for f in (0.01, 0.02, 0.05, 0.1, 0.2))  # fmt: skip
            print(f"| {path} | {label} | {cells} | {ex} of {exn} | {100 * max(clean):.1f} % | "
                  f"{100 * min(every):.1f}–{100 * max(every):.1f} % |")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1] == "grads":
        grads(int(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")], sys.argv[4])
    else:
        table(sys.argv[2:])
