"""asymmetry: alignment-utility asymmetry under invertible, semantic-preserving transforms.

Library modules (the experiment is not imported here): :mod:`.transforms` (the registry of
exactly invertible encode/decode pairs) and :mod:`.scope` (which model can read which
transform).
"""

from trustlab.methods.asymmetry.scope import (
    Scope,
    check_scope,
    closed_vocabulary,
    in_scope_pairs,
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
    "Composed",
    "Scope",
    "Transform",
    "check_scope",
    "closed_vocabulary",
    "compose",
    "in_scope_pairs",
    "make_transform",
    "vocabulary_substitution",
]
