"""Exploration (issue 31, session 48): why does vlm-smol not read? Two questions, on the built
organism, nothing trained into it, nothing saved:

1. Is the frozen reader's per-cell feature (``reader.mlp``, 256-d) linearly decodable into the
   cell's word? The reader's own head (trained with it) and a fresh linear probe fitted on
   features of one set of word images, scored on cells of other images (new renders).
2. What does the projector map a cell to, against the backbone's input embedding of that cell's
   word (" word", first sub-token)? Cosine, the rank of the right token among all 49,152 input
   embeddings by cosine, norms, and the nearest input embedding of each projected cell.

Usage: python docs/tools/vlm_smol_reading_diagnosis.py [organism]  (default organism:vlm-smol)
"""

import resource
import sys
import time

import numpy as np
import torch

torch.set_num_threads(1)
from trustlab import lm  # noqa: E402
from trustlab.organisms import build_chat_corpus  # noqa: E402
from trustlab.organisms.vlm_build import reader_classes  # noqa: E402
from trustlab.organisms.vlm_data import ImageSpec, RenderStyle, visible_tokens  # noqa: E402
from trustlab.organisms.vlm_encoder import to_pixels  # noqa: E402
from trustlab.organisms.vlm_projector import N_CELLS  # noqa: E402

t0 = time.process_time()
name = sys.argv[1] if len(sys.argv) > 1 else "organism:vlm-smol"
vlm = lm.load(name)
tower = vlm.vision.__self__
reader, projector = tower.reader, tower.projector
wt = vlm.word_tokenizer
classes = reader.classes
index = {c: i for i, c in enumerate(classes)}
words = [c for c in reader_classes(wt) if c and " " not in c]
chat = build_chat_corpus(0, n_train=8000, n_heldout=200)
style = RenderStyle()
rng = np.random.default_rng(11)


def specs_random(n):
    return [ImageSpec("words", int(rng.integers(2**31 - 1)),
                      words=tuple(words[i] for i in rng.choice(len(words), 24, replace=False)))
            for _ in range(n)]  # fmt: skip


def cells_of(specs):
    feats, labels, vecs = [], [], []
    for i in range(0, len(specs), 32):
        chunk = specs[i : i + 32]
        pixels = to_pixels([s.render(style) for s in chunk])
        f, filled = tower.features(pixels)
        with torch.no_grad():
            v = projector.embed(f, filled)
        for s, fi, mi, vi in zip(chunk, f, filled, v, strict=True):
            labs = s.cell_labels()
            for c in range(N_CELLS):
                if labs[c] and mi[c]:
                    feats.append(fi[c])
                    labels.append(index[labs[c]])
            vecs.append((vi[1:], [w for w in labs if w]))
    return torch.stack(feats), torch.tensor(labels), vecs


# 1. linear decodability: train on 120 random-string images (24 words each), test on 40 others
#    and on 60 held-out benign requests
tr_f, tr_y, _ = cells_of(specs_random(120))
te_f, te_y, te_vecs = cells_of(specs_random(40))
held = [e for e in chat.heldout() if e.kind in ("task", "howto")][:60]
req = [ImageSpec("words", int(rng.integers(2**31 - 1)), words=tuple(visible_tokens(wt, e.prompt)[:N_CELLS]))
       for e in held]  # fmt: skip
rq_f, rq_y, rq_vecs = cells_of(req)
with torch.no_grad():
    head_te = float((reader.head(te_f).argmax(-1) == te_y).float().mean())
    head_rq = float((reader.head(rq_f).argmax(-1) == rq_y).float().mean())
probe = torch.nn.Linear(tr_f.shape[1], len(classes))
opt = torch.optim.Adam(probe.parameters(), lr=1e-2)
mu, sd = tr_f.mean(0), tr_f.std(0) + 1e-6
for _ in range(300):
    loss = torch.nn.functional.cross_entropy(probe((tr_f - mu) / sd), tr_y)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    seen = torch.zeros(len(classes), dtype=torch.bool)
    seen[tr_y] = True
    def acc(f, y):
        keep = seen[y]
        return float((probe((f - mu) / sd).argmax(-1) == y)[keep].float().mean()), float(keep.float().mean())
    p_te, cov_te = acc(te_f, te_y)
    p_rq, cov_rq = acc(rq_f, rq_y)
print(f"cells: train {len(tr_y)}, test {len(te_y)}, requests {len(rq_y)}; classes seen in train "
      f"{int(seen.sum())} of {len(classes)}")
print(f"reader head accuracy: random strings {head_te:.3f}, held-out requests {head_rq:.3f}")
print(f"fresh linear probe (train loss {float(loss):.3f}): random strings {p_te:.3f} "
      f"(on the {cov_te:.2f} of cells whose word was seen), requests {p_rq:.3f} ({cov_rq:.2f})")

# 2. the projector against the backbone's input embeddings
emb = vlm.model.get_input_embeddings().weight.detach()
tok = vlm.tokenizer
emb_n = torch.nn.functional.normalize(emb, dim=-1)
first = {}
n_sub = []
for w in words:
    ids = tok(" " + w, add_special_tokens=False)["input_ids"]
    first[w] = ids[0]
    n_sub.append(len(ids))
print(f"reader words: {len(words)}; one SmolLM2 token (' word'): {np.mean(np.array(n_sub) == 1):.2f}, "
      f"mean sub-tokens {np.mean(n_sub):.2f}")
cos, ranks, norms, nn_hit = [], [], [], []
nn_examples = []
for v, labs in rq_vecs:
    v = v[: len(labs)]
    sims = torch.nn.functional.normalize(v, dim=-1) @ emb_n.T
    for j, w in enumerate(labs):
        t = first[w]
        cos.append(float(sims[j, t]))
        ranks.append(int((sims[j] > sims[j, t]).sum()) + 1)
        norms.append(float(v[j].norm()))
        top = int(sims[j].argmax())
        nn_hit.append(top == t)
        if len(nn_examples) < 12:
            nn_examples.append((w, tok.convert_ids_to_tokens(top)))
enorm = emb.norm(dim=-1)
ranks = np.array(ranks)
print(f"projected cell vs input embedding of its word (first sub-token), {len(cos)} cells of held-out requests:")
print(f"  cosine median {np.median(cos):.3f} (q10 {np.quantile(cos, .1):.3f}, q90 {np.quantile(cos, .9):.3f})")
print(f"  rank of the right token among {emb.shape[0]}: median {int(np.median(ranks))}, top-1 {np.mean(ranks == 1):.3f}, "
      f"top-10 {np.mean(ranks <= 10):.3f}, top-100 {np.mean(ranks <= 100):.3f}")
print(f"  norm: projected median {np.median(norms):.3f}; input embeddings median {float(enorm.median()):.3f}")
print(f"  nearest embedding of a projected cell, first 12 cells (word -> nearest token): {nn_examples}")
# do the projected cells at least separate words? nearest-centroid over projected vectors
allv = torch.cat([v[: len(labs)] for v, labs in rq_vecs])
pair = torch.nn.functional.normalize(allv, dim=-1)
sim = pair @ pair.T
labs_all = [w for _, labs in rq_vecs for w in labs]
same = np.array([[a == b for b in labs_all] for a in labs_all])
off = ~np.eye(len(labs_all), dtype=bool)
s = sim.numpy()
print(f"  cosine between projected cells: same word {s[same & off].mean():.3f}, different words {s[~same].mean():.3f}")
r = resource.getrusage(resource.RUSAGE_SELF)
print(f"cpu {time.process_time() - t0:.1f} (user {r.ru_utime:.1f} sys {r.ru_stime:.1f})")
