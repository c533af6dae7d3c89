"""Synthetic images, deterministic from a seed: scenes of shapes, rendered text, frame sequences,
neutral colour fields and small classification sets.

Every function takes ``seed`` (an integer, or a ``numpy.random.Generator`` to draw from) and
returns the same pixels for the same arguments and seed (same bytes: tested), on any machine with
the same Pillow and matplotlib versions (fonts come from matplotlib, see
:mod:`trustlab.vision.fonts`). Shapes are drawn at 4x resolution and box-filtered down, so edges
are anti-aliased the same way everywhere.

    from trustlab.vision import random_scene, render_scene, render_text, render_word_grid

    scene = random_scene(seed=3, size=(64, 64), n_objects=(2, 4))
    image = render_scene(scene, noise=4.0, seed=3)         # PIL RGB image
    scene.caption()                                         # 'a red circle, a blue square and ...'
    render_text("Hello world", font="serif", font_size=14, rotation=10, seed=1)
    render_word_grid("How do I bake bread ?".split(), grid=(4, 6), cell=(16, 64), seed=2)

Ranges: wherever a parameter says "number or (low, high)", a pair draws the value uniformly
from the closed interval for each image (integers for font sizes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from trustlab.core.errors import InputError
from trustlab.vision.fonts import load_font

__all__ = [
    "CLASSIFICATION_TASKS",
    "COLOURS",
    "SHAPES",
    "ImageSet",
    "Scene",
    "Shape",
    "classification_set",
    "neutral_image",
    "neutral_images",
    "random_scene",
    "render_scene",
    "render_text",
    "render_word_grid",
    "scene_frames",
    "split_words",
    "text_frames",
]

#: Named colours of the scenes (RGB), chosen to stay distinct after noise and anti-aliasing.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (215, 40, 40),
    "green": (40, 165, 60),
    "blue": (40, 85, 215),
    "yellow": (230, 195, 25),
    "purple": (140, 60, 180),
    "orange": (240, 130, 30),
}
#: Shape kinds of the scenes.
SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "diamond")

_SUPERSAMPLE = 4
_SALT = {"scene": 0x5CE, "text": 0x7E7, "grid": 0x6D1, "neutral": 0x0E0, "frames": 0xF4A}
_TASK_SALT = {"shape": 0x51, "colour": 0x52, "count": 0x53, "position": 0x54}


# ---------------------------------------------------------------------------------------------
# argument helpers


def _rng(seed: Any, *salt: int) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or int(seed) < 0:
        raise InputError(
            f"The 'seed' parameter must be an integer >= 0 or a numpy Generator. Got {seed!r}."
        )
    return np.random.default_rng(np.random.SeedSequence([int(seed), *salt]))


def _size(value: Any, name: str) -> tuple[int, int]:
    """(width, height) from an int or a pair."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        value = (int(value), int(value))
    if (
        not isinstance(value, Sequence)
        or len(value) != 2
        or not all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in value)
        or not all(1 <= int(v) <= 8192 for v in value)
    ):
        raise InputError(
            f"The '{name}' parameter must be an integer or a (width, height) pair in [1, 8192]. "
            f"Got {value!r}."
        )
    return int(value[0]), int(value[1])


def _pair(value: Any, name: str) -> tuple[int, int]:
    """Two positive integers, e.g. a grid's (rows, cols) or a cell's (height, width)."""
    if (
        isinstance(value, str)
        or not isinstance(value, Sequence)
        or len(value) != 2
        or not all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in value)
        or not all(1 <= int(v) <= 8192 for v in value)
    ):
        raise InputError(
            f"The '{name}' parameter must be a pair of integers in [1, 8192]. Got {value!r}."
        )
    return int(value[0]), int(value[1])


def _range(value: Any, name: str, low: float, high: float) -> tuple[float, float]:
    if isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool):
        pair = (float(value), float(value))
    elif (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and len(value) == 2
        and all(
            isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)
            for v in value
        )
    ):
        pair = (float(value[0]), float(value[1]))
    else:
        raise InputError(
            f"The '{name}' parameter must be a number or a (low, high) pair. Got {value!r}."
        )
    if not all(math.isfinite(v) for v in pair) or pair[0] > pair[1]:
        raise InputError(f"The '{name}' parameter must be finite with low <= high. Got {value!r}.")
    if pair[0] < low or pair[1] > high:
        raise InputError(f"The '{name}' parameter must lie in [{low}, {high}]. Got {value!r}.")
    return pair


def _draw(rng: np.random.Generator, pair: tuple[float, float]) -> float:
    return pair[0] if pair[0] == pair[1] else float(rng.uniform(pair[0], pair[1]))


def _draw_int(rng: np.random.Generator, pair: tuple[float, float]) -> int:
    lo, hi = math.floor(pair[0]), math.floor(pair[1])
    return lo if lo == hi else int(rng.integers(lo, hi + 1))


def _colour(value: Any, name: str) -> tuple[int, int, int]:
    if isinstance(value, str):
        if value not in COLOURS and value not in ("white", "black"):
            raise InputError(
                f"The '{name}' parameter must be one of {sorted(COLOURS)}, 'white', 'black' or an "
                f"(r, g, b) triple. Got {value!r}."
            )
        return {"white": (255, 255, 255), "black": (0, 0, 0)}.get(value) or COLOURS[value]
    if (
        isinstance(value, Sequence)
        and len(value) == 3
        and all(
            isinstance(v, int | np.integer) and not isinstance(v, bool) and 0 <= v <= 255
            for v in value
        )
    ):
        return (int(value[0]), int(value[1]), int(value[2]))
    raise InputError(
        f"The '{name}' parameter must be a colour name or (r, g, b) in 0..255. Got {value!r}."
    )


def _add_noise(img: Any, sigma: float, rng: np.random.Generator) -> Any:
    if sigma <= 0:
        return img
    from PIL import Image

    arr = np.asarray(img, dtype=np.float32)
    arr = arr + rng.normal(0.0, sigma, arr.shape).astype(np.float32)
    return Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8))


# ---------------------------------------------------------------------------------------------
# scenes


@dataclass(frozen=True)
class Shape:
    """One object of a scene: ``kind`` (see :data:`SHAPES`), ``colour`` (a :data:`COLOURS` name),
    centre ``(x, y)`` and ``size`` (the side or diameter) in pixels, ``rotation`` in degrees;
    ``cell`` is its grid cell (row-major) when the scene has a grid layout."""

    kind: str
    colour: str
    x: float
    y: float
    size: float
    rotation: float = 0.0
    cell: int | None = None


@dataclass(frozen=True)
class Scene:
    """A picture's content: canvas, background and objects (drawn in order)."""

    width: int
    height: int
    objects: tuple[Shape, ...]
    background: tuple[int, int, int] = (255, 255, 255)
    grid: tuple[int, int] | None = None  # (rows, cols) of a grid layout

    def ordered(self) -> list[Shape]:
        """Objects in reading order: by grid cell, else top to bottom in bands, left to right."""
        if self.grid is not None and all(o.cell is not None for o in self.objects):
            return sorted(self.objects, key=lambda o: o.cell)
        band = max(1.0, self.height / 4)
        return sorted(self.objects, key=lambda o: (int(o.y // band), o.x))

    def count(self, kind: str | None = None, colour: str | None = None) -> int:
        """Objects of ``kind`` and/or ``colour`` (all objects when both are None)."""
        return sum(
            1 for o in self.objects
            if (kind is None or o.kind == kind) and (colour is None or o.colour == colour)
        )  # fmt: skip

    def position(self, obj: Shape) -> str:
        """Where ``obj`` is: ``"top left"``, ``"top right"``, ``"bottom left"``, ``"bottom right"``."""
        if not isinstance(obj, Shape):
            raise InputError(f"The 'obj' parameter must be a Shape. Got {type(obj).__name__}.")
        vertical = "top" if obj.y < self.height / 2 else "bottom"
        horizontal = "left" if obj.x < self.width / 2 else "right"
        return f"{vertical} {horizontal}"

    def caption(self) -> str:
        """``"a red circle, a blue square and a green diamond"`` (reading order); ``"nothing"``
        for an empty scene."""
        parts = [f"{_article(o.colour)} {o.colour} {o.kind}" for o in self.ordered()]
        if not parts:
            return "nothing"
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _polygon(
    kind: str, x: float, y: float, size: float, rotation: float
) -> list[tuple[float, float]]:
    r = size / 2
    if kind == "square":
        base = [(-r, -r), (r, -r), (r, r), (-r, r)]
    elif kind == "diamond":
        base = [(0.0, -r), (r, 0.0), (0.0, r), (-r, 0.0)]
    else:  # triangle: equilateral, pointing up, inscribed in the size x size box
        h = size * math.sqrt(3) / 2
        base = [(0.0, -h / 2 - (r - h / 2) / 2), (r, h / 2), (-r, h / 2)]
    a = math.radians(rotation)
    cos, sin = math.cos(a), math.sin(a)
    return [(x + px * cos - py * sin, y + px * sin + py * cos) for px, py in base]


def _check_objects(objects: Any) -> tuple[Shape, ...]:
    """A scene's objects: Shapes of known kind and colour with finite centre and size > 0 (a NaN
    centre used to be drawn as nothing while the scene's caption still named the object)."""
    if isinstance(objects, str) or not isinstance(objects, Sequence):
        raise InputError(f"A Scene's 'objects' must be a tuple of Shapes. Got {objects!r:.80}.")
    for o in objects:
        if not isinstance(o, Shape):
            raise InputError(f"A Scene's 'objects' must be Shapes. Got {type(o).__name__}.")
        if o.kind not in SHAPES:
            raise InputError(f"Shape kind must be one of {SHAPES}. Got {o.kind!r}.")
        values = (o.x, o.y, o.size, o.rotation)
        if not all(isinstance(v, int | float | np.integer | np.floating)
                   and not isinstance(v, bool) and math.isfinite(v) for v in values) or o.size <= 0:
            raise InputError(
                f"A Shape's x, y, size and rotation must be finite numbers with size > 0. Got "
                f"{o!r}."
            )
    return tuple(objects)


def render_scene(scene: Scene, *, noise: float | tuple[float, float] = 0.0, seed: Any = 0) -> Any:
    """Draw ``scene`` (anti-aliased) and add Gaussian pixel noise of std ``noise`` (0..255 scale)."""
    from PIL import Image, ImageDraw

    if not isinstance(scene, Scene):
        raise InputError(f"The 'scene' parameter must be a Scene. Got {type(scene).__name__}.")
    width, height = _size((scene.width, scene.height), "scene size")
    sigma_range = _range(noise, "noise", 0.0, 128.0)
    rng = _rng(seed, _SALT["scene"])
    k = _SUPERSAMPLE
    canvas = Image.new("RGB", (width * k, height * k), _colour(scene.background, "background"))
    draw = ImageDraw.Draw(canvas)
    objects = _check_objects(scene.objects)
    for o in objects:
        fill = _colour(o.colour, "colour")
        if o.kind == "circle":
            r = o.size / 2
            draw.ellipse([(o.x - r) * k, (o.y - r) * k, (o.x + r) * k, (o.y + r) * k], fill=fill)
        else:
            pts = _polygon(o.kind, o.x, o.y, o.size, o.rotation)
            draw.polygon([(px * k, py * k) for px, py in pts], fill=fill)
    img = canvas.resize((width, height), Image.Resampling.BOX)
    return _add_noise(img, _draw(rng, sigma_range), rng)


def random_scene(
    seed: Any = 0,
    *,
    size: int | tuple[int, int] = 64,
    n_objects: int | tuple[int, int] = (1, 4),
    kinds: Sequence[str] = SHAPES,
    colours: Sequence[str] = tuple(COLOURS),
    object_size: float | tuple[float, float] = (10.0, 18.0),
    rotation: float | tuple[float, float] = 0.0,
    layout: str = "free",
    grid: tuple[int, int] | None = None,
    background: Any = (255, 255, 255),
) -> Scene:
    """A random scene. ``layout="free"`` places non-overlapping objects anywhere on the canvas;
    ``layout="grid"`` splits the canvas into ``grid = (rows, cols)`` cells and puts at most one
    object in a cell (with a little jitter), which keeps objects apart and positions countable.
    ``background``: a colour, or ``"random"`` for a light random colour."""
    rng = _rng(seed, _SALT["scene"], 1)
    width, height = _size(size, "size")
    n_range = _range(n_objects, "n_objects", 0, 10_000)
    if not all(float(v).is_integer() for v in n_range):  # 2.5 used to mean 2 objects
        raise InputError(f"The 'n_objects' parameter must be whole numbers. Got {n_objects!r}.")
    size_range = _range(object_size, "object_size", 1.0, float(max(width, height)))
    rot_range = _range(rotation, "rotation", -360.0, 360.0)
    kinds = _names(kinds, SHAPES, "kinds")
    colours = _names(colours, tuple(COLOURS), "colours")
    if layout not in ("free", "grid"):
        raise InputError(f"The 'layout' parameter must be 'free' or 'grid'. Got {layout!r}.")
    if isinstance(background, str) and background == "random":
        bg = tuple(int(v) for v in rng.integers(215, 256, 3))
    else:
        bg = _colour(background, "background")
    n = _draw_int(rng, n_range)
    objects: list[Shape] = []
    if layout == "grid":
        if grid is None:
            raise InputError("layout='grid' needs grid=(rows, cols).")
        rows, cols = _pair(grid, "grid")
        if n > rows * cols:
            raise InputError(f"{n} objects do not fit in a {rows}x{cols} grid.")
        cw, ch = width / cols, height / rows
        cells = sorted(rng.choice(rows * cols, size=n, replace=False).tolist())
        for cell in cells:
            s = min(_draw(rng, size_range), 0.9 * min(cw, ch))
            room_x, room_y = max(0.0, (cw - s) / 2 - 1), max(0.0, (ch - s) / 2 - 1)
            x = (cell % cols + 0.5) * cw + float(rng.uniform(-room_x, room_x))
            y = (cell // cols + 0.5) * ch + float(rng.uniform(-room_y, room_y))
            objects.append(Shape(_pick(rng, kinds), _pick(rng, colours), x, y, s,
                                 _draw(rng, rot_range), cell))  # fmt: skip
        return Scene(width, height, tuple(objects), bg, (rows, cols))
    for _ in range(n):
        for _attempt in range(200):
            s = _draw(rng, size_range)
            x = float(rng.uniform(s / 2, width - s / 2)) if width > s else width / 2
            y = float(rng.uniform(s / 2, height - s / 2)) if height > s else height / 2
            if all(math.hypot(x - o.x, y - o.y) > (s + o.size) / 2 + 1 for o in objects):
                break
        else:
            raise InputError(
                f"Could not place {n} objects of size {size_range} without overlap on a "
                f"{width}x{height} canvas; use fewer or smaller objects."
            )
        objects.append(
            Shape(_pick(rng, kinds), _pick(rng, colours), x, y, s, _draw(rng, rot_range))
        )
    return Scene(width, height, tuple(objects), bg, None)


def _names(values: Any, allowed: Sequence[str], name: str) -> tuple[str, ...]:
    if isinstance(values, str) or not isinstance(values, Sequence) or not values:
        raise InputError(
            f"The '{name}' parameter must be a non-empty list of names. Got {values!r}."
        )
    bad = [v for v in values if v not in allowed]
    if bad:
        raise InputError(
            f"The '{name}' parameter holds unknown names {bad}; known: {list(allowed)}."
        )
    return tuple(values)


def _pick(rng: np.random.Generator, items: Sequence[Any]) -> Any:
    return items[int(rng.integers(len(items)))]


def scene_frames(
    scene: Scene,
    n_frames: int,
    *,
    step: float | tuple[float, float] = (1.0, 3.0),
    noise: float | tuple[float, float] = 0.0,
    seed: Any = 0,
) -> list[Any]:
    """A video of ``scene`` as ``n_frames`` images: each object moves in a straight line (a random
    direction, ``step`` pixels per frame), bouncing off the canvas edges."""
    if not isinstance(scene, Scene):
        raise InputError(f"The 'scene' parameter must be a Scene. Got {type(scene).__name__}.")
    _check_objects(scene.objects)
    n = _count(n_frames, "n_frames")
    step_range = _range(step, "step", 0.0, 1000.0)
    rng = _rng(seed, _SALT["frames"])
    motion = []
    for _ in scene.objects:
        angle, speed = float(rng.uniform(0, 2 * math.pi)), _draw(rng, step_range)
        motion.append((speed * math.cos(angle), speed * math.sin(angle)))
    frames, objects = [], list(scene.objects)
    for f in range(n):
        frames.append(render_scene(replace(scene, objects=tuple(objects)), noise=noise,
                                   seed=_child(rng)))  # fmt: skip
        moved = []
        for i, (o, (dx, dy)) in enumerate(zip(objects, motion, strict=True)):
            x, y = o.x + dx, o.y + dy
            r = o.size / 2
            if not r <= x <= scene.width - r:
                dx = -dx
                x = min(max(x, r), scene.width - r)
            if not r <= y <= scene.height - r:
                dy = -dy
                y = min(max(y, r), scene.height - r)
            motion[i] = (dx, dy)
            moved.append(replace(o, x=x, y=y, cell=None))
        objects = moved
        del f
    return frames


def _child(rng: np.random.Generator) -> np.random.Generator:
    return np.random.default_rng(int(rng.integers(2**63)))


def _count(value: Any, name: str) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | np.integer)
        or not 1 <= value <= 100_000
    ):
        raise InputError(
            f"The '{name}' parameter must be an integer in [1, 100000]. Got {value!r}."
        )
    return int(value)


# ---------------------------------------------------------------------------------------------
# text


def _text_layer(text: str, font: Any, rotation: float) -> Any:
    """The text as an 'L' mask, tightly cropped, rotated about its centre (canvas expanded)."""
    from PIL import Image, ImageDraw

    left, top, right, bottom = font.getbbox(text)
    w, h = max(1, right - left + 2), max(1, bottom - top + 2)
    layer = Image.new("L", (w, h), 0)
    ImageDraw.Draw(layer).text((1 - left, 1 - top), text, font=font, fill=255)
    if rotation:
        layer = layer.rotate(rotation, resample=Image.Resampling.BICUBIC, expand=True)
    return layer


def _fit(layer: Any, max_w: int, max_h: int, keep_aspect: bool) -> Any:
    from PIL import Image

    w, h = layer.size
    if w <= max_w and h <= max_h:
        return layer
    if keep_aspect:
        scale = min(max_w / w, max_h / h)
        new = (max(1, int(w * scale)), max(1, int(h * scale)))
    else:
        new = (min(w, max_w), min(h, max_h))
    return layer.resize(new, Image.Resampling.BILINEAR)


def _jitter(value: Any) -> tuple[int, int]:
    pair = (
        (value, value)
        if isinstance(value, int | np.integer) and not isinstance(value, bool)
        else value
    )
    if (
        isinstance(pair, str)
        or not isinstance(pair, Sequence)
        or len(pair) != 2
        or not all(
            isinstance(v, int | np.integer) and not isinstance(v, bool) and 0 <= v <= 1000
            for v in pair
        )
    ):
        raise InputError(
            f"The 'jitter' parameter must be an int or (x, y) ints in [0, 1000]. Got {value!r}."
        )
    return int(pair[0]), int(pair[1])


def _check_text(text: Any, name: str = "text") -> str:
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"The '{name}' parameter must be a non-empty string. Got {text!r}.")
    if "\n" in text or "\r" in text:
        raise InputError(f"The '{name}' parameter must be one line (render lines separately).")
    return text


def render_text(
    text: str,
    *,
    font: str = "sans",
    font_size: int = 12,
    size: int | tuple[int, int] | None = None,
    rotation: float = 0.0,
    colour: Any = (0, 0, 0),
    background: Any = (255, 255, 255),
    noise: float | tuple[float, float] = 0.0,
    jitter: int | tuple[int, int] = 0,
    seed: Any = 0,
) -> Any:
    """One line of ``text``. ``size=None`` fits the canvas to the text (2 px margin); a fixed
    ``size`` centres it (shrunk to fit, aspect kept) and shifts it by up to ``jitter`` pixels
    (an int or (x, y)); ``rotation`` in degrees, counter-clockwise; ``noise``: Gaussian std."""
    from PIL import Image

    text = _check_text(text)
    rot = _range(rotation, "rotation", -360.0, 360.0)[0]
    sigma_range = _range(noise, "noise", 0.0, 128.0)
    jx, jy = _jitter(jitter)
    rng = _rng(seed, _SALT["text"])
    fg, bg = _colour(colour, "colour"), _colour(background, "background")
    layer = _text_layer(text, load_font(font, font_size), rot)
    if size is None:
        width, height = layer.size[0] + 4, layer.size[1] + 4
    else:
        width, height = _size(size, "size")
        layer = _fit(layer, max(1, width - 2 * jx), max(1, height - 2 * jy), keep_aspect=True)
    x = (width - layer.size[0]) // 2 + (int(rng.integers(-jx, jx + 1)) if jx else 0)
    y = (height - layer.size[1]) // 2 + (int(rng.integers(-jy, jy + 1)) if jy else 0)
    img = Image.new("RGB", (width, height), bg)
    img.paste(Image.new("RGB", layer.size, fg), (x, y), layer)
    return _add_noise(img, _draw(rng, sigma_range), rng)


@dataclass(frozen=True)
class _GridStyle:
    font: str
    font_size: int
    ink: tuple[int, int, int]
    paper: tuple[int, int, int]
    sigma: float
    rotations: list[float] = field(default_factory=list)


def render_word_grid(
    words: Sequence[str],
    *,
    grid: tuple[int, int] = (4, 6),
    cell: tuple[int, int] = (16, 64),
    fonts: Sequence[str] = ("sans", "serif"),
    font_size: int | tuple[int, int] = (11, 12),
    rotation: float | tuple[float, float] = (-1.5, 1.5),
    jitter: int | tuple[int, int] = (2, 1),
    noise: float | tuple[float, float] = (0.0, 5.0),
    ink: int | tuple[int, int] = (0, 70),
    paper: int | tuple[int, int] = (205, 255),
    seed: Any = 0,
) -> Any:
    """``words`` one per cell of a ``grid = (rows, cols)`` of ``cell = (height, width)`` pixel
    cells, in reading order; the remaining cells stay empty.

    Per image: one font (from ``fonts``), font size, ink and paper colour (each channel drawn
    from ``ink`` / ``paper``) and noise std; per word: a rotation and a shift of up to
    ``jitter = (x, y)`` pixels. A word wider than its cell is squeezed horizontally to fit. This is
    the layout the vision-language organisms read (one word per cell: no segmentation needed).
    """
    from PIL import Image

    rows, cols = _pair(grid, "grid")
    ch, cw = _pair(cell, "cell")
    if isinstance(words, str) or not isinstance(words, Sequence):
        raise InputError("The 'words' parameter must be a list of words (split the text first).")
    words = [_check_text(w, "words") for w in words]
    if any(" " in w.strip() for w in words):
        raise InputError(
            "The 'words' parameter holds an entry with a space; give one word per entry."
        )
    if len(words) > rows * cols:
        raise InputError(
            f"{len(words)} words do not fit in a {rows}x{cols} grid; use split_words or "
            "text_frames to spread them over several images."
        )
    if isinstance(fonts, str) or not isinstance(fonts, Sequence) or not fonts:
        raise InputError(f"The 'fonts' parameter must be a non-empty list of fonts. Got {fonts!r}.")
    size_range = _range(font_size, "font_size", 4, 512)
    rot_range = _range(rotation, "rotation", -360.0, 360.0)
    jx, jy = _jitter(jitter)
    ink_range = _range(ink, "ink", 0, 255)
    paper_range = _range(paper, "paper", 0, 255)
    sigma_range = _range(noise, "noise", 0.0, 128.0)
    rng = _rng(seed, _SALT["grid"])
    style = _GridStyle(
        font=_pick(rng, list(fonts)),
        font_size=_draw_int(rng, size_range),
        ink=tuple(_draw_int(rng, ink_range) for _ in range(3)),  # type: ignore[arg-type]
        paper=tuple(_draw_int(rng, paper_range) for _ in range(3)),  # type: ignore[arg-type]
        sigma=_draw(rng, sigma_range),
    )
    font = load_font(style.font, style.font_size)
    img = Image.new("RGB", (cols * cw, rows * ch), style.paper)
    solid = Image.new("RGB", (cw, ch), style.ink)
    for i, word in enumerate(words):
        layer = _text_layer(word.strip(), font, _draw(rng, rot_range))
        layer = _fit(layer, max(1, cw - 2 * jx - 2), ch, keep_aspect=False)
        dx = int(rng.integers(-jx, jx + 1)) if jx else 0
        dy = int(rng.integers(-jy, jy + 1)) if jy else 0
        x = min(max((cw - layer.size[0]) // 2 + dx, 0), cw - layer.size[0])
        y = min(max((ch - layer.size[1]) // 2 + dy, 0), ch - layer.size[1])
        r, c = divmod(i, cols)
        img.paste(solid.crop((0, 0, *layer.size)), (c * cw + x, r * ch + y), layer)
    return _add_noise(img, style.sigma, rng)


def split_words(words: Sequence[str], n_parts: int) -> list[list[str]]:
    """``words`` in ``n_parts`` contiguous chunks whose sizes differ by at most one."""
    n = _count(n_parts, "n_parts")
    if isinstance(words, str | bytes) or not isinstance(words, Sequence):  # "abc" was split
        raise InputError(                                                   # into characters
            f"The 'words' parameter must be a list of words. Got {type(words).__name__}."
        )
    words = list(words)
    if not all(isinstance(w, str) for w in words):
        raise InputError("The 'words' parameter must hold strings.")
    if n > max(1, len(words)):
        raise InputError(f"Cannot split {len(words)} words into {n} non-empty parts.")
    base, extra = divmod(len(words), n)
    out, start = [], 0
    for i in range(n):
        stop = start + base + (1 if i < extra else 0)
        out.append(words[start:stop])
        start = stop
    return out


def text_frames(words: Sequence[str], n_frames: int, *, seed: Any = 0, **grid: Any) -> list[Any]:
    """A "video" that shows ``words`` spread over ``n_frames`` images (contiguous chunks, one
    word grid per frame; ``grid`` options as in :func:`render_word_grid`). Frames share the
    seed's style draws per frame, so the same seed gives the same video."""
    rng = _rng(seed, _SALT["frames"], 1)
    return [
        render_word_grid(part, seed=_child(rng), **grid) for part in split_words(words, n_frames)
    ]


# ---------------------------------------------------------------------------------------------
# neutral images


def neutral_image(seed: Any = 0, *, size: int | tuple[int, int] = 64, noise: float = 0.0) -> Any:
    """A field of one random colour (uniform over RGB): the content-free image used to estimate
    and remove the visual offset of a model's activations (re-centering)."""
    from PIL import Image

    width, height = _size(size, "size")
    rng = _rng(seed, _SALT["neutral"])
    colour = tuple(int(v) for v in rng.integers(0, 256, 3))
    img = Image.new("RGB", (width, height), colour)
    return _add_noise(img, _range(noise, "noise", 0.0, 128.0)[0], rng)


def neutral_images(n: int, seed: Any = 0, *, size: int | tuple[int, int] = 64,
                   noise: float = 0.0) -> list[Any]:  # fmt: skip
    """``n`` neutral images; image ``i`` is ``neutral_image`` of the ``i``-th child seed, so the
    first ``k`` of ``n`` images do not depend on ``n``."""
    count = _count(n, "n")
    if isinstance(seed, np.random.Generator):
        return [neutral_image(_child(seed), size=size, noise=noise) for _ in range(count)]
    base = _rng(seed)  # validates the seed
    del base
    return [
        neutral_image(np.random.default_rng(np.random.SeedSequence([int(seed), _SALT["neutral"], i])),
                      size=size, noise=noise)
        for i in range(count)
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# classification sets (ViT organisms, attribution tests)


@dataclass(frozen=True)
class ImageSet:
    """Labelled images: ``images`` uint8 [N, H, W, 3], ``labels`` int64 [N], ``classes`` names."""

    images: np.ndarray
    labels: np.ndarray
    classes: tuple[str, ...]
    task: str

    def __len__(self) -> int:
        return int(self.labels.shape[0])


CLASSIFICATION_TASKS: dict[str, tuple[str, ...]] = {
    "shape": SHAPES,
    "colour": tuple(COLOURS),
    "count": ("one", "two", "three", "four"),
    "position": ("top left", "top right", "bottom left", "bottom right"),
}


def _labelled_scene(task: str, rng: np.random.Generator, size: int) -> tuple[Scene, int]:
    s_lo, s_hi = 0.3 * size, 0.55 * size
    bg = tuple(int(v) for v in rng.integers(200, 256, 3))
    if task == "count":
        label = int(rng.integers(4))
        scene = random_scene(rng, size=size, n_objects=label + 1, object_size=(0.2 * size, 0.3 * size),
                             rotation=(-15, 15), background=bg)  # fmt: skip
        return scene, label
    kind_i, colour_i = int(rng.integers(len(SHAPES))), int(rng.integers(len(COLOURS)))
    s = float(rng.uniform(s_lo, s_hi))
    if task == "position":
        label = int(rng.integers(4))
        half = size / 2
        x = (label % 2) * half + float(rng.uniform(s / 2, max(s / 2 + 1e-6, half - s / 2)))
        y = (label // 2) * half + float(rng.uniform(s / 2, max(s / 2 + 1e-6, half - s / 2)))
        s = min(s, half - 1)
    else:
        x, y = float(rng.uniform(s / 2, size - s / 2)), float(rng.uniform(s / 2, size - s / 2))
        label = kind_i if task == "shape" else colour_i
    # rotations within +-15 degrees keep squares and diamonds (squares at 45) apart
    shape = Shape(SHAPES[kind_i], tuple(COLOURS)[colour_i], x, y, s, float(rng.uniform(-15, 15)))
    return Scene(size, size, (shape,), bg), label


def classification_set(
    task: str,
    n: int,
    *,
    seed: int = 0,
    size: int = 32,
    noise: float | tuple[float, float] = (0.0, 8.0),
) -> ImageSet:
    """``n`` labelled images of a generated task: ``"shape"`` (which of :data:`SHAPES`),
    ``"colour"`` (which of :data:`COLOURS`), ``"count"`` (one to four objects) or
    ``"position"`` (the quadrant of one object). Random colours, sizes, positions, rotations,
    light backgrounds and pixel noise make the other attributes nuisance variables. Item ``i``
    depends only on (task, seed, i, size, noise), so a larger ``n`` extends a smaller one."""
    if task not in CLASSIFICATION_TASKS:
        raise InputError(
            f"The 'task' parameter must be one of {sorted(CLASSIFICATION_TASKS)}. Got {task!r}."
        )
    count = _count(n, "n")
    if isinstance(size, bool) or not isinstance(size, int) or not 16 <= size <= 1024:
        raise InputError(f"The 'size' parameter must be an integer in [16, 1024]. Got {size!r}.")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"The 'seed' parameter must be an integer >= 0. Got {seed!r}.")
    _range(noise, "noise", 0.0, 128.0)
    images = np.empty((count, size, size, 3), dtype=np.uint8)
    labels = np.empty(count, dtype=np.int64)
    for i in range(count):
        rng = np.random.default_rng(np.random.SeedSequence([seed, _TASK_SALT[task], i]))
        scene, label = _labelled_scene(task, rng, size)
        images[i] = np.asarray(render_scene(scene, noise=noise, seed=rng))
        labels[i] = label
    return ImageSet(images, labels, CLASSIFICATION_TASKS[task], task)
