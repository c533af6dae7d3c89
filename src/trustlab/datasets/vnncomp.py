"""Known VNN-COMP answers next to a benchmark folder (``known_results_vnncomp2025.csv``).

The CSV (built from the per-tool ``results.csv`` files of VNN-COMP 2025, see the data folder's
SOURCE.md) has one row per (onnx, vnnlib) with the majority answer ``expected`` (``sat`` = the
property is violated, ``unsat`` = it holds) and each tool's raw answer and time.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path

from trustlab.core.errors import DataError, InputError

__all__ = ["KNOWN_RESULTS_FILE", "KnownResult", "load_known_results"]

KNOWN_RESULTS_FILE = "known_results_vnncomp2025.csv"


@dataclass(frozen=True)
class KnownResult:
    """One instance's known answer and what each tool answered (``tools[name] = (result, s)``)."""

    expected: str  # "sat", "unsat" or "" (no agreed answer)
    tools: dict[str, tuple[str, float | None]] = field(default_factory=dict)

    def tool(self, name: str) -> tuple[str, float | None]:
        return self.tools.get(name, ("", None))


def _seconds(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def load_known_results(folder: str | Path) -> dict[tuple[str, str], KnownResult]:
    """``{(onnx file name, vnnlib file name): KnownResult}``; empty when the file is absent."""
    if not isinstance(folder, str | os.PathLike):
        raise InputError(f"The 'folder' parameter must be a path. Got {type(folder).__name__}.")
    path = Path(folder) / KNOWN_RESULTS_FILE
    if not path.is_file():
        return {}
    with path.open(encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = {"onnx", "vnnlib", "expected"} - set(reader.fieldnames or [])
        if missing:
            raise DataError(f"{path}: missing column(s) {', '.join(sorted(missing))}.")
        out = {}
        for row in reader:
            expected = (row["expected"] or "").strip()
            if expected not in ("sat", "unsat", ""):
                raise DataError(f"{path}: expected answer {expected!r} for {row['onnx']} / "
                                f"{row['vnnlib']} is not sat, unsat or empty.")
            tools = {k[: -len("_result")]: (row[k] or "", _seconds(row.get(
                k[: -len("_result")] + "_time_s"))) for k in row if k.endswith("_result")}
            out[(row["onnx"], row["vnnlib"])] = KnownResult(expected, tools)
    return out
