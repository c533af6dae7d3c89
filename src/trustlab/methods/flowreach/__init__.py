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
from trustlab.methods.flowreach.bounds import (
    BaBResult,
    BoundResult,
    BoxSearch,
    crown_bounds,
    crown_bounds_batch,
    ibp_bounds,
    output_upper_bound,
    prove_region,
    prove_region_bab,
)
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
    polish_lp,
    sample_box,
)
from trustlab.methods.flowreach.flow import FlowMatching, VelocityMLP
from trustlab.methods.flowreach.results import (
    SIDECAR_SCHEMA,
    is_wrong,
    recheck_witness,
    vnncomp_score,
    write_result,
    written_answer,
)
from trustlab.methods.flowreach.synthetic import (
    TightSpecInfo,
    deep_relu_instance,
    tight_relu_instance,
)
from trustlab.methods.flowreach.verifier import (
    GUARANTEES,
    METHODS,
    InstanceResult,
    VerifySettings,
    format_witness,
    min_certificate,
    verify_instance,
)

__all__ = [
    "GUARANTEES",
    "METHODS",
    "SIDECAR_SCHEMA",
    "AMSResult",
    "BaBResult",
    "BoundResult",
    "BoxReachSet",
    "BoxSearch",
    "Counterexample",
    "EllipsoidReachSet",
    "FalsificationResult",
    "FlowMatching",
    "FlowReachSet",
    "InstanceResult",
    "TightSpecInfo",
    "VelocityMLP",
    "VerifySettings",
    "ZonotopeReachSet",
    "bounded_ams",
    "calibrated_threshold",
    "crown_bounds",
    "crown_bounds_batch",
    "deep_relu_instance",
    "falsify",
    "format_witness",
    "ibp_bounds",
    "is_wrong",
    "margin_np",
    "margin_torch",
    "min_certificate",
    "output_upper_bound",
    "pac_rank",
    "polish_lp",
    "prove_region",
    "prove_region_bab",
    "recheck_witness",
    "restricted_gaussian",
    "restricted_tail_exact",
    "sample_box",
    "tight_relu_instance",
    "verify_instance",
    "vnncomp_score",
    "write_result",
    "written_answer",
]
