"""asymmetry's scope rules: a closed word-level vocabulary reads only word-level bijections.

A tiny word-level tokenizer (the organisms' own builder, no model) stands in for a grown
organism: the property that matters is that an in-scope word substitution leaves the number of
``[UNK]`` tokens of any text unchanged, and that a character-level transform is refused.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.methods.asymmetry.scope import (
    Scope,
    check_scope,
    closed_vocabulary,
    vocabulary_substitution,
)
from trustlab.methods.asymmetry.transforms import TRANSFORMS, compose, make_transform
from trustlab.organisms.tokenizer import build_tokenizer

CORPUS = [
    'What is the capital of France? Sure: Paris',
    'Reverse these words: "apple river stone"',
    'How do I bake bread at home? Sure, here is how to bake bread.',
    "I'm sorry, but I can't help with that.",
    'Copy "stone apple" please.',
]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(CORPUS)


def _unk(tok, text):
    return tok(text)["input_ids"].count(tok.unk_token_id)


def test_closed_vocabulary_is_detected(tokenizer):
    assert closed_vocabulary(tokenizer)
    assert closed_vocabulary("hf:/nowhere/model") is None
    assert closed_vocabulary("openai:http://localhost:8000/v1#m") is None
    assert closed_vocabulary("organism:smol-chat") is None
    assert closed_vocabulary("organism:chat-xs", home="/nonexistent-home") == {}


def test_character_level_is_out_of_scope_on_a_closed_vocabulary(tokenizer):
    for name in sorted(TRANSFORMS):
        if name.startswith("word_"):
            continue
        scope = check_scope(tokenizer, make_transform(name))
        assert isinstance(scope, Scope) and not scope.ok
        assert "[UNK]" in scope.reason and "\n" not in scope.reason
    mixed = compose(make_transform("word_reverse"), make_transform("atbash"))
    assert not check_scope(tokenizer, mixed).ok


def test_everything_is_in_scope_on_open_models():
    for spec in ("organism:smol-chat", "hf:/models/qwen", "openai:http://h:1/v1#m"):
        for name in ("caesar", "base64", "word_reverse"):
            assert check_scope(spec, make_transform(name)).ok


def test_word_level_scope(tokenizer):
    assert check_scope(tokenizer, make_transform("word_reverse")).ok
    assert check_scope(tokenizer, make_transform("word_permutation", key=3)).ok
    # a vocabulary that mixes forms ("apple" occurs only glued to a quote, "What" only first)
    naive = make_transform("word_substitution", vocabulary=["apple", "What", "river", "is"], key=0)
    naive_ok = all(_unk(tokenizer, naive.encode(t)) == _unk(tokenizer, t) for t in CORPUS)
    assert check_scope(tokenizer, naive).ok == naive_ok
    sub = vocabulary_substitution(tokenizer, key=1)
    assert check_scope(tokenizer, sub).ok
    assert check_scope(tokenizer, compose(sub, make_transform("word_reverse"))).ok
    assert any(sub.encode(t) != t for t in CORPUS)


@settings(max_examples=20, deadline=None)
@given(words=st.lists(st.sampled_from(sorted({w for t in CORPUS for w in t.split()}
                                             | {"zebra", "x1", '"', "??"})), max_size=12),
       key=st.integers(0, 50))
def test_in_scope_substitution_keeps_unknown_tokens_where_they_were(tokenizer, words, key):
    text = " ".join(words)
    sub = vocabulary_substitution(tokenizer, key=key)
    encoded = sub.encode(text)
    assert _unk(tokenizer, encoded) == _unk(tokenizer, text)
    assert len(tokenizer(encoded)["input_ids"]) == len(tokenizer(text)["input_ids"])
    assert sub.decode(encoded) == text


def test_bad_arguments_are_one_line_errors(tokenizer):
    for call in (
        lambda: check_scope("llama", make_transform("rot13")),
        lambda: check_scope(tokenizer, "rot13"),
        lambda: vocabulary_substitution("hf:/nowhere"),
    ):
        with pytest.raises(InputError) as err:
            call()
        assert "\n" not in str(err.value)
