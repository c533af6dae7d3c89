"""Image content parts in conversations: the one message format for image+text prompts.

A message's ``content`` is a string (text only) or a list of parts, as in Hugging Face chat
templates and the OpenAI API::

    {"role": "user", "content": [
        {"type": "image", "image": pil_image_or_array_or_path},     # HF style
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}},  # OpenAI style
        {"type": "text", "text": "What colour is the circle?"},
    ]}

:func:`normalise_content` turns every image part into ``{"type": "image", "image": <RGB PIL>}``
and every text part into ``{"type": "text", "text": str}`` (the form chat templates and
:class:`~trustlab.lm.multimodal.VisionLanguageModel` read); :func:`user_message` builds one;
:func:`openai_content` gives the OpenAI wire form (images as base64 PNG data URLs, which
OpenAI-compatible servers such as vLLM accept); :func:`content_key` replaces images by their
pixel hash, for cache keys; :func:`content_text` is the text a judge reads (images as ``<image>``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trustlab.core.errors import InputError

__all__ = [
    "IMAGE_PLACEHOLDER",
    "content_images",
    "content_key",
    "content_text",
    "conversation_images",
    "has_images",
    "image_part",
    "normalise_content",
    "openai_content",
    "user_message",
]

#: How an image shows in the text a judge or a log reads.
IMAGE_PLACEHOLDER = "<image>"


def image_part(image: Any) -> dict[str, Any]:
    """``{"type": "image", "image": <RGB PIL image>}`` from anything ``vision.as_image`` takes."""
    from trustlab.vision.images import as_image

    return {"type": "image", "image": as_image(image, "image")}


def user_message(text: str | None = None, images: Any = ()) -> dict[str, Any]:
    """A user message with ``images`` first (one image or a list; frames of a video in order),
    then ``text``; plain ``{"role": "user", "content": text}`` when there are no images."""
    from trustlab.vision.images import is_image_like

    if text is not None and not isinstance(text, str):
        raise InputError(f"The 'text' parameter of user_message must be a string. Got {text!r:.60}.")
    if is_image_like(images) or hasattr(images, "getpixel"):
        images = [images]
    if isinstance(images, str) or not isinstance(images, Sequence):
        raise InputError("The 'images' parameter of user_message must be an image or a list of images.")
    parts = [image_part(img) for img in images]
    if not parts:
        if text is None:
            raise InputError("user_message needs text or at least one image.")
        return {"role": "user", "content": text}
    if text:
        parts.append({"type": "text", "text": text})
    return {"role": "user", "content": parts}


def _image_of(part: Mapping[str, Any], where: str) -> Any:
    from trustlab.vision.images import as_image

    kind = part.get("type")
    if kind == "image":
        for key in ("image", "url", "path"):
            if part.get(key) is not None:
                return as_image(part[key], f"{where}.{key}")
        raise InputError(f"{where} is an image part without 'image', 'url' or 'path'.")
    url = part.get("image_url")
    if isinstance(url, Mapping):
        url = url.get("url")
    if url is None:
        url = part.get("url")
    if not isinstance(url, str):
        raise InputError(f"{where} is an image_url part without a URL string.")
    if not url.startswith("data:image/"):
        raise InputError(
            f"{where}: only data:image/...;base64 URLs are read here (nothing is downloaded). "
            f"Got {url[:40]!r}."
        )
    return as_image(url, where)


def normalise_content(content: Any, where: str = "content") -> str | list[dict[str, Any]]:
    """A message content as a string, or as parts with RGB PIL images (see the module
    docstring). Part types: ``text``, ``image``, ``image_url``, ``input_image``."""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping) or not isinstance(content, Sequence) or not content:
        raise InputError(f"{where} must be a string or a non-empty list of parts. Got {content!r:.60}.")
    parts: list[dict[str, Any]] = []
    for i, part in enumerate(content):
        at = f"{where}[{i}]"
        if not isinstance(part, Mapping) or "type" not in part:
            raise InputError(f"{at} must be a dict with a 'type'. Got {part!r:.60}.")
        kind = part["type"]
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise InputError(f"{at} is a text part without a 'text' string.")
            parts.append({"type": "text", "text": text})
        elif kind in ("image", "image_url", "input_image"):
            parts.append({"type": "image", "image": _image_of(part, at)})
        else:
            raise InputError(f"{at} has type {kind!r}; known: text, image, image_url, input_image.")
    return parts


def content_images(content: Any) -> list[Any]:
    """The images of one (normalised or raw) content, in order."""
    if isinstance(content, str):
        return []
    return [p["image"] for p in normalise_content(content) if p["type"] == "image"]


def conversation_images(conversation: Any) -> list[Any]:
    """Every image of a conversation (a prompt string has none), in order."""
    if isinstance(conversation, str):
        return []
    return [img for m in conversation for img in content_images(m.get("content", ""))]


def has_images(prompts: Any) -> bool:
    """Whether any prompt (string or conversation) of ``prompts`` carries an image part."""
    if isinstance(prompts, str) or not isinstance(prompts, Sequence):
        return False
    for p in prompts:
        if isinstance(p, str) or not isinstance(p, Sequence):
            continue
        for m in p:
            content = m.get("content") if isinstance(m, Mapping) else None
            if (
                isinstance(content, Sequence)
                and not isinstance(content, str)
                and any(isinstance(x, Mapping) and x.get("type") != "text" for x in content)
            ):
                return True
    return False


def content_text(content: Any) -> str:
    """The text of a content, images shown as ``<image>``: what a judge reads as the request."""
    if isinstance(content, str):
        return content
    return " ".join(
        p["text"] if p.get("type") == "text" else IMAGE_PLACEHOLDER
        for p in content
        if isinstance(p, Mapping)
    )


def content_key(content: Any) -> Any:
    """A JSON-ready form of a content: images replaced by ``{"type": "image", "sha256": ...}``."""
    from trustlab.vision.images import image_sha256

    if isinstance(content, str):
        return content
    out = []
    for p in normalise_content(content):
        if p["type"] == "image":
            out.append({"type": "image", "sha256": image_sha256(p["image"])})
        else:
            out.append(p)
    return out


def openai_content(content: Any) -> Any:
    """The OpenAI chat-completions form: text stays a string; parts become ``text`` and
    ``image_url`` (a base64 PNG data URL) parts."""
    from trustlab.vision.images import data_url

    if isinstance(content, str):
        return content
    out: list[dict[str, Any]] = []
    for p in normalise_content(content):
        if p["type"] == "image":
            out.append({"type": "image_url", "image_url": {"url": data_url(p["image"])}})
        else:
            out.append({"type": "text", "text": p["text"]})
    return out
