"""LiSA on the default suites: one report generalises, mixed-label reports become local rules,
and at 20% flipped reports LiSA stays above the base guardrail and the memory baselines
(exemplar, insight) over 20 seeded deployments. The base here embeds with feature hashing
(instant); the experiment uses MiniLM (the same criterion runs on it as an acceptance test, in
CI)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy import stats

from trustlab.datasets.confaide import load_confaide_tier2
from trustlab.datasets.privacylens import load_privacylens_seeds
from trustlab.methods.lisa import (
    SUITES,
    EmbeddingGuardrail,
    HashingEmbedder,
    Lisa,
    MemoBase,
    build_suite,
    classification_metrics,
    generic_seed_set,
    run_stream,
)
from trustlab.methods.lisa.memory import abstraction_names, case_attributes


@pytest.fixture(scope="module")
def setup():
    emb = HashingEmbedder(384)
    cases, labels = generic_seed_set(400, np.random.default_rng(0))
    return emb, EmbeddingGuardrail(emb).fit(cases, labels)


def test_bundled_data_match_their_source_counts():
    v = load_confaide_tier2()
    assert len(v) == 98 and sum(x.acceptable for x in v) == 7
    assert len(load_privacylens_seeds()) == 493
    pl = build_suite("privacylens_plus")
    assert len(pl.cases) == 986 and pl.generic_labels.mean() == 0.5
    # counterparts change only the recipient or the transmission principle of their seed
    for viol, ok in zip(pl.cases[0::2], pl.cases[1::2], strict=True):
        assert viol.data_type == ok.data_type and viol.data_subject == ok.data_subject
        assert (viol.recipient != ok.recipient) != (
            viol.transmission_principle != ok.transmission_principle
        )
    for name in SUITES:
        s = build_suite(name)
        assert 0.05 < s.local_mask.mean() < 0.5, name  # local norms differ from generic ones


@pytest.mark.parametrize("name", SUITES)
def test_one_report_generalises_on_the_suite(setup, name):
    emb, base_model = setup
    suite = build_suite(name)
    base = MemoBase(base_model)
    scores = base.score(suite.cases)
    base_pred = (scores >= 0.5).astype(int)
    wrong = np.flatnonzero((base_pred != suite.labels) & suite.local_mask)
    conf = np.maximum(scores, 1 - scores)
    key = "recipient" if suite.cases[0].kind == "flow" else "tool"

    def siblings(j: int) -> int:  # base mistakes of the same kind and context
        a = suite.cases[j].attributes()[key]
        return sum(1 for k in wrong if suite.labels[k] == suite.labels[j]
                   and suite.cases[k].attributes()[key] == a and suite.cases[k] != suite.cases[j])

    i = max((int(j) for j in wrong), key=lambda j: (siblings(j), -conf[j]))
    # gate of one report vs a base this sure: m * c / (m + 1) against LB(1 of 1) = sqrt(0.2)
    # (no traffic observed here, so the base's confidence is uncalibrated: c_hat = c)
    lisa = Lisa(base, embedder=emb)
    lisa.report(suite.cases[i], int(suite.labels[i]))
    entry = lisa.memory_.match(suite.cases[i])
    covered = [j for j in range(len(suite.cases))
               if suite.cases[j] != suite.cases[i] and lisa.memory_.match(suite.cases[j]) is entry]
    assert covered, "the abstraction covers no unseen case"
    pred = np.array([lisa.check(c, observe=False).label for c in suite.cases])
    changed = set(np.flatnonzero(pred != base_pred).tolist())
    assert changed <= set(covered) | {j for j, c in enumerate(suite.cases) if c == suite.cases[i]}
    # the unseen cases it flips are exactly the covered ones the base is unsure enough about
    lb = float(np.sqrt(0.2))
    expect = {j for j in covered if base_pred[j] != suite.labels[i] and 2 * conf[j] / 3 < lb}
    assert changed - {i} == expect - {i}
    assert all(pred[j] == suite.labels[j] for j in expect if suite.local_mask[j])


def _abstraction_groups(suite) -> dict[tuple, list[int]]:
    """Suite cases grouped by their abstraction key (LiSA's attributes, exact values)."""
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(suite.cases):
        attrs = case_attributes(c)
        key = [(k, attrs.get(k, "")) for k in abstraction_names(c.kind, attrs)]
        groups.setdefault((c.kind, *key), []).append(i)
    return groups


@pytest.mark.parametrize("name", SUITES)
def test_mixed_reports_make_local_rules_on_the_suite(setup, name):
    """The suite's largest abstraction whose cases carry both true labels (a local norm inside a
    generic context) gets three reports of its majority label and two of its minority label on
    cases sharing a value that marks the minority. LiSA splits it into local rules that label the
    abstraction's cases mostly right, and keeps the minority's cases on the minority label; the
    ablation without local rules makes one blanket majority rule that labels every minority case
    wrong."""
    emb, base_model = setup
    suite = build_suite(name)
    key, idx = max(((k, v) for k, v in _abstraction_groups(suite).items()
                    if 0 < suite.labels[v].mean() < 1), key=lambda kv: len(kv[1]))
    y = suite.labels[idx]
    minority = int(y.mean() < 0.5)
    attrs = [case_attributes(suite.cases[i]) for i in idx]
    # the (attribute, value) purest for the minority label among >= 2 minority cases
    counts: dict[tuple[str, str], list[int]] = {}
    for a, lab in zip(attrs, y, strict=True):
        for att in set(a) - {k for k, _ in key[1:]}:
            counts.setdefault((att, a[att]), [0, 0])[int(lab)] += 1
    (att, val), _ = max(((k, c) for k, c in counts.items() if c[minority] >= 2),
                        key=lambda kc: (kc[1][minority] / sum(kc[1]), kc[1][minority], kc[0]))
    rng = np.random.default_rng(0)
    majority_cases = [i for i, lab in zip(idx, y, strict=True) if lab != minority]
    minority_cases = [i for i, a, lab in zip(idx, attrs, y, strict=True)
                      if lab == minority and a.get(att) == val]
    reported = [*rng.choice(majority_cases, 3, replace=False),
                *rng.choice(minority_cases, 2, replace=False)]

    def memory(local_rules: bool):
        lisa = Lisa(MemoBase(base_model), embedder=emb, local_rules=local_rules)
        for i in reported:
            lisa.report(suite.cases[i], int(suite.labels[i]))
        return lisa.memory_

    mem, flat = memory(True), memory(False)
    (root,) = [e for e in mem.entries() if e.depth == 0]
    assert root.split_attribute is not None, "mixed reports left one blanket abstraction"
    leaves = mem.entries(leaves_only=True)
    assert {e.label for e in leaves} == {0, 1} and all(e.depth == 1 for e in leaves)
    covered = [(i, mem.match(suite.cases[i])) for i in idx]
    covered = [(i, e) for i, e in covered if e is not None]
    assert all(e.depth == 1 for _, e in covered)  # the abstraction itself never fires
    acc = np.mean([e.label == suite.labels[i] for i, e in covered])
    flat_labels = {flat.match(suite.cases[i]).label for i in idx}
    assert flat_labels == {1 - minority}  # the blanket rule: majority label everywhere
    assert acc >= 0.8 and acc > np.mean(y != minority), (name, att, val, acc)
    for i in minority_cases:  # the reported minority's kind keeps its label
        assert mem.match(suite.cases[i]).label == minority


def _child_rng(seed: int, name: str) -> np.random.Generator:
    """The generator ``RunContext(seed).child_rng(name)`` gives the experiment."""
    return np.random.default_rng(np.random.SeedSequence([seed, *[ord(c) for c in name]]))


#: The comparisons the tests make (the experiment also runs the ablations).
_COMPARED = ("base", "lisa", "exemplar", "insight", "insight_lisa_keys")


def _accuracy_at_20_percent_flips(emb, seed: int) -> dict[str, dict[str, float]]:
    """Prequential accuracy per suite and method at 20% flipped reports: the default
    experiment's methods, protocol (1500 cases, 10% of mistakes reported) and seeding."""
    from trustlab.methods.lisa.experiment import LisaConfig, _methods

    config = LisaConfig()  # the default experiment's gate, clustering and baseline settings
    cases, labels = generic_seed_set(
        config.n_seed_flows, _child_rng(seed, "seed set"), config.n_seed_tool_calls
    )
    base_model = EmbeddingGuardrail(emb).fit(cases, labels)
    acc: dict[str, dict[str, float]] = {}
    flipped = 0
    for name in SUITES:
        suite = build_suite(name)
        base = MemoBase(base_model)
        order = _child_rng(seed, f"stream {name}").integers(
            0, len(suite.cases), config.stream_length
        )
        fb_seed = int(_child_rng(seed, f"feedback {name}").integers(0, 2**31))
        streamed = [suite.cases[i] for i in sorted(set(order.tolist()))]
        base.score(streamed)  # embed the streamed cases once, batched, as the experiment does
        emb.encode(sorted({v for c in streamed for v in c.attributes().values()}))
        for g in _methods(config, base, emb):
            if g.name not in _COMPARED:
                continue
            res = run_stream(g, suite.cases, suite.labels, order,
                             report_rate=config.report_rate, flip_rate=0.2, seed=fb_seed)
            flipped += res.n_flipped
            acc.setdefault(name, {})[g.name] = classification_metrics(
                res.predictions, res.labels)["accuracy"]
    assert flipped > 0
    return acc


#: Seeds of the robustness tests: 20 deployments (base seed set, stream, reports, flips).
_SEEDS = tuple(range(20))


def _paired_lower_bound(accs: list[dict[str, dict[str, float]]], suite: str, other: str) -> float:
    """One-sided 95% lower confidence bound (paired t over seeds) on LiSA's accuracy minus
    ``other``'s on ``suite``."""
    d = np.array([a[suite]["lisa"] - a[suite][other] for a in accs])
    return float(stats.ttest_1samp(d, 0.0, alternative="greater").confidence_interval(0.95).low)


@functools.cache
def _hashing_accuracies() -> tuple[dict[str, dict[str, float]], ...]:
    emb = HashingEmbedder(384)
    return tuple(_accuracy_at_20_percent_flips(emb, seed) for seed in _SEEDS)


@pytest.mark.parametrize("other", ["base", "exemplar", "insight"])
def test_above_base_and_ungated_baselines_at_20_percent_flipped_reports(other):
    """The Done-when criterion with a feature-hashing base (no model): at 20% flipped reports
    LiSA's accuracy is above the base guardrail and the memory baselines on every default suite,
    over 20 seeded deployments: the one-sided 95% paired lower bound on the difference is above
    zero (measured: smallest bound +0.5 points, ConFaide+ vs exemplar)."""
    accs = list(_hashing_accuracies())
    for suite in SUITES:
        lb = _paired_lower_bound(accs, suite, other)
        assert lb > 0, (suite, other, lb, [a[suite] for a in accs])


def test_above_insight_on_lisas_own_keys_where_the_base_is_informative():
    """Insight's up/down-vote gating on exactly LiSA's abstraction keys isolates LiSA's gate,
    clustering and local rules. LiSA is above it on ConFaide+ and AgentHarm-style (paired lower
    bound > 0 over 20 seeds). Not on PrivacyLens+, where the base is near chance yet confident:
    there trusting a single report always pays and the gate cannot (hashing base, 40 seeds:
    -1.8 +- 0.3 points; MiniLM -0.4 +- 0.3; docs/methods/lisa.md, Limits)."""
    accs = list(_hashing_accuracies())
    for suite in ("confaide_plus", "agentharm_style"):
        lb = _paired_lower_bound(accs, suite, "insight_lisa_keys")
        assert lb > 0, (suite, lb)


@pytest.mark.acceptance
def test_above_base_and_ungated_baselines_at_20_percent_flipped_reports_minilm():
    """The claim issue 5 was resolved on, with the experiment's MiniLM base: at 20% flipped
    reports LiSA is above the base and the ungated baselines on every default suite, one-sided
    95% paired lower bound > 0 over 20 seeded deployments. Cost: 13,148 texts to embed once
    on a cold $TRUSTLAB_HOME (measured 469 CPU-s under load 4-15 when MiniLM batched texts in
    lexicographic order; 268 CPU-s, 1 thread, load 11-12, since it batches them by token
    length), then 18.6 CPU-s warm. Measured smallest bound: +0.46 points, ConFaide+ vs exemplar."""
    from trustlab.methods.lisa import MiniLMEmbedder, default_cache_path

    emb = MiniLMEmbedder(default_cache_path())
    accs = [_accuracy_at_20_percent_flips(emb, seed) for seed in _SEEDS]
    for suite in SUITES:
        for other in ("base", "exemplar", "insight"):
            assert _paired_lower_bound(accs, suite, other) > 0, (suite, other)
