"""core.validation: conversion, shapes, finiteness, ranges, label sets, emptiness, messages."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from trustlab.core.errors import InputError
from trustlab.core.validation import (
    as_float_array,
    check_choice,
    check_consistent_length,
    check_labels,
    check_path,
    check_probs,
    check_samples,
    check_scalar,
)

torch = pytest.importorskip("torch")


def _rows(n: int, k: int, seed: int = 0) -> np.ndarray:
    p = np.random.default_rng(seed).random((n, k)) + 0.01
    return p / p.sum(axis=1, keepdims=True)


# ---------------------------------------------------------------------------- conversion


@pytest.mark.parametrize("convert", [np.asarray, lambda a: a.tolist(), torch.as_tensor,
                                     pd.DataFrame, lambda a: torch.as_tensor(a).float()])
def test_probs_from_every_array_type_give_the_same_matrix(convert):
    p = _rows(5, 3)
    out = check_probs(convert(p), "probs", "f")
    np.testing.assert_allclose(out, p, atol=1e-6)
    assert out.dtype == np.float64


@pytest.mark.parametrize("bad", [None, "0.5", {"a": 1}, {1, 2}, (x for x in range(3)),
                                 iter([1.0, 2.0])])
def test_non_arrays_are_rejected_by_name(bad):
    with pytest.raises(InputError, match=r"'x' parameter of f must be an array"):
        as_float_array(bad, "x", "f")


def test_message_names_parameter_caller_expectation_and_input():
    with pytest.raises(InputError) as err:
        check_probs(np.ones((4, 3)), "model_probs", "Delegator.fit")
    text = str(err.value)
    assert "'model_probs' parameter of Delegator.fit" in text
    assert "sum to 1" in text and "off by 2" in text and "\n" not in text


def test_ragged_strings_booleans_complex_rejected():
    with pytest.raises(InputError, match="rectangular"):
        as_float_array([[1, 2], [3]], "x", "f")
    with pytest.raises(InputError, match="numeric"):
        as_float_array(["a", "b"], "x", "f")
    with pytest.raises(InputError, match="not boolean"):
        as_float_array(np.array([True, False]), "x", "f")
    with pytest.raises(InputError, match="complex"):
        as_float_array(np.array([1j]), "x", "f")


def test_tensor_is_detached_and_bfloat16_converted():
    t = torch.ones(3, 2, requires_grad=True).to(torch.bfloat16)
    assert as_float_array(t, "x").shape == (3, 2)


# ---------------------------------------------------------------------------- probs


def test_probs_shape_range_and_sums():
    with pytest.raises(InputError, match="2-D"):
        check_probs([0.2, 0.8], "p", "f")
    np.testing.assert_allclose(check_probs([0.2, 0.9], "p", "f", binary_1d=True),
                               [[0.8, 0.2], [0.1, 0.9]])
    with pytest.raises(InputError, match="at least 2"):
        check_probs(np.ones((3, 1)), "p", "f")
    with pytest.raises(InputError, match="4 columns"):
        check_probs(_rows(3, 3), "p", "f", n_classes=4)
    with pytest.raises(InputError, match="5 rows"):
        check_probs(_rows(3, 3), "p", "f", n_samples=5)
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        check_probs([[1.2, -0.2]], "p", "f")
    with pytest.raises(InputError, match="finite"):
        check_probs([[np.nan, 1.0]], "p", "f")
    with pytest.raises(InputError, match="empty"):
        check_probs(np.zeros((0, 3)), "p", "f")
    check_probs([[0.3, 0.3]], "p", "f", sum_to_one=False)


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5),
                  elements=st.floats(allow_nan=True, allow_infinity=True, width=64)))
def test_probs_property_valid_output_or_input_error(arr):
    """Whatever array comes in: an (n, K>=2) finite matrix in [0, 1] with unit rows, or InputError."""
    try:
        out = check_probs(arr, "p", "f")
    except InputError:
        return
    assert out.ndim == 2 and out.shape[1] >= 2 and out.shape[0] >= 1
    assert np.all(np.isfinite(out)) and np.all((out >= 0) & (out <= 1))
    assert np.allclose(out.sum(axis=1), 1.0, atol=1e-3)
    np.testing.assert_array_equal(out, arr)  # never reinterpreted


# ---------------------------------------------------------------------------- labels


def test_labels_indices_names_and_sets():
    np.testing.assert_array_equal(check_labels([0, 2, 1], "y", "f", n_classes=3), [0, 2, 1])
    np.testing.assert_array_equal(check_labels(np.array([1.0, 0.0]), "y", "f"), [1, 0])
    with pytest.raises(InputError, match=r"\[0, 3\)"):
        check_labels([0, 3], "y", "f", n_classes=3)
    with pytest.raises(InputError, match="integer"):
        check_labels([0.5, 1.0], "y", "f")
    with pytest.raises(InputError, match="booleans"):
        check_labels([True, False], "y", "f")
    with pytest.raises(InputError, match="4 entries"):
        check_labels([0, 1], "y", "f", n_samples=4)
    with pytest.raises(InputError, match="1-D"):
        check_labels([[0, 1]], "y", "f")
    with pytest.raises(InputError, match="empty"):
        check_labels([], "y", "f")
    names = ["cat", "dog", "eel"]
    np.testing.assert_array_equal(check_labels(["dog", "cat"], "y", "f", classes=names), [1, 0])
    with pytest.raises(InputError, match="'cow'"):
        check_labels(["dog", "cow"], "y", "f", classes=names)
    with pytest.raises(InputError, match="repeat"):
        check_labels([0], "y", "f", classes=["a", "a"])
    np.testing.assert_array_equal(
        check_labels(pd.Series(["eel", "cat"]), "y", "f", classes=names), [2, 0])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.integers(-3, 12), st.floats(allow_nan=True), st.booleans()),
                max_size=8), st.integers(1, 10))
def test_labels_property(values, k):
    try:
        out = check_labels(values, "y", "f", n_classes=k)
    except InputError:
        return
    assert out.dtype == np.int64 and out.shape == (len(values),)
    assert np.all((out >= 0) & (out < k))
    assert [float(v) for v in values] == [float(v) for v in out]


# ---------------------------------------------------------------------------- samples


def test_samples_shapes_and_minimums():
    assert check_samples([1.0, 2.0, 3.0], "x", "f").shape == (3, 1)
    with pytest.raises(InputError, match="at least 4"):
        check_samples(np.ones((3, 2)), "x", "f", min_n=4)
    with pytest.raises(InputError, match="2 feature"):
        check_samples(np.ones((3, 3)), "x", "f", n_features=2)
    with pytest.raises(InputError, match="1-D or 2-D"):
        check_samples(np.ones((3, 3, 1)), "x", "f")
    with pytest.raises(InputError, match="finite"):
        check_samples([1.0, np.inf], "x", "f")
    assert check_samples(np.zeros((0, 2)), "x", "f", min_n=0).shape == (0, 2)


def test_consistent_length_names_each_input():
    with pytest.raises(InputError, match="'probs' has 3, 'labels' has 2"):
        check_consistent_length("f", probs=np.ones((3, 2)), labels=[0, 1])
    assert check_consistent_length("f", a=[1, 2], b=np.ones(2)) == 2


# ---------------------------------------------------------------------------- scalars


def test_scalar_kinds_and_ranges():
    assert check_scalar(3, "n", "f", kind=int, lo=1) == 3
    assert check_scalar(24.0, "d", "f", kind=int) == 24
    for bad, match in ((24.5, "integer"), ("5", "integer"), (True, "integer")):
        with pytest.raises(InputError, match=match):
            check_scalar(bad, "d", "f", kind=int)
    with pytest.raises(InputError, match="finite"):
        check_scalar(float("nan"), "lam", "ResearchModel")
    with pytest.raises(InputError, match=r"in \(0, 1\]"):
        check_scalar(0.0, "a", "f", lo=0, hi=1, closed="right")
    with pytest.raises(InputError, match="one of 'a', 'b'"):
        check_choice("c", "mode", ("a", "b"), "f")


def test_check_path(tmp_path):
    assert check_path(tmp_path, "d", "f", kind="dir") == tmp_path
    with pytest.raises(InputError, match="does not exist: '/typo'"):
        check_path("/typo", "cifar10h_dir", "hcc")
    with pytest.raises(InputError, match="must be a file"):
        check_path(tmp_path, "d", "f", kind="file")
