"""Images as values: one conversion to RGB, canonical PNG bytes, content hashes and data URLs.

Every image-taking function in trustlab accepts a Pillow image, an ``[H, W, 3]`` (or
``[H, W]``) uint8 array, PNG/JPEG bytes, a path to an image file or a ``data:image/...;base64``
URL; :func:`as_image` turns any of them into an RGB Pillow image (or raises an
:class:`~trustlab.core.errors.InputError` naming the parameter). :func:`image_sha256` hashes
the pixels (mode, size and RGB bytes), so the same picture gets the same key whatever container
it came in (reply caches key image prompts by it).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.errors import InputError

__all__ = [
    "as_array",
    "as_image",
    "data_url",
    "image_sha256",
    "is_image_like",
    "png_bytes",
]

_MAX_PIXELS = 64_000_000


def _pil() -> Any:
    from PIL import Image

    return Image


def is_image_like(value: Any) -> bool:
    """Whether ``value`` is something :func:`as_image` accepts without reading a file or URL."""
    Image = _pil()
    if isinstance(value, Image.Image):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype == np.uint8 and (
            value.ndim == 2 or (value.ndim == 3 and value.shape[-1] in (3, 4))
        )
    if isinstance(value, str):
        return value.startswith("data:image/")
    return isinstance(value, bytes | bytearray | Path)


def _from_bytes(raw: bytes, name: str) -> Any:
    Image = _pil()
    try:
        img = Image.open(io.BytesIO(raw))
        img.load()
    except Exception as exc:  # PIL raises several types for undecodable data
        raise InputError(
            f"The '{name}' parameter holds bytes that are not an image ({exc})."
        ) from None
    return img


def as_image(value: Any, name: str = "image") -> Any:
    """``value`` as an RGB ``PIL.Image.Image`` (see the module docstring for what is accepted)."""
    Image = _pil()
    if isinstance(value, Image.Image):
        img = value
    elif isinstance(value, np.ndarray):
        if value.dtype != np.uint8:
            raise InputError(
                f"The '{name}' parameter must be a uint8 array [H, W, 3] (or [H, W]). Got dtype "
                f"{value.dtype}."
            )
        if value.ndim == 2 or (value.ndim == 3 and value.shape[-1] in (3, 4)):
            img = Image.fromarray(np.ascontiguousarray(value))
        else:
            raise InputError(
                f"The '{name}' parameter must have shape [H, W, 3], [H, W, 4] or [H, W]. Got "
                f"{value.shape}."
            )
    elif isinstance(value, bytes | bytearray):
        img = _from_bytes(bytes(value), name)
    elif isinstance(value, str) and value.startswith("data:"):
        head, sep, payload = value.partition(",")
        if not sep or ";base64" not in head or not head.startswith("data:image/"):
            raise InputError(
                f"The '{name}' parameter is a data URL but not 'data:image/<type>;base64,...'."
            )
        try:
            raw = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InputError(f"The '{name}' data URL is not valid base64 ({exc}).") from None
        img = _from_bytes(raw, name)
    elif isinstance(value, str | Path):
        path = Path(value)
        if not path.is_file():
            raise InputError(f"The '{name}' parameter names no image file: {path}.")
        img = _from_bytes(path.read_bytes(), name)
    else:
        raise InputError(
            f"The '{name}' parameter must be a PIL image, a uint8 array, image bytes, a path or "
            f"a data URL. Got {type(value).__name__}."
        )
    width, height = img.size
    if width < 1 or height < 1 or width * height > _MAX_PIXELS:
        raise InputError(
            f"The '{name}' parameter must have between 1 and {_MAX_PIXELS} pixels. Got "
            f"{width}x{height}."
        )
    if img.mode == "RGBA":  # composite on white, as a viewer shows it
        background = Image.new("RGB", img.size, (255, 255, 255))
        background.paste(img, mask=img.getchannel("A"))
        return background
    return img if img.mode == "RGB" else img.convert("RGB")


def as_array(value: Any, name: str = "image") -> np.ndarray:
    """``value`` as a ``[H, W, 3]`` uint8 array."""
    return np.asarray(as_image(value, name), dtype=np.uint8)


def png_bytes(value: Any, name: str = "image") -> bytes:
    """Canonical PNG bytes of ``value`` (RGB, no metadata, fixed compression): same pixels, same
    bytes."""
    img = as_image(value, name)
    buffer = io.BytesIO()
    img.save(buffer, format="PNG", optimize=False, compress_level=6)
    return buffer.getvalue()


def image_sha256(value: Any, name: str = "image") -> str:
    """SHA-256 of the image's size and RGB pixels (independent of the container format)."""
    img = as_image(value, name)
    digest = hashlib.sha256()
    digest.update(f"RGB{img.size[0]}x{img.size[1]}".encode())
    digest.update(img.tobytes())
    return digest.hexdigest()


def data_url(value: Any, name: str = "image") -> str:
    """``data:image/png;base64,...`` of ``value`` (what OpenAI-compatible servers accept)."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(value, name)).decode("ascii")
