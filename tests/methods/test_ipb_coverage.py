"""IPB guarantees over repeated sampling: the bands contain the true boundary, the pushed
intervals contain the true target rate, at >= 1 - delta (- alpha).

Each coverage test runs 300 independent samplings and fails when the failure count is
implausible under the nominal level (one-sided binomial, false-alarm probability 0.001 at
exactly the nominal level). That has power 0.97 against a band whose true failure rate is
twice its nominal level (a 3-SD allowance on 10 repetitions, as before, accepted 3 failures
in 10 at a nominal 10%). The Lipschitz band is the exception, a smoke test: see its docstring."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from trustlab.methods.ipb import (
    KernelBoundary,
    LipschitzBoundary,
    TestBoundary,
    compare_bounds,
    ellipse_boundary,
    gaussian_embedding_gram,
    gaussian_roc,
    gaussian_shift,
    rare_group,
    tilted_policy,
)

GRID = np.r_[np.geomspace(1e-4, 0.5, 25), np.linspace(0.5, 1.0, 11)]


REPS = 300


def _allowed(reps: int, level: float) -> float:
    """Most failures a band of failure rate ``level`` shows in ``reps`` draws, bar a 0.001 chance."""
    return float(stats.binom.isf(1e-3, reps, level))


def test_the_criterion_has_power():
    """The criterion above rejects a band that fails twice as often as promised (>= 0.95)."""
    assert stats.binom.sf(_allowed(REPS, 0.1), REPS, 0.2) > 0.95
    assert stats.binom.sf(_allowed(REPS, 0.1), REPS, 0.1) <= 1e-3


@pytest.mark.parametrize("band", ["cp", "dkw"])
def test_test_band_contains_the_true_boundary(band):
    mu, delta, reps = 1.0, 0.1, REPS
    fails = 0
    for seed in range(reps):
        rng = np.random.default_rng(seed)
        tb = TestBoundary(score=lambda x: x[:, 0], band=band, delta=delta, random_state=seed)
        tb.fit(rng.normal(size=400), rng.normal(mu, size=300))
        ok = np.all(tb.upper(GRID) >= gaussian_roc(GRID, mu) - 1e-12) and np.all(
            tb.lower(GRID) <= gaussian_roc(GRID, -mu) + 1e-12
        )
        fails += not ok
    assert fails <= _allowed(reps, delta)


def test_pushed_interval_covers_the_target_rate():
    mu, alpha, delta, reps = 1.0, 0.05, 0.05, REPS
    rates = [0.3, 0.02, 0.002]
    misses = np.zeros(len(rates))
    for seed in range(reps):
        rng = np.random.default_rng(1000 + seed)
        tb = TestBoundary(score=lambda x: x[:, 0], delta=delta, random_state=seed)
        tb.fit(rng.normal(size=1000), rng.normal(mu, size=1000))
        for i, r in enumerate(rates):
            c = stats.norm.isf(r)  # f = 1{x > c} has E_P f = r
            q = stats.norm.sf(c - mu)
            k = rng.binomial(2000, r)
            res = tb.propagate(k, 2000, alpha)
            misses[i] += not (res.lower <= q <= res.upper)
    assert np.all(misses <= _allowed(reps, alpha + delta))


def test_kernel_band_contains_the_true_ellipse():
    delta, reps = 0.1, REPS
    mq = np.array([0.8, 0.0])
    exact = gaussian_embedding_gram(np.zeros(2), mq, 1.0, 1.0)
    fails = 0
    for seed in range(reps):
        rng = np.random.default_rng(seed)
        kb = KernelBoundary(bandwidth=1.0, delta=delta).fit(
            rng.normal(size=(300, 2)), rng.normal(size=(300, 2)) + mq
        )
        t = np.linspace(-np.sqrt(exact[0, 0]), np.sqrt(exact[0, 0]), 41)
        ok = np.all(kb.upper(t) >= ellipse_boundary(t, exact) - 1e-12) and np.all(
            kb.lower(t) <= -ellipse_boundary(-t, exact) + 1e-12
        )
        fails += not ok
    assert fails <= _allowed(reps, delta)


def test_lipschitz_band_smoke():
    """A smoke test, not a coverage test: it has no power against a miscalibrated band.

    Even at n = 2,000 per sample the Rademacher correction is about 0.26 on [0, 1]-valued
    functions (0.47 at n = 400, where the band was [0, 1] at every ramp below), so a failure
    would come from a bug (a sign, an index, a wrong grid), not from a band that is slightly
    too narrow. The guarantee itself rests on Bartlett and Mendelson's theorem and on the LP
    being exact (test_lipschitz_lp_equals_brute_force_* in test_ipb.py); each fit costs about
    2 s of LPs here, so a powered repetition count (300) would take ten minutes. Clipped ramps
    ``clip(L (x - c))`` have exact Gaussian expectations; every one must lie in the band on
    every draw, and the band must say something (not [0, 1]) for some of them.
    """
    from scipy import integrate

    lip, mu, delta, reps, n = 1.0, 1.0, 0.1, 2, 2000
    cs = np.linspace(-3, 3, 13)

    def mean_ramp(c, m):
        return integrate.quad(lambda x: np.clip(lip * (x - c), 0, 1) * stats.norm.pdf(x, m), -12, 12)[0]

    truths = [(mean_ramp(c, 0.0), mean_ramp(c, mu)) for c in cs]
    informative = 0
    for seed in range(reps):
        rng = np.random.default_rng(seed)
        lb = LipschitzBoundary(lipschitz=lip, delta=delta, n_grid=5, n_rademacher=2, random_state=seed)
        lb.fit(rng.normal(size=n), rng.normal(mu, size=n))
        assert lb.eps_p_ < 0.3
        for tp, tq in truths:
            lo, hi = lb.lower(tp), lb.upper(tp)
            assert lo <= tq <= hi, (seed, tp, tq, lo, hi)
            informative += (lo > 0.0) or (hi < 1.0)
    assert informative >= reps * 2


def test_ipb_beats_ipm_at_the_rare_end_and_both_cover():
    scen = gaussian_shift(d=2, mu=1.0)
    rng = np.random.default_rng(0)
    tb = TestBoundary(random_state=0).fit(scen.sample_p(20000, rng), scen.sample_q(20000, rng))
    u = np.array([1.0, 0.0])
    c = scen.threshold_for_rate(u, 0.001)
    q = scen.halfspace_rate(u, c, "q")
    out = compare_bounds(tb, k_source=2, n_source=2000, k_target=0, n_target=100)
    assert out["ipb"][0] <= q <= out["ipb"][1]
    assert out["ipm"][0] <= q <= out["ipm"][1]
    assert out["ipb"][1] < 0.5 * out["ipm"][1]


def test_scenarios_have_the_stated_truths():
    rng = np.random.default_rng(1)
    for scen in (gaussian_shift(2, 1.0), tilted_policy(), rare_group(share=0.1)):
        u = np.array([1.0, 0.0])
        c = scen.threshold_for_rate(u, 0.05)
        xp, xq = scen.sample_p(200000, rng), scen.sample_q(200000, rng)
        assert (xp @ u > c).mean() == pytest.approx(0.05, abs=0.003)
        assert (xq @ u > c).mean() == pytest.approx(scen.halfspace_rate(u, c, "q"), abs=0.004)
        # the exact log ratio integrates correctly: E_P exp(log r) = 1
        assert np.mean(np.exp(scen.log_ratio(xp[:50000]))) == pytest.approx(1.0, abs=0.05)
    tilt = tilted_policy()
    assert tilt.kl_qp(rng) == pytest.approx(np.mean(tilt.log_ratio(tilt.sample_q(100000, rng))), abs=0.01)
