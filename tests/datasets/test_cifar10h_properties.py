"""Issue 38's property tests for CIFAR-10H: simulated annotators only give labels somebody voted
for, follow the vote shares, and are reproducible from their seed; a synthetic Kerrigan CSV
reads back column by column; the config section switches and points the loader."""

from __future__ import annotations

import lzma

import numpy as np
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.core.errors import DataError, InputError
from trustlab.datasets.cifar10h import (
    CIFAR10H_MODELS,
    Cifar10H,
    Cifar10HSource,
    default_cifar10h_dir,
    load_cifar10h,
    sample_human_labels,
)

from ..malformed import RNG, SAMPLES, Case, Mutation, malformed_input_tests

SOME = settings(max_examples=30, deadline=None, derandomize=True)
COUNTS = np.array([[3.0, 0, 1], [0, 5, 0], [1, 1, 1], [0, 0, 2]])

CASES = [Case("sample_human_labels", sample_human_labels, {"human_counts": COUNTS, "rng": 4},
              {"human_counts": SAMPLES.extend(
                  Mutation("negative count", lambda c, r: -np.asarray(c)),
                  Mutation("a row without votes", lambda c, r: np.vstack([c, np.zeros(3)]))),
               "rng": RNG})]
test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


@SOME
@given(st.lists(st.lists(st.integers(0, 6), min_size=3, max_size=3).filter(any), min_size=1,
                max_size=20), st.integers(0, 2**16))
def test_simulated_annotators_pick_voted_labels_reproducibly(rows, seed):
    counts = np.array(rows, dtype=float)
    labels = sample_human_labels(counts, seed)
    assert labels.shape == (len(rows),) and labels.dtype == np.int64
    assert np.all(counts[np.arange(len(rows)), labels] > 0)  # somebody voted for it
    assert np.array_equal(labels, sample_human_labels(counts, np.random.default_rng(seed)))


def test_simulated_annotators_follow_the_vote_shares():
    counts = np.tile([[1.0, 3.0, 0.0, 6.0]], (20000, 1))
    share = np.bincount(sample_human_labels(counts, 0), minlength=4) / 20000
    np.testing.assert_allclose(share, [0.1, 0.3, 0.0, 0.6], atol=0.015)


@pytest.mark.parametrize("model", sorted(CIFAR10H_MODELS))
def test_a_synthetic_kerrigan_file_reads_back(tmp_path, model):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 12)
    counts = rng.integers(0, 5, (12, 10)).astype(float)
    probs = rng.dirichlet(np.ones(10), 12)
    if model == "resnet-low-acc":  # counts, probs, 1-indexed label last
        table = np.column_stack([counts, probs * 3.0, labels + 1])
    else:
        table = np.column_stack([labels, counts, probs * 3.0])
    text = "\n".join(",".join(repr(float(v)) for v in row) for row in table)
    (tmp_path / CIFAR10H_MODELS[model]).write_bytes(lzma.compress(text.encode()))
    data = load_cifar10h(model, tmp_path)
    assert isinstance(data, Cifar10H) and data.model == model and len(data.classes) == 10
    np.testing.assert_array_equal(data.labels, labels)
    np.testing.assert_array_equal(data.human_counts, counts)
    np.testing.assert_allclose(data.probs, probs)  # renormalised rows
    source = Cifar10HSource(model=model, dir=str(tmp_path))
    assert source.root == tmp_path and source.load().labels.tolist() == labels.tolist()
    assert Cifar10HSource.model_validate(False).load() is None
    assert "switched off" in Cifar10HSource(enabled=False).absent_note()


def test_bad_sources_and_arguments():
    with pytest.raises(pydantic.ValidationError, match="does not exist"):
        Cifar10HSource(dir="/nonexistent/cifar10h")
    with pytest.raises(pydantic.ValidationError):
        Cifar10HSource(model="vgg")
    with pytest.raises(InputError, match="model"):
        load_cifar10h("vgg")
    with pytest.raises(InputError, match="root"):
        load_cifar10h("resnet-110", root=3)
    with pytest.raises(DataError, match="not found"):
        load_cifar10h("resnet-110", root="/nonexistent")
    assert default_cifar10h_dir().name == "cifar10h"
