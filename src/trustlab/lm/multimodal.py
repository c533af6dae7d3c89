"""Image+text models: a :class:`LanguageModel` whose prompts may carry images.

An image becomes a run of vectors in the language model's input, in place of the model's
image token, exactly as LLaVA-style models do it (the vision tower's features, projected to the
language model's width, replace the image placeholder). :class:`VisionLanguageModel` does that
splice itself, through the embeddings path (``inputs_embeds``), so every tool that takes a
:class:`~trustlab.lm.model.Batch` works unchanged on image prompts: forwards, activations,
hooks and interventions on the language model's residual stream, the KV-cached decoder,
``HFChatModel`` and ``lm.evaluate``. The image positions are the batch's ``free_mask``.

Two kinds of vision towers plug in (any callable ``images -> [n_tokens, d_model] per image``):

* :class:`HFVisionTower`: a Hugging Face image-text-to-text model's own tower and projector
  (``get_image_features``) with its processor; ``lm.load("hf:/path")`` builds it for
  LLaVA-style checkpoints (``AutoModelForImageTextToText`` + ``AutoProcessor``);
* the vision-language organisms' cell encoder (``organism:vlm-xs``, ``organism:vlm-s``).

Prompts: conversations whose content holds image parts (:mod:`trustlab.lm.content`), e.g.
``[lm.user_message("What colour is the circle?", images=[img])]``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import torch

from trustlab.core.errors import DataError, InputError, MissingDependencyError
from trustlab.lm.content import conversation_images, has_images
from trustlab.lm.model import Batch, LanguageModel, Prompt, Segment, SoftAt

__all__ = [
    "HFVisionTower",
    "RenderedText",
    "VisionLanguageModel",
    "check_image_prompts",
    "is_image_text_checkpoint",
    "load_image_text",
]

VisionTower = Callable[[Sequence[Any]], list[torch.Tensor]]
"""``tower(images) -> [tensor [n_tokens, d_model], ...]``: one run of vectors per RGB PIL image."""


def check_image_prompts(lm: LanguageModel, prompts: Any, where: str) -> bool:
    """Whether ``prompts`` carry images; an InputError when they do and ``lm`` reads no images."""
    if not has_images(prompts):
        return False
    if not isinstance(lm, VisionLanguageModel):
        raise InputError(
            f"{where}: the prompts hold images but {lm.spec or lm.adapter.model_type!r} is a "
            "text-only model (load an image-text model: hf:/path/to/llava, organism:vlm-xs)."
        )
    return True


class VisionLanguageModel(LanguageModel):
    """A language model plus a vision tower whose vectors replace each image token.

    ``vision``: a :data:`VisionTower`; ``image_token``: the token the chat template writes for
    an image (one token per image; it is expanded into the tower's vectors here, never by a
    processor); ``processor``: kept for reference (HF models). ``tokens_per_image``: the tower's
    vector count when it is fixed (used to sort prompts by length without running the tower).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        vision: VisionTower,
        *,
        image_token: str,
        spec: str = "",
        processor: Any = None,
        tokens_per_image: int | None = None,
    ) -> None:
        super().__init__(model, tokenizer, spec=spec)
        if not callable(vision):
            raise InputError("The 'vision' parameter of VisionLanguageModel must be callable.")
        self.vision = vision
        self.processor = processor
        self.image_token = image_token
        token_id = tokenizer.convert_tokens_to_ids(image_token)
        if token_id is None or token_id == tokenizer.unk_token_id:
            raise InputError(
                f"The tokenizer has no image token {image_token!r}; pass the model's image token."
            )
        self.image_token_id = int(token_id)
        self.tokens_per_image = tokens_per_image

    def __repr__(self) -> str:
        return "Vision" + super().__repr__()

    def vision_state_dict(self) -> dict[str, torch.Tensor]:
        """The weights of the vision tower that live outside ``self.model`` (empty for HF
        image-text models, whose tower is part of the model): reply caches key on them."""
        owner = getattr(self.vision, "__self__", self.vision)  # a bound method's module
        if isinstance(owner, HFVisionTower) or not isinstance(owner, torch.nn.Module):
            return {}
        return dict(owner.state_dict())

    # ------------------------------------------------------------------ images
    def image_embeds(self, images: Sequence[Any], *, grad: bool = False) -> list[torch.Tensor]:
        """The vectors of each image ``[n_tokens, d_model]`` (model dtype and device)."""
        from trustlab.vision.images import as_image

        if isinstance(images, str) or not isinstance(images, Sequence):
            raise InputError("The 'images' parameter must be a list of images.")
        pil = [as_image(img, f"images[{i}]") for i, img in enumerate(images)]
        if not pil:
            return []
        with torch.set_grad_enabled(grad):
            feats = list(self.vision(pil))
        if len(feats) != len(pil):
            raise DataError(f"The vision tower returned {len(feats)} feature runs for {len(pil)} images.")
        out = []
        for f in feats:
            if not isinstance(f, torch.Tensor) or f.dim() != 2 or f.shape[1] != self.d_model:
                raise DataError(
                    f"The vision tower must return [n_tokens, {self.d_model}] per image. Got "
                    f"{tuple(f.shape) if isinstance(f, torch.Tensor) else type(f).__name__}."
                )
            out.append(f.to(device=self.device, dtype=self.dtype))
        return out

    # ------------------------------------------------------------------ prompts
    def _ids_and_images(self, prompts: Sequence[Prompt]) -> list[tuple[list[int], list[Any]]]:
        if isinstance(prompts, str):
            raise InputError("Pass a list of prompts, not a single string.")
        ids = LanguageModel.tokenize(self, prompts)
        out = []
        for n, (p, toks) in enumerate(zip(prompts, ids, strict=True)):
            images = conversation_images(p)
            found = sum(1 for t in toks if t == self.image_token_id)
            if found != len(images):
                raise InputError(
                    f"Prompt {n} holds {len(images)} image(s) but its chat format has {found} "
                    f"image token(s) {self.image_token!r}; does the chat template render image "
                    "parts?"
                )
            out.append((toks, images))
        return out

    def prompt_segments(self, prompts: Sequence[Prompt], *, grad: bool = False) -> list[list[Segment]]:
        """Each prompt as segments for :meth:`embed_batch`: token ids, with every image token
        replaced by that image's vectors (one vision call for all images)."""
        rows = self._ids_and_images(prompts)
        feats = self.image_embeds([img for _, imgs in rows for img in imgs], grad=grad)
        out: list[list[Segment]] = []
        k = 0
        for toks, _ in rows:
            segs: list[Segment] = []
            run: list[int] = []
            for t in toks:
                if t == self.image_token_id:
                    if run:
                        segs.append(run)
                        run = []
                    segs.append(feats[k])
                    k += 1
                else:
                    run.append(t)
            if run:
                segs.append(run)
            out.append(segs)
        return out

    def prompt_lengths(self, prompts: Sequence[Prompt]) -> list[int]:
        """Input length of each prompt once its images are expanded."""
        rows = self._ids_and_images(prompts)
        if self.tokens_per_image is not None:
            return [len(t) + len(imgs) * (self.tokens_per_image - 1) for t, imgs in rows]
        lengths = []
        for toks, imgs in rows:
            feats = self.image_embeds(imgs)
            lengths.append(len(toks) - len(imgs) + sum(int(f.shape[0]) for f in feats))
        return lengths

    def encode(
        self,
        prompts: Sequence[Prompt],
        padding_side: Literal["left", "right"] = "left",
        *,
        soft: torch.Tensor | None = None,
        soft_at: SoftAt = "start",
    ) -> Batch:
        """As :meth:`LanguageModel.encode`; prompts with images give a batch carrying
        ``inputs_embeds`` whose ``free_mask`` marks the image vectors (and any ``soft`` ones,
        which go at the ``"start"`` or ``"end"`` of image prompts)."""
        if not has_images(prompts):
            return super().encode(prompts, padding_side, soft=soft, soft_at=soft_at)
        rows = self.prompt_segments(prompts)
        if soft is not None:
            vectors = self._check_free(soft, "soft", len(rows))
            if soft_at not in ("start", "end"):
                raise InputError(
                    f"With image prompts, soft_at must be 'start' or 'end'. Got {soft_at!r}."
                )
            rows = [
                [v, *row] if soft_at == "start" else [*row, v]
                for row, v in zip(rows, [vectors[i] if vectors.dim() == 3 else vectors
                                         for i in range(len(rows))], strict=True)
            ]  # fmt: skip
        return self.embed_batch(rows, padding_side)

    def prompt_embeds(self, prompts: Sequence[Prompt]) -> list[torch.Tensor]:
        """One ``[T_i, d_model]`` tensor per prompt (images expanded): the decoder's
        ``inputs_embeds``."""
        out = []
        for row in self.prompt_segments(prompts):
            parts = [s if isinstance(s, torch.Tensor) and s.is_floating_point()
                     else self.embed(torch.as_tensor(s, dtype=torch.long)) for s in row]  # fmt: skip
            out.append(torch.cat(parts, 0))
        return out


# ---------------------------------------------------------------------------------------------
# the same request typed or shown: an lm.evaluate transform


class RenderedText:
    """An :func:`trustlab.lm.evaluate` transform that moves each user message's text into an
    image: the message becomes ``[image of the text, instruction]`` (the instruction is left
    out when None), so one prompt set measures the typed and the image-borne request side by
    side, paired item by item (the cross-modal gap; typographic attacks).

    ``render(text) -> image`` draws the text (e.g. :func:`trustlab.vision.render_text` or a
    word grid); it must be deterministic, since reply caches key on the pixels. Replies pass
    through unchanged (``decode`` is the identity; early stopping stays on)."""

    prefix_safe = True

    def __init__(
        self, render: Callable[[str], Any], instruction: str | None = None, *, name: str = "image"
    ) -> None:
        if not callable(render):
            raise InputError("The 'render' parameter of RenderedText must be callable.")
        if instruction is not None and not isinstance(instruction, str):
            raise InputError("The 'instruction' parameter of RenderedText must be a string or None.")
        if not isinstance(name, str) or not name:
            raise InputError("RenderedText needs a non-empty name.")
        self.render = render
        self.instruction = instruction
        self.name = name

    def encode_conversation(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from trustlab.lm.content import image_part

        out = []
        for m in messages:
            content = m["content"]
            if m["role"] == "user" and isinstance(content, str):
                parts = [image_part(self.render(content))]
                if self.instruction:
                    parts.append({"type": "text", "text": self.instruction})
                content = parts
            out.append({"role": m["role"], "content": content})
        return out

    @staticmethod
    def decode(reply: str) -> str:
        return reply


# ---------------------------------------------------------------------------------------------
# Hugging Face image-text-to-text checkpoints


class HFVisionTower:
    """The vision tower and projector of a Hugging Face image-text-to-text model, fed through
    its processor's image processor (``pixel_values`` -> ``get_image_features``)."""

    def __init__(self, model: Any, processor: Any) -> None:
        self.model = model
        self.processor = processor
        self._n_tokens: int | None = None

    def _features_fn(self) -> Any:
        fn = getattr(self.model, "get_image_features", None)
        if fn is None:
            fn = getattr(getattr(self.model, "model", None), "get_image_features", None)
        if fn is None:
            raise InputError(
                f"{type(self.model).__name__} has no get_image_features; only LLaVA-style models "
                "(a vision tower and a projector feeding image tokens) are supported."
            )
        return fn

    def __call__(self, images: Sequence[Any]) -> list[torch.Tensor]:
        features = self._features_fn()  # first: a model without it raised a raw AttributeError
        image_processor = getattr(self.processor, "image_processor", self.processor)
        pixels = image_processor(images=list(images), return_tensors="pt")["pixel_values"]
        param = next(self.model.parameters())
        pixels = pixels.to(device=param.device, dtype=param.dtype)
        config = getattr(self.model, "config", None)
        kwargs: dict[str, Any] = {}
        for key in ("vision_feature_layer", "vision_feature_select_strategy"):
            if getattr(config, key, None) is not None:
                kwargs[key] = getattr(config, key)
        out = features(pixel_values=pixels, **kwargs)
        feats = getattr(out, "pooler_output", out)
        if isinstance(feats, torch.Tensor):
            feats = list(feats) if feats.dim() == 3 else [feats]
        feats = [f.reshape(-1, f.shape[-1]) for f in feats]
        if len(feats) != len(images):  # towers that return one flat run for the batch
            flat = torch.cat(feats, 0)
            n = flat.shape[0] // len(images)
            feats = list(flat.split(n))
        return feats


def is_image_text_checkpoint(folder: str | Path) -> bool:
    """Whether a checkpoint folder holds an image-text model (its config has a vision config)."""
    path = Path(folder) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "vision_config" in config and "text_config" in config


def load_image_text(
    folder: str | Path, *, model_kwargs: dict[str, Any], device: str | None = None
) -> VisionLanguageModel:
    """An ``AutoModelForImageTextToText`` + ``AutoProcessor`` folder as a VisionLanguageModel."""
    try:
        from transformers import AutoModelForImageTextToText, AutoProcessor
    except ImportError as exc:  # pragma: no cover - transformers comes with trustlab[llm]
        raise MissingDependencyError.for_package("transformers", "llm", "Image-text models") from exc
    folder = Path(folder)
    try:
        processor = AutoProcessor.from_pretrained(str(folder), local_files_only=True)
        model = AutoModelForImageTextToText.from_pretrained(str(folder), **model_kwargs)
    except (OSError, ValueError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"Could not load an image-text model from {folder}: {first}") from exc
    if device is not None:
        model = model.to(device)
    tokenizer = getattr(processor, "tokenizer", None)
    if tokenizer is None:
        raise DataError(f"The processor in {folder} has no tokenizer.")
    if not getattr(tokenizer, "chat_template", None) and getattr(processor, "chat_template", None):
        tokenizer.chat_template = processor.chat_template
    image_token = getattr(processor, "image_token", None) or "<image>"
    tower = HFVisionTower(model, processor)
    return VisionLanguageModel(
        model, tokenizer, tower, image_token=image_token, spec=f"hf:{folder}", processor=processor
    )
