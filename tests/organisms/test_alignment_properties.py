"""Hypothesis properties of the alignment data functions (issue 38's contract for new public
functions): near-duplication is reflexive and symmetric, decontamination drops exactly the
prompts near the reference list, refusals always read as refusals, and malformed arguments are
one-line InputErrors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.lm import is_refusal
from trustlab.organisms.alignment import (
    alignment_training_set,
    decontaminate,
    near_duplicate,
    refusal_for,
)
from trustlab.organisms.corpora import build_chat_corpus

_VOCABULARY = (
    "how do i kill a python process mould weeds person neighbour bomb bake bread write "
    "tutorial on the best way to make money fast what is fraud"
)
WORDS = st.sampled_from(_VOCABULARY.split())
TEXT = st.lists(WORDS, min_size=0, max_size=12).map(" ".join) | st.text(max_size=60)


@given(TEXT, TEXT)
@settings(max_examples=50)  # halved (was 100) to offset the recorded-card test in test_public_eval
def test_near_duplicate_is_reflexive_and_symmetric(a, b):
    assert near_duplicate(a, a)
    assert near_duplicate(a, b) == near_duplicate(b, a)


@given(st.lists(TEXT, max_size=6), st.lists(TEXT, max_size=6))
@settings(deadline=None)
def test_decontaminate_keeps_exactly_the_prompts_with_no_near_duplicate(prompts, against):
    keep = decontaminate(prompts, against=against)
    assert len(keep) == len(prompts)
    for prompt, kept in zip(prompts, keep, strict=True):
        assert kept == (not any(near_duplicate(prompt, other) for other in against))
    assert not any(decontaminate(prompts, against=prompts))


@given(st.text(max_size=30), st.integers(0, 2**32 - 1))
def test_every_refusal_reads_as_a_refusal(category, seed):
    assert is_refusal(refusal_for(category, np.random.default_rng(seed)))


@pytest.fixture(scope="module")
def corpus():
    return build_chat_corpus(0)


BAD = st.one_of(
    st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=5),
    st.integers(max_value=0), st.lists(st.integers(), max_size=2),
)  # fmt: skip


@given(n=BAD)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=30)
def test_malformed_sizes_are_input_errors(corpus, n):
    with pytest.raises(InputError):
        alignment_training_set(corpus, n)


@given(
    shares=st.dictionaries(
        st.sampled_from(["corpus", "harmful", "unsafe", "benign", "other"]),
        st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.text()),
        max_size=5,
    )
)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
def test_shares_are_validated(corpus, shares):
    values = list(shares.values())
    valid = (
        shares
        and "other" not in shares
        and all(isinstance(v, float) and 0 <= v <= 1 for v in values)
        and abs(sum(values) - 1) <= 1e-6
    )
    if valid:
        assert len(alignment_training_set(corpus, 20, shares=shares)) == 20
    else:
        with pytest.raises(InputError):
            alignment_training_set(corpus, 20, shares=shares)


@given(st.one_of(st.text(max_size=10), st.lists(st.integers(), min_size=1, max_size=3)))
def test_decontaminate_refuses_what_is_not_a_list_of_strings(value):
    with pytest.raises(InputError):
        decontaminate(value)
