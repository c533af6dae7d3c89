"""research-net: optimising networks of researcher agents for knowledge discovery.

Each agent splits a budget of 1 between its own research and attention to others; a
differentiable model turns the split into per-agent knowledge (one-hop, Katz-Bonacich
diffusion, or idea coverage), and gradient ascent on all edge weights searches for the network
that maximises total knowledge. See docs/methods/research-net.md.
"""

from trustlab.methods.research_net.analysis import (
    NetworkStats,
    Roles,
    attention_graph,
    bimodality_coefficient,
    network_stats,
    null_network_stats,
    split_roles,
)
from trustlab.methods.research_net.baselines import (
    FIXED_TOPOLOGIES,
    FixedResult,
    best_fixed,
    fixed_topology,
)
from trustlab.methods.research_net.budget import (
    Budget,
    Support,
    budget_from_graph,
    project_budget,
    softmax_budget,
)
from trustlab.methods.research_net.model import (
    Formulation,
    ResearchModel,
    gini,
    katz_bonacich,
    katz_bonacich_iterative,
)
from trustlab.methods.research_net.optimise import NetworkOptimiser, OptimiserSettings, Restart

__all__ = [
    "FIXED_TOPOLOGIES",
    "Budget",
    "FixedResult",
    "Formulation",
    "NetworkOptimiser",
    "NetworkStats",
    "OptimiserSettings",
    "ResearchModel",
    "Restart",
    "Roles",
    "Support",
    "attention_graph",
    "best_fixed",
    "bimodality_coefficient",
    "budget_from_graph",
    "fixed_topology",
    "gini",
    "katz_bonacich",
    "katz_bonacich_iterative",
    "network_stats",
    "null_network_stats",
    "project_budget",
    "softmax_budget",
    "split_roles",
]
