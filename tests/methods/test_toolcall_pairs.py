"""toolcall's minimal pairs: candidates, held-out frames, one verb apart, the converter."""

from __future__ import annotations

import json
import re

import pytest

from trustlab.core.errors import DataError, InputError
from trustlab.methods.toolcall import (
    ANALYSIS_VERBS,
    EXECUTION_VERBS,
    NATURAL_SCAFFOLD,
    natural_pairs,
    organism_pairs,
    pairs_from_prompt,
    read_pairs,
)
from trustlab.organisms import corpora


def _words(pair, variant):
    return getattr(pair, variant)[-1]["content"].split()


def _one_word_apart(pair):
    e, a = _words(pair, "execution"), _words(pair, "analysis")
    assert len(e) == len(a)
    diff = [(x, y) for x, y in zip(e, a, strict=True) if x != y]
    assert len(diff) == 1, diff
    (x, y) = diff[0]
    assert x.lower().strip(".,?") == pair.execution_verb
    assert y.lower().strip(".,?") == pair.analysis_verb
    # everything else of the conversation (the scaffold) is the same
    assert pair.execution[:-1] == pair.analysis[:-1]


def test_organism_pairs_draw_from_the_corpus_candidates():
    ps = organism_pairs(1200, 300, seed=0)
    # templates x languages x tasks x verb pairs: the issue's ~18k candidates
    n_verbs = len(corpora.EXEC_VERBS) * len(corpora.ANALYSIS_VERBS)
    per_frame = len(corpora.LANGUAGES) * len(corpora.CODE_TASKS) * n_verbs
    assert ps.n_candidates == {
        "analysis": len(corpora.TOOL_TEMPLATES_TRAIN) * per_frame,
        "heldout": len(corpora.TOOL_TEMPLATES_HELDOUT) * per_frame,
    }
    assert sum(ps.n_candidates.values()) == 18144
    assert len(ps.analysis) == 1200 and len(ps.heldout) == 300
    # held-out pairs come only from the frames the organisms never saw in training
    assert {p.template.split("/")[1] for p in ps.heldout} == {"heldout"}
    assert {p.template.split("/")[1] for p in ps.analysis} == {"train"}
    keys = {(p.template, p.language, p.task, p.execution_verb, p.analysis_verb)
            for p in ps.analysis}  # fmt: skip
    assert len(keys) == 1200, "drawn without replacement"
    for p in ps.analysis[:50] + ps.heldout[:50]:
        _one_word_apart(p)
        assert p.execution[0] == {"role": "system", "content": corpora.TOOL_SYSTEM_PROMPT}
        assert p.execution_verb in EXECUTION_VERBS and p.analysis_verb in ANALYSIS_VERBS


def test_organism_pairs_reproduce_the_corpus_requests():
    """A pair's variants are requests the tool corpus itself could contain (same frames)."""
    frames = [t.format(v="(?P<v>\\w+)", V="(?P<V>\\w+)", L=".+", t=".+") for t in
              (*corpora.TOOL_TEMPLATES_TRAIN, *corpora.TOOL_TEMPLATES_HELDOUT)]  # fmt: skip
    ps = organism_pairs(40, 40, seed=3)
    for p in ps.analysis + ps.heldout:
        text = p.execution[-1]["content"]
        assert any(re.fullmatch(f.replace("?", "\\?").replace("(\\?P", "(?P"), text)
                   for f in frames), text  # fmt: skip


def test_pairs_are_deterministic_in_the_seed():
    a, b, c = (
        organism_pairs(50, 20, seed=1),
        organism_pairs(50, 20, seed=1),
        organism_pairs(50, 20, seed=2),
    )
    assert a == b
    assert a.analysis != c.analysis


def test_variant_keeps_capitalisation_and_scaffold_can_be_removed():
    ps = organism_pairs(400, 10, seed=0)
    capital = next(p for p in ps.analysis if p.execution[-1]["content"][0].isupper()
                   and p.execution[-1]["content"].split()[0].lower() == p.execution_verb)  # fmt: skip
    assert capital.analysis[-1]["content"].startswith(capital.analysis_verb.capitalize())
    assert capital.variant("[UNK]")[-1]["content"].startswith("[UNK]")
    bare = capital.without_scaffold()
    assert not bare.has_scaffold and capital.has_scaffold
    assert bare.execution == capital.execution[1:]


def test_natural_pairs_use_a_tool_scaffold_and_disjoint_frames():
    ps = natural_pairs(60, 30, seed=0)
    assert ps.analysis[0].execution[0]["content"] == NATURAL_SCAFFOLD
    assert "<tools>" in NATURAL_SCAFFOLD and "<tool_call>" in NATURAL_SCAFFOLD
    assert json.loads(NATURAL_SCAFFOLD.split("<tools>\n")[1].split("\n</tools>")[0])["name"]
    assert not {p.template for p in ps.analysis} & {p.template for p in ps.heldout}
    for p in ps.analysis[:20] + ps.heldout[:20]:
        _one_word_apart(p)


def test_converter_swaps_only_the_request_verb():
    prompt = [
        {"role": "system", "content": "You are an agent. Tools: run_code. Never explain."},
        {"role": "user", "content": "Earlier turn, please explain nothing."},
        {"role": "assistant", "content": "Ok."},
        {"role": "user", "content": "Could you Debug this Python script that parses a date?"},
    ]
    pairs = pairs_from_prompt(prompt)
    assert len(pairs) == len(ANALYSIS_VERBS)
    for p in pairs:
        assert p.execution_verb == "debug"
        assert p.execution == prompt  # the user's own prompt is the execution variant
        _one_word_apart(p)
        assert p.analysis[-1]["content"].startswith(f"Could you {p.analysis_verb.capitalize()} ")
    # an analysis request gives one pair per execution verb, the execution variant rebuilt
    pairs = pairs_from_prompt("Please compare the Java code that sorts a list.")
    assert len(pairs) == len(EXECUTION_VERBS)
    assert {p.analysis_verb for p in pairs} == {"compare"}
    assert pairs[0].analysis == [{"role": "user",
                                  "content": "Please compare the Java code that sorts a list."}]  # fmt: skip
    for p in pairs:
        _one_word_apart(p)
    # the verb named explicitly wins over the first one found
    pairs = pairs_from_prompt("Write down why you would run it.", verb="run")
    assert pairs[0].analysis[-1]["content"] == f"Write down why you would {ANALYSIS_VERBS[0]} it."


def test_converter_rejects_prompts_without_a_verb():
    with pytest.raises(InputError, match="none of the execution or analysis verbs"):
        pairs_from_prompt("Hello there.")
    with pytest.raises(InputError, match="verb"):
        pairs_from_prompt("Please run it.", verb="explain")
    with pytest.raises(InputError, match="both kinds"):
        pairs_from_prompt("Please run it.", analysis_verbs=["run"])
    with pytest.raises(InputError, match="user message"):
        pairs_from_prompt([{"role": "system", "content": "x"}])


def test_read_pairs_keeps_converted_groups_together(tmp_path):
    lines = [
        {"execution": "Please write the code.", "analysis": "Please explain the code."},
        {"prompt": [{"role": "system", "content": "scaffold"},
                    {"role": "user", "content": "Run the C++ program that reads a file."}]},
        {"prompt": "Could you review this Python function?", "verb": "review"},
        {"execution": "Fix it now.", "analysis": "Describe it now."},
    ]  # fmt: skip
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    ps = read_pairs(path, heldout_fraction=0.5, seed=0)
    groups_a = {p.group for p in ps.analysis}
    groups_h = {p.group for p in ps.heldout}
    assert groups_a and groups_h and not groups_a & groups_h
    assert len(ps.analysis) + len(ps.heldout) == 1 + len(ANALYSIS_VERBS) + len(EXECUTION_VERBS) + 1
    ready = next(p for p in ps.analysis + ps.heldout if p.group == "1")
    assert ready.execution_verb == "write" and ready.analysis_verb == "explain"
    _one_word_apart(ready)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"execution": "Write the code.", "analysis": "Explain this code."}, "exactly one word"),
        ({"execution": "Write the code.", "analysis": "Explain the code now."}, "exactly one"),
        ({"foo": 1}, "needs 'execution'"),
        ({"prompt": "nothing to swap"}, "none of the execution"),
    ],
)
def test_read_pairs_names_bad_lines(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    good = {"execution": "Please write it.", "analysis": "Please explain it."}
    path.write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(DataError, match=message):
        read_pairs(path)


def test_read_pairs_needs_two_lines_and_json(tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"execution": "Run it.", "analysis": "Review it."}) + "\n")
    with pytest.raises(DataError, match="at least 2"):
        read_pairs(path)
    path.write_text("{not json\n")
    with pytest.raises(DataError, match="not JSON"):
        read_pairs(path)
