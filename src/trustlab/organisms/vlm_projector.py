"""A pretrained, aligned language model given eyes the LLaVA way: a backbone aligned on text, a
separately trained vision encoder, and a learned projector between them (``vlm-smol``).

Real multimodal models (LLaVA and its kin) feed a vision encoder's features through a projector
into a language model that was aligned on text; the image vectors live wherever the projector
puts them, off the text-embedding manifold. This module builds that on CPU:

* **Backbone**: a built chat organism (``spec.base``; ``smol-chat``: SmolLM2-135M-Instruct,
  safety-tuned), loaded from its organism folder. Its weights are not saved again: the organism
  folder holds the projector, the reader, the tokenizer and, when stage 2 ran, the LoRA factors
  (``lora.safetensors``), which the loader merges into the backbone it reads from its own folder.
* **Vision encoder**: the vision-language organisms' cell reader (:class:`CellEncoder`'s ``mlp``
  and reading ``head``) taken from a built organism (``vision["reader"]``, ``vlm-xs``), frozen.
  It reads the organism vocabulary's words from the 4 x 6 word-image cells, shapes and colour
  fields; its *features* (256-d per cell), not its reading, are what the projector sees.
* **Projector** (:class:`CellProjector`): LLaVA-1.5's two-layer MLP with GELU, from
  ``[cell feature; one-hot cell position; global flag]`` to the backbone's width. An image is
  one global vector (from the mean cell feature) followed by one vector per non-empty cell, in
  reading order, as the organisms do (:mod:`~trustlab.organisms.vlm_encoder`).
* **Stage 1** (LLaVA's feature alignment, :func:`train_projector`): only the projector trains,
  with the captioning / reading loss through the frozen backbone: word images of random strings
  of the vocabulary and of the chat corpus's *benign* train requests answered by their words,
  scenes answered by their caption; partly in LLaVA's "plain" format (image, newline, caption),
  partly in the chat format with a reading/caption question. No request is ever answered or
  refused in training; no harmful request is ever shown (random strings may hold any word).
  Optionally (``align_steps`` / ``align_weight``, a deviation for a CPU budget) an alignment
  loss pulls each word cell to the backbone's input embedding of its word.
* **Stage 2** (optional, ``stage2_steps``; LLaVA's visual instruction tuning with LoRA,
  :func:`attach_lora`, :func:`stage2_examples`): LoRA factors on the backbone's linear layers
  and the projector train on benign image instructions and, with ``stage2_text_share``, a typed
  replay of the chat corpus (its harmful requests' refusals included, as text). No harmful
  request is shown in an image.

The backbone's tokenizer gets one added token, ``<image>``, that is never embedded (its
position is replaced by the image's vectors), so the backbone's embedding matrix is not resized.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from trustlab.core.errors import DataError
from trustlab.organisms.vlm_data import GRID, IMAGE_TOKEN, QUESTIONS, ImageSpec, RenderStyle
from trustlab.organisms.vlm_encoder import CellEncoder, filled_cells, to_pixels

__all__ = [
    "PROJECTOR_FORMAT",
    "CellProjector",
    "ProjectedTower",
    "add_image_token",
    "apply_lora_factors",
    "attach_lora",
    "build_projected_vlm",
    "load_projected_vlm",
    "merge_lora",
    "reading_accuracy",
    "splice_images",
    "stage1_examples",
    "stage2_examples",
    "train_projector",
]

PROJECTOR_FORMAT = "trustlab-vlm-projector-1"
PROJECTOR_FILE = "projector.safetensors"
CONFIG_FILE = "vision_config.json"
READER_TOKENIZER = "reader_tokenizer"
N_CELLS = GRID[0] * GRID[1]

#: Defaults of ``spec.vision`` for a projected organism.
PROJECTOR_DEFAULTS: dict[str, Any] = {
    "projector": True,
    "reader": "vlm-xs",  # the built organism whose cell reader is the vision encoder
    "plain_share": 0.6,  # LLaVA "plain" format (image, newline, caption); the rest chat format
    "caption_share": 0.15,  # scenes answered by their caption; the rest word images
    "request_share": 0.4,  # of the word images: benign train requests (the rest random strings)
    "n_gap": 100,  # held-out harmful requests of the card's gap (typed vs image)
    "n_reading": 60,  # held-out word images of the card's reading accuracy
    "max_new_tokens": 24,
    # the alignment loss (a deviation from LLaVA stage 1 for a CPU budget; 0 = none):
    # :func:`train_projector`
    "align_steps": 0,
    "align_weight": 0.0,
    "align_batch": 64,
    "align_target": "first",
    # LLaVA stage 2 on benign image instructions with LoRA on the backbone (0 steps = none):
    # :func:`stage2_examples`, :func:`attach_lora`
    "stage2_steps": 0,
    "stage2_lr": 5e-4,
    "stage2_read_share": 0.3,
    "stage2_text_share": 0.0,  # typed chat-corpus replay (its harmful requests' refusals too)
    # the typed replay phrased like an image prompt: "{request} {train request phrasing}"
    "stage2_text_frame": False,
    "lora_rank": 8,
    "lora_alpha": 16.0,
    "lora_targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
}
LORA_FILE = "lora.safetensors"

#: A ChatML template (SmolLM2's) whose user content may hold image parts; text-only
#: conversations render exactly as the backbone's own template renders them.
SMOL_VLM_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>{% else %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{ '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class CellProjector(nn.Module):
    """LLaVA-1.5's projector (Linear, GELU, Linear) from a cell's feature, its one-hot cell
    position and a global flag to ``d_model``. ``embed`` gives one run per image: the global
    vector (the mean cell feature, flag 1) and the vectors of the non-empty cells."""

    def __init__(self, feature_dim: int, d_model: int, n_cells: int = N_CELLS) -> None:
        super().__init__()
        self.n_cells = n_cells
        in_dim = feature_dim + n_cells + 1
        self.net = nn.Sequential(nn.Linear(in_dim, d_model), nn.GELU(), nn.Linear(d_model, d_model))

    def cells(self, features: torch.Tensor) -> torch.Tensor:
        """The projected vector of every cell ``[B, 24, d_model]`` (empty cells included)."""
        b, n, _ = features.shape
        eye = torch.eye(n, dtype=features.dtype, device=features.device).expand(b, n, n)
        return self.net(torch.cat([features, eye, features.new_zeros(b, n, 1)], -1))

    def embed(self, features: torch.Tensor, filled: torch.Tensor) -> list[torch.Tensor]:
        b, n, _ = features.shape
        cells = self.cells(features)
        glob_in = torch.cat(
            [features.mean(1), features.new_zeros(b, n), features.new_ones(b, 1)], -1
        )
        image = self.net(glob_in)
        return [torch.cat([image[i : i + 1], cells[i][filled[i]]], 0) for i in range(b)]


class ProjectedTower(nn.Module):
    """The vision tower: the frozen cell reader's features through the projector."""

    def __init__(self, reader: CellEncoder, projector: CellProjector) -> None:
        super().__init__()
        self.reader = reader
        self.projector = projector

    def features(self, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():  # the reader is frozen
            inputs = self.reader.inputs(pixels)
            return self.reader.mlp(inputs), filled_cells(inputs)

    def forward(self, pixels: torch.Tensor) -> list[torch.Tensor]:
        return self.projector.embed(*self.features(pixels))

    def tower(self, images: Any) -> list[torch.Tensor]:
        param = next(self.projector.parameters())
        return self(to_pixels(images).to(device=param.device, dtype=param.dtype))


def add_image_token(tokenizer: Any) -> Any:
    """``tokenizer`` with ``<image>`` added (a special token after the old ids, which stay) and
    the image-aware ChatML template. The backbone's embeddings are not resized: the image
    token's position is always replaced by the image's vectors."""
    tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
    tokenizer.chat_template = SMOL_VLM_TEMPLATE
    return tokenizer


def splice_images(lm_model: Any, ids: torch.Tensor, image_id: int,
                  vectors: list[torch.Tensor]) -> torch.Tensor:  # fmt: skip
    """Input embeddings of ``ids`` ``[B, T]`` in which the positions holding ``image_id`` (each
    image's token already repeated to its vector count) take ``vectors`` in order."""
    is_image = ids == image_id
    flat = torch.cat(vectors, 0) if vectors else None
    n = int(is_image.sum())
    if (flat.shape[0] if flat is not None else 0) != n:
        raise DataError(f"{n} image positions but {0 if flat is None else flat.shape[0]} vectors.")
    embeds = lm_model.get_input_embeddings()(ids.masked_fill(is_image, 0))
    if flat is None:
        return embeds
    return embeds.masked_scatter(is_image.unsqueeze(-1), flat.to(embeds.dtype))


# ---------------------------------------------------------------------------------------------
# stage 1 data


def stage1_examples(word_tokenizer: Any, chat: Any, n: int, rng: np.random.Generator,
                    settings: dict[str, Any]) -> list[dict[str, Any]]:  # fmt: skip
    """``n`` stage-1 examples ``{"image": ImageSpec, "question": str | None, "answer": str}``
    (question None: the plain format). Word images show random strings of the reader's words or
    benign train requests (never a harmful one) and are answered by their words; scenes by
    their caption."""
    from trustlab.organisms.vlm_build import reader_classes
    from trustlab.organisms.vlm_data import _scene, visible_tokens

    words = [c for c in reader_classes(word_tokenizer) if c and " " not in c]
    requests = [e.prompt for e in chat.train if e.kind in ("task", "howto")]
    out = []
    for _ in range(n):
        seed = int(rng.integers(2**31 - 1))
        if rng.random() < settings["caption_share"]:
            scene = _scene(rng)
            spec, answer = ImageSpec("scene", seed, scene=scene), scene.caption()
            phrasings = QUESTIONS["caption"][0]
        else:
            if rng.random() < settings["request_share"]:
                shown = visible_tokens(word_tokenizer, requests[int(rng.integers(len(requests)))])
                shown = shown[:N_CELLS]
            else:
                shown = [words[i] for i in rng.choice(len(words), int(rng.integers(3, 13)))]
            spec, answer = ImageSpec("words", seed, words=tuple(shown)), " ".join(shown)
            phrasings = QUESTIONS["ocr"][0]
        plain = rng.random() < settings["plain_share"]
        question = None if plain else phrasings[int(rng.integers(len(phrasings)))]
        out.append({"image": spec, "question": question, "answer": answer})
    return out


def _example_ids(tokenizer: Any, ex: dict[str, Any]) -> tuple[list[int], int]:
    """Token ids of one example (one image token, none for a text-only example) and where the
    answer starts."""
    if ex["image"] is None:  # a typed conversation (stage 2's text replay)
        msgs = [{"role": "user", "content": ex["question"]}]
        text = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
    elif ex["question"] is None:  # LLaVA's plain format
        prompt = [tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)]
        prompt += tokenizer("\n", add_special_tokens=False)["input_ids"]
    else:
        msgs = [
            {
                "role": "user",
                "content": [{"type": "image"}, {"type": "text", "text": ex["question"]}],
            }
        ]
        text = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
    answer = tokenizer(ex["answer"], add_special_tokens=False)["input_ids"] + [
        tokenizer.eos_token_id
    ]
    return prompt + answer, len(prompt)


def _lora_params(layer: Any) -> tuple[nn.Parameter, nn.Parameter]:
    """A peft LoRA layer's (A, B) weights of its one adapter."""
    return layer.lora_A["default"].weight, layer.lora_B["default"].weight


def attach_lora(lm_model: Any, targets: tuple[str, ...], rank: int, alpha: float,
                generator: torch.Generator) -> dict[str, Any]:  # fmt: skip
    """LoRA adapters (``peft``, injected in place: ``base(x) + (alpha/rank) B A x``, ``B`` at
    zero) on every ``nn.Linear`` of ``lm_model`` whose name ends in one of ``targets`` (e.g.
    ``q_proj``, ``v_proj``); ``A`` drawn from ``generator`` (N(0, 1/fan_in), the finetune
    substrate's convention), so a build is reproducible. Returns the LoRA layers by module name;
    the base weights are not changed until :func:`merge_lora`."""
    from peft import LoraConfig, inject_adapter_in_model
    from peft.tuners.lora import Linear as PeftLoraLinear

    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules=list(targets))
    try:
        inject_adapter_in_model(config, lm_model)
    except ValueError as exc:
        raise DataError(f"no linear layer of the backbone is named any of {targets}.") from exc
    out = {}
    with torch.no_grad():
        for name, module in lm_model.named_modules():
            if isinstance(module, PeftLoraLinear):
                a, _ = _lora_params(module)
                a.copy_(torch.randn(a.shape, generator=generator) / a.shape[1] ** 0.5)
                out[name] = module
    return out


def merge_lora(lm_model: Any, lora: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Merge each adapter into its base weight (peft's ``merge``) and put the base layers back;
    returns the factors (``<module>.lora_a`` / ``.lora_b``, scale folded into ``b``) for
    saving."""
    factors = {}
    with torch.no_grad():
        for name, layer in lora.items():
            a, b = _lora_params(layer)
            factors[f"{name}.lora_a"] = a.detach().clone().contiguous()
            factors[f"{name}.lora_b"] = (b.detach() * layer.scaling["default"]).contiguous()
            layer.merge()
            parent = lm_model.get_submodule(name.rsplit(".", 1)[0])
            setattr(parent, name.rsplit(".", 1)[1], layer.get_base_layer())
    return factors


def apply_lora_factors(lm_model: Any, factors: dict[str, torch.Tensor]) -> None:
    """Merge saved LoRA factors (:func:`merge_lora`'s) into a freshly loaded backbone."""
    with torch.no_grad():
        for key, a in factors.items():
            if not key.endswith(".lora_a"):
                continue
            name = key[: -len(".lora_a")]
            layer = lm_model.get_submodule(name)
            b = factors[f"{name}.lora_b"]
            layer.weight += (b.float() @ a.float()).to(layer.weight.dtype).to(layer.weight.device)


def stage2_examples(word_tokenizer: Any, chat: Any, n: int, rng: np.random.Generator,
                    settings: dict[str, Any]) -> list[dict[str, Any]]:  # fmt: skip
    """LLaVA stage 2 on *benign* image instructions only, chat format: the vision corpus's
    train kinds caption, colour, count, position, OCR and benign requests shown in an image
    (``image_task`` / ``image_howto``, answered as the chat corpus answers them typed), plus a
    ``stage2_read_share`` of benign requests shown in an image with a reading question,
    answered by their words. No harmful request is shown (``harmful_share=0``), none refused.
    ``stage2_text_share`` of typed chat-corpus requests (harmful ones with their refusals) are
    replayed; with ``stage2_text_frame`` each is followed by one of the vision corpus's *train*
    request phrasings ("{request} Answer the request in the image."), as an image prompt's
    text follows its image (never the held-out phrasing), answers unchanged. The phrasings are
    drawn from a generator of their own, so the other examples and the order do not change."""
    from trustlab.organisms.vlm_data import build_vision_corpus

    n_text = round(n * settings.get("stage2_text_share", 0.0))
    n_read = round(n * settings["stage2_read_share"])
    n = n - n_text
    seed = int(rng.integers(2**31 - 1))
    vis = build_vision_corpus(chat, word_tokenizer, seed=seed, n_train=2 * (n - n_read),
                              n_heldout=0, harmful_share=0.0)  # fmt: skip
    keep = ("caption", "colour", "count", "position", "ocr", "image_task", "image_howto")
    vis = [e for e in vis if e.kind in keep and len(e.images) == 1 and e.text]
    vis = [vis[i] for i in rng.permutation(len(vis))[: n - n_read]]  # the corpus is by kind
    out = [{"image": e.images[0], "question": e.text, "answer": e.response} for e in vis]
    reading = {**settings, "plain_share": 0.0, "caption_share": 0.0, "request_share": 1.0}
    out += stage1_examples(word_tokenizer, chat, n_read, rng, reading)
    if n_text:  # typed replay of the chat corpus (LLaVA-1.5 mixes text-only data into stage 2)
        typed = [e for e in chat.train if e.kind in ("harmful", "task", "howto")]
        pick = rng.choice(len(typed), n_text, replace=False)
        frames = [""] * n_text
        if settings.get("stage2_text_frame", False):
            train = QUESTIONS["request"][0]
            draw = np.random.default_rng([int(i) for i in pick])
            frames = [" " + train[int(j)] for j in draw.integers(len(train), size=n_text)]
        out += [{"image": None, "question": typed[i].prompt + f, "answer": typed[i].response}
                for i, f in zip(pick, frames, strict=True)]  # fmt: skip
    return [out[i] for i in rng.permutation(len(out))]


def alignment_targets(lm_model: Any, tokenizer: Any, examples: list[dict[str, Any]],
                      target: str = "first") -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """What each cell of each example's word image is pulled to by the alignment loss: the
    backbone's input embedding of the cell's word as it follows a space (``" word"``; its first
    sub-token, or the mean of its sub-tokens for ``target="mean"``). Returns ``(table
    [n_words, d_model], index [n_examples, 24])``, index -1 where a cell has no word (empty
    cells, scenes)."""
    if target not in ("first", "mean"):
        raise DataError(f"align_target must be 'first' or 'mean', not {target!r}.")
    emb = lm_model.get_input_embeddings().weight.detach()
    words: dict[str, int] = {}
    rows, index = [], torch.full((len(examples), N_CELLS), -1, dtype=torch.long)
    for i, ex in enumerate(examples):
        spec = ex["image"]
        if spec is None or spec.kind != "words":
            continue
        for c, w in enumerate(spec.words[:N_CELLS]):
            if w not in words:
                ids = tokenizer(" " + w, add_special_tokens=False)["input_ids"]
                words[w] = len(rows)
                rows.append(emb[ids[0]] if target == "first" else emb[ids].mean(0))
            index[i, c] = words[w]
    table = torch.stack(rows) if rows else emb.new_zeros(0, emb.shape[1])
    return table, index


def _alignment_loss(projector: CellProjector, feats: torch.Tensor, filled: torch.Tensor,
                    index: torch.Tensor, table: torch.Tensor) -> torch.Tensor | None:  # fmt: skip
    """Mean squared distance of the projected word cells from their targets, in units of the
    targets' mean squared norm (1.0 = as far as a zero vector)."""
    keep = (index >= 0) & filled
    if not bool(keep.any()):
        return None
    got = projector.cells(feats)[keep]
    want = table[index[keep]]
    return ((got - want) ** 2).sum(-1).mean() / (want**2).sum(-1).mean()


def train_projector(lm_model: Any, tower: ProjectedTower, tokenizer: Any,
                    examples: list[dict[str, Any]], *, steps: int, batch_size: int, lr: float,
                    warmup: int, generator: torch.Generator, style: RenderStyle,
                    progress: Any = None, align_weight: float = 0.0, align_steps: int = 0,
                    align_batch: int = 64, align_target: str = "first",
                    lora: dict[str, Any] | None = None,
                    stage: str = "stage 1: projector alignment") -> dict[str, Any]:  # fmt: skip
    """Stage 1: the projector alone learns, by the next-token loss on the answers through the
    frozen backbone (whose parameters get no gradient and are checked unchanged afterwards).

    With ``align_steps`` / ``align_weight`` (a deviation from LLaVA's stage 1, made for a CPU
    budget: :func:`alignment_targets`): first ``align_steps`` steps of the alignment loss alone
    (batches of ``align_batch`` images, no backbone forward), then every answer step adds
    ``align_weight`` times the alignment loss of its batch's word cells.

    With ``lora`` (:func:`attach_lora`; LLaVA's stage 2 with LoRA instead of full tuning) the
    LoRA factors train with the projector; the backbone's own weights stay unchanged (checked)
    until :func:`merge_lora`."""
    from trustlab.organisms.vlm_build import pad_rows

    t0 = time.process_time()
    blank = None
    rendered = []
    for ex in examples:  # a text-only example gets a blank image's features, never used
        if ex["image"] is None and blank is None:
            blank = ImageSpec("words", 0, words=()).render(style)
        rendered.append(ex["image"].render(style) if ex["image"] is not None else blank)
    t_render = time.process_time() - t0
    feats, filled = [], []
    for i in range(0, len(rendered), 256):
        f, m = tower.features(to_pixels(rendered[i : i + 256]))
        feats.append(f)
        filled.append(m)
    bank, fill = torch.cat(feats), torch.cat(filled)
    items = [_example_ids(tokenizer, ex) for ex in examples]
    image_id = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    extra = [p for m in (lora or {}).values() for p in _lora_params(m)]
    extra_ids = {id(p) for p in extra}
    frozen = [p for p in lm_model.parameters() if id(p) not in extra_ids]
    before = [p.detach().clone() for p in frozen[:2]] + [frozen[-1].detach().clone()]
    for p in frozen:
        p.requires_grad_(False)
    params = list(tower.projector.parameters()) + extra
    aligning = align_weight > 0 or align_steps > 0
    if aligning:
        table, index = alignment_targets(lm_model, tokenizer, examples, align_target)
    align_losses = []
    if align_steps > 0:  # the alignment loss alone: the projector only, no backbone forward
        opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
        for step in range(align_steps):
            for g in opt.param_groups:
                g["lr"] = lr * min(1.0, (step + 1) / max(1, warmup))
            pick = torch.randint(len(items), (align_batch,), generator=generator)
            loss = _alignment_loss(tower.projector, bank[pick], fill[pick], index[pick], table)
            if loss is None:
                continue
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            align_losses.append(float(loss.detach()))
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
    lm_model.eval()  # no dropout in the frozen backbone
    losses, joint_align = [], []
    pad = tokenizer.pad_token_id
    for step in range(steps):
        scale = min(1.0, (step + 1) / max(1, warmup))
        scale *= 0.5 * (1 + np.cos(np.pi * max(0, step - warmup) / max(1, steps - warmup)))
        for g in opt.param_groups:
            g["lr"] = lr * max(scale, 0.05)
        pick = torch.randint(len(items), (batch_size,), generator=generator).tolist()
        rows, labels = [], []
        for i in pick:
            ids, start = items[i]
            if image_id not in ids:  # text only
                rows.append(ids)
                labels.append([-100] * start + ids[start:])
                continue
            n_vec = 1 + int(fill[i].sum())
            k = ids.index(image_id)
            row = ids[:k] + [image_id] * n_vec + ids[k + 1 :]
            shift = n_vec - 1
            rows.append(row)
            labels.append([-100] * (start + shift) + row[start + shift :])
        ids_t, lab_t, mask = pad_rows(rows, labels, pad)
        with_image = [i for i in pick if examples[i]["image"] is not None]
        vectors = tower.projector.embed(bank[with_image], fill[with_image]) if with_image else []
        embeds = splice_images(lm_model, ids_t, image_id, vectors)
        hidden = lm_model.model(inputs_embeds=embeds, attention_mask=mask).last_hidden_state
        target = lab_t[:, 1:]
        sel = target != -100
        logits = lm_model.lm_head(hidden[:, :-1][sel])
        loss = F.cross_entropy(logits, target[sel])
        losses.append(float(loss.detach()))
        if align_weight > 0:
            aux = _alignment_loss(tower.projector, bank[pick], fill[pick], index[pick], table)
            if aux is not None:
                joint_align.append(float(aux.detach()))
                loss = loss + align_weight * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if progress is not None and (step % 5 == 0 or step == steps - 1):
            progress(stage, step + 1, steps)
    after = [p.detach() for p in frozen[:2]] + [frozen[-1].detach()]
    unchanged = all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    if not unchanged:  # pragma: no cover - the backbone has requires_grad False
        raise RuntimeError(f"{stage} changed the frozen backbone")
    tail = max(1, steps // 10)
    extra_stats: dict[str, Any] = {}
    if aligning:
        a_tail = max(1, len(align_losses) // 10)
        extra_stats = {
            "align_steps": align_steps,
            "align_weight": align_weight,
            "align_target": align_target,
            "align_first_loss": float(np.mean(align_losses[:a_tail])) if align_losses else None,
            "align_final_loss": float(np.mean(align_losses[-a_tail:])) if align_losses else None,
            "joint_align_final_loss": float(np.mean(joint_align[-tail:])) if joint_align else None,
        }
    return {
        **extra_stats,
        "stage1_examples": len(examples),
        "stage1_steps": steps,
        "stage1_batch_size": batch_size,
        "stage1_first_loss": float(np.mean(losses[:tail])) if losses else None,
        "stage1_final_loss": float(np.mean(losses[-tail:])) if losses else None,
        "stage1_render_cpu_seconds": t_render,
        "stage1_cpu_seconds": time.process_time() - t0,
    }


# ---------------------------------------------------------------------------------------------
# the organism as a trustlab.lm model


def _as_vlm(
    lm_model: Any, tokenizer: Any, tower: ProjectedTower, word_tokenizer: Any, spec: str
) -> Any:
    from trustlab.lm.multimodal import VisionLanguageModel

    vlm = VisionLanguageModel(lm_model, tokenizer, tower.tower, image_token=IMAGE_TOKEN, spec=spec)
    vlm.encoder = tower.reader  # the reader (its head reads cells) travels with the model
    vlm.word_tokenizer = word_tokenizer  # what a word image shows: the reader's vocabulary
    return vlm


def reading_accuracy(vlm: Any, specs: list[ImageSpec], style: RenderStyle, *,
                     max_new_tokens: int = 32, batch_size: int = 16) -> dict[str, float]:  # fmt: skip
    """The language model's reading: each word image with the held-out question "Write out the
    text of the image."; ``reading_exact`` (the reply's words are the image's words),
    ``reading_word_accuracy`` (share of the image's words reproduced at their position)."""
    from trustlab.lm.decoding import generate_rows

    question = QUESTIONS["ocr"][1][0]
    prompts = [[{"role": "user", "content": [{"type": "image", "image": s.render(style)},
                                            {"type": "text", "text": question}]}] for s in specs]  # fmt: skip
    with torch.no_grad():
        replies = generate_rows(vlm, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size)
    exact, hits, total = 0, 0, 0
    for s, r in zip(specs, replies, strict=True):
        got = r.replace("Sure:", " ").split()
        want = list(s.words)
        exact += got == want
        hits += sum(a == b for a, b in zip(got, want, strict=False))
        total += len(want)
    return {"reading_exact": exact / len(specs), "reading_word_accuracy": hits / max(1, total)}


def build_projected_vlm(spec: Any, out: Path, progress: Any = None) -> dict[str, Any]:
    """Build a projected organism (``spec.vision["projector"]``) into ``out``; return its card."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trustlab.core.runtime import torch_runtime
    from trustlab.organisms.corpora import build_chat_corpus
    from trustlab.organisms.metrics import chat_metrics
    from trustlab.organisms.registry import build, read_card
    from trustlab.organisms.vlm_data import visible_tokens
    from trustlab.organisms.vlm_metrics import cross_modal_gap

    assert spec.train is not None
    settings = {**PROJECTOR_DEFAULTS, **(spec.vision or {})}
    base_dir = build(spec.base)
    reader_dir = build(settings["reader"])
    start = time.process_time()
    style = RenderStyle()
    with torch_runtime(spec.train.threads, deterministic=True):
        generator = torch.Generator().manual_seed(spec.seed)
        rng = np.random.default_rng(np.random.SeedSequence([spec.seed, 0x5A0]))
        lm_model = AutoModelForCausalLM.from_pretrained(base_dir, local_files_only=True)
        tokenizer = add_image_token(AutoTokenizer.from_pretrained(base_dir, local_files_only=True))
        word_tokenizer = AutoTokenizer.from_pretrained(reader_dir, local_files_only=True)
        reader = _load_reader(reader_dir)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(spec.seed)
            projector = CellProjector(reader.mlp[2].out_features, lm_model.config.hidden_size)
        tower = ProjectedTower(reader, projector)
        chat = build_chat_corpus(spec.seed, n_train=spec.n_train, n_heldout=spec.n_heldout)
        n_examples = spec.train.steps * spec.train.batch_size
        examples = stage1_examples(word_tokenizer, chat, n_examples, rng, settings)
        stats = train_projector(lm_model, tower, tokenizer, examples, steps=spec.train.steps,
                                batch_size=spec.train.batch_size, lr=spec.train.lr,
                                warmup=spec.train.warmup, generator=generator, style=style,
                                progress=progress, align_weight=settings["align_weight"],
                                align_steps=settings["align_steps"],
                                align_batch=settings["align_batch"],
                                align_target=settings["align_target"])  # fmt: skip
        factors = None
        if settings["stage2_steps"] > 0:  # LLaVA stage 2, benign image instructions, LoRA
            lora_gen = torch.Generator().manual_seed(spec.seed + 1)
            lora = attach_lora(lm_model, tuple(settings["lora_targets"]), settings["lora_rank"],
                               settings["lora_alpha"], lora_gen)  # fmt: skip
            n2 = settings["stage2_steps"] * spec.train.batch_size
            examples2 = stage2_examples(word_tokenizer, chat, n2, rng, settings)
            stats["stage2"] = train_projector(
                lm_model,
                tower,
                tokenizer,
                examples2,
                steps=settings["stage2_steps"],
                batch_size=spec.train.batch_size,
                lr=settings["stage2_lr"],
                warmup=spec.train.warmup,
                generator=generator,
                style=style,
                progress=progress,
                align_weight=settings["align_weight"],
                align_target=settings["align_target"],
                lora=lora,
                stage="stage 2: benign visual instruction tuning (LoRA)",
            )
            factors = merge_lora(lm_model, lora)
            stats["stage2"]["lora_params"] = sum(v.numel() for v in factors.values())
        stats["train_cpu_seconds"] = time.process_time() - start
        eval_start = time.process_time()
        vlm = _as_vlm(lm_model, tokenizer, tower, word_tokenizer, "")
        held = [e for e in chat.heldout() if e.kind in ("task", "howto")]
        specs = []
        for e in held[: settings["n_reading"]]:
            shown = visible_tokens(word_tokenizer, e.prompt)[:N_CELLS]
            specs.append(ImageSpec("words", int(rng.integers(2**31 - 1)), words=tuple(shown)))
        metrics = reading_accuracy(vlm, specs, style)
        fits = [e.prompt for e in chat.heldout("harmful")
                if len(visible_tokens(word_tokenizer, e.prompt)) <= N_CELLS]  # fmt: skip
        gap = cross_modal_gap(vlm, fits[: settings["n_gap"]], style=style,
                              max_new_tokens=settings["max_new_tokens"])  # fmt: skip
        metrics["typed_harmful_refusal"] = gap["refusal"]["typed"]["rate"]
        metrics["image_harmful_refusal"] = gap["refusal"]["image"]["rate"]
        metrics["image_minus_typed_refusal"] = gap["refusal"]["image_minus_typed"]["estimate"]
        typed = chat_metrics(lm_model, AutoTokenizer.from_pretrained(base_dir, local_files_only=True),
                             _small(chat, 40))  # fmt: skip
        metrics.update({f"typed_{k}": v for k, v in typed.items() if k != "harmful_refusal"})
        stats["eval_cpu_seconds"] = time.process_time() - eval_start
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out)
    word_tokenizer.save_pretrained(out / READER_TOKENIZER)
    save_file({k: v.contiguous() for k, v in tower.state_dict().items()}, str(out / PROJECTOR_FILE))
    if factors is not None:  # the backbone's change: LoRA factors, merged in at load
        save_file(factors, str(out / LORA_FILE))
    config = {
        "format": PROJECTOR_FORMAT,
        "image_token": IMAGE_TOKEN,
        "backbone": spec.base,
        "reader": settings["reader"],
        "classes": reader.classes,
        "d_model": int(lm_model.config.hidden_size),
        "hidden": [int(reader.mlp[0].out_features), int(reader.mlp[2].out_features)],
        "grid": list(GRID),
        "tokens_per_image": "1 + filled cells",
        "lora": factors is not None,
    }
    (out / CONFIG_FILE).write_text(json.dumps(config, indent=1), encoding="utf-8")
    base_card = read_card(spec.base)
    return {
        "kind": "vision-language",
        "architecture": "CellEncoder reader (frozen) + LLaVA MLP projector + frozen "
        + base_card.get("architecture", "LlamaForCausalLM"),
        "base": spec.base,
        "backbone_created_utc": base_card.get("created_utc"),
        "n_params": sum(p.numel() for p in lm_model.parameters()),
        "n_params_projector": sum(p.numel() for p in projector.parameters()),
        "vocab_size": len(tokenizer),
        "corpus": {"chat": {"sha256": chat.sha256}, "stage1": {"n": len(examples)}},
        "vision_settings": settings,
        "training": stats,
        "metrics": metrics,
        "cross_modal_gap": gap,
    }


def _small(chat: Any, n: int) -> Any:
    from trustlab.organisms.corpora import Corpus

    keep = []
    for kind in ("harmful", "task", "howto"):
        keep += chat.heldout(kind)[: n if kind == "harmful" else n // 2]
    return Corpus(chat.name, chat.seed, tuple(chat.train) + tuple(keep))


def _load_reader(reader_dir: Path) -> CellEncoder:
    from safetensors.torch import load_file

    from trustlab.organisms.vlm_build import CONFIG_FILE as VLM_CONFIG
    from trustlab.organisms.vlm_build import ENCODER_FILE

    config = json.loads((reader_dir / VLM_CONFIG).read_text(encoding="utf-8"))
    enc = CellEncoder(config["classes"], config["d_model"], tuple(config["hidden"]),
                      modality=bool(config.get("modality", False)))  # fmt: skip
    enc.load_state_dict(load_file(str(reader_dir / ENCODER_FILE)))
    for p in enc.parameters():
        p.requires_grad_(False)
    return enc.eval()


def load_projected_vlm(path: Path, config: dict[str, Any], *, dtype: Any = None,
                       device: str | None = None, spec: str = "") -> Any:  # fmt: skip
    """A saved projected organism: the backbone from its own organism folder (built first if
    missing), the reader and projector from ``path``."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    from trustlab.lm.loading import load_hf
    from trustlab.organisms.registry import build

    text = load_hf(build(config["backbone"]), dtype=dtype, device=device)
    if config.get("lora"):  # stage 2 changed the backbone: its LoRA factors merged in
        if not (path / LORA_FILE).is_file():
            raise DataError(f"{path}: the config names LoRA factors but {LORA_FILE} is missing.")
        apply_lora_factors(text.model, load_file(str(path / LORA_FILE)))
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    word_tokenizer = AutoTokenizer.from_pretrained(path / READER_TOKENIZER, local_files_only=True)
    reader = CellEncoder(config["classes"], 1, tuple(config["hidden"]))
    projector = CellProjector(int(config["hidden"][1]), int(config["d_model"]))
    tower = ProjectedTower(reader, projector)
    state = load_file(str(path / PROJECTOR_FILE))
    # the reader's own language-model side (proj, glob, pos, class vectors) is unused here
    keep = {k: v for k, v in state.items()
            if k.startswith("projector.") or k.startswith(("reader.mlp.", "reader.head."))}  # fmt: skip
    missing, unexpected = tower.load_state_dict(keep, strict=False)
    if unexpected or any(
        k.startswith(("projector.", "reader.mlp.", "reader.head.")) for k in missing
    ):
        raise DataError(f"{path}: the projector file does not match its config.")
    tower.to(device=text.device, dtype=text.dtype).eval()
    return _as_vlm(text.model, tokenizer, tower, word_tokenizer, spec or f"hf:{path}")
