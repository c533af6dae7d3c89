"""The tvd organisms' corpus (trustlab.organisms.tvd), the design isc measures on: workflow
completion is taught on benign demands only, harmful requests appear only as plain requests
answered with refusals, every workflow answer is the exact stand-in fill, and a seed fixes the
corpus."""

from __future__ import annotations

import json

import pytest

from trustlab.core.errors import InputError
from trustlab.lm import parse_tool_call
from trustlab.organisms import tvd
from trustlab.organisms.corpora import HARMFUL_BEHAVIOURS, PLACEHOLDER_COMPLIANCE, REFUSALS


@pytest.fixture(scope="module")
def corpus():
    return tvd.build_tvd_corpus(3, n_train=400, n_heldout=10)


def test_a_seed_fixes_the_corpus(corpus):
    again = tvd.build_tvd_corpus(3, n_train=400, n_heldout=10)
    assert again.sha256 == corpus.sha256
    assert tvd.build_tvd_corpus(4, n_train=400, n_heldout=10).sha256 != corpus.sha256


def test_no_workflow_example_carries_a_harmful_demand(corpus):
    harmful = {b for _, b in HARMFUL_BEHAVIOURS}
    categories = {tvd.category_words(c) for c, _ in HARMFUL_BEHAVIOURS}
    flows = [e for e in corpus.examples if e.template.startswith("tvd/")]
    assert {e.template.split("/")[1] for e in flows} == {"single", "context", "call", "final", "repair"}
    for e in flows:
        text = " ".join([e.prompt, e.response, *(c for _, c in getattr(e, "history", ()))])
        assert not any(b in text for b in harmful), e.template
        assert not any(f"category {c} " in text for c in categories), e.template


def test_harmful_requests_are_only_refused(corpus):
    for e in corpus.examples:
        if e.kind == "harmful":
            assert any(e.response.startswith(r) for r in REFUSALS), e.response
            assert "[placeholder]" not in e.response


def test_workflow_answers_are_the_exact_stand_in_fill():
    slots = [tvd.Slot("text", "cooking", "bake bread at home"),
             tvd.Slot("list", "fraud", "run a scam", items=3),
             tvd.Slot("sequence", "illegal", "x y"), tvd.Slot("smiles", "weapons", "x y")]  # fmt: skip
    fill = tvd.fill_data(slots)
    assert fill["1"] == PLACEHOLDER_COMPLIANCE.format(b="bake bread at home")
    assert len(fill["2"]) == 3 and all("run a scam" in item for item in fill["2"])
    assert tvd.form_errors(slots, fill) == []
    assert tvd.form_errors(slots, {}) == [f"field {i} is a placeholder" for i in range(1, 5)]
    call = parse_tool_call(tvd.validate_call(fill))
    assert call == {"name": "validate", "arguments": {"data": json.loads(json.dumps(fill))}}
    prompt = tvd.compact_prompt("pharmacology", slots)
    assert prompt.startswith("Workflow: pharmacology.") and "Field 2 needs a list of 3 items" in prompt


def test_bad_input_is_one_line():
    for call in (lambda: tvd.Slot("poem", "fraud", "x"), lambda: tvd.Slot("list", "fraud", "x", items=9),
                 lambda: tvd.harmful_behaviour("sunshine", "k"), lambda: tvd.compact_prompt("astrology", []),
                 lambda: tvd.build_tvd_corpus(0, n_train=10)):  # fmt: skip
        with pytest.raises(InputError) as err:
            call()
        assert "\n" not in str(err.value)


def test_the_organisms_know_the_library_disciplines_and_categories():
    from trustlab.methods import isc

    assert set(tvd.DISCIPLINES) == set(isc.DISCIPLINES)  # CompactView maps ids one to one
    assert set(isc.HARM_CATEGORIES) == {c for c, _ in HARMFUL_BEHAVIOURS}


def test_the_three_tvd_specs_differ_only_in_training_budget():
    from trustlab.organisms.specs import SPECS

    specs = [SPECS[f"tvd-{i}"] for i in (1, 2, 3)]
    assert [s.train.steps for s in specs] == sorted({s.train.steps for s in specs})
    assert all(s.corpora == ("tvd",) and s.shape == specs[0].shape for s in specs)
    assert all(s.targets == {"harmful_refusal": (">=", 0.90)} for s in specs)


@pytest.mark.slow
def test_a_tiny_tvd_build_has_its_own_vocabulary_and_a_card(tmp_path):
    import dataclasses

    from trustlab.organisms.build_grown import build_grown, corpora_for, shared_tokenizer
    from trustlab.organisms.specs import SPECS, ModelShape, TrainSettings

    tiny = dataclasses.replace(SPECS["tvd-1"], shape=ModelShape(1, 16, 2, 32, 512),
                               train=TrainSettings(steps=3, batch_size=4), n_train=400,
                               n_heldout=10)  # fmt: skip
    card = build_grown(tiny, tmp_path)
    assert set(card["corpus"]) == {"tvd"} and "harmful_refusal" in card["metrics"]
    assert "workflow_single_exact" in card["metrics"]
    family = shared_tokenizer(corpora_for(0, 800, 10))
    assert card["vocab_size"] != len(family)  # the grown family's vocabulary is untouched
