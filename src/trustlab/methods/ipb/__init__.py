"""Integral Probability Boundaries (IPB): the whole (E_P f, E_Q f) trade-off, not one IPM gap.

Estimators of the boundary of the joint range for three function classes (tests via a
P-vs-Q score, bounded Lipschitz functions via linear programming, an RKHS ball in closed
form), each with a finite-sample confidence band, plus analytic references (Gaussian ROC,
hockey-stick lines, f-divergence inversion) and the comparison used by the applications.
"""

from trustlab.methods.ipb.analytic import (
    binary_divergence,
    fdiv_boundary,
    fdiv_lower_boundary,
    gaussian_divergence,
    gaussian_hockey_stick,
    gaussian_roc,
    hockey_stick_envelope,
)
from trustlab.methods.ipb.base import BoundaryEstimator, TargetBound
from trustlab.methods.ipb.kernel import (
    KernelBoundary,
    ellipse_boundary,
    gaussian_embedding_gram,
    gaussian_kernel,
    median_bandwidth,
)
from trustlab.methods.ipb.lipschitz import LipschitzBoundary, lipschitz_edges, lipschitz_lp
from trustlab.methods.ipb.roc import TestBoundary, dkw_epsilon, roc_hull, roc_points, upper_hull
from trustlab.methods.ipb.scenarios import (
    DigitsGenerator,
    MixtureShift,
    compare_bounds,
    compare_gap_bounds,
    gaussian_shift,
    rare_group,
    tilted_policy,
)

__all__ = [
    "BoundaryEstimator",
    "DigitsGenerator",
    "KernelBoundary",
    "LipschitzBoundary",
    "MixtureShift",
    "TargetBound",
    "TestBoundary",
    "binary_divergence",
    "compare_bounds",
    "compare_gap_bounds",
    "dkw_epsilon",
    "ellipse_boundary",
    "fdiv_boundary",
    "fdiv_lower_boundary",
    "gaussian_divergence",
    "gaussian_embedding_gram",
    "gaussian_hockey_stick",
    "gaussian_kernel",
    "gaussian_roc",
    "gaussian_shift",
    "hockey_stick_envelope",
    "lipschitz_edges",
    "lipschitz_lp",
    "median_bandwidth",
    "rare_group",
    "roc_hull",
    "roc_points",
    "tilted_policy",
    "upper_hull",
]
