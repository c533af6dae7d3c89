"""Reports: headline metrics, tables, figures and notes, written as JSON, Markdown and PNG.

A run directory holds ``report.json`` (everything, machine-readable), ``report.md``
(for people) and ``figures/<name>.png``. Every file is written atomically.
"""

from __future__ import annotations

import contextlib
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trustlab.core.errors import InputError
from trustlab.core.io import save_figure_atomic, write_json_atomic, write_text_atomic

__all__ = ["REPORT_SCHEMA_VERSION", "Metric", "Report", "Table"]

REPORT_SCHEMA_VERSION = 1
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


def _check_name(kind: str, name: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise InputError(
            f"A {kind} name may use letters, digits, '_', '.', '-' only. Got {name!r}."
        )


def _plain(value: Any) -> Any:
    """Convert numpy scalars to Python and non-finite floats to None (JSON has no NaN)."""
    if hasattr(value, "item") and not isinstance(value, list | dict | str):
        with contextlib.suppress(ValueError, TypeError):
            value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class Metric:
    name: str
    value: float | int | bool | str | None
    headline: bool = False
    description: str = ""
    unit: str = ""


@dataclass(frozen=True)
class Table:
    name: str
    columns: list[str]
    rows: list[list[Any]]
    caption: str = ""


@dataclass
class Report:
    """What a run found. Experiments fill it through ``metric``, ``table``, ``figure``, ``note``."""

    method_id: str
    title: str = ""
    metrics: dict[str, Metric] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)
    figures: dict[str, dict[str, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    #: What was evaluated: models, data sets, instances (name -> value or list). The runner
    #: fills it from the config (:func:`trustlab.core.config.config_subject`) unless the
    #: experiment set it.
    subject: dict[str, Any] = field(default_factory=dict)
    _pending_figures: dict[str, Any] = field(default_factory=dict, repr=False)

    # -- filling -----------------------------------------------------------------
    def metric(
        self,
        name: str,
        value: Any,
        *,
        headline: bool = False,
        description: str = "",
        unit: str = "",
    ) -> Metric:
        _check_name("metric", name)
        value = _plain(value)
        if not isinstance(value, int | float | bool | str | type(None)):
            raise InputError(f"Metric '{name}' must be a number, bool or string. Got {value!r}.")
        metric = Metric(name, value, headline, description, unit)
        self.metrics[name] = metric
        return metric

    def table(self, name: str, data: Any, *, caption: str = "") -> Table:
        """Add a table from a pandas DataFrame, a list of dicts, or (columns, rows)."""
        _check_name("table", name)
        columns, rows = _to_columns_rows(data)
        table = Table(name, columns, [[_plain(v) for v in row] for row in rows], caption)
        self.tables[name] = table
        return table

    def figure(self, name: str, fig: Any, *, caption: str = "", alt: str = "") -> None:
        """Add a matplotlib figure; it is saved as ``figures/<name>.png`` when the report is written.

        ``alt`` is the text shown to readers who cannot see the image (HTML ``alt``, the
        Markdown image text and the PNG's ``Description``); by default the alt text the
        :mod:`trustlab.core.figures` panels wrote, else the caption.
        """
        from trustlab.core.figures import alt_text

        _check_name("figure", name)
        self._pending_figures[name] = fig
        self.figures[name] = {
            "path": f"figures/{name}.png",
            "caption": caption,
            "alt": alt or alt_text(fig) or caption or name,
        }

    def note(self, text: str) -> None:
        self.notes.append(text.strip())

    # -- reading -----------------------------------------------------------------
    @property
    def headline(self) -> dict[str, Any]:
        return {m.name: m.value for m in self.metrics.values() if m.headline}

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
            "method_id": self.method_id,
            "title": self.title,
            "status": "ok",
            "subject": _plain(self.subject),
            "headline": self.headline,
            "metrics": {
                m.name: {
                    "value": m.value,
                    "headline": m.headline,
                    "description": m.description,
                    "unit": m.unit,
                }
                for m in self.metrics.values()
            },
            "tables": {
                t.name: {"columns": t.columns, "rows": t.rows, "caption": t.caption}
                for t in self.tables.values()
            },
            "figures": self.figures,
            "notes": self.notes,
            "config": _plain(self.config),
            "provenance": _plain(self.provenance),
        }

    def to_markdown(self) -> str:
        lines = [f"# {self.title or self.method_id}", ""]
        prov = self.provenance
        lines.append(
            f"method `{self.method_id}` · seed {prov.get('seed')} · "
            f"trustlab {prov.get('trustlab_version')} · {prov.get('started_utc', '')}"
        )
        if self.subject:
            lines += ["", "subject: " + "; ".join(
                f"{k} = {', '.join(map(str, v)) if isinstance(v, list) else v}"
                for k, v in self.subject.items())]
        lines += ["", "## Headline metrics", "", "| metric | value | description |", "|---|---|---|"]
        for m in self.metrics.values():
            if m.headline:
                lines.append(f"| {m.name} | {_fmt(m.value)}{m.unit} | {m.description} |")
        others = [m for m in self.metrics.values() if not m.headline]
        if others:
            lines += ["", "## Other metrics", "", "| metric | value | description |", "|---|---|---|"]
            lines += [f"| {m.name} | {_fmt(m.value)}{m.unit} | {m.description} |" for m in others]
        for t in self.tables.values():
            lines += ["", f"## Table: {t.name}", ""]
            if t.caption:
                lines += [t.caption, ""]
            lines.append("| " + " | ".join(map(str, t.columns)) + " |")
            lines.append("|" + "---|" * len(t.columns))
            for row in t.rows[:200]:
                lines.append("| " + " | ".join(_fmt(v) for v in row) + " |")
            if len(t.rows) > 200:
                lines.append(f"\n({len(t.rows) - 200} more rows in report.json)")
        for name, fig in self.figures.items():
            alt = fig.get("alt") or fig["caption"] or name
            lines += ["", f"## Figure: {name}", "", f"![{alt}]({fig['path']})"]
            if fig["caption"]:
                lines += ["", fig["caption"]]
        if self.notes:
            lines += ["", "## Notes", ""]
            for note in self.notes:
                lines += [note, ""]
        stages = prov.get("stages", {})
        if stages:
            lines += ["", "## Wall time per stage", "", "| stage | seconds |", "|---|---|"]
            lines += [f"| {k} | {v:.2f} |" for k, v in stages.items()]
        return "\n".join(lines).rstrip() + "\n"

    # -- writing -----------------------------------------------------------------
    def write(self, out_dir: str | Path) -> Path:
        """Write figures, then report.md, then report.json last (its presence marks a complete run)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name, fig in self._pending_figures.items():
            meta = self.figures[name]
            save_figure_atomic(fig, out / "figures" / f"{name}.png",
                               metadata={"Title": meta["caption"] or name,
                                         "Description": meta["alt"]})
            if "matplotlib.pyplot" in sys.modules:  # a pyplot figure: release pyplot's handle
                sys.modules["matplotlib.pyplot"].close(fig)
        self._pending_figures.clear()
        write_text_atomic(out / "report.md", self.to_markdown())
        write_json_atomic(out / "report.json", self.to_dict())
        return out / "report.json"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value == 0 or 1e-3 <= abs(value) < 1e6:
            return f"{value:.4g}"
        return f"{value:.3e}"
    if value is None:
        return "—"
    return str(value).replace("|", "\\|")


def _to_columns_rows(data: Any) -> tuple[list[str], list[list[Any]]]:
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # pandas DataFrame
        frame = data.reset_index() if getattr(data.index, "name", None) else data
        return [str(c) for c in frame.columns], frame.to_numpy(dtype=object).tolist()
    if isinstance(data, tuple) and len(data) == 2:
        columns, rows = data
        return [str(c) for c in columns], [list(r) for r in rows]
    if isinstance(data, list) and all(isinstance(r, dict) for r in data):
        columns: list[str] = []
        for row in data:
            for key in row:
                if key not in columns:
                    columns.append(key)
        return columns, [[row.get(c) for c in columns] for row in data]
    raise InputError(
        "A table must be a pandas DataFrame, a list of dicts, or a (columns, rows) pair. "
        f"Got {type(data).__name__}."
    )
