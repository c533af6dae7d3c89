"""Experiment config, quick run (report contents) and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from trustlab.core.errors import ConfigError
from trustlab.methods.bribery import synthetic_leaderboard


def test_config_rejects_bad_values():
    from pydantic import ValidationError

    from trustlab.methods.bribery.experiment import BriberyConfig

    BriberyConfig()
    for bad in ({"rules": ["plurality"]}, {"n_synthetic_models": 1}, {"time_limit": 0},
                {"leaderboards": ["nope"]}, {"unknown_key": 1}):
        with pytest.raises((ValidationError, ConfigError)):
            BriberyConfig(**bad)


def test_synthetic_is_seeded_and_labelled():
    a = synthetic_leaderboard(50, 6, rng=np.random.default_rng(1))
    b = synthetic_leaderboard(50, 6, rng=np.random.default_rng(1))
    c = synthetic_leaderboard(50, 6, rng=np.random.default_rng(2))
    np.testing.assert_array_equal(a.scores, b.scores)
    assert not np.array_equal(a.scores, c.scores)
    assert "SYNTHETIC" in a.name and a.models[0].startswith("synthetic")
    assert ((a.scores >= 0) & (a.scores <= 100)).all()
    # a general factor: dataset scores are positively correlated
    corr = np.corrcoef(synthetic_leaderboard(500, 6).scores.T)
    assert corr[np.triu_indices(6, 1)].mean() > 0.3


def test_cli_robustness(tmp_path):
    from trustlab.cli import _mount_method_clis, app

    _mount_method_clis(["bribery"])
    path = tmp_path / "s.csv"
    path.write_text("model,a,b,c\nX,0.9,0.1,0.5\nY,0.8,0.7,0.5\nZ,0.1,0.9,0.4\n")
    runner = CliRunner()
    res = runner.invoke(app, ["bribery", "robustness", str(path), "--rule", "mean", "--target", "Z"])
    assert res.exit_code == 0, res.output
    assert "Z: 1 of 3 datasets" in res.output and ": a" in res.output
    res = runner.invoke(app, ["bribery", "robustness", str(path), "--rule", "borda"])
    assert "median robustness under borda" in res.output


def test_quick_run_writes_a_sane_report(tmp_path):
    from trustlab.core import run_experiment

    result = run_experiment("bribery", quick=True, seed=0, out_dir=tmp_path, quiet=True)
    report = json.loads((tmp_path / "report.json").read_text())
    assert "median_robustness_bbh24_mwr" in json.dumps(report["metrics"])
    assert {"robustness_by_rule", "per_model", "paper_comparison"} <= set(report["tables"])
    assert result.report.metrics["median_robustness_bbh24_mwr"].value == 22
    assert (tmp_path / "figures" / "robustness_bbh24.png").exists()


def _cli_error(args: list[str]) -> str:
    """Run the real CLI; it must exit 2 with a one-line error (no traceback)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "trustlab.cli", *args], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr


def test_cli_lists_what_it_read_and_has_the_options_its_messages_name(tmp_path):
    from trustlab.cli import _mount_method_clis, app

    _mount_method_clis(["bribery"])
    runner = CliRunner()
    path = tmp_path / "s.csv"
    path.write_text("id,org,model,params_B,a,b\n1,m,X,7,0.9,0.1\n2,g,Y,8,0.8,0.7\n3,m,Z,9,0.1,0.9\n")
    res = runner.invoke(app, ["bribery", "robustness", str(path), "--rule", "mean"])
    assert res.exit_code == 0, res.output
    assert "not taken as scores: id" in res.output and "params_B (a model size)" in res.output
    assert "of 2 datasets" in res.output
    dup = tmp_path / "dup.csv"
    dup.write_text("model,a,b\nX,0.9,0.1\nX,0.8,0.7\nZ,0.1,0.9\n")
    err = _cli_error(["bribery", "robustness", str(dup)])
    assert "--duplicates first|last" in err
    res = runner.invoke(app, ["bribery", "robustness", str(dup), "--duplicates", "last"])
    assert res.exit_code == 0 and "kept the last row" in res.output
    comma = tmp_path / "comma.csv"
    comma.write_text("model;a;b\nX;0,9;0,1\nY;0,8;0,7\n")
    assert "--decimal ," in _cli_error(["bribery", "robustness", str(comma)])
    res = runner.invoke(app, ["bribery", "robustness", str(comma), "--decimal", ","])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["bribery", "robustness", str(path), "--datasets", "a"])
    assert res.exit_code == 0 and "of 1 datasets" in res.output


def test_condorcet_infeasibility_names_the_model_that_blocks():
    from trustlab.methods.bribery import robustness

    s = np.array([[0.5, 0.6, np.nan], [np.nan, np.nan, 0.9], [0.4, 0.2, np.nan]])
    r = robustness(s, 0, "condorcet")
    assert not r.feasible
    assert "'m1' (they share no dataset)" in r.reason
