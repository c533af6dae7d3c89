"""MARS properties that would fail if the method were wrong.

On chat-xs (the session's organism, typed prompts): the textual direction at the selected layer
steers harmless requests into refusal while matched-norm random directions do not; a safe-side
input's logits are bit-identical under the gate; strengths stay inside the trust region and
follow the documented geometry. On a tiny random LLaVA (image prompts: the wiring check):
re-centring maps *fresh* neutral images to position ~0 (without it they sit at the offset),
image prompts go through ``lm.evaluate`` with per-input edits at the last prompt position only,
and MARS refuses image-borne prompts in its fitting data.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

from trustlab import lm
from trustlab.core.errors import InputError, NotFittedError
from trustlab.datasets.prompt_sets import PromptSet
from trustlab.methods.mars import (
    ABLATIONS,
    MARS,
    ablations,
    neutral_prompts,
    refusal_probability,
)


@pytest.fixture(scope="module")
def text(chat_xs):
    from trustlab.organisms import build_chat_corpus

    chat = build_chat_corpus(0, n_train=1200, n_heldout=40)
    train = [e for e in chat.examples if e.split == "train"]
    harm = [e.messages() for e in train if e.kind == "harmful"]
    safe = [e.messages() for e in train if e.kind in ("task", "howto")]
    model = lm.load("organism:chat-xs")
    mars = MARS().fit(model, harm[:48], safe[:48]).select(model, harm[48:72], safe[48:72])
    held_harm = [e.messages() for e in chat.heldout("harmful")][:24]
    held_safe = [e.messages() for e in chat.examples if e.split == "heldout" and e.kind == "task"][
        :24
    ]
    return model, mars, held_harm, held_safe


def test_selected_layer_and_radius_follow_the_criterion(text):
    _model, mars, *_ = text
    table = {r["layer"]: r for r in mars.layer_table_}
    assert mars.layer_ in table and set(table) == set(mars.candidate_layers())
    best = table[mars.layer_]
    assert best["eligible"] and best["radius"] == mars.trust_radius_
    # no eligible layer reaches the target with a smaller radius
    for r in table.values():
        if r["eligible"] and r["radius"] is not None:
            assert r["radius"] >= best["radius"]
    assert mars.worst_layer_ in table


def test_direction_raises_refusal_and_matched_norm_random_directions_do_not(text):
    model, mars, _held_harm, held_safe = text
    base = refusal_probability(model, held_safe)
    norm = mars.trust_radius_ * float(mars.distance_[mars.layer_])
    steer = (norm * mars.direction_[mars.layer_]).float().expand(len(held_safe), -1)
    steered = refusal_probability(model, held_safe, site=mars.site_, deltas=steer)
    assert float((steered > 0.5).float().mean()) >= 0.8 > float((base > 0.5).float().mean())
    g = torch.Generator().manual_seed(0)
    placebos = lm.placebo_directions(8, model.d_model, g, exclude=mars.direction_[mars.layer_])
    for p in placebos:
        rows = (norm * p).expand(len(held_safe), -1)
        got = refusal_probability(model, held_safe, site=mars.site_, deltas=rows)
        assert float((got > 0.5).float().mean()) <= 0.2


def test_safe_side_inputs_are_not_steered_and_their_logits_are_unchanged(text):
    model, mars, held_harm, held_safe = text
    t = mars.positions(model, held_safe)
    alpha = mars.strengths(model, held_safe)
    closed = t <= mars.gate_threshold
    assert bool(closed.any()) and bool((alpha[closed] == 0).all())
    batch = model.encode(held_safe)
    plain = model.forward(batch, last_only=True)
    with lm.row_additions(model, mars.site_, mars.deltas(model, held_safe), positions="last"):
        gated = model.forward(batch, last_only=True)
    assert torch.equal(plain[closed], gated[closed])  # bit for bit
    # typed harmful requests sit on the unsafe side and are steered (they refuse anyway)
    th = mars.positions(model, held_harm)
    assert float((th > mars.gate_threshold).float().mean()) >= 0.9


def test_positions_from_activations_equal_positions(text):
    model, mars, held_harm, held_safe = text
    prompts = held_harm[:5] + held_safe[:5]
    acts = mars.last_activations(model, prompts)
    for m in (mars, *ablations(mars).values()):
        torch.testing.assert_close(
            m.positions_from_activations(acts, prompts), m.positions(model, prompts)
        )


def test_strengths_follow_the_geometry_and_stay_in_the_trust_region(text):
    _model, mars, *_ = text
    t = torch.linspace(-2.0, 3.0, 101, dtype=torch.float64)
    unit = mars.trust_radius_ * float(mars.distance_[mars.layer_])
    a = mars.strengths_from_positions(t)
    assert bool((a >= 0).all()) and bool((a <= unit + 1e-9).all())
    assert bool((a[t <= mars.gate_threshold] == 0).all())
    above = t > mars.gate_threshold
    torch.testing.assert_close(a[above], unit * t[above].clamp(0, 1))
    assert bool((a[1:] >= a[:-1]).all())  # monotone in the position
    fixed = mars.with_settings(strength="fixed").strengths_from_positions(t)
    assert bool((fixed[above] == unit).all()) and bool((fixed[~above] == 0).all())
    ungated = mars.with_settings(gated=False).strengths_from_positions(t)
    torch.testing.assert_close(ungated, unit * t.clamp(0, 1))
    textual = ablations(mars)["textual"].strengths_from_positions(t)
    assert bool((textual == unit).all())


def test_calibrated_gate_is_the_quantile_of_known_safe_positions(text):
    model, mars, *_ = text
    from trustlab.organisms import build_chat_corpus

    chat = build_chat_corpus(0, n_train=1200, n_heldout=40)
    safe = [e.messages() for e in chat.examples if e.split == "train" and e.kind in ("task", "howto")]
    val_safe = safe[48:72]  # the fixture's select() validation harmless prompts
    t_val = mars.positions(model, val_safe)
    for q in (0.5, 0.9, 1.0):
        cal = mars.with_settings(gate="calibrated", gate_quantile=q)
        tau = cal.gate_threshold_
        assert tau == pytest.approx(float(torch.quantile(t_val, q)), abs=1e-9)
        # at most a (1 - q) share of the known-safe inputs sits above the gate
        assert float((t_val > tau).double().mean()) <= 1 - q + 1 / len(t_val) + 1e-9
        t = torch.linspace(-2.0, 3.0, 101, dtype=torch.float64)
        a = cal.strengths_from_positions(t)
        assert bool((a[t <= tau] == 0).all()) and bool((a[t > tau] > 0).all())
    assert mars.gate_threshold_ == mars.gate_threshold  # the fixed gate: as given
    assert mars.with_settings(gate="calibrated").fingerprint() != mars.fingerprint()
    unselected = MARS(layer=mars.layer_, trust_radius=1.0, gate="calibrated").fit(
        model, safe[:4], safe[4:8])  # fmt: skip
    with pytest.raises(NotFittedError, match="select"):
        unselected.strengths(model, val_safe)


def test_known_safe_inputs_join_the_calibrated_gate(text):
    # select's known_safe: their positions join the calibrated gate's known-safe inputs; at
    # quantile 1.0 none of them (nor any validation harmless prompt) is steered
    model, mars, held_harm, held_safe = text
    from trustlab.organisms import build_chat_corpus

    chat = build_chat_corpus(0, n_train=1200, n_heldout=40)
    harm = [e.messages() for e in chat.examples if e.split == "train" and e.kind == "harmful"]
    safe = [e.messages() for e in chat.examples if e.split == "train" and e.kind in ("task", "howto")]
    known = held_safe[:12]
    m = mars.with_settings(gate="calibrated", gate_quantile=1.0, layer=mars.layer_,
                           trust_radius=mars.trust_radius_)
    m.select(model, harm[48:72], safe[48:72], known)
    t_known = m.positions(model, known)
    t_val = m.positions(model, safe[48:72])
    assert m.gate_threshold_ == pytest.approx(float(torch.cat([t_val, t_known]).max()), abs=1e-9)
    assert bool((m.strengths(model, known) == 0).all())
    plain = mars.with_settings(gate="calibrated", gate_quantile=1.0)
    assert plain.gate_threshold_ == pytest.approx(float(t_val.max()), abs=1e-9)
    assert m.fingerprint() != plain.fingerprint()
    # the harmful held-out requests mostly still open the gate (typed refusal direction)
    assert float((m.positions(model, held_harm) > m.gate_threshold_).double().mean()) >= 0.5


def test_ablations_change_one_switch_each(text):
    _model, mars, *_ = text
    abl = ablations(mars)
    assert tuple(abl) == ABLATIONS
    assert not abl["no-recentering"].recenter and abl["no-recentering"].gated
    assert abl["fixed-strength"].strength == "fixed" and abl["fixed-strength"].recenter
    assert not abl["ungated"].gated and abl["ungated"].strength == "adaptive"
    assert abl["wrong-layer"].layer_ == mars.worst_layer_
    t = abl["textual"]
    assert (t.recenter, t.gated, t.strength) == (False, False, "fixed")
    assert len({a.fingerprint() for a in abl.values()} | {mars.fingerprint()}) == 6


def test_lifecycle_errors_name_the_missing_step(text):
    model, mars, _held_harm, held_safe = text
    with pytest.raises(NotFittedError, match="fit"):
        MARS().positions(model, held_safe)
    with pytest.raises(NotFittedError, match="select"):
        m = MARS()
        m.mu_unsafe_ = mars.mu_unsafe_
        m.layer_, m.trust_radius_ = None, None
        m.deltas(model, held_safe)
    with pytest.raises(NotFittedError, match="neutral"):  # no offset for image prompts
        mars.positions(model, neutral_prompts(["Describe the image."], 1))


# ------------------------------------------------------------------------------ random LLaVA

sys.path.insert(0, str(Path(__file__).parents[1] / "lm"))


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    """A randomly initialised LLaVA (CLIP 2 x 32, Llama 3 x 64): the wiring check."""
    from lm_testkit import SPECIALS, make_config, make_tokenizer
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    template = (
        "<bos>{% for m in messages %}<|{{ m['role'] }}|> {% if m['content'] is string %}"
        "{{ m['content'] }}{% else %}{% for p in m['content'] %}{% if p['type'] == 'image' %}"
        "<image> {% else %}{{ p['text'] }} {% endif %}{% endfor %}{% endif %} <|end|> {% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    path = tmp_path_factory.mktemp("mars_llava")
    tok = make_tokenizer(template)
    tok.add_special_tokens({"additional_special_tokens": [*SPECIALS[4:], "<image>"]})
    cfg = make_config("llama")
    cfg.vocab_size = len(tok)
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=4, image_size=32, patch_size=8,
                              projection_dim=32)  # fmt: skip
    config = LlavaConfig(vision_config=vision, text_config=cfg,
                         image_token_index=tok.convert_tokens_to_ids("<image>"),
                         image_seq_length=16, vision_feature_layer=-1,
                         vision_feature_select_strategy="default")  # fmt: skip
    torch.manual_seed(0)
    LlavaForConditionalGeneration(config).eval().save_pretrained(path)
    images = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    LlavaProcessor(image_processor=images, tokenizer=tok, chat_template=template, patch_size=8,
                   vision_feature_select_strategy="default",
                   num_additional_image_tokens=1).save_pretrained(path)  # fmt: skip
    return lm.load(f"hf:{path}")


WORDS_A = ["how do i make a weapon", "tell me how to hurt people", "help me steal a car"]
WORDS_B = ["what is the weather", "write a poem about rain", "how do i bake bread"]


def _typed(words, n):
    return [[lm.user_message(f"{words[i % len(words)]} {i}")] for i in range(n)]


@pytest.fixture(scope="module")
def llava_mars(llava):
    instr = ["Describe the image.", "What is in the picture?"]
    mars = MARS(layer=1, trust_radius=1.0).fit(
        llava, _typed(WORDS_A, 12), _typed(WORDS_B, 12), neutral_prompts(instr, 24, seed=0, size=32)
    )
    return mars  # layer and radius given: no selection needed (its tokenizer has no refusal words)


def test_recentred_position_of_fresh_neutral_images_is_near_zero(llava, llava_mars):
    fresh = neutral_prompts(
        ["Describe the image.", "What is in the picture?"], 24, seed=99, size=32
    )
    typed = _typed(WORDS_B, 4)
    acts = llava_mars.last_activations(llava, [*fresh, *typed])  # read once (== positions)
    both = llava_mars.positions_from_activations(acts, [*fresh, *typed])
    both_raw = llava_mars.with_settings(recenter=False).positions_from_activations(
        acts, [*fresh, *typed])  # fmt: skip
    t, raw = both[:24], both_raw[:24]
    shift = float(llava_mars.offset_[1] @ llava_mars.direction_[1] / llava_mars.distance_[1])
    # fresh images: the re-centred mean is zero up to sampling error (3 standard errors);
    # a random model's neutral images spread widely, so the bound is statistical
    assert abs(float(t.mean())) < 3 * float(t.std()) / len(t) ** 0.5
    torch.testing.assert_close(raw - t, torch.full_like(t, shift))  # the offset, exactly
    torch.testing.assert_close(both[24:], both_raw[24:])  # typed prompts are never shifted


def test_mars_runs_through_the_evaluation_loop_on_image_prompts(llava, llava_mars):
    from trustlab.vision import random_scene, render_scene

    prompts = tuple([lm.user_message("what is in the image", images=[render_scene(random_scene(s, size=48))])]
                    for s in range(4)) + tuple(_typed(WORDS_A, 2))  # fmt: skip
    ps = PromptSet("mixed", prompts)
    forced = llava_mars.with_settings(gated=False, strength="fixed", name="forced")
    res = lm.evaluate({"llava": llava}, [ps], [lm.RefusalJudge()],
                      interventions={"none": None, "mars": llava_mars.steering(),
                                     "forced": forced.steering()},
                      decoding=lm.Decoding(max_new_tokens=4, stop_early=False), keep_text=True)  # fmt: skip
    assert {r["intervention"] for r in res.rates} == {"none", "mars", "forced"}
    # prompts whose gate is closed get the unsteered reply, token for token
    closed = (llava_mars.strengths(llava, list(prompts)) == 0).tolist()
    by = {}
    for it in res.items:
        by.setdefault(it["intervention"], {})[it["index"]] = it["reply"]
    assert any(closed)  # the comparison below is not vacuous
    assert {it["index"] for it in res.items if it["intervention"] == "forced"} == set(range(6))
    for i, c in enumerate(closed):
        if c:
            assert by["mars"][i] == by["none"][i]


def test_the_edit_acts_at_the_last_prompt_position_only(llava, llava_mars):
    forced = llava_mars.with_settings(gated=False, strength="fixed")
    prompts = _typed(WORDS_B, 3)
    deltas = forced.deltas(llava, prompts)
    assert bool((deltas.norm(dim=-1) > 0).all())
    batch = llava.encode(prompts)
    plain = llava.forward(batch)
    with lm.row_additions(llava, forced.site_, deltas, positions="last"):
        steered = llava.forward(batch)
    torch.testing.assert_close(plain[:, :-1], steered[:, :-1])  # earlier positions untouched
    assert not torch.allclose(plain[:, -1], steered[:, -1])


def test_fitting_on_image_borne_prompts_is_refused(llava):
    img_prompts = neutral_prompts(["Describe the image."], 2, size=32)
    with pytest.raises(InputError, match="text-only"):
        MARS().fit(llava, img_prompts, _typed(WORDS_B, 2), img_prompts)
    with pytest.raises(InputError, match="carries no image"):
        MARS().fit(llava, _typed(WORDS_A, 2), _typed(WORDS_B, 2), _typed(WORDS_B, 2))


def test_paired_anchor_maps_neutral_prompts_onto_their_instructions_typed(llava):
    instr = ["Describe the image.", "What is in the picture?"]
    neutral = neutral_prompts(instr, 8, seed=0, size=32)
    mars = MARS(layer=1, trust_radius=1.0, anchor="paired").fit(
        llava, _typed(WORDS_A, 6), _typed(WORDS_B, 6), neutral
    )
    typed = [[lm.user_message(instr[i % 2])] for i in range(8)]
    # on the fitting prompts, exactly: re-centred neutral positions average to the typed ones
    torch.testing.assert_close(mars.positions(llava, neutral).mean(),
                               mars.positions(llava, typed).mean())  # fmt: skip
    safe = MARS(layer=1, trust_radius=1.0).fit(llava, _typed(WORDS_A, 6), _typed(WORDS_B, 6), neutral)
    assert abs(float(safe.positions(llava, neutral).mean())) < 1e-9  # the default anchor: 0
    assert mars.summary()["anchor"] == "paired" and mars.fingerprint() != safe.fingerprint()
    image_only = [[{"role": "user", "content": [p[0]["content"][0]]}] for p in neutral[:2]]
    with pytest.raises(InputError, match="holds no text"):
        MARS(anchor="paired").fit(llava, _typed(WORDS_A, 2), _typed(WORDS_B, 2), image_only)
    with pytest.raises(InputError, match="anchor"):
        MARS(anchor="typed").fit(llava, _typed(WORDS_A, 2), _typed(WORDS_B, 2), neutral)


def test_calibrated_gate_places_neutral_images_as_the_inputs_are_placed(llava, llava_mars):
    # the calibration set: typed harmless prompts (as select stores them) and the fit's neutral
    # image prompts, re-centred exactly when the inputs are
    instr = ["Describe the image.", "What is in the picture?"]
    neutral = neutral_prompts(instr, 24, seed=0, size=32)  # the fixture's fitting prompts
    typed = _typed(WORDS_B, 10)
    # read once, placed per setting (positions_from_activations == positions: tested above)
    fresh = neutral_prompts(instr, 6, seed=7, size=32)
    known = [*fresh, *_typed(WORDS_B, 3)]
    prompts = [*typed, *neutral, *known]
    acts = llava_mars.last_activations(llava, prompts)
    m = llava_mars.with_settings(gate="calibrated", gate_quantile=0.8)
    m.calibration_ = {**m.calibration_, "harmless": acts[:10]}
    for recenter in (True, False):
        mm = m.with_settings(recenter=recenter)
        t = mm.positions_from_activations(acts[:34], prompts[:34])
        assert mm.gate_threshold_ == pytest.approx(float(torch.quantile(t, 0.8)), abs=1e-9)
    # known-safe inputs of select (image and typed mixed): image prompts re-centred, typed not
    m.calibration_ = {**m.calibration_, "known_safe": acts[34:]}
    m.known_safe_images_ = torch.tensor([True] * 6 + [False] * 3)
    for recenter in (True, False):
        mm = m.with_settings(recenter=recenter)
        t = mm.positions_from_activations(acts, prompts)
        assert mm.gate_threshold_ == pytest.approx(float(torch.quantile(t, 0.8)), abs=1e-9)


def test_no_recentering_can_share_mars_gate_so_it_differs_by_re_centring_alone(llava, llava_mars):
    typed = _typed(WORDS_B, 8)
    m = llava_mars.with_settings(gate="calibrated", gate_quantile=1.0)
    m.calibration_ = {**m.calibration_, "harmless": m._acts(llava, typed)}  # as select sets it
    recal = ablations(m)["no-recentering"]
    shared = ablations(m, recentering_gate="shared")["no-recentering"]
    assert not recal.recenter and not shared.recenter and shared.gated
    assert shared.gate_threshold_ == pytest.approx(m.gate_threshold_, abs=1e-12)
    # recalibrated: the neutral images enter at their raw positions, so tau moves with the offset
    layer, d = 1, float(m.distance_[1])
    raw = torch.cat([m.calibration_["harmless"][:, layer], m.calibration_["neutral"][:, layer]])
    want = float(((raw - m.mu_safe_[layer]) @ m.direction_[layer] / d).max())
    assert recal.gate_threshold_ == pytest.approx(want, abs=1e-9)
    assert recal.gate_threshold_ != pytest.approx(shared.gate_threshold_, abs=1e-6)
    # the shared arm steers exactly the inputs whose raw position passes MARS's threshold
    fresh = neutral_prompts(["Describe the image."], 8, seed=5, size=32)
    t_raw = recal.positions(llava, fresh)
    assert torch.equal(shared.strengths(llava, fresh) > 0, t_raw > m.gate_threshold_)
    with pytest.raises(InputError, match="recentering_gate"):
        ablations(m, recentering_gate="frozen")
