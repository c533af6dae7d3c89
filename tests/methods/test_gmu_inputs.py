"""gmu's public API on malformed input: InputError with one line, or the canonical result.

Every callable in ``trustlab.methods.gmu.__all__`` is a case below (issue 38's contract), on
tiny random models (tests/methods/gmu_kit.py); the corruptions per argument kind are in
tests/malformed.py. The data holders (``FFNSite``, ``LMTask``, ``ImageTask``,
``AttackOutcome``) are exercised through the functions that take them.
"""

from __future__ import annotations

import hypothesis  # noqa: F401 - the property tests are built by malformed_input_tests
import numpy as np
import torch

from trustlab.finetune import FinetuneConfig
from trustlab.methods.gmu import (
    AttackOutcome,
    FFNSite,
    GMUPlanter,
    ImageTask,
    LMTask,
    attack,
    compare,
    counter_attack,
    find_ffn_layers,
    fresh_like,
    prune_units,
    reinit_units,
    release_equality,
    response_scores,
    suspect_units,
    unit_norms,
)

from ..malformed import (
    CHOICE,
    INT,
    OBJECT,
    POSITIVE,
    RATE,
    Case,
    Kind,
    Mutation,
    malformed_input_tests,
)
from . import gmu_kit as kit

LLAMA = kit.llama()
VIT = kit.vit()
PROTECTED = GMUPlanter(n_units=3, scale=100.0).fit_plant(LLAMA)
UNITS = suspect_units(PROTECTED)
IDS = kit.ids()
X, Y = kit.pixels(8)
TINY = FinetuneConfig(steps=2, batch_size=4, lr=1e-3)
IMAGE_TASK = ImageTask(X, Y, X, Y, 4)
LM_TASK = LMTask(kit.tokenizer(), kit.examples(8), kit.examples(4, 1, "heldout"))


def _state(model) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def _plant(model, layers, n_units, scale, lock, seed):
    return _state(GMUPlanter(layers=layers, n_units=n_units, scale=scale, lock=lock,
                             seed=seed).fit_plant(model))


def _sites(model) -> list[FFNSite]:
    return find_ffn_layers(model)


def _outcome_row(outcome: AttackOutcome) -> dict:
    row = outcome.row()
    row.pop("cpu_seconds")
    return row


LAYERS = Kind(
    "layers",
    (
        Mutation("out of range", lambda v, r: [7]),
        Mutation("duplicate", lambda v, r: [0, 0]),
        Mutation("empty", lambda v, r: []),
        Mutation("unknown string", lambda v, r: "first"),
        Mutation("None", lambda v, r: None),
        Mutation("non-integer", lambda v, r: [0.5]),
        Mutation("negative", lambda v, r: [-1]),
        Mutation("tuple", lambda v, r: tuple(v), same=True),
        Mutation("numpy array", lambda v, r: np.array(v), same=True),
        Mutation("unsorted", lambda v, r: list(reversed(v)), same=True),
    ),
)
MODEL = OBJECT.extend(Mutation("a module with no FFN", lambda v, r: torch.nn.Linear(3, 3)))
INPUTS = Kind(
    "inputs",
    (
        Mutation("None", lambda v, r: None),
        Mutation("list", lambda v, r: [v["input_ids"]]),
        Mutation("string", lambda v, r: "hello"),
        Mutation("empty dict", lambda v, r: {}),
        Mutation("float ids", lambda v, r: {"input_ids": v["input_ids"].float() + 0.5}),
        Mutation("wrong key", lambda v, r: {"pixel_values": v["input_ids"]}),
        Mutation("ids beyond the vocabulary", lambda v, r: {"input_ids": v["input_ids"] + 10**6}),
    ),
)
DTYPES = Kind(
    "dtypes",
    (
        Mutation("a string", lambda v, r: "float32"),
        Mutation("unknown dtype", lambda v, r: ["float8"]),
        Mutation("empty", lambda v, r: []),
        Mutation("None", lambda v, r: None),
        Mutation("tuple", lambda v, r: tuple(v), same=True),
    ),
)
UNITS_KIND = Kind(
    "units",
    (
        Mutation("unknown layer", lambda v, r: {"model.layers.9.mlp": [0]}),
        Mutation("index beyond the width", lambda v, r: {k: [10**6] for k in v}),
        Mutation("negative index", lambda v, r: {k: [-1] for k in v}),
        Mutation("non-integer index", lambda v, r: {k: [0.5] for k in v}),
        Mutation("a string for indices", lambda v, r: {k: "all" for k in v}),
        Mutation("a list", lambda v, r: list(v)),
        Mutation("None", lambda v, r: None),
        Mutation("numpy ints", lambda v, r: {k: np.array(i) for k, i in v.items()}, same=True),
        Mutation("tuples", lambda v, r: {k: tuple(i) for k, i in v.items()}, same=True),
    ),
)
EXAMPLES = Kind(
    "examples",
    (
        Mutation("None", lambda v, r: None),
        Mutation("string", lambda v, r: "hello"),
        Mutation("empty", lambda v, r: []),
        Mutation("integers", lambda v, r: [1, 2, 3]),
        Mutation("pair with a non-string response", lambda v, r: [("hi", 3)]),
        Mutation("tuple", lambda v, r: tuple(v), same=True),
    ),
)
TOKENIZER = Kind(
    "tokenizer",
    (
        Mutation("None", lambda v, r: None),
        Mutation("string", lambda v, r: "tok"),
        Mutation("array", lambda v, r: np.zeros(3)),
    ),
)
TASK = OBJECT.extend(
    Mutation("image task with NaN pixels",
             lambda v, r: ImageTask(v.pixels * torch.nan, v.labels, v.pixels, v.labels, 4)),
    Mutation("image task with float labels",
             lambda v, r: ImageTask(v.pixels, v.labels.float(), v.pixels, v.labels, 4)),
)

OUT_A = attack(VIT, IMAGE_TASK, TINY, label="a")
OUT_B = attack(VIT, IMAGE_TASK, TINY, label="b", seed=1)

CASES = [
    Case("GMUPlanter", _plant,
         {"model": LLAMA, "layers": [0, 1], "n_units": 2, "scale": 50.0, "lock": "auto", "seed": 3},
         {"model": MODEL, "layers": LAYERS, "n_units": INT(lo=1), "scale": POSITIVE,
          "lock": CHOICE(), "seed": INT(lo=0)}),
    Case("find_ffn_layers", _sites, {"model": VIT}, {"model": MODEL}),
    Case("release_equality",
         lambda original, protected, inputs, dtypes: release_equality(original, protected, inputs,
                                                                      dtypes),
         {"original": LLAMA, "protected": PROTECTED, "inputs": {"input_ids": IDS},
          "dtypes": ["float64"]},
         {"original": MODEL, "protected": MODEL, "inputs": INPUTS, "dtypes": DTYPES}),
    Case("unit_norms", lambda model: {k: v.numpy() for k, v in unit_norms(model).items()},
         {"model": PROTECTED}, {"model": MODEL}),
    Case("suspect_units", suspect_units, {"model": PROTECTED, "threshold": 6.0},
         {"model": MODEL, "threshold": POSITIVE}),
    Case("prune_units", lambda model, units: _state(prune_units(model, units)),
         {"model": PROTECTED, "units": UNITS}, {"model": MODEL, "units": UNITS_KIND}),
    Case("reinit_units",
         lambda model, units, std, seed: _state(reinit_units(model, units, std=std, seed=seed)),
         {"model": PROTECTED, "units": UNITS, "std": 0.02, "seed": 1},
         {"model": MODEL, "units": UNITS_KIND, "std": POSITIVE.without("None"), "seed": INT(lo=0)}),
    Case("fresh_like", lambda model, seed: _state(fresh_like(model, seed)),
         {"model": VIT, "seed": 2}, {"model": MODEL, "seed": INT(lo=0)}),
    Case("attack(ImageTask)",
         lambda model, task, seed: _outcome_row(attack(model, task, TINY, seed=seed)),
         {"model": VIT, "task": IMAGE_TASK, "seed": 0},
         {"model": MODEL, "task": TASK, "seed": INT(lo=0)}),
    Case("attack(LMTask)",
         lambda model, task: _outcome_row(attack(model, task, TINY)),
         {"model": LLAMA, "task": LM_TASK}, {"model": MODEL, "task": OBJECT}),
    Case("compare", lambda protected, twin, margin: compare(protected, twin, margin),
         {"protected": OUT_A, "twin": OUT_B, "margin": 0.05},
         {"protected": OBJECT, "twin": OBJECT, "margin": RATE}),
    Case("counter_attack",
         lambda name, protected: counter_attack(name, protected, TINY)[1].model_dump(),
         {"name": "clip", "protected": PROTECTED}, {"name": CHOICE(), "protected": MODEL}),
    Case("response_scores",
         lambda model, examples, tokenizer: (lambda c, loss: (c.numpy(), loss))(
             *response_scores(model, examples, tokenizer=tokenizer)),
         {"model": LLAMA, "examples": kit.examples(5), "tokenizer": kit.tokenizer()},
         {"model": MODEL, "examples": EXAMPLES, "tokenizer": TOKENIZER}),
]

test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


def test_gate_lock_on_an_ungated_ffn_is_a_one_line_error():
    from trustlab.core.errors import InputError

    try:
        GMUPlanter(lock="gate").fit(VIT)
    except InputError as exc:
        assert "ungated" in str(exc) and "\n" not in str(exc)
    else:
        raise AssertionError("the gate lock was accepted on a GELU FFN")


def test_plant_refuses_another_architecture():
    from trustlab.core.errors import InputError

    planter = GMUPlanter(n_units=2).fit(LLAMA)
    try:
        planter.plant(kit.llama(width=40))
    except InputError as exc:
        assert "architecture" in str(exc)
    else:
        raise AssertionError("plant accepted a model of other widths")


def test_plant_before_fit_names_the_step():
    from trustlab.core.errors import NotFittedError

    try:
        GMUPlanter().plant(LLAMA)
    except NotFittedError as exc:
        assert "'fit'" in str(exc) and "'plant'" in str(exc)
    else:
        raise AssertionError("plant ran before fit")
