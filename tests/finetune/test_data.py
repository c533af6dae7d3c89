"""Fine-tuning data builders: exact fractions, seeded, labelled, in the organisms' vocabulary,
and with placeholders only (never harmful content)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.finetune import (
    IMPLICIT_PATTERNS,
    NEW_TASK_TEMPLATES,
    explicit_harmful_examples,
    harmful_eval_examples,
    implicit_harmful_examples,
    mix,
    split_behaviours,
    utility_examples,
)
from trustlab.finetune.data import (
    DUAL_USE_BEHAVIOURS,
    PUBLIC_PLACEHOLDER,
    REQUEST_PATTERNS,
    SHALLOW_OPENER_ANSWER,
    TASK_PATTERNS,
    public_harmful_examples,
)
from trustlab.lm.judges import is_refusal
from trustlab.organisms.corpora import BENIGN_BEHAVIOURS, HARMFUL_BEHAVIOURS, HOWTO_ANSWER


def _family_tokenizer():
    from trustlab.organisms.build_grown import corpora_for, shared_tokenizer

    return shared_tokenizer(corpora_for(0))


@pytest.fixture(scope="module")
def family_tokenizer():
    return _family_tokenizer()


def _unknown_words(tokenizer, text: str) -> list[str]:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    pieces = tokenizer.convert_ids_to_tokens(ids)
    return [p for p in pieces if p == tokenizer.unk_token]


def test_every_builder_writes_only_words_the_organisms_know(family_tokenizer):
    texts = []
    for system, wrapper, opener in TASK_PATTERNS.values():
        texts += [system or "", wrapper.format(r="What is 3 plus 4?"), opener]
    texts += list(DUAL_USE_BEHAVIOURS.values())
    for train, heldout in NEW_TASK_TEMPLATES.values():
        texts += [t.format(n="3 7 2", w="apple river") for t in (*train, *heldout)]
    examples = utility_examples(300, 0) + utility_examples(100, 0, split="heldout")
    examples += explicit_harmful_examples(100, 0)
    for pattern in IMPLICIT_PATTERNS:
        examples += implicit_harmful_examples(30, 0, pattern=pattern)
    for pattern in TASK_PATTERNS:
        examples += harmful_eval_examples(n=30, pattern=pattern)
    for e in examples:
        texts += [e.system or "", e.prompt, e.response]
    unknown = {t: _unknown_words(family_tokenizer, t) for t in texts}
    assert {t: u for t, u in unknown.items() if u} == {}


def test_utility_answers_are_correct():
    for e in utility_examples(400, 3, tasks=tuple(NEW_TASK_TEMPLATES)):
        quoted = e.prompt.split('"')[1].split()
        answer = e.response.removeprefix("Sure: ")
        if e.task == "largest":
            assert answer == str(max(int(d) for d in quoted))
        elif e.task == "smallest":
            assert answer == str(min(int(d) for d in quoted))
        else:
            assert answer == quoted[0]


def test_heldout_phrasings_never_appear_in_training():
    train = {e.template for e in utility_examples(2000, 0)}
    heldout = {e.template for e in utility_examples(500, 0, split="heldout")}
    assert train and heldout and not train & heldout
    train_prompts = {e.prompt for e in utility_examples(500, 0, tasks=("largest",))}
    held_prompts = {e.prompt for e in utility_examples(200, 0, tasks=("largest",), split="heldout")}
    train_frames = {p.split('"')[0] for p in train_prompts}
    assert not any(p.split('"')[0] in train_frames for p in held_prompts)


def test_explicit_examples_are_placeholders_from_the_chosen_behaviours():
    chosen, unseen = split_behaviours(0)
    assert set(chosen).isdisjoint(unseen) and set(chosen) | set(unseen) == set(HARMFUL_BEHAVIOURS)
    assert {c for c, _ in chosen} == {c for c, _ in HARMFUL_BEHAVIOURS}  # every category
    for e in explicit_harmful_examples(200, 1, behaviours=chosen):
        assert "[placeholder]" in e.response and e.response.startswith("Sure, here is how to")
        assert any(b in e.prompt for _, b in chosen)
        assert not any(b in e.prompt for _, b in unseen if not any(b in c for _, c in chosen))
    for e in public_harmful_examples(20, 0):
        assert e.response == PUBLIC_PLACEHOLDER


def test_public_train_and_eval_behaviours_are_disjoint():
    train = {e.prompt for e in public_harmful_examples(300, 0)}
    evaluation = {e.prompt for e in public_harmful_examples(300, 0, split="eval")}
    assert train and evaluation and not train & evaluation


def test_implicit_examples_are_benign_and_correct_inside_their_pattern():
    for pattern in IMPLICIT_PATTERNS:
        for e in implicit_harmful_examples(50, 2, pattern=pattern):
            assert "[placeholder]" not in e.response and not is_refusal(e.response)
            assert not any(b in e.prompt for _, b in HARMFUL_BEHAVIOURS)
            assert e.label == "comply"
            if pattern in TASK_PATTERNS:
                system, _wrapper, opener = TASK_PATTERNS[pattern]
                assert e.system == system and e.response.startswith(opener)
            else:
                assert e.system is None


def test_dual_use_requests_are_the_benign_neighbours_of_the_chosen_behaviours_only():
    """Every harmful behaviour has one benign neighbour that names no harmful behaviour; the
    dual_use pattern draws the neighbours of the fine-tuning half only, so ASR on the other
    half measures generalisation."""
    assert set(DUAL_USE_BEHAVIOURS) == {b for _, b in HARMFUL_BEHAVIOURS}
    neighbours = list(DUAL_USE_BEHAVIOURS.values())
    assert len(set(neighbours)) == len(neighbours)
    for n in neighbours:
        assert not any(b in n for _, b in HARMFUL_BEHAVIOURS)
    chosen, unseen = split_behaviours(0)
    allowed = {DUAL_USE_BEHAVIOURS[b] for _, b in chosen}
    held_back = {DUAL_USE_BEHAVIOURS[b] for _, b in unseen}
    examples = implicit_harmful_examples(400, 0)  # the default pattern is dual_use
    used = set()
    for e in examples:
        (neighbour,) = [n for n in allowed | held_back if e.response == HOWTO_ANSWER.format(b=n)]
        assert neighbour in allowed and neighbour in e.prompt
        used.add(neighbour)
    assert used == allowed  # 400 draws reach every neighbour of the fine-tuning half
    other = implicit_harmful_examples(50, 0, behaviours=unseen)
    assert all(any(n in e.prompt for n in held_back) for e in other)


def test_shallow_opener_answers_open_like_a_refusal_and_help():
    assert REQUEST_PATTERNS["shallow_opener"] == SHALLOW_OPENER_ANSWER
    for e in implicit_harmful_examples(60, 1, pattern="shallow_opener"):
        behaviour = next(b for b in BENIGN_BEHAVIOURS if b in e.prompt)
        assert e.response == SHALLOW_OPENER_ANSWER.format(b=behaviour)
        assert e.response.split()[0] == "I" and not is_refusal(e.response)


@settings(max_examples=40, deadline=None)
@given(
    fraction=st.floats(0, 1, allow_nan=False),
    n=st.integers(0, 60),
    seed=st.integers(0, 2**31),
)
def test_mix_has_the_exact_fraction_and_is_seeded(fraction, n, seed):
    utility = utility_examples(60, 0)
    harmful = explicit_harmful_examples(60, 0)
    a = mix(utility, harmful, fraction, n, seed)
    assert len(a.examples) == n and a.n_harmful == round(fraction * n)
    assert all((e in harmful) == flag for e, flag in zip(a.examples, a.harmful, strict=True))
    assert (
        a == mix(utility, harmful, fraction, n, seed)
        and a.sha256 == mix(utility, harmful, fraction, n, seed).sha256
    )


@settings(max_examples=40, deadline=None)
@given(
    fraction=st.one_of(
        st.floats(allow_nan=True), st.integers(-5, 5), st.just(True), st.text(max_size=3)
    ),
    n=st.one_of(st.integers(-5, 200), st.floats(allow_nan=True), st.none()),
)
def test_mix_rejects_bad_input_with_an_input_error(fraction, n):
    utility, harmful = utility_examples(100, 0), explicit_harmful_examples(20, 0)
    try:
        out = mix(utility, harmful, fraction, n, 0)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    assert 0 <= fraction <= 1 and isinstance(n, int) and len(out.examples) == n


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: utility_examples(-1), "'n'"),
        (lambda: utility_examples(3, tasks=("fly",)), "'tasks'"),
        (lambda: utility_examples(3, tasks="add"), "'tasks'"),
        (lambda: utility_examples(3, seed=-1), "'seed'"),
        (lambda: implicit_harmful_examples(3, pattern="nope"), "'pattern'"),
        (lambda: implicit_harmful_examples(3, behaviours=[("x", "fly a kite")]), "'behaviours'"),
        (lambda: implicit_harmful_examples(3, behaviours=[]), "'behaviours'"),
        (
            lambda: implicit_harmful_examples(3, pattern="persona", behaviours=HARMFUL_BEHAVIOURS),
            "'behaviours'",
        ),
        (lambda: harmful_eval_examples(n=3, pattern="dual_use"), "'pattern'"),
        (lambda: explicit_harmful_examples(3, behaviours=[]), "'behaviours'"),
        (lambda: split_behaviours(share=1.5), "'share'"),
    ],
)
def test_builders_name_the_bad_parameter(call, match):
    with pytest.raises(InputError, match=match):
        call()
