"""toolcall on tool-xs (the default tests' tool-caller): the decision metric, μΔ, the causal
tests against random controls, and the read-out identities."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trustlab import lm
from trustlab.core.errors import NotFittedError
from trustlab.methods.toolcall import (
    DecisionFormat,
    StudySettings,
    ToolDecision,
    ToolDirection,
    ablation,
    addition,
    causal_test,
    check_flips,
    choose_candidate,
    clamp,
    component_attribution,
    induced_call_quality,
    layer_names,
    organism_pairs,
    patch_components,
    random_directions,
    scaffold_analysis,
    study_model,
    transmission,
)


@pytest.fixture(scope="module")
def setup(tool_xs):
    torch.set_num_threads(1)
    model = lm.load("organism:tool-xs")
    pairs = organism_pairs(120, 40, seed=0)
    decision = ToolDecision(model, batch_size=64)
    direction = ToolDirection(n_positions=3).fit(model, pairs.analysis)
    return model, pairs, decision, direction


def test_decision_metric_is_read_from_the_actual_formats(setup):
    model, pairs, decision, _ = setup
    prompt = pairs.heldout[0].execution
    call, prose = decision.opener_ids(prompt)
    assert model.tokenizer.decode(call).strip() == "<tool_call>"
    assert len(call) > 1, "the call opener is several word-level tokens"
    assert model.tokenizer.decode(prose).strip() == "Sure"
    prompts = [p.execution for p in pairs.heldout[:6]] + [p.analysis for p in pairs.heldout[:6]]
    # the first-token logit difference is the log-probability difference of the two tokens
    logp = lm.next_token_logprobs(model, prompts).double()
    want = (logp[:, call[0]] - logp[:, prose[0]]).numpy()
    np.testing.assert_allclose(decision.logit_diff(prompts), want, atol=1e-4)
    # the whole-format metric is the teacher-forced sum over each opener's tokens
    full = decision.logprob_diff(prompts)
    lc = lm.sequence_logprobs(model, prompts, [model.tokenizer.decode(call)] * len(prompts))
    assert np.sign(full[:6]).tolist() == [1.0] * 6 and np.sign(full[6:]).tolist() == [-1.0] * 6
    assert np.all(full <= lc.double().numpy() - logp[:, prose[0]].numpy() + 1e-3)


def test_calls_agree_with_full_greedy_replies(setup):
    model, pairs, decision, _ = setup
    prompts = [p.execution for p in pairs.heldout[:8]] + [p.analysis for p in pairs.heldout[:8]]
    full = lm.HFChatModel(model).generate(prompts, max_new_tokens=24)
    want = [r.startswith("<tool_call>") for r in full]
    assert decision.calls(prompts).tolist() == want
    assert any(want) and not all(want)


def test_formats_that_share_their_first_token_are_refused(setup):
    model, pairs, _, _ = setup
    same = ToolDecision(model, DecisionFormat(call="Sure thing", prose="Sure"))
    with pytest.raises(Exception, match="same token"):
        same.logit_diff([pairs.heldout[0].execution])


def test_held_out_pairs_flip_and_are_all_counted(setup):
    _, pairs, decision, _ = setup
    check = check_flips(decision, list(pairs.heldout))
    counts = check.counts()
    assert sum(v for k, v in counts.items() if k != "pairs") == counts["pairs"] == 40
    assert check.flip_rate().rate >= 0.9  # tool-xs decides 1.00 of its held-out requests


def test_mu_delta_is_the_mean_of_the_pair_differences(setup):
    model, pairs, _, direction = setup
    sites = layer_names(model)
    some = list(pairs.analysis)
    e = lm.get_activations(model, [p.execution for p in some], sites, lm.Positions.last(3))
    a = lm.get_activations(model, [p.analysis for p in some], sites, lm.Positions.last(3))
    want = (e.double() - a.double()).mean(0)
    torch.testing.assert_close(direction.mu_delta_, want, atol=1e-5, rtol=1e-5)
    # chunked reading gives the same means
    chunked = ToolDirection(n_positions=3, chunk=17).fit(model, some)
    torch.testing.assert_close(chunked.mu_delta_, direction.mu_delta_, atol=1e-6, rtol=1e-6)
    # the last tokens of a minimal pair are the same: μΔ is exactly zero at the embeddings
    assert float(direction.mu_delta_[0].abs().max()) == 0.0
    assert (0, -1) not in direction.candidates()
    with pytest.raises(Exception, match="zero"):
        direction.unit(0, -1)


def test_unfitted_direction_says_which_step_is_missing():
    with pytest.raises(NotFittedError, match="fit"):
        ToolDirection().vector(1)


def test_separation_sweep_reads_held_out_pairs(setup):
    model, pairs, _, direction = setup
    sweep = direction.separation(model, list(pairs.heldout))
    assert np.isnan(sweep.auc[0]).all()  # no signal where the tokens are the same
    assert sweep.auc[1, -1] >= 0.95 and sweep.paired_accuracy[1, -1] >= 0.95
    assert np.all(sweep.auc_low[1:] <= sweep.auc[1:]) and len(sweep.rows()) == 3 * 3


def test_mu_delta_is_necessary_and_sufficient_while_random_directions_are_not(setup):
    model, pairs, decision, direction = setup
    choice = choose_candidate(decision, direction, list(pairs.analysis[:30]))
    layer, pos = choice.layer, choice.position
    assert any(r["chosen"] for r in choice.rows)
    v, r = direction.vector(layer, pos), direction.unit(layer, pos)
    ctrl = random_directions(v, 3, torch.Generator().manual_seed(0))
    assert float((ctrl @ r).abs().max()) < 1e-5  # controls are orthogonal to μΔ
    held = [p for p, f in zip(pairs.heldout, check_flips(decision, list(pairs.heldout)).flips,
                              strict=True) if f]  # fmt: skip
    ex, an = [p.execution for p in held], [p.analysis for p in held]
    means = direction.mean_projections(r, pos)
    assert means["execution"][layer] > means["analysis"][layer]
    abl = causal_test(decision, ex, ablation(r), [ablation(c) for c in ctrl], name="ablation",
                      population="execution")  # fmt: skip
    cvals = [direction.mean_projections(c, pos)["analysis"] for c in ctrl]
    clm = causal_test(decision, ex, clamp(model, r, means["analysis"], pos),
                      [clamp(model, c, cv, pos) for c, cv in zip(ctrl, cvals, strict=True)],
                      name="clamp", population="execution")  # fmt: skip
    add = causal_test(decision, an, addition(model, v, layer, pos),
                      [addition(model, c * v.norm(), layer, pos) for c in ctrl],
                      name="addition", population="analysis")  # fmt: skip
    for test in (abl, clm, add):
        assert test.flip_rate().rate >= 0.9, test.summary()
        assert test.worst_control_rate().rate <= 0.1, test.summary()
        assert test.controls_within_band()
        assert test.difference().lower > 0.5
    # the direction matters, not only the norm: minus μΔ pushes analysis prompts further away
    away = causal_test(decision, an, addition(model, -v, layer, pos), [], name="minus",
                       population="analysis")  # fmt: skip
    assert away.flip_rate().rate == 0.0 and away.logit_shift()["mean"] < 0
    # the calls it induces are whole calls (a 55-token payload): valid JSON
    quality = induced_call_quality(decision, held[:10], addition(model, v, layer, pos))
    assert quality["calls"] == 10 and quality["valid"] >= 0.8


def test_attribution_sums_to_the_logit_difference(setup):
    _, pairs, decision, _ = setup
    att = component_attribution(decision, list(pairs.analysis[:20]))
    assert att.identity_error() < 1e-3
    assert att.head_error() < 1e-3
    table = att.table(n_resamples=100)
    names = [r["component"] for r in table]
    assert names[:5] == ["embed", "blocks.0.attn_out", "blocks.0.mlp_out", "blocks.1.attn_out",
                         "blocks.1.mlp_out"]  # fmt: skip
    assert "blocks.1.head.3" in names and "correction" in names
    gap = float((att.logit_execution - att.logit_analysis).mean())
    total = sum(r["difference"] for r in table if r["in_sum"])
    assert total == pytest.approx(gap, abs=1e-3)
    np.testing.assert_allclose(att.logit_execution, decision.logit_diff(
        [p.execution for p in pairs.analysis[:20]]), atol=1e-4)  # fmt: skip


def test_patching_and_transmission_add_up(setup):
    model, pairs, decision, direction = setup
    some = list(pairs.analysis[:16])
    patch = patch_components(decision, some)
    rows = {r["component"]: r for r in patch.rows(n_resamples=100)}
    # the last token is the same in both variants: patching it before any block moves nothing
    assert rows["blocks.0.resid_pre"]["denoise"] == pytest.approx(0.0, abs=1e-6)
    assert max(r["denoise"] for r in rows.values() if r["kind"] == "head") > 0.3
    trans = transmission(decision, some, addition(model, direction.vector(1, -1), 1, -1))
    parts = sum(r["change"] for r in trans if r["in_sum"])
    total = next(r for r in trans if r["kind"] == "total")["change"]
    assert parts == pytest.approx(total, abs=1e-3)
    assert next(r for r in trans if r["kind"] == "injected")["change"] > 0


def test_scaffold_analysis_compares_with_and_without_the_scaffold(setup):
    model, pairs, decision, direction = setup
    sc = scaffold_analysis(decision, direction, list(pairs.analysis[:60]),
                           list(pairs.heldout[:20]), layer=1, position=-1)  # fmt: skip
    assert {(r["scaffold"], r["variant"]) for r in sc.rows} == {
        (s, v) for s in (True, False) for v in ("execution", "analysis", "neutral")
    }
    assert sc.value(True, "execution", "call_rate") == 1.0
    assert sc.value(True, "analysis", "call_rate") == 0.0
    assert sc.value(True, "execution", "mu_position") == pytest.approx(1.0, abs=0.15)
    assert len(sc.cosines) == model.n_layers + 1
    # tool-xs never saw a tool request without its scaffold: calls drop without it
    assert sc.value(False, "neutral", "call_rate") < sc.value(True, "neutral", "call_rate")


def test_a_model_without_a_tool_decision_gets_no_verdict(chat_xs):
    model = lm.load("organism:chat-xs")
    pairs = organism_pairs(30, 20, seed=0)
    study = study_model(
        model, ToolDecision(model), pairs, StudySettings(n_probe=10, n_select=5, n_readout=5),
        generator=torch.Generator().manual_seed(0), rng=np.random.default_rng(0),
    )  # fmt: skip
    assert not study.decided and "no tool decision" in study.reason
    assert study.direction is None and not study.tests
