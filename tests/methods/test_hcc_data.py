"""HCC data: generators, the digits task, the CIFAR-10H loader (realdata), and the experiment."""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.core.errors import DataError, InputError
from trustlab.methods.hcc import HCC
from trustlab.methods.hcc.baselines import LCAFlat
from trustlab.methods.hcc.data import (
    cifar10_hierarchy,
    digits_task,
    random_hierarchy,
    synthetic_scores,
)


def test_random_hierarchy_is_a_valid_tree():
    rng = np.random.default_rng(0)
    h = random_hierarchy(rng, 57, max_branching=5)
    assert h.n_classes == 57 and h.n_leaves[0] == 57
    kids = np.array([len(c) for c in h.children])
    assert kids.max() <= 5 and (kids[~h.is_leaf] >= 2).all()
    assert (h.membership.sum(axis=0) == h.depth[h.leaf_node] + 1).all()
    with pytest.raises(InputError):
        random_hierarchy(rng, 1)


def test_synthetic_confusion_concentrates_on_siblings():
    rng = np.random.default_rng(1)
    h = random_hierarchy(rng, 30)
    p, y = synthetic_scores(h, 4000, rng)
    assert np.allclose(p.sum(axis=1), 1.0)
    wrong = p.argmax(axis=1) != y
    pred = p.argmax(axis=1)[wrong]
    # depth of the common ancestor of the mistaken class and the truth, vs random classes
    both = h.membership[:, pred] & h.membership[:, y[wrong]]
    lca_depth = (both * h.depth[:, None]).max(axis=0)
    other = rng.integers(0, 30, size=pred.size)
    both_r = h.membership[:, other] & h.membership[:, y[wrong]]
    rand_depth = (both_r * h.depth[:, None]).max(axis=0)
    assert lca_depth.mean() > rand_depth.mean() + 0.3


def test_synthetic_is_deterministic_for_a_seed():
    a = synthetic_scores(
        random_hierarchy(np.random.default_rng(3), 12), 50, np.random.default_rng(4)
    )
    b = synthetic_scores(
        random_hierarchy(np.random.default_rng(3), 12), 50, np.random.default_rng(4)
    )
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_digits_task_builds_a_tree_and_useful_classifier():
    data, info = digits_task(np.random.default_rng(0))
    assert data.hierarchy.n_classes == 10
    assert data.probs.shape == (len(data.labels), 10)
    assert 0.6 < info["accuracy"] < 0.99
    n = len(data.labels) // 2
    sets = HCC(data.hierarchy, 0.1).fit(data.probs[:n], data.labels[:n]).predict(data.probs[n:])
    assert sets.coverage(data.labels[n:]) >= 0.86


@pytest.mark.realdata
def test_cifar10h_hcc_covers_and_beats_lca():
    from trustlab.datasets.cifar10h import default_cifar10h_dir, load_cifar10h

    root = default_cifar10h_dir()
    if not root.is_dir():
        pytest.skip(f"CIFAR-10H not available here: {root} (CC BY-NC-SA, never bundled)")
    c = load_cifar10h("resnet-110", root)
    assert c.probs.shape == (10000, 10) and c.labels.min() == 0 and c.labels.max() == 9
    assert (c.human_counts.argmax(axis=1) == c.labels).mean() > 0.95  # 0-indexed labels
    h = cifar10_hierarchy()
    rng = np.random.default_rng(0)
    covs, hcc_leaves, lca_leaves = [], [], []
    for _ in range(10):
        perm = rng.permutation(10000)
        cal, test = perm[:5000], perm[5000:]
        for alpha in (0.01, 0.05):
            s = HCC(h, alpha).fit(c.probs[cal], c.labels[cal]).predict(c.probs[test])
            lca = LCAFlat(h, alpha).fit(c.probs[cal], c.labels[cal]).predict(c.probs[test])
            covs.append(s.coverage(c.labels[test]) - (1 - alpha))
            hcc_leaves.append(s.mean_leaves())
            lca_leaves.append(lca.mean_leaves())
    assert np.mean(covs) >= -0.005
    assert np.mean(hcc_leaves) <= np.mean(lca_leaves)


def test_cifar10h_loader_errors(tmp_path):
    from trustlab.datasets.cifar10h import load_cifar10h

    with pytest.raises(DataError, match="not found"):
        load_cifar10h("resnet-110", tmp_path)
    with pytest.raises(InputError, match="'model'"):
        load_cifar10h("vgg", tmp_path)


def test_cifar10h_section_is_shared_and_a_typo_is_a_config_error(tmp_path):
    """One section name and one model type in hcc and teaming; --set cifar10h.dir=/typo fails
    at config time instead of running without the data (issue 38)."""
    from trustlab.core import ConfigError, get_experiment, resolve_config
    from trustlab.datasets.cifar10h import Cifar10HSource

    for method in ("hcc", "teaming"):
        cls = get_experiment(method).config_cls
        field = cls.model_fields["cifar10h"]
        assert issubclass(field.annotation, Cifar10HSource)
        with pytest.raises(ConfigError, match=r"cifar10h\.dir"):
            resolve_config(cls, overrides=[f"cifar10h.dir={tmp_path / 'typo'}"])
        cfg = resolve_config(cls, overrides=["cifar10h.enabled=false", "cifar10h.model=densenet-bc-190"])
        assert not cfg.cifar10h.enabled and cfg.cifar10h.model == "densenet-bc-190"
        assert cfg.cifar10h.load() is None and "switched off" in cfg.cifar10h.absent_note()
        assert not resolve_config(cls, overrides=["cifar10h=false"]).cifar10h.enabled
        with pytest.raises(ConfigError, match=r"cifar10h\.model"):
            resolve_config(cls, overrides=["cifar10h.model=vgg"])
    # a folder that exists but lacks the file is a DataError, not a skip
    with pytest.raises(DataError, match="not found"):
        Cifar10HSource(dir=str(tmp_path)).load()
