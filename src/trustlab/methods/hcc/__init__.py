"""Hierarchical Conformal Classification (den Hengst et al., arXiv 2508.13288).

Conformal prediction sets made of nodes of a class hierarchy, with finite-sample marginal
coverage, plus the flat and hierarchical baselines it is compared with.
"""

from trustlab.methods.hcc.baselines import (
    FlatConformal,
    LCAFlat,
    MortierRNode,
    MortierSingleNode,
    budget_cover,
)
from trustlab.methods.hcc.data import (
    CIFAR10_TREE,
    SyntheticTask,
    cifar10_hierarchy,
    digits_task,
    random_hierarchy,
    synthetic_scores,
)
from trustlab.methods.hcc.hcc import (
    HCC,
    coverage,
    leaf_scores,
    mean_depth,
    mean_leaves,
    mean_nodes,
)
from trustlab.methods.hcc.hierarchy import Hierarchy, NodeSets, min_cost_cover

__all__ = [
    "CIFAR10_TREE",
    "HCC",
    "FlatConformal",
    "Hierarchy",
    "LCAFlat",
    "MortierRNode",
    "MortierSingleNode",
    "NodeSets",
    "SyntheticTask",
    "budget_cover",
    "cifar10_hierarchy",
    "coverage",
    "digits_task",
    "leaf_scores",
    "mean_depth",
    "mean_leaves",
    "mean_nodes",
    "min_cost_cover",
    "random_hierarchy",
    "synthetic_scores",
]
