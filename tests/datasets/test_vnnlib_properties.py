"""Issue 38's property tests for VNN-LIB specs and VNN-COMP known results: format/parse round
trips on drawn specs, membership agrees with a brute-force reading of the atoms, gzip is
transparent, malformed arguments give one-line InputErrors."""

from __future__ import annotations

import csv
import gzip

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.core.errors import DataError, InputError
from trustlab.datasets.vnncomp import KNOWN_RESULTS_FILE, KnownResult, load_known_results
from trustlab.datasets.vnnlib import (
    OutputPolytope,
    VnnlibRegion,
    VnnlibSpec,
    format_vnnlib,
    load_vnnlib,
    parse_vnnlib,
    read_text_maybe_gz,
)

SOME = settings(max_examples=30, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
numbers = st.integers(-40, 40).map(lambda v: v / 4)


@st.composite
def specs(draw):
    n_in, n_out = draw(st.integers(1, 3)), draw(st.integers(2, 3))
    regions = []
    for _ in range(draw(st.integers(1, 2))):
        lo = np.array([draw(numbers) for _ in range(n_in)])
        hi = lo + np.array([draw(st.integers(0, 8)) / 4 for _ in range(n_in)])
        polys = []
        for _ in range(draw(st.integers(1, 2))):
            rows, rhs = [], []
            for _ in range(draw(st.integers(1, 3))):
                row = np.zeros(n_out)
                j, k = draw(st.permutations(range(n_out)))[:2]
                if draw(st.booleans()):  # Y_j <= c or Y_j >= c
                    sign = draw(st.sampled_from([1.0, -1.0]))
                    row[j] = sign
                    rhs.append(sign * draw(numbers))
                else:  # Y_j <= Y_k
                    row[j], row[k] = 1.0, -1.0
                    rhs.append(0.0)
                rows.append(row)
            polys.append(OutputPolytope(np.array(rows), np.array(rhs)))
        regions.append(VnnlibRegion(lo, hi, tuple(polys)))
    return VnnlibSpec(n_in, n_out, tuple(regions))


@SOME
@given(specs(), st.integers(0, 2**16))
def test_format_then_parse_is_the_identity_and_membership_matches_the_atoms(spec, seed):
    text = format_vnnlib(spec)
    assert parse_vnnlib(text) == spec
    rng = np.random.default_rng(seed)
    x = rng.uniform(-12, 12, (20, spec.n_inputs))
    x[:5] = spec.regions[0].lower  # some points inside the first box
    y = rng.integers(-12, 13, (20, spec.n_outputs)) / 1.0
    want = np.zeros(20, dtype=bool)
    for region in spec.regions:
        inside = np.all((x >= region.lower) & (x <= region.upper), axis=1)
        hit = np.zeros(20, dtype=bool)
        for p in region.polytopes:
            hit |= np.all([[y[i] @ a <= c for a, c in zip(p.A, p.b, strict=True)]
                           for i in range(20)], axis=1)
        assert np.array_equal(region.output_violated(y), hit)
        assert np.array_equal(region.contains_input(x), inside)
        want |= inside & hit
    assert np.array_equal(spec.violated(x, y), want)
    assert not spec.violated(x[:1], np.full((1, spec.n_outputs), np.nan))[0]  # NaN: no verdict


@SOME
@given(specs(), st.booleans())
def test_gzip_is_transparent(tmp_path, spec, gz):
    text = format_vnnlib(spec)
    path = tmp_path / "p.vnnlib"
    for old in (path, tmp_path / "p.vnnlib.gz"):  # tmp_path is shared by the examples
        old.unlink(missing_ok=True)
    if gz:
        with gzip.open(tmp_path / "p.vnnlib.gz", "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    assert read_text_maybe_gz(path) == text and load_vnnlib(path) == spec


@SOME
@given(st.lists(st.tuples(st.sampled_from(["sat", "unsat", ""]),
                          st.sampled_from(["sat", "unsat", "timeout", ""]),
                          st.one_of(st.just(""), st.floats(0, 100).map(str))),
                min_size=1, max_size=5))
def test_known_results_read_back_per_instance(tmp_path, rows):
    with (tmp_path / KNOWN_RESULTS_FILE).open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["onnx", "vnnlib", "expected", "abc_result", "abc_time_s"])
        for i, (exp, res, sec) in enumerate(rows):
            w.writerow([f"n{i}.onnx", f"p{i}.vnnlib", exp, res, sec])
    got = load_known_results(tmp_path)
    assert set(got) == {(f"n{i}.onnx", f"p{i}.vnnlib") for i in range(len(rows))}
    for i, (exp, res, sec) in enumerate(rows):
        r = got[(f"n{i}.onnx", f"p{i}.vnnlib")]
        assert isinstance(r, KnownResult) and r.expected == exp
        assert r.tool("abc") == (res, float(sec) if sec else None)
        assert r.tool("other") == ("", None)
    assert load_known_results(tmp_path / "empty") == {}


SPEC = VnnlibSpec(2, 2, (VnnlibRegion(np.zeros(2), np.ones(2), (
    OutputPolytope(np.array([[1.0, -1.0]]), np.array([0.0])),)),))


@pytest.mark.parametrize(("call", "match"), [
    (lambda p: SPEC.violated(np.zeros((3, 2)), np.zeros((2, 2))), "one output row"),
    (lambda p: SPEC.violated(np.zeros((1, 3)), np.zeros((1, 2))), "'x'"),
    (lambda p: SPEC.regions[0].output_violated(np.zeros((1, 3))), "'y'"),
    (lambda p: SPEC.regions[0].contains_input("a"), "'x'"),
    (lambda p: format_vnnlib("spec"), "VnnlibSpec"),
    (lambda p: parse_vnnlib("(assert (<= X_0 1"), "."),
    (lambda p: read_text_maybe_gz(None), "path"),
    (lambda p: read_text_maybe_gz(p / "missing.vnnlib"), "does not exist"),
    (lambda p: load_known_results(3), "folder"),
])
def test_bad_arguments_are_one_line_errors(tmp_path, call, match):
    with pytest.raises((InputError, DataError), match=match) as caught:
        call(tmp_path)
    assert "\n" not in str(caught.value)
