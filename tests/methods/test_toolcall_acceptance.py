"""Issue 30's resolving claim on tool-s (acceptance, ≤ 2 min CPU): on held-out pairs from frames
the organism never saw, removing μΔ (directional ablation, and clamping its projection to the
analysis mean) stops the tool calls and adding μΔ starts them, with Clopper–Pearson intervals,
while matched random directions stay within the stated band of zero; and the direct logit
attribution of the decision names the components and sums to the logit difference."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from trustlab import lm
from trustlab.methods.toolcall import (
    ToolDecision,
    ToolDirection,
    ablation,
    addition,
    causal_test,
    check_flips,
    choose_candidate,
    clamp,
    component_attribution,
    organism_pairs,
    patch_components,
    random_directions,
)

# The controls' 95% upper bound on their flip rate must be at most this. The experiment's
# default band is 0.1; measured on this draw, the worst of 8 random *ablation* directions flips
# 18/300 execution prompts (0.06, upper bound 0.093: ablating any direction from every write at
# every position is not inert on a 96-wide model), clamp and addition controls 0/300. CI's CPU
# kernel may build other tool-s weights (docs/organisms.md, *Across machines*), so the claim
# is held at 0.15, stated here and in docs/methods/toolcall.md.
BAND = 0.15


@pytest.mark.acceptance
def test_mu_delta_is_necessary_and_sufficient_on_tool_s_and_its_readout_adds_up(tool_s):
    start = time.process_time()
    torch.set_num_threads(1)
    model = lm.load("organism:tool-s")
    decision = ToolDecision(model, batch_size=64)
    pairs = organism_pairs(300, 300, seed=0)
    fit_check = check_flips(decision, list(pairs.analysis))
    fit = [p for p, f in zip(pairs.analysis, fit_check.flips, strict=True) if f]
    held_check = check_flips(decision, list(pairs.heldout))
    held = [p for p, f in zip(pairs.heldout, held_check.flips, strict=True) if f]
    # the verb decides: most pairs flip, and the ones that do not are counted, not dropped
    assert held_check.flip_rate().lower >= 0.8, held_check.counts()
    assert sum(v for k, v in held_check.counts().items() if k != "pairs") == 300

    direction = ToolDirection(n_positions=2).fit(model, fit)
    choice = choose_candidate(decision, direction, fit[:40])  # never the held-out pairs
    layer, pos = choice.layer, choice.position
    v, r = direction.vector(layer, pos), direction.unit(layer, pos)
    controls = random_directions(v, 8, torch.Generator().manual_seed(0))
    means = direction.mean_projections(r, pos)
    ex, an = [p.execution for p in held], [p.analysis for p in held]
    base = {"calls_before": np.ones(len(ex), bool)}
    tests = {
        "ablation": causal_test(
            decision, ex, ablation(r), [ablation(c) for c in controls], name="ablation",
            population="execution", control_band=BAND, **base,
        ),
        "clamp": causal_test(
            decision, ex, clamp(model, r, means["analysis"], pos),
            [clamp(model, c, direction.mean_projections(c, pos)["analysis"], pos)
             for c in controls],
            name="clamp", population="execution", control_band=BAND, **base,
        ),
        "addition": causal_test(
            decision, an, addition(model, v, layer, pos),
            [addition(model, c * v.norm(), layer, pos) for c in controls], name="addition",
            population="analysis", control_band=BAND, calls_before=np.zeros(len(an), bool),
        ),
    }  # fmt: skip
    for name, t in tests.items():
        s = t.summary()
        print(name, {k: s[k] for k in ("n", "flip_rate", "flip_low", "flip_high",
                                       "worst_control_flip_rate", "worst_control_high",
                                       "minus_worst_control_low")})  # fmt: skip
        assert t.flip_rate().lower >= 0.8, s
        assert t.controls_within_band(), s  # the worst of 8 controls
        assert t.difference().lower >= 0.7, s

    # read-out: every block's direct attribution plus the final-norm correction is the logit
    # difference on every prompt, the heads split their block, and patching names heads
    readout = fit[:40]
    att = component_attribution(decision, readout)
    assert att.identity_error() < 1e-3 and att.head_error() < 1e-3
    table = att.table(n_resamples=200)
    gap = float((att.logit_execution - att.logit_analysis).mean())
    assert sum(r["difference"] for r in table if r["in_sum"]) == pytest.approx(gap, abs=1e-3)
    top = max((r for r in table if r["in_sum"] and r["kind"] != "correction"),
              key=lambda r: abs(r["difference"]))  # fmt: skip
    print("top component", top["component"], f"{top['share_of_gap']:.2f} of the gap {gap:.2f}")
    patch = patch_components(decision, readout[:16])
    heads = [row for row in patch.rows(n_resamples=200) if row["kind"] == "head"]
    assert len(heads) == model.n_layers * model.adapter.n_heads
    assert max(row["denoise"] for row in heads) > 0.2
    assert time.process_time() - start < 150
