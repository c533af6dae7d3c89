import json
from typing import ClassVar

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from trustlab.core import ExperimentConfig, InputError, Report, RunContext, run_experiment
from trustlab.core import registry as registry_module
from trustlab.core.catalogue import method_info
from trustlab.core.html_index import render_index


class ToyConfig(ExperimentConfig):
    n: int = Field(1000, gt=1, description="samples")
    fail: bool = Field(False, description="raise in the middle of the run")
    QUICK: ClassVar[dict] = {"n": 50}


def toy_run(config: ToyConfig, ctx: RunContext) -> Report:
    report = ctx.report
    with ctx.stage("sample"):
        x = ctx.rng.normal(size=config.n)
    for _ in ctx.progress(range(3), description="loop"):
        pass
    report.metric("mean", float(x.mean()), headline=True, description="sample mean")
    report.metric("n", config.n)
    report.table("summary", pd.DataFrame({"stat": ["min", "max"], "value": [x.min(), x.max()]}))
    fig, ax = plt.subplots()
    ax.hist(x)
    report.figure("hist", fig, caption="histogram")
    if config.fail:
        raise RuntimeError("boom")
    report.note("a toy run")
    return report


@pytest.fixture
def toy(monkeypatch):
    """Register a toy experiment under a catalogue id for the duration of one test."""
    exp = registry_module.Experiment(method_info("ipb"), ToyConfig, toy_run)
    monkeypatch.setitem(registry_module._REGISTRY, "ipb", exp)
    return exp


def test_run_writes_complete_report(toy, tmp_path):
    result = run_experiment("ipb", quick=True, seed=3, out_dir=tmp_path / "r")
    data = json.loads(result.report_path.read_text())
    assert data["headline"] == {"mean": pytest.approx(np.random.default_rng(3).normal(size=50).mean())}
    assert data["config"] == {"n": 50, "fail": False}
    prov = data["provenance"]
    assert prov["seed"] == 3 and prov["quick"] is True and "numpy" in prov["packages"]
    assert set(prov["stages"]) == {"sample"} and prov["wall_time_s"] > 0
    assert (tmp_path / "r" / "figures" / "hist.png").stat().st_size > 1000
    md = (tmp_path / "r" / "report.md").read_text()
    assert "| mean |" in md and "![histogram](figures/hist.png)" in md


def test_same_seed_same_numbers_other_seed_differs(toy, tmp_path):
    a = run_experiment("ipb", seed=1, out_dir=tmp_path / "a").report.headline
    b = run_experiment("ipb", seed=1, out_dir=tmp_path / "b").report.headline
    c = run_experiment("ipb", seed=2, out_dir=tmp_path / "c").report.headline
    assert a == b and a != c


def test_failed_run_leaves_no_report(toy, tmp_path):
    with pytest.raises(RuntimeError):
        run_experiment("ipb", overrides=["fail=true"], out_dir=tmp_path / "f")
    assert not (tmp_path / "f" / "report.json").exists()


def test_html_index_lists_every_report(toy, tmp_path):
    run_experiment("ipb", seed=1, out_dir=tmp_path / "runs" / "ipb" / "one")
    run_experiment("ipb", seed=2, out_dir=tmp_path / "runs" / "ipb" / "two")
    index = render_index(tmp_path / "runs")
    page = index.read_text()
    assert page.count("<tr data-run=") == 2 and "ipb/one/report.html" in page
    assert "src='figures/hist.png'" in (tmp_path / "runs/ipb/one/report.html").read_text()
    assert "http" not in page.split("<body>")[1]  # offline: no external link or script


def test_report_rejects_bad_names_and_values():
    report = Report("x")
    with pytest.raises(InputError):
        report.metric("bad name", 1.0)
    with pytest.raises(InputError):
        report.metric("ok", [1, 2])
    with pytest.raises(InputError):
        report.table("t", 42)
    report.metric("nan", float("nan"))
    assert report.to_dict()["metrics"]["nan"]["value"] is None


def test_child_rngs_are_independent_and_reproducible(tmp_path):
    ctx = RunContext("ipb", seed=5, out_dir=tmp_path)
    a1 = ctx.child_rng("a").random(3)
    assert np.array_equal(a1, RunContext("ipb", seed=5, out_dir=tmp_path).child_rng("a").random(3))
    assert not np.array_equal(a1, ctx.child_rng("b").random(3))


def test_run_all_prints_plan_then_i_of_n(toy, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from trustlab.cli import app

    monkeypatch.setattr(registry_module, "implemented_ids", lambda: ["ipb"])
    result = CliRunner().invoke(app, ["run", "all", "--quick", "--quiet", "--out",
                                      str(tmp_path / "all")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("plan: 1 method(s), about ")
    assert lines[1].split()[:2] == ["1.", "ipb"]
    assert lines[2].startswith("[1/1] ipb: running (estimate ~")
    assert any(line.startswith("[1/1] ipb: done in ") for line in lines)
    assert lines[-1].startswith("all: 1 of 1 method(s) done in ")
    assert (tmp_path / "all" / "ipb" / "report.json").is_file()


def test_output_dir_is_checked_before_the_experiment_runs(toy, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    started = []
    exp = registry_module.Experiment(toy.info, toy.config_cls,
                                     lambda c, ctx: started.append(1) or toy_run(c, ctx))
    monkeypatch.setitem(registry_module._REGISTRY, "ipb", exp)
    for out in (blocker, blocker / "sub"):
        with pytest.raises(InputError, match="is a file"):
            run_experiment("ipb", quick=True, out_dir=out)
    with pytest.raises(InputError, match="seed"):
        run_experiment("ipb", quick=True, seed=-3, out_dir=tmp_path / "ok")
    assert started == []


def test_read_report_accepts_written_reports_and_names_damage(toy, tmp_path):
    from trustlab.core.errors import DataError
    from trustlab.core.html_index import read_report

    result = run_experiment("ipb", quick=True, out_dir=tmp_path / "r")
    assert read_report(result.report_path)["method_id"] == "ipb"
    for text, why in [("[]", "JSON list"), ("{}", "empty object"), ('{"headline": {}}',
                      "no 'method_id'"), ('{"method_id": 3, "headline": {}}', "'method_id' is a int"),
                      ('{"method_id": "a", "headline": []}', "'headline' is a list")]:
        (tmp_path / "bad.json").write_text(text)
        with pytest.raises(DataError, match=why):
            read_report(tmp_path / "bad.json")


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.floats() | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(st.sampled_from(["method_id", "headline", "metrics",
                                                       "figures", "tables", "notes", "x"]),
                                      kids, max_size=4), max_leaves=12))
def test_index_never_crashes_on_arbitrary_json(tmp_path_factory, data):
    """Any JSON document as report.json: indexed or listed as damaged, never an exception."""
    from trustlab.core.html_index import index_reports

    root = tmp_path_factory.mktemp("idx")
    (root / "r").mkdir()
    (root / "r" / "report.json").write_text(json.dumps(data))
    result = index_reports(root)
    assert len(result.indexed) + len(result.damaged) == 1
    assert result.path.is_file()
