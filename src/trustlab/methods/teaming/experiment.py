"""`trustlab run teaming`: combination vs delegation, and what each does to calibration per cell.

On a synthetic team calibrated per cell by construction and, when the folder is there, on
CIFAR-10H (one simulated annotator per image): team accuracy and per-cell calibration of
the human, the model, each combination and each delegation method; the
calibration-preservation table; the delegation-capacity curve; reliability diagrams.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from trustlab.core import ExperimentConfig, Report, RunContext, register
from trustlab.core.figures import Series, add_alt_text, metric_vs_parameter, new_figure
from trustlab.datasets.cifar10h import Cifar10HSource
from trustlab.methods.teaming.annotators import votes_team
from trustlab.methods.teaming.combination import (
    ConfusionMatrixCombiner,
    ProductOfExpertsCombiner,
    WeightedAverageCombiner,
)
from trustlab.methods.teaming.delegation import (
    ConfidenceDelegator,
    L2DSurrogateDelegator,
    OneVsAllDelegator,
    OracleDelegator,
    delegation_features,
    team_probs,
)
from trustlab.methods.teaming.partitions import (
    partition_calibration,
    partition_calibration_ci,
    reliability_diagrams_by_cell,
)
from trustlab.methods.teaming.synthetic import SyntheticTeam, TeamingData

__all__ = ["TeamingConfig", "run"]

CapacityName = Literal["logistic", "boosting", "mlp"]
DelegatorName = Literal["confidence", "l2d", "ova"]
_DELEGATORS = {
    "confidence": ConfidenceDelegator,
    "l2d": L2DSurrogateDelegator,
    "ova": OneVsAllDelegator,
}


class TeamingCifar10H(Cifar10HSource):
    """The CIFAR-10H section of the teaming config: where, which CNN, and how it is split."""

    fit_fraction: float = Field(
        0.7, gt=0.05, lt=0.95, description="Share of CIFAR-10H images used to fit (Kerrigan: 0.7)."
    )
    capacities: list[CapacityName] = Field(
        ["logistic", "boosting"], min_length=1,
        description="Meta-classifier capacities tried on CIFAR-10H.",
    )


class TeamingConfig(ExperimentConfig):
    """Config of the teaming experiment (synthetic team, then CIFAR-10H when present)."""

    n_fit: int = Field(8000, ge=200, description="Synthetic points used to fit combiners and delegators.")
    n_eval: int = Field(10000, ge=200, description="Synthetic points used to evaluate them.")
    synthetic: SyntheticTeam = Field(
        default_factory=SyntheticTeam,
        description="The synthetic team: classes, checkerboard, human accuracies, model strength.",
    )
    delegators: list[DelegatorName] = Field(
        ["confidence", "l2d", "ova"], min_length=1,
        description="Learned delegators: confidence comparison, L2D surrogate, one-vs-all.",
    )
    capacities: list[CapacityName] = Field(
        ["logistic", "boosting", "mlp"], min_length=1,
        description="Meta-classifier capacities of the delegation-capacity curve (synthetic).",
    )
    n_bins: int = Field(10, ge=2, le=50, description="Confidence bins of the per-cell ECE.")
    min_cell_count: int = Field(
        30, ge=1, description="Cells with fewer points are left out of mean/worst-cell ECE."
    )
    n_bootstrap: int = Field(200, ge=10, description="Bootstrap resamples of the ECE intervals.")
    cifar10h: TeamingCifar10H = Field(
        default_factory=TeamingCifar10H,
        description="CIFAR-10H (enabled, model, dir, fit_fraction, capacities); run when present.",
    )

    QUICK: ClassVar[dict[str, Any]] = {
        "n_fit": 1000,
        "n_eval": 2000,
        "capacities": ["logistic", "boosting"],
        "n_bootstrap": 20,
        "cifar10h": {"capacities": ["logistic"]},
    }


# ----------------------------------------------------------------------------- evaluation


def _evaluate(
    name: str, family: str, capacity: str, probs: np.ndarray, data: TeamingData,
    cells: np.ndarray, config: TeamingConfig, rng: np.random.Generator,
    defer: np.ndarray | None = None,
) -> dict[str, Any]:
    """One row of the methods table: accuracy, deferral, per-cell ECE with a bootstrap interval."""
    cal = partition_calibration(probs, data.labels, cells, n_bins=config.n_bins,
                                min_count=config.min_cell_count)
    _, low, high = partition_calibration_ci(
        probs, data.labels, cells, n_bins=config.n_bins, min_count=config.min_cell_count,
        n_resamples=config.n_bootstrap, rng=rng,
    )
    row: dict[str, Any] = {
        "method": name, "family": family, "capacity": capacity,
        "accuracy": cal.accuracy,
        "deferral_rate": float(np.mean(defer)) if defer is not None else None,
        "mean_cell_ece": cal.mean_cell_ece, "ece_ci_low": low, "ece_ci_high": high,
        "worst_cell_ece": cal.worst_cell_ece,
    }
    if defer is not None:  # calibration of each teammate on the points it was given
        for who, mask, source in (("human", defer, data.human_probs),
                                  ("model", ~defer, data.model_probs)):
            if mask.sum() >= config.min_cell_count:
                sub = partition_calibration(source[mask], data.labels[mask], cells[mask],
                                            n_bins=config.n_bins, min_count=config.min_cell_count)
                row[f"{who}_part_mean_cell_ece"] = sub.mean_cell_ece
            else:
                row[f"{who}_part_mean_cell_ece"] = None
    return row


def _run_team(
    fit: TeamingData, ev: TeamingData, cells: np.ndarray, capacities: list[str],
    config: TeamingConfig, ctx: RunContext, tag: str,
) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """Fit every combiner and delegator on ``fit``, evaluate on ``ev``; return rows and probs."""
    rng = ctx.child_rng(f"{tag}-bootstrap")
    rows: list[dict[str, Any]] = []
    probs: dict[str, np.ndarray] = {"human": ev.human_probs, "model": ev.model_probs}
    rows.append(_evaluate("human", "alone", "-", ev.human_probs, ev, cells, config, rng))
    rows.append(_evaluate("model", "alone", "-", ev.model_probs, ev, cells, config, rng))

    with ctx.stage(f"{tag}: combination"):
        cm = ConfusionMatrixCombiner().fit(fit.model_probs, fit.human_labels, fit.labels)
        wa = WeightedAverageCombiner().fit(fit.model_probs, fit.human_probs, fit.labels)
        poe = ProductOfExpertsCombiner().fit(fit.model_probs, fit.human_probs, fit.labels)
        probs["confusion_matrix"] = cm.predict_proba(ev.model_probs, ev.human_labels)
        probs["weighted_average"] = wa.predict_proba(ev.model_probs, ev.human_probs)
        probs["product_of_experts"] = poe.predict_proba(ev.model_probs, ev.human_probs)
        for name in ("confusion_matrix", "weighted_average", "product_of_experts"):
            rows.append(_evaluate(name, "combination", "-", probs[name], ev, cells, config, rng))

    # One thread for the meta-classifiers: they are small, and OpenMP gradient boosting slows
    # down by 10-30x when the cores are shared with other jobs (measured on the 2-core box).
    with ctx.stage(f"{tag}: delegation"), threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # MLP rung: fixed epoch budget
        defer = OracleDelegator().fit().defer(ev.human_correct_prob, ev.model_correct_prob)
        probs["oracle"] = team_probs(defer, ev.model_probs, ev.human_probs)
        rows.append(_evaluate("oracle", "delegation", "oracle", probs["oracle"], ev, cells,
                              config, rng, defer))
        f_fit = delegation_features(fit.features, fit.model_probs)
        f_ev = delegation_features(ev.features, ev.model_probs)
        jobs = [(d, c) for c in capacities for d in config.delegators]
        for dname, cap in ctx.progress(jobs, description=f"{tag} delegators"):
            seed = int(ctx.child_rng(f"{tag}-{dname}-{cap}").integers(0, 2**31 - 1))
            delegator = _DELEGATORS[dname](capacity=cap, random_state=seed)
            delegator.fit(f_fit, fit.model_probs, fit.human_labels, fit.labels)
            defer = delegator.defer(f_ev, ev.model_probs)
            key = f"{dname}_{cap}"
            probs[key] = team_probs(defer, ev.model_probs, ev.human_probs)
            rows.append(_evaluate(dname, "delegation", cap, probs[key], ev, cells, config, rng,
                                  defer))
    return rows, probs


# ----------------------------------------------------------------------------- data


def _synthetic(config: TeamingConfig, ctx: RunContext) -> tuple[TeamingData, TeamingData]:
    data = config.synthetic.generate(config.n_fit + config.n_eval, rng=ctx.child_rng("synthetic"))
    return data.subset(np.arange(config.n_fit)), data.subset(np.arange(config.n_fit, data.n))


def _cifar10h(config: TeamingConfig, ctx: RunContext) -> tuple[TeamingData, TeamingData] | None:
    """CIFAR-10H as a team: one annotator per image, the CNN temperature-scaled on the fit split."""
    from trustlab.datasets.cifar10h import sample_human_labels

    raw = config.cifar10h.load()
    if raw is None:
        return None
    human = sample_human_labels(raw.human_counts, ctx.child_rng("cifar10h-annotator"))
    order = ctx.child_rng("cifar10h-split").permutation(len(raw.labels))
    n_fit = round(config.cifar10h.fit_fraction * len(raw.labels))
    return votes_team(raw.probs, raw.labels, raw.human_counts, human, order[:n_fit], order[n_fit:])


# ----------------------------------------------------------------------------- figures


def _capacity_figure(rows: list[dict[str, Any]], capacities: list[str], title: str) -> Any:
    fig, axes = new_figure(1, 2, size=(9.0, 3.6), title=title)
    ax_acc, ax_ece = axes[0]
    xs = np.arange(len(capacities), dtype=float)
    acc, ece = {}, {}
    for dname in sorted({r["method"] for r in rows if r["family"] == "delegation"} - {"oracle"}):
        pts = {r["capacity"]: r for r in rows if r["method"] == dname}

        def col(key: str, pts: dict = pts) -> np.ndarray:
            return np.array([pts[c][key] if c in pts else np.nan for c in capacities], float)

        acc[dname] = col("accuracy")
        ece[dname] = Series(col("mean_cell_ece"), col("ece_ci_low"), col("ece_ci_high"))
    metric_vs_parameter(xs, acc, ax=ax_acc, xlabel="meta-classifier capacity",
                        ylabel="team accuracy")
    metric_vs_parameter(xs, ece, ax=ax_ece, xlabel="meta-classifier capacity",
                        ylabel="mean per-cell ECE", band_label="95% bootstrap interval")
    by = {r["method"]: r for r in rows if r["capacity"] in ("-", "oracle")}
    for name, style in (("oracle", "k--"), ("human", "g:"), ("model", "b:")):
        ax_acc.axhline(by[name]["accuracy"], linestyle=style[1:], color=style[0], label=name)
        ax_ece.axhline(by[name]["mean_cell_ece"], linestyle=style[1:], color=style[0], label=name)
    for ax in (ax_acc, ax_ece):
        ax.set_xticks(xs, capacities)
    ax_acc.legend(fontsize="small")
    if ax_ece.get_legend() is not None:
        ax_ece.get_legend().remove()
    add_alt_text(fig, "Horizontal lines: the oracle delegator (dashed), the human and the model "
                 "alone (dotted).")
    return fig


# ----------------------------------------------------------------------------- run


def _report_part(
    report: Report, tag: str, rows: list[dict[str, Any]], probs: dict[str, np.ndarray],
    ev: TeamingData, cells: np.ndarray, capacities: list[str], config: TeamingConfig,
) -> None:
    report.table(f"{tag}_methods", rows, caption=(
        f"{tag}: accuracy, deferral rate and per-cell top-label ECE (size-weighted mean over cells "
        f"with >= {config.min_cell_count} points, 95% bootstrap interval, worst cell) on the "
        "evaluation split. For delegation, human_part/model_part give the ECE of each teammate "
        "on the points it was given."))
    human = next(r for r in rows if r["method"] == "human")
    preservation = [
        {
            "predictor": r["method"] + ("" if r["capacity"] in ("-",) else f" [{r['capacity']}]"),
            "family": r["family"],
            "mean_cell_ece": r["mean_cell_ece"],
            "ci_low": r["ece_ci_low"],
            "ci_high": r["ece_ci_high"],
            "excess_over_human": r["mean_cell_ece"] - human["mean_cell_ece"],
            "human_part_mean_cell_ece": r.get("human_part_mean_cell_ece"),
            "interval_clear_of_human": bool(r["ece_ci_low"] > human["ece_ci_high"]),
        }
        for r in rows if r["method"] != "human"
    ]
    report.table(f"{tag}_calibration_preservation", preservation, caption=(
        "Does the team keep the human's degree of calibration per cell? excess_over_human is "
        "the team's mean per-cell ECE minus the human's; interval_clear_of_human marks a "
        "team whose whole interval lies above the human's."))
    report.figure(f"{tag}_capacity_curve", _capacity_figure(rows, capacities, tag), caption=(
        "Delegation-capacity curve: team accuracy and mean per-cell ECE against the capacity of "
        "the meta-classifier, with the oracle delegator, the human and the model as lines."))
    for name in ("human", "confusion_matrix", f"confidence_{capacities[-1]}"):
        if name in probs:
            report.figure(
                f"{tag}_reliability_{name}",
                reliability_diagrams_by_cell(probs[name], ev.labels, cells, n_bins=config.n_bins,
                                             title=f"{tag}: {name}"),
                caption=f"Reliability diagrams per cell ({tag}, {name}).",
            )


@register("teaming", config=TeamingConfig)
def run(config: TeamingConfig, ctx: RunContext) -> Report:
    report = ctx.report
    with ctx.stage("synthetic data"):
        fit, ev = _synthetic(config, ctx)
    rows, probs = _run_team(fit, ev, ev.cells, list(config.capacities), config, ctx, "synthetic")
    _report_part(report, "synthetic", rows, probs, ev, ev.cells, list(config.capacities), config)

    by = {(r["method"], r["capacity"]): r for r in rows}
    human, cm = by[("human", "-")], by[("confusion_matrix", "-")]
    learned = [r for r in rows if r["family"] == "delegation" and r["capacity"] != "oracle"]
    first, last = config.capacities[0], config.capacities[-1]
    best_learned = max(learned, key=lambda r: r["accuracy"])
    report.metric("synthetic_human_mean_cell_ece", human["mean_cell_ece"], headline=True,
                  description="Human's mean per-cell ECE (calibrated by construction: noise only).")
    report.metric("synthetic_confusion_matrix_mean_cell_ece", cm["mean_cell_ece"], headline=True,
                  description="Mean per-cell ECE of the Kerrigan et al. combination.")
    report.metric("synthetic_weighted_average_mean_cell_ece",
                  by[("weighted_average", "-")]["mean_cell_ece"],
                  description="Mean per-cell ECE of the fitted linear pool.")
    report.metric("synthetic_product_of_experts_mean_cell_ece",
                  by[("product_of_experts", "-")]["mean_cell_ece"],
                  description="Mean per-cell ECE of the fitted product of experts.")
    report.metric("synthetic_delegation_worst_mean_cell_ece",
                  max(r["mean_cell_ece"] for r in learned), headline=True,
                  description="Largest mean per-cell ECE over all learned delegated teams.")
    report.metric("synthetic_combination_accuracy", cm["accuracy"], headline=True,
                  description="Team accuracy of the confusion-matrix combination.")
    report.metric("synthetic_oracle_delegation_accuracy", by[("oracle", "oracle")]["accuracy"],
                  headline=True, description="Team accuracy of the oracle delegator.")
    report.metric("synthetic_best_delegation_accuracy", best_learned["accuracy"], headline=True,
                  description=f"Best learned delegated team ({best_learned['method']}, "
                  f"{best_learned['capacity']}).")
    if ("confidence", first) in by and ("confidence", last) in by and first != last:
        report.metric(
            "synthetic_capacity_gain_confidence",
            by[("confidence", last)]["accuracy"] - by[("confidence", first)]["accuracy"],
            headline=True,
            description=f"Team accuracy of confidence delegation, {last} minus {first} meta-classifier.",
        )
    report.metric("synthetic_human_accuracy", human["accuracy"], description="Human alone.")
    report.metric("synthetic_model_accuracy", by[("model", "-")]["accuracy"],
                  description="Model alone.")

    with ctx.stage("cifar10h data"):
        real = _cifar10h(config, ctx)
    if real is not None:
        cfit, cev = real
        caps = list(config.cifar10h.capacities)
        crow, cprobs = _run_team(cfit, cev, cev.cells, caps, config, ctx, "cifar10h")
        _report_part(report, "cifar10h", crow, cprobs, cev, cev.cells, caps, config)
        cby = {(r["method"], r["capacity"]): r for r in crow}
        for name, desc in (("human", "one simulated annotator per image"),
                           ("model", f"{config.cifar10h.model}, temperature-scaled"),
                           ("confusion_matrix", "Kerrigan et al. combination")):
            report.metric(f"cifar10h_{name}_accuracy", cby[(name, "-")]["accuracy"],
                          headline=name == "confusion_matrix", description=f"CIFAR-10H: {desc}.")
            report.metric(f"cifar10h_{name}_mean_cell_ece", cby[(name, "-")]["mean_cell_ece"],
                          description=f"CIFAR-10H mean per-cell ECE: {desc}.")
        report.note(
            "CIFAR-10H (CC BY-NC-SA 4.0, Peterson et al. 2019; model outputs from Kerrigan et al. "
            "2021) is read in place. The human is one annotator per image drawn from the ~50 "
            "votes; its confidence is its per-label precision on the fit split. Cells are the "
            "temperature-scaled model's predicted class × 2 confidence bins. The oracle knows "
            "each image's share of correct votes (the annotator's true chance of being right) "
            "and uses the model's calibrated confidence for the model."
        )
    else:
        report.note(config.cifar10h.absent_note() + " Synthetic team only.")
    report.note(
        "Synthetic team: features uniform on [0,1]^2, a grid×grid checkerboard of cells; the human "
        "is right with probability a(cell) and says so (calibrated per cell); the model outputs "
        "the exact posterior of a Gaussian signal (calibrated); their noises are independent "
        "given the label. Per-cell ECE of a perfectly calibrated predictor is not 0 on a finite "
        "sample: the human's and model's rows are the noise floor to compare against. Binned "
        "ECE is biased upwards on bootstrap resamples (duplicated rows), so a percentile "
        "interval can sit slightly above its estimate; compare intervals with intervals."
    )
    return report
