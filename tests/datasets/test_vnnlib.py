"""VNN-LIB parser: semantics, round trip, clear errors naming the line, every copied file."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest

from trustlab.core.errors import DataError
from trustlab.datasets.vnnlib import format_vnnlib, load_vnnlib, parse_vnnlib

VNNCOMP = Path(os.environ.get("TRUSTLAB_SHARED_DATA", Path(__file__).resolve().parents[2].parent
                              / "shared" / "data")) / "vnncomp"

SPEC = """; a comment
(declare-const X_0 Real)
(declare-const X_1 Real)
(declare-const Y_0 Real)
(declare-const Y_1 Real)
(declare-const Y_2 Real)
(assert (<= X_0 1.0))   ; trailing comment
(assert (>= X_0 -1.0))
(assert (<= X_1 0.5))
(assert (>= X_1 0))
(assert (or
    (and (<= Y_0 Y_1) (>= Y_2 3.5))
    (and (< Y_1 -2))
))
"""


def test_semantics_of_a_small_spec():
    spec = parse_vnnlib(SPEC)
    assert (spec.n_inputs, spec.n_outputs) == (2, 3)
    (region,) = spec.regions
    np.testing.assert_array_equal(region.lower, [-1.0, 0.0])
    np.testing.assert_array_equal(region.upper, [1.0, 0.5])
    y = np.array([[0.0, 1.0, 4.0],    # Y0 <= Y1 and Y2 >= 3.5 -> unsafe
                  [2.0, 1.0, 4.0],    # Y0 > Y1, Y1 > -2 -> safe
                  [5.0, -3.0, 0.0]])  # Y1 < -2 -> unsafe
    np.testing.assert_array_equal(region.output_violated(y), [True, False, True])
    x = np.array([[0.0, 0.1], [0.0, 0.1], [2.0, 0.1]])  # the last input is outside the box
    np.testing.assert_array_equal(spec.violated(x, y), [True, False, False])


def test_input_disjunction_gives_regions_and_round_trips():
    text = SPEC.replace(
        "(assert (<= X_1 0.5))\n(assert (>= X_1 0))",
        "(assert (or (and (<= X_1 0.5) (>= X_1 0)) (and (<= X_1 3) (>= X_1 2))))",
    )
    spec = parse_vnnlib(text)
    assert len(spec.regions) == 2
    again = parse_vnnlib(format_vnnlib(spec))
    assert again == spec
    assert parse_vnnlib(format_vnnlib(parse_vnnlib(SPEC))) == parse_vnnlib(SPEC)


@pytest.mark.parametrize(
    ("bad", "line", "what"),
    [
        ("(assert (<= (+ Y_0 Y_1) 1))", 7, "unsupported term"),
        ("(assert (<= X_0 X_1))", 7, "X_0 with X_1"),
        ("(assert (not (<= Y_0 1)))", 7, "unsupported operator 'not'"),
        ("(assert (<= Y_0 Y_9))", 7, "Y_9 is used but not declared"),
        ("(declare-fun f () Real)", 7, "unsupported command 'declare-fun'"),
        ("(declare-const X_2 Int)", 7, "declare-const"),
        ("(assert (<= Y_0 1)", 7, "never closed"),
        ("(assert (<= Y_0 foo))", 7, "unknown symbol 'foo'"),
    ],
)
def test_rejects_unsupported_syntax_naming_the_line(bad, line, what):
    head = "\n".join(SPEC.splitlines()[1:7])  # declarations, 6 lines
    text = head + "\n" + bad + "\n(assert (<= X_0 1))\n(assert (>= X_0 0))\n"
    text += "(assert (<= X_1 1))\n(assert (>= X_1 0))\n"
    with pytest.raises(DataError, match=f"line {line}") as err:
        parse_vnnlib(text, source="t.vnnlib")
    assert what in str(err.value)


def test_unbounded_input_is_an_error():
    with pytest.raises(DataError, match="X_1 has no finite"):
        parse_vnnlib(SPEC.replace("(assert (>= X_1 0))", ""))


def test_gzipped_file_loads(tmp_path):
    path = tmp_path / "p.vnnlib.gz"
    path.write_bytes(gzip.compress(SPEC.encode()))
    assert load_vnnlib(path) == parse_vnnlib(SPEC)
    assert load_vnnlib(tmp_path / "p.vnnlib") == parse_vnnlib(SPEC)  # finds the .gz sibling


@pytest.mark.realdata
def test_every_copied_vnnlib_file_parses_and_round_trips():
    if not VNNCOMP.is_dir():
        pytest.skip(f"VNN-COMP data not available here: {VNNCOMP}")
    files = sorted(VNNCOMP.glob("*/vnnlib/*.vnnlib"))
    assert len(files) == 30
    for f in files:
        spec = load_vnnlib(f)
        assert parse_vnnlib(format_vnnlib(spec)) == spec, f.name
        assert all(np.all(r.lower <= r.upper) for r in spec.regions)
    acas6 = load_vnnlib(VNNCOMP / "acasxu" / "vnnlib" / "prop_6.vnnlib")
    assert len(acas6.regions) == 2 and all(len(r.polytopes) == 4 for r in acas6.regions)
    mnist = load_vnnlib(VNNCOMP / "cora_mnist" / "vnnlib" / "mnist-img0.vnnlib")
    assert (mnist.n_inputs, mnist.n_outputs) == (784, 10)
    assert len(mnist.regions[0].polytopes) == 9
