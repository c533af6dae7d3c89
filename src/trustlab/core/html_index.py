"""A static HTML index over every ``report.json`` under a directory (offline, no JavaScript)."""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

from trustlab.core.errors import DataError
from trustlab.core.io import write_text_atomic

__all__ = ["find_reports", "render_index"]

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


def find_reports(root: str | os.PathLike[str]) -> list[Path]:
    base = Path(root)
    if not base.is_dir():
        raise DataError(f"Report directory '{base}' does not exist.")
    return sorted(base.rglob("report.json"))


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
    head_rows = [[k, m["value"], m.get("description", "")] for k, m in metrics.items() if m["headline"]]
    if head_rows:
        parts.append(_table(["headline metric", "value", "description"], head_rows))
    other_rows = [[k, m["value"], m.get("description", "")] for k, m in metrics.items() if not m["headline"]]
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
    base = Path(root)
    reports = find_reports(base)
    sections, toc = [], []
    for path in reports:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue  # a foreign or damaged file is skipped, not fatal
        rel_dir = path.parent.relative_to(base).as_posix()
        toc.append(f"<li><a href='#{html.escape(rel_dir)}'>{html.escape(rel_dir)}</a> — "
                   + ", ".join(f"{html.escape(k)} = {html.escape(_fmt(v))}"
                               for k, v in list(data.get('headline', {}).items())[:4])
                   + "</li>")
        sections.append(_section(path, base, data))
    body = (
        f"<h1>trustlab runs</h1><p class=meta>{len(sections)} report(s) under "
        f"<code>{html.escape(str(base))}</code></p><ul>{''.join(toc)}</ul>{''.join(sections)}"
    )
    page = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>trustlab runs</title>"
            f"<style>{_CSS}</style></head><body>{body}</body></html>\n")
    return write_text_atomic(base / "index.html", page)
