"""A directory of runs for the dashboard tests: two methods, three good runs of one (two seeds and
one changed config), a failed run (it raises inside a stage), written by the real runner."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import Field

from trustlab.core import registry as registry_module
from trustlab.core.catalogue import method_info
from trustlab.core.config import ExperimentConfig
from trustlab.core.context import RunContext
from trustlab.core.figures import new_figure
from trustlab.core.report import Report
from trustlab.core.runner import run_experiment


class DashConfig(ExperimentConfig):
    models: list[str] = Field(["organism:chat-xs"], description="models evaluated")
    n: int = Field(40, ge=2, description="samples")
    fail: bool = Field(False, description="raise inside the 'fit' stage")
    QUICK: ClassVar[dict] = {}


def dash_run(config: DashConfig, ctx: RunContext) -> Report:
    report = ctx.report
    with ctx.stage("sample"):
        x = ctx.rng.normal(size=config.n)
    with ctx.stage("fit"):
        if config.fail:
            raise ValueError("the toy model diverged at step 3")
        report.metric("mean", float(x.mean()), headline=True, description="sample mean")
        report.metric("coverage", float((abs(x) < 1.96).mean()), headline=True, unit="")
        report.metric("n", config.n, description="samples")
        report.metric("tiny", float(x.std()) * 1e-7, description="a number shown with an exponent")
        report.table("summary", ([("stat"), ("value")], [["min", float(x.min())],
                                                          ["max", float(x.max())]]),
                     caption="extremes of the sample")
        fig, ax = new_figure(squeeze=True)
        ax.hist(x, bins=10)
        report.figure("hist", fig, caption="histogram of the sample",
                      alt="histogram of the normal sample")
        report.note("a toy run for the dashboard tests")
    return report


@pytest.fixture(scope="session")
def dashboard_runs(tmp_path_factory) -> Path:
    """``runs/`` with ipb/{seed1, seed2, n80, failed} and hcc/a (toy experiments)."""
    root = tmp_path_factory.mktemp("dashboard") / "runs"
    with pytest.MonkeyPatch.context() as mp:
        for method in ("ipb", "hcc"):
            mp.setitem(registry_module._REGISTRY, method,
                       registry_module.Experiment(method_info(method), DashConfig, dash_run))
        run_experiment("ipb", seed=1, out_dir=root / "ipb" / "seed1")
        run_experiment("ipb", seed=2, out_dir=root / "ipb" / "seed2")
        run_experiment("ipb", seed=1, overrides=["n=80"], out_dir=root / "ipb" / "n80")
        with pytest.raises(ValueError, match="diverged"):
            run_experiment("ipb", seed=3, overrides=["fail=true"], out_dir=root / "ipb" / "failed")
        run_experiment("hcc", seed=1, overrides=["models=[organism:chat-s, hf:local]"],
                       out_dir=root / "hcc" / "a")
    return root
