"""Arditi et al.'s refusal-direction instruction splits, read from ``../shared/data/refusal``.

"Refusal in Language Models Is Mediated by a Single Direction" (arXiv:2406.11717) fits the
refusal direction on harmful vs harmless instructions; its public repository ships the splits
copied (data only) into ``$TRUSTLAB_SHARED_DATA/refusal`` (see the SOURCE.md there):

=================  =====  =======================================================  ============
split              rows   source                                                   licence
=================  =====  =======================================================  ============
``harmful_val``    39     HarmBench validation behaviours (categories kept)        MIT
``harmful_test``   572    JailbreakBench + HarmBench test + StrongREJECT, deduped  MIT
``advbench``       520    AdvBench harmful behaviours                              MIT
``jailbreakbench`` 100    JBB-Behaviors                                            MIT
``harmless_val``   6264   Stanford Alpaca instructions without input               CC BY-NC 4.0
``harmless_test``  6266   same                                                     CC BY-NC 4.0
=================  =====  =======================================================  ============

The Alpaca splits are **non-commercial**: trustlab never bundles them; they are read from the
shared folder only (tests that need them are marked ``realdata`` and skip when it is absent).
Each file is a JSON list of ``{"instruction": str, "category": str | null}``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from trustlab.core.errors import DataError, InputError
from trustlab.core.paths import shared_data_dir

__all__ = ["REFUSAL_SPLITS", "RefusalInstruction", "load_refusal"]

REFUSAL_SPLITS: dict[str, tuple[str, bool]] = {
    "harmful_val": ("harmful_val.json", True),
    "harmful_test": ("harmful_test.json", True),
    "advbench": ("advbench.json", True),
    "jailbreakbench": ("jailbreakbench.json", True),
    "harmless_val": ("harmless_val.json", False),
    "harmless_test": ("harmless_test.json", False),
}


@dataclass(frozen=True)
class RefusalInstruction:
    """One instruction of a split: ``id`` (split:row), the text, harmful or not, category."""

    id: str
    instruction: str
    harmful: bool
    category: str | None


def load_refusal(split: str, *, root: str | Path | None = None) -> list[RefusalInstruction]:
    """The instructions of ``split`` (see the module table), from ``root`` or
    ``$TRUSTLAB_SHARED_DATA/refusal``. Missing or malformed files raise a one-line DataError."""
    if split not in REFUSAL_SPLITS:
        raise InputError(
            f"Unknown refusal split {split!r}: use one of {', '.join(REFUSAL_SPLITS)}."
        )
    file, harmful = REFUSAL_SPLITS[split]
    if root is not None and not isinstance(root, str | os.PathLike):
        raise InputError(f"The 'root' parameter must be a path or None. Got {type(root).__name__}.")
    folder = Path(root) if root is not None else shared_data_dir("refusal")
    path = folder / file
    if not path.is_file():
        raise DataError(
            f"Cannot read the refusal split {split!r}: '{path}' does not exist. These lists are "
            "not bundled with trustlab (the harmless ones are CC BY-NC); put them in "
            f"'{folder}', set TRUSTLAB_SHARED_DATA, or pass root=."
        )
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"Cannot read the refusal split file '{path}': {exc}.") from exc
    if not isinstance(rows, list) or not rows:
        raise DataError(f"'{path}' must hold a non-empty JSON list of instructions.")
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not str(row.get("instruction") or "").strip():
            raise DataError(f"'{path}' item {i} has no 'instruction'.")
        cat = row.get("category")
        out.append(
            RefusalInstruction(
                f"{split}:{i}",
                str(row["instruction"]).strip(),
                harmful,
                None if cat in (None, "") else str(cat),
            )
        )
    return out
