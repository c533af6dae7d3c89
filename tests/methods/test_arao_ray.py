"""arao on the ray backend (issue 36): the repair replicates are work units.

The quick config's metrics (headline and every other one) are identical on the local backend
and on a local 2-CPU Ray (loopback only), the Ray run ran its units on Ray and recorded them,
and re-running into the same directory takes every unit from the record with the same metrics.
"""

from __future__ import annotations

import json
import os

import pytest

from trustlab.core.runner import run_experiment

ray = pytest.importorskip("ray", reason="the ray backend needs trustlab[dist] (make setup)")

pytestmark = pytest.mark.acceptance


def _metrics(out):
    data = json.loads((out / "report.json").read_text())
    return {k: v["value"] for k, v in data["metrics"].items()}, data["provenance"]


def test_quick_config_identical_on_local_and_ray_and_resumes(organism_home, tmp_path):
    from trustlab.core.units import RayBackend

    saved = os.environ.pop("RAY_ADDRESS", None)
    backend = RayBackend(num_cpus=2, retries=2)
    try:
        remote = run_experiment("arao", quick=True, out_dir=tmp_path / "ray", backend=backend)
    finally:
        backend.close()
        if saved is not None:
            os.environ["RAY_ADDRESS"] = saved
    local = run_experiment("arao", quick=True, out_dir=tmp_path / "local")
    (a, _), (b, prov_b) = _metrics(tmp_path / "local"), _metrics(tmp_path / "ray")
    assert a == b
    assert local.report.headline and set(local.report.headline) == set(remote.report.headline)
    assert prov_b["backend"] == "ray" and prov_b["sweeps"]["arao-repairs"]["units"] == a["repair_replicates"] == 2
    assert len(list((tmp_path / "ray" / "units" / "arao-repairs").iterdir())) == 2
    # resume: the same run into the same directory takes every replicate from the record
    run_experiment("arao", quick=True, out_dir=tmp_path / "local")
    c, prov_c = _metrics(tmp_path / "local")
    assert c == a and prov_c["sweeps"]["arao-repairs"]["resumed"] == 2
