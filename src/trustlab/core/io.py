"""Atomic file writes: a result file is either complete or absent, never half-written."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_write", "save_figure_atomic", "write_json_atomic", "write_text_atomic"]


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w", **open_kwargs: Any) -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success rename it over ``path``.

    If the block raises (or the process is interrupted), the temporary file is removed
    and any previous ``path`` is left untouched.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write supports modes 'w' and 'wb'. Got {mode!r}.")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.chmod(tmp_name, 0o666 & ~_UMASK)  # mkstemp makes 0600 files; results are for sharing
    if mode == "w":
        open_kwargs.setdefault("encoding", "utf-8")
    try:
        with os.fdopen(fd, mode, **open_kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


def _read_umask() -> int:
    """The process umask (read once at import: os.umask can only be read by setting it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` byte-exactly (UTF-8, no newline translation on any platform)."""
    with atomic_write(path, "w", newline="") as handle:
        handle.write(text)
    return Path(path)


def write_json_atomic(path: str | os.PathLike[str], obj: Any, *, indent: int = 2) -> Path:
    text = json.dumps(obj, indent=indent, sort_keys=False, allow_nan=False, default=_json_default)
    return write_text_atomic(path, text + "\n")


def save_figure_atomic(
    fig: Any,
    path: str | os.PathLike[str],
    *,
    dpi: int = 110,
    metadata: dict[str, str] | None = None,
) -> Path:
    """Save a matplotlib figure atomically (format from the suffix of ``path``).

    ``metadata`` (e.g. ``Title``, ``Description``) is written into the file where the format
    supports it (PNG text chunks, SVG metadata).
    """
    fmt = Path(path).suffix.lstrip(".") or "png"
    meta = {k: v for k, v in (metadata or {}).items() if v} if fmt in ("png", "svg") else None
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format=fmt, dpi=dpi, bbox_inches="tight", metadata=meta or None)
    return Path(path)


def _json_default(obj: Any) -> Any:
    """Make numpy scalars/arrays and paths JSON-serialisable."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a core dependency
        np = None
    if np is not None:
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set | frozenset):
        return sorted(obj)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serialisable")
