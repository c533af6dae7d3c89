"""Building and caching: deterministic builds, atomic writes, clear errors."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("torch", reason="organisms need trustlab[llm] (torch)")

from safetensors.torch import load_file

from trustlab.core.errors import DataError, InputError
from trustlab.organisms import registry
from trustlab.organisms.specs import SPECS, ModelShape, TrainSettings

TINY = dataclasses.replace(
    SPECS["chat-xs"],
    name="chat-xs",
    shape=ModelShape(n_layers=1, d_model=16, n_heads=2, d_mlp=32),
    train=TrainSettings(steps=6, batch_size=8),
    n_train=400,
    n_heldout=20,
)


@pytest.fixture
def tiny_spec(monkeypatch):
    """Swap chat-xs for a seconds-long spec (the real one is exercised by test_chat_xs)."""
    monkeypatch.setitem(SPECS, "chat-xs", TINY)
    return TINY


def test_same_seed_gives_bit_identical_weights_and_metrics(tmp_path, tiny_spec):
    a = registry.build("chat-xs", home=tmp_path / "a")
    b = registry.build("chat-xs", home=tmp_path / "b")
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys()
    assert all((wa[k] == wb[k]).all() for k in wa)
    card_a, card_b = (registry.read_card("chat-xs", home=tmp_path / h) for h in "ab")
    assert card_a["metrics"] == card_b["metrics"]
    assert card_a["training"]["final_loss"] == card_b["training"]["final_loss"]


def test_another_seed_gives_other_weights(tmp_path, monkeypatch, tiny_spec):
    a = registry.build("chat-xs", home=tmp_path / "a")
    monkeypatch.setitem(SPECS, "chat-xs", dataclasses.replace(TINY, seed=1))
    b = registry.build("chat-xs", home=tmp_path / "b")
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert any(wa[k].shape != wb[k].shape or (wa[k] != wb[k]).any() for k in wa)


def test_interrupted_build_leaves_no_half_organism(tmp_path, monkeypatch, tiny_spec):
    from trustlab.organisms import build_grown

    def explode(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(build_grown, "train_lm", explode)
    with pytest.raises(KeyboardInterrupt):
        registry.build("chat-xs", home=tmp_path)
    assert not registry.is_built("chat-xs", home=tmp_path)
    assert list((tmp_path / "organisms").iterdir()) == []


def test_cached_build_is_reused_and_force_rebuilds(tmp_path, tiny_spec):
    path = registry.build("chat-xs", home=tmp_path)
    created = registry.read_card("chat-xs", home=tmp_path)["build_seconds"]
    assert registry.build("chat-xs", home=tmp_path) == path
    assert registry.read_card("chat-xs", home=tmp_path)["build_seconds"] == created
    registry.build("chat-xs", home=tmp_path, force=True)
    assert registry.is_built("chat-xs", home=tmp_path)
    assert [p.name for p in (tmp_path / "organisms").iterdir()] == ["chat-xs"]


def test_load_builds_a_missing_organism_and_reports_progress(tmp_path, tiny_spec):
    seen = []
    model, tokenizer = registry.load(
        "chat-xs", home=tmp_path, progress=lambda d, c, t: seen.append((d, c, t))
    )
    assert model.config.num_hidden_layers == 1
    assert tokenizer.chat_template
    assert seen[-1] == ("training chat-xs", 6, 6)


def test_errors_are_one_line_and_actionable(tmp_path):
    with pytest.raises(InputError, match="Known organisms: chat-xs"):
        registry.build("chat-xxl", home=tmp_path)
    with pytest.raises(DataError, match="trustlab organisms build chat-s"):
        registry.read_card("chat-s", home=tmp_path)
    with pytest.raises(DataError, match="not built"):
        registry.load("chat-s", home=tmp_path, build_missing=False)


def test_trustlab_home_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TRUSTLAB_HOME", str(tmp_path))
    assert registry.organism_dir("chat-s") == tmp_path / "organisms" / "chat-s"
    monkeypatch.delenv("TRUSTLAB_HOME")
    assert registry.trustlab_home().parts[-2:] == (".cache", "trustlab")


def test_two_processes_building_one_organism_train_it_once(tmp_path, monkeypatch):
    """The build lock: a second process building the same organism into the same home waits for
    the first (it logs that it waits), then reuses its build: one training, one build_seconds."""
    import logging
    import multiprocessing
    import os
    import time

    home, calls, waiting, release = (tmp_path / n for n in ("home", "calls", "waiting", "release"))

    def fake_build_into(spec, out, progress):  # a "training" that lasts until released
        with calls.open("a") as f:
            f.write(f"{os.getpid()}\n")
        deadline = time.monotonic() + 30
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return {"metrics": {}}

    class Waiting(logging.Handler):
        def emit(self, record):
            if "waiting for another process" in record.getMessage():
                waiting.touch()

    def child(queue, watch):
        if watch:  # the wait is logged by the cache lock the registry holds
            logging.getLogger("trustlab.core.paths").addHandler(Waiting())
            logging.getLogger("trustlab.core.paths").setLevel(logging.INFO)
        queue.put(str(registry.build("chat-xs", home=home)))

    def wait_for(path):
        deadline = time.monotonic() + 30
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert path.exists(), f"timed out waiting for {path.name}"

    monkeypatch.setattr(registry, "_build_into", fake_build_into)
    ctx = multiprocessing.get_context("fork")  # the children inherit the fake build
    queue = ctx.Queue()
    first = ctx.Process(target=child, args=(queue, False))
    first.start()
    wait_for(calls)  # the first is training, holding the lock
    second = ctx.Process(target=child, args=(queue, True))
    second.start()
    wait_for(waiting)  # the second found the lock held
    release.touch()
    results = [queue.get(timeout=30), queue.get(timeout=30)]
    for process in (first, second):
        process.join(timeout=30)
        assert process.exitcode == 0
    assert results == [str(registry.organism_dir("chat-xs", home))] * 2
    assert len(calls.read_text().split()) == 1  # trained once
    card = registry.read_card("chat-xs", home=home)
    assert card["build_seconds"] > 0
    assert [p.name for p in (home / "organisms").iterdir()] == ["chat-xs"]
