"""Development diagnostic (not the study): the geometry of a vlm organism for MARS."""
import sys, time
import numpy as np, torch
from trustlab.core.context import RunContext
from trustlab.core.runtime import torch_runtime
from trustlab.methods.mars import MARS
from trustlab.methods.mars.steering import prompt_has_images
from trustlab.methods.mars.study import MarsConfig, build_prompts, _load, MemoTower
from trustlab.organisms import build_chat_corpus
from trustlab.organisms.vlm_data import build_vision_corpus
from trustlab.organisms.vlm_metrics import word_tokenizer

model_name, seed = sys.argv[1], int(sys.argv[2])
t0 = time.process_time()
cfg = MarsConfig(model=model_name, n_eval=100)
ctx = RunContext("mars", seed=seed, out_dir=f"/tmp/mars/diag_{seed}", quiet=True)
with torch_runtime(1):
    model = _load(cfg); model.vision = MemoTower(model.vision)
    data = build_prompts(cfg, model, ctx)
    mars = MARS(gate=cfg.gate, gate_quantile=1.0, anchor="paired", radii=tuple(cfg.radii)).fit(
        model, data["fit_harmful"], data["fit_harmless"], data["neutral"])
    mars.select(model, data["val_harmful"], data["val_harmless"], data["known_safe"])
    L = mars.layer_; D = float(mars.distance_[L]); r = mars.direction_[L]
    print(f"layer {L} rho {mars.trust_radius_} D {D:.2f} offset_paired {float(mars.offset_[L]@r)/D:+.3f} "
          f"|offset| {float(mars.offset_[L].norm())/D:.3f} D")
    safe_anchor = float((mars.neutral_centroid_[L] - mars.mu_safe_[L]) @ r) / D
    print(f"offset (safe anchor) {safe_anchor:+.3f}; tau(all known-safe, recentred) {mars.gate_threshold_:.3f}; "
          f"tau no-recentering recal {mars.with_settings(recenter=False).gate_threshold_:.3f}")
    # typed-only calibration
    cal = mars.calibration_
    def q(x): x = np.asarray(x); return f"med {np.median(x):+.2f} q10 {np.quantile(x,.1):+.2f} q90 {np.quantile(x,.9):+.2f} max {x.max():+.2f} n {len(x)}"
    vh = ((cal["val_harmless"][:, L] - mars.mu_safe_[L]) @ r / D).numpy() if "val_harmless" in cal else None
    print("cal keys", list(cal))
    for k, v in cal.items():
        raw = ((v[:, L] - mars.mu_safe_[L]) @ r / D).numpy()
        print(f"  cal {k}: raw {q(raw)}")
    no = mars.with_settings(recenter=False)
    for name, ps in data["sets"].items():
        p = list(ps.prompts)
        a = mars.last_activations(model, p)
        t_re = mars.positions_from_activations(a, p).numpy(); t_raw = no.positions_from_activations(a, p).numpy()
        print(f"{name:15s} recentred {q(t_re)} | raw {q(t_raw)}")
    # true offset of word images: image prompt vs the same request typed before the instruction
    chat = build_chat_corpus(0, n_train=2000, n_heldout=200)
    vis = build_vision_corpus(chat, word_tokenizer(model), seed=99, n_train=0, n_heldout=120)
    for kind in ("image_task", "image_harmful"):
        ex = [e for e in vis if e.kind == kind][:40]
        img = [e.messages() for e in ex]
        typ = [[{"role": "user", "content": f"{e.request} {e.text}" if e.text else e.request}] for e in ex]
        ti = no.positions(model, img).numpy(); tt = no.positions(model, typ).numpy()
        print(f"true offset {kind}: raw image {np.mean(ti):+.3f} typed {np.mean(tt):+.3f} diff {np.mean(ti-tt):+.3f} (sd {np.std(ti-tt):.3f})")
print(f"cpu {time.process_time()-t0:.1f}")
