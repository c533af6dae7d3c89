"""gradshield on the ray backend (issue 36): its fine-tuning cells are work units, so the quick
config gives the same metrics on a local 2-CPU Ray (``ray.init(num_cpus=2)``, loopback only)
as on the local backend, and a re-run into the same directory takes every cell from the store.

About 45 s of CPU (two quick runs without the cell cache, plus Ray's start).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="gradshield needs trustlab[llm] (torch)")
ray = pytest.importorskip("ray", reason="the ray backend needs trustlab[dist] (make setup)")

#: Wall-clock measurements: they differ between any two runs, whatever the backend.
TIMINGS = {"gradshield_seconds_per_example", "filter_cost_vs_finetuning"}


def _metrics(out: Path) -> dict:
    raw = json.loads((out / "report.json").read_text())["metrics"]
    return {k: v["value"] for k, v in raw.items() if k not in TIMINGS}


@pytest.mark.acceptance
def test_quick_config_identical_on_local_and_ray_and_resumes(chat_xs, tmp_path):
    from trustlab.core.runner import run_experiment
    from trustlab.core.units import RayBackend

    over = {"cache": False}  # both runs fine-tune every cell (no shared cell cache)
    local = run_experiment("gradshield", quick=True, overrides=over, out_dir=tmp_path / "local")
    saved = os.environ.pop("RAY_ADDRESS", None)
    cluster = RayBackend(num_cpus=2, retries=1)  # after organism_home: workers see chat-xs
    try:
        remote = run_experiment("gradshield", quick=True, overrides=over,
                                out_dir=tmp_path / "ray", backend=cluster)
        again = run_experiment("gradshield", quick=True, overrides=over,
                               out_dir=tmp_path / "ray", backend=cluster)
    finally:
        cluster.close()
        if saved is not None:
            os.environ["RAY_ADDRESS"] = saved
    a, b = _metrics(tmp_path / "local"), _metrics(tmp_path / "ray")
    assert a and a == b
    assert set(local.report.headline) == set(remote.report.headline)
    assert "explicit_worst_asr_unfiltered" in a and a["explicit_worst_asr_unfiltered"] > 0.06
    prov = json.loads((tmp_path / "ray" / "report.json").read_text())["provenance"]
    assert prov["backend"] == "ray"
    sweep = prov["sweeps"]["gradshield-cells"]
    assert sweep["backend"] == "ray" and sweep["units"] >= 6 and sweep["failed"] == 0
    # the re-run took every cell from the run directory's store and reports the same metrics
    assert again.report.provenance["sweeps"]["gradshield-cells"]["resumed"] == sweep["units"]
    assert _metrics(tmp_path / "ray") == a
