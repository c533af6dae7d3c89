"""Shared test fixtures and the location of ../shared/data (absent on a user's clone)."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TRUSTLAB_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def shared_data(*parts: str) -> Path:
    """Path under ../shared/data, or skip the test (with the reason) when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real data not available here: {path} (it ships only beside CI's checkout)")
    return path


@pytest.fixture
def shared_data_dir():
    return shared_data
