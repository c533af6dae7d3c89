"""A static HTML index over every ``report.json`` under a directory (offline, no JavaScript).

A ``report.json`` that cannot be read, is not JSON, or does not hold a report (a list, ``{}``,
no ``method_id`` or ``headline``, metrics without values) is listed as *damaged* with a one-line
reason — in the page and in :class:`IndexResult` — never counted as indexed and never a crash.
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trustlab.core.errors import DataError
from trustlab.core.io import write_text_atomic

__all__ = ["IndexResult", "find_reports", "index_reports", "read_report", "render_index"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:70rem;
padding:0 1rem;color:#1d2430}
h1{margin-bottom:.2rem} h2{border-bottom:1px solid #d0d7de;padding-bottom:.3rem;margin-top:2.5rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}
td,th{border:1px solid #d0d7de;padding:.25rem .55rem;text-align:left;vertical-align:top}
th{background:#f3f5f7} .meta{color:#57606a;font-size:.85rem}
figure{margin:1rem 0} figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#57606a;font-size:.85rem} details{margin:.4rem 0}
.num{font-variant-numeric:tabular-nums}
"""


@dataclass
class IndexResult:
    """What ``index_reports`` wrote: the page, the reports shown, the damaged ones and why."""

    path: Path
    indexed: list[Path] = field(default_factory=list)
    damaged: list[tuple[Path, str]] = field(default_factory=list)


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
                      ("provenance", dict)):
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


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if value is None:
        return "—"
    return str(value)


def _table(columns: list[str], rows: list[list[Any]], limit: int = 60) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td class=num>{html.escape(_fmt(v))}</td>" for v in row) + "</tr>"
        for row in rows[:limit]
    )
    more = f"<p class=meta>{len(rows) - limit} more rows in report.json</p>" if len(rows) > limit else ""
    return f"<table><tr>{head}</tr>{body}</table>{more}"


def _section(path: Path, root: Path, data: dict[str, Any]) -> str:
    rel_dir = path.parent.relative_to(root).as_posix()
    prov = data.get("provenance", {})
    title = html.escape(data.get("title") or data.get("method_id", "?"))
    parts = [
        f"<h2 id='{html.escape(rel_dir)}'>{title}</h2>",
        f"<p class=meta>method <code>{html.escape(str(data.get('method_id')))}</code> · "
        f"run <code>{html.escape(rel_dir)}</code> · seed {html.escape(str(prov.get('seed')))} · "
        f"{'quick · ' if prov.get('quick') else ''}"
        f"{_fmt(prov.get('wall_time_s'))} s · trustlab {html.escape(str(prov.get('trustlab_version')))}"
        f" · git {html.escape(str(prov.get('git_sha') or 'n/a')[:10])}</p>",
    ]
    metrics = data.get("metrics", {})
    head_rows = [[k, m["value"], m.get("description", "")] for k, m in metrics.items() if m.get("headline")]
    if head_rows:
        parts.append(_table(["headline metric", "value", "description"], head_rows))
    other_rows = [[k, m["value"], m.get("description", "")] for k, m in metrics.items() if not m.get("headline")]
    if other_rows:
        parts.append("<details><summary>other metrics</summary>"
                     + _table(["metric", "value", "description"], other_rows, limit=500)
                     + "</details>")
    for name, fig in data.get("figures", {}).items():
        src = html.escape(f"{rel_dir}/{fig['path']}")
        cap = html.escape(fig.get("caption") or name)
        alt = html.escape(fig.get("alt") or fig.get("caption") or name, quote=True)
        parts.append(f"<figure><img src='{src}' alt='{alt}'><figcaption>{cap}</figcaption></figure>")
    for name, table in data.get("tables", {}).items():
        cap = html.escape(table.get("caption") or "")
        parts.append(f"<details><summary>table <b>{html.escape(name)}</b> — {cap}</summary>"
                     + _table(table["columns"], table["rows"]) + "</details>")
    for note in data.get("notes", []):
        parts.append(f"<p>{html.escape(note)}</p>")
    return "\n".join(parts)


def render_index(root: str | os.PathLike[str]) -> Path:
    """Write ``root/index.html`` with one section per report found under ``root``."""
    return index_reports(root).path


def index_reports(root: str | os.PathLike[str]) -> IndexResult:
    """Write ``root/index.html``: one section per valid report, a list of the damaged ones."""
    base = Path(root)
    reports = find_reports(base)
    result = IndexResult(base / "index.html")
    sections, toc = [], []
    for path in reports:
        try:
            data = read_report(path)
        except DataError as exc:
            result.damaged.append((path, str(exc)))
            continue
        result.indexed.append(path)
        rel_dir = path.parent.relative_to(base).as_posix()
        toc.append(f"<li><a href='#{html.escape(rel_dir)}'>{html.escape(rel_dir)}</a> — "
                   + ", ".join(f"{html.escape(k)} = {html.escape(_fmt(v))}"
                               for k, v in list(data.get('headline', {}).items())[:4])
                   + "</li>")
        sections.append(_section(path, base, data))
    damaged = "".join(
        f"<li><code>{html.escape(p.relative_to(base).as_posix())}</code>: {html.escape(why)}</li>"
        for p, why in result.damaged
    )
    damaged_html = (f"<h2>Damaged reports ({len(result.damaged)}, not shown)</h2><ul>{damaged}</ul>"
                    if result.damaged else "")
    body = (
        f"<h1>trustlab runs</h1><p class=meta>{len(sections)} report(s) under "
        f"<code>{html.escape(str(base))}</code></p><ul>{''.join(toc)}</ul>{damaged_html}"
        f"{''.join(sections)}"
    )
    page = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>trustlab runs</title>"
            f"<style>{_CSS}</style></head><body>{body}</body></html>\n")
    write_text_atomic(result.path, page)
    return result
