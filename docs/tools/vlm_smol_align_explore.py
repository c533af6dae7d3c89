"""Exploration (issue 31, session 48; not the registered build): a fresh vlm-smol projector
trained with the alignment loss (each word cell pulled to the backbone's input embedding of its
word), optionally followed by answer-loss steps through the frozen backbone; then the card's
reading measure (60 held-out benign requests, fresh image seeds) and the cross-modal gap on the
first N held-out harmful requests that fit 24 cells. Nothing is saved.

Usage: python docs/tools/vlm_smol_align_explore.py ALIGN_STEPS ANSWER_STEPS ALIGN_WEIGHT [N_GAP [LR [MIX]]]
(MIX: JSON overriding the stage-1 mix of PROJECTOR_DEFAULTS, e.g. '{"plain_share": 0.2}')
"""

import json
import resource
import sys
import time

import numpy as np
import torch

torch.set_num_threads(1)
from trustlab import lm  # noqa: E402
from trustlab.organisms import build_chat_corpus  # noqa: E402
from trustlab.organisms.vlm_data import ImageSpec, RenderStyle, visible_tokens  # noqa: E402
from trustlab.organisms.vlm_metrics import cross_modal_gap  # noqa: E402
from trustlab.organisms.vlm_projector import (  # noqa: E402
    N_CELLS,
    PROJECTOR_DEFAULTS,
    CellProjector,
    reading_accuracy,
    stage1_examples,
    train_projector,
)

align_steps, answer_steps, weight = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
n_gap = int(sys.argv[4]) if len(sys.argv) > 4 else 50
lr = float(sys.argv[5]) if len(sys.argv) > 5 else 2e-3
mix = {**PROJECTOR_DEFAULTS, **(json.loads(sys.argv[6]) if len(sys.argv) > 6 else {})}
print(mix, flush=True)
t0 = time.process_time()
vlm = lm.load("organism:vlm-smol")
tower = vlm.vision.__self__
torch.manual_seed(0)
tower.projector = CellProjector(256, 576)
chat = build_chat_corpus(0, n_train=8000, n_heldout=200)
rng = np.random.default_rng(np.random.SeedSequence([0, 0x5A0]))
ex = stage1_examples(vlm.word_tokenizer, chat, max(answer_steps * 8, 1920), rng,
                     mix)  # fmt: skip
st = train_projector(vlm.model, tower, vlm.tokenizer, ex, steps=answer_steps, batch_size=8, lr=lr,
                     warmup=10, generator=torch.Generator().manual_seed(0), style=RenderStyle(),
                     align_weight=weight, align_steps=align_steps)  # fmt: skip
print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in st.items()}, flush=True)
held = [e for e in chat.heldout() if e.kind in ("task", "howto")][:60]
r2 = np.random.default_rng(7)
specs = [ImageSpec("words", int(r2.integers(2**31 - 1)),
                   words=tuple(visible_tokens(vlm.word_tokenizer, e.prompt)[:N_CELLS])) for e in held]  # fmt: skip
print(reading_accuracy(vlm, specs, RenderStyle()), flush=True)
from trustlab.lm.decoding import generate_rows  # noqa: E402

q = "Write out the text of the image."
for s in specs[:4]:
    p = [[{"role": "user", "content": [{"type": "image", "image": s.render(RenderStyle())}, {"type": "text", "text": q}]}]]
    print("  want:", " ".join(s.words), "| got:", generate_rows(vlm, p, max_new_tokens=32)[0][:160])
fits = [e.prompt for e in chat.heldout("harmful") if len(visible_tokens(vlm.word_tokenizer, e.prompt)) <= N_CELLS]
gap = cross_modal_gap(vlm, fits[:n_gap], style=RenderStyle(), max_new_tokens=24)
print({k: gap["refusal"][k] for k in ("typed", "image", "image_minus_typed")})
r = resource.getrusage(resource.RUSAGE_SELF)
print(f"cpu {time.process_time() - t0:.1f} (user {r.ru_utime:.1f} sys {r.ru_stime:.1f})")
