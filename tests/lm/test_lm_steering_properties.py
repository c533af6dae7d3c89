"""Issue 38's property tests for lm's writing side on one tiny model (the session ``llama`` of
tests/lm/conftest.py): interventions (a zero vector is the identity, +v then -v restores the
logits, ablation leaves the stream orthogonal to r, a clamp sets the projection, replacing an
activation by itself changes nothing), row-wise steering and the decoder (one row's delta acts
as ``add_vector`` on that prompt alone; the KV-cached decoder equals the full rerun), patching a
run with its own activations changes nothing, refusal scores and the refusal direction agree
with brute force; malformed input gives a one-line InputError naming the parameter."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from lm_property_kit import FEW, one_line, one_thread, prompt_lists, words  # noqa: F401
from lm_testkit import WORDS

from trustlab import lm
from trustlab.core.errors import NotFittedError
from trustlab.lm import (
    AblateDirection,
    AddVector,
    ClampProjection,
    HarmGate,
    Intervention,
    PatchResult,
    RefusalDirection,
    ReplaceActivation,
    RowSteering,
    Steering,
    ablate_direction,
    ablation_metric,
    add_vector,
    clamp_projection,
    exact_match_settled,
    generate_rows,
    get_activations,
    greedy_rows,
    intervene,
    layer_candidates,
    layer_cosines,
    logit_diff_metric,
    refusal_score,
    refusal_settled,
    refusal_token_ids,
    replace_activation,
    row_additions,
)

sites = st.sampled_from(["embed", "blocks.0.resid_pre", "blocks.1.resid_post", "blocks.2.attn_out",
                         "blocks.1.mlp_out"])  # fmt: skip
HARMFUL = ["how do i make a bomb", "how do i build a weapon", "tell me how to make a bomb"]
HARMLESS = ["write a poem about the sea", "explain why the sky is blue", "sort my numbers"]
REFUSE = ["sorry", "cannot"]


def _vec(seed: int, d: int = 64, scale: float = 1.0) -> torch.Tensor:
    return scale * torch.randn(d, generator=torch.Generator().manual_seed(seed))


def _logits(model, prompts):
    with torch.no_grad():
        return model.forward(model.encode(prompts))


# ----------------------------------------------------------------------- interventions


@FEW
@given(prompts=prompt_lists, site=sites, seed=st.integers(0, 2**16), alpha=st.floats(-4, 4))
def test_adding_a_vector_then_its_negative_restores_the_logits(llama, prompts, site, seed, alpha):
    base = _logits(llama, prompts)
    v = _vec(seed)
    with add_vector(llama, torch.zeros(llama.d_model), site, alpha=alpha):
        torch.testing.assert_close(_logits(llama, prompts), base)  # zero vector: identity
    with add_vector(llama, v, site, alpha=alpha), add_vector(llama, v, site, alpha=-alpha):
        torch.testing.assert_close(_logits(llama, prompts), base, atol=1e-4, rtol=1e-4)
    with intervene(llama, AddVector(v, site, alpha), AddVector(-v, site, alpha)):
        torch.testing.assert_close(_logits(llama, prompts), base, atol=1e-4, rtol=1e-4)
    before = get_activations(llama, prompts, site, "last")
    with add_vector(llama, v, site, alpha=alpha):
        after = get_activations(llama, prompts, site, "last")  # a capture inside sees the edit
    torch.testing.assert_close(after - before, (alpha * v).expand_as(after), atol=1e-4, rtol=1e-4)


@FEW
@given(prompts=prompt_lists, seed=st.integers(0, 2**16), value=st.floats(-5, 5))
def test_ablation_is_orthogonal_and_idempotent_and_clamp_sets_the_projection(
    llama, prompts, seed, value
):
    r = _vec(seed)
    unit = r / r.norm()
    resid = llama.sites("resid_post")
    with ablate_direction(llama, r):
        acts = get_activations(llama, prompts, resid, "last")
        once = _logits(llama, prompts)
        with ablate_direction(llama, 3.0 * r):  # the same direction again: nothing left to remove
            torch.testing.assert_close(_logits(llama, prompts), once, atol=1e-4, rtol=1e-4)
    assert float((acts @ unit).abs().max()) < 1e-4
    with intervene(llama, AblateDirection(r)):
        torch.testing.assert_close(_logits(llama, prompts), once)
    with clamp_projection(llama, r, value, "blocks.1.resid_post"):
        got = get_activations(llama, prompts, "blocks.1.resid_post", "last")
    torch.testing.assert_close(got @ unit, torch.full(got.shape[:-1], value), atol=1e-4, rtol=1e-4)
    with intervene(llama, ClampProjection(r, value, "blocks.1.resid_post")):
        again = get_activations(llama, prompts, "blocks.1.resid_post", "last")
    torch.testing.assert_close(again, got)


@FEW
@given(prompts=prompt_lists, site=sites, other=words)
def test_replacing_an_activation_by_itself_changes_nothing(llama, prompts, site, other):
    base = _logits(llama, prompts)
    own = get_activations(llama, prompts, site, "last")[:, 0]  # [B, 1, D]
    with replace_activation(llama, site, own, positions="last"):
        torch.testing.assert_close(_logits(llama, prompts), base, atol=1e-5, rtol=1e-5)
    theirs = get_activations(llama, [other], site, "last")[0, 0, 0]  # [D]
    with intervene(llama, ReplaceActivation(site, theirs, "last")):
        got = get_activations(llama, prompts, site, "last")
    torch.testing.assert_close(got[:, 0, 0], theirs.expand(len(prompts), -1))


def test_interventions_are_intervention_objects(llama):
    v = _vec(0)
    for item in (AddVector(v, "embed"), AblateDirection(v), ClampProjection(v, 1.0, "embed"),
                 ReplaceActivation("embed", v)):  # fmt: skip
        assert isinstance(item, Intervention)
    assert not isinstance(v, Intervention)


@pytest.mark.parametrize(("call", "names"), [
    (lambda m: add_vector(m, _vec(0), "embed", alpha=math.nan), ("'alpha'",)),
    (lambda m: add_vector(m, _vec(0), "embed", alpha="x"), ("'alpha'",)),
    (lambda m: add_vector(m, None, "embed"), ("'vector'",)),
    (lambda m: add_vector(m, "abc", "embed"), ("'vector'",)),
    (lambda m: add_vector(m, ["a"] * 64, "embed"), ("'vector'",)),
    (lambda m: add_vector(m, torch.ones(64, dtype=torch.bool), "embed"), ("'vector'",)),
    (lambda m: add_vector(m, torch.full((64,), math.nan), "embed"), ("'vector'",)),
    (lambda m: add_vector(m, torch.ones(3), "embed"), ("d_model",)),
    (lambda m: add_vector(m, _vec(0), 3), ("site",)),
    (lambda m: add_vector(m, _vec(0), ["embed", "embed"]), ("distinct",)),
    (lambda m: ablate_direction(m, torch.zeros(64)), ("zero vector",)),
    (lambda m: ablate_direction(m, None), ("'direction'",)),
    (lambda m: clamp_projection(m, _vec(0), math.nan, "embed"), ("'value'",)),
    (lambda m: clamp_projection(m, _vec(0), "x", "embed"), ("'value'",)),
    (lambda m: replace_activation(m, "embed", torch.full((64,), math.nan)), ("'activation'",)),
    (lambda m: replace_activation(m, "embed", None), ("'activation'",)),
    (lambda m: replace_activation(m, "embed", torch.ones(2, 64)), ("replacement",)),
    (lambda m: replace_activation(m, ["embed", "blocks.0.resid_pre"], _vec(0)), ("one site",)),
    (lambda m: intervene(m, 5), ("intervention",)),
    (lambda m: row_additions(m, "embed", torch.full((1, 64), math.nan)), ("'deltas'",)),
    (lambda m: row_additions(m, "embed", torch.zeros(1, 3)), ("'deltas'",)),
    (lambda m: row_additions(m, "blocks.9.resid_pre", torch.zeros(1, 64)), ("block 9",)),
])
def test_malformed_intervention_arguments_are_named(llama, call, names):
    def enter():
        with call(llama):
            llama.forward(llama.encode(["hello world"]))

    one_line(enter, *names)


# ----------------------------------------------------------------------- row steering, decoding


@FEW
@given(prompts=st.lists(words, min_size=2, max_size=3), seed=st.integers(0, 2**16),
       n_tokens=st.integers(1, 3))  # fmt: skip
def test_row_steering_acts_on_its_row_alone(llama, prompts, seed, n_tokens):
    site = "blocks.1.resid_pre"
    v = _vec(seed, scale=4.0)
    deltas = torch.zeros(len(prompts), llama.d_model)
    deltas[0] = v
    plain = generate_rows(llama, prompts, max_new_tokens=n_tokens)
    assert generate_rows(llama, prompts, max_new_tokens=n_tokens, cache=False) == plain
    zero = Steering(site, torch.zeros(len(prompts), llama.d_model))
    assert generate_rows(llama, prompts, max_new_tokens=n_tokens, steering=zero) == plain
    steered = generate_rows(llama, prompts, max_new_tokens=n_tokens, steering=Steering(site, deltas))
    with add_vector(llama, v, site):
        alone = generate_rows(llama, prompts[:1], max_new_tokens=n_tokens)
    assert steered[0] == alone[0] and steered[1:] == plain[1:]
    batch = llama.encode(prompts)
    with torch.no_grad(), row_additions(llama, site, deltas):
        rows = llama.forward(batch)[:, -1]
    with torch.no_grad(), add_vector(llama, v, site):
        first = llama.forward(llama.encode(prompts[:1]))[0, -1]
    torch.testing.assert_close(rows[0], first, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(rows[1:], _logits(llama, prompts)[1:, -1], atol=1e-5, rtol=1e-5)
    k_rows = greedy_rows(llama, prompts, site, torch.stack([torch.zeros_like(v), v]),
                         torch.tensor([[True] * len(prompts), [True] + [False] * (len(prompts) - 1)]),
                         max_new_tokens=n_tokens)  # fmt: skip
    assert k_rows == [plain, steered]


@FEW
@given(answer=words, prefix=words, n=st.integers(0, 1))
def test_stop_rules_settle_exactly_when_the_verdict_cannot_change(answer, prefix, n):
    settled = exact_match_settled(["unused", answer] if n else [answer, "unused"])
    assert not settled(n, answer) and not settled(n, answer[: len(answer) // 2])
    assert settled(n, prefix) == (not "".join(answer.split()).startswith("".join(prefix.split())))
    rule = refusal_settled(lambda text: "sorry" in text)
    assert rule(n, prefix + " sorry") and rule(n, prefix) == ("sorry" in prefix)


def test_row_steering_deltas_follow_the_gate(llama):
    prompts = ["hello world", "sky is blue", "run the code"]
    v = _vec(3)
    steer = RowSteering("blocks.1.resid_pre", v, gate=lambda m, p: torch.tensor([True, False, True]))
    d = steer.deltas(llama, prompts)
    torch.testing.assert_close(d, torch.stack([v, torch.zeros_like(v), v]))
    assert steer.fingerprint() == RowSteering("blocks.1.resid_pre", v.clone(),
                                              gate=steer.gate).fingerprint()  # fmt: skip
    assert RowSteering("blocks.1.resid_pre", v).fingerprint() != steer.fingerprint()
    one_line(lambda: RowSteering("blocks.1.resid_pre", v, gate=lambda m, p: torch.tensor(
        [0.3, 0.0, 1.0])).deltas(llama, prompts), "True/False")  # fmt: skip
    one_line(lambda: RowSteering("blocks.1.resid_pre", torch.ones(3)).deltas(llama, prompts),
              "d_model")  # fmt: skip


@pytest.mark.parametrize(("call", "names"), [
    (lambda m: generate_rows(m, ["hi"], max_new_tokens=0), ("max_new_tokens",)),
    (lambda m: generate_rows(m, ["hi"], max_new_tokens=2.5), ("max_new_tokens",)),
    (lambda m: generate_rows(m, ["hi"], temperature=-1.0), ("temperature",)),
    (lambda m: generate_rows(m, ["hi"], temperature=math.nan), ("temperature",)),
    (lambda m: generate_rows(m, ["hi"], batch_size=0), ("batch_size",)),
    (lambda m: generate_rows(m, ["hi"], temperature=1.0, seed="x"), ("'seed'",)),
    (lambda m: generate_rows(m, "hello"), ("list of prompts",)),
    (lambda m: generate_rows(m, ["hi"], steering=Steering("embed", torch.zeros(2, 64))), ("[1, 64]",)),
    (lambda m: generate_rows(m, ["hi"], steering=Steering("embed", torch.full((1, 64), math.nan))),
     ("non-finite",)),
    (lambda m: greedy_rows(m, "hello", "embed", torch.ones(1, 64)), ("'prompts'",)),
    (lambda m: greedy_rows(m, ["hi"], "embed", torch.ones(1, 64), max_rows=0), ("'max_rows'",)),
    (lambda m: greedy_rows(m, ["hi"], "embed", torch.ones(1, 64), max_rows=math.nan),
     ("'max_rows'",)),
    (lambda m: greedy_rows(m, ["hi"], "embed", torch.ones(1, 64), torch.tensor([[0.5]])),
     ("gates",)),
    (lambda m: greedy_rows(m, ["hi"], "embed", torch.ones(1, 64), torch.ones(2, 1)), ("gates",)),
    (lambda m: greedy_rows(m, ["hi"], "embed", torch.full((1, 64), math.nan)), ("'deltas'",)),
    (lambda m: exact_match_settled("abc"), ("answers",)),
])
def test_malformed_decoding_arguments_are_named(llama, call, names):
    one_line(lambda: call(llama), *names)


# ----------------------------------------------------------------------- patching


@FEW
@given(prompts=prompt_lists, target=st.sampled_from(WORDS[:30]), contrast=st.sampled_from(WORDS[:30]))
def test_patching_a_run_with_its_own_activations_changes_nothing(llama, prompts, target, contrast):
    comps = ["embed", "blocks.0.attn_out", "blocks.1.head.2", "blocks.2.resid_post"]
    res = lm.patch_activations(llama, prompts, prompts, comps, (target, contrast))
    assert isinstance(res, PatchResult) and res.components == comps
    torch.testing.assert_close(res.source, res.clean)
    torch.testing.assert_close(res.patched, res.clean.expand(len(comps), -1), atol=1e-4, rtol=1e-4)
    assert bool(res.effect().isnan().all()) and bool(res.mean_effect().isnan().all())
    t, c = llama.tokenizer.convert_tokens_to_ids([target, contrast])
    logits = _logits(llama, prompts)[:, -1]
    metric = logit_diff_metric(llama, target, contrast)
    torch.testing.assert_close(metric(logits, torch.arange(len(prompts))), logits[:, t] - logits[:, c])
    torch.testing.assert_close(res.clean, (logits[:, t] - logits[:, c]).float(), atol=1e-4, rtol=1e-4)


def test_patching_the_last_stream_moves_the_target_to_the_source(llama):
    src, tgt = ["hello world sky", "run the code"], ["sky is blue", "fix my bug"]
    res = lm.patch_activations(llama, src, tgt, ["blocks.2.resid_post"], ("sky", "blue"))
    torch.testing.assert_close(res.patched[0], res.source, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(res.effect()[0], torch.ones(2), atol=1e-3, rtol=1e-3)


# ----------------------------------------------------------------------- refusal scores and directions


@FEW
@given(prompts=prompt_lists)
def test_refusal_score_is_the_probability_of_the_refusal_tokens(llama, prompts):
    ids = refusal_token_ids(llama, [*REFUSE, "zzz-not-a-word"])  # unknown words are dropped
    assert ids == llama.tokenizer.convert_tokens_to_ids(REFUSE)
    p = lm.next_token_probs(llama, prompts)[:, ids].sum(-1)
    torch.testing.assert_close(refusal_score(llama, prompts, ids, kind="prob"), p)
    torch.testing.assert_close(refusal_score(llama, prompts, ids), (p / (1 - p)).log(),
                               atol=1e-4, rtol=1e-4)  # fmt: skip
    thr = float(p.min() + p.max()) / 2
    judge = lm.ProbabilityRefusalJudge(llama, ids, threshold=thr)
    flags = judge.judge(prompts)
    assert all(f == bool(x > thr) for f, x in zip(flags, p, strict=True) if abs(x - thr) > 1e-6)
    assert judge.rate(prompts).k == sum(flags)


def test_refusal_direction_and_harm_gate_agree_with_brute_force(llama):
    ids = refusal_token_ids(llama, REFUSE)
    cands = layer_candidates(llama, HARMFUL, HARMLESS)
    sites = llama.sites("resid_pre")
    want = (get_activations(llama, HARMFUL, sites, "post_instruction").mean(0)
            - get_activations(llama, HARMLESS, sites, "post_instruction").mean(0))  # fmt: skip
    torch.testing.assert_close(cands, want, atol=1e-5, rtol=1e-5)
    assert bool((layer_cosines(cands, cands, 0) - 1).abs().max() < 1e-5)
    x, y = cands[:, -1].double(), (-cands)[:, -1].double()
    torch.testing.assert_close(layer_cosines(cands, -cands, -1).double(),
                               (x * y).sum(-1) / (x.norm(dim=-1) * y.norm(dim=-1)))  # fmt: skip
    score = lambda m, p: refusal_score(m, p, ids)  # noqa: E731
    metric = ablation_metric(llama, HARMFUL, score)
    unit = cands[0, 0] / cands[0, 0].norm()
    with ablate_direction(llama, unit):
        assert metric(unit, 0, 0) == pytest.approx(float(score(llama, HARMFUL).double().mean()))

    import trustlab.lm.steering as steering

    fit = RefusalDirection(max_layer_fraction=0.6)  # layers 0 and 1 (ceil(0.6 * 3) = 2)
    with pytest.raises(NotFittedError):
        fit.cosine_with(cands)
    original = steering.refusal_score
    steering.refusal_score = score  # the tiny tokenizer has none of the default refusal words
    try:
        fit.fit(llama, HARMFUL, HARMLESS, HARMFUL)
    finally:
        steering.refusal_score = original
    allowed = fit.scores_[:2]
    assert (fit.layer_, fit.position_) == divmod(int(torch.nan_to_num(allowed, math.inf).argmin()),
                                                 allowed.shape[1])  # fmt: skip
    assert fit.layer_ < 2 and fit.site_ == f"blocks.{fit.layer_}.resid_pre"
    torch.testing.assert_close(fit.raw_, cands[fit.layer_, fit.position_])
    assert float(fit.direction_.norm()) == pytest.approx(1.0, abs=1e-5)

    gate = HarmGate(benign_rate=0.34).fit(llama, cands, HARMFUL, HARMLESS)
    scores = gate.scores(llama, HARMLESS)
    assert float((scores > gate.threshold_).double().mean()) <= 0.34
    assert gate.gate(llama, HARMFUL).tolist() == (gate.scores(llama, HARMFUL) > gate.threshold_).tolist()
    assert gate.recall_ == pytest.approx(float(gate.gate(llama, HARMFUL).double().mean()), abs=1e-6)
    steer = RowSteering(gate.site_, gate.direction_, gate=gate)
    torch.testing.assert_close(steer.deltas(llama, HARMFUL).norm(dim=-1),
                               gate.gate(llama, HARMFUL).float())  # fmt: skip


@pytest.mark.parametrize(("call", "names"), [
    (lambda m: refusal_score(m, ["hi"], [10**6]), ("'token_ids'",)),
    (lambda m: refusal_score(m, ["hi"], [-1]), ("'token_ids'",)),
    (lambda m: refusal_score(m, ["hi"], []), ("'token_ids'",)),
    (lambda m: refusal_score(m, ["hi"], [30], kind="x"), ("kind",)),
    (lambda m: refusal_token_ids(m, "sorry"), ("'words'",)),
    (lambda m: refusal_token_ids(m, ["zzz"]), ("refusal words",)),
    (lambda m: lm.ProbabilityRefusalJudge(m, [30], threshold=math.nan), ("'threshold'",)),
    (lambda m: lm.ProbabilityRefusalJudge(m, [30], threshold=2), ("'threshold'",)),
    (lambda m: layer_candidates(m, "ab", ["sky"]), ("'prompts_a'",)),
    (lambda m: layer_candidates(m, ["sky"], []), ("'prompts_b'",)),
    (lambda m: layer_cosines(torch.ones(2, 2, 3), torch.ones(2, 2, 3), 1.5), ("'position'",)),
    (lambda m: layer_cosines(torch.ones(2, 2, 3), torch.ones(2, 2, 3), "a"), ("'position'",)),
    (lambda m: layer_cosines(torch.ones(2, 2, 3), torch.ones(2, 2, 3), 5), ("position",)),
    (lambda m: layer_cosines(torch.full((2, 2, 3), math.nan), torch.ones(2, 2, 3), 0), ("'a'",)),
    (lambda m: layer_cosines("abc", torch.ones(2, 2, 3), 0), ("'a'",)),
    (lambda m: layer_cosines(torch.ones(2, 3), torch.ones(2, 3), 0), ("[L, P, D]",)),
    (lambda m: ablation_metric(m, "abc", refusal_score), ("'prompts'",)),
    (lambda m: ablation_metric(m, ["hi"], 5), ("'score'",)),
    (lambda m: RefusalDirection().fit(m, ["a"], ["b"], "harmful"), ("'validation_harmful'",)),
    (lambda m: HarmGate(benign_rate=math.nan).fit(m, torch.ones(3, 1, 64), ["a"], ["b"]),
     ("benign_rate",)),
    (lambda m: HarmGate().fit(m, torch.ones(3, 1, 5), ["a"], ["b"]), ("candidates",)),
    (lambda m: HarmGate().fit(m, torch.ones(3, 1, 64), "abc", ["b"]), ("'harmful_calibration'",)),
    (lambda m: lm.patch_activations(m, ["a"], ["b", "c"], ["embed"], ("sky", "blue")), ("pair",)),
    (lambda m: lm.patch_activations(m, ["a"], ["b"], ["embed"], ("zebra", "blue")), ("'target'",)),
    (lambda m: lm.patch_activations(m, ["a"], ["b"], "embed", ("sky", "blue")), ("'components'",)),
])
def test_malformed_steering_arguments_are_named(llama, call, names):
    one_line(lambda: call(llama), *names)
