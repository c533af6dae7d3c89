"""LiSA's public API on bad input: a correct result or an InputError, nothing else.

First the reproductions of issue 38 (labels cast with int(), empty cases that became memory
entries, tracebacks), then property-based tests (hypothesis) over the names in
``lisa.__all__``: cases with missing or non-string fields, labels of every kind, malformed
scores from a base guardrail, bad options and stream inputs. Each call must either return a
result that satisfies its contract or raise ``InputError`` — never another exception, a
NaN-filled result, or a result computed on a silently reinterpreted input.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.methods.lisa import (
    ALLOW,
    BLOCK,
    AdaptiveGuardrail,
    BaseOnly,
    Case,
    Decision,
    Embedder,
    EmbeddingGuardrail,
    ExemplarMemory,
    FiredEntry,
    Guardrail,
    HashingEmbedder,
    InsightMemory,
    Lisa,
    LLMJudgeGuardrail,
    MemoBase,
    MemoryEntry,
    MiniLMEmbedder,
    PolicyMemory,
    ReflectionMemory,
    StreamResult,
    Suite,
    ValueIndex,
    build_suite,
    classification_metrics,
    default_cache_path,
    generic_seed_set,
    learning_curve,
    parse_block_probability,
    run_stream,
)

from ..malformed import INT, LABELS, RATE, UNIT, malformed_input_tests, scalar
from ..malformed import Case as Entry

PROPERTY = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.function_scoped_fixture])


def attempt(fn, *args, **kwargs):
    """The result, or None when the call raised InputError (any other exception fails)."""
    try:
        return fn(*args, **kwargs)
    except InputError as exc:
        assert str(exc) and "\n" not in str(exc)
        return None


class FixedBase:
    """A base guardrail whose P(block) is fixed (a stub: no model)."""

    name = "fixed"

    def __init__(self, score=0.7):
        self.s = score

    def score(self, cases):
        return np.full(len(cases), self.s) if np.isscalar(self.s) else self.s


def flow(subject="Alex", rec="the workplace"):
    return Case.flow("health records", subject, "an app", rec, "for employee programs")


FLOW = flow().to_dict()


@pytest.fixture(scope="module")
def emb():
    return HashingEmbedder(128)


# -- issue 38 reproductions --------------------------------------------------------------------
@pytest.mark.parametrize("label", [1.9, 0.5, -1, 2, None, True, "blocked", [1], float("nan")])
def test_report_labels_are_never_cast(label):
    """report(case, 1.9) meant block and 0.5 allow (int() truncation); None was a traceback."""
    lisa = Lisa(FixedBase(), embedder=None)
    with pytest.raises(InputError, match="'allow', 'block', 0 or 1"):
        lisa.report(flow(), label)
    assert lisa.memory_size() == 0


@pytest.mark.parametrize(("label", "expected"), [(1, BLOCK), (0, ALLOW), (1.0, BLOCK),
                                                 (np.int64(0), ALLOW), ("BLOCK", BLOCK),
                                                 (" allow ", ALLOW)])
def test_the_labels_lisa_reads(label, expected):
    lisa = Lisa(FixedBase(0.7 if expected == ALLOW else 0.3), embedder=None)
    lisa.report(flow(), label)
    (entry,) = lisa.entries()
    assert entry.label == expected


def test_empty_cases_are_refused_everywhere_the_same_way():
    """Case(...) accepted empty cases that became memory entries and then fired, while
    Case.from_dict refused them."""
    for make in (lambda: Case("flow"), lambda: Case("action"),
                 lambda: Case.flow("", "", "", "", ""), lambda: Case.tool_action("", ""),
                 lambda: Case.from_dict({"action": "  "}), lambda: Case("chat", action="hi")):
        with pytest.raises(InputError):
            make()
    lisa = Lisa(FixedBase(), embedder=None)
    with pytest.raises(InputError):
        lisa.report(Case.flow("x", "", "", "", ""), "allow")
    assert lisa.memory_size() == 0


def test_check_takes_a_case_or_its_fields_never_a_string():
    lisa = Lisa(FixedBase(0.7), embedder=None)
    assert lisa.check(FLOW) == lisa.check(flow())  # a mapping is read by Case.from_dict
    with pytest.raises(InputError, match="must be a Case"):
        lisa.check("share the health records with the workplace")
    with pytest.raises(InputError, match="needs the field 'recipient'"):
        lisa.check({**FLOW, "recipient": ""})
    with pytest.raises(InputError, match="no field 'colour'"):
        lisa.check({**FLOW, "colour": "red"})
    with pytest.raises(InputError, match="must be a string"):
        lisa.check({**FLOW, "sender": 3})


def test_the_base_guardrail_learns_from_the_labels_lisa_reads(emb):
    cases, labels = generic_seed_set(60, np.random.default_rng(0), 30)
    words = ["block" if y else "allow" for y in labels]
    a = EmbeddingGuardrail(emb).fit(cases, labels)
    b = EmbeddingGuardrail(emb).fit(cases, words)
    np.testing.assert_array_equal(a.score(cases[:20]), b.score(cases[:20]))
    with pytest.raises(InputError, match="both labels"):
        EmbeddingGuardrail(emb).fit(cases[:2], ["allow", "allow"])
    with pytest.raises(InputError, match="as many labels as cases"):
        EmbeddingGuardrail(emb).fit(cases[:3], ["allow", "block"])


def test_a_base_that_returns_nonsense_is_named():
    for bad in (np.array([np.nan]), np.array([1.5]), np.array([0.2, 0.3]), "high"):
        lisa = Lisa(FixedBase(bad), embedder=None)
        with pytest.raises(InputError, match="guardrail 'fixed'"):
            lisa.check(flow())
    with pytest.raises(InputError, match="score"):
        Lisa(object()).check(flow())


# -- properties ----------------------------------------------------------------------------------
text = st.one_of(st.text(max_size=6), st.just(""), st.just("  "), st.integers(), st.none())
fields = st.fixed_dictionaries({}, optional={k: text for k in (
    "data_type", "data_subject", "sender", "recipient", "transmission_principle", "action",
    "tool", "instruction")})
labels = st.one_of(st.sampled_from(["allow", "block", "ALLOW", "Block ", "maybe", ""]),
                   st.integers(-1, 2), st.floats(allow_nan=True), st.none(), st.booleans())


@PROPERTY
@given(fields, st.one_of(st.none(), st.dictionaries(st.text(max_size=3), st.integers(),
                                                    max_size=2), st.just([1, 2])))
def test_cases_from_fields_are_complete_or_refused(data, arguments):
    if arguments is not None:
        data = {**data, "arguments": arguments}
    case = attempt(Case.from_dict, data)
    if case is None:
        return
    if case.kind == "flow":
        assert all(getattr(case, f).strip() for f in
                   ("data_type", "data_subject", "sender", "recipient", "transmission_principle"))
    else:
        assert case.action.strip() or case.tool.strip()
    assert Case.from_dict(case.to_dict()) == case  # what is stored is what comes back


@PROPERTY
@given(labels, st.sampled_from(["lisa", "exemplar", "insight", "base"]))
def test_every_method_reads_labels_the_same_way(emb, label, method):
    base = MemoBase(FixedBase(0.3))
    g = {"lisa": lambda: Lisa(base, embedder=None),
         "exemplar": lambda: ExemplarMemory(base, emb),
         "insight": lambda: InsightMemory(base),
         "base": lambda: BaseOnly(base)}[method]()
    assert isinstance(g, AdaptiveGuardrail)
    ok = attempt(g.report, flow(), label)
    valid = (isinstance(label, str) and label.strip().lower() in ("allow", "block")) or (
        not isinstance(label, bool) and isinstance(label, int | float) and label in (0, 1))
    assert (ok is not None or method in ("base", "insight", "exemplar")) or not valid
    if not valid:
        assert g.memory_size() == 0
    d = g.check(flow())
    assert isinstance(d, Decision) and 0.0 <= d.score <= 1.0
    assert all(isinstance(f, FiredEntry) for f in d.fired)


@PROPERTY
@given(st.dictionaries(st.sampled_from([*PolicyMemory.OPTIONS, "gate", "alpha"]),
                       st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                                 st.integers(-2, 5), st.booleans(), st.none(),
                                 st.tuples(st.floats(-1, 3), st.floats(-1, 3)),
                                 st.just({"flow": ("recipient",)}), st.just({"chat": ("x",)})),
                       max_size=3))
def test_memory_options_are_valid_or_refused(options):
    lisa = Lisa(FixedBase(0.7), embedder=None, **options)
    entry = attempt(lisa.report, flow(), "allow")
    if entry is None:
        return
    mem = lisa.memory_
    assert isinstance(mem, PolicyMemory) and 0 < mem.gate_alpha < 1
    (leaf,) = mem.entries(leaves_only=True)
    assert isinstance(leaf, MemoryEntry) and 0 < mem.lower_bound(leaf) < 1
    d = lisa.check(flow(subject="Sam"))
    assert d.source in ("base", "memory") and 0 <= d.score <= 1


@PROPERTY
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-1, 2), st.none(),
                 st.text(max_size=3)))
def test_scores_given_to_the_memory_are_probabilities(score):
    mem = PolicyMemory()
    d = attempt(mem.consult, flow(), score)
    if d is not None:
        assert 0 <= score <= 1 and d.base_score == score
    assert attempt(mem.fold, flow(), "allow", score) is None or 0 <= score <= 1
    traffic = attempt(mem.add_traffic, 3, score)
    if traffic is None:
        return
    assert 1.5 <= score <= 3


@PROPERTY
@given(st.lists(st.integers(-1, 2), max_size=6), st.lists(st.integers(-1, 2), max_size=6),
       st.one_of(st.integers(-1, 4), st.floats(allow_nan=True), st.none()))
def test_metrics_and_curves_are_finite_or_refused(pred, truth, n_windows):
    m = attempt(classification_metrics, pred, truth)
    if m is not None:
        assert len(pred) == len(truth) > 0 and set(pred) | set(truth) <= {0, 1}
        assert all(math.isfinite(v) and 0 <= v <= 1 for v in m.values())
        result = StreamResult("x", np.array(pred), np.array(truth), np.zeros(len(pred), int), 0,
                              0, np.zeros(len(pred)))
        rows = attempt(learning_curve, result, n_windows)
        if rows is not None:
            assert 1 <= n_windows <= len(pred) and len(rows) == n_windows


@PROPERTY
@given(st.one_of(st.floats(-0.5, 1.5), st.none()), st.one_of(st.floats(-0.5, 1.5), st.none()),
       st.lists(st.integers(-1, 5), min_size=1, max_size=8),
       st.one_of(st.integers(-1, 3), st.text(max_size=2)))
def test_streams_run_or_refuse(report_rate, flip_rate, order, seed):
    cases = [flow(subject=s) for s in "ABCD"]
    res = attempt(run_stream, Lisa(FixedBase(0.7), embedder=None), cases, np.array([0, 1, 0, 1]),
                  np.array(order), report_rate=report_rate, flip_rate=flip_rate, seed=seed)
    if res is None:
        return
    assert 0 <= report_rate <= 1 and 0 <= flip_rate < 1 and min(order) >= 0 and max(order) < 4
    assert isinstance(res, StreamResult) and len(res.predictions) == len(order)


@PROPERTY
@given(st.one_of(st.sampled_from(["confaide_plus", "privacylens_plus", "agentharm_style",
                                  "agentharm"]), st.integers()),
       st.one_of(st.integers(-1, 20), st.floats(allow_nan=True), st.none()),
       st.one_of(st.none(), st.integers(-1, 30)))
def test_suites_are_built_or_refused(name, variants, max_seeds):
    suite = attempt(build_suite, name, variants=variants, max_seeds=max_seeds)
    if suite is None:
        return
    assert isinstance(suite, Suite) and len(suite.cases) == len(suite.labels) > 0
    assert set(np.unique(suite.labels)) <= {0, 1}


@PROPERTY
@given(st.one_of(st.integers(-1, 50), st.floats(allow_nan=True), st.none()),
       st.one_of(st.integers(-1, 50), st.text(max_size=2)))
def test_seed_sets_are_built_or_refused(n_flows, n_tool_calls):
    out = attempt(generic_seed_set, n_flows, np.random.default_rng(0), n_tool_calls)
    if out is not None:
        cases, y = out
        assert len(cases) == len(y) == n_flows + n_tool_calls and set(y) <= {0, 1}
    assert attempt(generic_seed_set, 5, 0) is None  # a seed where a Generator is needed


@PROPERTY
@given(st.one_of(st.text(max_size=8), st.integers(), st.none(), st.binary(max_size=4)))
def test_judge_replies_are_read_or_refused(reply):
    p = attempt(parse_block_probability, reply)
    if p is not None:
        assert isinstance(reply, str) and 0 <= p <= 1


def test_the_judge_and_reflection_check_their_chat_model():
    class Chat:
        name = "scripted"

        def __init__(self, replies):
            self.replies = replies

        def generate(self, conversations, max_new_tokens, temperature, seed):
            return self.replies[: len(conversations)]

    judge = LLMJudgeGuardrail(Chat(["0.8"]))
    assert isinstance(judge, Guardrail) and judge.score([flow()])[0] == 0.8
    with pytest.raises(InputError, match="returned 0 replies for 1"):
        LLMJudgeGuardrail(Chat([])).score([flow()])
    with pytest.raises(InputError, match="generate"):
        LLMJudgeGuardrail(object()).score([flow()])
    with pytest.raises(InputError, match="LLMJudgeGuardrail"):
        ReflectionMemory(FixedBase())
    memory = ReflectionMemory(judge)
    with pytest.raises(InputError):
        memory.report(flow(), 0.5)
    assert memory.memory_size() == 0


@PROPERTY
@given(st.one_of(st.floats(allow_nan=True), st.integers(-1, 2), st.none()),
       st.one_of(st.text(max_size=3), st.integers(), st.none()))
def test_value_index_is_valid_or_refused(emb, similarity, value):
    index = attempt(ValueIndex, emb, similarity)
    if index is None:
        assert similarity is None or not 0 < similarity <= 1
        return
    cid = attempt(index.lookup, "recipient", value, create=True)
    if cid is not None:
        assert isinstance(value, str) and index.leader("recipient", cid) is not None
    assert attempt(index.leader, "recipient", 99) is None


def test_embedders_are_checked_where_lisa_takes_them(emb):
    assert isinstance(emb, Embedder) and default_cache_path().name.endswith(".sqlite")
    with pytest.raises(InputError, match="embedder"):
        Lisa(FixedBase(), embedder="minilm").check(flow())
    with pytest.raises(InputError, match="embedder"):
        EmbeddingGuardrail("minilm").fit([flow(), flow("Sam")], [0, 1])
    lazy = EmbeddingGuardrail(MiniLMEmbedder(None))  # storing options loads nothing
    assert lazy.embedder._model is None
    with pytest.raises(InputError, match="dim"):  # issue 38 (the substrate checks it now)
        HashingEmbedder(0)


# -- the shared corruptions (tests/malformed.py): every array and scalar argument -----------------
_PRED = np.array([0, 1, 1, 0, 1, 0, 0, 1])
_TRUTH = np.array([0, 1, 0, 0, 1, 1, 0, 1])
_SEED_CASES, _SEED_LABELS = generic_seed_set(40, np.random.default_rng(0), 20)
_STREAM = [flow(subject=s) for s in "ABCDEF"]


def _fit_scores(labels):
    base = EmbeddingGuardrail(HashingEmbedder(64)).fit(_SEED_CASES, labels)
    return base.score(_SEED_CASES[:10])


def _stream(labels, order, report_rate, flip_rate):
    res = run_stream(Lisa(FixedBase(0.7), embedder=None), _STREAM, labels, order,
                     report_rate=report_rate, flip_rate=flip_rate, seed=0)
    return {"pred": res.predictions, "reports": res.n_reports}


MALFORMED = [
    Entry("classification_metrics", lambda pred, truth: classification_metrics(pred, truth),
         {"pred": _PRED, "truth": _TRUTH}, {"pred": LABELS, "truth": LABELS}),
    Entry("EmbeddingGuardrail.fit", _fit_scores, {"labels": _SEED_LABELS}, {"labels": LABELS}),
    Entry("run_stream", _stream, {"labels": np.array([0, 1, 0, 1, 0, 1]),
                                 "order": np.array([0, 1, 2, 3, 4, 5, 0, 1]),
                                 "report_rate": 0.5, "flip_rate": 0.2},
         {"labels": LABELS, "order": LABELS.without("one label short"), "report_rate": RATE,
          "flip_rate": scalar("flip rate", -0.1, 1.0)}),
    Entry("generic_seed_set", lambda n_flows, n_tool_calls: [c.key() for c in generic_seed_set(
        n_flows, np.random.default_rng(0), n_tool_calls)[0]], {"n_flows": 6, "n_tool_calls": 4},
         {"n_flows": INT(lo=0), "n_tool_calls": INT(10**6, lo=0)}),
    Entry("build_suite", lambda variants: len(build_suite("confaide_plus", variants=variants).cases),
         {"variants": 2}, {"variants": INT(17, lo=1)}),
    Entry("Lisa.report", lambda gate_alpha: Lisa(FixedBase(0.7), embedder=None,
                                                gate_alpha=gate_alpha).report(flow(), "allow"),
         {"gate_alpha": 0.2}, {"gate_alpha": UNIT}),
]
test_every_corruption_once, test_malformed_input = malformed_input_tests(MALFORMED)
