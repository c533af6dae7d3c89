"""Contracts every registered method must meet, parametrised over the registry.

- ``trustlab run <id> --quick`` succeeds through the CLI in under 60 s and writes a valid
  report with at least one headline metric;
- the same seed gives the same headline metrics twice;
- the config rejects unknown keys and values outside its declared constraints;
- the method has a docs page, a benchmark, and a row in the README table.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import annotated_types
import pytest

from trustlab.core import (
    ConfigError,
    get_experiment,
    implemented_ids,
    resolve_config,
    run_experiment,
)
from trustlab.core.report import REPORT_SCHEMA_VERSION

REPO_ROOT = Path(__file__).resolve().parents[1]

IDS = implemented_ids()
QUICK_LIMIT_S = 60.0


@pytest.fixture(scope="module", params=IDS)
def quick_run(request, tmp_path_factory, chat_xs):
    """One quick CLI run per method, shared by the checks below.

    Depends on ``chat_xs`` so that the session's organism build (about a minute, once per test
    session) is not charged to the 60 s budget of a method whose quick preset uses it.
    """
    method_id = request.param
    out = tmp_path_factory.mktemp(method_id.replace("-", "_")) / "run"
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "trustlab.cli", "run", method_id, "--quick", "--seed", "7",
         "--out", str(out), "--quiet"],
        capture_output=True, text=True, timeout=300,
    )
    elapsed = time.perf_counter() - start
    return method_id, out, proc, elapsed


def test_quick_run_succeeds_fast(quick_run):
    method_id, _out, proc, elapsed = quick_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert elapsed < QUICK_LIMIT_S, f"{method_id} --quick took {elapsed:.1f} s"
    assert "report:" in proc.stdout


def test_quick_run_writes_valid_report(quick_run):
    method_id, out, proc, _ = quick_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "report.json").read_text())
    assert data["schema_version"] == REPORT_SCHEMA_VERSION
    assert data["method_id"] == method_id
    assert data["headline"], "at least one headline metric"
    assert all(isinstance(v, int | float | bool | str) for v in data["headline"].values())
    assert data["provenance"]["seed"] == 7 and data["provenance"]["quick"] is True
    assert data["config"] == get_experiment(method_id).config_cls(**data["config"]).model_dump(
        mode="json"
    ), "the recorded config rebuilds the run"
    for fig in data["figures"].values():
        assert (out / fig["path"]).is_file()
    assert (out / "report.md").is_file()


def test_same_seed_same_headline(quick_run, tmp_path):
    method_id, out, proc, _ = quick_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = json.loads((out / "report.json").read_text())["headline"]
    again = run_experiment(method_id, quick=True, seed=7, out_dir=tmp_path / "again")
    assert json.loads(again.report_path.read_text())["headline"] == first


@pytest.mark.parametrize("method_id", IDS)
def test_config_rejects_unknown_and_out_of_range(method_id):
    config_cls = get_experiment(method_id).config_cls
    with pytest.raises(ConfigError, match="Unknown config key"):
        resolve_config(config_cls, overrides=["no_such_key_xyz=1"])
    resolve_config(config_cls)  # defaults validate
    resolve_config(config_cls, quick=True)  # the quick preset validates
    checked = 0
    for name, field in config_cls.model_fields.items():
        for bad in _violations(field.metadata):
            with pytest.raises(ConfigError, match=name):
                resolve_config(config_cls, quick=True, overrides={name: bad})
            checked += 1
    assert checked or not config_cls.model_fields, "declare constraints (gt, ge, Literal) on fields"


def _violations(metadata) -> list[float]:
    bad = []
    for item in metadata:
        if isinstance(item, annotated_types.Gt):
            bad.append(item.gt)
        elif isinstance(item, annotated_types.Ge):
            bad.append(item.ge - 1)
        elif isinstance(item, annotated_types.Lt):
            bad.append(item.lt)
        elif isinstance(item, annotated_types.Le):
            bad.append(item.le + 1)
    return bad


@pytest.mark.parametrize("method_id", IDS)
def test_method_has_docs_benchmark_and_readme_row(method_id):
    assert (REPO_ROOT / "docs" / "methods" / f"{method_id}.md").is_file()
    page = (REPO_ROOT / "docs" / "methods" / f"{method_id}.md").read_text()
    named = re.findall(r"benchmarks/([A-Za-z0-9_]+\.py)", page)
    assert named, f"docs/methods/{method_id}.md names no benchmarks/<file>.py"
    for name in named:
        assert (REPO_ROOT / "benchmarks" / name).is_file(), f"benchmarks/{name} is missing"
    readme = (REPO_ROOT / "README.md").read_text()
    row = next((line for line in readme.splitlines() if line.startswith(f"| `{method_id}` ")), "")
    assert "implemented" in row, f"README row of {method_id} should say it is implemented"


def test_readme_table_matches_registry():
    """No method is called implemented before it is, and every implemented one says so."""
    from trustlab.core.catalogue import CATALOGUE

    readme = (REPO_ROOT / "README.md").read_text()
    for info in CATALOGUE:
        row = next((ln for ln in readme.splitlines() if ln.startswith(f"| `{info.id}` ")), None)
        assert row is not None, f"README has no row for {info.id}"
        status = row.split("|")[4].strip()
        implemented = status.startswith("implemented")
        assert implemented == (info.id in IDS), (info.id, status)
        assert implemented or status == "planned", (info.id, status)


@pytest.mark.parametrize("method_id", IDS)
def test_docs_page_documents_every_config_key(method_id):
    page = (REPO_ROOT / "docs" / "methods" / f"{method_id}.md").read_text()
    config_cls = get_experiment(method_id).config_cls
    missing = [name for name in config_cls.model_fields if f"`{name}`" not in page]
    assert not missing, f"docs/methods/{method_id}.md lacks config keys {missing}; paste `trustlab config {method_id}`"
