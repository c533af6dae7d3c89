"""LiSA's memory: abstraction generalises one report, local rules on mixed labels, gating."""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.core.errors import InputError
from trustlab.methods.lisa import (
    ALLOW,
    BLOCK,
    Case,
    ExemplarMemory,
    HashingEmbedder,
    InsightMemory,
    Lisa,
    LLMJudgeGuardrail,
    ReflectionMemory,
    parse_block_probability,
)


class FixedBase:
    """A base guardrail whose P(block) depends only on the recipient (a stub, no model)."""

    name = "fixed"

    def __init__(self, score: float = 0.7, by_recipient: dict[str, float] | None = None):
        self.s = score
        self.by_recipient = by_recipient or {}

    def score(self, cases):
        return np.array([self.by_recipient.get(c.recipient, self.s) for c in cases])


def flow(dt="health records", rec="the workplace", tp="for employee programs", sender="an app",
         subject="Alex", action=""):
    return Case.flow(dt, subject, sender, rec, tp, action=action)


@pytest.fixture(scope="module")
def emb():
    return HashingEmbedder(256)


def test_one_report_generalises_to_unseen_cases_of_its_abstraction(emb):
    lisa = Lisa(FixedBase(0.6), embedder=emb)
    reported = flow(sender="an app", subject="Alex")
    lisa.report(reported, "allow")
    unseen = [flow(sender=s, subject=p, action=f"{s} shares it") for s in ("a form", "HR portal")
              for p in ("Sam", "an employee")]
    for c in unseen:
        d = lisa.check(c)
        assert not d.block and d.source == "memory", d
        assert d.fired[0].effect == "override"
    # other abstractions (another recipient or data type) are untouched
    assert lisa.check(flow(rec="a data broker")).block
    assert lisa.check(flow(tp="to sell it to advertisers")).block
    # the exemplar baseline needs near-duplicates: unseen surface forms are not covered
    ex = ExemplarMemory(FixedBase(0.6), emb, threshold=0.9)
    ex.report(reported, "allow")
    assert sum(not ex.check(c).block for c in unseen) < len(unseen)


def test_mixed_labels_make_local_rules_not_a_blanket_flip(emb):
    lisa = Lisa(FixedBase(0.6), embedder=emb)
    for subject in ("Alex", "Sam"):
        lisa.report(flow(dt="health records", subject=subject), "allow")
        lisa.report(flow(dt="social security number", subject=subject), "block")
    mem = lisa.memory_
    roots = [e for e in mem.entries() if e.depth == 0]
    assert len(roots) == 1 and roots[0].split_attribute == "data_type"
    leaves = mem.entries(leaves_only=True)
    assert {e.label for e in leaves} == {ALLOW, BLOCK}
    assert all(e.depth == 1 for e in leaves)
    assert not lisa.check(flow(dt="health records", subject="Kim")).block
    assert lisa.check(flow(dt="social security number", subject="Kim")).block
    # an unseen data type inside the split abstraction falls back to the base (no blanket rule)
    d = lisa.check(flow(dt="favourite books"))
    assert d.source == "base" and d.fired == ()
    # without local rules the same reports leave one tied abstraction that cannot fire
    flat = Lisa(FixedBase(0.6), embedder=emb, local_rules=False)
    for subject in ("Alex", "Sam"):
        flat.report(flow(dt="health records", subject=subject), "allow")
        flat.report(flow(dt="social security number", subject=subject), "block")
    assert flat.memory_size() == 1
    assert flat.check(flow(dt="health records", subject="Kim")).block  # base decides


def test_labels_that_no_attribute_separates_stay_as_mixed_evidence(emb):
    lisa = Lisa(FixedBase(0.6), embedder=emb)
    c = flow()
    for lab in ("allow", "allow", "allow", "block"):
        lisa.report(c, lab)
    (entry,) = lisa.entries()
    assert entry.is_leaf and (entry.n_allow, entry.n_block) == (3, 1)


def test_one_flipped_report_cannot_flip_behaviour(emb):
    confident = FixedBase(0.95)  # base blocks, confidently, and is right here
    lisa = Lisa(confident, embedder=emb)
    lisa.report(flow(), "allow")  # a single wrong report
    d = lisa.check(flow(subject="Sam"))
    assert d.block and d.fired[0].effect == "gated"
    # ungated memories flip on that single report
    ins = InsightMemory(confident)
    ins.report(flow(), "allow")
    assert not ins.check(flow(subject="Sam")).block
    nogate = Lisa(confident, embedder=emb, gating=False)
    nogate.report(flow(), "allow")
    assert not nogate.check(flow(subject="Sam")).block
    # an established rule survives one contradicting report
    lisa2 = Lisa(confident, embedder=emb)
    for s in ("A", "B", "C", "D"):
        lisa2.report(flow(subject=s), "allow")
    assert not lisa2.check(flow(subject="Z")).block
    lisa2.report(flow(subject="E"), "block")
    assert not lisa2.check(flow(subject="Z")).block


def test_reuse_grows_with_evidence(emb):
    lisa = Lisa(FixedBase(0.9), embedder=emb)
    flipped_after = None
    bounds = []
    for k, s in enumerate("ABCDEFG", start=1):
        lisa.report(flow(subject=s), "allow")
        d = lisa.check(flow(subject="unseen"))
        bounds.append(d.fired[0].lower_bound)
        if flipped_after is None and not d.block:
            flipped_after = k
    assert bounds == sorted(bounds) and bounds[-1] > bounds[0]
    assert flipped_after is not None and flipped_after > 1


def _traffic(lisa, n_checks, n_contradicting):
    """``n_checks`` deployed checks the base decides, ``n_contradicting`` of them reported
    (each in its own abstraction, far from the probe's)."""
    for i in range(n_checks):
        c = flow(rec=f"recipient {i}", tp="for audits")
        assert lisa.check(c).source == "base"
        if i < n_contradicting:
            lisa.report(c, "allow")


def test_traffic_calibrates_an_overconfident_base(emb):
    """Reports of base mistakes per base-decided check reveal the base's accuracy: with
    rho = 0.1, 10 contradicting reports in 100 checks mean it is wrong far more often than
    its 0.8 confidence claims, so one report may override it; the uncalibrated gate waits."""
    over = FixedBase(0.8)
    probe, other = flow(subject="Sam"), flow(subject="Kim")
    cal, nocal = Lisa(over, embedder=emb), Lisa(over, embedder=emb, calibrate=False)
    for g in (cal, nocal):
        _traffic(g, 100, 10)
        g.report(probe, "allow")
    acc, c_bar = cal.memory_.base_accuracy()
    assert c_bar == pytest.approx(0.8) and acc < 0.4
    assert cal.memory_.calibrated_confidence(0.8) == pytest.approx(0.8 * acc / 0.8)
    d = cal.check(other)
    assert not d.block and d.fired[0].effect == "override"
    d = nocal.check(other)
    assert d.block and d.fired[0].effect == "gated"
    assert d.fired[0].base_reliability == pytest.approx(2 * 0.8 / 3)


def test_calibration_never_raises_trust_and_one_flipped_report_stays_gated(emb):
    """A base as reliable as it claims (1 contradicting report in 300 checks) keeps its
    confidence (the calibration factor is capped at 1), so one flipped report against a
    0.95-sure base still cannot flip behaviour; looking (observe=False) is not traffic."""
    sure = FixedBase(0.95)
    lisa = Lisa(sure, embedder=emb)
    _traffic(lisa, 300, 1)
    mem = lisa.memory_
    acc, c_bar = mem.base_accuracy()
    assert acc > c_bar and mem.calibrated_confidence(0.95) == pytest.approx(0.95)
    lisa.report(flow(), "allow")  # a single wrong report
    n = mem.base_checks_
    d = lisa.check(flow(subject="Sam"), observe=False)
    assert d.block and d.fired[0].effect == "gated" and mem.base_checks_ == n
    with pytest.raises(InputError, match="report_share"):
        Lisa(sure, embedder=emb, report_share=0.0).report(flow(), "block")


def test_gate_parameters_are_validated(emb):
    with pytest.raises(InputError, match="gate_alpha"):
        Lisa(FixedBase(), embedder=emb, gate_alpha=1.5).report(flow(), "block")
    with pytest.raises(InputError, match="'allow', 'block', 0 or 1"):
        Lisa(FixedBase(), embedder=emb).report(flow(), "maybe")


def test_free_text_actions_split_on_arguments(emb):
    lisa = Lisa(FixedBase(0.3), embedder=emb)

    def act(host, instr="Restart the web service on this host"):
        return Case.tool_action(f"run_shell(host={host})", "run_shell", {"host": host}, instr)

    # host names without a wildcard pattern: one abstraction (the tool), split on the host
    lisa.report(act("apollo"), "block")
    lisa.report(act("apollo"), "block")
    lisa.report(act("zeus"), "allow")
    assert lisa.memory_size() == 1  # one contrary report is not yet a local rule
    lisa.report(act("zeus"), "allow")
    assert lisa.check(act("apollo")).block
    assert not lisa.check(act("zeus")).block
    assert lisa.entries()[0].split_attribute == "arg.host"


def test_argument_patterns_scope_tool_reports(emb):
    from trustlab.methods.lisa.memory import value_pattern

    assert value_pattern("prod-db-01") == "prod-*"
    assert value_pattern("m.lee@partner.example") == "*@partner.example"
    assert value_pattern("https://github.example/release/x.zip") == "github.example/*"
    assert value_pattern("25000") == "~10^4" and value_pattern("900") == "~10^2"
    assert value_pattern("the HR team") is None and value_pattern("customers.csv") is None
    lisa = Lisa(FixedBase(0.4), embedder=emb)  # an unsure base: one report may override

    def act(host, instr="Restart the web service on this host"):
        return Case.tool_action(f"run_shell(host={host})", "run_shell", {"host": host}, instr)

    lisa.report(act("prod-db-01"), "block")
    # one report covers other hosts of its pattern, even with another instruction ...
    assert lisa.check(act("prod-web-07", "Bounce the app service on the box")).block
    # ... but not hosts of another pattern (the base decides there)
    d = lisa.check(act("dev-api-03"))
    assert not d.block and d.fired == ()


def test_case_validation_and_roundtrip():
    c = Case.from_dict({"action": "x", "tool": "send_email", "arguments": {"to": "a@b"}})
    assert c.kind == "action" and Case.from_dict(c.to_dict()) == c
    f = flow()
    assert Case.from_dict(f.to_dict()) == f
    with pytest.raises(InputError, match="recipient"):
        Case.from_dict({"data_type": "x", "data_subject": "y", "sender": "z",
                        "transmission_principle": "t"})
    with pytest.raises(InputError, match="action"):
        Case.from_dict({"instruction": "only this"})


def test_llm_judge_and_reflection_memory_with_a_scripted_model():
    from trustlab.lm import ScriptedChatModel

    def script(conv):
        system = conv[0]["content"]
        return "0.1 ALLOW" if "should be allowed" in system else "0.9 BLOCK"

    chat = ScriptedChatModel(script)
    judge = LLMJudgeGuardrail(chat)
    refl = ReflectionMemory(judge)
    c = flow()
    assert refl.check(c).block
    refl.report(c, "allow")
    assert not refl.check(c).block and refl.memory_size() == 1
    assert "Lessons" in chat.calls[-1]["conversations"][0][0]["content"]
    # LiSA over the LLM judge: the judge stays fixed, the memory adapts
    lisa = Lisa(LLMJudgeGuardrail(ScriptedChatModel(lambda conv: "0.55")), embedder=None)
    lisa.report(c, "allow")
    assert not lisa.check(flow(subject="Kim")).block


def test_experiment_runs_the_llm_judge_on_a_local_hf_model(chat_xs, tmp_path):
    """`--set llm=hf:PATH` end to end on a real local model (the chat-xs organism): the judge,
    LiSA over the judge and the reflection memory all run the deployment stream."""
    import json

    from trustlab.core.runner import run_experiment

    run_experiment(
        "lisa",
        quick=True,
        overrides=[
            f"llm=hf:{chat_xs.path}",
            "llm_stream_length=24",
            "suites=['confaide_plus']",
            "flip_rates=[0.2]",
            "embedder=hashing",
            "latency_cases=0",
            "large_base_hidden=0",
        ],
        out_dir=tmp_path,
    )
    report = json.loads((tmp_path / "report.json").read_text())
    table, config = report["tables"]["final_metrics"], report["config"]
    rows = {r[2]: dict(zip(table["columns"], r, strict=True)) for r in table["rows"]}
    assert set(rows) >= {"llm_judge", "lisa_llm", "reflection"}
    # the judge's row is the judge's own accuracy on the experiment's stream: re-derive the
    # stream (RunContext(seed=0).child_rng), ask the same local model, threshold at 0.5
    from trustlab.lm import chat_model
    from trustlab.methods.lisa import build_suite, classification_metrics

    suite = build_suite("confaide_plus", variants=config["confaide_variants"])
    rng = np.random.default_rng(np.random.SeedSequence([0, *[ord(c) for c in
                                                               "stream confaide_plus"]]))
    order = rng.integers(0, len(suite.cases), config["stream_length"])[:24]
    judge = LLMJudgeGuardrail(chat_model(f"hf:{chat_xs.path}"), seed=0)
    scores = judge.score([suite.cases[i] for i in order])
    expected = classification_metrics((scores >= 0.5).astype(int), suite.labels[order])
    assert rows["llm_judge"]["accuracy"] == pytest.approx(expected["accuracy"])
    assert rows["llm_judge"]["reports"] <= 24
    assert rows["llm_judge"]["memory_size"] == 0
    assert rows["reflection"]["memory_size"] == min(rows["reflection"]["reports"], 20)


@pytest.mark.parametrize(
    ("reply", "p"),
    [("0.8 BLOCK", 0.8), ("BLOCK", 1.0), ("allow it", 0.0), ("1", 1.0), ("unsure", 0.5)],
)
def test_parse_block_probability(reply, p):
    assert parse_block_probability(reply) == p
