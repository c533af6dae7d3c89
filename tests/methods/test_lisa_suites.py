"""LiSA on the default suites: one report generalises, and at 20% flipped reports LiSA stays
above the base guardrail and the ungated baselines. The base here embeds with feature hashing
(instant); the experiment uses MiniLM."""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.datasets.confaide import load_confaide_tier2
from trustlab.datasets.privacylens import load_privacylens_seeds
from trustlab.methods.lisa import (
    SUITES,
    BaseOnly,
    EmbeddingGuardrail,
    ExemplarMemory,
    HashingEmbedder,
    InsightMemory,
    Lisa,
    MemoBase,
    build_suite,
    classification_metrics,
    generic_seed_set,
    run_stream,
)


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
    lisa = Lisa(base, embedder=emb)
    lisa.report(suite.cases[i], int(suite.labels[i]))
    entry = lisa.memory_.match(suite.cases[i])
    covered = [j for j in range(len(suite.cases))
               if suite.cases[j] != suite.cases[i] and lisa.memory_.match(suite.cases[j]) is entry]
    assert covered, "the abstraction covers no unseen case"
    pred = np.array([lisa.check(c).label for c in suite.cases])
    changed = set(np.flatnonzero(pred != base_pred).tolist())
    assert changed <= set(covered) | {j for j, c in enumerate(suite.cases) if c == suite.cases[i]}
    # the unseen cases it flips are exactly the covered ones the base is unsure enough about
    lb = float(np.sqrt(0.2))
    expect = {j for j in covered if base_pred[j] != suite.labels[i] and 2 * conf[j] / 3 < lb}
    assert changed - {i} == expect - {i}
    assert all(pred[j] == suite.labels[j] for j in expect if suite.local_mask[j])


def _robustness(emb, base_model) -> dict[str, float]:
    acc: dict[str, list[float]] = {}
    flipped = 0
    for name in SUITES:
        suite = build_suite(name)
        base = MemoBase(base_model)
        order = np.random.default_rng(1).integers(0, len(suite.cases), 1500)
        for g in (BaseOnly(base), Lisa(base, embedder=emb), ExemplarMemory(base, emb),
                  InsightMemory(base), Lisa(base, embedder=emb, gating=False, name="lisa_nogate")):
            res = run_stream(g, suite.cases, suite.labels, order, report_rate=0.1,
                             flip_rate=0.2, seed=7)
            flipped += res.n_flipped
            acc.setdefault(g.name, []).append(
                classification_metrics(res.predictions, res.labels)["accuracy"])
    assert flipped > 0
    assert all(a >= b - 1e-9 for a, b in zip(acc["lisa"], acc["base"], strict=True)), acc
    return {k: float(np.mean(v)) for k, v in acc.items()}


def test_robust_at_20_percent_flipped_reports(setup):
    mean = _robustness(*setup)
    assert mean["lisa"] > mean["base"], mean
    assert mean["lisa"] > mean["insight"], mean


@pytest.mark.slow
def test_robust_at_20_percent_flipped_reports_minilm():
    from trustlab.methods.lisa import MiniLMEmbedder, default_cache_path

    emb = MiniLMEmbedder(default_cache_path())
    cases, labels = generic_seed_set(400, np.random.default_rng(0))
    mean = _robustness(emb, EmbeddingGuardrail(emb).fit(cases, labels))
    for other in ("base", "insight", "exemplar"):
        assert mean["lisa"] > mean[other], mean
