"""Fixed network configurations, evaluated in the same model as the optimised one.

Each topology is an undirected networkx graph; an agent researches a common share ``r0``
and splits ``1 - r0`` equally over its neighbours. ``r0`` is chosen per topology by a grid
search (so each baseline is the best uniform split its topology allows).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
import torch

from trustlab.core.errors import InputError
from trustlab.core.validation import as_float_array, check_choice, check_scalar
from trustlab.methods.research_net.budget import Budget, Support, budget_from_graph
from trustlab.methods.research_net.model import ResearchModel

__all__ = ["FIXED_TOPOLOGIES", "FixedResult", "best_fixed", "fixed_topology"]

FIXED_TOPOLOGIES: tuple[str, ...] = ("complete", "ring", "small_world", "scale_free", "star")


def fixed_topology(name: str, n: int, rng: np.random.Generator, n_edges: int = 0) -> nx.Graph:
    """The graph of a named topology on nodes ``0..n-1``.

    ``complete``; ``ring`` (cycle); ``small_world`` (connected Watts-Strogatz, k=4, p=0.1);
    ``scale_free`` (Barabasi-Albert, m=2); ``star`` (node 0 is the hub); ``random``
    (G(n, m) with ``m = n_edges`` undirected edges, for a density-matched comparison).
    """
    where = "fixed_topology"
    check_choice(name, "name", (*FIXED_TOPOLOGIES, "random"), where)
    n = check_scalar(n, "n", where, kind=int, lo=3)
    n_edges = check_scalar(n_edges, "n_edges", where, kind=int, lo=0)
    if not isinstance(rng, np.random.Generator):
        raise InputError(
            f"The 'rng' parameter of {where} must be a numpy Generator. Got {type(rng).__name__}."
        )
    seed = int(rng.integers(0, 2**31 - 1))
    if name == "complete":
        return nx.complete_graph(n)
    if name == "ring":
        return nx.cycle_graph(n)
    if name == "small_world":
        return nx.connected_watts_strogatz_graph(n, min(4, n - 1), 0.1, seed=seed)
    if name == "scale_free":
        return nx.barabasi_albert_graph(n, 2, seed=seed)
    if name == "star":
        return nx.star_graph(n - 1)
    if name == "random":
        m = int(np.clip(n_edges, 1, n * (n - 1) // 2))
        return nx.gnm_random_graph(n, m, seed=seed)
    raise AssertionError(name)  # unreachable: check_choice above


@dataclass(frozen=True)
class FixedResult:
    """A fixed configuration with its best uniform split ``r0`` and total knowledge."""

    name: str
    r0: float
    objective: float
    budget: Budget


def best_fixed(
    model: ResearchModel, graph: nx.Graph, name: str, support: Support, r0_grid: np.ndarray
) -> FixedResult:
    """Evaluate ``graph`` for every ``r0`` in the grid (batched) and keep the best."""
    where = "best_fixed"
    if not isinstance(model, ResearchModel):
        raise InputError(
            f"The 'model' parameter of {where} must be a ResearchModel. Got {type(model).__name__}."
        )
    r0_grid = as_float_array(r0_grid, "r0_grid", where, ndim=1)
    if r0_grid.min() < 0 or r0_grid.max() > 1:
        raise InputError(
            f"The 'r0_grid' parameter of {where} must lie in [0, 1] (own-research shares). Got "
            f"values in [{r0_grid.min():.4g}, {r0_grid.max():.4g}]."
        )
    budgets = [budget_from_graph(graph, float(r0), support) for r0 in r0_grid]
    r = torch.stack([b.r for b in budgets])
    w = torch.stack([b.w for b in budgets])
    with torch.no_grad():
        if not model.batches(support.n):
            values = torch.stack([model.total_knowledge(b) for b in budgets])
        else:
            values = model.total_knowledge(Budget(support, r, w))
    best = int(torch.argmax(values))
    return FixedResult(name, float(r0_grid[best]), float(values[best]), budgets[best])
