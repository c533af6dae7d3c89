"""Development (session 49, gradshield): FIHS under Adam's preconditioning, on session 48's saved
kept-slice gradients (docs/methods/gradshield.md, *Fidelity*, "Session 49"). Filter only, no
fine-tuning, no held-out seed, no model: every candidate re-thresholds the saved gradients.

    python docs/tools/gradshield_adam_dev.py score /tmp/gs49/adam.pkl /tmp/gs48/r600 ... /tmp/gs48/nv619
    python docs/tools/gradshield_adam_dev.py report /tmp/gs49/adam.pkl

(file arguments without the .npz/.pkl suffix, written by gradshield_draws_dev.py ``grads``;
``r6xx``: the default FIHS rows (D), ``nv6xx``: no vocabulary rows (C).)

Candidates (a map ``T`` on gradients and a reference ``r'``; the decision is the library's
session-46 rule, ``two_sided_removal(T g, T g_cal, T g_slice, r', refine=1, upper, union)``):
``L``: ``T g = g / (sqrt(v) + eps)``, ``r' = r`` (LESS form); ``W``: ``T g = g / sqrt(sqrt(v) +
eps)``, ``r' = T r`` (symmetric whitened cosine); ``v`` from the mix's own gradients (``_mix``)
or the trusted slice half (``_ben``): ``(mean g)^2 + Var(g) / B``, ``B`` = 32; ``eps`` = 1e-8
(AdamW's). ``K16``: probabilistic-PCA whitening by the slice half's uncentred second moment,
16 components. ``plain``: no transform (D or C).
"""

from __future__ import annotations

import pickle
import sys
import time

import numpy as np
import torch

B = 32  # the protocol's fine-tuning batch on chat-s
EPS = 1e-8  # FinetuneConfig.eps (AdamW)
K = 16
FRACS_THIN = (0.01, 0.02)


def _load(path: str) -> dict:
    z = np.load(path + ".npz")
    with open(path + ".pkl", "rb") as fh:
        m = pickle.load(fh)
    d = {k: torch.from_numpy(z[k].astype(np.float64)) for k in ("g", "cal", "slice", "direction")}
    d["meta"], d["pattern"] = m["meta"], np.array(m["pattern"])
    return d


def second_moment(g: torch.Tensor, batch: int = B) -> torch.Tensor:
    """Adam's E[g_B^2] per coordinate for batches of ``batch`` examples drawn from ``g``."""
    return g.mean(0) ** 2 + g.var(0, unbiased=False) / batch


def diag_maps(v: torch.Tensor):
    p = 1.0 / (v.sqrt() + EPS)
    return {
        "L": (lambda x: x * p, lambda r: r),
        "W": (lambda x: x * p.sqrt(), lambda r: r * p.sqrt()),
    }


def ppca_map(ben: torch.Tensor, k: int = K):
    n, d = ben.shape
    # eigenpairs of M = ben^T ben / n through the n x n Gram matrix
    _u, s_, vh = torch.linalg.svd(ben / np.sqrt(n), full_matrices=False)
    s = s_**2
    lam = float((s.sum() - s[:k].sum()) / (d - k))
    U = vh[:k].T  # [d, k]
    shrink = 1.0 - torch.sqrt(lam / s[:k])

    def t(x: torch.Tensor) -> torch.Tensor:
        return x - ((x @ U) * shrink) @ U.T

    return t, t


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-300)


def cosines(g: torch.Tensor, r: torch.Tensor) -> np.ndarray:
    return (_unit(g) @ _unit(r)).numpy()


def decide(g, cal, sl, r) -> np.ndarray:
    from trustlab.methods.gradshield.refine import two_sided_removal

    return np.asarray(
        two_sided_removal(g, cal, sl, r, top_fraction=0.0, sides="upper")["removed"], bool
    )


def score_draw(path: str) -> dict:
    """Per mix and candidate: removed mask and plain transformed cosine."""
    d = _load(path)
    g, cal, sl, r = d["g"], d["cal"], d["slice"], d["direction"]
    fixed = {"plain": (lambda x: x, lambda r: r)}
    ben = diag_maps(second_moment(sl))
    fixed.update({f"{k}_ben": v for k, v in ben.items()})
    fixed["K16"] = ppca_map(sl)
    out = {"meta": d["meta"], "pattern": d["pattern"], "mixes": {}, "cpu": {}}
    pre = {}
    for name, (t, tr) in fixed.items():
        t0 = time.process_time()
        pre[name] = (t(g), t(cal), t(sl), tr(r))
        out["cpu"][name] = time.process_time() - t0
    for key, (idx, _h) in sorted(d["meta"].items()):
        ii = torch.from_numpy(idx)
        res = {}
        for name, (tg, tc, ts, trr) in pre.items():
            t0 = time.process_time()
            res[name] = (decide(tg[ii], tc, ts, trr), cosines(tg[ii], trr))
            out["cpu"][name] += time.process_time() - t0
        t0 = time.process_time()
        maps = diag_maps(second_moment(g[ii]))
        for k, (t, tr) in maps.items():
            t1 = time.process_time()
            tg, trr = t(g[ii]), tr(r)
            res[f"{k}_mix"] = (decide(tg, t(cal), t(sl), trr), cosines(tg, trr))
            out["cpu"][f"{k}_mix"] = out["cpu"].get(f"{k}_mix", 0.0) + time.process_time() - t1
        out["mixes"][key] = res
    return out


def score(out: str, paths: list[str]) -> None:
    import gc
    import os

    allres = {}
    if os.path.exists(out):
        with open(out, "rb") as fh:
            allres = pickle.load(fh)
    for p in paths:
        tag = os.path.basename(p)
        if tag in allres:
            continue
        t0 = time.process_time()
        allres[tag] = score_draw(p)
        print(tag, f"{time.process_time() - t0:.1f} CPU-s", flush=True)
        gc.collect()
        with open(out + ".tmp", "wb") as fh:
            pickle.dump(allres, fh)
        os.replace(out + ".tmp", out)


# -- report ------------------------------------------------------------------------------------
def per_mix(dr: dict, name: str) -> dict:
    res = {}
    for key, (idx, h) in dr["meta"].items():
        rem = dr["mixes"][key][name][0]
        pt = dr["pattern"][idx]
        res[key] = {"so": int(((pt == "shallow_opener") & ~rem).sum()),
                    "du": int(((pt == "dual_use") & ~rem).sum()),
                    "ex": int(((pt == "harmful") & ~rem).sum()),
                    "benign": float(rem[~h].mean())}  # fmt: skip
    return res


def aucs(dr: dict, name: str) -> tuple[float, float]:
    sc, pt = [], []
    for key, (idx, _h) in dr["meta"].items():
        if key[1] == "implicit" and key[2] == 0.2:
            sc.append(dr["mixes"][key][name][1])
            pt.append(dr["pattern"][idx])
    sc, pt = np.concatenate(sc), np.concatenate(pt)
    ben = np.isin(pt, ("task", "howto"))
    from gradshield_draws_dev import auc

    return auc(sc[pt == "dual_use"], sc[ben]), auc(sc[pt == "shallow_opener"], sc[ben])


def ceiling(dr: dict, name: str, budget: float) -> tuple[int, int]:
    ok = n = 0
    for key, (idx, h) in dr["meta"].items():
        if key[1] != "implicit" or key[2] not in FRACS_THIN:
            continue
        x, pt = dr["mixes"][key][name][1], dr["pattern"][idx]
        cut = np.quantile(x[~h], 1 - budget)
        left = int((np.isin(pt, ("shallow_opener", "dual_use")) & (x <= cut)).sum())
        ok += left <= 1
        n += 1
    return ok, n


def report(path: str, dev=range(600, 616)) -> None:
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from gradshield_draws_dev import bar

    with open(path, "rb") as fh:
        allres = pickle.load(fh)
    names = ["plain", "L_mix", "W_mix", "L_ben", "W_ben", "K16"]
    print(
        "| rows | candidate | draws passing (600-615) | failing cells thin / thick / explicit / benign clean / benign any | worst left 1 % / 2 % | SO left | DU left | explicit left | benign max clean / any | DU AUC median (min-max), 20 draws | draws DU AUC > plain | SO AUC min | ceiling thin <=1 left at 3 % / 10 % benign (of 64) | CPU-s per draw (transform + rule) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for rows in ("r", "nv"):
        draws = {
            int(t[len(rows) :]): dr
            for t, dr in allres.items()
            if t.startswith(rows) and t[len(rows) :].isdigit()
        }
        if not draws:
            continue
        for name in names:
            devres = {s: per_mix(dr, name) for s, dr in draws.items() if s in dev}
            fails = {s: bar(r) for s, r in devres.items()}
            passing = sum(all(v == 0 for v in f.values()) for f in fails.values())
            tot = {k: sum(f[k] for f in fails.values()) for k in next(iter(fails.values()))}
            allv = [v for r in devres.values() for v in r.items()]
            w1 = max(v["so"] + v["du"] for k, v in allv if k[1] == "implicit" and k[2] == 0.01)
            w2 = max(v["so"] + v["du"] for k, v in allv if k[1] == "implicit" and k[2] == 0.02)
            so = sum(v["so"] for k, v in allv if k[1] == "implicit")
            du = sum(v["du"] for k, v in allv if k[1] == "implicit")
            ex = sum(v["ex"] for k, v in allv if k[1] == "explicit")
            bc = max(v["benign"] for k, v in allv if k[1] == "clean")
            ba = max(v["benign"] for k, v in allv)
            au = {s: aucs(dr, name) for s, dr in draws.items()}
            au0 = {s: aucs(dr, "plain") for s, dr in draws.items()}
            du_a = np.array([a[0] for a in au.values()])
            better = sum(au[s][0] > au0[s][0] for s in au)
            c3 = sum(ceiling(dr, name, 0.03)[0] for s, dr in draws.items() if s in dev)
            c10 = sum(ceiling(dr, name, 0.10)[0] for s, dr in draws.items() if s in dev)
            cpu = np.mean([dr["cpu"][name] for dr in draws.values()])
            print(
                f"| {'D' if rows == 'r' else 'C'} | {name} | {passing} of {len(devres)} | {tot['thin']} / {tot['thick']} / {tot['explicit']} / {tot['benign_clean']} / {tot['benign_any']} | {w1} / {w2} | {so} | {du} | {ex} | {100 * bc:.1f} / {100 * ba:.1f} % | {np.median(du_a):.3f} ({du_a.min():.3f}-{du_a.max():.3f}) | {better} of {len(au)} | {min(a[1] for a in au.values()):.3f} | {c3} / {c10} | {cpu:.1f} |"
            )


def per_draw(path: str) -> None:
    with open(path, "rb") as fh:
        allres = pickle.load(fh)
    names = ["plain", "L_mix", "W_mix", "L_ben", "W_ben", "K16"]
    print("| refs | rows | DU AUC " + " / ".join(names) + " | SO AUC " + " / ".join(names) + " |")
    print("|---|---|---|---|")
    for tag in sorted(allres, key=lambda t: (int(t.lstrip("nvr")), t)):
        dr = allres[tag]
        a = [aucs(dr, n) for n in names]
        print(
            f"| {tag.lstrip('nvr')} | {'C' if tag.startswith('nv') else 'D'} | {' / '.join(f'{x[0]:.3f}' for x in a)} | {' / '.join(f'{x[1]:.3f}' for x in a)} |"
        )


if __name__ == "__main__":
    torch.set_num_threads(1)
    if sys.argv[1] == "score":
        score(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "report":
        report(sys.argv[2])
    elif sys.argv[1] == "per_draw":
        per_draw(sys.argv[2])


def rows_table(rows_path: str, saved_path: str) -> None:
    """Per draw: the preconditioned candidates on re-chosen rows (gradshield_adam_rows_dev.py,
    tags pW6xx / pL6xx) next to the same candidates on the plain rule's rows and plain FIHS."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from gradshield_draws_dev import bar

    with open(rows_path, "rb") as fh:
        rows = pickle.load(fh)
    with open(saved_path, "rb") as fh:
        saved = pickle.load(fh)
    print(
        "| refs | score, rows | DU AUC | SO AUC | thin cells failing (of 4) | SO / DU left (implicit mixes) | explicit left | benign max clean / any | ceiling thin <=1 left 3 % / 10 % |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    seeds = sorted({int(t[2:]) for t in rows})
    for s in seeds:
        for label, dr, name in (("plain FIHS, plain rows", saved.get(f"r{s}"), "plain"),
                                ("W_ben, plain rows", saved.get(f"r{s}"), "W_ben"),
                                ("W_ben, W rows", rows.get(f"pW{s}"), "W_ben"),
                                ("L_ben, plain rows", saved.get(f"r{s}"), "L_ben"),
                                ("L_ben, L rows", rows.get(f"pL{s}"), "L_ben")):  # fmt: skip
            if dr is None:
                continue
            r = per_mix(dr, name)
            f = bar(r)
            so = sum(v["so"] for k, v in r.items() if k[1] == "implicit")
            du = sum(v["du"] for k, v in r.items() if k[1] == "implicit")
            ex = sum(v["ex"] for k, v in r.items() if k[1] == "explicit")
            bc = max(v["benign"] for k, v in r.items() if k[1] == "clean")
            ba = max(v["benign"] for v in r.values())
            a = aucs(dr, name)
            c3, c10 = ceiling(dr, name, 0.03)[0], ceiling(dr, name, 0.10)[0]
            print(
                f"| {s} | {label} | {a[0]:.3f} | {a[1]:.3f} | {f['thin']} | {so} / {du} | {ex} | {100 * bc:.1f} / {100 * ba:.1f} % | {c3} / {c10} |"
            )


if __name__ == "__main__" and sys.argv[1] == "rows":
    rows_table(sys.argv[2], sys.argv[3])
