"""JailBound's hierarchical threat taxonomy as data: risk category x application domain x attack type.

The default taxonomy ships as ``taxonomy.yaml`` beside this module (categories and
descriptions only, no request text). :func:`load_taxonomy` reads it (or a user's file) and
checks its schema with pydantic; a malformed file is one line of :class:`DataError` naming the
file and the problem. :func:`coverage_report` counts, per taxonomy cell, the instances a
benchmark holds, and compares what the taxonomy-driven benchmark covers with what the plain
HarmBench and StrongREJECT lists cover once their categories are mapped in.

How a public list item is placed in a cell (the lists carry only a content category):
risk category = its list category through ``source_categories``; application domain = every
domain one of whose keywords the request mentions (whole words, case-insensitive), else
``general``; attack type = ``direct`` (a plain list is unwrapped requests).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from trustlab.core.errors import DataError, InputError

__all__ = [
    "AttackType",
    "Cell",
    "CoverageReport",
    "Domain",
    "RiskCategory",
    "Taxonomy",
    "TaxonomyItem",
    "coverage_report",
    "default_taxonomy_path",
    "list_items",
    "load_taxonomy",
]

_ID = r"^[a-z][a-z0-9_]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RiskCategory(_Strict):
    id: str = Field(pattern=_ID)
    name: str = Field(min_length=1)
    description: str = Field(min_length=1)


class Domain(_Strict):
    id: str = Field(pattern=_ID)
    name: str = Field(min_length=1)
    context: str = ""
    keywords: tuple[str, ...] = ()

    @field_validator("keywords")
    @classmethod
    def _words(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for w in v:
            if not re.fullmatch(r"[A-Za-z][A-Za-z'-]*", w):
                raise ValueError(f"a keyword must be one word, got {w!r}")
        return tuple(w.lower() for w in v)


class AttackType(_Strict):
    id: str = Field(pattern=_ID)
    name: str = Field(min_length=1)
    templates: tuple[str, ...] | None = None

    @field_validator("templates")
    @classmethod
    def _placeholder(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("templates must be null or a non-empty list")
        for t in v:
            if t.count("{request}") != 1 or re.search(r"\{(?!request\})", t):
                raise ValueError(f"a template needs exactly one '{{request}}' and no other "
                                 f"braces, got {t!r}")
        return v


class Taxonomy(_Strict):
    """The three axes and the mapping of source-list categories onto risk categories."""

    version: int = Field(ge=1)
    risk_categories: tuple[RiskCategory, ...] = Field(min_length=1)
    application_domains: tuple[Domain, ...] = Field(min_length=1)
    attack_types: tuple[AttackType, ...] = Field(min_length=1)
    source_categories: dict[str, dict[str, str]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> Taxonomy:
        for axis in ("risk_categories", "application_domains", "attack_types"):
            ids = [x.id for x in getattr(self, axis)]
            dup = sorted({i for i in ids if ids.count(i) > 1})
            if dup:
                raise ValueError(f"{axis} has duplicate ids: {', '.join(dup)}")
        if "general" not in self.domain_ids:
            raise ValueError("application_domains needs a 'general' domain (requests that "
                             "mention no domain)")
        if "direct" not in self.attack_ids:
            raise ValueError("attack_types needs a 'direct' attack type (plain requests)")
        risks = set(self.risk_ids)
        for source, mapping in self.source_categories.items():
            for cat, risk in mapping.items():
                if risk not in risks:
                    raise ValueError(f"source_categories.{source}.{cat} maps to unknown risk "
                                     f"category {risk!r}")
        return self

    @property
    def risk_ids(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.risk_categories)

    @property
    def domain_ids(self) -> tuple[str, ...]:
        return tuple(d.id for d in self.application_domains)

    @property
    def attack_ids(self) -> tuple[str, ...]:
        return tuple(a.id for a in self.attack_types)

    def domain(self, id: str) -> Domain:
        return {d.id: d for d in self.application_domains}[_check_id(id, self.domain_ids, "domain")]

    def attack(self, id: str) -> AttackType:
        return {a.id: a for a in self.attack_types}[_check_id(id, self.attack_ids, "attack")]

    def cells(self) -> list[Cell]:
        """Every (risk, domain, attack) cell, risk-major."""
        return [Cell(r, d, a) for r in self.risk_ids for d in self.domain_ids
                for a in self.attack_ids]  # fmt: skip

    def risk_of(self, source: str, category: str | None) -> str:
        """The risk category a source list's category maps to (DataError when unmapped)."""
        mapping = self.source_categories.get(source)
        if mapping is None:
            raise DataError(f"The taxonomy maps no categories of source {source!r} "
                            f"(it maps: {', '.join(sorted(self.source_categories)) or 'none'}).")
        if category not in mapping:
            raise DataError(f"Category {category!r} of source {source!r} is not mapped in the "
                            f"taxonomy's source_categories.{source}.")
        return mapping[category]

    def domains_of(self, text: str) -> tuple[str, ...]:
        """The domains whose keywords ``text`` mentions (whole words), else ``('general',)``."""
        words = set(re.findall(r"[a-z][a-z'-]*", text.lower()))
        hits = tuple(d.id for d in self.application_domains if words & set(d.keywords))
        return hits or ("general",)


def _check_id(value: Any, ids: Sequence[str], what: str) -> str:
    if value not in ids:
        raise InputError(f"Unknown {what} {value!r}; the taxonomy has: {', '.join(ids)}.")
    return value


@dataclass(frozen=True)
class Cell:
    risk: str
    domain: str
    attack: str

    @property
    def key(self) -> str:
        return f"{self.risk}/{self.domain}/{self.attack}"


def default_taxonomy_path() -> Path:
    return Path(str(resources.files("trustlab.methods.jailbound") / "taxonomy.yaml"))


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "top level"
    msg = err["msg"].removeprefix("Value error, ")
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {msg}{more}"


def load_taxonomy(path: str | Path | Mapping[str, Any] | None = None) -> Taxonomy:
    """The default taxonomy, a YAML file, or an already-parsed mapping, schema-checked."""
    if isinstance(path, Mapping):
        data, name = dict(path), "the taxonomy mapping"
    else:
        if path is not None and not isinstance(path, str | Path):
            raise InputError(f"The 'path' parameter of load_taxonomy is a path. Got "
                             f"{type(path).__name__}.")
        file = default_taxonomy_path() if path is None else Path(path)
        name = str(file)
        if not file.is_file():
            raise DataError(f"Taxonomy file {name} does not exist.")
        try:
            data = yaml.safe_load(file.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}" if mark is not None else ""
            raise DataError(f"Taxonomy file {name} is not valid YAML{at}.") from None
        except UnicodeDecodeError:
            raise DataError(f"Taxonomy file {name} is not UTF-8 text.") from None
    if not isinstance(data, dict):
        raise DataError(f"{name} must hold a mapping at the top level. Got "
                        f"{type(data).__name__}.")
    try:
        return Taxonomy.model_validate(data)
    except ValidationError as exc:
        raise DataError(f"{name} is not a valid taxonomy: {_first_error(exc)}.") from None


@dataclass(frozen=True)
class TaxonomyItem:
    """One benchmark instance placed in the taxonomy (no text kept: categories only)."""

    source: str
    risk: str
    domains: tuple[str, ...]
    attack: str


def _check_taxonomy(value: Any, where: str) -> None:
    if not isinstance(value, Taxonomy):
        raise InputError(f"The 'taxonomy' parameter of {where} must be a Taxonomy "
                         f"(load_taxonomy()). Got {type(value).__name__}.")


def list_items(taxonomy: Taxonomy, source: str,
               rows: Iterable[tuple[str | None, str]]) -> list[TaxonomyItem]:
    """Place a plain list's ``(category, text)`` rows: mapped risk, keyword domains, direct."""
    _check_taxonomy(taxonomy, "list_items")
    if not isinstance(source, str):
        raise InputError(f"The 'source' parameter of list_items must be a source name. Got "
                         f"{type(source).__name__}.")
    if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Iterable):
        raise InputError(f"The 'rows' parameter of list_items must be (category, text) pairs. "
                         f"Got {type(rows).__name__}.")
    rows = list(rows)
    for r in rows:
        if not (isinstance(r, tuple | list) and len(r) == 2 and isinstance(r[1], str)
                and (r[0] is None or isinstance(r[0], str))):
            raise InputError(f"The 'rows' parameter of list_items must be (category, text) "
                             f"pairs of strings. Got {r!r:.60}.")
    return [TaxonomyItem(source, taxonomy.risk_of(source, cat), taxonomy.domains_of(text), "direct")
            for cat, text in rows]  # fmt: skip


@dataclass
class CoverageReport:
    """Instances per cell and per benchmark; ``covered(b)`` is the set of cells with ≥ 1."""

    taxonomy: Taxonomy
    counts: dict[str, dict[str, int]]  # benchmark -> cell key -> n

    @property
    def benchmarks(self) -> list[str]:
        return list(self.counts)

    @property
    def n_cells(self) -> int:
        return len(self.taxonomy.cells())

    def covered(self, benchmark: str) -> set[str]:
        return {k for k, n in self.counts[benchmark].items() if n > 0}

    def summary(self) -> list[dict[str, Any]]:
        """Per benchmark: cells covered (of all), risk categories, domains and attack types
        reached, and instances."""
        out = []
        for b, c in self.counts.items():
            cov = self.covered(b)
            parts = [k.split("/") for k in cov]
            out.append({
                "benchmark": b,
                "instances": sum(c.values()),
                "cells_covered": len(cov),
                "cells": self.n_cells,
                "cell_coverage": len(cov) / self.n_cells,
                "risks_covered": len({p[0] for p in parts}),
                "domains_covered": len({p[1] for p in parts}),
                "attacks_covered": len({p[2] for p in parts}),
            })
        return out

    def rows(self) -> list[dict[str, Any]]:
        """One row per cell: the instance count of every benchmark."""
        return [{"risk": c.risk, "domain": c.domain, "attack": c.attack,
                 **{b: self.counts[b].get(c.key, 0) for b in self.counts}}
                for c in self.taxonomy.cells()]  # fmt: skip

    def risk_table(self) -> list[dict[str, Any]]:
        """Per risk category: cells covered by each benchmark (of domains x attacks)."""
        per = len(self.taxonomy.domain_ids) * len(self.taxonomy.attack_ids)
        out = []
        for r in self.taxonomy.risk_ids:
            row: dict[str, Any] = {"risk": r, "cells": per}
            for b in self.counts:
                row[b] = sum(1 for k in self.covered(b) if k.split("/")[0] == r)
            out.append(row)
        return out


def coverage_report(taxonomy: Taxonomy,
                    benchmarks: Mapping[str, Iterable[TaxonomyItem | Cell]]) -> CoverageReport:
    """Count instances per cell for each benchmark. An item with several keyword domains counts
    once in each of them (a request that mentions a hospital and a bank reaches both cells)."""
    _check_taxonomy(taxonomy, "coverage_report")
    if not isinstance(benchmarks, Mapping) or not benchmarks:
        raise InputError("The 'benchmarks' parameter of coverage_report must be a non-empty "
                         "mapping of benchmark name to items.")
    valid = {c.key for c in taxonomy.cells()}
    counts: dict[str, dict[str, int]] = {}
    for name, items in benchmarks.items():
        if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
            raise InputError(f"Benchmark {name!r} must be a list of TaxonomyItem or Cell. Got "
                             f"{type(items).__name__}.")
        c = {k: 0 for k in valid}
        for it in items:
            if isinstance(it, Cell):
                keys = [it.key]
            elif isinstance(it, TaxonomyItem):
                keys = [f"{it.risk}/{d}/{it.attack}" for d in it.domains]
            else:
                raise InputError(f"Benchmark {name!r} holds a {type(it).__name__}; expected "
                                 "TaxonomyItem or Cell.")
            for k in keys:
                if k not in valid:
                    raise DataError(f"Benchmark {name!r} has an instance in cell {k!r}, which "
                                    "is not a cell of the taxonomy.")
                c[k] += 1
        counts[str(name)] = c
    return CoverageReport(taxonomy, counts)
