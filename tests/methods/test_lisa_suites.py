"""LiSA on the default suites: one report generalises, and at 20% flipped reports LiSA stays
above the base guardrail and the ungated baselines (exemplar, insight). Against insight run on
LiSA's own abstraction keys it does not yet win on PrivacyLens+ (an xfail records the gap).
The base here embeds with feature hashing (instant); the experiment uses MiniLM."""

from __future__ import annotations

import functools

import numpy as np
import pytest

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


def _child_rng(seed: int, name: str) -> np.random.Generator:
    """The generator ``RunContext(seed).child_rng(name)`` gives the experiment."""
    return np.random.default_rng(np.random.SeedSequence([seed, *[ord(c) for c in name]]))


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
        for g in _methods(config, base, emb):
            res = run_stream(g, suite.cases, suite.labels, order,
                             report_rate=config.report_rate, flip_rate=0.2, seed=fb_seed)
            flipped += res.n_flipped
            acc.setdefault(name, {})[g.name] = classification_metrics(
                res.predictions, res.labels)["accuracy"]
    assert flipped > 0
    return acc


def _assert_criterion(acc: dict[str, dict[str, float]], seed: int,
                      others: tuple[str, ...] = ("base", "exemplar", "insight")) -> None:
    for name, a in acc.items():
        for other in others:
            assert a["lisa"] > a[other], (seed, name, a)


@functools.cache
def _hashing_accuracy(seed: int) -> dict[str, dict[str, float]]:
    return _accuracy_at_20_percent_flips(HashingEmbedder(384), seed)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_robust_at_20_percent_flipped_reports(seed):
    """The Done-when criterion with a feature-hashing base (instant, no model): at 20%
    flipped reports LiSA is above the base guardrail and the ungated baselines (exemplar,
    insight) on every default suite, for each of three seeds."""
    _assert_criterion(_hashing_accuracy(seed), seed)


@pytest.mark.xfail(strict=False, reason=(
    "open gap (issue 5): on PrivacyLens+ insight with LiSA's abstraction keys matches or beats "
    "LiSA at 20% flips (MiniLM, 10 seeds: 0.657 vs 0.654); see docs/methods/lisa.md"))
def test_above_insight_on_lisas_own_keys_in_the_mean_over_seeds():
    """The stricter comparison: insight's up/down-vote gating on exactly LiSA's abstraction keys,
    so the difference is the evidence gate alone; mean over seeds 0-2 on every suite."""
    accs = [_hashing_accuracy(seed) for seed in (0, 1, 2)]
    for name in accs[0]:
        lisa = np.mean([a[name]["lisa"] for a in accs])
        insight = np.mean([a[name]["insight_lisa_keys"] for a in accs])
        assert lisa > insight, (name, lisa, insight)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_robust_at_20_percent_flipped_reports_minilm(seed):
    """The same criterion with the experiment's MiniLM base (slow only on a cold embedding
    cache: ~9,000 texts to embed once; a few seconds per seed when warm)."""
    from trustlab.methods.lisa import MiniLMEmbedder, default_cache_path

    _assert_criterion(_accuracy_at_20_percent_flips(MiniLMEmbedder(default_cache_path()), seed),
                      seed)
