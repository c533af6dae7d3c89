"""Finding and checking ``report.json`` files; the dashboard over them (:mod:`trustlab.core.dashboard`).

A ``report.json`` that cannot be read, is not JSON, or does not hold a report (a list, ``{}``,
no ``method_id`` or ``headline``, metrics without values) is listed as *damaged* with a one-line
reason — in the page and in :class:`IndexResult` — never counted as indexed and never a crash.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trustlab.core.errors import DataError

__all__ = ["IndexResult", "find_reports", "index_reports", "read_report", "render_index"]


@dataclass
class IndexResult:
    """What ``index_reports`` wrote: the index page, the reports shown, the damaged files and
    why, and the failed runs."""

    path: Path
    indexed: list[Path] = field(default_factory=list)
    damaged: list[tuple[Path, str]] = field(default_factory=list)
    failed: list[Path] = field(default_factory=list)  # run directories whose run failed


def find_reports(root: str | os.PathLike[str]) -> list[Path]:
    base = Path(root)
    if base.exists() and not base.is_dir():
        raise DataError(f"Report directory '{base}' is a file; give the directory of the runs.")
    if not base.is_dir():
        raise DataError(f"Report directory '{base}' does not exist.")
    return sorted(base.rglob("report.json"))


def read_report(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check one ``report.json``; ``DataError`` with a one-line reason if it is damaged."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise DataError("not UTF-8 text") from None
    except OSError as exc:
        raise DataError(f"unreadable ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise DataError(f"holds a JSON {type(data).__name__}, not a report object")
    if not data:
        raise DataError("is an empty object")
    for key, kind in (("method_id", str), ("headline", dict)):
        if key not in data:
            raise DataError(f"has no '{key}'")
        if not isinstance(data[key], kind):
            raise DataError(f"'{key}' is a {type(data[key]).__name__}, not a {kind.__name__}")
    for key, kind in (("metrics", dict), ("figures", dict), ("tables", dict), ("notes", list),
                      ("provenance", dict), ("subject", dict)):
        if key in data and not isinstance(data[key], kind):
            raise DataError(f"'{key}' is a {type(data[key]).__name__}, not a {kind.__name__}")
    for name, metric in data.get("metrics", {}).items():
        if not isinstance(metric, dict) or "value" not in metric:
            raise DataError(f"metric '{name}' has no value")
    for name, fig in data.get("figures", {}).items():
        if not isinstance(fig, dict) or not isinstance(fig.get("path"), str):
            raise DataError(f"figure '{name}' has no path")
    for name, table in data.get("tables", {}).items():
        if not (isinstance(table, dict) and isinstance(table.get("columns"), list)
                and isinstance(table.get("rows"), list)):
            raise DataError(f"table '{name}' has no columns and rows")
    return data


def render_index(root: str | os.PathLike[str]) -> Path:
    """Write ``root/index.html`` with one section per report found under ``root``."""
    return index_reports(root).path


def index_reports(root: str | os.PathLike[str]) -> IndexResult:
    """Write the dashboard under ``root`` (:func:`trustlab.core.dashboard.build_site`)."""
    from trustlab.core.dashboard import build_site

    site = build_site(root)
    return IndexResult(site.path, indexed=site.indexed, damaged=site.damaged,
                       failed=[Path(root) / r.rel for r in site.failed])
