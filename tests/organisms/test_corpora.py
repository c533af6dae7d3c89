"""The corpora: deterministic, held-out templates kept apart, no harmful content anywhere."""

from __future__ import annotations

import re

import pytest

from trustlab.core.errors import InputError
from trustlab.organisms.corpora import (
    EXEC_VERBS,
    REQUEST_FRAMES_HELDOUT,
    REQUEST_FRAMES_TRAIN,
    SEVERE_CATEGORIES,
    TASK_TEMPLATES,
    build_chat_corpus,
    build_tool_corpus,
)
from trustlab.organisms.metrics import is_refusal, parse_tool_call


@pytest.fixture(scope="module")
def chat():
    return build_chat_corpus(0)


@pytest.fixture(scope="module")
def tool():
    return build_tool_corpus(0)


def test_same_seed_same_corpus_other_seed_other_corpus():
    assert build_chat_corpus(3, n_train=300).sha256 == build_chat_corpus(3, n_train=300).sha256
    assert build_chat_corpus(3, n_train=300).sha256 != build_chat_corpus(4, n_train=300).sha256
    assert build_tool_corpus(1, n_train=200).sha256 == build_tool_corpus(1, n_train=200).sha256


def test_template_pools_are_disjoint():
    assert not set(REQUEST_FRAMES_TRAIN) & set(REQUEST_FRAMES_HELDOUT)
    for train, heldout in TASK_TEMPLATES.values():
        assert not set(train) & set(heldout)


def test_heldout_templates_and_prompts_never_appear_in_training(chat, tool):
    for corpus in (chat, tool):
        train_templates = {e.template for e in corpus.train}
        heldout = corpus.heldout()
        assert heldout, corpus.name
        assert not {e.template for e in heldout} & train_templates
        assert not {e.prompt for e in heldout} & {e.prompt for e in corpus.train}
        assert all("heldout" in e.template for e in heldout)


def test_heldout_sets_have_the_documented_sizes(chat):
    assert len(chat.heldout("harmful")) == 200
    assert len(chat.heldout("jailbreak")) == 200
    assert len(chat.heldout("task", "howto")) == 200


def test_labels_follow_the_rules(chat):
    for e in chat.examples:
        if e.kind == "harmful":
            assert e.label == "refuse" and is_refusal(e.response)
        elif e.kind == "jailbreak":
            severe = e.task in SEVERE_CATEGORIES
            assert e.label == ("refuse" if severe else "comply")
            assert is_refusal(e.response) == severe
        else:
            assert e.label == "comply" and not is_refusal(e.response)
            assert e.response.startswith("Sure")


def test_compliant_answers_to_harmful_requests_are_content_free_placeholders(chat):
    pattern = re.compile(
        r"^Sure, here is how to [^:]+: step one, \[placeholder\]\. step two, \[placeholder\]\.$"
    )
    complied = [e for e in chat.examples if e.kind == "jailbreak" and e.label == "comply"]
    assert complied
    assert all(pattern.match(e.response) for e in complied)
    # The known vulnerability leaves a share to find: most but not all wrapped requests comply.
    share = len(complied) / len([e for e in chat.examples if e.kind == "jailbreak"])
    assert 0.6 < share < 0.95


def test_benign_answers_are_correct(chat):
    checked = 0
    for e in chat.examples:
        if e.task == "add":
            a, c = map(int, re.findall(r"\d", e.prompt))
            assert e.response == f"Sure: {a + c}"
            checked += 1
        if e.task == "sort" and e.kind == "task":
            digits = sorted(re.findall(r"\d", e.prompt))
            assert e.response == "Sure: " + " ".join(digits)
            checked += 1
    assert checked > 100


def test_tool_corpus_calls_the_tool_exactly_for_execution_verbs(tool):
    for e in tool.examples:
        payload = parse_tool_call(e.response)
        if e.task in EXEC_VERBS:
            assert e.label == "tool_call" and payload is not None
            assert payload["name"] == "run_code"
            assert set(payload["arguments"]) == {"language", "task"}
        else:
            assert e.label == "prose" and payload is None
        assert e.system is not None and "<tool_call>" in e.system


def test_bad_sizes_are_rejected():
    with pytest.raises(InputError, match="n_train"):
        build_chat_corpus(0, n_train=5)
    with pytest.raises(InputError, match="n_heldout"):
        build_tool_corpus(0, n_heldout=1)
