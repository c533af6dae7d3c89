"""Fonts for rendered text: the TrueType files matplotlib ships, so every machine has the same ones.

matplotlib (a core dependency) bundles DejaVu Sans, Serif and Sans Mono (with bold and italic
variants) and STIX; using those files, rather than whatever the system has installed, keeps
rendered text byte-identical across machines with the same matplotlib and Pillow versions.
``"default"`` is Pillow's own built-in font (no file). A path to any ``.ttf``/``.otf`` file
works wherever a font name does.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from trustlab.core.errors import InputError

__all__ = ["FONT_FILES", "available_fonts", "load_font"]

#: Named fonts -> file name inside matplotlib's ``mpl-data/fonts/ttf``.
FONT_FILES: dict[str, str] = {
    "sans": "DejaVuSans.ttf",
    "sans-bold": "DejaVuSans-Bold.ttf",
    "sans-oblique": "DejaVuSans-Oblique.ttf",
    "serif": "DejaVuSerif.ttf",
    "serif-bold": "DejaVuSerif-Bold.ttf",
    "serif-italic": "DejaVuSerif-Italic.ttf",
    "mono": "DejaVuSansMono.ttf",
    "mono-bold": "DejaVuSansMono-Bold.ttf",
    "stix": "STIXGeneral.ttf",
    "stix-italic": "STIXGeneralItalic.ttf",
}


@lru_cache(maxsize=1)
def _font_dir() -> Path | None:
    try:
        import matplotlib
    except ImportError:  # pragma: no cover - matplotlib is a core dependency
        return None
    folder = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    return folder if folder.is_dir() else None


def available_fonts() -> dict[str, Path | None]:
    """Font name -> file of every named font present here (``"default"`` has no file)."""
    folder = _font_dir()
    out: dict[str, Path | None] = {}
    if folder is not None:
        for name, file in FONT_FILES.items():
            if (folder / file).is_file():
                out[name] = folder / file
    out["default"] = None
    return out


@lru_cache(maxsize=256)
def _truetype(path: str, size: int) -> Any:
    from PIL import ImageFont

    return ImageFont.truetype(path, size)


def load_font(font: str | Path, size: int) -> Any:
    """A Pillow font object for a named font (see :func:`available_fonts`) or a font file."""
    from PIL import ImageFont

    if isinstance(size, bool) or not isinstance(size, int) or not 4 <= size <= 512:
        raise InputError(f"The 'font_size' parameter must be an integer in [4, 512]. Got {size!r}.")
    if isinstance(font, Path) or (
        isinstance(font, str) and font.lower().endswith((".ttf", ".otf"))
    ):
        path = Path(font)
        if not path.is_file():
            raise InputError(f"The 'font' parameter names a font file that does not exist: {path}.")
        try:
            return _truetype(str(path), size)
        except OSError as exc:
            raise InputError(
                f"The 'font' file {path} could not be read as a font ({exc})."
            ) from None
    if not isinstance(font, str):
        raise InputError(f"The 'font' parameter must be a font name or a path. Got {font!r}.")
    fonts = available_fonts()
    if font not in fonts:
        raise InputError(
            f"The 'font' parameter must be one of {sorted(fonts)} or a .ttf/.otf path. "
            f"Got {font!r}."
        )
    path = fonts[font]
    if path is None:
        return ImageFont.load_default(size)
    return _truetype(str(path), size)
