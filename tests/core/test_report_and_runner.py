import json
from typing import ClassVar

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
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
    assert page.count("<h2") == 2 and "ipb/one/figures/hist.png" in page
    assert "<script" not in page and "http" not in page.split("<body>")[1]


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
