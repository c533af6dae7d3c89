"""asymmetry's transforms: exact round trips, declared domains, known test vectors.

Property tests draw arbitrary Unicode (hypothesis's ``text()``) for every transform and for the
composition of any two: each text is either inside the domain and round-trips exactly, or is
refused with a one-line InputError. Known vectors pin each transform to its textbook definition,
so a transform that round-trips but encodes the wrong thing fails too.
"""

from __future__ import annotations

import base64
import codecs
import itertools
import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.methods.asymmetry.transforms import (
    MORSE,
    NATO,
    TRANSFORMS,
    Transform,
    compose,
    make_transform,
)

VOCAB = ("What", "is", "the", "capital", "of", "France", "Reverse", "these", "words", "apple",
         "river", "stone", "Sure", "plus", "I", "can", "help", "with", "that")


def build(name: str) -> Transform:
    if name == "word_substitution":
        return make_transform(name, vocabulary=VOCAB, key=7)
    return make_transform(name)


ALL = sorted(TRANSFORMS)
FAST = settings(max_examples=20, deadline=None)

#: Domain alphabets of the transforms that declare a restricted one.
MORSE_ALPHABET = "".join(MORSE) + string.ascii_uppercase + " "
NATO_ALPHABET = "".join(NATO) + string.ascii_uppercase
BRAILLE_ALPHABET = "".join(chr(c) for c in range(0x20, 0x7F)) + "\n"
RESTRICTED = {"morse": MORSE_ALPHABET, "nato": NATO_ALPHABET, "braille": BRAILLE_ALPHABET}

words_text = st.lists(
    st.one_of(st.sampled_from(VOCAB), st.text(max_size=4)), max_size=8
).flatmap(lambda ws: st.lists(st.sampled_from([" ", "  ", "\n", ", ", ""]), min_size=len(ws),
                              max_size=len(ws)).map(lambda ss: "".join(w + s for w, s in zip(ws, ss, strict=True))))


def roundtrip_or_reject(t: Transform, text: str) -> bool:
    """True when ``text`` round-trips; False when refused with a one-line InputError."""
    reason = t.rejects(text)
    if reason is not None:
        with pytest.raises(InputError) as err:
            t.encode(text)
        assert "\n" not in str(err.value) and t.label in str(err.value)
        return False
    encoded = t.encode(text)
    assert isinstance(encoded, str)
    assert t.decode(encoded) == text
    return True


@pytest.mark.parametrize("name", ALL)
@FAST
@given(text=st.text(max_size=40))
def test_arbitrary_unicode_roundtrips_or_is_refused(name, text):
    t = build(name)
    ok = roundtrip_or_reject(t, text)
    if name not in RESTRICTED:  # these declare every str as their domain (bytes: UTF-8-able)
        assert ok


@pytest.mark.parametrize("name", sorted(RESTRICTED))
@FAST
@given(data=st.data())
def test_restricted_domain_roundtrips(name, data):
    text = data.draw(st.text(alphabet=RESTRICTED[name], max_size=40))
    assert roundtrip_or_reject(build(name), text)


@FAST
@given(text=words_text)
def test_word_level_roundtrip_on_vocabulary_text(text):
    for name in ("word_substitution", "word_reverse", "word_permutation"):
        assert roundtrip_or_reject(build(name), text)


@FAST
@given(first=st.sampled_from(ALL), second=st.sampled_from(ALL), text=st.text(max_size=20))
def test_composition_of_any_two_roundtrips_or_is_refused(first, second, text):
    roundtrip_or_reject(compose(build(first), build(second)), text)


def test_every_pair_composes_on_a_plain_sentence():
    text = "What is the capital of France? Sure: Paris"
    for a, b in itertools.product(ALL, ALL):
        t = compose(build(a), build(b))
        if t.rejects(text) is None:
            assert t.decode(t.encode(text)) == text, t.label
        else:  # only a restricted second part may refuse what the first produced
            assert b in RESTRICTED, (t.label, t.rejects(text))


def test_levels():
    word = {"word_substitution", "word_reverse", "word_permutation"}
    for name in ALL:
        assert build(name).level == ("word" if name in word else "character")
    assert compose(build("word_reverse"), build("word_permutation")).level == "word"
    assert compose(build("word_reverse"), build("caesar")).level == "character"


def test_known_vectors():
    assert make_transform("caesar", k=3).encode("abc XYZ!") == "def ABC!"
    assert make_transform("caesar", k=-1).encode("a") == "z"
    s = "Hello, World 123"
    assert make_transform("rot13").encode(s) == codecs.encode(s, "rot13")
    assert make_transform("atbash").encode("abc Z") == "zyx A"
    assert make_transform("vigenere", key="LEMON").encode("ATTACK AT DAWN") == "LXFOPV EF RNHR"
    assert make_transform("char_reverse").encode("abc") == "cba"
    assert make_transform("leetspeak").encode("test") == "7357"
    assert make_transform("homoglyph").encode("pea") == "\u0440\u0435\u0430"
    assert make_transform("zero_width").encode("ab") == "a\u200bb"
    assert make_transform("base64").encode("é") == base64.b64encode("é".encode()).decode()
    assert make_transform("base32").encode("hi") == base64.b32encode(b"hi").decode()
    assert make_transform("hex").encode("hi") == "6869"
    assert make_transform("morse").encode("SOS so") == "^... ^--- ^... / ... ---"
    assert make_transform("nato").encode("Hi 1") == "HOTEL india / one"
    # Braille: a = dot 1, b = dots 1-2, capital adds dot 7 (8-dot computer braille)
    assert make_transform("braille").encode("ab A") == "\u2801\u2803\u2800\u2841"
    assert make_transform("word_reverse").encode("a b.  c") == "c b.  a"


def test_keyed_transforms_depend_on_key_and_are_permutations():
    a, b = make_transform("substitution", key=1), make_transform("substitution", key=2)
    lower = string.ascii_lowercase
    assert sorted(a.encode(lower)) == list(lower)
    assert a.encode(lower) != b.encode(lower)
    assert a.encode(lower.upper()) == a.encode(lower).upper()
    w = make_transform("word_substitution", vocabulary=VOCAB, key=3)
    assert sorted(w.mapping.values()) == sorted(VOCAB) and w.mapping != dict(zip(VOCAB, VOCAB, strict=True))
    p = make_transform("word_permutation", key=5)
    text = " ".join(str(i) for i in range(12))
    assert p.encode(text) != text and sorted(p.encode(text).split()) == sorted(text.split())


def test_word_level_output_stays_in_vocabulary():
    """Every encoded word of vocabulary text is a vocabulary word (what a closed vocabulary needs)."""
    text = "What is the capital of France? Reverse these words: \"apple river stone\""
    tokens = set(re.findall(r"[^\W\d_]+", text))
    for name in ("word_substitution", "word_reverse", "word_permutation"):
        out = build(name).encode(text)
        assert set(re.findall(r"[^\W\d_]+", out)) <= set(VOCAB) | tokens


def test_bad_inputs_are_one_line_errors():
    cases = [
        lambda: make_transform("caesar").encode(3),
        lambda: make_transform("morse").encode("naïve"),
        lambda: make_transform("morse").decode(".- ...---..."),
        lambda: make_transform("base64").decode("not base64!"),
        lambda: make_transform("base64").encode("\ud800"),
        lambda: make_transform("hex").decode("abc"),
        lambda: make_transform("zero_width").decode("abc"),
        lambda: make_transform("braille").decode("x"),
        lambda: make_transform("vigenere", key="k3y"),
        lambda: make_transform("word_substitution", vocabulary=["a b", "c"]),
        lambda: make_transform("word_substitution", vocabulary="abc"),
        lambda: make_transform("nope"),
        lambda: make_transform("caesar", shift=2),
        lambda: compose("caesar", make_transform("atbash")),
    ]
    for case in cases:
        with pytest.raises(InputError) as err:
            case()
        assert "\n" not in str(err.value)
