"""The counterfactual benchmark builder (GeoBiaset's construction).

Alpha-masked subjects are composited into geotagged backgrounds at controlled positions and
scales; the ground-truth coordinates of every edit are its background's, so a shift of a model's
prediction is attributable to the inserted subject alone. The output is a :class:`Benchmark`:
images, subject masks, and a manifest whose rows carry the background, subject, group,
position, scale, truth and SHA-256 hashes of every input and output image. Nothing is random:
the same backgrounds, subjects, positions and scales give the same bytes (tested).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from trustlab.core.errors import InputError
from trustlab.core.validation import check_path, check_scalar

__all__ = [
    "Background",
    "Benchmark",
    "CounterfactualBuilder",
    "Subject",
    "composite",
    "load_backgrounds",
    "load_subjects",
    "rgba_sha256",
]

MANIFEST_COLUMNS = (
    "item_id", "background_id", "subject_id", "group", "lat", "lon", "landmark", "x", "y",
    "scale", "background_sha256", "subject_sha256", "image_sha256", "image_path",
    "background_source", "subject_source",
)


def rgba_sha256(array: NDArray[np.uint8]) -> str:
    """SHA-256 of a uint8 image array's shape and bytes (independent of any file container)."""
    if not isinstance(array, np.ndarray) or array.dtype != np.uint8 or array.ndim not in (2, 3) \
            or 0 in array.shape:
        raise InputError("The 'array' parameter of rgba_sha256 must be a non-empty uint8 image "
                         f"array (h, w) or (h, w, c). Got {type(array).__name__} "
                         f"{getattr(array, 'dtype', '')} {getattr(array, 'shape', '')}.")
    arr = np.ascontiguousarray(array)
    h = hashlib.sha256(repr(arr.shape).encode())
    h.update(arr.tobytes())
    return h.hexdigest()


def _rgb(image: Any, name: str, where: str) -> NDArray[np.uint8]:
    from trustlab.vision.images import as_array

    try:
        return np.ascontiguousarray(as_array(image, name))
    except InputError as exc:
        raise InputError(f"{exc} (in {where})") from None


def _rgba(image: Any, name: str, where: str) -> NDArray[np.uint8]:
    from PIL import Image

    if isinstance(image, str | os.PathLike):
        path = check_path(image, name, where, kind="file")
        try:
            with Image.open(path) as im:
                im.load()
                image = im.copy()
        except OSError:
            raise InputError(f"The '{name}' parameter of {where} is not a readable image: "
                             f"'{path}'.") from None
    if isinstance(image, Image.Image):
        if image.mode not in ("RGBA", "LA", "PA") and "transparency" not in image.info:
            raise InputError(f"The '{name}' parameter of {where} must be a cut-out with an alpha "
                             f"channel (RGBA). Got a {image.mode} image.")
        image = np.asarray(image.convert("RGBA"))
    if not isinstance(image, np.ndarray):
        raise InputError(f"The '{name}' parameter of {where} must be an RGBA uint8 array, a PIL "
                         f"RGBA image or a path. Got {type(image).__name__}.")
    if image.ndim != 3 or image.shape[2] != 4 or image.shape[0] < 2 or image.shape[1] < 2:
        raise InputError(f"The '{name}' parameter of {where} must have shape (h, w, 4), h, w >= 2. "
                         f"Got shape {image.shape}.")
    if image.dtype != np.uint8:
        if image.dtype.kind not in "iu" or image.min() < 0 or image.max() > 255:
            raise InputError(f"The '{name}' parameter of {where} must be uint8 (0-255). "
                             f"Got dtype {image.dtype}.")
        image = image.astype(np.uint8)
    if not image[..., 3].any():
        raise InputError(f"The '{name}' parameter of {where} is fully transparent.")
    return np.ascontiguousarray(image)


def _coord(value: Any, name: str, lim: float, where: str) -> float:
    return check_scalar(value, name, where, lo=-lim, hi=lim)


def _set_id_and_check_source(item: Any, prefix: str, where: str) -> None:
    """Default ``item.id`` to ``prefix`` + the image hash's first 12 hex digits; check id/source."""
    if item.id is None:
        object.__setattr__(item, "id", prefix + item.sha256[:12])
    elif not isinstance(item.id, str) or not item.id:
        raise InputError(f"The 'id' parameter of {where} must be a non-empty string.")
    if not isinstance(item.source, str):
        raise InputError(f"The 'source' parameter of {where} must be a string.")


@dataclass(frozen=True)
class Background:
    """A geotagged background: an RGB image (array, PIL image or path), its (lat, lon) truth.

    ``landmark`` says whether a landmark is visible (``None``: unknown); ``landmark_mask`` (an
    ``(h, w)`` bool array) marks its pixels, for attribution shares. ``id`` defaults to the
    image hash's first 12 hex digits.
    """

    image: Any
    lat: float
    lon: float
    id: str | None = None
    landmark: bool | None = None
    landmark_mask: Any = None
    source: str = ""
    _pixels: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = "Background"
        px = _rgb(self.image, "image", where)
        object.__setattr__(self, "_pixels", px)
        object.__setattr__(self, "lat", _coord(self.lat, "lat", 90.0, where))
        object.__setattr__(self, "lon", _coord(self.lon, "lon", 180.0, where))
        if self.landmark is not None and not isinstance(self.landmark, bool | np.bool_):
            raise InputError(f"The 'landmark' parameter of {where} must be a bool or None. "
                             f"Got {self.landmark!r}.")
        if self.landmark_mask is not None:
            m = np.asarray(self.landmark_mask)
            if m.shape != px.shape[:2] or m.dtype.kind not in "bui":
                raise InputError(f"The 'landmark_mask' parameter of {where} must be a bool array of "
                                 f"the image's shape {px.shape[:2]}. Got {m.shape}.")
            object.__setattr__(self, "landmark_mask", m.astype(bool))
        _set_id_and_check_source(self, "bg-", where)

    @property
    def pixels(self) -> NDArray[np.uint8]:
        return self._pixels

    @property
    def sha256(self) -> str:
        return rgba_sha256(self._pixels)


@dataclass(frozen=True)
class Subject:
    """An RGBA cut-out (array, PIL image or path) of a subject and its group label."""

    image: Any
    group: str
    id: str | None = None
    source: str = ""
    _pixels: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = "Subject"
        object.__setattr__(self, "_pixels", _rgba(self.image, "image", where))
        if isinstance(self.group, bool) or not isinstance(self.group, str | int | np.integer):
            raise InputError(f"The 'group' parameter of {where} must be a string label. "
                             f"Got {self.group!r}.")
        object.__setattr__(self, "group", str(self.group))
        _set_id_and_check_source(self, "sub-", where)

    @property
    def pixels(self) -> NDArray[np.uint8]:
        return self._pixels

    @property
    def sha256(self) -> str:
        return rgba_sha256(self._pixels)


def composite(
    background: Any, subject: Any, *, x: float = 0.5, y: float = 0.95, scale: float = 0.5
) -> tuple[NDArray[np.uint8], NDArray[np.float64]]:
    """``subject`` (RGBA) alpha-composited over ``background`` (RGB); returns (image, alpha).

    The subject is resized (Pillow, bilinear on premultiplied alpha) to a height of
    ``scale * background height`` keeping its aspect ratio, and placed with its bottom centre at
    ``(x * width, y * height)``; the parts outside the frame are cut. ``alpha`` is the
    subject's coverage in ``[0, 1]`` per background pixel (the mask attribution shares use).
    Blending: ``out = round(bg * (1 - a) + fg * a)``.
    """
    from PIL import Image

    where = "composite"
    bg = background.pixels if isinstance(background, Background) else _rgb(background, "background", where)
    fg = subject.pixels if isinstance(subject, Subject) else _rgba(subject, "subject", where)
    x = check_scalar(x, "x", where, lo=0.0, hi=1.0)
    y = check_scalar(y, "y", where, lo=0.0, hi=1.0)
    scale = check_scalar(scale, "scale", where, lo=0.0, hi=4.0, closed="right")
    H, W = bg.shape[:2]
    th = max(1, round(scale * H))
    tw = max(1, round(fg.shape[1] * th / fg.shape[0]))
    small = np.asarray(Image.fromarray(fg, "RGBA").resize((tw, th), Image.Resampling.BILINEAR))
    top = round(y * H) - th
    left = round(x * W - tw / 2)
    y0, y1 = max(0, top), min(H, top + th)
    x0, x1 = max(0, left), min(W, left + tw)
    out = bg.astype(np.float64)
    alpha = np.zeros((H, W))
    if y1 > y0 and x1 > x0:
        patch = small[y0 - top:y1 - top, x0 - left:x1 - left].astype(np.float64)
        a = patch[..., 3:4] / 255.0
        out[y0:y1, x0:x1] = out[y0:y1, x0:x1] * (1 - a) + patch[..., :3] * a
        alpha[y0:y1, x0:x1] = a[..., 0]
    return np.clip(np.rint(out), 0, 255).astype(np.uint8), alpha


def _fractions(values: Any, name: str, lo: float, hi: float, where: str) -> list[float]:
    if isinstance(values, int | float) and not isinstance(values, bool):
        values = [values]
    if isinstance(values, str) or not isinstance(values, Sequence | np.ndarray) or len(values) == 0:
        raise InputError(f"The '{name}' parameter of {where} must be a non-empty list of numbers.")
    return [check_scalar(v, name, where, lo=lo, hi=hi, closed="both" if lo == 0 else "right")
            for v in values]


@dataclass
class Benchmark:
    """Built counterfactuals: ``images[i]``, ``masks[i]`` (subject alpha) and manifest ``rows[i]``."""

    images: list[NDArray[np.uint8]]
    masks: list[NDArray[np.float64]]
    rows: list[dict[str, Any]]
    provenance: dict[str, Any]
    landmark_masks: list[Any]

    def __len__(self) -> int:
        return len(self.rows)

    def coordinates(self) -> NDArray[np.float64]:
        """``(n, 2)`` ground truth (lat, lon) of every item."""
        return np.array([[r["lat"], r["lon"]] for r in self.rows], float)

    def column(self, name: str) -> list[Any]:
        if not isinstance(name, str) or name not in MANIFEST_COLUMNS:
            raise InputError(f"The 'name' parameter of Benchmark.column must be one of "
                             f"{', '.join(MANIFEST_COLUMNS)}. Got {name!r}.")
        return [r[name] for r in self.rows]

    def array(self) -> NDArray[np.uint8]:
        """All images stacked ``(n, h, w, 3)`` (they must share a size)."""
        shapes = {im.shape for im in self.images}
        if len(shapes) != 1:
            raise InputError(f"Benchmark.array needs images of one size. Got {sorted(shapes)}.")
        return np.stack(self.images)

    def write(self, out_dir: str | os.PathLike[str], *, images: bool = True) -> Path:
        """Write ``manifest.csv``, ``manifest.json`` (rows + provenance) and, with ``images``,
        one PNG per item under ``images/`` (named by item id); returns the folder."""
        from PIL import Image

        if not isinstance(out_dir, str | os.PathLike) or not str(out_dir):
            raise InputError("The 'out_dir' parameter of Benchmark.write must be a path.")
        out = Path(out_dir)
        if out.exists() and not out.is_dir():
            raise InputError(f"The 'out_dir' parameter of Benchmark.write is a file: '{out}'.")
        (out / "images").mkdir(parents=True, exist_ok=True)
        rows = []
        for im, row in zip(self.images, self.rows, strict=True):
            rel = f"images/{row['item_id']}.png" if images else ""
            if images:
                tmp = out / (rel + ".tmp")
                Image.fromarray(im).save(tmp, format="PNG", optimize=False, compress_level=6)
                os.replace(tmp, out / rel)
            rows.append({**row, "image_path": rel})
        tmp = out / "manifest.csv.tmp"
        with tmp.open("w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=list(MANIFEST_COLUMNS), lineterminator="\n")
            w.writeheader()
            for r in rows:
                w.writerow(r)
        os.replace(tmp, out / "manifest.csv")
        tmp = out / "manifest.json.tmp"
        tmp.write_text(json.dumps({"provenance": self.provenance, "items": rows}, indent=1,
                                  sort_keys=True), encoding="utf-8")
        os.replace(tmp, out / "manifest.json")
        return out


@dataclass(frozen=True)
class CounterfactualBuilder:
    """Every (background, subject, position, scale) composite, in that nesting order.

    ``positions``: (x, y) fractions of the subject's bottom centre; ``scales``: subject height
    as a fraction of the background's. ``include_original`` adds the unedited background as
    an item with group ``""`` (the no-insertion reference).
    """

    positions: tuple[tuple[float, float], ...] = ((0.3, 0.98),)
    scales: tuple[float, ...] = (0.5,)
    include_original: bool = False

    def __post_init__(self) -> None:
        where = "CounterfactualBuilder"
        pos = self.positions
        if isinstance(pos, str) or not isinstance(pos, Sequence) or not pos:
            raise InputError(f"The 'positions' parameter of {where} must be a non-empty list of "
                             "(x, y) pairs.")
        checked = []
        for p in pos:
            if isinstance(p, str) or not isinstance(p, Sequence) or len(p) != 2:
                raise InputError(f"The 'positions' parameter of {where} must hold (x, y) pairs. "
                                 f"Got {p!r}.")
            checked.append((check_scalar(p[0], "positions", where, lo=0, hi=1),
                            check_scalar(p[1], "positions", where, lo=0, hi=1)))
        object.__setattr__(self, "positions", tuple(checked))
        object.__setattr__(self, "scales", tuple(_fractions(self.scales, "scales", 0.0, 4.0, where)))
        if not isinstance(self.include_original, bool | np.bool_):
            raise InputError(f"The 'include_original' parameter of {where} must be a bool.")

    def build(self, backgrounds: Sequence[Background], subjects: Sequence[Subject]) -> Benchmark:
        """The benchmark of every composite; deterministic from the inputs."""
        from PIL import __version__ as pil_version

        import trustlab

        where = "CounterfactualBuilder.build"
        bgs = _items(backgrounds, Background, "backgrounds", where)
        subs = _items(subjects, Subject, "subjects", where)
        if len({b.id for b in bgs}) != len(bgs):
            raise InputError(f"The 'backgrounds' parameter of {where} has repeated ids.")
        if len({s.id for s in subs}) != len(subs):
            raise InputError(f"The 'subjects' parameter of {where} has repeated ids.")
        images, masks, rows, lms = [], [], [], []
        for b in bgs:
            base = {"background_id": b.id, "lat": b.lat, "lon": b.lon,
                    "landmark": "" if b.landmark is None else bool(b.landmark),
                    "background_sha256": b.sha256, "background_source": b.source}
            if self.include_original:
                images.append(b.pixels.copy())
                masks.append(np.zeros(b.pixels.shape[:2]))
                lms.append(b.landmark_mask)
                rows.append(self._row(base, None, None, None, None, b.pixels))
            for s in subs:
                for (x, y) in self.positions:
                    for sc in self.scales:
                        im, a = composite(b, s, x=x, y=y, scale=sc)
                        images.append(im)
                        masks.append(a)
                        lms.append(b.landmark_mask)
                        rows.append(self._row(base, s, x, y, sc, im))
        prov = {
            "builder": "trustlab.methods.geobias.CounterfactualBuilder",
            "trustlab": getattr(trustlab, "__version__", ""),
            "pillow": pil_version,
            "numpy": np.__version__,
            "positions": [list(p) for p in self.positions],
            "scales": list(self.scales),
            "include_original": bool(self.include_original),
            "n_backgrounds": len(bgs),
            "n_subjects": len(subs),
            "n_items": len(rows),
            "blend": "round(bg*(1-a) + fg*a); subject resized bilinear, bottom centre at (x, y)",
        }
        return Benchmark(images, masks, rows, prov, lms)

    @staticmethod
    def _row(base: dict[str, Any], s: Subject | None, x: Any, y: Any, sc: Any,
             image: NDArray[np.uint8]) -> dict[str, Any]:
        key = json.dumps([base["background_sha256"], s.sha256 if s else "", x, y, sc])
        return {
            "item_id": hashlib.sha256(key.encode()).hexdigest()[:16],
            **base,
            "subject_id": s.id if s else "",
            "group": s.group if s else "",
            "x": "" if x is None else x,
            "y": "" if y is None else y,
            "scale": "" if sc is None else sc,
            "subject_sha256": s.sha256 if s else "",
            "subject_source": s.source if s else "",
            "image_sha256": rgba_sha256(image),
            "image_path": "",
        }


def _items(values: Any, kind: type, name: str, where: str) -> list[Any]:
    if isinstance(values, kind):
        values = [values]
    if isinstance(values, str) or not isinstance(values, Sequence) or not values:
        raise InputError(f"The '{name}' parameter of {where} must be a non-empty list of "
                         f"{kind.__name__}s.")
    for v in values:
        if not isinstance(v, kind):
            raise InputError(f"The '{name}' parameter of {where} must hold {kind.__name__}s. "
                             f"Got {type(v).__name__}.")
    return list(values)


def _read_rows(path: Any, name: str, where: str, need: tuple[str, ...]) -> tuple[Path, list[dict[str, str]]]:
    p = check_path(path, name, where, kind="file")
    with p.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        cols = reader.fieldnames or []
    missing = [c for c in need if c not in cols]
    if missing:
        raise InputError(f"The '{name}' parameter of {where}: '{p}' lacks the column(s) "
                         f"{', '.join(missing)} (it has {', '.join(cols) or 'none'}).")
    if not rows:
        raise InputError(f"The '{name}' parameter of {where}: '{p}' has no rows.")
    return p, rows


def load_backgrounds(csv_path: str | os.PathLike[str]) -> list[Background]:
    """Backgrounds from a CSV with columns ``path, lat, lon`` and optional ``id, landmark``
    (``1/0``, ``true/false``); relative paths are read from the CSV's folder."""
    where = "load_backgrounds"
    p, rows = _read_rows(csv_path, "csv_path", where, ("path", "lat", "lon"))
    out = []
    for i, r in enumerate(rows, start=2):
        try:
            lat, lon = float(r["lat"]), float(r["lon"])
        except ValueError:
            raise InputError(f"{where}: line {i} of '{p}' has a lat/lon that is not a number.") from None
        lm_raw = (r.get("landmark") or "").strip().lower()
        if lm_raw not in ("", "1", "0", "true", "false", "yes", "no"):
            raise InputError(f"{where}: line {i} of '{p}' has landmark={lm_raw!r} (want 1/0).")
        lm = None if lm_raw == "" else lm_raw in ("1", "true", "yes")
        img = (p.parent / r["path"]) if not os.path.isabs(r["path"]) else Path(r["path"])
        out.append(Background(str(img), lat, lon, id=(r.get("id") or None), landmark=lm,
                              source=str(r["path"])))
    return out


def load_subjects(csv_path: str | os.PathLike[str]) -> list[Subject]:
    """RGBA cut-outs from a CSV with columns ``path, group`` and optional ``id``."""
    where = "load_subjects"
    p, rows = _read_rows(csv_path, "csv_path", where, ("path", "group"))
    out = []
    for r in rows:
        img = (p.parent / r["path"]) if not os.path.isabs(r["path"]) else Path(r["path"])
        out.append(Subject(str(img), r["group"], id=(r.get("id") or None), source=str(r["path"])))
    return out
