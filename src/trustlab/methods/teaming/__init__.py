"""Human-AI teaming through the lens of calibration: combination vs delegation.

Measure calibration per cell of a partition (:mod:`.partitions`), combine a human with a
model (:mod:`.combination`), or delegate each point to one of them (:mod:`.delegation`),
on a synthetic team calibrated per cell by construction (:mod:`.synthetic`) or on real data.
"""

from trustlab.methods.teaming.annotators import PrecisionAnnotator, votes_team
from trustlab.methods.teaming.combination import (
    ConfusionMatrixCombiner,
    ProductOfExpertsCombiner,
    TemperatureScaling,
    WeightedAverageCombiner,
)
from trustlab.methods.teaming.delegation import (
    CAPACITIES,
    ConfidenceDelegator,
    L2DSurrogateDelegator,
    OneVsAllDelegator,
    OracleDelegator,
    delegation_features,
    make_meta_classifier,
    team_probs,
)
from trustlab.methods.teaming.partitions import (
    KMeansPartition,
    PartitionCalibration,
    confidence_class_cells,
    function_cells,
    labels_to_probs,
    partition_calibration,
    partition_calibration_ci,
    reliability_diagrams_by_cell,
)
from trustlab.methods.teaming.synthetic import SyntheticTeam, TeamingData, make_teaming_data

__all__ = [
    "CAPACITIES",
    "ConfidenceDelegator",
    "ConfusionMatrixCombiner",
    "KMeansPartition",
    "L2DSurrogateDelegator",
    "OneVsAllDelegator",
    "OracleDelegator",
    "PartitionCalibration",
    "PrecisionAnnotator",
    "ProductOfExpertsCombiner",
    "SyntheticTeam",
    "TeamingData",
    "TemperatureScaling",
    "WeightedAverageCombiner",
    "confidence_class_cells",
    "delegation_features",
    "function_cells",
    "labels_to_probs",
    "make_meta_classifier",
    "make_teaming_data",
    "partition_calibration",
    "partition_calibration_ci",
    "reliability_diagrams_by_cell",
    "team_probs",
    "votes_team",
]
