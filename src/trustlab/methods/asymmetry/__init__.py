"""asymmetry: alignment-utility asymmetry under invertible, semantic-preserving transforms.

Library modules (the experiment is not imported here): :mod:`.transforms` (the registry of
exactly invertible encode/decode pairs), :mod:`.scope` (which model can read which
transform), :mod:`.adaptation` (encoded benign fine-tuning data, fine-tuning, in-context
examples, the evaluation-loop adapter), :mod:`.protocol` (the gate and Δharm − Δutility),
:mod:`.study` (prompt sets and evaluation cells of one pairing) and :mod:`.report`.
"""

from trustlab.methods.asymmetry.adaptation import (
    ForEvaluation,
    InContext,
    adaptation_data,
    cipher_curriculum,
    finetune_adapted,
)
from trustlab.methods.asymmetry.protocol import AsymmetryResult, asymmetry
from trustlab.methods.asymmetry.scope import (
    Scope,
    check_scope,
    closed_vocabulary,
    vocabulary_substitution,
)
from trustlab.methods.asymmetry.transforms import (
    TRANSFORMS,
    Composed,
    Transform,
    compose,
    make_transform,
)

__all__ = [
    "TRANSFORMS",
    "AsymmetryResult",
    "Composed",
    "ForEvaluation",
    "InContext",
    "Scope",
    "Transform",
    "adaptation_data",
    "asymmetry",
    "check_scope",
    "cipher_curriculum",
    "closed_vocabulary",
    "compose",
    "finetune_adapted",
    "make_transform",
    "vocabulary_substitution",
]
