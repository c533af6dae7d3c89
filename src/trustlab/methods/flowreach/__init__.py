"""flowreach: probabilistic NN verification with learned reach sets.

Flow matching on network outputs + split-conformal calibration of the flow's latent ball +
bounded adaptive multilevel splitting (AMS) for the unsafe set's probability, after a
falsification pass whose witnesses are re-checked on onnxruntime. Baselines: box / ellipsoid /
PCA-zonotope conformal reach sets, Monte Carlo, IBP and CROWN.
"""

from trustlab.methods.flowreach.ams import (
    AMSResult,
    bounded_ams,
    restricted_gaussian,
    restricted_tail_exact,
)
from trustlab.methods.flowreach.bounds import BoundResult, crown_bounds, ibp_bounds, prove_region
from trustlab.methods.flowreach.conformal import (
    BoxReachSet,
    EllipsoidReachSet,
    FlowReachSet,
    ZonotopeReachSet,
    calibrated_threshold,
    pac_rank,
)
from trustlab.methods.flowreach.falsify import (
    Counterexample,
    FalsificationResult,
    falsify,
    margin_np,
    margin_torch,
    sample_box,
)
from trustlab.methods.flowreach.flow import FlowMatching, VelocityMLP
from trustlab.methods.flowreach.synthetic import deep_relu_instance
from trustlab.methods.flowreach.verifier import (
    METHODS,
    InstanceResult,
    VerifySettings,
    format_witness,
    verify_instance,
)

__all__ = [
    "METHODS",
    "AMSResult",
    "BoundResult",
    "BoxReachSet",
    "Counterexample",
    "EllipsoidReachSet",
    "FalsificationResult",
    "FlowMatching",
    "FlowReachSet",
    "InstanceResult",
    "VelocityMLP",
    "VerifySettings",
    "ZonotopeReachSet",
    "bounded_ams",
    "calibrated_threshold",
    "crown_bounds",
    "deep_relu_instance",
    "falsify",
    "format_witness",
    "ibp_bounds",
    "margin_np",
    "margin_torch",
    "pac_rank",
    "prove_region",
    "restricted_gaussian",
    "restricted_tail_exact",
    "sample_box",
    "verify_instance",
]
