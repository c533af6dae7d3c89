"""PrivacyLens seeds (Shao et al., NeurIPS 2024 D&B): negative privacy norms in agent actions.

The bundled copy (``bundled/privacylens``, MIT) keeps the seed and instruction fields of the
493 records of ``data/main_data.json``; :func:`load_privacylens_seeds` also reads the full
original file when given its path.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from trustlab.core.errors import DataError, InputError

__all__ = ["PrivacyLensSeed", "load_privacylens_seeds"]


@dataclass(frozen=True)
class PrivacyLensSeed:
    """A negative norm: sharing ``data_type`` about ``data_subject`` from ``data_sender`` to
    ``data_recipient`` by ``transmission_principle`` is inappropriate."""

    name: str
    data_type: str
    data_subject: str
    data_sender: str
    data_sender_name: str
    data_recipient: str
    transmission_principle: str
    source: str
    user_instruction: str
    final_action: str
    toolkits: tuple[str, ...]


def _bundled_file() -> Path:
    return Path(
        str(resources.files("trustlab.datasets") / "bundled" / "privacylens" / "main_data_seeds.json")
    )


def load_privacylens_seeds(path: str | Path | None = None) -> list[PrivacyLensSeed]:
    """Read PrivacyLens records (bundled subset by default, or an original main_data.json)."""
    if path is not None and not isinstance(path, str | os.PathLike):
        raise InputError(f"The 'path' parameter must be a path or None. Got {type(path).__name__}.")
    file = Path(path) if path is not None else _bundled_file()
    try:
        records = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"Cannot read PrivacyLens data '{file}': {exc}.") from exc
    if not isinstance(records, list):
        raise DataError(f"PrivacyLens data '{file}' must be a JSON list of records.")
    out = []
    for i, r in enumerate(records):
        try:
            s, t = r["seed"], r["trajectory"]
            out.append(
                PrivacyLensSeed(
                    str(r["name"]),
                    str(s["data_type"]),
                    str(s["data_subject"]),
                    str(s["data_sender"]),
                    str(s.get("data_sender_name", "")),
                    str(s["data_recipient"]),
                    str(s["transmission_principle"]),
                    str(s.get("source", "")),
                    str(t.get("user_instruction", "")),
                    str(t.get("final_action", "")),
                    tuple(t.get("toolkits", ())),
                )
            )
        except (KeyError, TypeError, AttributeError) as exc:
            what = f"lacks field {exc}" if isinstance(exc, KeyError) else "is not a record object"
            raise DataError(f"PrivacyLens record {i} in '{file}' {what}.") from exc
    return out
