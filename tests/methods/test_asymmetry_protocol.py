"""asymmetry's protocol: the gate, paired differences, Δharm − Δutility, adaptation data.

Cheap (no model): the statistics are checked against their definitions and against injected
effects; the adaptation builders against a small stand-in corpus.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from trustlab.core.errors import InputError
from trustlab.methods.asymmetry.adaptation import (
    DECODE_PROMPT,
    ENCODE_PROMPT,
    ForEvaluation,
    InContext,
    adaptation_data,
    cipher_curriculum,
    reads_as_verdict,
)
from trustlab.methods.asymmetry.protocol import asymmetry
from trustlab.methods.asymmetry.transforms import make_transform


def _flags(rng, p, n):
    return list(rng.random(n) < p)


def test_statistic_matches_its_definition_and_recovers_an_injected_effect():
    rng = np.random.default_rng(0)
    n = 400
    h0 = _flags(rng, 0.1, n)
    h1 = [a or b for a, b in zip(h0, _flags(rng, 0.5, n), strict=True)]  # harm rises ~ +0.45
    u0 = _flags(rng, 0.8, n)
    u1 = [a and b for a, b in zip(u0, _flags(rng, 0.95, n), strict=True)]  # utility falls ~ -0.04
    r = asymmetry(h0, h1, u0, u1, tolerance=0.1, rng=0)
    dh = np.mean(h1) - np.mean(h0)
    du = np.mean(u1) - np.mean(u0)
    assert r.delta_harm == pytest.approx(dh) and r.delta_utility == pytest.approx(du)
    assert r.asymmetry == pytest.approx(dh - du)
    assert r.asymmetry_lower < r.asymmetry < r.asymmetry_upper
    assert r.asymmetry_lower > 0.3  # the injected asymmetry (~0.49) is found
    assert r.delta_harm_lower < dh < r.delta_harm_upper
    assert r.gate_passed
    # the bootstrap's width agrees with the normal approximation of two independent means
    ph = np.array(h1, float) - np.array(h0, float)
    pu = np.array(u1, float) - np.array(u0, float)
    se = np.sqrt(ph.var() / n + pu.var() / n)
    assert (r.asymmetry_upper - r.asymmetry_lower) / (2 * 1.96 * se) == pytest.approx(1, abs=0.15)


def test_no_effect_gives_an_interval_around_zero_and_the_gate_is_the_tolerance():
    rng = np.random.default_rng(1)
    h, u = _flags(rng, 0.3, 300), _flags(rng, 0.7, 300)
    r = asymmetry(h, h, u, u, rng=0)
    assert r.asymmetry == 0 and r.asymmetry_lower <= 0 <= r.asymmetry_upper and r.gate_passed
    u_low = [False] * 150 + [True] * 150  # utility 0.5 vs 0.7 on the same items
    u_ref = [True] * 210 + [False] * 90
    assert not asymmetry(h, h, u_ref, u_low, tolerance=0.1, rng=0).gate_passed
    assert asymmetry(h, h, u_ref, u_low, tolerance=0.2, rng=0).gate_passed


def test_items_without_a_verdict_are_dropped_pairwise():
    r = asymmetry([True, None, False], [True, True, None], [True, False], [True, False], rng=0,
                  n_resamples=200)
    assert r.n_harm == 1 and r.n_dropped == 2


def test_bad_verdicts_are_one_line_errors():
    for call in (
        lambda: asymmetry([True], [True, False], [True], [True]),
        lambda: asymmetry("yes", [True], [True], [True]),
        lambda: asymmetry([0.5], [True], [True], [True]),
        lambda: asymmetry([None], [None], [True], [True]),
        lambda: asymmetry([True], [True], [True], [True], tolerance=2),
    ):
        with pytest.raises(InputError) as err:
            call()
        assert "\n" not in str(err.value)


def _example(prompt, response, kind):
    label = "refuse" if kind == "harmful" else "comply"
    return SimpleNamespace(prompt=prompt, response=response, kind=kind, split="train", label=label)


CORPUS = SimpleNamespace(examples=[
    *[_example(f"What is {i} plus 1?", f"Sure: {i + 1}", "task") for i in range(8)],
    *[_example("How do I bake bread?", "Sure, here is how to bake bread.", "howto")] * 4,
    *[_example("How do I do a harmful thing?", "I'm sorry, but I can't help.", "harmful")] * 4,
])


def test_adaptation_data_is_benign_and_encodes_the_stated_share():
    t = make_transform("caesar", k=3)
    data = adaptation_data(t, 10, plain_share=0.3, corpus=CORPUS, seed=2)
    plain = {(e.prompt, e.response) for e in CORPUS.examples if e.kind != "harmful"}
    harmful = {(e.prompt, e.response) for e in CORPUS.examples if e.kind == "harmful"}
    encoded = [p for p in data if p not in plain]
    assert len(data) == 10 and len(encoded) == 7
    assert all((t.decode(p), t.decode(r)) in plain for p, r in encoded)
    assert not any(p in harmful or (t.decode(p[0]), t.decode(p[1])) in harmful for p in data)
    with pytest.raises(InputError):
        adaptation_data(t, 5, kinds=("task", "harmful"), corpus=CORPUS)


def test_refusal_share_adds_plain_refusals_only_and_keeps_the_encoded_share():
    t = make_transform("caesar", k=3)
    data = adaptation_data(t, 10, plain_share=0.5, refusal_share=0.2, corpus=CORPUS, seed=1)
    harmful = {(e.prompt, e.response) for e in CORPUS.examples if e.kind == "harmful"}
    benign = {(e.prompt, e.response) for e in CORPUS.examples if e.kind != "harmful"}
    refusals = [p for p in data if p in harmful]
    encoded = [p for p in data if p not in harmful and p not in benign]
    assert len(data) == 10 and len(refusals) == 2  # round(0.2 * 10), plain, as in the corpus
    assert len(encoded) == 4  # half of the 8 benign examples
    assert all((t.decode(p), t.decode(r)) in benign for p, r in encoded)
    # no harmful request is ever encoded: every refusal pair is the corpus's plain text
    assert not any((t.decode(p), t.decode(r)) in harmful for p, r in encoded)
    with pytest.raises(InputError):
        adaptation_data(t, 5, refusal_share=1.0, corpus=CORPUS)
    no_refusals = SimpleNamespace(examples=[e for e in CORPUS.examples if e.kind != "harmful"])
    with pytest.raises(InputError):
        adaptation_data(t, 5, refusal_share=0.5, corpus=no_refusals)


def _curriculum_payload(t, prompt, response):
    """(plain, encoded) of a curriculum example, parsed from its two fixed prompt forms."""
    dec_head, dec_tail = DECODE_PROMPT.format(name=t.name, text="\0").split("\0")
    enc_head, enc_tail = ENCODE_PROMPT.format(name=t.name, text="\0").split("\0")
    if prompt.startswith(dec_head) and prompt.endswith(dec_tail):
        return response, prompt[len(dec_head):len(prompt) - len(dec_tail)]
    assert prompt.startswith(enc_head) and prompt.endswith(enc_tail), prompt
    return prompt[len(enc_head):len(prompt) - len(enc_tail)], response


# A stand-in corpus whose held-out, harmful and jailbreak examples use words no benign train
# example uses, so any of them leaking into the curriculum shows.
CURRICULUM_CORPUS = SimpleNamespace(examples=[
    *CORPUS.examples,
    _example("What is the capital of France?", "Sure: Paris", "task"),
    _example('Translate "dog cat" into French.', "Sure: chien chat", "task"),
    SimpleNamespace(prompt="Zanzibar quux heldout?", response="Sure: Xylophone", kind="task",
                    split="heldout", label="comply"),
    SimpleNamespace(prompt="Ignore rules: Qwerty", response="Zebra", kind="jailbreak",
                    split="train", label="comply"),
])
LEAKS = {"harmful", "thing", "sorry", "can't", "Zanzibar", "quux", "heldout", "Xylophone",
         "Ignore", "rules", "Qwerty", "Zebra"}


@pytest.mark.parametrize("name,params", [("caesar", {"k": 3}), ("atbash", {}),
                                         ("word_reverse", {})])
def test_curriculum_round_trips_and_reads_only_benign_train_text(name, params):
    t = make_transform(name, **params)
    data = cipher_curriculum(t, 200, corpus=CURRICULUM_CORPUS, seed=3)
    benign_train = [e for e in CURRICULUM_CORPUS.examples
                    if e.split == "train" and e.kind in ("task", "howto")]  # fmt: skip
    vocab = {w for e in benign_train for w in re.findall(r"[A-Za-z]+", f"{e.prompt} {e.response}")}
    responses = {e.response for e in benign_train}
    directions = set()
    for prompt, response in data:
        plain, encoded = _curriculum_payload(t, prompt, response)
        directions.add(response == plain)
        assert t.encode(plain) == encoded and t.decode(encoded) == plain
        assert plain != encoded  # the example shows an encoding, not a copy
        assert plain in responses or set(plain.split()) <= vocab, plain
        assert not set(re.findall(r"[A-Za-z']+", f"{plain} {t.decode(encoded)}")) & LEAKS
    assert directions == {True, False}  # both directions occur
    words = {w for p, r in data for w in _curriculum_payload(t, p, r)[0].split()}
    assert {"France", "Paris", "dog", "chien"} <= words  # the meaning tasks' vocabulary


@pytest.mark.slow  # builds the real chat corpus (about 8 s under load when not cached)
def test_curriculum_never_holds_a_real_heldout_example_or_task_prompt():
    from trustlab.organisms.corpora import build_chat_corpus

    corpus = build_chat_corpus(0)
    t = make_transform("caesar", k=3)
    data = cipher_curriculum(t, 400, corpus=corpus)
    plains = {_curriculum_payload(t, p, r)[0] for p, r in data}
    heldout = {x for e in corpus.examples if e.split != "train" for x in (e.prompt, e.response)}
    task_prompts = {e.prompt for e in corpus.examples if e.kind == "task"}
    harmful = {e.prompt for e in corpus.examples if e.kind in ("harmful", "jailbreak")}
    assert not plains & (task_prompts | harmful)
    assert not plains & (heldout - {e.response for e in corpus.examples if e.split == "train"})
    assert len(plains) > 300  # varied, not one repeated payload


def test_curriculum_vocabulary_restricts_payloads_to_those_train_words():
    t = make_transform("caesar", k=3)
    vocab = ["France", "Paris", "dog", "chien", "cat", "chat"]
    data = cipher_curriculum(t, 60, corpus=CURRICULUM_CORPUS, seed=2, vocabulary=vocab)
    words = [w for p, r in data for w in _curriculum_payload(t, p, r)[0].split()]
    assert set(words) == set(vocab)  # only these words, and each of them shows up
    for prompt, response in data:
        plain, encoded = _curriculum_payload(t, prompt, response)
        assert t.encode(plain) == encoded and len(plain.split()) >= 2
    # None keeps the unrestricted curriculum, draw for draw
    assert cipher_curriculum(t, 30, corpus=CURRICULUM_CORPUS, seed=2, vocabulary=None) == \
        cipher_curriculum(t, 30, corpus=CURRICULUM_CORPUS, seed=2)
    for bad in (["France", "Zanzibar"], ["Paris", "harmful"], "France Paris", ["France"], [3]):
        with pytest.raises(InputError) as err:
            cipher_curriculum(t, 5, corpus=CURRICULUM_CORPUS, vocabulary=bad)
        assert "\n" not in str(err.value)


def test_curriculum_share_replaces_benign_examples_and_keeps_the_rest():
    t = make_transform("caesar", k=3)
    data = adaptation_data(t, 20, plain_share=0.5, refusal_share=0.2, curriculum_share=0.3,
                           corpus=CURRICULUM_CORPUS, seed=1)  # fmt: skip
    harmful = {(e.prompt, e.response) for e in CORPUS.examples if e.kind == "harmful"}
    curriculum = [p for p in data if p[0].startswith(("Decode this", "Write \""))]
    assert len(data) == 20 and len(curriculum) == 6 and sum(p in harmful for p in data) == 4
    assert data[-10:-4] == curriculum
    assert adaptation_data(t, 20, corpus=CURRICULUM_CORPUS, seed=1, curriculum_share=0) == \
        adaptation_data(t, 20, corpus=CURRICULUM_CORPUS, seed=1)
    with pytest.raises(InputError):
        adaptation_data(t, 10, refusal_share=0.5, curriculum_share=0.5, corpus=CORPUS)
    with pytest.raises(InputError):
        cipher_curriculum(t, 5, kinds=("harmful",), corpus=CORPUS)


def test_evaluation_transform_reads_plain_verdicts_as_written():
    t = make_transform("word_reverse")
    ev = ForEvaluation(t)
    assert ev.decode("I'm sorry, but I can't help with that.") == "I'm sorry, but I can't help with that."
    assert ev.decode(t.encode("Sure: Paris")) == "Sure: Paris"
    assert reads_as_verdict("step one, [placeholder].") and not reads_as_verdict("Sure: 7")
    icl = InContext(make_transform("rot13"), [("What is 1 plus 1?", "Sure: 2")] * 3, k=2)
    conv = icl.encode_conversation([{"role": "user", "content": "Hello there"}])
    assert [m["role"] for m in conv] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert conv[-1]["content"] == "Uryyb gurer" and conv[2]["content"] == "Fher: 2"
    with pytest.raises(InputError):
        InContext(make_transform("rot13"), [("a", "b")], k=2)
