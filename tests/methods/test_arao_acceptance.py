"""arao's resolving claims (issue 35) on the default harmful-request task with real detectors.

The experiment as a user runs it (``trustlab run arao``) with the hashing-embedding detector
and claim check, about 12 s of CPU per seed (MiniLM's own run, whose figures are in
docs/methods/arao.md, takes about 5 minutes of CPU). On two seeds:

* ARAO's planner finds evasions more often than random strategy search at the same budget on
  the same items, with a paired 95% interval above 0, and on every detector attacked;
* attribution on the dev split names failing axis directions whose removal restores
  detection in most successes;
* the repairs (axis-targeted, random augmentation, generic adversarial training, none) run at
  one augmentation budget. That axis-targeted repair beats the strongest of them is not
  established from a clean checkout (see the note in the test) and is not asserted.
"""

from __future__ import annotations

import json

import pytest

from trustlab.core import run_experiment

pytestmark = pytest.mark.acceptance

OVERRIDES = {
    "detectors": ["hashing-lr", "tfidf-lr"],
    "repair_detector": "hashing-lr",
    "embedder": "hashing",
    "similarity_threshold": 0.5,
    "word_baseline": False,
    "repair_replicates": 1,
}


@pytest.mark.parametrize("seed", [0, 1])
def test_planner_beats_random_search_and_attribution_restores_detection(tmp_path, seed):
    run = run_experiment("arao", overrides=OVERRIDES, seed=seed, out_dir=tmp_path / "run")
    data = json.loads(run.report_path.read_text())
    m = {k: v["value"] for k, v in data["metrics"].items()}
    tables = {k: [dict(zip(t["columns"], r, strict=True)) for r in t["rows"]] for k, t in data["tables"].items()}
    # 1. planner vs random strategy search, equal budget, paired on the same items
    assert m["success_arao"] > m["success_random"], m
    assert m["success_gain_over_random_low"] > 0, m
    assert m["planner_beats_random_all_detectors"] is True, tables["planner_comparison"]
    attacks = {(r["detector"], r["planner"]): r for r in tables["attacks"]}
    assert attacks[("hashing-lr", "arao")]["n_detected"] >= 60  # enough flagged items to judge
    # 2. attribution: the failing directions restore detection when removed
    attr = [r for r in tables["attribution"] if r["detector"] == "hashing-lr"]
    failing = m["top_failing_axis"].split(", ")
    assert "surrogate" not in data["metrics"]["top_failing_axis"]["description"]  # the rule, not the fallback
    for name in failing:
        row = next(r for r in attr if r["direction"] == name)
        assert row["n_moved"] >= 2 and row["restore_rate"] >= 0.5, row
    # 3. the repair comparison is run at equal budget against every baseline. Whether
    # axis-targeted repair beats the strongest baseline is NOT asserted: from a clean checkout
    # (the bundled data, with or without ../shared) its paired lower bound was -14.2 points
    # (seed 0) -- the claim is open in issue 35 and stated so in docs/methods/arao.md.
    repairs = {r["repair"]: r for r in tables["repairs"]}
    assert set(repairs) == {"none", "random", "adversarial", "axis"}
    assert len({r["n_aug"] for k, r in repairs.items() if k != "none"}) == 1  # equal budget
    assert {"axis_heatmap", "repairs", "attack_success"} <= set(data["figures"])
