"""`trustlab organisms list|build|evaluate-public` through typer's test runner."""

from __future__ import annotations

import dataclasses

import pytest
from typer.testing import CliRunner

from trustlab.organisms.cli import app
from trustlab.organisms.specs import SPECS, ModelShape, TrainSettings

runner = CliRunner()


def test_list_shows_every_organism_and_its_cache_state(chat_xs, organism_home):
    result = runner.invoke(app, ["list"], env={"TRUSTLAB_HOME": str(organism_home)})
    assert result.exit_code == 0, result.output
    for name in SPECS:
        assert name in result.output
    row = next(line for line in result.output.splitlines() if "chat-xs" in line)
    assert "yes" in row and "harmful_refusal=" in row


def test_build_reports_the_card_and_unknown_names_exit_2(tmp_path, monkeypatch):
    pytest.importorskip("torch", reason="organisms need trustlab[llm] (torch)")
    tiny = dataclasses.replace(
        SPECS["chat-xs"],
        shape=ModelShape(n_layers=1, d_model=16, n_heads=2, d_mlp=32),
        train=TrainSettings(steps=3, batch_size=4),
        n_train=300,
        n_heldout=10,
    )
    monkeypatch.setitem(SPECS, "chat-xs", tiny)
    env = {"TRUSTLAB_HOME": str(tmp_path)}
    result = runner.invoke(app, ["build", "chat-xs", "--quiet"], env=env)
    assert result.exit_code == 0, result.output
    assert "chat-xs:" in result.output and (tmp_path / "organisms" / "chat-xs").is_dir()
    result = runner.invoke(app, ["build", "nope"], env=env)
    assert result.exit_code == 2
    assert "Unknown organism 'nope'" in result.output


def test_evaluate_public_bad_input_is_a_one_line_error(tmp_path):
    env = {"TRUSTLAB_HOME": str(tmp_path)}
    for args, message in (
        (["evaluate-public", "nope"], "Unknown organism 'nope'"),
        (["evaluate-public", "chat-s"], "not built"),
    ):
        result = runner.invoke(app, args, env=env)
        assert result.exit_code == 2 and message in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1
