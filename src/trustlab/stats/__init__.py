"""Shared statistics substrate: conformal ranks, binomial bounds, calibration, bootstrap.

Every interval and threshold here states its ``alpha`` (the miscoverage) or
``confidence_level`` explicitly; bad arguments raise ``trustlab.core.errors.InputError``.
"""

from trustlab.stats.auc import AUCDifference, AUCInterval, roc_auc_ci, roc_auc_difference
from trustlab.stats.binomial import (
    beta_posterior_quantile,
    clopper_pearson,
    clopper_pearson_lower,
    clopper_pearson_upper,
    hoeffding,
    jeffreys,
    wilson,
)
from trustlab.stats.bootstrap import BootstrapResult, bootstrap_ci, check_random_state
from trustlab.stats.calibration import (
    CalibrationBins,
    calibration_bins,
    calibration_by_cell,
    classwise_ece,
    ece,
    reliability_diagram,
    worst_cell_ece,
)
from trustlab.stats.conformal import conformal_pvalues, conformal_quantile, conformal_rank
from trustlab.stats.proportions import (
    DifferenceInterval,
    newcombe_difference,
    newcombe_paired_difference,
    paired_difference,
)

__all__ = [
    "AUCDifference",
    "AUCInterval",
    "BootstrapResult",
    "CalibrationBins",
    "DifferenceInterval",
    "beta_posterior_quantile",
    "bootstrap_ci",
    "calibration_bins",
    "calibration_by_cell",
    "check_random_state",
    "classwise_ece",
    "clopper_pearson",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "conformal_pvalues",
    "conformal_quantile",
    "conformal_rank",
    "ece",
    "hoeffding",
    "jeffreys",
    "newcombe_difference",
    "newcombe_paired_difference",
    "paired_difference",
    "reliability_diagram",
    "roc_auc_ci",
    "roc_auc_difference",
    "wilson",
    "worst_cell_ece",
]
