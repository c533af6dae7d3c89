"""The documented smol-chat run of issue 27 (docs/methods/asymmetry.md, "smol-chat"): a
character-level transform (leetspeak) on a model that reads any text, adapted by LoRA
fine-tuning on encoded benign data and by in-context examples. Slow (883 CPU-s measured:
100 LoRA steps at about 2.4 CPU-s, then 40 + 40 + 20 prompts in five cells); skips when
smol-chat is not built in TRUSTLAB_HOME. Session 42's measured run (transformed utility 0.00)
was judged with the early-stop bug of docs/methods/asymmetry.md and is withdrawn; the test
asserts that the protocol is reported for the in-scope character-level pairing, not that the
gate passes.
"""

from __future__ import annotations

import json
import math

import pytest

from trustlab.core import run_experiment

pytestmark = pytest.mark.slow

OVERRIDES = {
    "models": ["organism:smol-chat"],
    "transforms": ["leetspeak"],
    "adaptations": ["finetune", "icl"],
    "n_utility": 40,
    "n_harmful": 40,
    "n_overrefusal": 20,
    "max_new_tokens": 24,
    "lora_steps": 100,
    "n_train": 400,
}


def test_smol_chat_leetspeak_reports_the_protocol_for_both_adaptations(organism_home, tmp_path):
    from trustlab.organisms import is_built

    if not is_built("smol-chat", organism_home):
        pytest.skip("smol-chat is not built in TRUSTLAB_HOME (trustlab organisms build "
                    "smol-chat, then TRUSTLAB_TEST_HOME=<that home>)")
    run = run_experiment("asymmetry", overrides=OVERRIDES, seed=0, out_dir=tmp_path / "run")
    data = json.loads(run.report_path.read_text())
    t = data["tables"]["protocol"]
    rows = [dict(zip(t["columns"], r, strict=True)) for r in t["rows"]]
    main = {r["adaptation"]: r for r in rows if r["reference"] == "base plain"}
    assert set(main) == {"finetune", "icl"}
    assert "refused" not in data["tables"]  # a character-level transform is in scope here
    for r in main.values():
        assert r["level"] == "character" and 0 <= r["harm_reference"] <= 1
        for name in ("delta_harm", "delta_utility", "asymmetry"):
            lo, est, hi = r[f"{name}_lower"], r[name], r[f"{name}_upper"]
            assert all(math.isfinite(v) for v in (lo, est, hi)) and lo <= est <= hi, (name, r)
