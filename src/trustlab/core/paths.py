"""Where trustlab keeps its cache and looks for the shared real data (one place for both)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["shared_data_dir", "trustlab_home"]


def trustlab_home() -> Path:
    """``$TRUSTLAB_HOME``, or ``~/.cache/trustlab`` when unset (organisms, embedding caches)."""
    env = os.environ.get("TRUSTLAB_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "trustlab"


def shared_data_dir(*parts: str) -> Path:
    """``$TRUSTLAB_SHARED_DATA/<parts>``, else ``<checkout>/../shared/data/<parts>``.

    Non-bundled real data (non-commercial or unlicensed) lives there beside a checkout; the
    path may not exist (a user's clone has no ``../shared``), so callers check.
    """
    env = os.environ.get("TRUSTLAB_SHARED_DATA")
    base = Path(env) if env else Path(__file__).resolve().parents[3].parent / "shared" / "data"
    return base.joinpath(*parts)
