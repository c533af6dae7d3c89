"""vlm-smol, session 49 (issue 31, bar item 4; development seeds only, exploration, not the study):
does the textual refusal direction separate harmful from benign IMAGE inputs when (a) it is read
at another position and (b) it is fitted on typed prompts phrased like the image prompts?

Readouts: ``last`` (the last prompt position, MARS's), ``end`` (the image's last vector; typed
prompts: the request's last token) and ``mean`` (mean over the image's vectors; typed: over the
request's tokens). Frames of the typed fit/validation prompts: ``plain`` (the chat corpus's
request, as the study fits) and ``framed`` ("{request} {instruction}", the instruction in turn
from the vision corpus's TRAIN request phrasings; never the evaluation's held-out "Please respond
to the image."). Text only in the fit: no image, no multimodal safety data.

Per configuration and layer: AUC of typed validation harmful vs harmless, AUC of the 40 harmful
vs 40 benign image inputs along r, and the share of harmful / benign images above every image
known-safe input (24 neutral colour fields, 40 image-QA items: what a calibrated gate over image
inputs would let through; image inputs only, so no re-centring is involved), and h>maxS: the share
of harmful images above every benign word image (what a gate sparing all 40 benign ones could at
best steer).
Usage: python docs/tools/mars_vlm_smol_readout.py MODEL SEED"""
import resource
import sys
import time

import numpy as np
import torch

from trustlab.core.context import RunContext
from trustlab.core.runtime import torch_runtime
from trustlab.lm.activations import token_activations
from trustlab.methods.mars.study import MarsConfig, MemoTower, _load, build_prompts
from trustlab.organisms.vlm_data import QUESTIONS


def auc(pos, neg):
    """ROC-AUC of ``pos`` against ``neg`` (the substrate's Mann-Whitney form, ties one half)."""
    from trustlab.stats import roc_auc_ci

    pos, neg = np.asarray(pos, float), np.asarray(neg, float)
    return float(roc_auc_ci(np.r_[np.ones(pos.size), np.zeros(neg.size)], np.r_[pos, neg]).auc)


INSTR = QUESTIONS["request"][0]  # train phrasings only


def frame(convs):
    return [[{"role": "user", "content": f"{c[-1]['content']} {INSTR[i % len(INSTR)]}"}]
            for i, c in enumerate(convs)]


def spans(model, prompts):
    """(start, end) of the image's vectors (image prompts) or of the request's tokens (typed),
    in prompt-token indices, and each prompt's length."""
    out, lengths = [], []
    tok = model.tokenizer
    for p in prompts:
        content = p[-1]["content"]
        if isinstance(content, str):
            text = model.format_chat(p)
            enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
            assert list(enc["input_ids"]) == model.tokenize([p])[0]
            request = content
            for ins in INSTR:
                if content.endswith(" " + ins):
                    request = content[: -len(ins) - 1]
            cs = text.rindex(content)
            ce = cs + len(request)
            idx = [i for i, (a, b) in enumerate(enc["offset_mapping"]) if a < ce and b > cs]
            out.append((idx[0], idx[-1] + 1))
            lengths.append(len(enc["input_ids"]))
        else:
            (toks, imgs), = model._ids_and_images([p])
            assert len(imgs) == 1
            n = model.prompt_lengths([p])[0]
            i = toks.index(model.image_token_id)
            n_vec = n - (len(toks) - 1)
            out.append((i, i + n_vec))
            lengths.append(n)
    return out, lengths


def readouts(model, prompts):
    """{readout: [N, L, D]} float64."""
    sites = [f"blocks.{i}.resid_pre" for i in range(model.n_layers)]
    sp, lengths = spans(model, prompts)
    res = {"last": [], "end": [], "mean": []}
    for k in range(0, len(prompts), 16):
        chunk = prompts[k:k + 16]
        ta = token_activations(model, chunk, sites, "prompt", batch_size=16)
        for j in range(len(chunk)):
            a = ta.acts[ta.prompt_index == j].double()  # [T, L, D]
            s, e = sp[k + j]
            assert a.shape[0] == lengths[k + j], (a.shape, lengths[k + j])
            res["last"].append(a[-1])
            res["end"].append(a[e - 1])
            res["mean"].append(a[s:e].mean(0))
    return {r: torch.stack(v) for r, v in res.items()}


if __name__ == "__main__":
    model_name, seed = sys.argv[1], int(sys.argv[2])
    t0 = time.process_time()
    cfg = MarsConfig(model=model_name, n_fit=48, n_val=16, n_neutral=24, n_eval=40, n_typed=8,
                     n_gate_qa=0)
    ctx = RunContext("mars", seed=seed, out_dir=f"/tmp/m49/readout_{seed}", quiet=True)
    with torch_runtime(1), torch.no_grad():
        model = _load(cfg)
        model.vision = MemoTower(model.vision)
        data = build_prompts(cfg, model, ctx)
        acts = {}
        for fr in ("plain", "framed"):
            f = (lambda c: c) if fr == "plain" else frame
            for key in ("fit_harmful", "fit_harmless", "val_harmful", "val_harmless"):
                acts[fr, key] = readouts(model, f(data[key]))
        img = {k: readouts(model, list(data["sets"][k].prompts))
               for k in ("harmful_image", "safe_image", "image_qa")}
        img["neutral"] = readouts(model, data["neutral"])
        print("example framed prompt:", frame(data["fit_harmless"][:1])[0][0]["content"][:120])
        L = model.n_layers
        best = []
        for fr in ("plain", "framed"):
            for ro in ("last", "end", "mean"):
                print(f"\n== frame {fr}, readout {ro} ==")
                print(f"{'layer':>5} {'D':>7} {'AUCtyp':>6} {'AUCimg':>6} {'t_harm':>7} {'t_safe':>7} "
                      f"{'t_qa':>6} {'t_neu':>6} {'open_h':>6} {'open_s':>6} {'h>maxS':>6}")
                for layer in range(L):
                    mu_u = acts[fr, "fit_harmful"][ro][:, layer].mean(0)
                    mu_s = acts[fr, "fit_harmless"][ro][:, layer].mean(0)
                    D = float((mu_u - mu_s).norm())
                    if D <= 1e-9:
                        continue
                    r = (mu_u - mu_s) / D

                    def t(a, layer=layer, mu_s=mu_s, r=r, D=D):
                        return ((a[:, layer] - mu_s) @ r / D).numpy()

                    th, ts = t(img["harmful_image"][ro]), t(img["safe_image"][ro])
                    tq, tn = t(img["image_qa"][ro]), t(img["neutral"][ro])
                    a_typ = auc(t(acts[fr, "val_harmful"][ro]), t(acts[fr, "val_harmless"][ro]))
                    a_img = auc(th, ts)
                    top = max(tq.max(), tn.max())
                    oh, os_ = float((th > top).mean()), float((ts > top).mean())
                    best.append((a_img, fr, ro, layer))
                    print(f"{layer:5d} {D:7.2f} {a_typ:6.2f} {a_img:6.2f} {np.median(th):+7.2f} "
                          f"{np.median(ts):+7.2f} {np.median(tq):+6.2f} {np.median(tn):+6.2f} "
                          f"{oh:6.3f} {os_:6.3f} {float((th > ts.max()).mean()):6.3f}", flush=True)
        best.sort(reverse=True)
        print("\nbest AUCimg:", [(round(a, 3), fr, ro, k) for a, fr, ro, k in best[:12]])
    r = resource.getrusage(resource.RUSAGE_SELF)
    print(f"cpu {time.process_time() - t0:.1f} (user {r.ru_utime:.1f} sys {r.ru_stime:.1f})")
