"""isc's TVD workflows: the 53-workflow library loads, its placeholders fail exactly the demanded
fields, neutral stand-ins pass, validators check forms, malformed folders get one-line errors,
and a hostile validator is contained by the sandbox."""

from __future__ import annotations

import collections
import json
import shutil
import textwrap

import pytest

from trustlab.core.errors import DataError
from trustlab.methods import isc
from trustlab.sandbox import Limits, Sandbox


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return isc.write_library(tmp_path_factory.mktemp("isc-library"))


def test_library_has_53_workflows_over_the_8_disciplines(library):
    assert len(library) == 53 == len({w.id for w in library})
    counts = collections.Counter(w.discipline for w in library)
    assert set(counts) == set(isc.DISCIPLINES) and min(counts.values()) >= 6
    assert sum(len(w.fields) for w in library) > 53  # some workflows demand several fields


def test_shipped_data_holds_only_placeholders_in_the_demanded_fields(library):
    for w in library:
        for f in w.fields:
            assert isc.is_placeholder(w.data[f.name]), (w.id, f.name)
            assert f.category in isc.HARM_CATEGORIES
        # the neutral stand-ins are not placeholders, and hold none of the category words
        for value in isc.standin_values(w).values():
            assert not isc.is_placeholder(value)
            assert not any(c in json.dumps(value) for c in isc.HARM_CATEGORIES)


@pytest.mark.parametrize(
    ("value", "placeholder"),
    [("", True), ("  ", True), ("TODO", True), ("[placeholder]", True), ("<fill>", True),
     ("[[FILL: a text]]", True), ("x ??? y", True), ([], True), (["ok text", "TBD"], True),
     (None, True), ("a real sentence", False), (["one", "two"], False), (3, False),
     ("Sure, here is how to do it: step one, [placeholder]. step two, [placeholder].", False)],
)  # fmt: skip
def test_placeholder_rule(value, placeholder):
    # a text that mentions [placeholder] is filled: the organisms' stand-in for harmful content
    assert isc.is_placeholder(value) is placeholder


def test_every_validator_fails_its_placeholders_and_passes_neutral_standins(library):
    jobs = [(w, w.data) for w in library] + [
        (w, w.with_data(isc.standin_values(w))) for w in library
    ]
    results = isc.run_validators(jobs)
    for w, v in zip(library, results[:53], strict=True):
        assert not v.passed and set(v.failed_fields()) == {f.name for f in w.fields}, w.id
        assert "ValidationError" in v.traceback and "is a placeholder" in v.traceback
    for w, v in zip(library, results[53:], strict=True):
        assert v.passed and not v.errors, (w.id, v.errors)


def test_validators_check_the_form_not_just_the_presence(library):
    by_form = {}
    for w in library:
        for f in w.fields:
            by_form.setdefault(f.form, (w, f))
    assert set(by_form) == set(isc.FORMS)
    wrong = {
        "text": ["too short", 42, ["a", "list"]],
        "list": ["a string", ["one item only with enough words to pass the rule"]],
        "sequence": ["ACGU" * 10, "ACGT", 7],
        "smiles": ["C C O " * 10, "CCO", "1234567890" * 3],
    }
    jobs, expect = [], []
    for form, values in wrong.items():
        w, f = by_form[form]
        ok = isc.standin_values(w)
        for value in values:
            jobs.append((w, w.with_data({**ok, f.name: value})))
            expect.append(f.name)
        jobs.append((w, w.with_data(ok)))
        expect.append(None)
    jobs.append((library[0], [1, 2, 3]))  # not an object at all
    expect.append("")
    for (w, _), v, name in zip(jobs, isc.run_validators(jobs), expect, strict=True):
        if name is None:
            assert v.passed, w.id
        else:
            assert not v.passed and name in v.failed_fields(), (w.id, name, v.errors)


def test_one_run_per_call_agrees_with_the_batch(library):
    w = library[20]
    jobs = [(w, w.data), (w, w.with_data(isc.standin_values(w)))]
    batch = isc.run_validators(jobs)
    single = [isc.run_validator(w, d) for w, d in jobs]
    assert [v.passed for v in batch] == [v.passed for v in single] == [False, True]
    assert [v.errors for v in batch] == [v.errors for v in single]
    assert all(v.sandbox.status in ("ok", "failed") for v in single)


def _break(tmp_path, library, edit):
    folder = tmp_path / "wf"
    shutil.copytree(library[1].folder, folder)
    edit(folder)
    with pytest.raises(DataError) as err:
        isc.load_workflow(folder)
    message = str(err.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def _manifest(folder, **changes):
    path = folder / "workflow.json"
    raw = json.loads(path.read_text())
    raw.update(changes)
    path.write_text(json.dumps(raw))


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda f: (f / "workflow.json").unlink(), "no workflow.json"),
        (lambda f: (f / "workflow.json").write_text("{not json"), "not valid JSON"),
        (lambda f: _manifest(f, discipline="astrology"), "unknown discipline"),
        (lambda f: _manifest(f, fields=[]), "fields"),
        (lambda f: _manifest(f, extra_key=1), "extra_key"),
        (lambda f: _manifest(f, validator="../v.py"), "plain names"),
        (lambda f: (f / "task.py").unlink(), "task file task.py is missing"),
        (lambda f: (f / "data.json").write_text("[1, 2]"), "JSON object"),
        (lambda f: (f / "data.json").write_text('{"workflow": 1}'), "are not in data.json"),
    ],
)
def test_malformed_workflows_get_one_line_errors(tmp_path, library, edit, needle):
    assert needle in _break(tmp_path, library, edit)


def test_unknown_category_and_duplicate_fields_are_named(tmp_path, library):
    def category(folder):
        raw = json.loads((folder / "workflow.json").read_text())
        raw["fields"][0]["category"] = "sunshine"
        (folder / "workflow.json").write_text(json.dumps(raw))

    def duplicate(folder):
        raw = json.loads((folder / "workflow.json").read_text())
        raw["fields"] = raw["fields"] * 2
        (folder / "workflow.json").write_text(json.dumps(raw))

    assert "unknown category 'sunshine'" in _break(tmp_path / "a", library, category)
    assert "duplicate" in _break(tmp_path / "b", library, duplicate)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="No workflow folders"):
        isc.load_workflows(tmp_path / "empty")


def test_a_hostile_validator_is_contained_and_fails(tmp_path, library):
    folder = tmp_path / "hostile"
    shutil.copytree(library[0].folder, folder)
    (folder / "validator.py").write_text(
        textwrap.dedent("""
        import json, sys
        print(json.dumps({"passed": True, "errors": []}))
        while True:
            pass
    """)
    )
    w = isc.load_workflow(folder)
    box = Sandbox(limits=Limits(timeout_s=1.5, cpu_s=1))
    v = isc.run_validator(w, w.data, box)
    assert not v.passed and v.sandbox.status in ("timeout", "cpu_limit")
    assert v.errors and "validator" in v.errors[0][1]
