"""An offline dashboard over every run under a directory: index, run pages, comparisons.

``trustlab report runs/`` calls :func:`build_site`, which writes a self-contained static site
beside the runs (no CDN, no network, no build step):

- ``index.html`` — every run (method, start time, subject, headline metrics, status), sortable
  and filterable with the bundled script, complete without it;
- ``<run dir>/report.html`` — one page per run: status (the error and stage of a failed run),
  subject, metrics, tables, figures with alt text, notes, config, provenance, and links to the
  raw ``report.json`` / ``report.md`` / ``failed.json``;
- ``compare/<method>.html`` — the runs of one method side by side: metric values and deltas
  against a baseline run, tables and figures side by side, the config keys that differ;
  ``?runs=a,b`` (the index's "compare selected") shows only those runs, the first as baseline;
- ``_dashboard/style.css`` and ``_dashboard/dashboard.js``.

A run directory with a ``failed.json`` newer than its ``report.json`` (or with no report) is
listed as failed. A ``report.json`` or ``failed.json`` that cannot be read is listed as damaged
with a one-line reason, never a crash. Every number is written with its exact JSON value in a
``data-value`` attribute, so tests (and scripts) can check what the page shows.
"""

from __future__ import annotations

import html
import json
import os
import threading
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

from trustlab.core.dashboard_assets import DASHBOARD_CSS, DASHBOARD_JS
from trustlab.core.errors import DataError, InputError
from trustlab.core.io import write_text_atomic

__all__ = ["RunEntry", "SiteResult", "build_site", "collect_runs", "read_failure", "serve_site"]

ASSET_DIR = "_dashboard"
COMPARE_DIR = "compare"


@dataclass
class RunEntry:
    """One run directory as the dashboard sees it."""

    rel: str  # the run directory, relative to the root, POSIX style
    status: str  # "ok" or "failed"
    data: dict[str, Any]  # report.json (ok) or failed.json (failed)

    @property
    def method_id(self) -> str:
        return str(self.data.get("method_id"))

    @property
    def started(self) -> str:
        return str(self.data.get("provenance", {}).get("started_utc") or "")


@dataclass
class SiteResult:
    """What :func:`build_site` wrote."""

    path: Path  # index.html
    runs: list[RunEntry] = field(default_factory=list)
    damaged: list[tuple[Path, str]] = field(default_factory=list)
    pages: list[Path] = field(default_factory=list)

    @property
    def indexed(self) -> list[Path]:
        return [self.path.parent / r.rel / "report.json" for r in self.runs if r.status == "ok"]

    @property
    def failed(self) -> list[RunEntry]:
        return [r for r in self.runs if r.status == "failed"]


# -- reading ---------------------------------------------------------------------------
def read_failure(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check one ``failed.json``; ``DataError`` with a one-line reason if damaged."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, OSError) as exc:
        raise DataError(f"unreadable ({exc})") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise DataError(f"holds a JSON {type(data).__name__}, not a failure record")
    if not isinstance(data.get("method_id"), str):
        raise DataError("has no 'method_id'")
    if not isinstance(data.get("error"), dict):
        raise DataError("has no 'error'")
    for key in ("config", "provenance", "subject"):
        if key in data and not isinstance(data[key], dict):
            raise DataError(f"'{key}' is a {type(data[key]).__name__}, not an object")
    return data


def collect_runs(root: str | os.PathLike[str]) -> tuple[list[RunEntry], list[tuple[Path, str]]]:
    """Every run directory under ``root`` (newest first) and the damaged files, with reasons."""
    from trustlab.core.html_index import find_reports, read_report
    from trustlab.core.runner import FAILURE_FILE

    base = Path(root)
    reports = {p.parent: p for p in find_reports(base)}
    failures = {p.parent: p for p in sorted(base.rglob(FAILURE_FILE))}
    runs: list[RunEntry] = []
    damaged: list[tuple[Path, str]] = []
    for folder in sorted(set(reports) | set(failures)):
        rel = folder.relative_to(base).as_posix()
        report, failure = reports.get(folder), failures.get(folder)
        use_failure = failure is not None and (
            report is None or failure.stat().st_mtime >= report.stat().st_mtime)
        path = failure if use_failure else report
        try:
            data = read_failure(path) if use_failure else read_report(path)
        except DataError as exc:
            damaged.append((path, str(exc)))
            continue
        runs.append(RunEntry(rel, "failed" if use_failure else "ok", data))
    runs.sort(key=lambda r: (r.started, r.rel), reverse=True)
    return runs, damaged


# -- formatting ------------------------------------------------------------------------
def fmt(value: Any) -> str:
    """How a value is shown (4 significant digits; exponent outside [1e-3, 1e6))."""
    if isinstance(value, bool) or value is None:
        return "—" if value is None else str(value).lower()
    if isinstance(value, float):
        if value == 0 or 1e-3 <= abs(value) < 1e6:
            return f"{value:.4g}"
        return f"{value:.3e}"
    if isinstance(value, list | dict):
        return json.dumps(value)
    return str(value)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _value_cell(value: Any, *, tag: str = "td", attrs: str = "") -> str:
    raw = _e(json.dumps(value))
    return (f"<{tag} class=num{attrs} data-value=\"{raw}\" title=\"{raw}\">"
            f"{_e(fmt(value))}</{tag}>")


def _flat(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            out.update(_flat(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: obj}


def _subject_text(subject: dict[str, Any]) -> str:
    if not subject:
        return "—"
    return "; ".join(f"{k} = {', '.join(map(str, v)) if isinstance(v, list) else v}"
                     for k, v in subject.items())


def _page(title: str, body: str, depth: int) -> str:
    up = "../" * depth
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        f"<title>{_e(title)}</title><link rel=stylesheet href='{up}{ASSET_DIR}/style.css'>"
        f"<script defer src='{up}{ASSET_DIR}/dashboard.js'></script></head>"
        f"<body><a href='{up}index.html'>All runs</a><main>{body}</main></body></html>\n"
    )


def _kv_table(rows: dict[str, Any], caption: str) -> str:
    if not rows:
        return "<p class=meta>none</p>"
    body = "".join(f"<tr><th scope=row>{_e(k)}</th>{_value_cell(v)}</tr>" for k, v in rows.items())
    return (f"<table><caption class=meta>{_e(caption)}</caption>"
            f"<tr><th scope=col>key</th><th scope=col>value</th></tr>{body}</table>")


def _data_table(columns: list[Any], rows: list[list[Any]], limit: int = 500) -> str:
    head = "".join(f"<th scope=col>{_e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_value_cell(v) for v in row) + "</tr>" for row in rows[:limit])
    more = (f"<p class=meta>{len(rows) - limit} more rows in report.json</p>"
            if len(rows) > limit else "")
    return f"<div class=scroll><table><tr>{head}</tr>{body}</table></div>{more}"


def _metrics_table(metrics: dict[str, Any], headline: bool) -> str:
    rows = [(k, m) for k, m in metrics.items() if bool(m.get("headline")) == headline]
    if not rows:
        return "<p class=meta>none</p>"
    body = "".join(
        f"<tr data-metric='{_e(k)}'><th scope=row>{_e(k)}</th>{_value_cell(m.get('value'))}"
        f"<td>{_e(m.get('unit', ''))}</td><td>{_e(m.get('description', ''))}</td></tr>"
        for k, m in rows)
    return ("<table class=metrics><tr><th scope=col>metric</th><th scope=col>value</th>"
            f"<th scope=col>unit</th><th scope=col>description</th></tr>{body}</table>")


# -- pages -----------------------------------------------------------------------------
def _run_page(run: RunEntry) -> str:
    data, depth = run.data, len(Path(run.rel).parts) if run.rel not in ("", ".") else 0
    prov = data.get("provenance", {})
    title = data.get("title") or run.method_id
    parts = [
        f"<h1>{_e(title)}</h1>",
        f"<p class=meta>method <code>{_e(run.method_id)}</code> · run <code>{_e(run.rel)}</code>"
        f" · started {_e(prov.get('started_utc') or '—')} · seed {_e(prov.get('seed'))}"
        f"{' · quick' if prov.get('quick') else ''} · trustlab {_e(prov.get('trustlab_version'))}"
        f" · git {_e(str(prov.get('git_sha') or 'n/a')[:10])}</p>",
        f"<h2>Status</h2><p id=status class='status-{_e(run.status)}'>{_e(run.status)}</p>",
    ]
    if run.status == "failed":
        err = data.get("error", {})
        parts.append(f"<p>Failed in stage <code id=failed-stage>{_e(data.get('stage') or '—')}"
                     f"</code> with <code>{_e(err.get('type'))}</code>:</p>"
                     f"<pre class=error id=error>{_e(err.get('message', ''))}</pre>")
    parts.append("<h2>Subject</h2>" + _kv_table(data.get("subject", {}), "what the run evaluated"))
    if run.status == "ok":
        metrics = data.get("metrics", {})
        parts.append("<h2>Headline metrics</h2>" + _metrics_table(metrics, True))
        parts.append("<h2>Other metrics</h2>" + _metrics_table(metrics, False))
        tables = data.get("tables", {})
        if tables:
            parts.append("<h2>Tables</h2>")
            for name, table in tables.items():
                parts.append(f"<h3 id='table-{_e(name)}'>{_e(name)}</h3>")
                if table.get("caption"):
                    parts.append(f"<p class=meta>{_e(table['caption'])}</p>")
                parts.append(_data_table(table["columns"], table["rows"]))
        figures = data.get("figures", {})
        if figures:
            parts.append("<h2>Figures</h2>")
            for name, fig in figures.items():
                alt = fig.get("alt") or fig.get("caption") or name
                parts.append(f"<figure><img src='{_e(quote(fig['path']))}' alt='{_e(alt)}'>"
                             f"<figcaption>{_e(fig.get('caption') or name)}</figcaption></figure>")
        notes = data.get("notes", [])
        if notes:
            parts.append("<h2>Notes</h2>" + "".join(f"<p>{_e(n)}</p>" for n in notes))
    parts.append("<h2>Configuration</h2>" + _kv_table(_flat(data.get("config", {})),
                                                      "every config value of the run"))
    parts.append("<h2>Provenance</h2>" + _kv_table(_flat(prov), "where and how it ran"))
    raw = ["report.json", "report.md"] if run.status == "ok" else ["failed.json"]
    parts.append("<h2>Raw files</h2><ul>" + "".join(
        f"<li><a href='{f}'>{f}</a></li>" for f in raw) + "</ul>")
    return _page(f"{title} — {run.rel}", "\n".join(parts), depth)


def _index_page(runs: list[RunEntry], damaged: list[tuple[Path, str]], root: Path,
                compare_methods: set[str]) -> str:
    methods = sorted({r.method_id for r in runs})
    rows = []
    for run in runs:
        link = quote(f"{run.rel}/report.html")
        headline = run.data.get("headline", {}) if run.status == "ok" else {}
        items = [f"<li>{_e(k)} = <span class=num data-metric='{_e(k)}' "
                 f"data-value=\"{_e(json.dumps(v))}\">{_e(fmt(v))}</span></li>"
                 for k, v in headline.items()]
        metrics = "".join(items[:4])
        if len(items) > 4:  # long headlines fold, the first four stay in view
            metrics += (f"<li><details><summary>{len(items) - 4} more</summary><ul class=hl>"
                        f"{''.join(items[4:])}</ul></details></li>")
        compare = (f"{COMPARE_DIR}/{quote(run.method_id)}.html"
                   if run.method_id in compare_methods else "")
        rows.append(
            f"<tr data-run='{_e(run.rel)}' data-method='{_e(run.method_id)}' "
            f"data-status='{_e(run.status)}' data-started='{_e(run.started)}' "
            f"data-compare='{_e(compare)}'>"
            f"<td><input type=checkbox aria-label='select {_e(run.rel)} for comparison'></td>"
            f"<td><a href='{_e(link)}'>{_e(run.rel)}</a></td><td>{_e(run.method_id)}</td>"
            f"<td class=num>{_e(run.started or '—')}</td>"
            f"<td class='status-{_e(run.status)}'>{_e(run.status)}</td>"
            f"<td>{_e(_subject_text(run.data.get('subject', {})))}</td>"
            f"<td><ul class=hl>{metrics}</ul></td></tr>")
    options = "".join(f"<option value='{_e(m)}'>{_e(m)}</option>" for m in methods)
    controls = (
        "<div id=controls class=controls hidden role=search aria-label='filter runs'>"
        "<label for=filter-text>Filter<input id=filter-text type=search "
        "placeholder='method, subject, metric…'></label>"
        f"<label for=filter-method>Method<select id=filter-method><option value=''>all</option>"
        f"{options}</select></label>"
        "<label for=filter-status>Status<select id=filter-status><option value=''>all</option>"
        "<option value=ok>ok</option><option value=failed>failed</option></select></label>"
        "<button id=compare-button type=button>Compare selected</button>"
        "<span id=compare-message role=status aria-live=polite></span>"
        "<span id=shown-count class=meta aria-live=polite></span></div>")

    def sortable(label: str, key: str) -> str:
        return f"<th scope=col data-sort='{key}'><button type=button>{label}</button></th>"

    table = (
        "<table id=runs><thead><tr><th scope=col>compare</th>"
        + sortable("run", "run") + sortable("method", "method") + sortable("started (UTC)", "started")
        + sortable("status", "status")
        + "<th scope=col>subject</th><th scope=col>headline metrics</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>")
    n_failed = sum(r.status == "failed" for r in runs)
    summary = (f"<p class=meta>{len(runs)} run(s) under <code>{_e(root)}</code>"
               f" ({n_failed} failed)</p>")
    comparisons = ""
    if compare_methods:
        comparisons = ("<h2>Comparisons</h2><ul>" + "".join(
            f"<li><a href='{COMPARE_DIR}/{quote(m)}.html'>all runs of {_e(m)}</a></li>"
            for m in sorted(compare_methods)) + "</ul>")
    damaged_html = ""
    if damaged:
        items = "".join(f"<li><code>{_e(p.relative_to(root).as_posix())}</code>: {_e(why)}</li>"
                        for p, why in damaged)
        damaged_html = f"<h2>Damaged files ({len(damaged)}, not shown)</h2><ul>{items}</ul>"
    body = (f"<h1>trustlab runs</h1>{summary}<h2>Runs</h2>{controls}{table}"
            f"{comparisons}{damaged_html}")
    return _page("trustlab runs", body, 0).replace("<a href='index.html'>All runs</a>", "", 1)


def _compare_page(method: str, runs: list[RunEntry]) -> str:
    runs = sorted(runs, key=lambda r: (r.started, r.rel))
    names = [r.rel for r in runs]
    base = runs[0]

    def col(run: RunEntry, inner: str, tag: str = "td", extra: str = "") -> str:
        return f"<{tag} data-run-col='{_e(run.rel)}'{extra}>{inner}</{tag}>"

    head = "<tr><th scope=col>metric</th>" + "".join(
        col(r, _e(r.rel), "th", " scope=col colspan=2") for r in runs) + "</tr>"
    sub = "<tr><th></th>" + "".join(
        col(r, "value", "th", " scope=col") + col(r, "Δ", "th", " scope=col") for r in runs) + "</tr>"
    metric_names: list[str] = []
    for run in runs:
        for name in run.data.get("metrics", {}):
            if name not in metric_names:
                metric_names.append(name)
    headline = {n for r in runs for n, m in r.data.get("metrics", {}).items() if m.get("headline")}
    metric_names.sort(key=lambda n: n not in headline)
    rows = []
    for name in metric_names:
        cells = []
        base_value = base.data.get("metrics", {}).get(name, {}).get("value")
        for run in runs:
            value = run.data.get("metrics", {}).get(name, {}).get("value")
            raw = _e(json.dumps(value))
            cells.append(f"<td class=num data-run-col='{_e(run.rel)}' data-kind=value "
                         f"data-value=\"{raw}\" title=\"{raw}\">{_e(fmt(value))}</td>")
            numeric = all(isinstance(v, int | float) and not isinstance(v, bool)
                          for v in (value, base_value))
            if run is base:
                delta = "<td class=num data-run-col='{}' data-kind=delta>baseline</td>"
                cells.append(delta.format(_e(run.rel)))
            elif numeric:
                d = value - base_value
                cells.append(f"<td class=num data-run-col='{_e(run.rel)}' data-kind=delta "
                             f"data-delta=\"{_e(json.dumps(d))}\">{'+' if d > 0 else ''}"
                             f"{_e(fmt(d))}</td>")
            else:
                cells.append(f"<td class=num data-run-col='{_e(run.rel)}' data-kind=delta>—</td>")
        star = " (headline)" if name in headline else ""
        rows.append(f"<tr data-metric-row='{_e(name)}'><th scope=row>{_e(name)}{star}</th>"
                    + "".join(cells) + "</tr>")
    parts = [
        f"<h1>Compare runs of {_e(method)}</h1>",
        f"<p class=meta><span id=compare-count>{len(runs)} of {len(runs)} runs shown</span>; "
        f"deltas against the baseline run <code id=baseline-name>{_e(base.rel)}</code> "
        "(the earliest shown; with ?runs=a,b the first listed).</p>",
        f"<h2>Metrics</h2><div class=scroll><table id=compare-metrics>{head}{sub}"
        f"{''.join(rows)}</table></div>",
    ]
    config_keys: list[str] = []
    flats = [_flat(r.data.get("config", {})) for r in runs]
    for flat in flats:
        for key in flat:
            if key not in config_keys:
                config_keys.append(key)
    differing = [k for k in config_keys if len({json.dumps(f.get(k)) for f in flats}) > 1]
    seeds = [r.data.get("provenance", {}).get("seed") for r in runs]
    cfg_rows = "".join(
        f"<tr><th scope=row>{_e(k)}</th>" + "".join(
            f"<td class=num data-run-col='{_e(r.rel)}' data-value=\"{_e(json.dumps(f.get(k)))}\">"
            f"{_e(fmt(f.get(k)))}</td>" for r, f in zip(runs, flats, strict=True)) + "</tr>"
        for k in differing)
    seed_row = "<tr><th scope=row>seed</th>" + "".join(
        f"<td class=num data-run-col='{_e(r.rel)}'>{_e(s)}</td>"
        for r, s in zip(runs, seeds, strict=True)) + "</tr>"
    cfg_head = "<tr><th scope=col>key</th>" + "".join(
        col(r, _e(r.rel), "th", " scope=col") for r in runs) + "</tr>"
    parts.append("<h2>Config differences</h2>"
                 + (f"<table>{cfg_head}{seed_row}{cfg_rows}</table>"
                    if differing or len(set(map(str, seeds))) > 1 else
                    "<p class=meta>The runs share every config value and seed.</p>"))
    table_names: list[str] = []
    figure_names: list[str] = []
    for run in runs:
        table_names += [t for t in run.data.get("tables", {}) if t not in table_names]
        figure_names += [f for f in run.data.get("figures", {}) if f not in figure_names]
    if table_names:
        parts.append("<h2>Tables side by side</h2>")
        for name in table_names:
            parts.append(f"<h3>{_e(name)}</h3><div class=side>")
            for run in runs:
                table = run.data.get("tables", {}).get(name)
                inner = (_data_table(table["columns"], table["rows"], limit=100) if table
                         else "<p class=meta>not in this run</p>")
                parts.append(f"<div data-run-col='{_e(run.rel)}'><p class=meta>{_e(run.rel)}</p>"
                             f"{inner}</div>")
            parts.append("</div>")
    if figure_names:
        parts.append("<h2>Figures side by side</h2>")
        for name in figure_names:
            parts.append(f"<h3>{_e(name)}</h3><div class=side>")
            for run in runs:
                fig = run.data.get("figures", {}).get(name)
                if fig:
                    alt = fig.get("alt") or fig.get("caption") or name
                    src = quote(f"../{run.rel}/{fig['path']}")
                    inner = (f"<figure><img src='{_e(src)}' alt='{_e(alt)}'>"
                             f"<figcaption>{_e(run.rel)}: {_e(fig.get('caption') or name)}"
                             "</figcaption></figure>")
                else:
                    inner = f"<p class=meta>{_e(run.rel)}: not in this run</p>"
                parts.append(f"<div data-run-col='{_e(run.rel)}'>{inner}</div>")
            parts.append("</div>")
    body = f"<div id=compare data-runs=\"{_e(json.dumps(names))}\">" + "\n".join(parts) + "</div>"
    return _page(f"Compare runs of {method}", body, 1)


# -- building and serving --------------------------------------------------------------
def build_site(root: str | os.PathLike[str]) -> SiteResult:
    """Write the dashboard for every run under ``root``; see the module docstring."""
    base = Path(root)
    runs, damaged = collect_runs(base)
    result = SiteResult(base / "index.html", runs, damaged)
    write_text_atomic(base / ASSET_DIR / "style.css", DASHBOARD_CSS)
    write_text_atomic(base / ASSET_DIR / "dashboard.js", DASHBOARD_JS)
    by_method: dict[str, list[RunEntry]] = {}
    for run in runs:
        page = base / run.rel / "report.html"
        write_text_atomic(page, _run_page(run))
        result.pages.append(page)
        if run.status == "ok":
            by_method.setdefault(run.method_id, []).append(run)
    compare_methods = {m for m, rs in by_method.items() if len(rs) >= 2}
    for method in sorted(compare_methods):
        page = base / COMPARE_DIR / f"{method}.html"
        write_text_atomic(page, _compare_page(method, by_method[method]))
        result.pages.append(page)
    write_text_atomic(result.path, _index_page(runs, damaged, base, compare_methods))
    return result


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve_site(root: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = 8000,
               background: bool = False) -> ThreadingHTTPServer:
    """Serve ``root`` over HTTP on ``host:port`` (port 0: any free port).

    With ``background=True`` the server runs in a daemon thread and is returned (call
    ``shutdown()``); otherwise this blocks until interrupted.
    """
    base = Path(root)
    if not base.is_dir():
        raise InputError(f"Cannot serve '{base}': not a directory.")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise InputError(f"The port must be an integer in [0, 65535]. Got {port!r}.")

    def handler(*args: Any, **kwargs: Any) -> _QuietHandler:
        return _QuietHandler(*args, directory=str(base), **kwargs)

    try:
        server = ThreadingHTTPServer((host, port), handler)
    except OSError as exc:
        raise InputError(f"Cannot serve on {host}:{port}: {exc.strerror or exc}.") from None
    if background:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return server
