"""The script behind issue 27's smol-chat claim (``benchmarks/asymmetry_smol_run.py``, the
documented slow run: 3,090 CPU-s on smol-chat, docs/methods/asymmetry.md) runs end to end in CI
on chat-xs at a smoke size: the learning curve at the asked steps, the development gate, and the
held-out protocol — skipped under ``--heldout gated`` when the gate fails, run under ``always``
(session 47's pre-registered rule) — with rates and verdicts only, never reply text.

About 15 CPU-s (two 4-step fine-tunings of chat-xs and a 5 + 5 + 5 item protocol).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.acceptance

BENCH = Path(__file__).parents[2] / "benchmarks"


def _run(out: Path, heldout: str) -> dict:
    sys.path.insert(0, str(BENCH))
    try:
        import asymmetry_smol_run
    finally:
        sys.path.remove(str(BENCH))
    asymmetry_smol_run.main([
        "--model", "organism:chat-xs", "--transform", "word_reverse", "--steps", "4",
        "--eval-every", "2", "--n-dev", "5", "--n-heldout", "5", "5", "5",
        "--heldout", heldout, "--out", str(out),
    ])  # fmt: skip
    return json.loads((out / "result.json").read_text())


def test_the_slow_run_script_gates_or_always_runs_the_heldout_protocol(chat_xs, tmp_path):
    gated = _run(tmp_path / "gated", "gated")
    # 4 steps cannot teach chat-xs the transform: the development gate fails
    assert gated["dev_gate"] is False
    assert [p["step"] for p in gated["curve"]] == [0, 2, 4]
    assert "protocol" not in gated and not (tmp_path / "gated" / "adapted").exists()

    always = _run(tmp_path / "always", "always")
    assert always["dev_gate"] is False and always["curve"] == [
        {**p, "eval_cpu_s": q["eval_cpu_s"], "cpu_s": q["cpu_s"]}
        for p, q in zip(gated["curve"], always["curve"], strict=True)
    ]  # same seeds, same curve: only the held-out rule differs
    rows = always["protocol"]
    assert [r["reference"] for r in rows] == ["base plain", "adapted plain"]
    for r in rows:
        assert r["n_utility"] == 5 and r["n_harm"] == 5
        assert r["delta_harm"] == pytest.approx(r["harm_transformed"] - r["harm_reference"])
        assert r["delta_harm_lower"] <= r["delta_harm"] <= r["delta_harm_upper"]
        assert r["gate_passed"] == (r["utility_transformed"] >= rows[0]["utility_reference"] - 0.1)
    text = (tmp_path / "always" / "result.json").read_text()
    assert "reply" not in text and "response" not in text  # verdicts and rates only
