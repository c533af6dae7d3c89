"""Grow a vision-language organism on top of a chat organism, measure it, save it, load it.

The recipe follows LLaVA's two stages, scaled to a 2-core CPU:

1. **Reading** (the vision encoder's pre-training): the cell reader
   (:class:`~trustlab.organisms.vlm_encoder.CellEncoder`) learns to classify cells of rendered
   random strings of *every* visible word of the vocabulary, of scenes and of neutral colour
   fields (never requests); a cell's vector is tied to the reading (the expected input
   embedding of the word it shows; a shape's colour + kind), so the language model starts out
   reading image words as it reads typed ones.
2. **Visual instruction tuning**: the reader is frozen (as LLaVA freezes its vision tower); the
   projector, the per-cell position vectors and the whole language model train on the image
   corpus (:mod:`~trustlab.organisms.vlm_data`) mixed with the chat corpus's text examples
   (which keep the typed behaviour: refusals of typed harmful requests included). The loss is on
   the reply tokens only.

The language model starts from the chat organism (``spec.base``), its vocabulary extended by the
image corpus's new words and the ``<image>`` token (old ids unchanged). Training is our own
small loop (the fine-tuning substrate's loop takes token ids only); it borrows the substrate's
schedule (:func:`trustlab.finetune.lr_multiplier`). Same seed, same weights on one CPU kernel.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from trustlab.core.errors import DataError
from trustlab.core.runtime import torch_runtime
from trustlab.organisms.corpora import build_chat_corpus
from trustlab.organisms.specs import OrganismSpec
from trustlab.organisms.vlm_data import (
    GRID,
    IMAGE_TOKEN,
    ImageSpec,
    RenderStyle,
    VisionExample,
    build_vision_corpus,
    visible_tokens,
    vision_texts,
)
from trustlab.organisms.vlm_encoder import CellEncoder, filled_cells, to_pixels
from trustlab.vision.generator import COLOURS, SHAPES, random_scene

__all__ = ["VLM_CHAT_TEMPLATE", "build_vlm", "extend_tokenizer", "load_vlm"]

VLM_CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>{% else %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
ENCODER_FILE = "vision_encoder.safetensors"
CONFIG_FILE = "vision_config.json"
N_CELLS = GRID[0] * GRID[1]

#: Defaults of ``spec.vision`` (each organism may override them).
VISION_DEFAULTS: dict[str, Any] = {
    "reader_steps": 800,
    "reader_batch": 256,
    "reader_lr": 3e-3,
    "reader_per_word": 16,
    "n_image_train": 3000,
    "n_heldout": 200,
    "harmful_share": None,  # None: vlm_data.IMAGE_MIX's share
    "text_share": 0.35,
    # The cell vector's learned correction ``proj`` and the image vector ``glob``. As vlm-xs and
    # vlm-s are built (zero_init False) both start from the seeded Kaiming draw, so the
    # correction starts at norm ~30 against word embeddings of norm ~1 and the tie to the word
    # embeddings is drowned (cos 0.10; docs/organisms.md, "What the image path carries").
    # zero_init True starts both at zero; train_correction False keeps the correction at zero,
    # so a word shown enters the language model as the word typed plus its cell's position.
    "zero_init": False,
    "train_correction": True,
    "train_global": True,
}
# Further settings read with a default (not listed above, so the other organisms' cards keep
# their bytes): "modality_scale" (0.0: none), the norm of a fixed modality-type embedding added
# to every vector of every image, in units of the mean input-embedding norm of the language
# model's words; its direction is a seeded random draw from its own generator (the other
# weights' draws are unchanged). vlm-s-gap sets it (docs/organisms.md, "A modality offset").


# ---------------------------------------------------------------------------------------------
# tokenizer


def extend_tokenizer(tokenizer: Any, texts: list[str]) -> Any:
    """``tokenizer`` (word-level) plus every word of ``texts`` it lacks and the image token,
    appended after the old ids (which stay as they were), with the multimodal chat template."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    backend = tokenizer.backend_tokenizer
    vocab = dict(backend.get_vocab())
    for text in texts:
        for piece, _ in backend.pre_tokenizer.pre_tokenize_str(text):
            if piece not in vocab:
                vocab[piece] = len(vocab)
    vocab[IMAGE_TOKEN] = len(vocab)
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token=tokenizer.unk_token))
    raw.pre_tokenizer = backend.pre_tokenizer
    raw.decoder = backend.decoder
    basic = {tokenizer.pad_token, tokenizer.unk_token, tokenizer.eos_token, IMAGE_TOKEN}
    specials = [t for t in tokenizer.all_special_tokens if t not in basic]
    out = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        pad_token=tokenizer.pad_token,
        unk_token=tokenizer.unk_token,
        eos_token=tokenizer.eos_token,
        additional_special_tokens=[*specials, IMAGE_TOKEN],
        padding_side="left",
        model_max_length=512,
        clean_up_tokenization_spaces=False,
    )
    out.chat_template = VLM_CHAT_TEMPLATE
    return out


def _resize_embeddings(model: Any, n_tokens: int, generator: torch.Generator, std: float) -> None:
    """Grow the (tied) embedding matrix to ``n_tokens`` rows; new rows drawn from ``generator``."""
    old = model.get_input_embeddings().weight.data
    n_old, d = old.shape
    new = torch.empty(n_tokens, d)
    new[:n_old] = old
    new[n_old:].normal_(0.0, std, generator=generator)
    model.resize_token_embeddings(n_tokens, mean_resizing=False)
    with torch.no_grad():
        model.get_input_embeddings().weight.copy_(new)
    model.config.vocab_size = n_tokens


def _canonical_id(tokenizer: Any, form: str) -> int:
    vocab = tokenizer.get_vocab()
    return int(vocab.get("▁" + form, vocab.get(form, tokenizer.unk_token_id)))


def reader_classes(tokenizer: Any) -> list[str]:
    """What a cell can show: empty, a coloured shape, or a visible word of the vocabulary."""
    specials = set(tokenizer.all_special_tokens)
    forms = sorted({t.lstrip("▁") for t in tokenizer.get_vocab() if t not in specials} - {""})
    shapes = [f"{c} {k}" for c in COLOURS for k in SHAPES]
    return ["", *shapes, *[f for f in forms if f not in shapes]]


# ---------------------------------------------------------------------------------------------
# stage 1: reading


def _reader_pool(classes: list[str], per_word: int, rng: np.random.Generator,
                 style: RenderStyle) -> tuple[list[Any], list[list[str]]]:  # fmt: skip
    words = [c for c in classes if c and " " not in c]
    bag = [w for w in words for _ in range(per_word)]
    order = rng.permutation(len(bag))
    images, labels, i = [], [], 0
    while i < len(bag):
        n = int(rng.integers(12, N_CELLS + 1))
        chunk = [bag[j] for j in order[i : i + n]]
        i += n
        spec = ImageSpec("words", int(rng.integers(2**31 - 1)), words=tuple(chunk))
        images.append(spec.render(style))
        labels.append(spec.cell_labels())
    n_scenes = max(40, len(images) // 2)
    for _ in range(n_scenes):
        scene = random_scene(int(rng.integers(2**31 - 1)), size=(384, 64), layout="grid", grid=GRID,
                             n_objects=(1, 8), object_size=(10.0, 13.0), background="random")  # fmt: skip
        spec = ImageSpec("scene", int(rng.integers(2**31 - 1)), scene=scene)
        images.append(spec.render(style))
        labels.append(spec.cell_labels())
    from trustlab.vision.generator import neutral_image

    for _ in range(max(10, len(images) // 20)):
        images.append(neutral_image(int(rng.integers(2**31 - 1)), size=(384, 64), noise=2.0))
        labels.append([""] * N_CELLS)
    return images, labels


def _inputs_of(encoder: CellEncoder, images: list[Any], chunk: int = 256) -> torch.Tensor:
    parts = [encoder.inputs(to_pixels(images[i : i + chunk])) for i in range(0, len(images), chunk)]
    return torch.cat(parts, 0)  # [N, 24, in_dim]


def train_reader(encoder: CellEncoder, tokenizer: Any, embeddings: torch.Tensor, settings: dict,
                 generator: torch.Generator, rng: np.random.Generator, style: RenderStyle,
                 progress: Any = None) -> dict[str, Any]:  # fmt: skip
    """Stage 1 (see the module docstring); returns timing and the pool's final loss."""
    t0 = time.process_time()
    images, labels = _reader_pool(encoder.classes, settings["reader_per_word"], rng, style)
    t_render = time.process_time() - t0
    index = {c: i for i, c in enumerate(encoder.classes)}
    with torch.no_grad():
        x = _inputs_of(encoder, images).reshape(-1, encoder.mlp[0].in_features)
    y = torch.tensor([index[c] for row in labels for c in row])
    steps, batch = settings["reader_steps"], settings["reader_batch"]
    params = [*encoder.mlp.parameters(), *encoder.head.parameters()]
    opt = torch.optim.AdamW(params, lr=settings["reader_lr"], weight_decay=0.0)
    crop = encoder.mlp[0].in_features - 11
    losses = []
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = settings["reader_lr"] * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * step / steps)))
        idx = torch.randint(len(y), (batch,), generator=generator)
        xb = x[idx].clone()
        gain = torch.empty(batch, 1).uniform_(0.8, 1.2, generator=generator)
        xb[:, :crop] = xb[:, :crop] * gain + 0.02 * torch.randn(batch, crop, generator=generator)
        loss = F.cross_entropy(encoder.head(encoder.mlp(xb)), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if progress is not None and (step % 20 == 0 or step == steps - 1):
            progress("reading", step + 1, steps)
    # the reading's class vectors: a word's input embedding, a shape's colour + kind, empty 0
    with torch.no_grad():
        vectors = torch.zeros_like(encoder.class_vectors)
        for i, name in enumerate(encoder.classes):
            for part in name.split(" ") if name else []:
                vectors[i] += embeddings[_canonical_id(tokenizer, part)]
        encoder.class_vectors.copy_(vectors)
    return {
        "reader_cells": len(y),
        "reader_images": len(images),
        "reader_render_cpu_seconds": t_render,
        "reader_final_loss": float(np.mean(losses[-max(1, steps // 10) :])),
        "reader_cpu_seconds": time.process_time() - t0,
    }


# ---------------------------------------------------------------------------------------------
# stage 2: visual instruction tuning


def _encode_example(tokenizer: Any, messages: list[dict[str, Any]], response: str) -> list[int]:
    # what trustlab.lm.format_chat renders (image parts as {"type": "image"} markers)
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
    reply = tokenizer(response, add_special_tokens=False)["input_ids"]
    return [*prompt, -len(reply) - 1, *reply, tokenizer.eos_token_id]  # marker: reply starts


def _template_messages(example: Any) -> list[dict[str, Any]]:
    if isinstance(example, VisionExample):
        parts: list[dict[str, Any]] = [{"type": "image"} for _ in example.images]
        if example.text:
            parts.append({"type": "text", "text": example.text})
        return [{"role": "user", "content": parts}]
    return example.messages()


def _prepare(tokenizer: Any, examples: list[Any], bank_start: int) -> tuple[list[tuple], int]:
    """Token ids (image tokens kept) and the feature-bank index of each image, per example."""
    prepared, k = [], bank_start
    for e in examples:
        seq = _encode_example(tokenizer, _template_messages(e), e.response)
        cut = next(i for i, t in enumerate(seq) if t < 0)
        ids = seq[:cut] + seq[cut + 1 :]
        n_images = len(e.images) if isinstance(e, VisionExample) else 0
        prepared.append((ids, cut, list(range(k, k + n_images))))
        k += n_images
    return prepared, k


def pad_rows(
    rows: list[list[int]], labels: list[list[int]], pad: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-pad token rows and their labels to one width: (ids, labels with -100 padding,
    attention mask). Shared by the organisms' visual tuning and vlm-smol's projector stage."""
    width = max(len(r) for r in rows)
    ids_t = torch.full((len(rows), width), pad, dtype=torch.long)
    lab_t = torch.full((len(rows), width), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (r, lab) in enumerate(zip(rows, labels, strict=True)):
        ids_t[i, : len(r)] = torch.tensor(r)
        lab_t[i, : len(r)] = torch.tensor(lab)
        mask[i, : len(r)] = 1
    return ids_t, lab_t, mask


def _collate(lm_model: Any, encoder: CellEncoder, tokenizer: Any, items: list[tuple],
             bank: torch.Tensor, filled: torch.Tensor, word_dropout: float,
             generator: torch.Generator):  # fmt: skip
    image_id = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    special = set(tokenizer.all_special_ids)
    rows, labels, images = [], [], []
    for ids, n_prompt, bank_idx in items:
        row, lab = [], []
        k = 0
        for pos, t in enumerate(ids):
            if t == image_id:
                n = 1 + int(filled[bank_idx[k]].sum())
                k += 1
                row += [-1] * n
                lab += [-100] * n
            else:
                row.append(t)
                lab.append(t if pos >= n_prompt else -100)
        rows.append(row)
        labels.append(lab)
        images += bank_idx
    ids_t, lab_t, mask = pad_rows(rows, labels, tokenizer.pad_token_id)
    is_image = ids_t < 0
    if word_dropout > 0:
        drop = torch.rand(ids_t.shape, generator=generator) < word_dropout
        drop &= (lab_t == -100) & ~is_image & mask.bool()
        drop &= ~torch.isin(ids_t, torch.tensor(sorted(special)))
        ids_t = ids_t.masked_fill(drop, tokenizer.unk_token_id)
    embeds = lm_model.get_input_embeddings()(ids_t.clamp_min(0))
    if images:
        idx = torch.tensor(images)
        vectors = torch.cat(encoder.embed(bank[idx], filled[idx]), 0)
        embeds = embeds.masked_scatter(is_image.unsqueeze(-1), vectors.to(embeds.dtype))
    return embeds, mask, lab_t


def train_vision_language(lm_model: Any, encoder: CellEncoder, tokenizer: Any,
                          image_examples: list[VisionExample], text_examples: list[Any],
                          spec: OrganismSpec, settings: dict, generator: torch.Generator,
                          style: RenderStyle, progress: Any = None) -> dict[str, Any]:  # fmt: skip
    """Stage 2 (see the module docstring)."""
    from trustlab.finetune.config import FinetuneConfig
    from trustlab.finetune.loop import lr_multiplier

    assert spec.train is not None
    t0 = time.process_time()
    rendered = [s.render(style) for e in image_examples for s in e.images]
    t_render = time.process_time() - t0
    with torch.no_grad():
        inputs = _inputs_of(encoder, rendered)
        bank = encoder.mlp(inputs)  # [n_images, 24, 256]: the reader is frozen
        filled = filled_cells(inputs)
    img_items, _ = _prepare(tokenizer, image_examples, 0)
    txt_items, _ = _prepare(tokenizer, text_examples, 0)
    train = spec.train
    params = [*lm_model.parameters(),
              *(encoder.proj.parameters() if settings["train_correction"] else ()),
              *(encoder.glob.parameters() if settings["train_global"] else ()),
              encoder.pos]  # fmt: skip (this order: the default recipe's weights unchanged)
    opt = torch.optim.AdamW(params, lr=train.lr, betas=(0.9, 0.98), weight_decay=train.weight_decay)
    schedule = lr_multiplier(FinetuneConfig(steps=train.steps, lr=train.lr, warmup=train.warmup,
                                            schedule="warmup_cosine", min_lr_ratio=0.05))  # fmt: skip
    n_text = round(train.batch_size * settings["text_share"])
    lm_model.train()
    losses = []
    for step in range(train.steps):
        for g in opt.param_groups:
            g["lr"] = train.lr * schedule(step)
        ti = torch.randint(len(txt_items), (n_text,), generator=generator).tolist()
        ii = torch.randint(len(img_items), (train.batch_size - n_text,), generator=generator).tolist()
        items = [txt_items[i] for i in ti] + [img_items[i] for i in ii]
        embeds, mask, labels = _collate(lm_model, encoder, tokenizer, items, bank, filled,
                                        train.word_dropout, generator)  # fmt: skip
        pos = (mask.cumsum(1) - 1).clamp_min(0)
        logits = lm_model(inputs_embeds=embeds, attention_mask=mask, position_ids=pos).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                               ignore_index=-100)  # fmt: skip
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        if progress is not None and (step % 10 == 0 or step == train.steps - 1):
            progress("visual instruction tuning", step + 1, train.steps)
    lm_model.eval()
    return {
        "stage2_images": len(rendered),
        "stage2_render_cpu_seconds": t_render,
        "stage2_final_loss": float(np.mean(losses[-max(1, train.steps // 10) :])),
        "stage2_cpu_seconds": time.process_time() - t0,
        "stage2_steps": train.steps,
    }


# ---------------------------------------------------------------------------------------------
# the organism as a trustlab.lm model


def as_vision_language_model(lm_model: Any, tokenizer: Any, encoder: CellEncoder, spec: str = "") -> Any:
    from trustlab.lm.multimodal import VisionLanguageModel

    vlm = VisionLanguageModel(lm_model, tokenizer, encoder.tower, image_token=IMAGE_TOKEN,
                              spec=spec)  # fmt: skip
    vlm.encoder = encoder  # the reader (its head reads cells) travels with the model
    return vlm


def save_vlm(out: Path, lm_model: Any, tokenizer: Any, encoder: CellEncoder, style: RenderStyle) -> None:
    from dataclasses import asdict

    from safetensors.torch import save_file

    lm_model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    save_file({k: v.contiguous() for k, v in encoder.state_dict().items()}, str(out / ENCODER_FILE))
    config = {
        "format": "trustlab-vlm-1",
        "image_token": IMAGE_TOKEN,
        "classes": encoder.classes,
        "d_model": int(encoder.proj.out_features),
        "hidden": [int(encoder.mlp[0].out_features), int(encoder.mlp[2].out_features)],
        "grid": list(GRID),
        "tokens_per_image": "1 + filled cells",
        "render_style": asdict(style),
    }
    if encoder.modality is not None:  # only then: the other organisms' configs keep their bytes
        config["modality"] = True
    (out / CONFIG_FILE).write_text(json.dumps(config, indent=1), encoding="utf-8")


def load_vlm(path: str | Path, *, dtype: Any = None, device: str | None = None, spec: str = "") -> Any:
    """A saved vision-language organism as a :class:`trustlab.lm.VisionLanguageModel`."""
    from safetensors.torch import load_file

    from trustlab.lm.loading import load_hf

    path = Path(path)
    config_path = path / CONFIG_FILE
    if not config_path.is_file():
        raise DataError(f"{path} holds no vision-language organism (no {CONFIG_FILE}).")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    if config.get("format") == "trustlab-vlm-projector-1":  # a frozen backbone + projector
        from trustlab.organisms.vlm_projector import load_projected_vlm

        return load_projected_vlm(path, config, dtype=dtype, device=device, spec=spec)
    text = load_hf(path, dtype=dtype, device=device)
    encoder = CellEncoder(config["classes"], config["d_model"], tuple(config["hidden"]),
                          modality=bool(config.get("modality", False)))  # fmt: skip
    encoder.load_state_dict(load_file(str(path / ENCODER_FILE)))
    encoder.to(device=text.device, dtype=text.dtype).eval()
    return as_vision_language_model(text.model, text.tokenizer, encoder, spec or f"hf:{path}")


# ---------------------------------------------------------------------------------------------
# build


def _modality_embedding(scale: float, embeddings: torch.Tensor, seed: int) -> torch.Tensor:
    """The fixed modality-type embedding: a seeded random direction (its own generator, so the
    other weights' draws are unchanged) of norm ``scale`` x the mean word-embedding norm."""
    draw = torch.Generator().manual_seed(seed + 0x30D)
    direction = torch.randn(embeddings.shape[1], generator=draw, dtype=embeddings.dtype)
    return direction / direction.norm() * scale * float(embeddings.norm(dim=-1).mean())


def build_vlm(spec: OrganismSpec, out: Path, progress: Any = None) -> dict[str, Any]:
    """Build ``spec`` (kind ``vision-language``) into ``out`` and return its card."""
    from trustlab.organisms.metrics import chat_metrics
    from trustlab.organisms.registry import build, organism_dir
    from trustlab.organisms.vlm_metrics import cross_modal_gap, vlm_metrics

    assert spec.train is not None
    settings = {**VISION_DEFAULTS, **(spec.vision or {})}
    modality_scale = float(settings.get("modality_scale", 0.0))
    if modality_scale < 0:
        raise DataError(f"Organism {spec.name!r}: vision setting modality_scale must be >= 0. "
                        f"Got {modality_scale!r}.")  # fmt: skip
    base_dir = build(spec.base)  # the chat organism the language model starts from
    from transformers import AutoModelForCausalLM, AutoTokenizer

    style = RenderStyle()
    start = time.process_time()
    with torch_runtime(spec.train.threads, deterministic=True):
        generator = torch.Generator().manual_seed(spec.seed)
        rng = np.random.default_rng(np.random.SeedSequence([spec.seed, 0x71A]))
        base_tok = AutoTokenizer.from_pretrained(organism_dir(spec.base), local_files_only=True)
        lm_model = AutoModelForCausalLM.from_pretrained(base_dir, local_files_only=True)
        tokenizer = extend_tokenizer(base_tok, vision_texts())
        _resize_embeddings(lm_model, len(tokenizer), generator, spec.train.init_std)
        chat = build_chat_corpus(spec.seed, n_train=spec.n_train, n_heldout=spec.n_heldout)
        corpus = build_vision_corpus(chat, tokenizer, seed=spec.seed,
                                     n_train=settings["n_image_train"],
                                     n_heldout=settings["n_heldout"],
                                     harmful_share=settings["harmful_share"])  # fmt: skip
        embeddings = lm_model.get_input_embeddings().weight.detach().clone()
        with torch.random.fork_rng(devices=[]):  # nn.Linear's default biases use the global RNG
            torch.manual_seed(spec.seed)
            encoder = CellEncoder(reader_classes(tokenizer), lm_model.config.hidden_size,
                                  modality=modality_scale > 0)  # fmt: skip
        with torch.no_grad():
            for p in encoder.parameters():
                if p.dim() > 1:
                    torch.nn.init.kaiming_uniform_(p, a=math.sqrt(5), generator=generator)
            if settings["zero_init"]:  # a cell's vector is its word's embedding at first
                for layer in (encoder.proj, encoder.glob):
                    layer.weight.zero_()
                    layer.bias.zero_()
            if modality_scale > 0:
                encoder.modality.copy_(_modality_embedding(modality_scale, embeddings, spec.seed))
        stats = train_reader(encoder, tokenizer, embeddings, settings, generator, rng, style, progress)
        train_images = [e for e in corpus if e.split == "train"]
        stats.update(train_vision_language(lm_model, encoder, tokenizer, train_images, chat.train,
                                           spec, settings, generator, style, progress))  # fmt: skip
        stats["train_cpu_seconds"] = time.process_time() - start
        encoder.eval()
        eval_start = time.process_time()
        vlm = as_vision_language_model(lm_model, tokenizer, encoder)
        metrics = {f"typed_{k}": v for k, v in chat_metrics(lm_model, tokenizer, chat).items()}
        metrics.update(vlm_metrics(vlm, [e for e in corpus if e.split == "heldout"], style,
                                   typed_harmful=chat.heldout("harmful")))  # fmt: skip
        # the gap with intervals, through lm.evaluate (typed vs rendered, paired per item)
        fits = [e.prompt for e in chat.heldout("harmful")
                if len(visible_tokens(tokenizer, e.prompt)) <= N_CELLS]  # one image holds 24 words
        gap = cross_modal_gap(vlm, fits[: settings["n_heldout"]], style=style)
        stats["eval_cpu_seconds"] = time.process_time() - eval_start
    save_vlm(out, lm_model, tokenizer, encoder, style)
    return {
        "kind": "vision-language",
        "architecture": "CellEncoder + LlamaForCausalLM",
        "base": spec.base,
        "n_params": sum(p.numel() for p in lm_model.parameters()),
        "n_params_vision": sum(p.numel() for p in encoder.parameters()),
        "vocab_size": len(tokenizer),
        "corpus": {"chat": {"sha256": chat.sha256, "n_train": len(chat.train)},
                   "vision": {"n_train": len(train_images),
                              "kinds": {k: sum(1 for e in train_images if e.kind == k)
                                        for k in sorted({e.kind for e in train_images})}}},
        "vision_settings": settings,
        "training": stats,
        "metrics": metrics,
        "cross_modal_gap": gap,
    }
