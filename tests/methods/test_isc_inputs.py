"""isc's public API on malformed input: InputError with one line, or the canonical result.

Every name in ``trustlab.methods.isc.__all__`` that takes arguments is a case below (issue 38's
contract); the corruptions per argument kind are in tests/malformed.py. Cases that would run a
validator in the sandbox corrupt only into errors (which are refused before any process
starts), so the module stays cheap: the sandbox runs once per such case, for its reference.
"""

from __future__ import annotations

import atexit
import math
import shutil
import tempfile
from pathlib import Path

import hypothesis  # noqa: F401 - the property tests are built by malformed_input_tests
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.methods import isc as api
from trustlab.methods.isc import (
    FULL,
    CapabilityStep,
    CapabilityUnsafety,
    Collapse,
    CompactView,
    DemandedField,
    FieldVerdict,
    OrganismFieldJudge,
    Outcome,
    PlainOutcome,
    Validation,
    View,
    Workflow,
    WorkflowSpec,
)

from ..malformed import (
    BOOL,
    CHOICE,
    INT,
    OBJECT,
    SETTINGS,
    UNIT,
    Case,
    Kind,
    Mutation,
    malformed_input_tests,
    scalar,
)

_ROOT = Path(tempfile.mkdtemp(prefix="isc-inputs-"))
atexit.register(shutil.rmtree, _ROOT, True)
FLOWS = api.write_library(_ROOT / "lib", ["tox-recall", "dock-ligand-library", "gen-primers"])
W = FLOWS[0]
A_FILE = _ROOT / "a_file.txt"
A_FILE.write_text("x")
SPEC = next(s for s in api.LIBRARY if s.id == "fact-false-claims")


def _out(model, workflow, setting, completed, unsafe, attempt=0):
    return Outcome(model, workflow, "toxicity_evaluation", setting, attempt, completed, unsafe,
                   (), 1, ("0" * 64,))  # fmt: skip


OUTS = [_out("m", f"w{i}", "single", i % 2 == 0, i % 3 == 0) for i in range(6)]
BY_MODEL = {
    "a": [_out("a", f"w{i}", "single", i < 2, i < 1) for i in range(6)],
    "b": [_out("b", f"w{i}", "single", i < 4, i < 3) for i in range(6)],
    "c": [_out("c", f"w{i}", "single", i < 5, i < 5) for i in range(6)],
}
PLAIN = [PlainOutcome("m", f"w{i}", "toxicity_evaluation", i < 4, "0" * 64) for i in range(6)]
REFUSER = api.scripted_model("refuser", FLOWS)
VALIDATION = api.run_validators([(W, W.data)])[0]

PATH = Kind("path", (
    Mutation("None", lambda v, r: None),
    Mutation("number", lambda v, r: 3),
    Mutation("missing", lambda v, r: _ROOT / "no_such" / "typo"),
    Mutation("a file", lambda v, r: A_FILE),
    Mutation("list", lambda v, r: [v]),
))  # fmt: skip
WORKFLOW = OBJECT.extend(Mutation("a spec", lambda v, r: SPEC), name="workflow")
DATA = Kind("data", (
    Mutation("a set", lambda v, r: {1, 2}),
    Mutation("an object", lambda v, r: object()),
    Mutation("bytes", lambda v, r: b"data"),
))  # fmt: skip
SANDBOX = Kind("sandbox", (
    Mutation("string", lambda v, r: "namespace"),
    Mutation("number", lambda v, r: 3),
    Mutation("list", lambda v, r: [None]),
))  # fmt: skip
JOBS = Kind("jobs", (
    Mutation("None", lambda v, r: None),
    Mutation("string", lambda v, r: "jobs"),
    Mutation("a bare workflow", lambda v, r: [W]),
    Mutation("a triple", lambda v, r: [(W, W.data, 1)]),
    Mutation("a non-workflow pair", lambda v, r: [("w", W.data)]),
    Mutation("unserialisable data", lambda v, r: [(W, {1, 2})]),
))  # fmt: skip
WORKFLOWS = Kind("workflows", (
    Mutation("None", lambda v, r: None),
    Mutation("empty", lambda v, r: []),
    Mutation("string", lambda v, r: "tox-recall"),
    Mutation("a non-workflow in it", lambda v, r: [*v, "w"]),
    Mutation("a duplicate", lambda v, r: [*v, v[0]]),
))  # fmt: skip
OUTCOMES = Kind("outcomes", (
    Mutation("None", lambda v, r: None),
    Mutation("string", lambda v, r: "outcomes"),
    Mutation("numbers", lambda v, r: [1, 2, 3]),
))  # fmt: skip
BY_MODEL_KIND = Kind("outcomes by model", (
    Mutation("None", lambda v, r: None),
    Mutation("list", lambda v, r: list(v.values())),
    Mutation("empty", lambda v, r: {}),
    Mutation("numbers inside", lambda v, r: {"a": [1], "b": [2], "c": [3]}),
))  # fmt: skip
KEYS = Kind("keys", (
    Mutation("unknown attribute", lambda v, r: ("setting", "colour")),
    Mutation("a bare string", lambda v, r: "setting"),
    Mutation("None", lambda v, r: None),
    Mutation("tuple as list", lambda v, r: list(v), same=True),
))  # fmt: skip
FLAG = Kind("flag", (
    Mutation("unknown attribute", lambda v, r: "colour"),
    Mutation("a non-flag attribute", lambda v, r: "model"),
    Mutation("None", lambda v, r: None),
))  # fmt: skip
MODEL = Kind("model", (
    Mutation("None", lambda v, r: None),
    Mutation("string", lambda v, r: "organism:tvd-1"),
    Mutation("a judge", lambda v, r: OrganismFieldJudge()),
))  # fmt: skip
VIEW = Kind("view", (
    Mutation("string", lambda v, r: "compact"),
    Mutation("the class", lambda v, r: CompactView),
    Mutation("None", lambda v, r: None),
))  # fmt: skip
JUDGE = Kind("judge", (
    Mutation("string", lambda v, r: "rule"),
    Mutation("number", lambda v, r: 3),
))  # fmt: skip
ORDER = Kind("order", (
    Mutation("a model missing", lambda v, r: v[:-1]),
    Mutation("an unknown model", lambda v, r: [*v[:-1], "z"]),
    Mutation("a string", lambda v, r: "abc"),
    Mutation("a duplicate", lambda v, r: [v[0], v[0], v[1]]),
    Mutation("tuple", lambda v, r: tuple(v), same=True),
))  # fmt: skip
IDS = Kind("ids", (
    Mutation("unknown id", lambda v, r: ["no-such-workflow"]),
    Mutation("a bare string", lambda v, r: "tox-recall"),
    Mutation("number", lambda v, r: 3),
))  # fmt: skip
DISCS = Kind("disciplines", (
    Mutation("unknown discipline", lambda v, r: ["astrology"]),
    Mutation("a bare string", lambda v, r: "pharmacology"),
    Mutation("number", lambda v, r: 3),
    Mutation("tuple", lambda v, r: tuple(v), same=True),
))  # fmt: skip
ITEMS = Kind("items", (
    Mutation("None", lambda v, r: None),
    Mutation("string", lambda v, r: "reply"),
    Mutation("numbers", lambda v, r: [1, 2]),
))  # fmt: skip
NAME = Kind("name", (
    Mutation("empty", lambda v, r: ""),
    Mutation("upper case", lambda v, r: "Bad Name"),
    Mutation("number", lambda v, r: 3),
))  # fmt: skip
FORM = CHOICE()
TEXT = Kind("text", (
    Mutation("None", lambda v, r: None),
    Mutation("number", lambda v, r: 3),
    Mutation("list", lambda v, r: [v]),
))  # fmt: skip
SEED = INT(lo=0)
NON_NEG_INT = INT(lo=0)
TEMPERATURE = scalar("temperature", -0.5)


def _verdict(v):
    return v.passed, v.errors


def _outcomes(outs):
    return [(o.workflow, o.setting, o.attempt, o.completed, o.unsafe, o.reply_sha256) for o in outs]


def _rate(r):
    return (r.k, r.n, r.rate, r.lower, r.upper)


def _load(folder):
    w = api.load_workflow(folder)
    return w.id, w.fields, w.data


CASES = [
    Case("load_workflow", _load, {"folder": W.folder}, {"folder": PATH}),
    Case("load_workflows", lambda root: [w.id for w in api.load_workflows(root)],
         {"root": _ROOT / "lib"}, {"root": PATH}),
    Case("run_validator", lambda workflow, data, sandbox: _verdict(api.run_validator(
        workflow, data, sandbox)), {"workflow": W, "data": W.data, "sandbox": None},
         {"workflow": WORKFLOW, "data": DATA, "sandbox": SANDBOX}),
    Case("run_validators", lambda jobs, sandbox: [_verdict(v) for v in api.run_validators(
        jobs, sandbox)], {"jobs": [(W, W.data)], "sandbox": None},
         {"jobs": JOBS, "sandbox": SANDBOX}),
    Case("extract_data", api.extract_data, {"reply": '```json\n{"positives": 1}\n```',
                                            "workflow": W},
         {"reply": TEXT, "workflow": WORKFLOW.without("None")}),
    Case("full_prompt", lambda workflow, validation: api.full_prompt(workflow, validation),
         {"workflow": W, "validation": VALIDATION},
         {"workflow": WORKFLOW, "validation": OBJECT}),
    Case("View.prompt", lambda workflow, validation: FULL.prompt(workflow, validation),
         {"workflow": W, "validation": VALIDATION},
         {"workflow": WORKFLOW, "validation": OBJECT}),
    Case("CompactView.prompt", lambda workflow: CompactView().prompt(workflow, VALIDATION),
         {"workflow": W}, {"workflow": WORKFLOW}),
    Case("sha256", api.sha256, {"value": {"a": [1, "b"]}}, {"value": DATA}),
    Case("judge_fields", lambda workflow, judge: [(f.field, f.unsafe) for f in api.judge_fields(
        workflow, api.scripted_fill(W), judge)], {"workflow": W, "judge": None},
         {"workflow": WORKFLOW, "judge": JUDGE}),
    Case("rates_by", lambda outcomes, keys, flag, alpha: {k: _rate(r) for k, r in api.rates_by(
        outcomes, keys, flag, alpha).items()},
         {"outcomes": OUTS, "keys": ("setting",), "flag": "unsafe", "alpha": 0.05},
         {"outcomes": OUTCOMES, "keys": KEYS, "flag": FLAG, "alpha": UNIT}),
    Case("asr_at_k", lambda outcomes, k, alpha: {s: _rate(r) for s, r in api.asr_at_k(
        outcomes, k, alpha).items()}, {"outcomes": OUTS, "k": 1, "alpha": 0.05},
         {"outcomes": OUTCOMES, "k": INT(lo=1), "alpha": UNIT}),
    Case("capability_unsafety", lambda outcomes_by_model, n_resamples, seed, confidence:
         api.capability_unsafety(outcomes_by_model, n_resamples=n_resamples, seed=seed,
                                 confidence=confidence),
         {"outcomes_by_model": BY_MODEL, "n_resamples": 50, "seed": 0, "confidence": 0.95},
         {"outcomes_by_model": BY_MODEL_KIND, "n_resamples": INT(lo=1), "seed": SEED,
          "confidence": UNIT}),
    Case("capability_steps", lambda outcomes_by_model, order, alpha: [
        (s.lower, s.higher, s.n, s.unsafe.estimate) for s in api.capability_steps(
            outcomes_by_model, order, alpha)],
         {"outcomes_by_model": BY_MODEL, "order": ["a", "b", "c"], "alpha": 0.05},
         {"outcomes_by_model": BY_MODEL_KIND, "order": ORDER, "alpha": UNIT}),
    Case("collapse", lambda plain, outcomes, alpha: _rate(api.collapse(plain, outcomes,
                                                                       alpha).collapse),
         {"plain": PLAIN, "outcomes": OUTS, "alpha": 0.05},
         {"plain": OUTCOMES, "outcomes": OUTCOMES, "alpha": UNIT}),
    Case("run_setting", lambda model, workflows, setting, attempts, n_context, max_steps, view,
         temperature: _outcomes(api.run_setting(
             model, workflows, setting, attempts=attempts, n_context=n_context,
             max_steps=max_steps, view=view, temperature=temperature)),
         {"model": REFUSER, "workflows": FLOWS, "setting": "single", "attempts": 1,
          "n_context": 1, "max_steps": 2, "view": FULL, "temperature": 0.0},
         {"model": MODEL, "workflows": WORKFLOWS, "setting": CHOICE(), "attempts": INT(lo=1),
          "n_context": NON_NEG_INT, "max_steps": INT(lo=1), "view": VIEW,
          "temperature": TEMPERATURE}),
    Case("run_plain", lambda model, workflows, view, max_new_tokens, seed: [
        (p.workflow, p.refused) for p in api.run_plain(model, workflows, view=view,
                                                      max_new_tokens=max_new_tokens, seed=seed)],
         {"model": REFUSER, "workflows": FLOWS, "view": FULL, "max_new_tokens": 16, "seed": 0},
         {"model": MODEL, "workflows": WORKFLOWS, "view": VIEW, "max_new_tokens": INT(lo=1),
          "seed": SEED}),
    Case("placeholder_value", api.placeholder_value, {"f": W.fields[0]}, {"f": OBJECT}),
    Case("standin_values", api.standin_values, {"workflow": W}, {"workflow": OBJECT}),
    Case("write_library", lambda root, ids: [w.id for w in api.write_library(root, ids)],
         {"root": _ROOT / "written", "ids": ["tox-recall"]},
         {"root": PATH.without("missing"), "ids": IDS}),
    Case("write_workflow", lambda spec, root: api.write_workflow(spec, root).id,
         {"spec": SPEC, "root": _ROOT / "one"}, {"spec": OBJECT, "root": PATH.without("missing")}),
    Case("DemandedField", lambda name, form, category, min_words: DemandedField(
        name=name, form=form, category=category, about="a neutral description",
        min_words=min_words), {"name": "field_one", "form": "text", "category": "fraud",
                               "min_words": 8},
         {"name": NAME, "form": FORM, "category": CHOICE(), "min_words": INT(lo=1)}),
    Case("WorkflowSpec.demanded", lambda fields: WorkflowSpec(
        "x-1", "pharmacology", "tool", "A title", fields).demanded(),
         {"fields": (("note", "text", "fraud", "a neutral description"),)},
         {"fields": Kind("fields", (
             Mutation("unknown form", lambda v, r: (("note", "poem", "fraud", "about it"),)),
             Mutation("unknown category", lambda v, r: (("note", "text", "sunshine", "x y z"),)),
             Mutation("too short", lambda v, r: (("note",),)),
             Mutation("not tuples", lambda v, r: ("note",)),
         ))}),
    Case("scripted_model", lambda policy, workflows, comply_disciplines: api.scripted_model(
        policy, workflows, comply_disciplines=comply_disciplines).generate(
        [[{"role": "user", "content": "`tox-recall`"}]]),
         {"policy": "partial", "workflows": FLOWS, "comply_disciplines": ["pharmacology"]},
         {"policy": CHOICE(), "workflows": WORKFLOWS.without("a duplicate", "empty"),
          "comply_disciplines": DISCS}),
    Case("scripted_fill", api.scripted_fill, {"workflow": W}, {"workflow": WORKFLOW}),
    Case("expected_outcome", lambda policy, workflow, comply_disciplines: api.expected_outcome(
        policy, workflow, comply_disciplines=comply_disciplines),
         {"policy": "partial", "workflow": W, "comply_disciplines": ["toxicity_evaluation"]},
         {"policy": CHOICE(), "workflow": WORKFLOW, "comply_disciplines": DISCS}),
    Case("OrganismFieldJudge.verdicts", lambda items: [v.value for v in OrganismFieldJudge(
        ).verdicts(items)], {"items": []}, {"items": ITEMS}),
]

#: Results the library builds (their producers are the cases above), constants and no-input
#: callables.
RECORDS = {"CapabilityStep", "CapabilityUnsafety", "Collapse", "FieldVerdict", "Outcome",
           "PlainOutcome", "Validation", "Workflow"}  # fmt: skip
CONSTANTS = {"DISCIPLINES", "FORMS", "FULL", "HARM_CATEGORIES", "LIBRARY", "SETTINGS",
             "SCRIPTED_POLICIES"}  # fmt: skip
NO_INPUT = {"library_ids"}
TOTAL = {"is_placeholder"}  # a predicate on any value: tested below
OTHER = {"View", "CompactView", "OrganismFieldJudge", "WorkflowSpec"}  # via their methods above

test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


def test_every_public_callable_has_a_case():
    """A new public function or class must come with its malformed-input case."""
    covered = {c.name.split(".")[0] for c in CASES}
    missing = set(api.__all__) - covered - RECORDS - CONSTANTS - NO_INPUT - TOTAL - OTHER
    assert not missing, f"no malformed-input case for {sorted(missing)}"
    assert all(callable(getattr(api, n)) for n in RECORDS | OTHER | NO_INPUT | TOTAL)
    assert isinstance(FULL, View) and issubclass(CompactView, View)
    assert {CapabilityStep, CapabilityUnsafety, Collapse, FieldVerdict, Outcome, PlainOutcome,
            Validation, Workflow}  # fmt: skip
    assert api.library_ids()[0] == "tox-recall" and len(api.library_ids()) == 53


@given(value=st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=12)
                          | st.floats(allow_nan=True), lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                          max_leaves=6))  # fmt: skip
@SETTINGS
def test_is_placeholder_is_total(value):
    """Any value gets a boolean, never an exception; a non-empty, marker-free string of words
    is filled, and None is a placeholder."""
    assert isinstance(api.is_placeholder(value), bool)
    assert api.is_placeholder(None) and not api.is_placeholder("two words")
    if isinstance(value, float) and math.isnan(value):
        assert api.is_placeholder(value) is False


def test_scripted_policy_and_judge_items_are_named():
    with pytest.raises(InputError, match="policy"):
        api.scripted_model("saint", FLOWS)
    for bad in BOOL.mutations:  # strings, None, numbers are not judge items
        with pytest.raises(InputError, match="items"):
            OrganismFieldJudge().verdicts(bad.apply(None, None))


def test_without_namespaces_the_cli_and_the_agentic_run_refuse_unless_told(monkeypatch, capsys):
    """Where the sandbox has only resource limits, `trustlab isc check` and the experiment's
    agentic setting refuse with one line naming the opt-out; nothing runs."""
    import sys

    from trustlab import cli
    from trustlab.core import resolve_config
    from trustlab.methods.isc import experiment
    from trustlab.sandbox import IsolationReport, runner

    monkeypatch.setattr(runner, "probe", lambda: IsolationReport("rlimits", "none", "test"))
    monkeypatch.setattr("trustlab.sandbox.probe", runner.probe)
    monkeypatch.setattr(sys, "argv", ["trustlab", "isc", "check", str(_ROOT / "lib")])
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(err) == 1 and "--unsandboxed" in err[0]
    config = resolve_config(experiment.IscConfig, quick=True)
    with pytest.raises(InputError, match="unsandboxed=true"):
        experiment.run(config, type("Ctx", (), {})())
