"""asymmetry's public API on malformed input: InputError with one line, or the canonical result.

Every callable in ``trustlab.methods.asymmetry.__all__`` is a case below or (finetune_adapted,
which trains a model on its valid call) checked on its argument checks alone; the corruptions
per argument kind are in tests/malformed.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import hypothesis  # noqa: F401 - the property tests are built by malformed_input_tests
import numpy as np
import pytest

from trustlab.core.errors import InputError
from trustlab.methods.asymmetry import (
    TRANSFORMS,
    AsymmetryResult,
    Composed,
    ForEvaluation,
    InContext,
    Scope,
    Transform,
    adaptation_data,
    asymmetry,
    check_scope,
    cipher_curriculum,
    closed_vocabulary,
    compose,
    finetune_adapted,
    make_transform,
    vocabulary_substitution,
)

from ..malformed import (
    INT,
    OBJECT,
    RATE,
    RNG,
    UNIT,
    Case,
    Kind,
    Mutation,
    malformed_input_tests,
)

TEXT = Kind(
    "text",
    (
        Mutation("None", lambda v, r: None),
        Mutation("bytes", lambda v, r: v.encode()),
        Mutation("int", lambda v, r: 3),
        Mutation("list", lambda v, r: [v]),
    ),
)
NAME = TEXT.extend(
    Mutation("unknown name", lambda v, r: "no_such_transform"),
    Mutation("upper case", lambda v, r: v.upper()),
    Mutation("three parts", lambda v, r: f"{v}+{v}+{v}"),
)
FLAGS = Kind(
    "flags",
    (
        Mutation("numpy bool array", lambda v, r: np.asarray(v, dtype=bool), same=True),
        Mutation("0/1 integers", lambda v, r: [int(x) for x in v], same=True),
        Mutation("a string", lambda v, r: "yes"),
        Mutation("None", lambda v, r: None),
        Mutation("a 0.5 in it", lambda v, r: [0.5, *v[1:]]),
        Mutation("a 2 in it", lambda v, r: [2, *v[1:]]),
        Mutation("one item dropped", lambda v, r: v[:-1]),
        Mutation("a set", lambda v, r: set(v)),
    ),
)
VOCAB = Kind(
    "vocab",
    (
        Mutation("None", lambda v, r: None),
        Mutation("a string", lambda v, r: "apple"),
        Mutation("an int", lambda v, r: 3),
        Mutation("an open model", lambda v, r: "hf:/nowhere/model"),
    ),
)

_rng = np.random.default_rng(0)
H0, H1 = list(_rng.random(30) < 0.2), list(_rng.random(30) < 0.6)
U0, U1 = list(_rng.random(25) < 0.8), list(_rng.random(25) < 0.7)
TOKENS = {"[UNK]": 0, "\u2581apple": 1, "\u2581river": 2, "\u2581stone": 3, "apple": 4, "river": 5}
SHOTS = [("What is 1 plus 1?", "Sure: 2"), ("What is 2 plus 1?", "Sure: 3")]


def _ex(prompt, response, kind):
    return SimpleNamespace(prompt=prompt, response=response, kind=kind, split="train")


CORPUS = SimpleNamespace(examples=[_ex(f"What is {i} plus 1?", f"Sure: {i + 1}", "task")
                                   for i in range(6)])


def run_make(name):
    t = make_transform(name)
    return (t.label, t.encode("Hello, World 1"))


def run_encode(text):
    return make_transform("vigenere", key="key").encode(text)


def run_decode(text):
    return make_transform("base64").decode(text)


def run_compose(first, second):
    t = compose(first, second)
    assert isinstance(t, Composed)
    return t.encode("abc")


def run_scope(model, transform):
    s = check_scope(model, transform)
    assert isinstance(s, Scope)
    return tuple(s)


def run_closed(model):
    return closed_vocabulary(model)


def run_vocab(vocab):
    return vocabulary_substitution(vocab, key=1).mapping


def run_asymmetry(**kw):
    r = asymmetry(**kw)
    assert isinstance(r, AsymmetryResult)
    return r.to_dict()


def run_data(transform, n, plain_share):
    return adaptation_data(transform, n, plain_share=plain_share, corpus=CORPUS)


def run_curriculum(transform, n, sentence_share):
    return cipher_curriculum(transform, n, sentence_share=sentence_share, corpus=CORPUS)


def run_for_eval(transform):
    ev = ForEvaluation(transform)
    return (ev.name, ev.encode("Sure: 7"), ev.decode(ev.encode("Sure: 7")))


def run_icl(transform, k):
    return InContext(transform, SHOTS, k=k).encode_conversation([{"role": "user", "content": "Hi"}])


ROT = make_transform("rot13")
CASES = [
    Case("make_transform", run_make, {"name": "caesar"}, {"name": NAME}),
    Case("Transform.encode", run_encode, {"text": "Attack at dawn"}, {"text": TEXT}),
    Case("Transform.decode", run_decode, {"text": "SGk="},
         {"text": TEXT.extend(Mutation("not base64", lambda v, r: v + "!"))}),
    Case("compose", run_compose, {"first": ROT, "second": make_transform("atbash")},
         {"first": OBJECT, "second": OBJECT}),
    Case("check_scope", run_scope, {"model": "organism:smol-chat", "transform": ROT},
         {"model": TEXT.extend(Mutation("unknown spec", lambda v, r: "llama")),
          "transform": OBJECT}),
    Case("closed_vocabulary", run_closed, {"model": "hf:/nowhere"},
         {"model": Kind("model", (Mutation("None", lambda v, r: None),
                                  Mutation("int", lambda v, r: 3),
                                  Mutation("unknown spec", lambda v, r: "llama")))}),
    Case("vocabulary_substitution", run_vocab, {"vocab": TOKENS}, {"vocab": VOCAB}),
    Case("asymmetry", run_asymmetry,
         {"harm_reference": H0, "harm_transformed": H1, "utility_reference": U0,
          "utility_transformed": U1, "tolerance": 0.1, "confidence_level": 0.9,
          "n_resamples": 200, "rng": 3},
         {"harm_reference": FLAGS, "harm_transformed": FLAGS, "utility_reference": FLAGS,
          "utility_transformed": FLAGS, "tolerance": RATE, "confidence_level": UNIT,
          "n_resamples": INT(lo=100), "rng": RNG}),
    Case("adaptation_data", run_data, {"transform": ROT, "n": 4, "plain_share": 0.5},
         {"transform": OBJECT, "n": INT(lo=1), "plain_share": RATE}),
    Case("cipher_curriculum", run_curriculum, {"transform": ROT, "n": 4, "sentence_share": 0.5},
         {"transform": OBJECT, "n": INT(lo=1), "sentence_share": RATE}),
    Case("ForEvaluation", run_for_eval, {"transform": ROT}, {"transform": OBJECT}),
    Case("InContext", run_icl, {"transform": ROT, "k": 2},
         {"transform": OBJECT, "k": INT(3, lo=0)}),
]

test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


def test_registry_and_base_class_are_what_the_cases_build():
    assert all(issubclass(cls, Transform) for cls in TRANSFORMS.values())
    assert isinstance(make_transform("rot13"), Transform)


@pytest.mark.parametrize("args", [
    {"model": None}, {"model": 3}, {"model": "openai:http://h:1/v1#m"}, {"data": []},
    {"data": "pairs"}, {"config": {"steps": -1}}, {"config": {"no_such_key": 1}},
])
def test_finetune_adapted_rejects_bad_arguments_before_training(args, tmp_path):
    call = {"model": "organism:chat-xs", "data": [("a", "b")], "config": {"steps": 1},
            "out_dir": tmp_path / "m", **args}
    with pytest.raises(InputError) as err:
        finetune_adapted(**call)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "m").exists()
