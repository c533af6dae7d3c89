"""`trustlab run ipb`: boundaries vs IPM bounds on pairs with known truth, and three applications.

Wiring only: the scenarios and estimators live in the library modules.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field

from trustlab.core import ExperimentConfig, Report, RunContext, register
from trustlab.core.figures import Series, metric_vs_parameter, new_figure
from trustlab.methods.ipb import (
    DigitsGenerator,
    KernelBoundary,
    LipschitzBoundary,
    MixtureShift,
    TestBoundary,
    compare_bounds,
    compare_gap_bounds,
    ellipse_boundary,
    fdiv_boundary,
    gaussian_divergence,
    gaussian_embedding_gram,
    gaussian_roc,
    gaussian_shift,
    rare_group,
    tilted_policy,
)
from trustlab.stats import clopper_pearson

RARE = 0.01  # "the rare end": source rates at or below this


def _seed(ctx: RunContext) -> int:
    """The run's --seed as a scikit-learn/numpy seed (the digits generator, band tie-breaks)."""
    return int(ctx.seed) % (2**31 - 16)


class IPBConfig(ExperimentConfig):
    shift: float = Field(1.0, gt=0, description="Mean shift |mu| of the Gaussian pair N(0,I) vs N(mu,I).")
    n_unlabelled: int = Field(
        20000, ge=200, description="Unlabelled samples per distribution for each test boundary."
    )
    n_source_judged: int = Field(
        2000, ge=10, description="Judged (labelled) source samples: the source rate's binomial."
    )
    n_target_judged: int = Field(
        100, ge=1, description="Judged target samples of the binomial-only baseline (an audit)."
    )
    rates: list[float] = Field(
        [0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001],
        min_length=1, description="Source rates E_P f at which the applications are evaluated.",
    )
    shares: list[float] = Field(
        [0.5, 0.2, 0.1, 0.05, 0.02, 0.01], min_length=1,
        description="Group shares of the population in the fairness application.",
    )
    repetitions: int = Field(20, ge=1, description="Independent samplings per setting.")
    alpha: float = Field(0.05, gt=0, lt=0.5, description="Miscoverage of the binomial source interval.")
    delta: float = Field(0.05, gt=0, lt=0.5, description="Miscoverage of the boundary's band.")
    n_lipschitz: int = Field(400, ge=20, description="Points per sample for the Lipschitz LP boundary.")
    lipschitz: float = Field(1.0, gt=0, description="Lipschitz constant L of the bounded-Lipschitz class.")
    n_kernel: int = Field(2000, ge=20, description="Points per sample for the RKHS-ball boundary.")
    bandwidth: float = Field(1.0, gt=0, description="Gaussian kernel bandwidth h.")
    group_digit: int = Field(8, ge=0, le=9, description="The rare group in the realistic digits case.")
    realistic: bool = Field(True, description="Run the realistic generative (digits) fairness case.")

    QUICK: ClassVar[dict] = {
        "n_unlabelled": 4000,
        "repetitions": 3,
        "rates": [0.2, 0.05, 0.01, 0.001],
        "shares": [0.5, 0.1, 0.01],
        "n_lipschitz": 150,
        "n_kernel": 500,
    }


def _interval_row(app: str, setting: str, rate: float, truth: float, bounds: list[dict]) -> dict:
    row: dict = {"application": app, "setting": setting, "source_rate": rate, "truth": truth}
    for name in ("ipb", "ipm", "binomial", "kl"):
        vals = [b[name] for b in bounds if name in b]
        if not vals:
            continue
        lo = np.array([v[0] for v in vals])
        hi = np.array([v[1] for v in vals])
        row[f"{name}_lower"] = float(lo.mean())
        row[f"{name}_upper"] = float(hi.mean())
        row[f"{name}_width_pp"] = float(100 * (hi - lo).mean())
        row[f"{name}_coverage"] = float(np.mean((lo <= truth + 1e-12) & (truth <= hi + 1e-12)))
    return row


def _shift_application(
    config: IPBConfig, scen: MixtureShift, u: np.ndarray, name: str, rng: np.random.Generator,
    kl: float | None = None,
) -> list[dict]:
    """Judge-free estimation / alignment: bound E_Q f from the source rate and unlabelled samples."""
    cs = [scen.threshold_for_rate(u, r) for r in config.rates]
    truths = [scen.halfspace_rate(u, c, "q") for c in cs]
    per_rate: list[list[dict]] = [[] for _ in config.rates]
    for _ in range(config.repetitions):
        tb = TestBoundary(delta=config.delta, random_state=int(rng.integers(2**31))).fit(
            scen.sample_p(config.n_unlabelled, rng), scen.sample_q(config.n_unlabelled, rng)
        )
        for i, (r, q) in enumerate(zip(config.rates, truths, strict=True)):
            k_s = int(rng.binomial(config.n_source_judged, r))
            k_t = int(rng.binomial(config.n_target_judged, q))
            out = compare_bounds(tb, k_s, config.n_source_judged, k_t, config.n_target_judged, config.alpha)
            if kl is not None:
                s_hi = float(clopper_pearson(k_s, config.n_source_judged, config.alpha)[1])
                out["kl"] = (0.0, float(fdiv_boundary(s_hi, kl, "kl")))
            per_rate[i].append(out)
    return [
        _interval_row(name, scen.name, r, q, b)
        for r, q, b in zip(config.rates, truths, per_rate, strict=True)
    ]


def _fairness_synthetic(config: IPBConfig, rng: np.random.Generator, ctx: RunContext) -> list[dict]:
    rows = []
    u = np.array([1.0, 0.0])
    n_pop = config.n_source_judged
    for share in ctx.progress(config.shares, description="fairness (synthetic)"):
        scen = rare_group(d=2, share=share, shift=config.shift)
        cs = [scen.threshold_for_rate(u, r) for r in config.rates]
        gaps = [scen.halfspace_rate(u, c, "q") - r for c, r in zip(cs, config.rates, strict=True)]
        n_g = max(round(share * n_pop), 1)
        per_rate: list[list[dict]] = [[] for _ in config.rates]
        for _ in range(config.repetitions):
            tb = TestBoundary(delta=config.delta, random_state=int(rng.integers(2**31))).fit(
                scen.sample_p(config.n_unlabelled, rng), scen.sample_q(config.n_unlabelled, rng)
            )
            for i, (r, g) in enumerate(zip(config.rates, gaps, strict=True)):
                k_pop = int(rng.binomial(n_pop, r))
                k_g = int(rng.binomial(n_g, g + r))
                per_rate[i].append(compare_gap_bounds(tb, k_pop, n_pop, k_g, n_g, config.alpha))
        rows += [
            _interval_row("fairness", f"synthetic share={share:g}", r, g, b)
            for r, g, b in zip(config.rates, gaps, per_rate, strict=True)
        ]
    return rows


def _fairness_digits(config: IPBConfig, rng: np.random.Generator, ctx: RunContext) -> list[dict]:
    gen = DigitsGenerator(seed=_seed(ctx)).fit()
    g = config.group_digit
    n_pop, n_mc = config.n_source_judged, 100_000
    z_g = gen.sample(g, n_mc, rng)
    p_g = gen.judge_prob(z_g, g)
    rows = []
    for share in ctx.progress(config.shares, description="fairness (digits)"):
        z_pop, d_pop = gen.sample_population(g, share, n_mc, rng)
        p_pop = gen.judge_prob(z_pop, d_pop)
        # failure: the judge's probability of the intended digit is below tau (set per rate)
        taus = [float(np.quantile(p_pop, r)) for r in config.rates]
        truth_pop = [float(np.mean(p_pop < tau)) for tau in taus]
        gaps = [float(np.mean(p_g < tau)) - tp for tau, tp in zip(taus, truth_pop, strict=True)]
        n_g = max(round(share * n_pop), 1)
        per_rate: list[list[dict]] = [[] for _ in config.rates]
        for _ in range(config.repetitions):
            x_p, _ = gen.sample_population(g, share, config.n_unlabelled, rng)
            tb = TestBoundary(delta=config.delta, random_state=int(rng.integers(2**31))).fit(
                x_p, gen.sample(g, config.n_unlabelled, rng)
            )
            for i, (tp, gap) in enumerate(zip(truth_pop, gaps, strict=True)):
                k_pop = int(rng.binomial(n_pop, tp))
                k_g = int(rng.binomial(n_g, gap + tp))
                per_rate[i].append(compare_gap_bounds(tb, k_pop, n_pop, k_g, n_g, config.alpha))
        rows += [
            _interval_row("fairness", f"digits share={share:g}", r, gap, b)
            for r, gap, b in zip(config.rates, gaps, per_rate, strict=True)
        ]
    return rows


def _boundary_figures(config: IPBConfig, ctx: RunContext, report: Report) -> None:
    rng = ctx.child_rng("boundaries")
    mu = config.shift
    scen = gaussian_shift(d=2, mu=mu)
    x_p, x_q = scen.sample_p(config.n_unlabelled, rng), scen.sample_q(config.n_unlabelled, rng)
    with ctx.stage("test boundary (Gaussian shift)"):
        cp = TestBoundary(delta=config.delta, random_state=_seed(ctx)).fit(x_p, x_q)
        dkw = TestBoundary(delta=config.delta, band="dkw", random_state=_seed(ctx)).fit(x_p, x_q)
    t = np.r_[np.geomspace(1e-4, 0.5, 80), np.linspace(0.5, 1, 40)]
    truth, tv = gaussian_roc(t, mu), gaussian_divergence(mu, "tv")
    kl = fdiv_boundary(t, gaussian_divergence(mu, "kl"), "kl")
    grid = np.linspace(0, 1, 2001)
    sup_err = float(np.max(np.abs(cp.boundary(grid) - gaussian_roc(grid, mu))))
    report.metric("test_boundary_sup_error", sup_err, headline=True,
                  description="sup_t |estimated - analytic Gaussian ROC| (learned logistic score)")
    report.metric("test_ipm_estimate", cp.ipm(), description=f"estimated TV (exact {tv:.4f})")
    for r in (0.01, 0.001):
        report.metric(f"upper_at_{r:g}_ipb", float(cp.upper(r)),
                      description=f"IPB upper band at t={r:g}; exact boundary {float(gaussian_roc(r, mu)):.4f}")
        report.metric(f"upper_at_{r:g}_ipm", float(min(r + cp.ipm(band=True), 1.0)),
                      description=f"IPM bound t + d_TV (band) at t={r:g}")
        report.metric(f"upper_at_{r:g}_kl", float(fdiv_boundary(r, gaussian_divergence(mu, "kl"))),
                      description=f"binary-KL inversion with the exact KL at t={r:g}")
    fig, axes = new_figure(1, 2, size=(11, 4.2))
    for ax, logx, title in ((axes[0, 0], True, f"tests, Gaussian shift μ={mu:g} (log t)"),
                            (axes[0, 1], False, "same, linear t")):
        metric_vs_parameter(
            t,
            {
                "exact boundary Φ(Φ⁻¹(t)+μ)": truth,
                "estimated (ROC hull), CP band": Series(cp.boundary(t), cp.lower(t), cp.upper(t)),
                "DKW upper band": dkw.upper(t),
                "KL inversion (exact KL)": kl,
                "IPM bound t + TV": np.minimum(t + tv, 1),
                "exact lower boundary": gaussian_roc(t, -mu),
            },
            ax=ax, xlabel="source value E_P f", ylabel="target value E_Q f", title=title,
            logx=logx, band_label="confidence band",
        )
        _lines_only(ax)
    axes[0, 0].get_legend().remove()
    report.figure("boundary_tests", fig, caption="Boundary of tests vs the IPM (TV) and KL bounds.")

    with ctx.stage("Lipschitz LP and RKHS boundaries"):
        n_l, n_k = config.n_lipschitz, config.n_kernel
        lb = LipschitzBoundary(
            lipschitz=config.lipschitz, delta=config.delta, random_state=_seed(ctx)
        ).fit(
            x_p[:n_l, 0], x_q[:n_l, 0]
        )
        kb = KernelBoundary(
            bandwidth=config.bandwidth, delta=config.delta, random_state=_seed(ctx)
        ).fit(x_p[:n_k], x_q[:n_k])
    gram = gaussian_embedding_gram(np.zeros(2), np.array([mu, 0.0]), 1.0, config.bandwidth)
    report.metric("lipschitz_ipm", lb.ipm(), description="bounded-Lipschitz IPM (slope-1 LP), 1-D marginal")
    report.metric("lipschitz_eps", lb.eps_p_, description="Rademacher uniform deviation of the P sample")
    report.metric("mmd", kb.mmd(), description=f"plug-in MMD (exact {np.sqrt(gram[0,0]+gram[1,1]-2*gram[0,1]):.4f})")
    tk = np.linspace(*kb.domain_, 200)
    report.metric("kernel_boundary_sup_error", float(np.max(np.abs(kb.boundary(tk) - ellipse_boundary(tk, gram)))),
                  description="sup |estimated - exact RKHS-ball boundary|")
    fig, axes = new_figure(1, 2, size=(11, 4.2))
    tl = np.linspace(0, 1, 201)
    metric_vs_parameter(
        tl,
        {
            "LP boundary (plug-in), Rademacher band": Series(
                lb.boundary(tl), lb.lower(tl), lb.upper(tl)),
            "lower boundary (plug-in)": lb.lower_boundary(tl),
            "IPM bound t + d_BL": np.minimum(tl + lb.ipm(), 1),
            "t + L·W1 (unbounded class)": np.minimum(tl + lb.ipm_lp(bounded=False), 1),
        },
        ax=axes[0, 0], xlabel="E_P f", ylabel="E_Q f", band_label="confidence band",
        title=f"bounded {config.lipschitz:g}-Lipschitz, 1-D, n={n_l}",
    )
    metric_vs_parameter(
        tk,
        {
            "exact ellipse arc": ellipse_boundary(tk, gram),
            "estimated, band": Series(kb.boundary(tk), kb.lower(tk), kb.upper(tk)),
            "exact lower arc": -ellipse_boundary(-tk, gram),
            "IPM bound t + MMD": tk + kb.mmd(),
            "IPM bound t - MMD": tk - kb.mmd(),
        },
        ax=axes[0, 1], xlabel="E_P f", ylabel="E_Q f", band_label="confidence band",
        title=f"RKHS unit ball, Gaussian kernel h={config.bandwidth:g}",
    )
    for ax in axes[0]:
        _lines_only(ax)
    report.figure("boundary_lipschitz_kernel", fig, caption="LP and closed-form boundaries vs their IPMs.")


def _rare_gain(rows: list[dict], setting: str, other: str) -> float:
    sel = [r for r in rows if r["setting"] == setting and r["source_rate"] <= RARE]
    if not sel:
        return float("nan")
    return float(np.mean([r[f"{other}_width_pp"] - r["ipb_width_pp"] for r in sel]))


@register("ipb", config=IPBConfig)
def run(config: IPBConfig, ctx: RunContext) -> Report:
    report = ctx.report
    _boundary_figures(config, ctx, report)

    with ctx.stage("judge-free performance estimation"):
        scen = gaussian_shift(d=2, mu=config.shift)
        u = np.array([np.cos(0.5), np.sin(0.5)])  # the model's error region, not the worst case
        judge_rows = _shift_application(config, scen, u, "judge-free", ctx.child_rng("judge-free"))
    with ctx.stage("alignment"):
        pol = tilted_policy(d=2)
        kl = pol.kl_qp(ctx.child_rng("kl"))
        align_rows = _shift_application(
            config, pol, np.array([1.0, 0.0]), "alignment", ctx.child_rng("alignment"), kl=kl
        )
        report.metric("alignment_kl", kl, description="KL(fine-tuned || reference) of the tilted policy")
    with ctx.stage("fairness (synthetic)"):
        fair_rows = _fairness_synthetic(config, ctx.child_rng("fair-syn"), ctx)
    if config.realistic:
        with ctx.stage("fairness (digits generator)"):
            fair_rows += _fairness_digits(config, ctx.child_rng("fair-digits"), ctx)

    report.table("judge_free", judge_rows, caption=(
        "Error rate of a fixed model on an unlabelled shifted distribution: IPB = source CP interval "
        f"pushed through the test boundary; IPM = source interval ± TV; binomial = CP on "
        f"{config.n_target_judged} judged target samples. Means over repetitions; coverage of the truth."))
    report.table("alignment", align_rows, caption=(
        "Failure rate of a KL-regularised fine-tuned policy from the reference failure rate; "
        "kl = binary-KL inversion with the exact KL(Q||P)."))
    report.table("fairness", fair_rows, caption=(
        "Gap E_group f - E_population f: IPB / IPM from the population rate and unlabelled samples; "
        "binomial from the group's own judged samples (share × n_source_judged)."))

    smallest = min(config.shares)
    for app, rows_ in (("judge_free", judge_rows), ("alignment", align_rows)):
        rare = [r for r in rows_ if r["source_rate"] <= RARE]
        if rare:
            report.metric(f"{app}_rare_upper_ipb", float(np.mean([r["ipb_upper"] for r in rare])),
                          headline=True, description="mean IPB upper bound at source rates <= 1%")
            report.metric(f"{app}_rare_upper_ipm", float(np.mean([r["ipm_upper"] for r in rare])),
                          headline=True, description="mean IPM upper bound at source rates <= 1%")
            report.metric(f"{app}_rare_truth", float(np.mean([r["truth"] for r in rare])),
                          description="mean true target rate at source rates <= 1%")
        report.metric(f"{app}_ipb_min_coverage", float(min(r["ipb_coverage"] for r in rows_)),
                      description="lowest coverage of the IPB interval across rates")
    for kind in ("synthetic", "digits"):
        setting = f"{kind} share={smallest:g}"
        if not any(r["setting"] == setting for r in fair_rows):
            continue
        report.metric(f"fairness_{kind}_gain_vs_binomial_pp", _rare_gain(fair_rows, setting, "binomial"),
                      headline=True, unit=" pp",
                      description=f"gap-interval width, binomial minus IPB, share {smallest:g}, rates <= 1%")
        report.metric(f"fairness_{kind}_gain_vs_ipm_pp", _rare_gain(fair_rows, setting, "ipm"),
                      headline=kind == "digits", unit=" pp",
                      description=f"gap-interval width, IPM minus IPB, share {smallest:g}, rates <= 1%")
        sel = [r for r in fair_rows if r["setting"].startswith(kind)]
        report.metric(f"fairness_{kind}_ipb_min_coverage", float(min(r["ipb_coverage"] for r in sel)),
                      description="lowest coverage of the IPB gap interval (digits: score not well specified)")
    _application_figures(config, report, judge_rows, align_rows, fair_rows)
    report.note(
        "Bands and intervals: the boundary band holds with probability >= 1 - delta for all t; "
        "pushing the Clopper-Pearson source interval through it adds alpha. All three routes are "
        "compared at miscoverage alpha + delta. The test boundary is that of functions monotone "
        "in the learned score; it equals the boundary of all tests when the score is a monotone "
        "transform of dQ/dP (true for the synthetic pairs, not guaranteed for digits)."
    )
    return report


def _lines_only(ax) -> None:
    """Dense curves: drop the shared panel's point markers."""
    for line in ax.get_lines():
        line.set_marker("")


def _application_figures(config: IPBConfig, report: Report, judge: list, align: list, fair: list) -> None:
    fig, axes = new_figure(1, 3, size=(15, 4.2))
    for ax, rows_, title in ((axes[0, 0], judge, "judge-free error rate"),
                             (axes[0, 1], align, "alignment failure rate")):
        r = np.array([x["source_rate"] for x in rows_])
        series = {"true target rate": np.array([x["truth"] for x in rows_])}
        for name in ("ipb", "ipm", "binomial", "kl"):
            if f"{name}_upper" in rows_[0]:
                series[f"{name} upper"] = np.array([x[f"{name}_upper"] for x in rows_])
        metric_vs_parameter(r, series, ax=ax, xlabel="source rate E_P f",
                            ylabel="target rate E_Q f (upper bounds)", title=title,
                            logx=True, logy=True)
    widths: dict[str, np.ndarray] = {}
    shares = sorted(config.shares)
    for kind in ("synthetic", "digits"):
        if not any(x["setting"].startswith(kind) for x in fair):
            continue
        for name in ("ipb", "ipm", "binomial"):
            widths[f"{name} ({kind})"] = np.array(
                [_mean_rare(fair, f"{kind} share={s:g}", f"{name}_width_pp") for s in shares]
            )
    metric_vs_parameter(shares, widths, ax=axes[0, 2], xlabel="group share",
                        ylabel="gap-interval width (pp), rates <= 1%",
                        title="fairness for rare groups", logx=True)
    report.figure("applications", fig, caption="Upper bounds vs rate, and fairness-gap widths vs group share.")


def _mean_rare(rows: list[dict], setting: str, key: str) -> float:
    vals = [r[key] for r in rows if r["setting"] == setting and r["source_rate"] <= RARE]
    return float(np.mean(vals)) if vals else float("nan")
