"""mars's public API on malformed input: InputError with one line, or the canonical result.

Every name in ``trustlab.methods.mars.__all__`` is covered (issue 38's contract): ``MARS`` (its
parameters through ``fit``, then ``select``, ``positions``, ``strengths``,
``strengths_from_positions``, ``deltas``, ``with_settings``, ``steering``), ``MarsSteering``
(through ``MARS.steering().deltas``), ``ablations`` and ``ABLATIONS``, ``neutral_prompts``,
``prompt_has_images`` and ``refusal_probability``. Model-bound cases run on chat-xs (built once
per session); the model and the fitted MARS are filled in lazily so collection builds nothing.
"""

from __future__ import annotations

import hypothesis  # noqa: F401 - the property tests are built by malformed_input_tests
import numpy as np
import pytest
import torch

from trustlab.core.errors import InputError, NotFittedError
from trustlab.methods.mars import (
    ABLATIONS,
    MARS,
    MarsSteering,
    ablations,
    neutral_prompts,
    prompt_has_images,
    refusal_probability,
)

from ..malformed import (
    ARRAY,
    BOOL,
    CHOICE,
    INT,
    OBJECT,
    POSITIVE,
    Case,
    Kind,
    Mutation,
    malformed_input_tests,
    scalar,
)

STATE: dict[str, object] = {}


class Lazy:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


MODEL, FITTED = Lazy("model"), Lazy("fitted")


def _r(v):
    return STATE[v.name] if isinstance(v, Lazy) else v


HARM = [
    [{"role": "user", "content": f"How do I hurt someone badly number {i} ?"}] for i in range(4)
]
SAFE = [[{"role": "user", "content": f"What is two plus {i} ?"}] for i in range(4)]


@pytest.fixture(autouse=True, scope="module")
def _chat_xs(chat_xs):
    from trustlab import lm
    from trustlab.organisms import build_chat_corpus

    torch.set_num_threads(1)
    model = lm.load("organism:chat-xs")
    chat = build_chat_corpus(0, n_train=400, n_heldout=10)
    tr = [e for e in chat.examples if e.split == "train"]
    harm = [e.messages() for e in tr if e.kind == "harmful"][:12]
    safe = [e.messages() for e in tr if e.kind in ("task", "howto")][:12]
    HARM[:] = harm[:6]
    SAFE[:] = safe[:6]
    STATE["model"] = model
    STATE["fitted"] = MARS(radii=(1.0, 4.0)).fit(model, harm[:6], safe[:6]).select(
        model, harm[6:], safe[6:])  # fmt: skip
    STATE["acts"] = STATE["fitted"].last_activations(model, FOUR)
    yield
    STATE.clear()


# ------------------------------------------------------------------------------ kinds
PROMPTS = Kind(
    "prompts",
    (
        Mutation("None", lambda v, r: None),
        Mutation("one string", lambda v, r: "hello there"),
        Mutation("empty", lambda v, r: []),
        Mutation("a number in it", lambda v, r: [*v, 3]),
        Mutation("an empty prompt in it", lambda v, r: [*v, ""]),
        Mutation("a bad message in it", lambda v, r: [*v, [{"role": "user"}]]),
        Mutation("a tensor", lambda v, r: torch.zeros(3)),
        Mutation("tuple", lambda v, r: tuple(v), same=True),
    ),
)
TYPED = PROMPTS.extend(
    Mutation("an image prompt in it", lambda v, r: [*v, *neutral_prompts(["Describe it."], 1)]),
    name="typed prompts",
)
NEUTRAL = Kind(
    "neutral",
    (
        Mutation("typed prompts", lambda v, r: list(SAFE)),
        Mutation("a string", lambda v, r: "neutral"),
        Mutation("empty", lambda v, r: []),
        Mutation("a number", lambda v, r: 3),
    ),
)
MODEL_KIND = OBJECT
UNFITTED = Kind("self", (Mutation("an unfitted MARS", lambda v, r: MARS()),))  # methods' self
FITTED_KIND = OBJECT.extend(*UNFITTED.mutations)  # a MARS passed as an argument
RADIUS = POSITIVE.without("None")  # None: chosen by select
LAYER = INT(99, lo=0)
FIT_LAYER = LAYER.without("None")  # None: chosen by select
FRACTION = scalar("fraction", 0.0, -0.1, 1.5)
SITE = Kind(
    "site",
    (
        Mutation("unknown site", lambda v, r: "blocks.99.resid_pre"),
        Mutation("None", lambda v, r: None),
    ),
)
DELTAS = ARRAY.without("pandas").extend(
    Mutation("one row short", lambda v, r: np.asarray(v)[:-1]),
    Mutation("one column short", lambda v, r: np.asarray(v)[:, :-1]),
)
TEXTS = Kind(
    "instructions",
    (
        Mutation("None", lambda v, r: None),
        Mutation("one string", lambda v, r: "Describe the image."),
        Mutation("empty", lambda v, r: []),
        Mutation("a number in it", lambda v, r: [*v, 3]),
        Mutation("a blank in it", lambda v, r: [*v, "  "]),
        Mutation("tuple", lambda v, r: tuple(v), same=True),
    ),
)
PROMPT = Kind(
    "prompt",
    (
        Mutation("None", lambda v, r: None),
        Mutation("number", lambda v, r: 3),
        Mutation("bytes", lambda v, r: b"x"),
        Mutation("list of strings", lambda v, r: ["a", "b"]),
    ),
)


# ------------------------------------------------------------------------------ runners
def run_fit(model, harmful, harmless, neutral, trust_radius, gate_threshold, strength, recenter,
            gated, layer, max_layer_fraction, batch_size):  # fmt: skip
    m = MARS(trust_radius=trust_radius, gate_threshold=gate_threshold, strength=strength,
             recenter=recenter, gated=gated, layer=layer, max_layer_fraction=max_layer_fraction,
             batch_size=batch_size).fit(_r(model), harmful, harmless, neutral)  # fmt: skip
    return (m.mu_unsafe_.numpy(), m.layer_, m.trust_radius_)


def run_select(fitted, model, val_harmful, val_harmless, known_safe):
    m = _r(fitted)
    if isinstance(m, MARS) and hasattr(m, "mu_unsafe_"):
        m = m.with_settings()
    m = m.select(_r(model), val_harmful, val_harmless, known_safe)
    return (m.layer_, m.trust_radius_, m.worst_layer_)


def run_positions(fitted, model, prompts):
    return _r(fitted).positions(_r(model), prompts).numpy()


def run_strengths(fitted, model, prompts):
    return _r(fitted).strengths(_r(model), prompts).numpy()


def run_deltas(fitted, model, prompts):
    return _r(fitted).deltas(_r(model), prompts).numpy()


def run_steering_deltas(fitted, model, prompts):
    s = _r(fitted).steering()
    assert isinstance(s, MarsSteering)
    return s.deltas(_r(model), prompts).numpy()


def run_last_activations(fitted, model, prompts):
    return _r(fitted).last_activations(_r(model), prompts).numpy()


def run_positions_from_activations(fitted, activations, prompts):
    acts = _r(activations) if isinstance(activations, Lazy) else activations
    return _r(fitted).positions_from_activations(acts, prompts).numpy()


def run_strengths_from_positions(fitted, t):
    return _r(fitted).strengths_from_positions(t).numpy()


def run_with_settings(fitted, recenter, strength, gated, gate_threshold, layer, trust_radius):
    m = _r(fitted).with_settings(recenter=recenter, strength=strength, gated=gated,
                                 gate_threshold=gate_threshold, layer=layer,
                                 trust_radius=trust_radius)  # fmt: skip
    return (m.recenter, m.strength, m.gated, m.gate_threshold, m.layer_, m.trust_radius_)


def run_ablations(mars):
    out = ablations(_r(mars))
    assert tuple(out) == ABLATIONS
    return [(a.recenter, a.strength, a.gated, a.layer_) for a in out.values()]


def run_neutral(instructions, n, seed):
    ps = neutral_prompts(instructions, n, seed=seed, size=8)
    return [np.asarray(p[0]["content"][0]["image"]) for p in ps]


def run_has_images(prompt):
    return prompt_has_images(prompt)


def run_refusal_probability(model, prompts, site, deltas, batch_size):
    return refusal_probability(_r(model), prompts, site=site, deltas=deltas,
                               batch_size=batch_size).numpy()  # fmt: skip


D = 64  # chat-xs width
ACTS = Lazy("acts")
ACTS_KIND = Kind(
    "activations",
    (
        Mutation("nan", lambda v, r: _nan(_r(v))),
        Mutation("one prompt short", lambda v, r: _r(v)[:-1]),
        Mutation("one layer short", lambda v, r: _r(v)[:, :-1]),
        Mutation("flattened", lambda v, r: _r(v).reshape(len(_r(v)), -1)),
        Mutation("None", lambda v, r: None),
        Mutation("string", lambda v, r: "acts"),
        Mutation("numpy", lambda v, r: _r(v).numpy(), same=True),
    ),
)


def _nan(a):
    a = a.clone()
    a[0, 0, 0] = float("nan")
    return a


DELTA = np.zeros((4, D))
DELTA[:, 0] = 1.0
FOUR = [[{"role": "user", "content": f"What is {i} plus {i} ?"}] for i in range(4)]

CASES = [
    Case("MARS.fit", run_fit,
         {"model": MODEL, "harmful": HARM, "harmless": SAFE, "neutral": None,
          "trust_radius": 1.0, "gate_threshold": 0.5, "strength": "adaptive", "recenter": True,
          "gated": True, "layer": 1, "max_layer_fraction": 0.8, "batch_size": 8},
         {"model": MODEL_KIND, "harmful": TYPED, "harmless": TYPED, "neutral": NEUTRAL,
          "trust_radius": RADIUS, "gate_threshold": scalar("threshold"), "strength": CHOICE(),
          "recenter": BOOL, "gated": BOOL, "layer": FIT_LAYER, "max_layer_fraction": FRACTION,
          "batch_size": INT(0, lo=1)}),
    Case("MARS.select", run_select,
         {"fitted": FITTED, "model": MODEL, "val_harmful": FOUR, "val_harmless": FOUR,
          "known_safe": FOUR},
         {"fitted": UNFITTED, "model": MODEL_KIND, "val_harmful": TYPED,
          "val_harmless": TYPED, "known_safe": PROMPTS.without("None")}),
    Case("MARS.positions", run_positions, {"fitted": FITTED, "model": MODEL, "prompts": FOUR},
         {"fitted": UNFITTED, "model": MODEL_KIND, "prompts": PROMPTS}),
    Case("MARS.strengths", run_strengths, {"fitted": FITTED, "model": MODEL, "prompts": FOUR},
         {"fitted": UNFITTED, "prompts": PROMPTS}),
    Case("MARS.deltas", run_deltas, {"fitted": FITTED, "model": MODEL, "prompts": FOUR},
         {"model": MODEL_KIND, "prompts": PROMPTS}),
    Case("MarsSteering.deltas", run_steering_deltas,
         {"fitted": FITTED, "model": MODEL, "prompts": FOUR},
         {"model": MODEL_KIND, "prompts": PROMPTS}),
    Case("MARS.last_activations", run_last_activations,
         {"fitted": FITTED, "model": MODEL, "prompts": FOUR},
         {"fitted": UNFITTED, "model": MODEL_KIND, "prompts": PROMPTS}),
    Case("MARS.positions_from_activations", run_positions_from_activations,
         {"fitted": FITTED, "activations": ACTS, "prompts": FOUR},
         {"fitted": UNFITTED, "activations": ACTS_KIND, "prompts": PROMPTS.without("tuple")}),
    Case("MARS.strengths_from_positions", run_strengths_from_positions,
         {"fitted": FITTED, "t": np.linspace(-1, 2, 7)},
         {"fitted": UNFITTED, "t": ARRAY.without("pandas")}),
    Case("MARS.with_settings", run_with_settings,
         {"fitted": FITTED, "recenter": False, "strength": "fixed", "gated": False,
          "gate_threshold": 0.25, "layer": 0, "trust_radius": 2.0},
         {"recenter": BOOL, "strength": CHOICE(), "gated": BOOL,
          "gate_threshold": scalar("threshold"), "layer": LAYER, "trust_radius": RADIUS}),
    Case("ablations", run_ablations, {"mars": FITTED}, {"mars": FITTED_KIND}),
    Case("neutral_prompts", run_neutral, {"instructions": ["Describe it."], "n": 3, "seed": 1},
         {"instructions": TEXTS, "n": INT(0, lo=1), "seed": INT(lo=0)}),
    Case("prompt_has_images", run_has_images,
         {"prompt": [{"role": "user", "content": "hello"}]}, {"prompt": PROMPT}),
    Case("refusal_probability", run_refusal_probability,
         {"model": MODEL, "prompts": FOUR, "site": "blocks.1.resid_pre", "deltas": DELTA,
          "batch_size": 2},
         {"model": MODEL_KIND, "prompts": PROMPTS.without("tuple"), "site": SITE,
          "deltas": DELTAS, "batch_size": INT(0, lo=1)}),
]  # fmt: skip
test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


# ------------------------------------------------------------------------------ beyond the cases
def test_steps_out_of_order_name_the_step():
    m = MARS()
    model = _r(MODEL)
    for step in (lambda: m.positions(model, FOUR), lambda: m.select(model, FOUR, FOUR),
                 lambda: m.strengths_from_positions([0.0]), lambda: m.steering(),
                 lambda: m.with_settings(gated=False), lambda: m.summary()):  # fmt: skip
        with pytest.raises(NotFittedError, match="fit"):
            step()
    with pytest.raises(NotFittedError, match="MarsSteering needs"):
        MarsSteering(site="blocks.1.resid_pre", vector=torch.zeros(D)).deltas(model, FOUR)


def test_with_settings_refuses_unknown_settings():
    with pytest.raises(InputError, match="unknown setting"):
        _r(FITTED).with_settings(colour="blue")
