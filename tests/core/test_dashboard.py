"""The dashboard's pages as HTML (no browser): failure records, subjects, every number shown equal
to report.json, accessibility basics, offline, and serving. The browser tests are in
test_dashboard_browser.py."""

from __future__ import annotations

import json
import re
import shutil
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from trustlab.core.config import ExperimentConfig, config_subject
from trustlab.core.dashboard import build_site, collect_runs, fmt, serve_site
from trustlab.core.errors import InputError


class Page(HTMLParser):
    """Collects headings, images, elements carrying data-value, and links."""

    def __init__(self) -> None:
        super().__init__()
        self.headings: list[int] = []
        self.images: list[dict] = []
        self.values: list[tuple[dict, str]] = []
        self.links: list[str] = []
        self.scripts: list[str] = []
        self._open: list[tuple[dict, list[str]]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if re.fullmatch(r"h[1-6]", tag):
            self.headings.append(int(tag[1]))
        if tag == "img":
            self.images.append(a)
        if tag in ("a", "link"):
            self.links.append(a.get("href", ""))
        if tag == "script":
            self.scripts.append(a.get("src", ""))
        if "data-value" in a and tag in ("td", "span"):
            self._open.append((a, []))

    def handle_data(self, data):
        for _, chunks in self._open:
            chunks.append(data)

    def handle_endtag(self, tag):
        if tag in ("td", "span") and self._open:
            a, chunks = self._open.pop()
            self.values.append((a, "".join(chunks)))


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


@pytest.fixture(scope="module")
def site(dashboard_runs):
    return build_site(dashboard_runs)


def test_failed_run_writes_a_failure_record_and_no_report(dashboard_runs):
    folder = dashboard_runs / "ipb" / "failed"
    assert not (folder / "report.json").exists()
    record = json.loads((folder / "failed.json").read_text())
    assert record["status"] == "failed" and record["stage"] == "fit"
    assert record["error"] == {"type": "ValueError", "message": "the toy model diverged at step 3"}
    assert record["config"]["fail"] is True and record["provenance"]["seed"] == 3
    assert set(record["provenance"]["stages"]) == {"sample", "fit"}
    assert not list(folder.glob(".*.tmp"))  # written atomically


def test_a_later_success_in_the_same_directory_clears_the_failure(dashboard_runs, tmp_path):
    from trustlab.core import registry as registry_module
    from trustlab.core.catalogue import method_info
    from trustlab.core.runner import run_experiment

    from .conftest import DashConfig, dash_run

    folder = tmp_path / "r"
    shutil.copytree(dashboard_runs / "ipb" / "failed", folder)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(registry_module._REGISTRY, "ipb",
                   registry_module.Experiment(method_info("ipb"), DashConfig, dash_run))
        run_experiment("ipb", out_dir=folder)
    assert (folder / "report.json").exists() and not (folder / "failed.json").exists()


def test_subject_comes_from_the_config(dashboard_runs):
    report = json.loads((dashboard_runs / "hcc" / "a" / "report.json").read_text())
    assert report["subject"] == {"models": ["organism:chat-s", "hf:local"]}
    assert report["status"] == "ok"

    class Nested(ExperimentConfig):
        data_dir: str | None = None
        acas_instances: int = 0
        suites: list[str] = Field(["a", "b"])
        threads: int = 1

    assert config_subject(Nested()) == {"suites": ["a", "b"]}  # unset and zero left out
    assert config_subject(Nested(acas_instances=5, data_dir="/d")) == {
        "data_dir": "/d", "acas_instances": 5, "suites": ["a", "b"]}

    class Declared(Nested):
        SUBJECT = ("threads",)

    assert config_subject(Declared()) == {"threads": 1}


def test_site_lists_every_run_with_status(site, dashboard_runs):
    by_rel = {r.rel: r.status for r in site.runs}
    assert by_rel == {"ipb/seed1": "ok", "ipb/seed2": "ok", "ipb/n80": "ok",
                      "ipb/failed": "failed", "hcc/a": "ok"}
    index = (dashboard_runs / "index.html").read_text()
    for rel, status in by_rel.items():  # readable without JavaScript: every run is in the HTML
        assert re.search(rf"<tr data-run='{rel}'[^>]*data-status='{status}'", index)
    assert (dashboard_runs / "compare" / "ipb.html").exists()
    assert not (dashboard_runs / "compare" / "hcc.html").exists()  # one run: nothing to compare
    failed_page = (dashboard_runs / "ipb" / "failed" / "report.html").read_text()
    assert "status-failed" in failed_page and "the toy model diverged at step 3" in failed_page
    assert "<code id=failed-stage>fit</code>" in failed_page


def _check_values(page: Page) -> None:
    for attrs, text in page.values:
        value = json.loads(attrs["data-value"])
        assert text == fmt(value), (text, value)


def test_every_number_shown_equals_report_json(site, dashboard_runs):
    for run in site.runs:
        page = parse(dashboard_runs / run.rel / "report.html")
        _check_values(page)
        if run.status != "ok":
            continue
        report = json.loads((dashboard_runs / run.rel / "report.json").read_text())
        shown = {}
        html = (dashboard_runs / run.rel / "report.html").read_text()
        for name, metric in report["metrics"].items():
            match = re.search(rf"<tr data-metric='{name}'><th scope=row>{name}</th>"
                              r"<td class=num data-value=\"([^\"]*)\"", html)
            shown[name] = json.loads(match.group(1).replace("&quot;", '"'))
            assert shown[name] == metric["value"]
        rows = report["tables"]["summary"]["rows"]
        table_values = [json.loads(a["data-value"]) for a, _ in page.values]
        assert all(v in table_values for row in rows for v in row)
    index = parse(dashboard_runs / "index.html")
    _check_values(index)
    headline_values = sorted(json.loads(a["data-value"]) for a, _ in index.values)
    expected = sorted(v for r in site.runs if r.status == "ok" for v in r.data["headline"].values())
    assert headline_values == expected
    compare = parse(dashboard_runs / "compare" / "ipb.html")
    _check_values(compare)


def test_compare_page_deltas_are_differences_against_the_baseline(site, dashboard_runs):
    html = (dashboard_runs / "compare" / "ipb.html").read_text()
    runs = {r.rel: r.data for r in site.runs if r.method_id == "ipb" and r.status == "ok"}
    base = min(runs, key=lambda rel: (runs[rel]["provenance"]["started_utc"], rel))
    assert f"<code id=baseline-name>{base}</code>" in html
    for rel, data in runs.items():
        if rel == base:
            continue
        for name in ("mean", "coverage", "n"):
            match = re.search(rf"data-run-col='{rel}' data-kind=delta data-delta=\"([^\"]+)\"",
                              html.split(f"<tr data-metric-row='{name}'>")[1].split("</tr>")[0])
            delta = json.loads(match.group(1))
            assert delta == pytest.approx(data["metrics"][name]["value"]
                                          - runs[base]["metrics"][name]["value"], abs=0)
    assert "Config differences" in html and "<th scope=row>n</th>" in html


def test_accessibility_basics_and_offline(site, dashboard_runs):
    for path in [site.path, *site.pages]:
        page = parse(path)
        assert page.headings and page.headings[0] == 1, path
        for before, after in zip(page.headings, page.headings[1:], strict=False):
            assert after <= before + 1, f"{path}: heading h{before} then h{after}"
        for img in page.images:
            assert img.get("alt", "").strip(), f"{path}: image without alt text"
        text = path.read_text()
        assert not re.search(r"(src|href)=['\"]?(https?:)?//", text), f"{path}: external resource"
        for src in page.scripts:
            assert src.endswith("_dashboard/dashboard.js")
    index = site.path.read_text()
    for control in ("filter-text", "filter-method", "filter-status"):
        assert f"<label for={control}>" in index  # every control is labelled and native
    assert "<button id=compare-button type=button>" in index
    assert (dashboard_runs / "_dashboard" / "dashboard.js").stat().st_size > 1000


def test_serve_site_serves_the_dashboard(site, dashboard_runs):
    server = serve_site(dashboard_runs, port=0, background=True)
    try:
        host, port = server.server_address[:2]
        with urllib.request.urlopen(f"http://{host}:{port}/index.html", timeout=10) as resp:
            assert resp.status == 200 and b"trustlab runs" in resp.read()
        with urllib.request.urlopen(f"http://{host}:{port}/ipb/seed1/report.json",
                                    timeout=10) as resp:
            assert json.loads(resp.read())["method_id"] == "ipb"
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(InputError, match="port"):
        serve_site(dashboard_runs, port=70000)
    with pytest.raises(InputError, match="not a directory"):
        serve_site(dashboard_runs / "index.html")


@settings(max_examples=40, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(st.sampled_from(["method_id", "error", "stage", "config",
                                                       "provenance", "subject", "x"]),
                                      kids, max_size=4), max_leaves=10))
def test_any_failure_record_is_shown_or_listed_as_damaged(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("fail")
    (root / "r").mkdir()
    (root / "r" / "failed.json").write_text(json.dumps(data))
    runs, damaged = collect_runs(root)
    assert len(runs) + len(damaged) == 1
    result = build_site(root)
    assert result.path.is_file()


def test_cli_report_serve_prints_the_url_and_serves(dashboard_runs):
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "trustlab.cli", "report", str(dashboard_runs),
                             "--serve", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
        assert first.startswith("4 report(s) indexed, 1 failed run(s): ")
        url = proc.stdout.readline().split()[4]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/index.html")
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert b"ipb/failed" in resp.read()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    bad = subprocess.run([sys.executable, "-m", "trustlab.cli", "report", str(dashboard_runs),
                          "--serve", "--port", "99999"], capture_output=True, text=True)
    assert bad.returncode == 2 and "port" in bad.stderr and "Traceback" not in bad.stderr
