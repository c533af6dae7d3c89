"""Exploration (issue 31, session 48): vlm-smol with a perfect projector. Each word cell's vector
is replaced by the backbone's input embedding of the word the frozen reader reads there (" word",
first sub-token; the global vector zero). Does the frozen smol-chat then write out the image's
words ("Write out the text of the image.", 60 held-out benign requests, the card's measure),
and does it refuse image-borne harmful requests (40)? Nothing is trained or saved."""
import time

import numpy as np
import torch

torch.set_num_threads(1)
from trustlab import lm  # noqa: E402
from trustlab.lm.decoding import generate_rows  # noqa: E402
from trustlab.organisms import build_chat_corpus  # noqa: E402
from trustlab.organisms.vlm_data import ImageSpec, RenderStyle, visible_tokens  # noqa: E402
from trustlab.organisms.vlm_metrics import cross_modal_gap  # noqa: E402
from trustlab.organisms.vlm_projector import N_CELLS, reading_accuracy  # noqa: E402

t0 = time.process_time()
vlm = lm.load("organism:vlm-smol")
tower = vlm.vision.__self__
emb = vlm.model.get_input_embeddings().weight.detach()
tok = vlm.tokenizer
classes = tower.reader.classes
tab = torch.stack([emb[tok(" " + (c if c else "."), add_special_tokens=False)["input_ids"][0]] for c in classes])
class Oracle(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dummy = torch.nn.Parameter(torch.zeros(1))
    def embed(self, f, filled):
        idx = tower.reader.head(f).argmax(-1)
        cells = tab[idx]
        return [torch.cat([cells[b][filled[b]].mean(0, keepdim=True) * 0, cells[b][filled[b]]], 0) for b in range(len(f))]
tower.projector = Oracle()
chat = build_chat_corpus(0, n_train=8000, n_heldout=200)
held = [e for e in chat.heldout() if e.kind in ("task", "howto")][:60]
r2 = np.random.default_rng(7)
specs = [ImageSpec("words", int(r2.integers(2**31 - 1)), words=tuple(visible_tokens(vlm.word_tokenizer, e.prompt)[:N_CELLS])) for e in held]
print(reading_accuracy(vlm, specs, RenderStyle()), flush=True)
for q in ["Write out the text of the image.", "Copy the words in the image."]:
  for s in specs[:3]:
    p = [[{"role": "user", "content": [{"type": "image", "image": s.render(RenderStyle())}, {"type": "text", "text": q}]}]]
    print("  want:", " ".join(s.words), "| got:", generate_rows(vlm, p, max_new_tokens=32)[0][:160])
fits = [e.prompt for e in chat.heldout("harmful") if len(visible_tokens(vlm.word_tokenizer, e.prompt)) <= N_CELLS]
gap = cross_modal_gap(vlm, fits[:40], style=RenderStyle(), max_new_tokens=24)
print({k: gap["refusal"][k] for k in ("typed", "image", "image_minus_typed")})
print(f"cpu {time.process_time() - t0:.1f}")
