"""flowreach's public API under malformed input (issue 38): a correct result or InputError.

Each property feeds NaN/inf, wrong types, wrong shapes, empty inputs and out-of-range values
and checks that the call either raises ``InputError`` with a one-line message or returns a
result that satisfies the function's contract (bounds hold on samples, coverage sets contain
their calibration points, probabilities lie in [0, 1], result objects have their types).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.datasets.onnx_nets import ReluMLP
from trustlab.datasets.vnnlib import OutputPolytope, VnnlibRegion
from trustlab.methods.flowreach import (
    AMSResult,
    BaBResult,
    BoundResult,
    BoxReachSet,
    Counterexample,
    EllipsoidReachSet,
    FalsificationResult,
    FlowMatching,
    FlowReachSet,
    InstanceResult,
    TightSpecInfo,
    VelocityMLP,
    ZonotopeReachSet,
    bounded_ams,
    format_witness,
    ibp_bounds,
    margin_torch,
    output_upper_bound,
    pac_rank,
    prove_region_bab,
    restricted_gaussian,
    restricted_tail_exact,
    tight_relu_instance,
)
from trustlab.methods.flowreach.bounds import prove_region

SLOW_OK = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5),
                    st.none(), st.text(max_size=2), st.booleans())


def _ok_or_input_error(fn):
    try:
        return fn(), None
    except InputError as exc:
        assert str(exc) and "\n" not in str(exc)
        return None, exc


def _mlp(seed=0, dims=(2, 6, 3)):
    rng = np.random.default_rng(seed)
    return ReluMLP(tuple(rng.normal(size=(o, i)) for i, o in itertools.pairwise(dims)),
                   tuple(rng.normal(size=o) for o in dims[1:]))


@SLOW_OK
@given(n=numbers, alpha=numbers, delta=numbers)
def test_pac_rank(n, alpha, delta):
    from scipy import special

    k, err = _ok_or_input_error(lambda: pac_rank(n, alpha, delta))
    if err is None:
        assert 1 <= k <= n
        assert special.betainc(k, n + 1 - k, 1 - alpha) <= delta + 1e-12


@SLOW_OK
@given(n=numbers, dim=numbers, radius=numbers)
def test_restricted_gaussian_and_tail(n, dim, radius):
    z, err = _ok_or_input_error(lambda: restricted_gaussian(n, dim, radius,
                                                            np.random.default_rng(0)))
    if err is None:
        assert z.shape == (n, dim) and np.all(np.isfinite(z))
        assert np.all(np.linalg.norm(z, axis=1) <= radius * (1 + 1e-9))
    p, err = _ok_or_input_error(lambda: restricted_tail_exact(1.0, dim, radius))
    if err is None:
        assert 0.0 <= p <= 1.0 + 1e-9


@SLOW_OK
@given(lo=st.lists(numbers, min_size=0, max_size=3), width=st.floats(-1, 2), c=numbers)
def test_interval_and_crown_bounds_are_sound_or_refused(lo, width, c):
    mlp = _mlp()
    lower = lo
    upper = [v + width if isinstance(v, int | float) and not isinstance(v, bool) else v
             for v in lo]
    out, err = _ok_or_input_error(lambda: ibp_bounds(mlp, lower, upper))
    if err is None:
        x = np.random.default_rng(0).uniform(lower, upper, (500, 2))
        y = mlp(x)
        ylo, yhi = out[-1]
        tol = 1e-9 * (1 + np.abs(y).max())  # sound up to float64 rounding (docs: Limits)
        assert np.all(ylo <= y.min(axis=0) + tol) and np.all(yhi >= y.max(axis=0) - tol)
        ub, err2 = _ok_or_input_error(lambda: output_upper_bound(
            mlp, lower, upper, np.array([1.0, c if isinstance(c, float) else 0.0, 0.0])))
        if err2 is None:  # an overflow to +inf is still a (trivially) sound upper bound
            assert not math.isnan(ub)


@SLOW_OK
@given(rows=st.integers(0, 40), cols=st.integers(0, 3), poison=st.sampled_from(
    [None, float("nan"), float("inf")]), alpha=numbers, kind=st.sampled_from(
    [BoxReachSet, EllipsoidReachSet, ZonotopeReachSet]))
def test_fixed_shape_reach_sets(rows, cols, poison, alpha, kind):
    y = np.random.default_rng(1).normal(size=(rows, cols))
    if poison is not None and y.size:
        y.flat[0] = poison

    def fit():
        return kind(alpha=alpha).fit(y).calibrate(y)

    rs, err = _ok_or_input_error(fit)
    if err is None:
        # conformal: at most about alpha of its own calibration points fall outside
        assert rs.contains(y).mean() >= 1 - alpha - 1.0 / len(y) - 1e-9
        region = VnnlibRegion(np.zeros(1), np.ones(1), (OutputPolytope(
            np.eye(cols)[:1], np.array([-1e9])),))
        assert rs.intersects(region) is False


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.integers(0, 30), poison=st.sampled_from([None, float("nan")]),
       score=st.sampled_from(["latent_norm", "nll", "bogus"]))
def test_flow_reach_set_and_velocity(rows, poison, score):
    y = np.random.default_rng(2).normal(size=(rows, 2))
    if poison is not None and y.size:
        y.flat[-1] = poison
    rs, err = _ok_or_input_error(lambda: FlowReachSet(FlowMatching(n_iters=3), alpha=0.2,
                                                      score=score).fit(y).calibrate(y))
    if err is None:
        assert rs.dim_ == 2 and np.all(np.isfinite(rs.cal_scores_))
    v, err = _ok_or_input_error(lambda: VelocityMLP(rows - 3, hidden=4))
    if err is None:
        out = v(torch.zeros(5, rows - 3), torch.tensor(0.5))
        assert out.shape == (5, rows - 3)


@SLOW_OK
@given(shape=st.tuples(st.integers(0, 4), st.integers(0, 4)))
def test_margin_torch_shapes(shape):
    region = VnnlibRegion(np.zeros(1), np.ones(1), (OutputPolytope(np.eye(3)[:2],
                                                                    np.zeros(2)),))
    m, err = _ok_or_input_error(lambda: margin_torch(region, torch.ones(shape)))
    if err is None:
        assert shape[1] == 3 and m.shape == (shape[0],)


@SLOW_OK
@given(depth=st.one_of(numbers, st.integers(-3, 40)), rel_margin=numbers)
def test_tight_instance(depth, rel_margin):
    if isinstance(depth, float) and math.isfinite(depth) and depth > 40:
        depth = 10**7 + 1.0  # large depths: only the refusal is checked (no huge builds)
    out, err = _ok_or_input_error(lambda: tight_relu_instance(
        depth, np.random.default_rng(0), width=4, rel_margin=rel_margin, n_samples=200,
        n_starts=2, n_steps=2))
    if err is None:
        mlp, spec, info = out
        assert isinstance(info, TightSpecInfo) and info.threshold > info.best_max
        assert mlp.n_inputs == spec.n_inputs


@SLOW_OK
@given(timeout=numbers, method=st.sampled_from(["ibp", "crown", "CROWN", "bab"]))
def test_prove_region_results(timeout, method):
    mlp = _mlp(3)
    region = VnnlibRegion(np.zeros(2), np.ones(2), (OutputPolytope(np.eye(3)[:1],
                                                                    np.array([-1e6])),))
    r, err = _ok_or_input_error(lambda: prove_region(mlp, region, method, timeout=timeout))
    if err is None:
        # y0 <= -1e6 is unreachable: proved, unless the budget is too small to finish
        assert isinstance(r, BoundResult) and r.verdict in ("unsat", "timeout")
    b, err = _ok_or_input_error(lambda: prove_region_bab(mlp, region, timeout=timeout))
    if err is None:
        assert isinstance(b, BaBResult) and b.verdict in ("unsat", "timeout")


def test_result_objects_and_format_witness():
    res = bounded_ams(lambda z: z[:, 0] - 2.0, 2, np.random.default_rng(0), n_particles=8,
                      p_min=1e-3, delta=0.1)
    assert isinstance(res, AMSResult) and 0 <= res.upper <= 1
    cex = Counterexample(np.zeros(2, np.float32), np.ones(3, np.float32), -0.5)
    fr = FalsificationResult(cex, -0.5, 10, 0.1, "adam")
    assert fr.counterexample is cex
    inst = InstanceResult({"flowreach": "sat"}, {"flowreach": 0.1},
                          {"flowreach": "falsified"}, counterexample=cex)
    assert format_witness(inst).startswith("sat\n((X_0 0.0)")
    assert format_witness(inst, "crown") == "unknown\n"
    with pytest.raises(InputError, match="'result'"):
        format_witness({"flowreach": "sat"})


def test_huge_radius_is_the_unconditioned_gaussian():
    # Regression: radius**2 overflowed (OverflowError) for radius ~1e154; a ball that large
    # conditions on nothing representable.
    z = restricted_gaussian(64, 3, 1.34e154, np.random.default_rng(0))
    assert z.shape == (64, 3) and np.all(np.isfinite(z))
    assert restricted_tail_exact(1.0, 3, 1.34e154) == restricted_tail_exact(1.0, 3)
    assert abs(restricted_tail_exact(1.0, 3, 40.0) - restricted_tail_exact(1.0, 3)) < 1e-12
