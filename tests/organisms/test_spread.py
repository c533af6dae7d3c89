"""The seed spread of an organism's metrics (docs/organisms.md, *Across machines and seeds*)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from typer.testing import CliRunner

from trustlab.core.errors import InputError
from trustlab.organisms.cli import app
from trustlab.organisms.specs import SPECS, ModelShape, TrainSettings

pytest.importorskip("torch", reason="organisms need trustlab[llm] (torch)")


@pytest.fixture
def tiny_chat_xs(monkeypatch):
    tiny = dataclasses.replace(
        SPECS["chat-xs"],
        shape=ModelShape(n_layers=1, d_model=16, n_heads=2, d_mlp=32),
        train=TrainSettings(steps=3, batch_size=4),
        n_train=300,
        n_heldout=10,
    )
    monkeypatch.setitem(SPECS, "chat-xs", tiny)
    return tiny


def test_each_seed_is_built_once_and_the_spread_is_its_statistics(tiny_chat_xs, tmp_path):
    from trustlab.organisms.registry import build, read_card
    from trustlab.organisms.spread import seed_card, seed_dir, seed_spread, spread_table

    build("chat-xs", home=tmp_path)  # seed 0 on this kernel: the cached organism's card
    spread = seed_spread("chat-xs", [0, 2], home=tmp_path)
    assert not seed_dir("chat-xs", 0, tmp_path).exists()
    assert seed_dir("chat-xs", 2, tmp_path).is_dir()
    card0, card2 = seed_card("chat-xs", 0, home=tmp_path), seed_card("chat-xs", 2, home=tmp_path)
    assert card0 == read_card("chat-xs", tmp_path) and card2["seed"] == 2
    assert card0["corpus"]["chat"]["sha256"] != card2["corpus"]["chat"]["sha256"]
    for metric, m in spread["metrics"].items():
        values = [card0["metrics"].get(metric, math.nan), card2["metrics"].get(metric, math.nan)]
        assert m["values"] == values
        finite = [v for v in values if not math.isnan(v)]
        assert m["mean"] == pytest.approx(sum(finite) / len(finite))
        if len(finite) == 2:
            assert m["sd"] == pytest.approx(abs(finite[0] - finite[1]) / math.sqrt(2))
    assert spread["targets"]["benign_exact_match"] == [">=", 0.35]
    assert "| benign_exact_match |" in spread_table(spread)
    stamp = (seed_dir("chat-xs", 2, tmp_path) / "card.json").stat().st_mtime_ns
    seed_spread("chat-xs", [2], home=tmp_path)  # cached: not rebuilt
    assert (seed_dir("chat-xs", 2, tmp_path) / "card.json").stat().st_mtime_ns == stamp


def test_bad_spread_requests_name_the_problem(tiny_chat_xs, tmp_path):
    from trustlab.organisms.spread import seed_card, seed_spread

    with pytest.raises(InputError, match="distinct seeds"):
        seed_spread("chat-xs", [1, 1], home=tmp_path)
    with pytest.raises(InputError, match="'seed'"):
        seed_card("chat-xs", -1, home=tmp_path)
    with pytest.raises(InputError, match="grown organisms only"):
        seed_card("smol-chat", 0, home=tmp_path)
    result = CliRunner().invoke(
        app, ["spread", "chat-xs", "--seeds", "0,x"], env={"TRUSTLAB_HOME": str(tmp_path)}
    )
    assert result.exit_code == 2 and "--seeds" in result.output
