"""datasets.digits and datasets.cifar10: one digits loader, the CIFAR-10 class tree."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.datasets.cifar10 import CIFAR10_CLASSES, CIFAR10_TREE, cifar10_parents
from trustlab.datasets.digits import Digits, load_digits


@pytest.fixture(scope="module")
def digits() -> Digits:
    return load_digits()


def test_digits_match_scikit_learn(digits):
    from sklearn.datasets import load_digits as sk

    x, y = sk(return_X_y=True)
    assert len(digits) == 1797 and digits.images.shape == (1797, 8, 8)
    np.testing.assert_array_equal(digits.counts, x)
    np.testing.assert_array_equal(digits.labels, y)
    assert digits.images.min() == 0.0 and digits.images.max() == 1.0
    assert digits.channels_first.shape == (1797, 1, 8, 8)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.05, 0.95), st.integers(0, 2**31 - 1))
def test_split_is_a_seeded_partition(fraction, seed):
    d = load_digits()
    train, test = d.split(fraction, seed)
    again, _ = d.split(fraction, np.random.default_rng(seed))
    assert len(train) == int(fraction * len(d)) and len(train) + len(test) == len(d)
    np.testing.assert_array_equal(train.labels, again.labels)
    np.testing.assert_array_equal(np.sort(np.concatenate([train.labels, test.labels])),
                                  np.sort(d.labels))


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1e-9, True])
def test_split_rejects_fractions_leaving_a_side_empty(digits, bad):
    with pytest.raises(InputError, match="train_fraction"):
        digits.split(bad, 0)


def test_class_filter(digits):
    only = load_digits(classes=(3, 8))
    assert set(only.labels.tolist()) == {3, 8}
    assert len(only) == int(np.isin(digits.labels, [3, 8]).sum())
    with pytest.raises(InputError, match="digits 0-9"):
        load_digits(classes=(10,))


def test_cifar10_tree_covers_each_class_once():
    leaves = [leaf for groups in CIFAR10_TREE.values() for ls in groups.values() for leaf in ls]
    assert sorted(leaves) == sorted(CIFAR10_CLASSES) and len(leaves) == 10
    parents = cifar10_parents()
    assert parents["cifar10"] is None and parents["cat"] == "mammals"
    assert parents["mammals"] == "animals" and parents["animals"] == "cifar10"
