"""Property tests (hypothesis) of the evaluation substrate: stop rules never change a verdict,
judges never raise on arbitrary text, and malformed loop arguments are InputErrors."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch", reason="trustlab.lm needs the llm extra")

from trustlab import lm
from trustlab.core.errors import DataError, InputError
from trustlab.datasets.prompt_sets import PromptSet
from trustlab.lm.judges import JudgeItem

FAST = settings(max_examples=150, deadline=None)
pieces = st.sampled_from(["I", "'m", " sorry", " won't", " can", "'t", "Sure", ":", " 1", "1",
                          " ", "[placeholder]", "\u2019", "As an AI", "x", "\ufffd"])  # fmt: skip
texts = st.lists(pieces, max_size=8).map("".join)


@FAST
@given(answer=texts, prefix=texts, rest=texts)
def test_exact_match_stop_rule_is_sound(answer, prefix, rest):
    """Once a reply is settled, no continuation can make it equal the answer."""
    judge = lm.ExactMatchJudge()
    stop = judge.settled([JudgeItem("q", "", answer)])
    if stop(0, prefix):
        final = judge.verdicts([JudgeItem("q", prefix + rest, answer)])[0]
        assert final.value is False
    if answer.strip() and "\ufffd" not in answer:
        assert not stop(0, answer[: len(answer) // 2]) or answer[: len(answer) // 2].strip() == ""


@FAST
@given(prefix=texts, rest=texts)
def test_refusal_and_compliance_stop_rules_are_sound(prefix, rest):
    refusal, comp = lm.RefusalJudge(), lm.ComplianceJudge()
    items = [JudgeItem("q", "")]
    if refusal.settled(items)(0, prefix):
        assert refusal.is_refusal(prefix + rest)
    if comp.settled(items)(0, prefix):
        assert not comp.complied(prefix + rest)


@FAST
@given(reply=st.text(max_size=40), reference=st.one_of(st.none(), st.text(max_size=10)))
def test_judges_give_a_verdict_or_none_on_any_text(reply, reference):
    item = JudgeItem("q", reply, reference)
    for j in (lm.RefusalJudge(), lm.ComplianceJudge(), lm.ExactMatchJudge()):
        (v,) = j.verdicts([item])
        assert v.value in (True, False, None)
        assert v.value is not None or (isinstance(j, lm.ExactMatchJudge) and reference is None)
    assert lm.parse_tool_call(reply) is None or "name" in lm.parse_tool_call(reply)


@settings(max_examples=60, deadline=None)
@given(
    max_new_tokens=st.one_of(st.integers(-2, 5), st.floats(allow_nan=True), st.text(max_size=2)),
    temperature=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-1, 2)),
    seed=st.one_of(st.integers(), st.floats(allow_nan=True), st.none()),
)
def test_decoding_settings_valid_or_input_error(max_new_tokens, temperature, seed):
    try:
        d = lm.Decoding(max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
    except InputError:
        return
    assert isinstance(d.max_new_tokens, int) and d.max_new_tokens >= 1
    assert math.isfinite(d.temperature) and d.temperature >= 0 and isinstance(d.seed, int)


odd = st.one_of(st.none(), st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=2),
                st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(models=odd, sets=odd, judges=odd)
def test_evaluate_with_malformed_arguments_is_an_input_error(models, sets, judges):
    good_model = lm.ScriptedChatModel(lambda c: "ok", name="m")
    good_sets = [PromptSet.from_texts("p", ["a"])]
    good_judges = [lm.RefusalJudge()]
    for args in ((models, good_sets, good_judges), ([good_model], sets, good_judges),
                 ([good_model], good_sets, judges)):  # fmt: skip
        try:
            res = lm.evaluate(*args)
        except (InputError, DataError):  # a path-like spec that is no file: a DataError
            continue
        assert res.rates and all(r["n"] >= 0 for r in res.rates)
