"""Geolocation models behind one interface: ``predict(images) -> (n, 2)`` (lat, lon), NaN rows
for no answer; a cell model also gives ``predict_proba(images) -> (n, n_cells)``.

* :class:`CellGeolocator`: a small CNN trained on CPU (cell classification + per-cell coordinate
  regression), the synthetic world's model; Grad-CAM-ready (:attr:`CellGeolocator.cam_layer`).
* :class:`CallableGeolocator`: any function image -> (lat, lon) or None (e.g. a GeoCLIP
  instance's ``predict``, for users who have it installed with its weights).
* :class:`LLMGeolocator`: a multimodal chat model (``openai:`` endpoint or any
  :mod:`trustlab.lm` chat model) asked for coordinates; answers are parsed by
  :func:`parse_coordinates` and unparseable ones are counted (NaN rows), never dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.validation import check_scalar
from trustlab.methods.geobias.geo import as_coordinates, haversine_km

__all__ = [
    "DEFAULT_LLM_PROMPT",
    "CallableGeolocator",
    "CellGeolocator",
    "LLMGeolocator",
    "as_image_batch",
    "parse_coordinates",
]

DEFAULT_LLM_PROMPT = (
    "Where was this photo taken? Answer with your best guess of its coordinates as "
    "'latitude, longitude' in decimal degrees (negative for south and west), nothing else."
)


def as_image_batch(images: Any, name: str = "images", where: str = "") -> NDArray[np.uint8]:
    """``images`` as a uint8 ``(n, h, w, 3)`` array (from such an array, a list of equally sized
    RGB images/arrays/paths, or one ``(h, w, 3)`` image)."""
    from trustlab.vision.images import as_array

    at = f" of {where}" if where else ""
    if isinstance(images, np.ndarray):
        arr = images
        if arr.ndim == 3:
            arr = arr[None]
        if arr.ndim != 4 or arr.shape[-1] != 3 or 0 in arr.shape:
            raise InputError(f"The '{name}' parameter{at} must have shape (n, h, w, 3). "
                             f"Got {arr.shape}.")
        if arr.dtype != np.uint8:
            if arr.dtype.kind not in "iu" or arr.min() < 0 or arr.max() > 255:
                raise InputError(f"The '{name}' parameter{at} must be uint8 pixels (0-255). "
                                 f"Got dtype {arr.dtype}.")
            arr = arr.astype(np.uint8)
        return arr
    if isinstance(images, str | bytes) or not isinstance(images, Sequence) or len(images) == 0:
        raise InputError(f"The '{name}' parameter{at} must be a non-empty list of images or an "
                         f"(n, h, w, 3) uint8 array. Got {type(images).__name__}.")
    arrs = [as_array(im, name) for im in images]
    if len({a.shape for a in arrs}) != 1:
        raise InputError(f"The '{name}' parameter{at} must hold images of one size.")
    return np.stack(arrs)


def _net(n_cells: int, width: int) -> Any:
    import torch
    from torch import nn

    class GeoNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            w = width
            self.features = nn.Sequential(
                nn.Conv2d(3, w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(w, 2 * w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(2 * w, 4 * w, 3, padding=1), nn.ReLU(),
            )
            self.cells = nn.Linear(4 * w, n_cells)
            self.offsets = nn.Linear(4 * w, 2 * n_cells)

        def embed(self, x: torch.Tensor) -> torch.Tensor:
            return self.features(x).mean(dim=(2, 3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:  # cell logits (Grad-CAM's score)
            return self.cells(self.embed(x))

    return GeoNet()


def _to_tensor(batch: NDArray[np.uint8]) -> Any:
    import torch

    return torch.from_numpy(batch).permute(0, 3, 1, 2).float().div(255.0).sub(0.5)


class CellGeolocator:
    """A CNN over a fixed set of cells (centres ``cells``, ``(k, 2)`` lat/lon): cross-entropy on
    the nearest cell plus a squared-error regression of the offset (degrees) from that cell's
    centre; ``predict`` gives the argmax cell's centre plus its regressed offset.

    ``width``: channels of the first conv layer (x2, x4 after); ``seed``: initialisation and
    batch order. Training runs on the CPU in the calling thread settings.
    """

    def __init__(
        self,
        cells: ArrayLike,
        *,
        epochs: int = 10,
        batch_size: int = 64,
        lr: float = 3e-3,
        width: int = 16,
        regression_weight: float = 1.0,
        seed: int = 0,
    ) -> None:
        self.cells = cells
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.width = width
        self.regression_weight = regression_weight
        self.seed = seed

    def _check(self, where: str) -> NDArray[np.float64]:
        cells = as_coordinates(self.cells, "cells", where)
        if len(cells) < 2:
            raise InputError(f"The 'cells' parameter of {where} needs at least 2 cells.")
        check_scalar(self.epochs, "epochs", where, kind=int, lo=1)
        check_scalar(self.batch_size, "batch_size", where, kind=int, lo=1)
        check_scalar(self.lr, "lr", where, lo=0.0, closed="neither")
        check_scalar(self.width, "width", where, kind=int, lo=1, hi=512)
        check_scalar(self.regression_weight, "regression_weight", where, lo=0.0)
        check_scalar(self.seed, "seed", where, kind=int, lo=0)
        return cells

    def fit(self, images: Any, coords: ArrayLike, *, progress: Callable[..., Any] | None = None
            ) -> CellGeolocator:
        """Train on ``images`` (uint8 ``(n, h, w, 3)``) with truth ``coords`` ``(n, 2)``."""
        import torch

        where = "CellGeolocator.fit"
        cells = self._check(where)
        x = as_image_batch(images, "images", where)
        y = as_coordinates(coords, "coords", where)
        if len(y) != len(x):
            raise InputError(f"The inputs of {where} must have the same number of samples. "
                             f"Got 'images' {len(x)}, 'coords' {len(y)}.")
        dist = np.stack([haversine_km(y, c[None]) for c in cells], axis=1)
        label = dist.argmin(axis=1)
        offset = y - cells[label]
        torch.manual_seed(int(self.seed))
        gen = torch.Generator().manual_seed(int(self.seed))
        net = _net(len(cells), int(self.width))
        opt = torch.optim.Adam(net.parameters(), lr=float(self.lr))
        xt = _to_tensor(x)
        lt = torch.from_numpy(label).long()
        ot = torch.from_numpy(offset).float()
        n, bs = len(x), int(self.batch_size)
        epochs = range(int(self.epochs))
        for _ in progress(epochs) if progress else epochs:
            perm = torch.randperm(n, generator=gen)
            for i in range(0, n, bs):
                idx = perm[i:i + bs]
                emb = net.embed(xt[idx])
                logits = net.cells(emb)
                off = net.offsets(emb).view(len(idx), -1, 2)
                pred_off = off[torch.arange(len(idx)), lt[idx]]
                loss = torch.nn.functional.cross_entropy(logits, lt[idx])
                loss = loss + float(self.regression_weight) * ((pred_off - ot[idx]) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        net.eval()
        self.model_ = net
        self.cells_ = cells
        self.train_cell_accuracy_ = float((self._logits(x).argmax(1) == label).mean())
        return self

    def _fitted(self, where: str) -> Any:
        if not hasattr(self, "model_"):
            raise NotFittedError(f"{where} needs a fitted CellGeolocator: call fit() first.")
        return self.model_

    def _logits(self, x: NDArray[np.uint8]) -> NDArray[np.float64]:
        import torch

        out = []
        with torch.no_grad():
            for i in range(0, len(x), 512):
                out.append(self.model_(_to_tensor(x[i:i + 512])).double().numpy())
        return np.concatenate(out)

    def predict_proba(self, images: Any) -> NDArray[np.float64]:
        """``(n, n_cells)`` softmax over the cells."""
        where = "CellGeolocator.predict_proba"
        self._fitted(where)
        logits = self._logits(as_image_batch(images, "images", where))
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, images: Any) -> NDArray[np.float64]:
        """``(n, 2)`` (lat, lon): the most probable cell's centre plus its regressed offset."""
        import torch

        where = "CellGeolocator.predict"
        net = self._fitted(where)
        x = as_image_batch(images, "images", where)
        out = []
        with torch.no_grad():
            for i in range(0, len(x), 512):
                emb = net.embed(_to_tensor(x[i:i + 512]))
                cell = net.cells(emb).argmax(1)
                off = net.offsets(emb).view(len(cell), -1, 2)[torch.arange(len(cell)), cell]
                out.append(self.cells_[cell.numpy()] + off.double().numpy())
        pred = np.concatenate(out)
        pred[:, 0] = np.clip(pred[:, 0], -90, 90)
        pred[:, 1] = (pred[:, 1] + 180.0) % 360.0 - 180.0
        return pred

    @property
    def cam_layer(self) -> Any:
        """The last convolution (the Grad-CAM layer)."""
        return self._fitted("CellGeolocator.cam_layer").features[-2]

    def input_tensor(self, images: Any) -> Any:
        """The network's input for ``images`` (what :func:`grad_cam` takes)."""
        return _to_tensor(as_image_batch(images, "images", "CellGeolocator.input_tensor"))


class CallableGeolocator:
    """Wraps ``fn(image) -> (lat, lon) | None`` (``image``: a uint8 ``(h, w, 3)`` array);
    ``None`` or an out-of-range answer becomes a NaN row (counted in ``n_unanswered_``)."""

    def __init__(self, fn: Callable[[NDArray[np.uint8]], Any]) -> None:
        if not callable(fn):
            raise InputError(f"The 'fn' parameter of CallableGeolocator must be callable. "
                             f"Got {type(fn).__name__}.")
        self.fn = fn

    def predict(self, images: Any) -> NDArray[np.float64]:
        x = as_image_batch(images, "images", "CallableGeolocator.predict")
        out = np.full((len(x), 2), np.nan)
        for i, im in enumerate(x):
            ans = self.fn(im)
            try:
                lat, lon = (float(v) for v in ans)
            except (TypeError, ValueError):
                continue
            if np.isfinite([lat, lon]).all() and abs(lat) <= 90 and abs(lon) <= 180:
                out[i] = (lat, lon)
        self.n_unanswered_ = int(np.isnan(out[:, 0]).sum())
        return out


_NUM = r"[-+\u2212]?\d{1,3}(?:\.\d+)?"
_NAMED = re.compile(
    rf"\blat(?:itude)?\b[\"']?\s*[:=]?\s*({_NUM})\s*°?.{{0,40}}?"
    rf"\b(?:lon(?:gitude)?|lng)\b[\"']?\s*[:=]?\s*({_NUM})",
    re.IGNORECASE | re.DOTALL,
)
_HEMI = re.compile(
    r"(\d{1,2}(?:\.\d+)?)\s*°?\s*(?:\d{1,2}\s*['′]\s*(?:\d{1,2}(?:\.\d+)?\s*[\"″]\s*)?)?([NS])\b"
    r"[\s,;/]*(\d{1,3}(?:\.\d+)?)\s*°?\s*(?:\d{1,2}\s*['′]\s*(?:\d{1,2}(?:\.\d+)?\s*[\"″]\s*)?)?([EW])\b",
    re.IGNORECASE,
)
_PAIR = re.compile(rf"({_NUM})\s*°?\s*[,;/]\s*({_NUM})\s*°?")


def _num(s: str) -> float:
    return float(s.replace("\u2212", "-"))


def parse_coordinates(text: str) -> tuple[float, float] | None:
    """(lat, lon) in degrees from a model's answer, or ``None`` when there is none.

    Tried in order, the last match of the first format found wins (a final answer follows
    reasoning): named (``lat: 48.85, lon: 2.35``, JSON keys ``latitude``/``longitude``/``lng``),
    hemispheres (``48.85° N, 2.35° E``; minutes and seconds ignored), a signed decimal pair
    (``-33.87, 151.21``). Out-of-range values (|lat| > 90, |lon| > 180) are no answer.
    """
    if not isinstance(text, str):
        raise InputError(f"The 'text' parameter of parse_coordinates must be a string. "
                         f"Got {type(text).__name__}.")
    found: list[tuple[float, float]] = []
    for m in _NAMED.finditer(text):
        found.append((_num(m.group(1)), _num(m.group(2))))
    if not found:
        for m in _HEMI.finditer(text):
            lat = float(m.group(1)) * (-1 if m.group(2).upper() == "S" else 1)
            lon = float(m.group(3)) * (-1 if m.group(4).upper() == "W" else 1)
            found.append((lat, lon))
    if not found:
        for m in _PAIR.finditer(text):
            found.append((_num(m.group(1)), _num(m.group(2))))
    found = [(a, b) for a, b in found if abs(a) <= 90 and abs(b) <= 180]
    return found[-1] if found else None


class LLMGeolocator:
    """A multimodal chat model asked ``prompt`` about each image (an image part, then the text).

    ``chat``: a :mod:`trustlab.lm` chat model (anything with ``generate(conversations)``) or a
    spec string such as ``"openai:http://host:8000/v1#model"`` (resolved by
    :func:`trustlab.lm.chat_model`; ``chat_kwargs`` such as ``cache_dir`` go there).
    After ``predict``: ``replies_`` (the raw answers), ``parsed_`` (bool per image) and
    ``n_unparseable_``; unparseable answers are NaN rows, counted as misses by the metrics.
    """

    def __init__(
        self,
        chat: Any,
        *,
        prompt: str = DEFAULT_LLM_PROMPT,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        seed: int = 0,
        chat_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.chat = chat
        self.prompt = prompt
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.seed = seed
        self.chat_kwargs = chat_kwargs

    def _model(self, where: str) -> Any:
        if isinstance(self.chat, str):
            from trustlab.lm.chat import chat_model

            return chat_model(self.chat, **(self.chat_kwargs or {}))
        if not callable(getattr(self.chat, "generate", None)):
            raise InputError(f"The 'chat' parameter of {where} must be a chat model with "
                             f"generate() or a spec string. Got {type(self.chat).__name__}.")
        return self.chat

    def predict(self, images: Any) -> NDArray[np.float64]:
        from trustlab.lm.content import user_message

        where = "LLMGeolocator.predict"
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise InputError(f"The 'prompt' parameter of {where} must be a non-empty string.")
        check_scalar(self.max_new_tokens, "max_new_tokens", where, kind=int, lo=1)
        check_scalar(self.temperature, "temperature", where, lo=0.0)
        check_scalar(self.seed, "seed", where, kind=int, lo=0)
        x = as_image_batch(images, "images", where)
        model = self._model(where)
        convs = [[user_message(self.prompt, images=[im])] for im in x]
        replies = model.generate(convs, max_new_tokens=int(self.max_new_tokens),
                                 temperature=float(self.temperature), seed=int(self.seed))
        out = np.full((len(x), 2), np.nan)
        parsed = np.zeros(len(x), bool)
        for i, r in enumerate(replies):
            c = parse_coordinates(str(r))
            if c is not None:
                out[i], parsed[i] = c, True
        self.replies_ = [str(r) for r in replies]
        self.parsed_ = parsed
        self.n_unparseable_ = int((~parsed).sum())
        return out
