"""vlm-smol, before any MARS run: the geometry of the textual refusal direction at every layer
(development seed; exploration, not the study). Offset of neutral images along r in units of D
(paired and safe anchors, as docs/tools/mars_offset_geometry.py), the offset of word images vs
the same request typed, and how well r separates harmful from benign image inputs (AUC).
Usage: python docs/tools/mars_vlm_smol_geometry.py MODEL SEED [qa]  (qa: also the unsteered
image-QA exact match on the 40 QA items; session 48)"""
import sys, time, resource
import numpy as np, torch
from trustlab.core.context import RunContext
from trustlab.core.runtime import torch_runtime
from trustlab.methods.mars import MARS
from trustlab.methods.mars.study import MarsConfig, build_prompts, _load, MemoTower
from trustlab.organisms import build_chat_corpus
from trustlab.organisms.vlm_data import build_vision_corpus
from trustlab.organisms.vlm_metrics import word_tokenizer

def auc(pos, neg):
    """ROC-AUC of ``pos`` against ``neg`` (the substrate's Mann-Whitney form, ties one half)."""
    from trustlab.stats import roc_auc_ci

    pos, neg = np.asarray(pos, float), np.asarray(neg, float)
    return float(roc_auc_ci(np.r_[np.ones(pos.size), np.zeros(neg.size)], np.r_[pos, neg]).auc)

model_name, seed = sys.argv[1], int(sys.argv[2])
t0 = time.process_time()
cfg = MarsConfig(model=model_name, n_fit=48, n_val=8, n_neutral=24, n_eval=40, n_typed=8, n_gate_qa=0)
ctx = RunContext("mars", seed=seed, out_dir=f"/tmp/m47/diag_{seed}", quiet=True)
with torch_runtime(1), torch.no_grad():
    model = _load(cfg); model.vision = MemoTower(model.vision)
    data = build_prompts(cfg, model, ctx)
    mars = MARS(anchor="paired").fit(model, data["fit_harmful"], data["fit_harmless"], data["neutral"])
    acts = {k: mars.last_activations(model, list(data["sets"][k].prompts))
            for k in ("harmful_image", "safe_image", "image_qa")}
    acts["val_harmful"] = mars.last_activations(model, data["val_harmful"])
    acts["val_harmless"] = mars.last_activations(model, data["val_harmless"])
    chat = build_chat_corpus(0, n_train=2000, n_heldout=200)
    vis = build_vision_corpus(chat, word_tokenizer(model), seed=99, n_train=0, n_heldout=60)
    pair = {}
    for kind in ("image_task", "image_harmful"):
        ex = [e for e in vis if e.kind == kind][:30]
        img = [e.messages() for e in ex]
        typ = [[{"role": "user", "content": f"{e.request} {e.text}" if e.text else e.request}] for e in ex]
        pair[kind] = (mars.last_activations(model, img), mars.last_activations(model, typ))
    L = len(mars.direction_)
    print(f"{'layer':>5} {'D':>7} {'off_pair':>8} {'off_safe':>8} {'|off|':>6} {'AUCtyped':>8} {'AUCimg':>7} "
          f"{'t_harm':>7} {'t_safe':>7} {'t_qa':>6} {'task-typ':>8} {'harm-typ':>8}")
    for l in range(L):
        r, D = mars.direction_[l], float(mars.distance_[l])
        if D <= 0: continue
        t = {k: ((a[:, l] - mars.mu_safe_[l]) @ r / D).numpy() for k, a in acts.items()}
        dp = {k: float((((a[0][:, l] - a[1][:, l]) @ r) / D).mean()) for k, a in pair.items()}
        print(f"{l:5d} {D:7.2f} {float(mars.offset_[l] @ r)/D:+8.3f} "
              f"{float((mars.neutral_centroid_[l]-mars.mu_safe_[l]) @ r)/D:+8.3f} {float(mars.offset_[l].norm())/D:6.3f} "
              f"{auc(t['val_harmful'], t['val_harmless']):8.2f} {auc(t['harmful_image'], t['safe_image']):7.2f} "
              f"{np.median(t['harmful_image']):+7.2f} {np.median(t['safe_image']):+7.2f} {np.median(t['image_qa']):+6.2f} "
              f"{dp['image_task']:+8.3f} {dp['image_harmful']:+8.3f}", flush=True)
if len(sys.argv) > 3 and sys.argv[3] == "qa":  # session 48: unsteered image-QA exact match
    from trustlab.lm.decoding import generate_rows
    qa = data["sets"]["image_qa"]
    with torch_runtime(1), torch.no_grad():
        replies = generate_rows(model, list(qa.prompts), max_new_tokens=12, batch_size=16)
    hits = [r.strip() == ref.strip() for r, ref in zip(replies, qa.references)]
    print(f"image QA exact match (unsteered, {len(hits)} items): {np.mean(hits):.3f} ({sum(hits)} right); "
          f"first replies: {[r[:30] for r in replies[:6]]}")
r = resource.getrusage(resource.RUSAGE_SELF)
print(f"cpu {time.process_time()-t0:.1f} (user {r.ru_utime:.1f} sys {r.ru_stime:.1f})")
