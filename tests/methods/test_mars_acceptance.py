"""Issue 31's claim on a vision-language organism (acceptance).

One study run (``trustlab.methods.mars.study.run_study``) on vlm-xs with 100 held-out items per
image set: the organism builds once per test session (about 80 CPU-s, shared with
tests/organisms/test_vlm.py's acceptance test); the study itself measured 21 CPU-s (20.3 user,
1.0 sys; vlm-xs already built, shared 2-core machine at load 10).

What is asserted is what was measured (docs/methods/mars.md, "Fidelity"): plain textual steering
raises refusal on harmful image-borne requests *and* over-refuses benign images (the paper's
preliminary finding), MARS keeps image-QA accuracy and benign-image refusal within the stated
tolerances, and every arm's verdicts come from the same prompts. The Done-when claim itself
(MARS's refusal margin excludes zero and every ablation is worse on an axis) does **not** hold on
the organisms: it is a strict xfail, so the day it holds CI says so and the docs must change.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.acceptance


@pytest.fixture(scope="module")
def study(organism_home, chat_xs, tmp_path_factory):
    from trustlab.core.context import RunContext
    from trustlab.core.runtime import torch_runtime
    from trustlab.methods.mars.study import MarsConfig, run_study
    from trustlab.organisms import build

    build("vlm-xs", home=organism_home)
    # the fixed gate at 0.5 and the safe anchor: the settings these assertions were measured with
    # (the study's defaults moved to the calibrated gate and the paired anchor for vlm-s-reads)
    config = MarsConfig(model="organism:vlm-xs", n_eval=100, n_typed=10, max_new_tokens=12,
                        anchor="safe", gate="fixed", gate_threshold=0.5)
    ctx = RunContext("mars", seed=0, out_dir=tmp_path_factory.mktemp("mars_acc"), quiet=True)
    with torch_runtime(1):
        report = run_study(config, ctx)
    return {name: m.value for name, m in report.metrics.items()}, report


def test_textual_steering_refuses_harmful_images_only_by_over_refusing_benign_ones(study):
    m, _ = study
    assert m["textual_refusal_delta_lower"] > 0  # the margin on harmful images excludes zero
    assert m["textual_over_refusal_delta_lower"] > 0  # ... and so does its over-refusal
    assert "over_refusal" in m["textual_worse_axes"]  # measurably worse than MARS there


def test_mars_keeps_qa_and_benign_image_refusal_within_tolerance(study):
    m, _ = study
    assert m["qa_within_tolerance"] and m["over_refusal_within_tolerance"]


@pytest.mark.xfail(strict=True, reason="measured: MARS's gate stays closed on image-borne "
                   "harmful requests of the organisms: their image path does not carry the "
                   "request's harm to the readout (docs/methods/mars.md, 'What a model needs')")  # fmt: skip
def test_done_when_claim(study):
    m, _ = study
    assert m["refusal_margin_excludes_zero"] and m["done_when_met"]
