"""Property-based tests of core's public functions: a correct result or a one-line
TrustlabError for any input, never another exception or a silently reinterpreted value."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from trustlab.core.catalogue import CATALOGUE, method_info
from trustlab.core.errors import InputError, TrustlabError, UnknownMethodError
from trustlab.core.figures import Series, alt_text, grouped_bars, metric_vs_parameter
from trustlab.core.io import write_json_atomic, write_text_atomic
from trustlab.core.report import Report
from trustlab.core.validation import check_samples, check_scalar

anything = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=4),
                     st.lists(st.floats(), max_size=3), st.dictionaries(st.text(max_size=2),
                                                                        st.integers(), max_size=2))
finite_or_not = st.floats(allow_nan=True, allow_infinity=True, width=32)


@settings(max_examples=100, deadline=None)
@given(anything, st.sampled_from([int, float]), st.one_of(st.none(), st.integers(-5, 5)),
       st.one_of(st.none(), st.integers(-5, 5)))
def test_check_scalar(value, kind, lo, hi):
    try:
        out = check_scalar(value, "x", "f", kind=kind, lo=lo, hi=hi)
    except InputError as exc:
        assert "'x' parameter of f" in str(exc) and "\n" not in str(exc)
        return
    assert type(out) is kind and out == value and not isinstance(value, bool)
    assert math.isfinite(out)
    assert (lo is None or out >= lo) and (hi is None or out <= hi)


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
                  elements=finite_or_not), st.integers(0, 3))
def test_check_samples(arr, min_n):
    try:
        out = check_samples(arr, "x", "f", min_n=min_n)
    except InputError:
        return
    assert out.ndim == 2 and out.shape[0] >= min_n and np.all(np.isfinite(out))
    np.testing.assert_array_equal(out.reshape(-1), arr.reshape(-1))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 5), st.lists(st.lists(finite_or_not, max_size=5), min_size=1, max_size=3),
       st.booleans())
def test_panels_draw_or_refuse(n_x, ys, with_band):
    """Mismatched lengths or empty input are InputError; otherwise the figure has alt text."""
    x = np.arange(n_x, dtype=float)
    series = {f"s{i}": Series(y, lo=y, hi=y) if with_band else y for i, y in enumerate(ys)}
    for draw in (lambda: metric_vs_parameter(x, series, xlabel="a", ylabel="b"),
                 lambda: grouped_bars([f"g{i}" for i in range(n_x)], series, ylabel="b")):
        try:
            fig = draw()
        except InputError:
            assert n_x == 0 or any(len(y) != n_x for y in ys)
            continue
        assert all(len(y) == n_x for y in ys) and n_x > 0
        assert alt_text(fig).endswith(".") and "b" in alt_text(fig)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=8), anything)
def test_report_metric_accepts_scalars_only(name, value):
    report = Report("hcc")
    try:
        report.metric(name, value, headline=True)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))  # always valid JSON
    stored = data["metrics"][name]["value"]
    if isinstance(value, float) and not math.isfinite(value):
        assert stored is None
    else:
        assert stored == value


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=50), st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5),
                                             max_size=4))
def test_atomic_writes_round_trip(tmp_path, text, obj):
    # bytes, not read_text: universal-newline reading would turn a written "\r" into "\n"
    assert write_text_atomic(tmp_path / "a.txt", text).read_bytes().decode("utf-8") == text
    assert json.loads(write_json_atomic(tmp_path / "a.json", obj).read_text()) == obj
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "a.txt"]  # no temp files


@given(st.text(max_size=20))
def test_method_info(name):
    ids = {info.id for info in CATALOGUE}
    try:
        info = method_info(name)
    except UnknownMethodError as exc:
        assert name not in ids and isinstance(exc, TrustlabError) and "Valid ids" in str(exc)
        return
    assert info.id == name and info.module == name.replace("-", "_")


def test_write_json_refuses_nan(tmp_path):
    with pytest.raises(ValueError):
        write_json_atomic(tmp_path / "x.json", {"a": float("nan")})
    assert not list(tmp_path.iterdir())
