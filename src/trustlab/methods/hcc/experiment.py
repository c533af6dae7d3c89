"""`trustlab run hcc`: HCC against flat and hierarchical conformal baselines on three data sets.

For each data set (synthetic sibling-confusion scores, digits, and CIFAR-10H when its files
are present) and each random calibration/test split, every method is calibrated once and
evaluated at every alpha (the calibration scores do not depend on alpha). Reported per
(data set, method, alpha): coverage, mean classes covered, mean nodes, mean node depth.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import Field, field_validator

from trustlab.core import ExperimentConfig, Report, RunContext, register
from trustlab.core.figures import add_alt_text, metric_vs_parameter, new_figure
from trustlab.datasets.cifar10h import Cifar10HSource
from trustlab.methods.hcc.baselines import FlatConformal, LCAFlat, MortierRNode, MortierSingleNode
from trustlab.methods.hcc.data import (
    LabelledScores,
    SyntheticTask,
    cifar10_hierarchy,
    digits_task,
)
from trustlab.methods.hcc.hcc import HCC
from trustlab.methods.hcc.hierarchy import Hierarchy, NodeSets


class HCCConfig(ExperimentConfig):
    alphas: list[float] = Field(
        [0.01, 0.05, 0.1], min_length=1, description="Miscoverage levels alpha to evaluate."
    )
    n_splits: int = Field(
        10, ge=1, description="Random calibration/test splits per data set (metrics are means)."
    )
    cal_fraction: float = Field(
        0.5, gt=0.0, lt=1.0, description="Fraction of each data set's points used to calibrate."
    )
    node_penalty: float = Field(
        1.0, ge=0.0, description="HCC's lambda: cost of one node in units of covered classes."
    )
    mortier_max_nodes: int = Field(
        3, ge=1, description="r of the Mortier et al. at-most-r-nodes baseline."
    )
    synthetic: SyntheticTask = Field(
        default_factory=SyntheticTask,
        description="The synthetic data set: a random tree with sibling-confused scores.",
    )
    digits_components: int = Field(
        8, ge=1, le=64, description="PCA components fed to the digits classifier."
    )
    cifar10h: Cifar10HSource = Field(
        default_factory=Cifar10HSource,
        description="CIFAR-10H (enabled, model, dir); evaluated when its files are there.",
    )

    QUICK: ClassVar[dict[str, Any]] = {
        "n_splits": 2,
        "synthetic": {"points": 3000, "classes": 20},
    }

    @field_validator("alphas")
    @classmethod
    def _alphas_in_unit_interval(cls, v: list[float]) -> list[float]:
        for a in v:
            if not 0.0 < a < 1.0:
                raise ValueError(f"every alpha must be in (0, 1); got {a}")
        return sorted(set(v))


def _methods(h: Hierarchy, config: HCCConfig, alpha: float) -> dict[str, Any]:
    return {
        "hcc": HCC(h, alpha, node_penalty=config.node_penalty),
        "flat_lac": FlatConformal(h, alpha),
        "flat_aps": FlatConformal(h, alpha, score="aps"),
        "flat_raps": FlatConformal(h, alpha, score="raps"),
        "lca_lac": LCAFlat(h, alpha),
        "lca_lac_naive": LCAFlat(h, alpha, recalibrate=False),
        "mortier_single": MortierSingleNode(h, alpha),
        f"mortier_r{config.mortier_max_nodes}": MortierRNode(
            h, alpha, max_nodes=config.mortier_max_nodes
        ),
    }


def _datasets(config: HCCConfig, ctx: RunContext) -> list[LabelledScores]:
    out = []
    with ctx.stage("synthetic data"):
        out.append(config.synthetic.generate(ctx.child_rng("synthetic")))
    with ctx.stage("digits classifier"):
        digits, _ = digits_task(ctx.child_rng("digits"), n_components=config.digits_components)
        out.append(digits)
    with ctx.stage("load CIFAR-10H"):
        c = config.cifar10h.load()
    if c is None:
        ctx.report.note(config.cifar10h.absent_note())
    else:
        acc = float((c.probs.argmax(axis=1) == c.labels).mean())
        out.append(
            LabelledScores(
                cifar10_hierarchy(),
                c.probs,
                c.labels,
                "cifar10h",
                f"cifar10h: {c.model} softmax on the 10,000 CIFAR-10 test images "
                f"(Kerrigan et al. CSVs, read from {config.cifar10h.root}); top-1 accuracy "
                f"{acc:.3f}.",
            )
        )
    return out


def _evaluate(data: LabelledScores, config: HCCConfig, ctx: RunContext) -> list[dict[str, Any]]:
    rng = ctx.child_rng(f"splits-{data.name}")
    n = len(data.labels)
    n_cal = round(config.cal_fraction * n)
    rows = []
    for split in ctx.progress(range(config.n_splits), description=f"hcc {data.name}"):
        perm = rng.permutation(n)
        cal, test = perm[:n_cal], perm[n_cal:]
        for name, model in _methods(data.hierarchy, config, config.alphas[0]).items():
            model.fit(data.probs[cal], data.labels[cal])
            for alpha in config.alphas:
                sets = model.set_alpha(alpha).predict(data.probs[test])
                rows.append(
                    {
                        "dataset": data.name,
                        "method": name,
                        "alpha": alpha,
                        "split": split,
                        "coverage": sets.coverage(data.labels[test]),
                        "mean_leaves": sets.mean_leaves(),
                        "mean_nodes": sets.mean_nodes(),
                        "mean_depth": sets.mean_depth(),
                        "n_test": len(test),
                        "n_cal": n_cal,
                    }
                )
    return rows


def _summarise(rows: list[dict[str, Any]]):
    import pandas as pd

    df = pd.DataFrame(rows)
    g = df.groupby(["dataset", "method", "alpha"], sort=False)
    out = g.agg(
        coverage=("coverage", "mean"),
        coverage_sd=("coverage", "std"),
        mean_leaves=("mean_leaves", "mean"),
        mean_nodes=("mean_nodes", "mean"),
        mean_depth=("mean_depth", "mean"),
        n_test=("n_test", "first"),
        n_cal=("n_cal", "first"),
        splits=("split", "count"),
    ).reset_index()
    return out.round(4)


def _size_figure(summary, methods: list[str]):
    names = list(dict.fromkeys(summary["dataset"]))
    fig, axes = new_figure(1, len(names), size=(4.2 * len(names), 3.6))
    for ax, ds in zip(axes[0], names, strict=True):
        part = summary[summary["dataset"] == ds]
        alphas = sorted(set(part["alpha"]))
        series = {
            m: part[part["method"] == m].set_index("alpha").loc[alphas, "mean_leaves"].to_numpy()
            for m in methods
        }
        metric_vs_parameter(
            alphas, series, ax=ax, xlabel="alpha (miscoverage)", ylabel="mean classes covered",
            title=ds, logx=True,
        )
        for line in ax.get_lines():
            if line.get_label() == "hcc":
                line.set(linewidth=2.5, color="k", zorder=5)
    for ax in axes[0][:-1]:  # one legend, on the last panel (redrawn with HCC's style)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    axes[0][-1].legend(fontsize=7)
    return fig


def _tree_positions(h: Hierarchy) -> tuple[np.ndarray, np.ndarray]:
    x = np.zeros(h.n_nodes)
    leaf_x = 0.0

    def place(v: int) -> float:
        nonlocal leaf_x
        if not h.children[v]:
            x[v] = leaf_x
            leaf_x += 1.0
        else:
            x[v] = float(np.mean([place(c) for c in h.children[v]]))
        return x[v]

    place(0)
    return x, -h.depth.astype(float)


def _example_figure(h: Hierarchy, sets: NodeSets, i: int, label: int, title: str):
    x, yy = _tree_positions(h)
    chosen = set(np.flatnonzero(sets.membership[i]).tolist())
    covered = sets.covered[i]
    fig, ax = new_figure(size=(max(6.0, 0.75 * h.n_classes), 3.8), squeeze=True)
    for v in range(1, h.n_nodes):
        ax.plot([x[v], x[h.parent[v]]], [yy[v], yy[h.parent[v]]], color="0.7", lw=1, zorder=1)
    for v in range(h.n_nodes):
        leaf_cov = h.is_leaf[v] and covered[h.class_of_node[v]]
        colour = "tab:red" if v in chosen else ("mistyrose" if leaf_cov else "white")
        ax.scatter([x[v]], [yy[v]], s=260, c=colour, edgecolors="k", zorder=2)
        ax.annotate(
            h.names[v],
            (x[v], yy[v]),
            textcoords="offset points",
            xytext=(0, -24 if h.is_leaf[v] else -16),
            ha="center",
            fontsize=7,
            rotation=30 if h.is_leaf[v] else 0,
        )
    t = h.leaf_node[label]
    ax.scatter([x[t]], [yy[t]], marker="*", s=120, c="gold", edgecolors="k", zorder=3)
    ax.set_title(title, fontsize=9)
    ax.axis("off")
    add_alt_text(
        fig,
        f"The class tree ({h.n_classes} classes) with one HCC prediction set drawn on it: "
        f"the set's nodes {sets.nodes(i)} in red, the classes they cover shaded, the true class "
        f"'{h.classes[label]}' starred.",
    )
    return fig


@register("hcc", config=HCCConfig)
def run(config: HCCConfig, ctx: RunContext) -> Report:
    report = ctx.report
    datasets = _datasets(config, ctx)
    rows: list[dict[str, Any]] = []
    with ctx.stage("calibrate and predict"):
        for data in datasets:
            rows.extend(_evaluate(data, config, ctx))
    summary = _summarise(rows)
    methods = list(dict.fromkeys(summary["method"]))
    report.table(
        "results",
        summary,
        caption=(
            f"Mean over {config.n_splits} random calibration/test splits "
            f"({config.cal_fraction:.0%} calibration). coverage_sd is across splits; "
            "mean_depth averages the node depth (root 0) of non-empty sets."
        ),
    )
    # headline: HCC vs the flat and lifted sets at the largest alpha, and whether coverage held
    a_head = max(config.alphas)
    for data in datasets:
        part = summary[(summary["dataset"] == data.name) & (summary["alpha"] == a_head)]
        by = {r["method"]: r for r in part.to_dict("records")}
        tag = f"{data.name}.a{a_head:g}"
        report.metric(
            f"{tag}.hcc_coverage",
            by["hcc"]["coverage"],
            headline=True,
            description=f"HCC coverage at alpha={a_head:g} (target {1 - a_head:g}).",
        )
        for m in ("hcc", "flat_lac", "lca_lac"):
            report.metric(
                f"{tag}.{m}_leaves",
                by[m]["mean_leaves"],
                headline=True,
                description=f"Mean classes covered by {m} at alpha={a_head:g}.",
            )
        report.metric(
            f"{tag}.hcc_nodes",
            by["hcc"]["mean_nodes"],
            headline=True,
            description=f"Mean nodes per HCC set at alpha={a_head:g}.",
        )
        report.metric(
            f"{tag}.flat_lac_nodes",
            by["flat_lac"]["mean_nodes"],
            description="Mean nodes (= classes) per flat LAC set.",
        )
    # coverage check: the split mean within 3 standard errors of 1 - alpha; one split's coverage
    # varies with the test draw (binomial) and with the calibration draw (beta, ~ a(1-a)/n_cal)
    a = summary["alpha"]
    var = a * (1 - a) * (1 / summary["n_test"] + 1 / summary["n_cal"]) / summary["splits"]
    se = np.sqrt(var)
    short = summary[summary["coverage"] < 1 - summary["alpha"] - 3 * se - 1e-12]
    report.metric(
        "coverage_holds",
        bool(short.empty),
        headline=True,
        description="Every method's mean coverage >= 1 - alpha - 3 standard errors.",
    )
    if not short.empty:
        report.note(
            "Coverage fell short for: "
            + ", ".join(
                f"{r.dataset}/{r.method}/alpha={r.alpha:g} ({r.coverage:.4f})"
                for r in short.itertuples()
            )
        )
    hcc_vs_lca = []
    for _, part in summary.groupby(["dataset", "alpha"], sort=False):
        by = part.set_index("method")
        hcc_vs_lca.append(by.loc["hcc", "mean_leaves"] <= by.loc["lca_lac", "mean_leaves"] + 1e-9)
    report.metric(
        "hcc_leaves_le_lca_everywhere",
        bool(all(hcc_vs_lca)),
        headline=True,
        description="HCC covers no more classes on average than the recalibrated LCA lift, "
        "for every data set and alpha.",
    )
    for data in datasets:
        report.note(data.note)
    report.note(
        f"HCC: LAC class scores, node_penalty lambda={config.node_penalty:g}. Baselines: flat "
        "LAC/APS/RAPS (non-randomised), lca_lac (LCA of the flat LAC set, recalibrated on the "
        "lifted sets), lca_lac_naive (same lift with the flat threshold), mortier_single (greedy "
        f"single node), mortier_r{config.mortier_max_nodes} (at most r nodes, fewest classes)."
    )
    with ctx.stage("figures"):
        report.figure(
            "set_size_vs_alpha",
            _size_figure(summary, methods),
            caption="Mean classes covered against alpha (log scale); HCC in black.",
        )
        data = datasets[-1]
        rng = ctx.child_rng("example")
        perm = rng.permutation(len(data.labels))
        n_cal = round(config.cal_fraction * len(perm))
        a_ex = 0.05 if 0.05 in config.alphas else config.alphas[0]
        model = HCC(data.hierarchy, a_ex, node_penalty=config.node_penalty)
        model.fit(data.probs[perm[:n_cal]], data.labels[perm[:n_cal]])
        test = perm[n_cal:]
        sets = model.predict(data.probs[test])
        internal = sets.membership[:, ~data.hierarchy.is_leaf].any(axis=1)
        good = np.flatnonzero(internal & (sets.n_nodes >= 2))
        if not good.size:
            good = np.flatnonzero(sets.n_nodes >= 1)
        i = int(good[0]) if good.size else 0
        label = int(data.labels[test][i])
        title = (
            f"{data.name}, alpha={a_ex:g}: HCC set {sets.nodes(i)} (red), covered classes pink, "
            f"true class '{data.hierarchy.classes[label]}' starred"
        )
        report.figure(
            "example_set",
            _example_figure(data.hierarchy, sets, i, label, title),
            caption="One HCC prediction set drawn on the hierarchy.",
        )
    return report
