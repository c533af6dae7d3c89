"""Data for HCC: random hierarchies with sibling-confused scores, digits, and the CIFAR-10 tree.

- :func:`random_hierarchy`: a random tree built top-down by splitting the classes into 2 to
  ``max_branching`` groups until each group is one class.
- :func:`synthetic_scores`: softmax scores whose logit for class ``k`` grows with the depth of
  the lowest common ancestor of ``k`` and the true class, plus noise shared along tree paths,
  so that mistakes fall mostly on siblings and cousins of the true class.
- :func:`digits_task`: scikit-learn's digits, a logistic regression on a few PCA components
  trained in-process, and a hierarchy built by average-linkage clustering of the classes on
  the confusion matrix of cross-validated predictions *on the training split* (so the tree
  never sees the calibration or test labels).
- :data:`CIFAR10_TREE`: vehicles{road{automobile, truck}, other{airplane, ship}} /
  animals{mammals{cat, deer, dog, horse}, non-mammals{bird, frog}}.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from trustlab.core.validation import check_scalar
from trustlab.datasets.cifar10 import CIFAR10_CLASSES, CIFAR10_TREE
from trustlab.datasets.digits import load_digits
from trustlab.methods.hcc.hierarchy import Hierarchy
from trustlab.stats import check_random_state

__all__ = [
    "CIFAR10_TREE",
    "LabelledScores",
    "SyntheticTask",
    "cifar10_hierarchy",
    "digits_task",
    "random_hierarchy",
    "synthetic_scores",
]

def cifar10_hierarchy() -> Hierarchy:
    """The CIFAR-10 tree with classes in CIFAR-10 label order."""
    return Hierarchy.from_nested(CIFAR10_TREE, classes=CIFAR10_CLASSES)


@dataclass(frozen=True)
class LabelledScores:
    """Class probabilities with true labels over a hierarchy."""

    hierarchy: Hierarchy
    probs: NDArray[np.float64]
    labels: NDArray[np.int64]
    name: str
    note: str = ""


def random_hierarchy(
    rng: np.random.Generator, n_classes: int, *, max_branching: int = 4
) -> Hierarchy:
    """A random tree over ``n_classes`` leaves (``c0``...), internal nodes ``n0``... (root ``n0``)."""
    rng = check_random_state(rng, "rng", "random_hierarchy")
    n_classes = check_scalar(n_classes, "n_classes", "random_hierarchy", kind=int, lo=2)
    max_branching = check_scalar(max_branching, "max_branching", "random_hierarchy", kind=int, lo=2)
    parents: dict[str, str | None] = {}
    counter = iter(range(10 * n_classes))
    stack: list[tuple[list[int], str | None]] = [(list(range(n_classes)), None)]
    while stack:
        group, parent = stack.pop()
        if len(group) == 1:
            parents[f"c{group[0]}"] = parent
            continue
        name = f"n{next(counter)}"
        parents[name] = parent
        k = int(rng.integers(2, min(max_branching, len(group)) + 1))
        perm = rng.permutation(group)
        cuts = np.sort(rng.choice(np.arange(1, len(group)), size=k - 1, replace=False))
        for part in np.split(perm, cuts):
            stack.append((sorted(int(i) for i in part), name))
    return Hierarchy.from_parents(parents, classes=[f"c{i}" for i in range(n_classes)])


def synthetic_scores(
    hierarchy: Hierarchy,
    n: int,
    rng: np.random.Generator,
    *,
    signal: float = 4.0,
    noise: float = 1.5,
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Softmax scores with confusion concentrated among siblings, and uniform true labels.

    Every node on the path from the root to the true class adds ``signal / (D + 1)`` to the
    logits of all classes under it (``D`` the tree depth), so class ``k`` gets a bonus growing
    with the depth of its common ancestor with the true class. Every node also draws Gaussian
    noise of variance ``noise^2 / (D + 1)`` that is shared by all classes under it.
    """
    where = "synthetic_scores"
    h = Hierarchy.build(hierarchy)
    n = check_scalar(n, "n", where, kind=int, lo=1)
    rng = check_random_state(rng, "rng", where)
    signal = check_scalar(signal, "signal", where, lo=0.0)
    noise = check_scalar(noise, "noise", where, lo=0.0)
    d = float(h.depth.max() + 1)
    y = rng.integers(0, h.n_classes, size=n)
    node = np.zeros((n, h.n_nodes))
    node[:, :] = h.membership[:, y].T * (signal / d)
    node += rng.normal(scale=noise / np.sqrt(d), size=(n, h.n_nodes))
    logits = h._sum_down(node)[:, h.leaf_node]
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True), y


class SyntheticTask(BaseModel):
    """A random hierarchy with sibling-confused scores (a config section and its generator)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    classes: int = Field(40, ge=2, description="Leaves of the random hierarchy.")
    points: int = Field(10000, ge=200, description="Synthetic points.")
    max_branching: int = Field(4, ge=2, description="Max children per random node.")
    signal: float = Field(
        6.0, gt=0.0, description="Logit bonus along the true class's path (higher = easier)."
    )
    noise: float = Field(
        1.5, ge=0.0, description="Std of the path-shared logit noise (sibling confusion)."
    )

    def generate(self, rng: np.random.Generator) -> LabelledScores:
        """Draw the tree, then the scores and labels, from one generator."""
        h = random_hierarchy(rng, self.classes, max_branching=self.max_branching)
        p, y = synthetic_scores(h, self.points, rng, signal=self.signal, noise=self.noise)
        acc = float((p.argmax(axis=1) == y).mean())
        note = (
            f"synthetic: random tree with {h.n_classes} classes, {h.n_nodes} nodes, depth "
            f"{int(h.depth.max())}; {len(y)} points; top-1 accuracy {acc:.3f}."
        )
        return LabelledScores(h, p, y, "synthetic", note)


def digits_task(
    rng: np.random.Generator, *, n_components: int = 8, train_fraction: float = 0.4
) -> tuple[LabelledScores, dict[str, float]]:
    """Digits with an in-process classifier; returns held-out probabilities and a confusion tree.

    The classifier is a logistic regression on ``n_components`` PCA features (few components
    keep it imperfect, so prediction sets are not all singletons). The returned points are
    those not used for training, in random order; split them into calibration and test.
    """
    from scipy.cluster.hierarchy import linkage, to_tree
    from scipy.spatial.distance import squareform
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import confusion_matrix
    from sklearn.model_selection import cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    where = "digits_task"
    rng = check_random_state(rng, "rng", where)
    n_components = check_scalar(n_components, "n_components", where, kind=int, lo=1, hi=64)
    # 5-fold cross-validation on the training split needs a few images of every digit
    train_fraction = check_scalar(train_fraction, "train_fraction", where, lo=0.05, hi=0.95)

    train, held_out = load_digits().split(train_fraction, rng)
    x_tr, y_tr = train.counts, train.labels
    n_train = len(train)
    seed = int(rng.integers(0, 2**31 - 1))
    model = make_pipeline(
        StandardScaler(),
        PCA(n_components=n_components, random_state=seed),
        LogisticRegression(max_iter=2000),
    )
    cv_pred = cross_val_predict(model, x_tr, y_tr, cv=5)
    conf = confusion_matrix(y_tr, cv_pred, labels=range(10)).astype(float)
    conf /= conf.sum(axis=1, keepdims=True)
    sim = conf + conf.T
    np.fill_diagonal(sim, 0.0)
    dist = 1.0 - sim / max(sim.max(), 1e-12)
    np.fill_diagonal(dist, 0.0)
    tree = to_tree(linkage(squareform(dist, checks=False), method="average"))
    parents: dict[str, str | None] = {}

    def walk(nd, parent: str | None) -> None:
        name = f"d{nd.id}" if nd.is_leaf() else f"g{nd.id}"
        parents[name] = parent
        if not nd.is_leaf():
            walk(nd.get_left(), name)
            walk(nd.get_right(), name)

    walk(tree, None)
    h = Hierarchy.from_parents(parents, classes=[f"d{k}" for k in range(10)])
    model.fit(x_tr, y_tr)
    probs = model.predict_proba(held_out.counts)
    acc = float((probs.argmax(axis=1) == held_out.labels).mean())
    note = (
        f"digits: logistic regression on {n_components} PCA components, trained on "
        f"{n_train} images; held-out accuracy {acc:.3f}; hierarchy = average-linkage "
        "clustering of the classes on 1 - symmetrised cross-validated confusion (training split)."
    )
    return LabelledScores(h, probs, held_out.labels, "digits", note), {"accuracy": acc}
