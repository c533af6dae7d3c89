"""arao's repair claim as measured (issue 35): the pre-registered held-out run, re-run.

docs/methods/arao.md, "Attribution-mass weighting and a pre-registered held-out run": claim
detector TF-IDF-LR, candidate ``axis-fixed`` (chosen on development seeds 7-9), held-out seed 23,
20 repair replicates (each re-draws the split), every baseline in the same run. The claim: the
Student-t 95% interval of ``axis-fixed`` minus the strongest baseline (highest mean attacked
ROC-AUC of none, random, adversarial, adversarial-balanced, adversarial-mixed) lies above 0, and
the original-set change against no repair is above -2 points at its lower end. Measured:
+4.44 (+2.95 to +5.92) points against ``adversarial``, original +0.10 (-0.00 to +0.19).

``acceptance`` (about 3 CPU-minutes under load, a 20-replicate run; CI's acceptance session had
≈865 s of headroom): the claim issue 35 is resolved on runs in CI. ``realdata`` because the claim is on the full corpus (AdvBench,
StrongREJECT and the harmless split under ../shared/data), which the bundled fallback is not.
"""

from __future__ import annotations

import json

import pytest

from trustlab.core import run_experiment
from trustlab.core.paths import shared_data_dir

pytestmark = [pytest.mark.acceptance, pytest.mark.realdata]

BASELINES = ("none", "random", "adversarial", "adversarial-balanced", "adversarial-mixed")


def test_axis_fixed_repair_beats_the_strongest_baseline_on_heldout_seed_23(tmp_path):
    if not (shared_data_dir("redteam").exists() and shared_data_dir("refusal").exists()):
        pytest.skip("the claim is on the full corpus: ../shared/data (redteam, refusal) is absent")
    overrides = {
        "detectors": ["tfidf-lr"], "repair_detector": "tfidf-lr", "embedder": "hashing",
        "similarity_threshold": 0.5, "word_baseline": False, "repair_replicates": 20,
        "repairs": [*BASELINES, "axis", "axis-fixed"],
    }  # fmt: skip
    run_experiment("arao", overrides=overrides, seed=23, out_dir=tmp_path / "run")
    data = json.loads((tmp_path / "run" / "report.json").read_text())
    assert not any("not found" in str(n) for n in data["notes"]), data["notes"]  # full corpus
    t = data["tables"]["repair_comparison"]
    cmp = {(r["repair"], r["baseline"], r["set"]): r for r in (dict(zip(t["columns"], x, strict=True)) for x in t["rows"])}
    att = [cmp[("axis-fixed", b, "attacked")] for b in BASELINES]
    strongest = max(att, key=lambda r: r["baseline_mean_auc"])
    assert strongest["replicates"] == 20
    assert strongest["gain_low"] > 0, strongest
    assert cmp[("axis-fixed", "none", "original")]["gain_low"] >= -2.0, cmp[("axis-fixed", "none", "original")]
