"""Development (session 48, gradshield): FIHS over many draws of the reference sets, filter
only (docs/methods/gradshield.md, *Fidelity*, "Session 48"). No fine-tuning, no held-out seed.

    python docs/tools/gradshield_draws_dev.py grads 600 500,501 /tmp/gs48/r600   # refs seed, data seeds
    python docs/tools/gradshield_draws_dev.py table /tmp/gs48/r6*.npz             # per-draw table

``grads`` fits the default GradShield (FIHS on 1 % of rows, refine=1) on reference seed
``s`` (``organism_references(32, 256, seed=s, howto_share=0.25)``) and saves, for every
distinct example of the fair mixes of the data seeds (both kinds, 0-20 %, 1,000 examples) and
for both trusted halves: the kept-slice gradient of the response loss (``g``), the kept-slice
gradient of the loss over the first ``k`` response tokens only (``k`` = 1 and 4: ``open1``,
``open4``; the position-resolved candidate) and the number of response tokens (incl. the
end-of-turn token). Also the kept slices' names and widths, the probe direction, and the plain
FIHS of the calibration halves of every reference seed in ``CAL_SEEDS`` (for the
averaged-reference candidate, whose calibration half must be unseen by every fit).
"""

from __future__ import annotations

import pickle
import sys

import numpy as np
import torch

CAL_SEEDS = tuple(range(600, 620))
FRACTIONS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2)


def _pattern(e) -> str:
    t = e.template or ""
    return "dual_use" if "dual_use" in t else "shallow_opener" if "shallow_opener" in t else e.kind


def _open_grads(fihs, model, data, k: int) -> tuple[torch.Tensor, np.ndarray]:
    """Kept-slice gradients of the mean loss over the first ``k`` response tokens, and the
    number of response tokens per example (development code: the substrate's private chunk
    function on truncated encodings — causal attention: truncation changes no earlier logit)."""
    from trustlab.finetune.loop import EncodedExample, _unwrap, encode_data
    from trustlab.finetune.pergrad import _selected, _vmap_chunk

    hf, tok = _unwrap(model, None)
    chosen = _selected(hf, list(fihs.score_params_))
    enc = encode_data(tok, data)
    n_resp = np.array([len(e.ids) - e.n_prompt for e in enc])
    trunc = [EncodedExample(e.ids[: e.n_prompt + k], e.n_prompt) for e in enc]
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    out = []
    hf.eval()
    for start in range(0, len(trunc), 32):
        g = _vmap_chunk(hf, chosen, trunc[start : start + 32], pad)
        out.append(g[:, fihs._sub_index].detach().float())
    return torch.cat(out), n_resp


def grads(ref_seed: int, seeds: list[int], out: str) -> None:
    import time

    import trustlab.lm as lm
    from trustlab.methods.gradshield import FIHS, GradShield, build_mix, organism_references
    from trustlab.methods.gradshield.fihs import fihs_from_gradients

    torch.set_num_threads(1)
    t0 = time.process_time()
    model = lm.load("organism:chat-s")
    refs = organism_references(32, 256, seed=ref_seed, howto_share=0.25)
    shield = GradShield(FIHS(slice_fraction=0.01), refine=1).fit(model, refs)
    t_fit = time.process_time() - t0
    f = shield.fihs_
    mixes = {}
    for s in seeds:
        for kind in ("explicit", "implicit"):
            for fr in FRACTIONS:
                key = (s, "clean", 0.0) if fr == 0 else (s, kind, fr)
                mixes.setdefault(key, build_mix(kind, fr, 1000, seed=s, howto_share=0.25))
    pool: dict = {}
    for m in mixes.values():
        for e in m.examples:
            pool.setdefault(e, len(pool))
    data = list(pool)
    t1 = time.process_time()
    g = f.kept_gradients(model, data)
    t_g = time.process_time() - t1
    arrays = {"g": g, "cal": shield.calibration_grads_, "slice": shield.slice_grads_}
    t2 = time.process_time()
    for k in (1, 4):
        for name, items in (("", data), ("cal_", list(refs.benign_calibration)),
                            ("slice_", list(refs.benign_slices))):  # fmt: skip
            og, n = _open_grads(f, model, items, k)
            arrays[f"{name}open{k}"] = og
            arrays[f"{name}nresp"] = n
    t_open = time.process_time() - t2
    # plain FIHS of every reference seed's calibration half (averaged-reference candidate)
    other = {}
    for s in CAL_SEEDS:
        cal = list(organism_references(32, 256, seed=s, howto_share=0.25).benign_calibration)
        other[s] = fihs_from_gradients(f.kept_gradients(model, cal), f.direction_)
    names = f.slices_.names()
    sel = [names[j] for j in f.selected_]
    widths = f.slices_.sizes()[f.selected_]
    np.savez(
        out + ".npz",
        **{k: (v.detach().numpy() if isinstance(v, torch.Tensor) else v).astype(np.float32)
           for k, v in arrays.items() if "nresp" not in k},
        nresp=arrays["nresp"], cal_nresp=arrays["cal_nresp"], slice_nresp=arrays["slice_nresp"],
        direction=f.direction_.numpy(), widths=widths,
    )  # fmt: skip
    meta = {k: (np.array([pool[e] for e in m.examples]), np.array(m.harmful, bool))
            for k, m in mixes.items()}  # fmt: skip
    with open(out + ".pkl", "wb") as fh:
        pickle.dump({"meta": meta, "pattern": [_pattern(e) for e in data], "selected": sel,
                     "other_cal": other, "cpu": {"fit": t_fit, "g": t_g, "open": t_open,
                                                 "n": len(data)}}, fh)  # fmt: skip
    print(ref_seed, len(data), f"fit {t_fit:.1f} g {t_g:.1f} open(2 k) {t_open:.1f} CPU-s",
          f"total {time.process_time() - t0:.1f}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "grads":
        grads(int(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")], sys.argv[4])
