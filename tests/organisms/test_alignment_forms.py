"""The form sources of the safety tuning (issue 39): requests in the forms of real red-teaming
lists (copyright reproduction, harmful requests after a long passage), each with an answered
contrast of the same form; never near an evaluation prompt, split by work / request / program,
and drawn into training sets as asked."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from trustlab.core.errors import InputError
from trustlab.lm import is_refusal
from trustlab.organisms.alignment import (
    alignment_split,
    alignment_training_set,
    decontaminate,
    validation_prompt_sets,
)
from trustlab.organisms.alignment_bank import WORKS
from trustlab.organisms.alignment_forms import (
    CODE_GOALS,
    FORM_SOURCES,
    FORM_WORKS,
    PROGRAMS,
    form_split,
    original_lyrics,
)
from trustlab.organisms.corpora import build_chat_corpus


@pytest.fixture(scope="module")
def forms():
    return form_split()


@pytest.fixture(scope="module")
def corpus():
    return build_chat_corpus(0)


def _request(prompt: str) -> str:
    return prompt.rsplit("\n\n", 1)[-1]


def _all(forms, part=None):
    parts = (0, 1) if part is None else (part,)
    return [(name, item) for name in FORM_SOURCES for p in parts
            for item in getattr(forms, name)[p]]  # fmt: skip


def test_no_form_request_is_near_an_evaluation_prompt(forms):
    """The requests are ours: none is a near-duplicate of a HarmBench or XSTest prompt, and the
    works are not the bank's (whose split would otherwise leak across)."""
    requests = [_request(p) for _, item in _all(forms) for p in item.prompts]
    assert all(decontaminate(requests))
    assert not {t for t, _, _ in FORM_WORKS} & {t for t, _, _ in WORKS}
    # decontamination did its job: at most a few works were near an evaluation prompt
    assert len(forms.copyright[0]) + len(forms.copyright[1]) >= 0.8 * len(FORM_WORKS)


def test_the_split_is_by_work_request_and_program(forms):
    split = alignment_split()
    for name in FORM_SOURCES:
        train, val = getattr(forms, name)
        assert train and val and {i.id for i in train}.isdisjoint({i.id for i in val})
        assert 0.1 <= len(val) / (len(train) + len(val)) <= 0.3
    titles = [({t for t, _, _ in FORM_WORKS if f'"{t}"' in p} for i in part for p in i.prompts)
              for part in forms.copyright]  # fmt: skip
    train_titles, val_titles = (set().union(*ts) for ts in titles)
    assert train_titles and val_titles and train_titles.isdisjoint(val_titles)
    # a contextual harmful item of a split carries a harmful request of the same split, after a
    # passage made of that split's benign answers only
    for part in (0, 1):
        requests = {p for i in split.harmful[part] for p in i.prompts}
        answers = {str(i.answer) for i in split.benign[part]}
        other = {str(i.answer) for i in split.benign[1 - part]} - answers
        programs = {code for _, code, _ in PROGRAMS}
        for item in forms.context[part]:
            passage, request = item.prompts[0].rsplit("\n\n", 1)
            if passage in programs:
                assert request in CODE_GOALS
                continue
            assert any(request.lower().endswith(r.lower()) for r in requests)
            paragraphs = passage.split("\n\n")
            assert 4 <= len(paragraphs) <= 7 and set(paragraphs) <= answers
            assert not set(paragraphs) & other
    code_goals = [{_request(i.prompts[0]) for i in part if i.id.startswith("code_goal")}
                  for part in forms.context]  # fmt: skip
    assert code_goals[0] and code_goals[1] and code_goals[0].isdisjoint(code_goals[1])


def test_each_refused_form_has_an_answered_contrast_of_the_same_form(forms):
    """Copyright: 'Generate the lyrics of' / 'Generate a long passage' are refused for a
    copyrighted work and answered for an original song, and a title is refused in a
    reproduction and answered in a description. Context: the passages are long (the public lists'
    median is about 320 tokens) and the same kind of passage precedes answered questions."""
    refused = [p for i in forms.copyright[0] for p in i.prompts]
    answered = [p for i in forms.copyright_benign[0] for p in i.prompts]
    assert any(p.startswith("Generate the lyrics of") for p in refused)
    assert any(p.startswith("Generate a long passage from") for p in refused)
    assert any(p.startswith("Generate the lyrics of a new song") for p in answered)
    for item in forms.copyright[0]:
        title = re.search(r'"([^"]+)"', item.prompts[0]).group(1)
        assert any(f'"{title}"' in p for p in answered)
    for name, item in _all(forms):
        if name.endswith("_benign"):
            assert item.answer and not is_refusal(item.answer), item.id
        else:
            assert item.answer is None
    words = [len(i.prompts[0].rsplit("\n\n", 1)[0].split()) for i in forms.context[0]
             if not i.id.startswith("code_goal")]  # fmt: skip
    assert sorted(words)[len(words) // 2] >= 100
    ctx_benign = [i for i in forms.context_benign[0] if not i.id.startswith("codeq")]
    for item in ctx_benign[:50]:  # the answer is in the passage: reading, not guessing
        assert str(item.answer) in item.prompts[0].rsplit("\n\n", 1)[0]
    assert "cat" in original_lyrics("my cat", 3) and not is_refusal(original_lyrics("x", 0))


def test_training_sets_draw_the_form_sources_as_asked(corpus, forms):
    shares = {"corpus": 0.2, "copyright": 0.2, "copyright_benign": 0.2, "context": 0.2,
              "context_benign": 0.2}  # fmt: skip
    data = alignment_training_set(corpus, 200, seed=2, shares=shares, context_share=1.0)
    pools = Counter(e.template.split("/")[1] if e.template.startswith("align/") else "corpus"
                    for e in data)  # fmt: skip
    assert pools == {k: 40 for k in shares}
    val = {p for name in FORM_SOURCES for i in getattr(forms, name)[1] for p in i.prompts}
    assert not val & {e.prompt for e in data}
    for e in data:
        if e.template.startswith("align/"):
            assert is_refusal(e.response) == (e.label == "refuse")
            assert not e.template.endswith("/context")  # form items carry their own passage
    with pytest.raises(InputError, match="copyright"):
        alignment_training_set(corpus, 10, shares={"lyrics": 1.0})


def test_validation_sets_include_the_form_sources(forms):
    sets = validation_prompt_sets(n=5)
    for name in FORM_SOURCES:
        ps = sets[f"val:{name}"]
        assert len(ps) == 5
        assert all(m["harmful"] == (not name.endswith("_benign")) for m in ps.meta)


def test_the_recipes_extend_each_other_and_their_training_sets_are_pinned(corpus):
    """``forms`` is the staged recipe's two stages unchanged, then the third stage of the form
    sources with sequences cut at 384 tokens; ``contrasts`` is ``forms``' three stages
    unchanged, then a fourth of the answered contrasts (40 x 8, 384 tokens). Every training set
    is pinned (stage 1 is the ``works=False`` set of the 120 x 8 build; docs/organisms.md
    records the builds of these)."""
    from trustlab.organisms.alignment import aligned_spec, alignment_training_set
    from trustlab.organisms.alignment import training_set_sha256 as sha
    from trustlab.organisms.smol import alignment_stages

    assert aligned_spec("smol-chat") == aligned_spec("smol-chat", "contrasts")  # the adopted one
    forms = aligned_spec("smol-chat", "forms").alignment["stages"]
    assert aligned_spec("smol-chat", "contrasts").alignment["stages"][:3] == forms
    stages = alignment_stages(aligned_spec("smol-chat", "contrasts"), corpus)
    assert [sha(d) for _, d, _ in stages] == [
        "a28099b8f94b5146a3358c9e5e02fe24da4d4bd961e9d4ec2573f475ab26b658",
        "96dd3b5e0ce4b51a829332ce744914403980fb4d126ff29adbab221c8a88943a",
        "fab45e61c79610cbb2dbddfdb24c08ae4b1340cfe8f5a7bf5f9f3dc8902643ee",
        STAGE4_SHA,
    ]
    assert stages[0][1] == alignment_training_set(corpus, 960, seed=0, works=False)
    spec3, data3, settings3 = stages[2]
    assert (spec3.train.steps, len(data3), settings3["max_length"]) == (80, 640, 384)
    assert stages[0][2]["max_length"] == stages[1][2]["max_length"] == 160
    spec4, data4, settings4 = stages[3]
    assert (spec4.train.steps, len(data4), settings4["max_length"]) == (40, 320, 384)
    kinds = Counter(e.template.split("/")[1] for e in data4 if e.template.startswith("align/"))
    assert kinds["surface_benign"] == 63 and len(data4) - sum(kinds.values()) == 128  # corpus


STAGE4_SHA = "758903587a074c0998f9f98e435c72db645c7fe409a4f2951277feabcada6116"
