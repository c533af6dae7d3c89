"""Experiment configs: frozen pydantic models, YAML files and ``--set key=value`` overrides.

Precedence: model defaults, then the ``QUICK`` preset (with ``--quick``), then a YAML
file, then ``--set`` overrides. Unknown keys are errors that list the valid ones.
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

__all__ = ["ExperimentConfig", "config_reference", "parse_overrides", "resolve_config"]


class ExperimentConfig(BaseModel):
    """Base class of every experiment config.

    Subclasses declare typed fields with defaults and ``description``s, and a ``QUICK``
    class variable: the overrides that make the run take seconds (used by tests and CI).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    QUICK: ClassVar[dict[str, Any]] = {}


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
) -> ExperimentConfig:
    """Build a validated config from defaults, the quick preset, a YAML file and overrides."""
    values: dict[str, Any] = {}
    if quick:
        values = _deep_merge(values, dict(config_cls.QUICK))
    if file is not None:
        values = _deep_merge(values, load_yaml_config(file))
    extra = overrides if isinstance(overrides, dict) else parse_overrides(list(overrides))
    values = _deep_merge(values, extra)
    try:
        return config_cls.model_validate(values)
    except pydantic.ValidationError as exc:
        raise ConfigError(_describe_validation_error(config_cls, exc, method_id)) from None


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
    return f"The '{loc}' parameter{owner} is invalid: {err['msg']}.{got_text}{more}"


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
