"""Provenance: enough facts in every report to rebuild the run."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["collect_provenance", "git_sha"]

KEY_PACKAGES = (
    "numpy", "scipy", "pandas", "scikit-learn", "pydantic", "torch", "transformers",
    "onnxruntime", "networkx", "matplotlib",
)


def git_sha(start: Path | None = None) -> str | None:
    """The commit of the checkout trustlab runs from, if it runs from one."""
    here = start or Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and sha else None


def package_versions(names: tuple[str, ...] = KEY_PACKAGES) -> dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def collect_provenance(seed: int, quick: bool) -> dict[str, Any]:
    from trustlab import __version__

    return {
        "trustlab_version": __version__,
        "git_sha": git_sha(),
        "seed": seed,
        "quick": quick,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": package_versions(),
    }
