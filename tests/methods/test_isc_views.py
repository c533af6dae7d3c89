"""isc's compact view (the tvd organisms' workflow-shaped prompts) against the library: every
workflow renders, the organisms' stand-in fill decodes into data that passes its validator and
the rule judge calls unsafe, echoed slot markers stay placeholders, and the three settings run
end to end under the compact view on a scripted backend that answers as a tvd organism would."""

from __future__ import annotations

import json

import pytest

from trustlab.lm import ScriptedChatModel
from trustlab.methods import isc
from trustlab.organisms import tvd


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return isc.write_library(tmp_path_factory.mktemp("isc-views"))


def _organism_fill(view, w):
    return tvd.fill_data(view._slots(w))


def test_every_workflow_renders_and_the_organisms_fill_completes_it_unsafely(library):
    view = isc.CompactView()
    shipped = isc.run_validators([(w, w.data) for w in library])
    jobs = []
    for w, v in zip(library, shipped, strict=True):
        prompt = view.prompt(w, v)
        assert prompt.startswith("Workflow: ") and "is a placeholder" in prompt
        assert all(f"category {tvd.category_words(f.category)}" in prompt for f in w.fields)
        values = view.decode(w, json.loads(json.dumps(_organism_fill(view, w))))
        assert set(values) == {f.name for f in w.fields}
        jobs.append((w, w.with_data(values)))
        assert all(f.unsafe for f in isc.judge_fields(w, w.with_data(values)))
        judged = isc.judge_fields(w, w.with_data(values), isc.OrganismFieldJudge())
        assert all(f.unsafe for f in judged), w.id
    results = isc.run_validators(jobs)
    assert all(r.passed for r in results), [(w.id, r.errors) for (w, _), r in zip(jobs, results, strict=True) if not r.passed]


def test_echoed_slot_markers_decode_to_placeholders(library):
    view = isc.CompactView()
    w = library[1]  # two list fields
    echo = {str(i + 1): ([tvd.SLOT_MARKER] * f.items if f.form == "list" else tvd.SLOT_MARKER)
            for i, f in enumerate(w.fields)}  # fmt: skip
    data = w.with_data(view.decode(w, echo))
    assert not any(f.filled for f in isc.judge_fields(w, data))


def _organism(view, flows):
    """Answers every compact prompt with the organisms' fill (a perfectly trained tvd organism)."""
    shipped = isc.run_validators([(w, w.data) for w in flows])
    answers = {view.prompt(w, v): json.dumps(_organism_fill(view, w)) for w, v in zip(flows, shipped, strict=True)}
    agentic = {view.agent_prompt(w): tvd.validate_call(_organism_fill(view, w)) for w in flows}

    plain = {view.plain(w) for w in flows}

    def reply(conv):
        if conv[-1]["content"] in plain:
            return "I'm sorry, but I can't help with that."
        if conv[0]["role"] == "system":
            return agentic[conv[1]["content"]] if len(conv) == 2 else "The data is complete."
        return answers[conv[-1]["content"]]

    return ScriptedChatModel(reply, name="tvd-ideal")


def test_three_settings_under_the_compact_view(library):
    view = isc.CompactView()
    flows = library[::26]  # 3 workflows over 3 disciplines
    model = _organism(view, flows)
    for setting in isc.SETTINGS:
        out = isc.run_setting(model, flows, setting, view=view, n_context=1)
        assert all(o.completed and o.unsafe for o in out), (setting, [o.validator_errors for o in out])
    agent_conv = model.calls[-1]["conversations"][0]
    assert agent_conv[0]["content"] == tvd.TVD_SYSTEM_PROMPT


def test_collapse_pairs_plain_refusals_with_workflow_fills(library):
    view = isc.CompactView()
    flows = library[1::26]
    ideal = _organism(view, flows)
    plain = isc.run_plain(ideal, flows, view=view)
    assert all(p.refused for p in plain) and len({view.plain(w) for w in flows}) == len(flows)
    filled = isc.run_setting(ideal, flows, "single", view=view)
    result = isc.collapse(plain, filled)
    assert result.n == len(flows) and result.collapse.rate == 1.0 == result.given_refusal.rate
    safe = ScriptedChatModel(lambda conv: "I'm sorry, but I can't help with that.")
    refusing = isc.run_setting(safe, flows, "single", view=view)
    assert isc.collapse(plain, refusing).collapse.rate == 0.0
    complies = [isc.PlainOutcome("m", p.workflow, p.discipline, False, "") for p in plain]
    nothing = isc.collapse(complies, filled)
    assert nothing.collapse.rate == 0.0 and nothing.given_refusal is None


def test_the_organism_judge_counts_only_the_organisms_stand_ins(library):
    w = next(w for w in library if len(w.fields) == 2 and {f.form for f in w.fields} == {"smiles", "list"})
    garbage = {f.name: ("words of some other answer " * 3 if f.form != "list" else ["words of another answer here now ok"] * f.items)
               for f in w.fields}  # fmt: skip
    rule = isc.judge_fields(w, w.with_data(garbage))
    organism = isc.judge_fields(w, w.with_data(garbage), isc.OrganismFieldJudge())
    assert all(f.unsafe for f in rule) and not any(f.unsafe for f in organism)
