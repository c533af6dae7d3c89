"""The vision-language organisms' image encoder: one shared reader per cell of a fixed grid.

An image is resized to the 384 x 64 canvas and cut into its 4 x 6 cells. Each cell is
*normalised* (a fixed, parameter-free step, like centring digits for MNIST): its background is
the median of its border pixels, its ink the summed absolute difference from it; the ink's
bounding box is cropped and resampled to 12 x 48, which removes the position jitter and most of
the font-size variation, and five numbers keep what cropping drops (box width, height, top and
bottom, emptiness) plus the mean ink colour and the background colour. A two-layer MLP turns
that into a 256-d feature ``h``; a linear head classifies the cell (a visible word of the
vocabulary, a coloured shape, or empty: the *reading*). The cell's input vector for the language
model is tied to the language model's word embeddings: the reading's expected class vector
``softmax(head(h)) @ class_vectors`` (a word's input embedding; colour + kind for a shape; zero
for an empty cell), plus a learned linear correction ``proj(h)`` and a learned per-cell
position vector. ``proj`` and ``glob`` are zero at construction; ``build_vlm`` overwrites them
with its seeded initialisation unless the organism's ``vision`` settings say ``zero_init`` (and
``train_correction: False`` keeps ``proj`` at zero: docs/organisms.md, "What the image path
carries"). With ``modality=True`` the encoder also holds a fixed *modality-type embedding*
(a buffer, set by ``build_vlm`` from the ``modality_scale`` setting) added to every vector of
every image, the image vector included (as ViLT's modality-type embedding, or a projector bias
frozen after pre-training): image inputs then sit at an offset from typed ones that a
content-free image carries too (docs/organisms.md, "A modality offset").

An image becomes one *image vector* (a projection of the mean cell feature: what the whole
picture looks like, e.g. a neutral colour field) followed by the vectors of its non-empty cells
in reading order; a cell is empty when no pixel of it differs from its background by more than
:data:`INK_THRESHOLD` (parameter-free, so the count does not depend on training). A word image
of a 9-token request is thus 10 vectors, much as the request typed is 9 tokens; a neutral colour
field is one. (Models such as Qwen2-VL also give images a variable number of tokens.) Why not a
convolutional net or a ViT: on 2 shared CPU cores a small CNN on the raw cells reached 27 %
cell accuracy in 600 steps, and the normalised-crop MLP 99 % in 800 (docs/organisms.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from trustlab.organisms.vlm_data import CANVAS, CELL, GRID

__all__ = ["CROP", "INK_THRESHOLD", "CellEncoder", "filled_cells", "normalise_cells", "to_pixels"]

CROP = (12, 48)  # (height, width) of a normalised cell
INK_THRESHOLD = 0.235  # summed |pixel - background| over RGB (0..3) above which a pixel is ink
_N_EXTRA = 11  # ink colour (3), background (3), width, height, top, bottom, empty


def to_pixels(images: Sequence[Any]) -> torch.Tensor:
    """RGB images as ``[B, 3, 64, 384]`` floats in [0, 1] (resized to the canvas when needed)."""
    from PIL import Image

    from trustlab.vision.images import as_image

    out = np.empty((len(images), CANVAS[1], CANVAS[0], 3), dtype=np.uint8)
    for i, img in enumerate(images):
        pil = as_image(img, f"images[{i}]")
        if pil.size != CANVAS:
            pil = pil.resize(CANVAS, Image.Resampling.BILINEAR)
        out[i] = np.asarray(pil)
    return torch.from_numpy(out).permute(0, 3, 1, 2).float().div_(255.0)


def _first_true(mask: torch.Tensor) -> torch.Tensor:
    return mask.to(torch.int8).argmax(1)


def normalise_cells(cells: torch.Tensor) -> torch.Tensor:
    """``[N, 3, 16, 64]`` cells -> ``[N, 12*48 + 11]`` features (see the module docstring)."""
    n, _, h, w = cells.shape
    border = torch.cat([cells[:, :, 0, :], cells[:, :, -1, :], cells[:, :, :, 0], cells[:, :, :, -1]], -1)
    bg = border.median(-1).values  # [N, 3]
    diff = cells - bg[:, :, None, None]
    ink = diff.abs().sum(1)  # [N, h, w]
    mask = ink > INK_THRESHOLD
    rows, cols = mask.any(2), mask.any(1)
    empty = ~cols.any(1)
    y0, x0 = _first_true(rows), _first_true(cols)
    y1, x1 = h - 1 - _first_true(rows.flip(1)), w - 1 - _first_true(cols.flip(1))
    y0 = torch.where(empty, torch.zeros_like(y0), y0)
    x0 = torch.where(empty, torch.zeros_like(x0), x0)
    y1 = torch.where(empty, torch.full_like(y1, h - 1), y1)
    x1 = torch.where(empty, torch.full_like(x1, w - 1), x1)
    bw, bh = (x1 - x0 + 1).float(), (y1 - y0 + 1).float()
    theta = torch.zeros(n, 2, 3)
    theta[:, 0, 0] = bw / w
    theta[:, 0, 2] = (x0 + x1 + 1).float() / w - 1
    theta[:, 1, 1] = bh / h
    theta[:, 1, 2] = (y0 + y1 + 1).float() / h - 1
    grid = F.affine_grid(theta, [n, 1, *CROP], align_corners=False)
    crop = F.grid_sample(ink[:, None], grid, mode="bilinear", align_corners=False).flatten(1)
    weights = mask.float()
    count = weights.sum((1, 2)).clamp_min(1.0)
    ink_colour = (cells * weights[:, None]).sum((2, 3)) / count[:, None]
    extra = torch.stack([bw / w, bh / h, y0.float() / h, y1.float() / h, empty.float()], 1)
    return torch.cat([crop / 2.0, ink_colour, bg, extra], 1)


def filled_cells(inputs: torch.Tensor) -> torch.Tensor:
    """``[..., 24]`` bool: the cells of normalised ``inputs`` that hold ink."""
    return inputs[..., -1] < 0.5


class CellEncoder(nn.Module):
    """Cells -> features -> (reading logits, language-model input vectors); see the module
    docstring. ``classes``: what a cell can show (``""`` = empty, ``"<colour> <kind>"`` =
    a shape, else a visible word)."""

    def __init__(self, classes: Sequence[str], d_model: int, hidden: tuple[int, int] = (512, 256),
                 modality: bool = False):  # fmt: skip
        super().__init__()
        self.classes = list(classes)
        self.n_cells = GRID[0] * GRID[1]
        in_dim = CROP[0] * CROP[1] + _N_EXTRA
        self.mlp = nn.Sequential(
            nn.Linear(in_dim, hidden[0]), nn.ReLU(), nn.Linear(hidden[0], hidden[1]), nn.ReLU()
        )
        self.head = nn.Linear(hidden[1], len(self.classes))
        self.proj = nn.Linear(hidden[1], d_model)
        self.pos = nn.Parameter(torch.zeros(self.n_cells, d_model))
        self.register_buffer("class_vectors", torch.zeros(len(self.classes), d_model))
        with torch.no_grad():
            self.proj.weight.zero_()
            self.proj.bias.zero_()
        self.glob = nn.Linear(hidden[1], d_model)  # the image vector (from the mean cell feature)
        with torch.no_grad():
            self.glob.weight.zero_()
            self.glob.bias.zero_()
        # only when asked: the other organisms' state dicts (and so their files) stay as they were
        self.register_buffer("modality", torch.zeros(d_model) if modality else None)

    @staticmethod
    def cells(pixels: torch.Tensor) -> torch.Tensor:
        """``[B, 3, 64, 384]`` -> ``[B * 24, 3, 16, 64]`` in reading order."""
        b = pixels.shape[0]
        (rows, cols), (h, w) = GRID, CELL
        x = pixels.reshape(b, 3, rows, h, cols, w).permute(0, 2, 4, 1, 3, 5)
        return x.reshape(b * rows * cols, 3, h, w)

    def inputs(self, pixels: torch.Tensor) -> torch.Tensor:
        """Normalised cell features ``[B, 24, in_dim]`` (parameter-free)."""
        b = pixels.shape[0]
        return normalise_cells(self.cells(pixels)).reshape(b, self.n_cells, -1)

    def features(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.mlp(inputs)

    def embed(self, features: torch.Tensor, filled: torch.Tensor) -> list[torch.Tensor]:
        """Features ``[B, 24, 256]`` and the non-empty cells ``[B, 24]`` -> one run of
        language-model input vectors per image: the image vector, then the filled cells'."""
        reading = torch.softmax(self.head(features), -1) @ self.class_vectors
        cells = reading + self.proj(features) + self.pos
        image = self.glob(features.mean(1))
        if self.modality is not None:
            cells = cells + self.modality
            image = image + self.modality
        return [torch.cat([image[b : b + 1], cells[b][filled[b]]], 0) for b in range(len(cells))]

    def forward(self, pixels: torch.Tensor) -> list[torch.Tensor]:
        inputs = self.inputs(pixels)
        return self.embed(self.features(inputs), filled_cells(inputs))

    def read(self, pixels: torch.Tensor) -> list[list[str]]:
        """What each cell of each image shows, by the reading head."""
        with torch.no_grad():
            idx = self.head(self.features(self.inputs(pixels))).argmax(-1)
        return [[self.classes[int(i)] for i in row] for row in idx]

    def tower(self, images: Sequence[Any]) -> list[torch.Tensor]:
        """The vision tower of :class:`trustlab.lm.VisionLanguageModel`: one ``[24, d_model]``
        run of vectors per image."""
        param = next(self.parameters())
        pixels = to_pixels(images).to(device=param.device, dtype=param.dtype)
        return self(pixels)
