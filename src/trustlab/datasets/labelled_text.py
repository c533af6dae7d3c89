"""A user's labelled texts for detector studies: ``text,label`` rows from CSV, JSONL or a
``datasets.save_to_disk`` folder (misinformation, extremist rhetoric, toxicity, ...).

Labels may be 0/1, booleans, or names: ``positive`` lists the names that mean the positive
(harmful, fake, extremist) class (default: 1, true, yes, harmful, unsafe, toxic, fake, false
claim, misinformation, extremist, propaganda, positive); ``negative`` the others (default: 0,
false, no, benign, safe, harmless, real, true claim, neutral, negative). A label in neither
list is a :class:`DataError` naming the file, the row and the label, never a guess.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trustlab.core.errors import DataError, InputError, MissingDependencyError

__all__ = ["LabelledTexts", "read_labelled_texts"]

POSITIVE_NAMES = (
    "1", "true", "yes", "harmful", "unsafe", "toxic", "fake", "false claim", "misinformation",
    "extremist", "propaganda", "positive", "hateful", "offensive",
)  # fmt: skip
NEGATIVE_NAMES = (
    "0", "false", "no", "benign", "safe", "harmless", "real", "true claim", "neutral",
    "negative", "non-toxic", "not extremist",
)  # fmt: skip


@dataclass(frozen=True)
class LabelledTexts:
    """Texts with binary labels (1 = positive); ``source`` names where they came from;
    ``groups`` is an optional category per text (None where the data has none)."""

    texts: tuple[str, ...]
    labels: tuple[int, ...]
    source: str = ""
    groups: tuple[str | None, ...] = field(default=())

    def __post_init__(self) -> None:
        if len(self.texts) != len(self.labels):
            raise InputError(
                f"LabelledTexts needs one label per text. Got {len(self.texts)} texts and "
                f"{len(self.labels)} labels."
            )
        if any(isinstance(y, bool) or y not in (0, 1) for y in self.labels):  # 2 counted twice
            raise InputError("LabelledTexts labels are 0 (negative) or 1 (positive).")
        if self.groups and len(self.groups) != len(self.texts):
            raise InputError("LabelledTexts needs one group per text (or none).")

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def n_positive(self) -> int:
        return int(sum(self.labels))


def _label(value: Any, pos: set[str], neg: set[str], where: str) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and value in (0, 1):
        return int(value)
    key = str(value).strip().lower()
    if key in pos:
        return 1
    if key in neg:
        return 0
    raise DataError(
        f"{where}: label {value!r} is neither positive ({', '.join(sorted(pos))}) nor negative "
        f"({', '.join(sorted(neg))}); pass positive=/negative= to name your labels."
    )


def read_labelled_texts(
    path: str | Path,
    *,
    text_column: str = "text",
    label_column: str = "label",
    group_column: str | None = None,
    positive: tuple[str, ...] = POSITIVE_NAMES,
    negative: tuple[str, ...] = NEGATIVE_NAMES,
) -> LabelledTexts:
    """Read ``text,label`` rows from a ``.csv``, ``.jsonl`` or a ``datasets`` folder.

    Empty texts, missing columns, unknown labels, a file with one class only, or an
    unreadable file raise a one-line :class:`DataError` naming the file.
    """
    if not isinstance(path, str | Path) or not str(path).strip():
        raise InputError(f"The 'path' parameter of read_labelled_texts must be a path. Got {path!r}.")
    p = Path(path).expanduser()
    for name, names in (("positive", positive), ("negative", negative)):
        if isinstance(names, str) or not all(isinstance(s, str) for s in names):
            # positive="harmful" used to be read as the letters h, a, r, m, f, u, l
            raise InputError(f"The '{name}' parameter of read_labelled_texts is a tuple of label "
                             f"names. Got {names!r}.")
    pos = {s.strip().lower() for s in positive}
    neg = {s.strip().lower() for s in negative}
    if pos & neg:
        raise InputError(f"positive and negative label names overlap: {sorted(pos & neg)}.")
    if not p.exists():
        raise DataError(f"Cannot read labelled texts: '{p}' does not exist.")
    rows: list[tuple[str, dict[str, Any]]]
    if p.is_dir():
        rows = _dataset_rows(p)
    elif p.suffix.lower() == ".csv":
        rows = _csv_rows(p)
    elif p.suffix.lower() == ".jsonl":
        rows = _jsonl_rows(p)
    else:
        raise DataError(
            f"Labelled texts '{p}' must be a .csv or .jsonl file or a datasets.save_to_disk folder."
        )
    if not rows:
        raise DataError(f"Labelled texts '{p}' hold no rows.")
    first = rows[0][1]
    for col in (text_column, label_column) + ((group_column,) if group_column else ()):
        if col not in first:
            raise DataError(
                f"Labelled texts '{p}' have no '{col}' column (found: {', '.join(map(str, first))})."
            )
    texts, labels, groups = [], [], []
    for where, row in rows:
        text = row.get(text_column)
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{where}: empty or missing '{text_column}'.")
        texts.append(text.strip())
        labels.append(_label(row.get(label_column), pos, neg, where))
        if group_column:
            g = row.get(group_column)
            groups.append(None if g in (None, "") else str(g))
    if len(set(labels)) < 2:
        raise DataError(f"Labelled texts '{p}' hold one class only (label {labels[0]}).")
    return LabelledTexts(tuple(texts), tuple(labels), str(p), tuple(groups))


def _csv_rows(p: Path) -> list[tuple[str, dict[str, Any]]]:
    try:
        with p.open(encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            out = []
            for line, row in enumerate(reader, start=2):
                if None in row:
                    raise DataError(f"'{p}' line {line}: more fields than the header has.")
                out.append((f"'{p}' line {line}", dict(row)))
            return out
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"Cannot read labelled texts '{p}': {exc}.") from exc


def _jsonl_rows(p: Path) -> list[tuple[str, dict[str, Any]]]:
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"Cannot read labelled texts '{p}': {exc}.") from exc
    out = []
    for line, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise DataError(f"'{p}' line {line} is not JSON: {exc.msg}.") from exc
        if not isinstance(obj, dict):
            raise DataError(f"'{p}' line {line} is not a JSON object.")
        out.append((f"'{p}' line {line}", obj))
    return out


def _dataset_rows(p: Path) -> list[tuple[str, dict[str, Any]]]:
    try:
        import datasets
    except ImportError as exc:
        raise MissingDependencyError.for_package(
            "datasets", "redteam", "Reading a datasets folder"
        ) from exc
    try:
        ds = datasets.load_from_disk(str(p))
    except (OSError, ValueError, FileNotFoundError) as exc:
        raise DataError(f"'{p}' is not a datasets.save_to_disk folder: {exc}") from exc
    if isinstance(ds, datasets.DatasetDict):
        if "train" not in ds and len(ds) != 1:
            raise DataError(
                f"'{p}' holds several splits ({', '.join(ds)}); point at one split's folder."
            )
        ds = ds["train"] if "train" in ds else next(iter(ds.values()))
    return [(f"'{p}' row {i}", dict(row)) for i, row in enumerate(ds)]
