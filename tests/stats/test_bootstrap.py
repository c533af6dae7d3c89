"""Percentile bootstrap: nominal coverage, agreement with scipy, determinism, bad input."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from scipy import stats

from trustlab.core.errors import InputError
from trustlab.stats import BootstrapResult, bootstrap_ci


def _scipy_percentile(data: tuple, statistic, n_resamples: int, seed: int, **kwargs):
    seed_kw = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"
    return stats.bootstrap(
        data,
        statistic,
        n_resamples=n_resamples,
        method="percentile",
        **{seed_kw: np.random.default_rng(seed)},
        **kwargs,
    )


def test_mean_ci_covers_true_mean_at_nominal_rate() -> None:
    reps, n, mu = 200, 60, 3.0
    rng = np.random.default_rng(123)
    hits = 0
    for _ in range(reps):
        x = rng.normal(mu, 2.0, size=n)
        res = bootstrap_ci(x, np.mean, n_resamples=1000, rng=rng, vectorized=True)
        hits += res.low <= mu <= res.high
    coverage = hits / reps
    # Percentile intervals undercover slightly at n = 60; 4 SDs of a binomial around 0.95.
    tol = 4 * np.sqrt(0.95 * 0.05 / reps)
    assert 0.95 - tol - 0.01 <= coverage <= 0.95 + tol


def test_matches_scipy_percentile_bootstrap() -> None:
    rng = np.random.default_rng(0)
    x = rng.gamma(2.0, size=80)
    ours = bootstrap_ci(x, np.mean, n_resamples=20_000, rng=1, vectorized=True)
    ref = _scipy_percentile((x,), np.mean, 20_000, seed=2)
    se = ref.standard_error
    assert ours.estimate == pytest.approx(x.mean())
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.1 * se)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.1 * se)
    assert ours.standard_error == pytest.approx(se, rel=0.05)


def test_paired_and_independent_two_sample_match_scipy() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=50)
    y = 0.8 * x + 0.3 * rng.normal(size=50)

    def diff_means(a, b, axis=-1):
        return np.mean(a, axis=axis) - np.mean(b, axis=axis)

    for paired in (True, False):
        ours = bootstrap_ci(
            (x, y), diff_means, n_resamples=20_000, rng=3, paired=paired, vectorized=True
        )
        ref = _scipy_percentile((x, y), diff_means, 20_000, seed=4, paired=paired)
        se = ref.standard_error
        assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.1 * se)
        assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.1 * se)
        assert ours.standard_error == pytest.approx(se, rel=0.05)
    # Pairing removes the shared noise: the paired interval is much narrower.
    paired = bootstrap_ci((x, y), diff_means, rng=5, paired=True, vectorized=True)
    indep = bootstrap_ci((x, y), diff_means, rng=5, paired=False, vectorized=True)
    assert paired.high - paired.low < 0.5 * (indep.high - indep.low)


def test_same_seed_same_interval_and_loop_equals_vectorized() -> None:
    x = np.random.default_rng(2).exponential(size=40)
    a = bootstrap_ci(x, np.median, n_resamples=500, rng=7)
    b = bootstrap_ci(x, np.median, n_resamples=500, rng=7)
    assert a == b and isinstance(a, BootstrapResult)
    c = bootstrap_ci(x, np.median, n_resamples=500, rng=7, vectorized=True)
    assert c == a  # same draws, statistic applied per row or along axis=-1
    d = bootstrap_ci(x, np.median, n_resamples=500, rng=np.random.default_rng(7))
    assert d == a
    assert bootstrap_ci(x, np.median, n_resamples=500, rng=8) != a


def test_paired_rows_non_vectorized_statistic() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=100)
    y = 2 * x + 0.5 * rng.normal(size=100)
    res = bootstrap_ci(
        (x, y), lambda a, b: np.corrcoef(a, b)[0, 1], n_resamples=300, rng=0, paired=True
    )
    assert 0.9 < res.low <= res.estimate <= res.high < 1.0
    # 2-D data: rows are resampled together (loop mode).
    xy = np.column_stack([x, y])
    res2 = bootstrap_ci(xy, lambda m: np.corrcoef(m[:, 0], m[:, 1])[0, 1], n_resamples=300, rng=0)
    assert res2 == res


def test_batching_does_not_change_results(monkeypatch: pytest.MonkeyPatch) -> None:
    import trustlab.stats.bootstrap as module

    x = np.random.default_rng(4).normal(size=30)
    whole = bootstrap_ci(x, np.mean, n_resamples=400, rng=9, vectorized=True)
    monkeypatch.setattr(module, "_BATCH_ELEMENTS", 30 * 7)  # batches of 7 resamples
    batched = bootstrap_ci(x, np.mean, n_resamples=400, rng=9, vectorized=True)
    assert batched.estimate == whole.estimate
    # Different batch shapes may consume the random stream differently; the law is the same.
    assert batched.standard_error == pytest.approx(whole.standard_error, rel=0.2)
    assert batched.low == pytest.approx(whole.low, abs=0.5 * whole.standard_error)
    assert batched.high == pytest.approx(whole.high, abs=0.5 * whole.standard_error)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_resamples": 1}, r"'n_resamples' parameter of bootstrap_ci must be in \[2, inf\]"),
        (
            {"confidence_level": 1.5},
            r"'confidence_level' parameter of bootstrap_ci must be in \(0, 1\)",
        ),
        ({"rng": "seed"}, "'rng' parameter"),
        ({"rng": -1}, "'rng' parameter"),
    ],
)
def test_bad_options_raise(kwargs: dict, match: str) -> None:
    with pytest.raises(InputError, match=match):
        bootstrap_ci(np.arange(10.0), np.mean, **kwargs)


def test_bad_data_or_statistic_raise() -> None:
    with pytest.raises(InputError, match="non-empty"):
        bootstrap_ci(np.array([]), np.mean)
    with pytest.raises(InputError, match="equal length"):
        bootstrap_ci((np.arange(5.0), np.arange(6.0)), lambda a, b: 0.0, paired=True)
    with pytest.raises(InputError, match="must be callable"):
        bootstrap_ci(np.arange(5.0), "mean")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="must return a scalar"):
        bootstrap_ci(np.arange(5.0), lambda a: a)
    with pytest.raises(InputError, match="reduce axis=-1"):
        bootstrap_ci(np.arange(5.0), lambda a, axis: np.mean(a), vectorized=True, n_resamples=10)
    with pytest.raises(InputError, match="1-D samples"):
        bootstrap_ci(np.ones((5, 2)), np.mean, vectorized=True)
