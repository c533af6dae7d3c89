"""Exploration (not the registered build): continue vlm-smol's stage 1 from the built projector
for N more steps of 8 fresh examples (seed 1, same mix), then the card's reading measure on the
same 60 held-out items. Does reading emerge with more stage-1 data? Nothing is saved."""
import sys, time, resource
import numpy as np, torch
torch.set_num_threads(1)
from trustlab import lm
from trustlab.organisms import build_chat_corpus
from trustlab.organisms.vlm_data import ImageSpec, RenderStyle, visible_tokens
from trustlab.organisms.vlm_projector import (PROJECTOR_DEFAULTS, N_CELLS, reading_accuracy,
                                              stage1_examples, train_projector)
steps = int(sys.argv[1])
t0 = time.process_time()
vlm = lm.load("organism:vlm-smol")
tower = vlm.vision.__self__
chat = build_chat_corpus(0, n_train=8000, n_heldout=200)
rng = np.random.default_rng(np.random.SeedSequence([1, 0x5A0]))
ex = stage1_examples(vlm.word_tokenizer, chat, steps * 8, rng, PROJECTOR_DEFAULTS)
st = train_projector(vlm.model, tower, vlm.tokenizer, ex, steps=steps, batch_size=8, lr=1e-3,
                     warmup=5, generator=torch.Generator().manual_seed(1), style=RenderStyle())
print({k: round(v, 3) for k, v in st.items()}, flush=True)
# the card's reading items: the build's rng stream after stage 1 is not reproducible here, so
# 60 held-out benign requests with fresh image seeds (same requests as the card's)
held = [e for e in chat.heldout() if e.kind in ("task", "howto")][:60]
r2 = np.random.default_rng(7)
specs = [ImageSpec("words", int(r2.integers(2**31 - 1)), words=tuple(visible_tokens(vlm.word_tokenizer, e.prompt)[:N_CELLS])) for e in held]
print(reading_accuracy(vlm, specs, RenderStyle()))
r = resource.getrusage(resource.RUSAGE_SELF)
print(f"cpu {time.process_time()-t0:.1f} (user {r.ru_utime:.1f} sys {r.ru_stime:.1f})")
