"""vlm-smol, session 49 (issue 31; development seeds only, exploration, not the study): would
MARS's calibrated gate (quantile 1.0: above every known-safe input) steer harmful image inputs and
spare benign ones, at the readouts of docs/tools/mars_vlm_smol_readout.py? Computed offline from
activations, no generation.

Known-safe inputs (C added in a second run, after A and B had been seen): A = MARS's kinds (16
typed harmless validation prompts, 24 neutral colour fields, 40 held-aside image-QA items drawn separately from the evaluation items); B = A + 40
held-aside benign word images (task / how-to requests of the chat corpus's TRAIN split, so disjoint
from the evaluation's held-out requests; benign only, as ``select``'s ``known_safe`` allows);
C = A + 40 benign word images of held-out requests not among the evaluation's (a fresh draw).
Re-centring: ``paired`` (neutral prompts minus the same prompts typed, at the readout) or none.
Per readout and layer: the share of the 40 harmful and of the 40 benign evaluation word images
whose position exceeds the gate. Usage: python docs/tools/mars_vlm_smol_gate_sim.py MODEL SEED...
"""
import importlib.util
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch

from trustlab.core.context import RunContext
from trustlab.core.runtime import torch_runtime
from trustlab.methods.mars.steering import _without_images
from trustlab.methods.mars.study import MarsConfig, MemoTower, _load, build_prompts
from trustlab.organisms import build_chat_corpus
from trustlab.organisms.vlm_data import build_vision_corpus
from trustlab.organisms.vlm_metrics import word_tokenizer
from trustlab.vision.images import image_sha256

spec = importlib.util.spec_from_file_location(
    "readout", Path(__file__).with_name("mars_vlm_smol_readout.py"))
ro_mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ro_mod)

model_name, seeds = sys.argv[1], [int(s) for s in sys.argv[2:]]
t0 = time.process_time()
with torch_runtime(1), torch.no_grad():
    cfg = MarsConfig(model=model_name, n_fit=48, n_val=16, n_neutral=24, n_eval=40, n_typed=8,
                     n_gate_qa=40)
    model = _load(cfg)
    model.vision = MemoTower(model.vision)
    for seed in seeds:
        ctx = RunContext("mars", seed=seed, out_dir=f"/tmp/m49/gate_{seed}", quiet=True)
        data = build_prompts(cfg, model, ctx)
        chat = build_chat_corpus(cfg.corpus_seed, n_train=2000, n_heldout=200)
        # benign word images of TRAIN requests (the evaluation's are held-out requests: disjoint)
        vis = build_vision_corpus(chat, word_tokenizer(model), n_train=300, n_heldout=0,
                                  seed=int(ctx.child_rng("s49-benign-gate").integers(2**31 - 1)))
        benign = [e for e in vis if e.kind in ("image_task", "image_howto")][:40]
        # C: benign word images of HELD-OUT requests not among the evaluation's (its draw is
        # reproduced: build_prompts seeds it from the "images" child stream)
        tok = word_tokenizer(model)
        eval_vis = build_vision_corpus(chat, tok, n_train=0, n_heldout=2 * cfg.n_eval,
                                       seed=int(ctx.child_rng("images").integers(2**31 - 1)))
        eval_req = {e.request for e in eval_vis if e.request}
        fresh = build_vision_corpus(chat, tok, n_train=0, n_heldout=120,
                                    seed=int(ctx.child_rng("s49-benign-heldout").integers(2**31 - 1)))
        benign_c = [e for e in fresh if e.kind in ("image_task", "image_howto")
                    and e.request not in eval_req][:40]
        def key(p):
            return tuple(image_sha256(x["image"]) for x in p[0]["content"] if x["type"] == "image")

        safe_eval = {key(p) for p in data["sets"]["safe_image"].prompts}
        assert safe_eval <= {key(e.messages()) for e in eval_vis}  # the draw is reproduced
        R = {}
        for key in ("fit_harmful", "fit_harmless", "val_harmless"):
            R[key] = ro_mod.readouts(model, data[key])
        for key in ("harmful_image", "safe_image"):
            R[key] = ro_mod.readouts(model, list(data["sets"][key].prompts))
        R["neutral"] = ro_mod.readouts(model, data["neutral"])
        R["neutral_typed"] = ro_mod.readouts(model, _without_images(data["neutral"]))
        R["qa_cal"] = ro_mod.readouts(model, data["known_safe"])
        R["benign_cal"] = ro_mod.readouts(model, [e.messages() for e in benign])
        R["benign_heldout"] = ro_mod.readouts(model, [e.messages() for e in benign_c])
        print(f"\n##### seed {seed}: {len(data['known_safe'])} held-aside QA, {len(benign)} held-aside "
              f"benign word images (train requests), {len(benign_c)} (held-out requests)")
        for ro in ("last", "mean"):
            print(f"== readout {ro} ==  steered share harmful/benign (40 each): "
                  "gates A, B, C paired | A, B, C none")
            for layer in range(model.n_layers):
                mu_u = R["fit_harmful"][ro][:, layer].mean(0)
                mu_s = R["fit_harmless"][ro][:, layer].mean(0)
                D = float((mu_u - mu_s).norm())
                if D <= 1e-9:
                    continue
                r = (mu_u - mu_s) / D
                off = R["neutral"][ro][:, layer].mean(0) - R["neutral_typed"][ro][:, layer].mean(0)
                cells = []
                for rec in (True, False):
                    o = off if rec else torch.zeros_like(off)

                    def t(key, image, o=o, acts=R, ro=ro, layer=layer, mu_s=mu_s, r=r, D=D):
                        a = acts[key][ro][:, layer] - (o if image else 0)
                        return ((a - mu_s) @ r / D).numpy()

                    ka = np.r_[t("val_harmless", False), t("neutral", True), t("qa_cal", True)]
                    kb = np.r_[ka, t("benign_cal", True)]
                    kc = np.r_[ka, t("benign_heldout", True)]
                    th, ts = t("harmful_image", True), t("safe_image", True)
                    for k in (ka, kb, kc):
                        tau = k.max()
                        cells.append(f"{(th > tau).mean():.3f}/{(ts > tau).mean():.3f}")
                print(f"{layer:3d} D {D:7.2f}  " + "  ".join(cells[:3]) + "  |  " + "  ".join(cells[3:]),
                      flush=True)
r_ = resource.getrusage(resource.RUSAGE_SELF)
print(f"cpu {time.process_time() - t0:.1f} (user {r_.ru_utime:.1f} sys {r_.ru_stime:.1f})")
