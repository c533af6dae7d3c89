"""IPB: exact special cases, brute force, tightness, the IPM as the largest gap, dominance."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

from trustlab.core.errors import InputError, NotFittedError
from trustlab.methods.ipb import (
    KernelBoundary,
    LipschitzBoundary,
    TestBoundary,
    binary_divergence,
    ellipse_boundary,
    fdiv_boundary,
    fdiv_lower_boundary,
    gaussian_divergence,
    gaussian_embedding_gram,
    gaussian_hockey_stick,
    gaussian_roc,
    hockey_stick_envelope,
    lipschitz_edges,
    lipschitz_lp,
    roc_hull,
    roc_points,
)

T = np.r_[0.0, np.geomspace(1e-4, 0.5, 30), np.linspace(0.5, 1.0, 20)]


# -- analytic special cases ----------------------------------------------------------------
@pytest.mark.parametrize("mu", [0.5, 1.0, 2.5])
def test_hockey_stick_lines_rebuild_the_gaussian_roc(mu):
    gammas = np.geomspace(1e-4, 1e4, 4001)
    t = T[1:]  # t = 0 needs gamma -> infinity
    env = hockey_stick_envelope(t, gammas, gaussian_hockey_stick(gammas, mu))
    assert np.max(np.abs(env - gaussian_roc(t, mu))) < 1e-4
    # every single line lies above the curve (they are supporting lines)
    assert np.all(gaussian_roc(T, mu)[:, None] <= np.multiply.outer(T, gammas) + gaussian_hockey_stick(gammas, mu) + 1e-12)


@pytest.mark.parametrize("divergence", ["kl", "reverse_kl", "hellinger", "chi2", "tv"])
def test_fdiv_inversion_is_an_outer_bound_of_the_np_curve(divergence):
    mu = 1.0
    value = gaussian_divergence(mu, divergence)
    up = fdiv_boundary(T, value, divergence)
    lo = fdiv_lower_boundary(T, value, divergence)
    assert np.all(gaussian_roc(T, mu) <= up + 1e-9)
    assert np.all(gaussian_roc(T, -mu) >= lo - 1e-9)
    inner = (T > 0) & (T < 1) & (up < 1)
    assert np.allclose(binary_divergence(up[inner], T[inner], divergence), value, rtol=1e-6)


def test_tv_inversion_is_the_ipm_line_and_touches_the_np_curve():
    mu = 1.0
    tv = gaussian_divergence(mu, "tv")
    assert np.allclose(fdiv_boundary(T, tv, "tv"), np.minimum(T + tv, 1.0))
    # the IPM equals the largest vertical gap of the exact boundary from the diagonal
    grid = np.linspace(0, 1, 200001)
    assert np.max(gaussian_roc(grid, mu) - grid) == pytest.approx(tv, abs=1e-8)


def test_boundary_dominates_ipm_bound_and_is_far_tighter_at_the_rare_end():
    mu = 1.0
    tv = gaussian_divergence(mu, "tv")
    assert np.all(gaussian_roc(T, mu) <= T + tv + 1e-12)
    assert gaussian_roc(0.001, mu) < 0.1 * (0.001 + tv)
    assert fdiv_boundary(0.001, gaussian_divergence(mu, "kl")) < 0.001 + tv


# -- the test class: ROC hull ------------------------------------------------------------------
def _brute_hull(x, y, t):
    """Upper boundary of conv(points) by LP over mixture weights (independent of the chain)."""
    out = []
    for ti in t:
        res = optimize.linprog(-y, A_ub=x[None, :], b_ub=[ti], A_eq=np.ones((1, x.size)), b_eq=[1],
                               bounds=(0, None), method="highs")
        out.append(-res.fun)
    return np.array(out)


def test_roc_hull_equals_brute_force_over_monotone_tests():
    rng = np.random.default_rng(0)
    s_p = rng.integers(0, 6, 9).astype(float)  # ties on purpose
    s_q = rng.integers(2, 8, 7).astype(float)
    cuts = np.unique(np.r_[s_p, s_q, 100.0])
    # every threshold test 1{s >= c} and 1{s < c}
    fpr = np.array([(s_p >= c).mean() for c in cuts])
    tpr = np.array([(s_q >= c).mean() for c in cuts])
    x = np.r_[fpr, 1 - fpr, 0.0, 1.0]
    y = np.r_[tpr, 1 - tpr, 0.0, 1.0]
    kt, kv = roc_hull(s_p, s_q)
    t = np.linspace(0, 1, 41)
    assert np.allclose(np.interp(t, kt, kv), _brute_hull(x, y, t), atol=1e-9)


def test_roc_points_are_the_threshold_tests():
    fpr, tpr = roc_points([0.0, 1.0, 2.0, 3.0], [2.0, 3.0])
    assert fpr.tolist() == [0.0, 1.0, 0.75, 0.5, 0.25, 1.0]
    assert tpr.tolist() == [0.0, 1.0, 1.0, 1.0, 0.5, 1.0]


@pytest.fixture(scope="module")
def oracle_gauss():
    rng = np.random.default_rng(1)
    mu = 1.0
    return mu, rng.normal(size=40000), rng.normal(mu, size=40000)


def test_empirical_boundary_converges_to_the_gaussian_roc(oracle_gauss):
    mu, xp, xq = oracle_gauss
    tb = TestBoundary(score=lambda x: x[:, 0], random_state=0).fit(xp, xq)
    grid = np.linspace(0, 1, 1001)
    assert np.max(np.abs(tb.boundary(grid) - gaussian_roc(grid, mu))) < 0.015
    assert np.max(np.abs(tb.lower_boundary(grid) - gaussian_roc(grid, -mu))) < 0.015
    # the band contains the truth and still shrinks towards it at the rare end
    assert np.all(tb.upper(grid) >= gaussian_roc(grid, mu) - 1e-12)
    assert np.all(tb.lower(grid) <= gaussian_roc(grid, -mu) + 1e-12)
    assert tb.upper(0.001) < 0.06 and tb.upper(0.001) < 0.001 + tb.ipm(band=True)


def test_rate_of_convergence_is_root_n():
    mu, grid = 1.0, np.linspace(0, 1, 501)
    errs = {}
    for n in (1000, 16000):
        e = []
        for seed in range(6):
            rng = np.random.default_rng(100 + seed)
            tb = TestBoundary(score=lambda x: x[:, 0]).fit(rng.normal(size=n), rng.normal(mu, size=n))
            e.append(np.max(np.abs(tb.boundary(grid) - gaussian_roc(grid, mu))))
        errs[n] = np.mean(e)
    assert 2.0 < errs[1000] / errs[16000] < 8.0  # sqrt(16) = 4


def test_learned_classifier_recovers_the_boundary_in_2d():
    rng = np.random.default_rng(2)
    mu = 1.5
    x_p = rng.normal(size=(20000, 2))
    x_q = rng.normal(size=(20000, 2)) + np.array([mu * 0.6, mu * 0.8])
    tb = TestBoundary(random_state=0).fit(x_p, x_q)
    grid = np.linspace(0, 1, 501)
    assert np.max(np.abs(tb.boundary(grid) - gaussian_roc(grid, mu))) < 0.02
    assert tb.ipm() == pytest.approx(gaussian_divergence(mu, "tv"), abs=0.02)


def test_test_ipm_is_the_ks_statistic_of_the_scores():
    rng = np.random.default_rng(3)
    s_p, s_q = rng.normal(size=300), rng.normal(0.7, size=200)
    tb = TestBoundary().fit_scores(s_p, s_q)
    ks = stats.ks_2samp(s_p, s_q).statistic
    assert tb.ipm() == pytest.approx(ks, abs=1e-9)


def test_propagate_source_range_and_errors():
    rng = np.random.default_rng(4)
    tb = TestBoundary(score=lambda x: x[:, 0]).fit(rng.normal(size=2000), rng.normal(1, size=2000))
    res = tb.propagate(3, 1000, alpha=0.05)
    assert res.source_lower < 0.003 < res.source_upper
    assert res.lower <= res.upper and res.miscoverage == pytest.approx(0.1)
    assert res.upper == pytest.approx(tb.upper(res.source_upper))
    t_min, t_max = tb.source_range(0.3)
    assert tb.upper(t_min) >= 0.3 - 1e-9 and tb.upper(t_min - 1e-3) < 0.3
    assert tb.lower(t_max - 1e-6) <= 0.3
    with pytest.raises(NotFittedError, match="fit"):
        TestBoundary().upper(0.1)
    with pytest.raises(InputError, match="delta"):
        TestBoundary(delta=1.5).fit_scores([1, 2, 3], [2, 3, 4])
    with pytest.raises(InputError, match="band"):
        TestBoundary(band="nope").fit_scores([1, 2, 3], [2, 3, 4])


# -- bounded Lipschitz class: LP ------------------------------------------------------------------
def test_lipschitz_lp_equals_brute_force_on_a_tiny_sample():
    x_p = np.array([0.0, 0.3, 0.5])
    x_q = np.array([0.4, 0.9, 1.2])
    z = np.r_[x_p, x_q][:, None]
    lip = 2.0
    levels = np.linspace(0, 1, 11)
    grids = np.stack(np.meshgrid(*[levels] * 6, indexing="ij"), -1).reshape(-1, 6)
    dist = np.abs(z - z.T)
    ok = np.all(np.abs(grids[:, :, None] - grids[:, None, :]) <= lip * dist[None] + 1e-12, axis=(1, 2))
    grids = grids[ok]
    edges_all = (np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1], dist[np.triu_indices(6, 1)])
    for t in (0.0, 0.1, 0.25, 0.5):
        feasible = grids[grids[:, :3].mean(1) <= t + 1e-12]
        brute = feasible[:, 3:].mean(1).max()
        c = np.r_[np.zeros(3), np.full(3, 1 / 3)]
        row = np.r_[np.full(3, 1 / 3), np.zeros(3)]
        lp_chain = lipschitz_lp(c, lipschitz_edges(z), lip, extra_row=row, extra_rhs=t)[0]
        lp_all = lipschitz_lp(c, edges_all, lip, extra_row=row, extra_rhs=t)[0]
        assert lp_chain == pytest.approx(lp_all, abs=1e-9)  # the chain is exact in 1-D
        assert brute - 1e-9 <= lp_chain <= brute + 0.1 + 1e-9  # grid resolution 0.1


@pytest.fixture(scope="module")
def lip_fit():
    rng = np.random.default_rng(5)
    x_p, x_q = rng.normal(size=(60, 2)), rng.normal(size=(60, 2)) + np.array([1.0, 0.0])
    return x_p, x_q, LipschitzBoundary(lipschitz=1.5, n_rademacher=2, random_state=0).fit(x_p, x_q)


def test_lipschitz_witness_attains_the_boundary(lip_fit):
    x_p, x_q, lb = lip_fit
    rng = np.random.default_rng(6)
    for t in lb.grid_t_[[1, 5, 10, -3]]:
        f = lb.witness(t)
        assert f(x_p).mean() <= t + 1e-7
        assert f(x_q).mean() == pytest.approx(lb.boundary(t), abs=1e-6)
        a, b = rng.normal(size=(500, 2)) * 2, rng.normal(size=(500, 2)) * 2
        assert np.all(np.abs(f(a) - f(b)) <= 1.5 * np.linalg.norm(a - b, axis=1) + 1e-9)


def test_every_lipschitz_function_lies_below_the_empirical_boundary(lip_fit):
    x_p, x_q, lb = lip_fit
    rng = np.random.default_rng(7)
    for _ in range(200):  # random clipped ramps and bumps with Lipschitz constant <= 1.5
        u = rng.normal(size=2)
        u /= np.linalg.norm(u)
        lip = rng.uniform(0.1, 1.5)
        c = rng.normal(0, 2)
        f = (lambda x, u=u, lip=lip, c=c: np.clip(lip * (x @ u - c), 0, 1)) if rng.random() < 0.5 else (
            lambda x, u=u, lip=lip, c=c: np.clip(1 - lip * np.linalg.norm(x - c * u, axis=1), 0, 1))
        tp, tq = f(x_p).mean(), f(x_q).mean()
        assert tq <= lb.boundary(tp) + 1e-7
        assert tq >= lb.lower_boundary(tp) - 1e-7


def test_lipschitz_ipm_is_the_largest_gap_and_w1_without_the_bound():
    rng = np.random.default_rng(8)
    x_p, x_q = rng.normal(size=80), rng.normal(0.8, size=80)
    lb = LipschitzBoundary(lipschitz=0.7, n_rademacher=0).fit(x_p, x_q)
    assert lb.ipm() == pytest.approx(lb.ipm_lp(), abs=1e-7)
    assert lb.ipm_lp(bounded=False) == pytest.approx(0.7 * stats.wasserstein_distance(x_p, x_q), rel=1e-6)
    assert lb.ipm_lp() <= lb.ipm_lp(bounded=False) + 1e-9
    grid = np.linspace(0, 1, 101)
    assert np.all(lb.boundary(grid) <= grid + lb.ipm() + 1e-9)


def test_knn_relaxation_only_raises_the_boundary():
    rng = np.random.default_rng(9)
    x_p, x_q = rng.normal(size=(70, 3)), rng.normal(size=(70, 3)) + 0.7
    exact = LipschitzBoundary(n_rademacher=0, n_grid=7).fit(x_p, x_q)
    relaxed = LipschitzBoundary(n_rademacher=0, n_grid=7, neighbors=4).fit(x_p, x_q)
    assert np.all(relaxed.grid_v_ >= exact.grid_v_ - 1e-9)


# -- RKHS ball: closed form ------------------------------------------------------------------
def test_kernel_closed_form_equals_numerical_optimum():
    rng = np.random.default_rng(10)
    x_p, x_q = rng.normal(size=(5, 2)), rng.normal(size=(4, 2)) + 0.8
    kb = KernelBoundary(bandwidth=1.0).fit(x_p, x_q)
    z = np.vstack([x_p, x_q])
    from trustlab.methods.ipb import gaussian_kernel

    k = gaussian_kernel(z, z, 1.0)
    a = k[:, :5].mean(1)  # <k(z_i, .), a_hat>
    b = k[:, 5:].mean(1)
    for t in np.linspace(kb.domain_[0] * 0.9, kb.domain_[1] * 0.9, 7):
        best = -np.inf
        for seed in range(4):
            res = optimize.minimize(
                lambda al: -al @ b, np.random.default_rng(seed).normal(size=9) * 0.1, method="SLSQP",
                constraints=[{"type": "ineq", "fun": lambda al: 1 - al @ k @ al},
                             {"type": "ineq", "fun": lambda al, t=t: t - al @ a}],
                options={"ftol": 1e-12, "maxiter": 500},
            )
            if res.success:
                best = max(best, -res.fun)
        assert kb.boundary(t) == pytest.approx(best, abs=1e-5)
        f, norm = kb.witness(t)
        assert norm <= 1 + 1e-9
        assert f(x_p).mean() <= t + 1e-9
        assert f(x_q).mean() == pytest.approx(kb.boundary(t), abs=1e-9)
    assert kb.ipm() == pytest.approx(kb.mmd(), abs=1e-6)


def test_true_ellipse_contains_every_unit_ball_function():
    """Random f in the RKHS ball, exact Gaussian expectations: (E_P f, E_Q f) inside the ellipse."""
    rng = np.random.default_rng(11)
    h, s, d = 1.0, 1.0, 2
    mp, mq = np.zeros(d), np.array([1.0, 0.5])
    gram = gaussian_embedding_gram(mp, mq, s, h)
    v = h**2 + s**2
    for _ in range(300):
        u = rng.normal(0, 2, size=(4, d))
        c = rng.normal(size=4)
        ku = np.exp(-((u[:, None] - u[None]) ** 2).sum(-1) / (2 * h**2))
        c /= np.sqrt(c @ ku @ c)
        ep = c @ ((h**2 / v) ** (d / 2) * np.exp(-((u - mp) ** 2).sum(1) / (2 * v)))
        eq = c @ ((h**2 / v) ** (d / 2) * np.exp(-((u - mq) ** 2).sum(1) / (2 * v)))
        assert eq <= ellipse_boundary(ep, gram) + 1e-12
        assert eq >= -ellipse_boundary(-ep, gram) - 1e-12


def test_kernel_gram_converges_to_the_exact_embeddings():
    rng = np.random.default_rng(12)
    mq = np.array([1.0, 0.0])
    kb = KernelBoundary(bandwidth=1.0).fit(rng.normal(size=(3000, 2)), rng.normal(size=(3000, 2)) + mq)
    exact = gaussian_embedding_gram(np.zeros(2), mq, 1.0, 1.0)
    assert np.max(np.abs(kb.gram_ - exact)) < 0.01
    t = np.linspace(*kb.domain_, 50)
    assert np.max(np.abs(kb.boundary(t) - ellipse_boundary(t, exact))) < 0.02


# -- bad input: a clear error, never a clipped or reinterpreted value (issue 38) -------------
@pytest.fixture(scope="module")
def fitted_test_boundary():
    rng = np.random.default_rng(8)
    return TestBoundary(score=lambda x: x[:, 0]).fit(rng.normal(size=500), rng.normal(1, size=500))


@pytest.mark.parametrize("t", [-0.1, 1.2, np.nan, [0.2, 1.5]])
@pytest.mark.parametrize("method", ["boundary", "lower_boundary", "upper", "lower", "ipm_interval"])
def test_rates_outside_the_unit_interval_are_errors(fitted_test_boundary, method, t):
    with pytest.raises(InputError, match=r"'t' parameter of TestBoundary\.\w+ must"):
        getattr(fitted_test_boundary, method)(t)


def test_rates_at_the_ends_are_fine_and_analytic_functions_check_too(fitted_test_boundary):
    assert fitted_test_boundary.upper(1.0) == 1.0 and fitted_test_boundary.lower(0.0) == 0.0
    assert fitted_test_boundary.upper(1.0 + 1e-12) == 1.0  # rounding slack only
    with pytest.raises(InputError, match=r"'q' parameter .* \[0, 1\]"):
        fitted_test_boundary.source_range(1.3)
    for fn, args in (
        (gaussian_roc, (1.5, 1.0)),
        (binary_divergence, (0.5, -0.2)),
        (fdiv_boundary, (2.0, 0.1)),
        (fdiv_lower_boundary, (np.nan, 0.1)),
        (hockey_stick_envelope, (1.1, [1.0], [0.0])),
    ):
        with pytest.raises(InputError, match=r"\[0, 1\]|finite"):
            fn(*args)
    with pytest.raises(InputError, match="'value'"):
        fdiv_boundary(0.1, np.nan)
    assert fdiv_boundary(0.1, np.inf) == 1.0  # an infinite divergence bounds nothing


def test_a_two_column_score_is_an_error_not_its_first_column():
    rng = np.random.default_rng(9)
    x_p, x_q = rng.normal(size=(200, 2)), rng.normal(size=(200, 2)) + 1.0
    with pytest.raises(InputError, match=r"one value per point .* Got shape \(200, 2\)"):
        TestBoundary(score=lambda x: x).fit(x_p, x_q)
    with pytest.raises(InputError, match=r"one value per point"):
        TestBoundary().fit_scores(x_p, x_q)
    with pytest.raises(InputError, match=r"shape \(200,\)"):
        TestBoundary(score=lambda x: x[:100, 0]).fit(x_p, x_q)
    # (n, 1) is one score per point
    one = TestBoundary(score=lambda x: x[:, :1], random_state=0).fit(x_p, x_q)
    flat = TestBoundary(score=lambda x: x[:, 0], random_state=0).fit(x_p, x_q)
    np.testing.assert_allclose(one.upper(T), flat.upper(T))


def test_gap_bounds_contain_the_true_gap_and_ipb_is_tightest_at_the_rare_end():
    """compare_gap_bounds (moved out of the experiment): coverage of the true fairness gap
    over draws, and the ordering the application reports (IPB narrower than IPM and than the
    group's own binomial when the group is rare)."""
    from trustlab.methods.ipb import compare_gap_bounds, rare_group

    scen = rare_group(d=2, share=0.01, shift=1.0)
    u = np.array([1.0, 0.0])
    rate = 0.005
    c = scen.threshold_for_rate(u, rate)
    gap = scen.halfspace_rate(u, c, "q") - rate
    rng = np.random.default_rng(10)
    n_pop, n_g = 2000, 20  # the group's share of the judged samples
    hits, widths = 0, {"ipb": [], "ipm": [], "binomial": []}
    reps = 40
    for seed in range(reps):
        tb = TestBoundary(delta=0.05, random_state=seed).fit(
            scen.sample_p(8000, rng), scen.sample_q(8000, rng)
        )
        k_pop = int(rng.binomial(n_pop, rate))
        k_g = int(rng.binomial(n_g, gap + rate))
        out = compare_gap_bounds(tb, k_pop, n_pop, k_g, n_g, alpha=0.05)
        lo, hi = out["ipb"]
        hits += lo <= gap <= hi
        for k, (a, b) in out.items():
            assert a <= b
            widths[k].append(b - a)
    # nominal miscoverage 0.1: more than 10 misses in 40 would have probability < 0.003
    assert hits >= reps - 10
    assert np.mean(widths["ipb"]) < 0.5 * np.mean(widths["ipm"])
    assert np.mean(widths["ipb"]) < np.mean(widths["binomial"])
    kb = KernelBoundary(bandwidth=1.0).fit(rng.normal(size=(50, 2)), rng.normal(size=(50, 2)))
    with pytest.raises(InputError, match="rates"):
        compare_gap_bounds(kb, 1, 10, 1, 10)
    with pytest.raises(NotFittedError):
        compare_gap_bounds(TestBoundary(), 1, 10, 1, 10)


def test_seed_reaches_the_digits_generator_and_the_band_tie_breaks(monkeypatch, tmp_path):
    """--seed reaches every random choice of the experiment (it used to fix seed 0 there)."""
    import importlib

    from trustlab.core import run_experiment

    exp = importlib.import_module("trustlab.methods.ipb.experiment")
    seen: dict[str, list[int]] = {"digits": [], "test": []}
    real_gen, real_tb = exp.DigitsGenerator, exp.TestBoundary

    def gen(*args, seed=0, **kwargs):
        seen["digits"].append(seed)
        return real_gen(*args, seed=seed, **kwargs)

    def tb(*args, random_state=None, **kwargs):
        seen["test"].append(random_state)
        return real_tb(*args, random_state=random_state, **kwargs)

    monkeypatch.setattr(exp, "DigitsGenerator", gen)
    monkeypatch.setattr(exp, "TestBoundary", tb)
    small = ["repetitions=1", "rates=[0.01]", "shares=[0.5]", "n_unlabelled=400",
             "n_lipschitz=40", "n_kernel=40"]
    run_experiment("ipb", seed=123, out_dir=tmp_path / "a", quiet=True, overrides=small)
    assert seen["digits"] == [123]
    assert seen["test"][:2] == [123, 123]  # the two bands of the boundary figure
