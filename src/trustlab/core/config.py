"""Experiment configs: frozen pydantic models, YAML files and ``--set key=value`` overrides.

Precedence: model defaults, then the ``QUICK`` preset (with ``--quick``) or the ``FULL`` preset
(with ``--full``), then a YAML file, then ``--set`` overrides. Unknown keys are errors that list the valid ones.

Paths the user gives must exist. A field is a *path field* when its type is ``Path`` or its name
is or ends in ``dir``/``_dir``, ``file``/``_file`` or ``path``/``_path`` (a ``str`` field too;
nested settings sections included): when a config file or ``--set``
gives it a value, :func:`resolve_config` checks that a ``*_dir`` is a directory, a ``*_file`` a
file and anything else exists, and raises ``ConfigError`` naming the key — a typo never turns
into "data absent, skipped". Defaults are not checked (an absent default is the method's
documented "no data" path). A path the run *writes* opts out with
``Field(..., json_schema_extra={"output": True})``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, ClassVar, get_origin

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict

from trustlab.core.errors import ConfigError

__all__ = [
    "PATH_SUFFIXES",
    "ExperimentConfig",
    "check_config_paths",
    "config_reference",
    "config_subject",
    "parse_overrides",
    "path_fields",
    "resolve_config",
]

#: Field-name endings that make a config field a path the user gives (checked to exist).
PATH_SUFFIXES = ("_dir", "_file", "_path")


class ExperimentConfig(BaseModel):
    """Base class of every experiment config.

    Subclasses declare typed fields with defaults and ``description``s, and a ``QUICK``
    class variable: the overrides that make the run take seconds (used by tests and CI).
    ``FULL`` (optional) holds the overrides of the paper-scale run when the default is kept
    shorter so that ``trustlab run all`` reports early (e.g. the whole organism scaling family).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    QUICK: ClassVar[dict[str, Any]] = {}
    FULL: ClassVar[dict[str, Any]] = {}
    #: Dotted keys naming what a run evaluates (models, data sets, instances), shown as the
    #: report's ``subject``. ``None``: found by name (see :func:`config_subject`).
    SUBJECT: ClassVar[tuple[str, ...] | None] = None


def parse_overrides(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Turn ``["a.b=1", "c=[1,2]"]`` into a nested dict; values are parsed as YAML scalars."""
    nested: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"An override must look like key=value. Got '{item}'.")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        if isinstance(value, str):  # YAML 1.1 reads "1e-3" as a string; users mean a number
            with contextlib.suppress(ValueError):
                value = float(value)
        parts = key.split(".")
        node = nested
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"The override '{item}' conflicts with an earlier one.")
        node[parts[-1]] = value
    return nested


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_yaml_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    file = Path(path)
    if file.is_dir():
        raise ConfigError(f"Config file '{file}' is a directory; give a YAML file.")
    if not file.is_file():
        raise ConfigError(f"Config file '{file}' does not exist.")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"Config file '{file}' is not valid YAML{where}.") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"Config file '{file}' must hold a mapping of keys to values.")
    return data


def resolve_config(
    config_cls: type[ExperimentConfig],
    *,
    quick: bool = False,
    file: str | os.PathLike[str] | None = None,
    overrides: list[str] | tuple[str, ...] | dict[str, Any] = (),
    method_id: str | None = None,
    full: bool = False,
) -> ExperimentConfig:
    """Build a validated config from defaults, the quick or full preset, a YAML file and overrides."""
    if quick and full:
        raise ConfigError("--quick and --full exclude each other; give one.")
    values: dict[str, Any] = {}
    if quick:
        values = _deep_merge(values, dict(config_cls.QUICK))
    if full:
        values = _deep_merge(values, dict(config_cls.FULL))
    if file is not None:
        values = _deep_merge(values, load_yaml_config(file))
    extra = overrides if isinstance(overrides, dict) else parse_overrides(list(overrides))
    values = _deep_merge(values, extra)
    try:
        config = config_cls.model_validate(values)
    except pydantic.ValidationError as exc:
        raise ConfigError(_describe_validation_error(config_cls, exc, method_id)) from None
    check_config_paths(config, given=values, method_id=method_id)
    return config


def path_fields(config_cls: type[BaseModel], prefix: str = "") -> dict[str, str]:
    """The config's input path fields (nested sections as dotted keys) and what each must be:
    ``{"data_dir": "dir", "cifar10h.dir": "dir", ...}``."""
    out = {prefix + name: kind for name, kind in _own_path_fields(config_cls).items()}
    for name, field in config_cls.model_fields.items():
        section = _section_type(field.annotation)
        if section is not None:
            out.update(path_fields(section, f"{prefix}{name}."))
    return out


def _own_path_fields(config_cls: type[BaseModel]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, field in config_cls.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if extra.get("output") or _section_type(field.annotation) is not None:
            continue
        stem = "_" + name  # a field named 'dir' counts like 'data_dir'
        if _mentions_path(field.annotation) or stem.endswith(PATH_SUFFIXES):
            out[name] = ("dir" if stem.endswith("_dir") else
                         "file" if stem.endswith("_file") else "path")
    return out


def _section_type(annotation: Any) -> type[BaseModel] | None:
    """The settings model a field holds (``Section`` or ``Section | None``), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def _mentions_path(annotation: Any) -> bool:
    if annotation is None:
        return False
    if isinstance(annotation, type) and issubclass(annotation, os.PathLike):
        return True
    return any(_mentions_path(arg) for arg in getattr(annotation, "__args__", ()))


def check_config_paths(
    config: BaseModel,
    *,
    given: dict[str, Any] | None = None,
    method_id: str | None = None,
    prefix: str = "",
) -> None:
    """Raise ``ConfigError`` for a user-given path field whose path does not exist.

    ``given``: the values the user set, nested like the config (defaults are not checked);
    every field when ``None``. Nested settings objects are checked with dotted key names.
    """
    owner = f" of {method_id}" if method_id else ""
    for name in type(config).model_fields:
        value = getattr(config, name)
        if isinstance(value, BaseModel) and (given is None or isinstance(given.get(name), dict)):
            check_config_paths(value, given=None if given is None else given[name],
                               method_id=method_id, prefix=f"{prefix}{name}.")
    for field_name, kind in _own_path_fields(type(config)).items():
        if given is not None and field_name not in given:
            continue
        name = prefix + field_name
        value = getattr(config, field_name)
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            if item is None or item == "" or not isinstance(item, str | os.PathLike):
                continue
            path = Path(item).expanduser()
            if not path.exists():
                raise ConfigError(
                    f"The '{name}' parameter{owner} names a path that does not exist: '{path}'."
                )
            if kind == "dir" and not path.is_dir():
                raise ConfigError(f"The '{name}' parameter{owner} must be a directory. "
                                  f"'{path}' is a file.")
            if kind == "file" and not path.is_file():
                raise ConfigError(f"The '{name}' parameter{owner} must be a file. "
                                  f"'{path}' is a directory.")


#: Config keys (last dotted part) that name what a run evaluates, when a config declares no SUBJECT.
_SUBJECT_NAMES = frozenset({
    "model", "models", "organism", "organisms", "base", "dataset", "datasets", "data_dir",
    "suite", "suites", "benchmark", "benchmarks", "prompt_set", "prompt_sets", "source",
    "sources", "net", "nets", "network", "networks", "detector", "detectors",
})


def config_subject(config: BaseModel) -> dict[str, Any]:
    """What a run evaluates, read from its config: ``{dotted key: value}``.

    The keys are the config's ``SUBJECT`` when it declares one; otherwise every field whose
    name is a model, data set, suite, benchmark, prompt set or network name
    (:data:`_SUBJECT_NAMES`) or ends in ``_instances``, ``_models`` or ``_datasets``. Fields
    set to ``None``, ``""``, ``[]`` or ``0``, and sections with ``enabled = False`` (not used
    by this run), are left out.
    """
    declared = getattr(type(config), "SUBJECT", None)
    flat: dict[str, Any] = {}

    def walk(obj: BaseModel, prefix: str) -> None:
        for name in type(obj).model_fields:
            value = getattr(obj, name)
            if isinstance(value, BaseModel):
                if getattr(value, "enabled", True) is False:  # a section the run does not use
                    continue
                walk(value, f"{prefix}{name}.")
            else:
                flat[f"{prefix}{name}"] = value

    walk(config, "")
    if declared is not None:
        keys = [k for k in declared if k in flat]
    else:
        keys = [k for k in flat
                if k.rsplit(".", 1)[-1] in _SUBJECT_NAMES
                or k.endswith(("_instances", "_models", "_datasets"))]
    out: dict[str, Any] = {}
    for key in keys:
        value = flat[key]
        if value is None or value == "" or value == [] or (
                isinstance(value, int) and not isinstance(value, bool) and value == 0):
            continue
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        elif isinstance(value, tuple):
            value = list(value)
        if isinstance(value, str | int | float | bool) or (
                isinstance(value, list) and all(isinstance(v, str | int | float) for v in value)):
            out[key] = value
    return out


def _describe_validation_error(
    config_cls: type[ExperimentConfig], exc: pydantic.ValidationError, method_id: str | None
) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(part) for part in err["loc"])
    owner = f" of {method_id}" if method_id else ""
    if err["type"] == "extra_forbidden":
        valid = ", ".join(sorted(config_cls.model_fields))
        return f"Unknown config key '{loc}'{owner}. Valid keys: {valid}."
    more = f" ({len(exc.errors()) - 1} more problem(s))" if len(exc.errors()) > 1 else ""
    got = err.get("input")
    got_text = f" Got {got!r}." if not isinstance(got, dict) else ""
    msg = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if not loc:  # a model-level (cross-field) validator: no single parameter to name
        return f"The config{owner} is invalid: {msg.rstrip('.')}.{more}"
    return f"The '{loc}' parameter{owner} is invalid: {msg.rstrip('.')}.{got_text}{more}"


def config_reference(config_cls: type[ExperimentConfig]) -> str:
    """A Markdown table of the config's fields (name, type, default, quick preset, description).

    Docs pages paste it under "Config reference"; ``trustlab config <id>`` prints it.
    """
    lines = ["| key | type | default | quick | description |", "|---|---|---|---|---|"]
    for name, field in config_cls.model_fields.items():
        ann = field.annotation
        annotation = str(ann) if get_origin(ann) is not None else getattr(ann, "__name__", str(ann))
        annotation = annotation.replace("typing.", "")
        default = field.get_default(call_default_factory=True)
        if isinstance(default, BaseModel):
            default = default.model_dump(mode="json")
        quick = config_cls.QUICK.get(name, "")
        constraints = [
            f"{kind} {getattr(item, kind)}"
            for item in field.metadata
            for kind in ("gt", "ge", "lt", "le")
            if hasattr(item, kind)
        ]
        desc = (field.description or "") + (f" ({', '.join(constraints)})" if constraints else "")
        cells = [f"`{name}`", f"`{annotation}`", f"`{default!r}`",
                 f"`{quick!r}`" if name in config_cls.QUICK else "", desc]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)
