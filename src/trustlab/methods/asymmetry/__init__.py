"""asymmetry: alignment-utility asymmetry under invertible, semantic-preserving transforms.

Library modules (the experiment is not imported here): :mod:`.transforms` (the registry of
exactly invertible encode/decode pairs).
"""

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
    "Transform",
    "compose",
    "make_transform",
]
