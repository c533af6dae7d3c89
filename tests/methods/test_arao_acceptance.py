"""arao's resolving claims (issue 35) on the default harmful-request task with real detectors.

The experiment as a user runs it (``trustlab run arao``) with the hashing-embedding detector
and claim check (MiniLM's own run, whose figures are in docs/methods/arao.md, takes many minutes
of CPU). Seed 0 runs the default five repair replicates (about 26 s of CPU), seed 1 one replicate
(about 10 s). On both seeds:

* ARAO's planner finds evasions more often than random strategy search at the same budget on
  the same items, with a paired 95% interval above 0, and on every detector attacked;
* attribution on the dev split names failing axis directions whose removal restores
  detection in most successes;
* the repairs (axis-targeted, random augmentation, generic adversarial training with and
  without rewritten negatives, none) run at one augmentation budget.

On seed 0 (five replicates, paired Student-t intervals): axis-targeted repair beats no repair on
the adaptively re-attacked held-out set with an interval above 0 and keeps the original-set
ROC-AUC within the tolerance (non-inferiority). That it beats the *strongest* baseline is not
asserted because it does not hold on this detector (hashing-LR, pre-registered held-out seed 23,
20 replicates: -9.45 points, -11.92 to -6.97, against adversarial-mixed; docs/methods/arao.md).
The claim issue 35's Done-when item is measured on is on TF-IDF-LR with the ``axis-fixed``
variant (seed 23, 20 replicates: +4.44 points, +2.95 to +5.92, against adversarial training);
that run is ``tests/methods/test_arao_heldout.py`` (also acceptance).
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
}


@pytest.mark.parametrize("seed", [0, 1])
def test_planner_beats_random_search_and_attribution_restores_detection(tmp_path, seed):
    overrides = OVERRIDES if seed == 0 else {**OVERRIDES, "repair_replicates": 1}
    run_experiment("arao", overrides=overrides, seed=seed, out_dir=tmp_path / "run")
    run = tmp_path / "run"
    data = json.loads((run / "report.json").read_text())
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
    # 3. the repair comparison is run at equal budget against every baseline
    repairs = {r["repair"]: r for r in tables["repairs"]}
    assert set(repairs) == {"none", "random", "adversarial", "adversarial-balanced", "axis"}
    assert len({r["n_aug"] for r in tables["repairs"] if r["repair"] != "none"}) == 1  # equal budget
    if seed == 0:
        assert m["repair_replicates"] == 5
        cmp = {(r["baseline"], r["set"]): r for r in tables["repair_comparison"]}
        assert cmp[("none", "attacked")]["gain_low"] > 0, cmp[("none", "attacked")]
        assert m["repair_original_within_tolerance"] is True, cmp[("none", "original")]
        # NOT asserted (it does not hold, see the module docstring): m["repair_attacked_auc_gain_low_points"] > 0
    assert {"axis_heatmap", "repairs", "attack_success"} <= set(data["figures"])
