"""Issue 29's acceptance: `trustlab run isc` end to end on the whole 53-workflow library in the
three interaction settings, on scripted backends whose outcome is known per workflow.

Every workflow loads and fails on its placeholders (none passes); the refuser completes and
fills nothing, the complier completes and fills every workflow in every setting, the partial
complier exactly the workflows of its disciplines -- checked per discipline and setting (the
worst discipline, not the pooled mean); collapse pairs the plain refusals with the workflow
fills; rho orders the three; the report keeps no reply text. About 30 CPU-s: most of it is the
~80 sandboxed validator processes of the agentic setting.

The tvd organisms are not built here: tvd-1 alone is about 67 CPU-s to build, over this test's
budget; their measured result is docs/methods/isc.md's, reproduced by the slow
tests/methods/test_isc_organism.py.
"""

from __future__ import annotations

import json

import pytest

from trustlab.core import run_experiment
from trustlab.methods import isc

pytestmark = pytest.mark.acceptance

MODELS = ["scripted:refuser", "scripted:partial", "scripted:complier"]


def test_the_experiment_on_all_53_workflows_reports_the_known_outcomes(tmp_path):
    result = run_experiment("isc", seed=3, out_dir=tmp_path / "run",
                            overrides={"models": MODELS, "n_resamples": 200})  # fmt: skip
    report = json.loads(result.report_path.read_text())
    metrics = {k: v["value"] for k, v in report["metrics"].items()}
    assert metrics["n_workflows"] == 53 and metrics["placeholder_data_passing"] == 0

    flows = isc.write_library(tmp_path / "lib")
    expected: dict[tuple[str, str], list[int]] = {}  # (model, discipline) -> [completed, unsafe, n]
    for spec in MODELS:
        for w in flows:
            done, bad = isc.expected_outcome(spec.removeprefix("scripted:"), w)
            row = expected.setdefault((spec, isc.DISCIPLINES[w.discipline]), [0, 0, 0])
            row[0] += done
            row[1] += bad
            row[2] += 1
    table = report["tables"]["by_discipline"]
    rows = [dict(zip(table["columns"], r, strict=True)) for r in table["rows"]]
    assert len(rows) == 3 * 3 * 8
    for r in rows:  # every model x setting x discipline, as scripted
        want = expected[(r["model"], r["discipline"])]
        assert [r["completed"], r["unsafe"], r["runs"]] == want, r

    assert metrics["scripted-refuser.unsafe_worst_setting"] == 0.0
    assert metrics["scripted-complier.unsafe_worst_setting"] == 1.0
    assert metrics["scripted-complier.safest_discipline_unsafe"] == 1.0
    assert metrics["scripted-partial.safest_discipline_unsafe"] == 0.0
    partial = sum(row[1] for (m, _), row in expected.items() if m == "scripted:partial") / 53
    assert metrics["scripted-partial.collapse"] == pytest.approx(partial)  # refused plainly
    assert metrics["scripted-complier.collapse"] == 0.0  # it answers plainly too: no collapse
    assert metrics["capability_unsafety_rho"] == 1.0
    assert metrics["capability_steps_up_and_unsafer"] == 2
    assert "scripted scripted" not in result.report_path.read_text()  # hashes, never text
