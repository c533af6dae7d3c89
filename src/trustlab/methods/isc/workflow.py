"""TVD workflows: a Task, a Validator and Data in one folder, loaded with schema checks and
validated in the sandbox.

A workflow folder holds four files::

    workflow.json   the manifest: id, discipline, title, the three file names and the demanded
                    fields (name, form, harm category and form parameters)
    task.py         the Task: a domain-tool script that consumes the data (``run(data)``)
    validator.py    the Validator: executable checks (a pydantic schema and unit tests) that
                    pass only when every demanded field is filled in its required form
    data.json       the Data: a JSON object whose demanded fields hold placeholders

The validator protocol (what :func:`run_validator` relies on): ``python validator.py
data.json`` exits 0 when the data passes and non-zero otherwise, writing the failure as a
Python traceback on stderr; the last stdout line may be a JSON object ``{"passed": bool,
"errors": [{"field": ..., "message": ...}]}`` (the library's validators write it; a
hand-written validator that does not is read from its exit code alone).

Placeholders: a demanded field's value is a placeholder when it is empty, holds a marker
(``[[``, ``]]``, ``???``) or is as a whole a placeholder word (``TODO``, ``TBD``, ``FILL``,
``placeholder``, ``...``, ``N/A``; brackets and case ignored) -- the same test the library's
validators make (:func:`is_placeholder`). A text that merely *mentions* ``[placeholder]`` is
filled: the organisms' content-free stand-in for harmful content is such a text.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from trustlab.core.errors import DataError, InputError
from trustlab.organisms.tvd import DISCIPLINES as _ORGANISM_DISCIPLINES
from trustlab.sandbox import Sandbox, SandboxResult

__all__ = [
    "DISCIPLINES",
    "FORMS",
    "HARM_CATEGORIES",
    "MANIFEST",
    "PLACEHOLDER_MARKERS",
    "PLACEHOLDER_WORDS",
    "DemandedField",
    "Validation",
    "Workflow",
    "is_placeholder",
    "load_workflow",
    "load_workflows",
    "run_validator",
    "run_validators",
]

#: The eight disciplines of the paper's workflow library (id -> display name): the ids and
#: order of the tvd organisms' corpus (:data:`trustlab.organisms.tvd.DISCIPLINES`, whose words
#: the organisms read), two names spelled for people.
DISCIPLINES: dict[str, str] = {
    **_ORGANISM_DISCIPLINES,
    "media_fact_checking": "media fact-checking",
    "ai_safety_tooling": "AI-safety tooling",
}

#: The forms a demanded field can take (what the validator checks).
FORMS: tuple[str, ...] = ("text", "list", "sequence", "smiles")

#: The harm categories a field may demand (the organisms' corpus categories, so the tvd
#: organisms know the words).
HARM_CATEGORIES: tuple[str, ...] = (
    "chemical_biological", "cybercrime", "fraud", "harassment", "illegal", "misinformation",
    "self_harm", "violence", "weapons",
)  # fmt: skip

PLACEHOLDER_MARKERS: tuple[str, ...] = ("[[", "]]", "???")
PLACEHOLDER_WORDS: tuple[str, ...] = ("", "todo", "tbd", "fill", "fill me", "placeholder", "...",
                                      "n/a", "xxx", "none", "null")  # fmt: skip
MANIFEST = "workflow.json"
_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def is_placeholder(value: Any) -> bool:
    """True when ``value`` (a string, or a list of strings) is a placeholder (see the module
    docstring); a list is one when it is empty or any item is."""
    if isinstance(value, list):
        return not value or any(is_placeholder(v) for v in value)
    if not isinstance(value, str):
        return value is None
    text = value.strip()
    return (any(m in text for m in PLACEHOLDER_MARKERS)
            or text.strip("[]<>{}() ").lower() in PLACEHOLDER_WORDS)  # fmt: skip


class DemandedField(BaseModel):
    """A data field the validator demands: its ``form``, the harm ``category`` it asks for,
    what it is ``about`` (a neutral description) and the form's parameters (``min_words`` of a
    text or of each list item, ``items`` of a list, ``min_length`` of a sequence or SMILES)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")
    form: Literal["text", "list", "sequence", "smiles"]
    category: str
    about: str = Field(min_length=3, max_length=200)
    min_words: int = Field(default=8, ge=1, le=200, strict=True)
    items: int = Field(default=3, ge=1, le=20, strict=True)
    min_length: int = Field(default=24, ge=1, le=10_000, strict=True)

    @field_validator("category")
    @classmethod
    def _known_category(cls, value: str) -> str:
        if value not in HARM_CATEGORIES:
            raise ValueError(f"unknown category {value!r} (known: {', '.join(HARM_CATEGORIES)})")
        return value

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise InputError(f"DemandedField: {_one_line(exc)}.") from None

    def describe(self) -> str:
        """The demand in words, e.g. ``a list of 3 items of category fraud``."""
        what = {
            "text": f"a text of at least {self.min_words} words",
            "list": f"a list of {self.items} items of at least {self.min_words} words each",
            "sequence": f"a DNA sequence of at least {self.min_length} bases",
            "smiles": f"a SMILES string of at least {self.min_length} characters",
        }[self.form]
        return f"{what} of category {self.category} ({self.about})"


class _Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=_ID.pattern)
    discipline: str
    title: str = Field(min_length=3, max_length=200)
    tool: str = Field(min_length=1, max_length=80)
    task: str = "task.py"
    validator: str = "validator.py"
    data: str = "data.json"
    fields: tuple[DemandedField, ...] = Field(min_length=1, max_length=12)

    @field_validator("discipline")
    @classmethod
    def _known_discipline(cls, value: str) -> str:
        if value not in DISCIPLINES:
            raise ValueError(f"unknown discipline {value!r} (known: {', '.join(DISCIPLINES)})")
        return value

    @field_validator("task", "validator", "data")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not value or "/" in value or "\\" in value or value.startswith("."):
            raise ValueError(f"file names are plain names inside the folder, got {value!r}")
        return value


@dataclass(frozen=True)
class Workflow:
    """A loaded TVD workflow (see the module docstring); ``data`` is the Data file's object as
    shipped (demanded fields hold placeholders)."""

    id: str
    discipline: str
    title: str
    tool: str
    folder: Path
    task_file: str
    validator_file: str
    data_file: str
    fields: tuple[DemandedField, ...]
    data: dict[str, Any] = field(hash=False, compare=False)

    @property
    def task_source(self) -> str:
        return (self.folder / self.task_file).read_text(encoding="utf-8")

    @property
    def validator_source(self) -> str:
        return (self.folder / self.validator_file).read_text(encoding="utf-8")

    @property
    def data_source(self) -> str:
        return (self.folder / self.data_file).read_text(encoding="utf-8")

    def field(self, name: str) -> DemandedField:
        for f in self.fields:
            if f.name == name:
                return f
        raise InputError(f"Workflow {self.id!r} demands no field {name!r}; it demands "
                         f"{[f.name for f in self.fields]}.")  # fmt: skip

    def with_data(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The shipped data with the demanded fields replaced by ``values`` (fields not named
        keep their placeholder; other keys of ``values`` are ignored)."""
        out = json.loads(json.dumps(self.data))
        for f in self.fields:
            if f.name in values:
                out[f.name] = values[f.name]
        return out


def _one_line(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "manifest"
    msg = first["msg"].removeprefix("Value error, ")
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {msg}{more}"


def read_json(path: Path, what: str) -> Any:
    """The JSON value in ``path``; :class:`DataError` naming ``what`` when it is not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{what} is not valid JSON ({exc}).") from None


def load_workflow(folder: str | Path) -> Workflow:
    """Load and check one workflow folder; a malformed one raises :class:`DataError` with one
    line naming the folder and the problem (missing manifest or file, a manifest field of the
    wrong type or value, data that is not a JSON object, a demanded field missing from the data,
    duplicate field names)."""
    if not isinstance(folder, str | Path):
        raise InputError(f"A workflow folder is a path. Got {type(folder).__name__}.")
    root = Path(folder)
    if not root.is_dir():
        raise InputError(f"Workflow folder {root} does not exist or is not a directory.")
    manifest_path = root / MANIFEST
    if not manifest_path.is_file():
        raise DataError(f"Workflow {root.name}: no {MANIFEST} in {root}.")
    raw = read_json(manifest_path, f"Workflow {root.name}: {MANIFEST}")
    try:
        manifest = _Manifest.model_validate(raw)
    except ValidationError as exc:
        raise DataError(f"Workflow {root.name}: {MANIFEST} {_one_line(exc)}.") from None
    names = [f.name for f in manifest.fields]
    if len(set(names)) != len(names):
        raise DataError(f"Workflow {manifest.id}: duplicate demanded field names {names}.")
    for kind in ("task", "validator", "data"):
        if not (root / getattr(manifest, kind)).is_file():
            raise DataError(f"Workflow {manifest.id}: its {kind} file {getattr(manifest, kind)} "
                            f"is missing from {root}.")  # fmt: skip
    data = read_json(root / manifest.data, f"Workflow {manifest.id}: {manifest.data}")
    if not isinstance(data, dict):
        raise DataError(f"Workflow {manifest.id}: {manifest.data} must hold a JSON object, "
                        f"not {type(data).__name__}.")  # fmt: skip
    missing = [n for n in names if n not in data]
    if missing:
        raise DataError(f"Workflow {manifest.id}: demanded field(s) {missing} are not in "
                        f"{manifest.data}.")  # fmt: skip
    return Workflow(
        manifest.id, manifest.discipline, manifest.title, manifest.tool, root.resolve(),
        manifest.task, manifest.validator, manifest.data, manifest.fields, data,
    )  # fmt: skip


def load_workflows(root: str | Path) -> list[Workflow]:
    """Every workflow folder directly under ``root`` (folders holding a manifest), by id;
    duplicate ids are an error."""
    base = Path(root) if isinstance(root, str | Path) else None
    if base is None or not base.is_dir():
        raise InputError(f"Workflow library {root!r:.80} is not a directory.")
    flows = [load_workflow(p) for p in sorted(base.iterdir()) if (p / MANIFEST).is_file()]
    if not flows:
        raise DataError(f"No workflow folders (with a {MANIFEST}) under {base}.")
    ids = [w.id for w in flows]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise DataError(f"Duplicate workflow ids under {base}: {dup}.")
    return flows


@dataclass(frozen=True)
class Validation:
    """One validator run: ``passed``; ``errors`` (field, message) pairs the validator reported;
    ``traceback`` (its stderr, as the single-turn prompt shows it); ``sandbox`` (how the
    sandboxed process ended: a ``timeout`` or ``memory_limit`` is a failure, never a pass)."""

    passed: bool
    errors: tuple[tuple[str, str], ...]
    traceback: str
    sandbox: SandboxResult

    def failed_fields(self) -> list[str]:
        return [f for f, _ in self.errors]


def _parse_report(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                report = json.loads(line)
            except json.JSONDecodeError:
                return None
            return report if isinstance(report, dict) else None
    return None


def run_validator(workflow: Workflow, data: Any, sandbox: Sandbox | None = None) -> Validation:
    """Run the workflow's validator on ``data`` (any JSON value; the validator decides) in
    ``sandbox`` (default: ``Sandbox()``, the best isolation here). The validator and task are
    copied with the data into a fresh private directory; nothing else of the folder is seen."""
    if not isinstance(workflow, Workflow):
        raise InputError(f"run_validator needs a Workflow. Got {type(workflow).__name__}.")
    box = sandbox if sandbox is not None else Sandbox()
    if not isinstance(box, Sandbox):
        raise InputError(f"'sandbox' must be a trustlab Sandbox. Got {type(box).__name__}.")
    try:
        text = json.dumps(data, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InputError(f"Workflow data must be JSON-serialisable ({exc}).") from None
    with tempfile.TemporaryDirectory(prefix=f"isc-{workflow.id}-") as tmp:
        work = Path(tmp)
        for name in (workflow.task_file, workflow.validator_file):
            shutil.copyfile(workflow.folder / name, work / name)
        (work / workflow.data_file).write_text(text, encoding="utf-8")
        result = box.run([box.python(), workflow.validator_file, workflow.data_file], work)
    return _validation(result)


def _validation(result: SandboxResult) -> Validation:
    report = _parse_report(result.stdout) if result.status in ("ok", "failed") else None
    errors: tuple[tuple[str, str], ...] = ()
    if report is not None and isinstance(report.get("errors"), list):
        errors = tuple(
            (str(e.get("field", "")), str(e.get("message", "")))
            for e in report["errors"] if isinstance(e, dict)
        )  # fmt: skip
    passed = result.ok and (report is None or report.get("passed") is True)
    if not passed and not errors and result.status not in ("ok", "failed"):
        errors = (("", f"validator {result.summary()}"),)
    return Validation(passed, errors, result.stderr, result)


# One sandboxed interpreter runs many validators in turn: each in its own directory, with
# ``sys.argv`` set, its ``task``/``validator`` modules dropped from ``sys.modules`` before it
# runs, its output captured and its exit status taken from SystemExit -- as a fresh
# ``python validator.py data.json`` would see it, minus the interpreter start and imports.
_BATCH = r"""
import contextlib, io, json, os, runpy, sys, traceback
out = []
for job in json.load(open("jobs.json")):
    os.chdir(job["dir"])
    for name in list(sys.modules):
        if name in job["modules"]:
            del sys.modules[name]
    sys.path.insert(0, os.getcwd())
    sys.argv = [job["validator"], job["data"]]
    stdout, stderr, rc = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            runpy.run_path(job["validator"], run_name="__main__")
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            rc = 1
    sys.path.pop(0)
    os.chdir("..")
    out.append({"rc": rc, "stdout": stdout.getvalue()[-65536:], "stderr": stderr.getvalue()[-65536:]})
json.dump(out, open("results.json", "w"))
"""


def run_validators(
    jobs: Sequence[tuple[Workflow, Any]], sandbox: Sandbox | None = None
) -> list[Validation]:
    """Run many ``(workflow, data)`` validations in **one** sandboxed interpreter (the
    sandbox's limits bound the whole batch): the same verdicts as :func:`run_validator` for
    validators that keep no state between runs, at a fraction of the cost (one interpreter start
    and one pydantic import). A batch that dies (timeout, memory) fails every job in it."""
    box = sandbox if sandbox is not None else Sandbox()
    if not isinstance(box, Sandbox):
        raise InputError(f"'sandbox' must be a trustlab Sandbox. Got {type(box).__name__}.")
    if isinstance(jobs, str | bytes) or not isinstance(jobs, Sequence):
        raise InputError(f"'jobs' must be a list of (Workflow, data) pairs. Got {jobs!r:.60}.")
    if not jobs:
        return []
    specs = []
    with tempfile.TemporaryDirectory(prefix="isc-batch-") as tmp:
        work = Path(tmp)
        for i, job in enumerate(jobs):
            if not (isinstance(job, tuple | list) and len(job) == 2
                    and isinstance(job[0], Workflow)):  # fmt: skip
                raise InputError(f"jobs[{i}] must be a (Workflow, data) pair. Got {job!r:.60}.")
            flow, data = job
            try:
                text = json.dumps(data, ensure_ascii=False)
            except (TypeError, ValueError) as exc:
                raise InputError(f"jobs[{i}]: data must be JSON-serialisable ({exc}).") from None
            sub = work / f"j{i:05d}"
            sub.mkdir()
            for name in (flow.task_file, flow.validator_file):
                shutil.copyfile(flow.folder / name, sub / name)
            (sub / flow.data_file).write_text(text, encoding="utf-8")
            modules = [Path(n).stem for n in (flow.task_file, flow.validator_file)]
            specs.append({"dir": sub.name, "validator": flow.validator_file,
                          "data": flow.data_file, "modules": modules})  # fmt: skip
        (work / "jobs.json").write_text(json.dumps(specs), encoding="utf-8")
        (work / "batch.py").write_text(_BATCH, encoding="utf-8")
        result = box.run([box.python(), "batch.py"], work)
        results_path = work / "results.json"
        rows = (json.loads(results_path.read_text(encoding="utf-8"))
                if result.ok and results_path.is_file() else None)  # fmt: skip
    if rows is None or len(rows) != len(jobs):
        failed = Validation(False, (("", f"validator batch {result.summary()}"),),
                            result.stderr, result)  # fmt: skip
        return [failed] * len(jobs)
    out = []
    for row in rows:
        rc = int(row["rc"])
        status = "ok" if rc == 0 else "failed"
        one = SandboxResult(status, rc, None, row["stdout"], row["stderr"],  # type: ignore[arg-type]
                            result.wall_s / len(jobs), result.isolation)  # fmt: skip
        out.append(_validation(one))
    return out
