"""CIFAR-10's class names (label order) and the class tree hierarchical methods use.

The tree groups the ten classes as vehicles{road{automobile, truck}, other{airplane, ship}} /
animals{mammals{cat, deer, dog, horse}, non-mammals{bird, frog}} — the semantic hierarchy used
for CIFAR-10 in the hierarchical-classification literature. It is a plain nested mapping (inner
nodes to children, leaves as lists), so any hierarchy type can be built from it.
"""

from __future__ import annotations

from trustlab.datasets.cifar10h import CIFAR10_CLASSES

__all__ = ["CIFAR10_CLASSES", "CIFAR10_TREE", "cifar10_parents"]

CIFAR10_TREE: dict[str, dict[str, list[str]]] = {
    "vehicles": {"road": ["automobile", "truck"], "other": ["airplane", "ship"]},
    "animals": {"mammals": ["cat", "deer", "dog", "horse"], "non-mammals": ["bird", "frog"]},
}


def cifar10_parents(root: str = "cifar10") -> dict[str, str | None]:
    """The tree as a parent map ``{node: parent}`` (``root`` has parent ``None``)."""
    parents: dict[str, str | None] = {root: None}
    for top, groups in CIFAR10_TREE.items():
        parents[top] = root
        for group, leaves in groups.items():
            parents[group] = top
            for leaf in leaves:
                parents[leaf] = group
    return parents
