"""Figures of the research-net experiment (``core.figures``: Agg-backed, no pyplot; no files
written here)."""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np

from trustlab.core.figures import add_alt_text, new_figure
from trustlab.methods.research_net.budget import Budget

__all__ = ["draw_networks", "plot_gini", "plot_learning_curves", "plot_roles"]


def _subplots(rows: int, cols: int, figsize: tuple[float, float]) -> tuple[Any, Any]:
    return new_figure(rows, cols, size=figsize)


def draw_networks(
    panels: list[tuple[str, Budget, np.ndarray]], threshold: float
) -> Any:
    """One panel per (title, budget, knowledge): nodes coloured by own research ``r`` and sized
    by knowledge; arrows ``i -> j`` (i attends to j) with width by attention ``w_ij``."""
    fig, axes = _subplots(1, len(panels), (5.2 * len(panels), 5.0))
    for ax, (title, budget, knowledge) in zip(axes[0], panels, strict=True):
        graph = budget.to_networkx(threshold)
        r = np.array([graph.nodes[i]["r"] for i in graph.nodes])
        pos = nx.spring_layout(graph.to_undirected(), seed=0, weight="weight")
        k = np.asarray(knowledge, dtype=float)
        sizes = 40 + 260 * (k - k.min()) / max(np.ptp(k), 1e-12)
        widths = [0.3 + 2.5 * d["weight"] for _, _, d in graph.edges(data=True)]
        nx.draw_networkx_edges(graph, pos, ax=ax, width=widths, alpha=0.35, arrowsize=6,
                               edge_color="0.3")
        nodes = nx.draw_networkx_nodes(graph, pos, ax=ax, node_color=r, cmap="viridis",
                                       vmin=0.0, vmax=1.0, node_size=sizes)
        ax.set_title(title, fontsize=10)
        ax.set_axis_off()
    fig.colorbar(nodes, ax=axes[0].tolist(), shrink=0.7, label="own research share r_i")
    add_alt_text(fig, f"Network drawings ({', '.join(t for t, _, _ in panels)}): nodes coloured "
                      "by own research share, sized by knowledge; arrows show attention.")
    return fig


def plot_learning_curves(curves: dict[str, list[dict[str, float]]], fixed: dict[str, float]) -> Any:
    """Objective over optimisation steps, one line per run, dashed line: best fixed topology."""
    names = list(curves)
    fig, axes = _subplots(1, len(names), (4.2 * len(names), 3.4))
    for ax, name in zip(axes[0], names, strict=True):
        curve = curves[name]
        ax.plot([c["step"] for c in curve], [c["objective"] for c in curve], label="optimised")
        ax.axhline(fixed[name], ls="--", color="C3", label="best fixed topology")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("Adam step")
        ax.set_ylabel("total knowledge")
    axes[0][0].legend(fontsize=8)
    add_alt_text(fig, f"Line charts of total knowledge against Adam step for {', '.join(names)}, "
                      "each with the best fixed topology as a dashed line.")
    return fig


def plot_gini(
    opt_curves: dict[str, list[dict[str, float]]], time_gini: dict[str, np.ndarray]
) -> Any:
    """Inequality (Gini of knowledge) over optimisation steps and over simulated rounds."""
    fig, axes = _subplots(1, 2, (10, 3.6))
    left, right = axes[0]
    for name, curve in opt_curves.items():
        left.plot([c["step"] for c in curve], [c["gini"] for c in curve], label=name)
    left.set_xlabel("Adam step")
    left.set_ylabel("Gini of knowledge")
    left.set_title("over optimisation")
    for name, g in time_gini.items():
        right.plot(np.arange(len(g)), g, marker="o", label=name)
    right.set_xlabel("learning round t")
    right.set_title("over simulated time (optimised network)")
    left.legend(fontsize=7)
    add_alt_text(fig, "Line charts of the Gini coefficient of knowledge over optimisation steps "
                      "and over simulated learning rounds, one line per cell.")
    return fig


def plot_roles(panels: list[tuple[str, np.ndarray, np.ndarray, float]]) -> Any:
    """Per panel (title, r, knowledge, threshold): histogram of r and knowledge against r."""
    fig, axes = _subplots(2, len(panels), (4.2 * len(panels), 6.0))
    for col, (title, r, k, thr) in enumerate(panels):
        axes[0][col].hist(r, bins=np.linspace(0, 1, 21), color="C0")
        axes[0][col].axvline(thr, ls="--", color="C3")
        axes[0][col].set_title(title, fontsize=9)
        axes[0][col].set_xlabel("own research share r_i")
        axes[1][col].scatter(r, k, s=12)
        axes[1][col].set_xlabel("own research share r_i")
        axes[1][col].set_ylabel("knowledge K_i")
    add_alt_text(fig, "Histograms of own-research shares with the researcher/learner split "
                      "dashed, and scatter plots of knowledge against own-research share.")
    return fig
