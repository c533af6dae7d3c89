"""Shared pieces of the lm property modules (tests/lm/test_lm_*_properties.py, issue 38): few
hypothesis examples, prompts from the test kit's words, one torch thread, one-line errors."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from lm_testkit import WORDS

from trustlab.core.errors import InputError
from trustlab.core.runtime import torch_runtime

#: Few examples each: every draw runs the tiny model (the whole addition stays near 5 CPU-s).
FEW = settings(
    max_examples=5,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
words = st.lists(st.sampled_from(WORDS[:40]), min_size=1, max_size=5).map(" ".join)
prompt_lists = st.lists(words, min_size=1, max_size=3)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """The tiny model runs fastest on one torch thread; two spin-wait on a loaded machine."""
    with torch_runtime(threads=1):
        yield


def one_line(call, *names: str) -> None:
    """``call()`` raises a one-line InputError whose message names one of ``names``."""
    with pytest.raises(InputError) as caught:
        call()
    msg = str(caught.value)
    assert msg and "\n" not in msg, msg
    assert any(n in msg for n in names), f"{msg!r} names none of {names}"
