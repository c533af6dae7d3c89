"""Exploration (session 46, mars): swap vlm-s-gap's fixed modality-type embedding for other
directions/norms WITHOUT retraining and read the neutral-image offset along the textual refusal
direction at layer 2 (paired anchor). Self-contained copy of the interim helper that was used
(direction with a given cosine to the input-level typed refusal direction: mean prompt-token
embedding of the corpus's train harmful requests minus that of its task/how-to requests)."""
import torch
from trustlab import lm
from trustlab.core.runtime import torch_runtime
from trustlab.methods.mars import MARS, neutral_prompts
from trustlab.methods.mars.study import NEUTRAL_INSTRUCTIONS
from trustlab.organisms import build_chat_corpus
from trustlab.organisms.specs import SPECS
from trustlab.organisms.vlm_data import CANVAS


def modality(cos, scale, emb, tok, chat, seed=0):
    g = torch.Generator().manual_seed(seed + 0x30D)
    noise = torch.randn(emb.shape[1], generator=g); noise = noise / noise.norm()
    if cos is None:
        d = noise
    else:
        def me(kinds):
            return torch.stack([emb[tok(e.prompt, add_special_tokens=False)["input_ids"]].mean(0)
                                for e in chat.train if e.kind in kinds]).mean(0)
        r = me(("harmful",)) - me(("task", "howto")); r = r / r.norm()
        o = noise - (noise @ r) * r; o = o / o.norm()
        d = cos * r + (1 - cos ** 2) ** 0.5 * o
    return d * scale * float(emb.norm(dim=-1).mean())


with torch_runtime(1):
    model = lm.load("organism:vlm-s-gap"); enc = model.encoder
    chat = build_chat_corpus(0, n_train=2000)
    train = [e for e in chat.examples if e.split == "train"]
    harm = [e.messages() for e in train if e.kind == "harmful"][:48]
    safe = [e.messages() for e in train if e.kind in ("task", "howto")][:48]
    neutral = neutral_prompts(NEUTRAL_INSTRUCTIONS, 24, seed=3, size=CANVAS)
    emb = model.model.get_input_embeddings().weight.detach()
    sp = SPECS["vlm-s-gap"]; c0 = build_chat_corpus(sp.seed, n_train=sp.n_train, n_heldout=sp.n_heldout)
    for cos, sc in ((None, 3.0), (-1.0, 3.0), (1.0, 3.0), (None, 1e-9), (None, 10.0), (-1.0, 10.0),
                    (1.0, 10.0), (1.0, 30.0), (-1.0, 30.0)):
        with torch.no_grad():
            enc.modality.copy_(modality(cos, sc, emb, model.tokenizer, c0))
        m = MARS(anchor="paired", layer=2, trust_radius=1.0).fit(model, harm, safe, neutral)
        r = m.direction_[2]; D = float(m.distance_[2])
        print(cos, sc, "offset along r %+.3f D, norm %.3f D" % (float(m.offset_[2] @ r) / D,
                                                               float(m.offset_[2].norm()) / D))
