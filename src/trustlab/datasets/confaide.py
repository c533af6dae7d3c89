"""ConfAIde tier 2 vignettes with their human ratings (Mireshghallah et al., ICLR 2024).

The bundled copy (``bundled/confaide``, MIT) holds tier 2a: 98 lines "Information about X is
collected by Y in order to Z." and the mean human agreement (-100..100) that each flow meets
privacy expectations. :func:`load_confaide_tier2` parses them into structured flows.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from trustlab.core.errors import DataError, InputError

__all__ = ["ConfaideVignette", "load_confaide_tier2"]

_PATTERN = re.compile(
    r"^Information about (?P<info>.+?) is collected by (?P<who>.+?) in order to (?P<why>.+?)\.*$"
)


@dataclass(frozen=True)
class ConfaideVignette:
    """One tier-2a flow: the information type, its collector, the purpose and the rating."""

    index: int
    information: str
    collector: str
    purpose: str
    rating: float
    text: str

    @property
    def acceptable(self) -> bool:
        """Humans, on average, agreed the flow meets privacy expectations (rating > 0)."""
        return self.rating > 0


def _bundled_dir() -> Path:
    return Path(str(resources.files("trustlab.datasets") / "bundled" / "confaide"))


def load_confaide_tier2(root: str | Path | None = None) -> list[ConfaideVignette]:
    """Read ``tier_2a.txt`` and ``tier_2_labels.txt`` from ``root`` (default: bundled copy)."""
    if root is not None and not isinstance(root, str | os.PathLike):
        raise InputError(f"The 'root' parameter must be a path or None. Got {type(root).__name__}.")
    folder = Path(root) if root is not None else _bundled_dir()
    try:
        lines = (folder / "tier_2a.txt").read_text(encoding="utf-8").splitlines()
        labels = (folder / "tier_2_labels.txt").read_text(encoding="utf-8").split()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"Cannot read ConfAIde tier 2 files in '{folder}': {exc}.") from exc
    lines = [ln for ln in lines if ln.strip()]
    if len(lines) != len(labels):
        raise DataError(
            f"ConfAIde tier 2a has {len(lines)} vignettes but {len(labels)} ratings in '{folder}'."
        )
    out = []
    for i, (line, rating) in enumerate(zip(lines, labels, strict=True)):
        text = line.split("\\n")[-1].strip()
        m = _PATTERN.match(text)
        if m is None or not all(m[k].strip() for k in ("info", "who", "why")):
            raise DataError(f"ConfAIde tier 2a line {i + 1} does not parse: {text[:80]!r}.")
        try:
            value = float(rating)
        except ValueError as exc:
            raise DataError(f"ConfAIde rating {i + 1} is not a number: {rating!r}.") from exc
        info = m["info"].strip()
        out.append(
            ConfaideVignette(
                i, info[0].lower() + info[1:], m["who"].strip(), m["why"].strip(), value, text
            )
        )
    return out
