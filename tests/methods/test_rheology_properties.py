"""Property tests (hypothesis) of rheology's public API and the steering tools it stands on:
malformed input gives a correct result or an InputError / ConfigError naming the parameter —
never a NaN-filled result or a raw exception."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

torch = pytest.importorskip("torch", reason="rheology needs trustlab[llm] (torch)")

from trustlab.core.errors import ConfigError, InputError  # noqa: E402
from trustlab.methods.rheology import (  # noqa: E402
    fisher_metric_speed,
    layer_cosines,
    placebo_directions,
    ratio_ci,
)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
odd_numbers = st.one_of(
    st.integers(-3, 40),
    st.floats(-3, 40),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.text(max_size=2),
    st.none(),
    st.booleans(),
)


@FAST
@given(n=odd_numbers, d=odd_numbers, exclude=st.booleans())
def test_placebo_directions_valid_or_input_error(n, d, exclude):
    ex = torch.ones(int(d)) if exclude and isinstance(d, int) and 0 < d < 100 else None
    try:
        out = placebo_directions(n, d, torch.Generator().manual_seed(0), exclude=ex)
    except InputError as exc:
        assert any(f"'{p}'" in str(exc) or p in str(exc) for p in ("n", "d_model", "exclude"))
        return
    assert out.shape == (int(n), int(d)) and bool(torch.isfinite(out).all())
    torch.testing.assert_close(out.norm(dim=-1), torch.ones(int(n)), atol=1e-5, rtol=0)
    if ex is not None:
        assert float((out @ (ex / ex.norm())).abs().max()) < 1e-5


def test_placebo_directions_rejects_a_bad_generator_and_exclude():
    with pytest.raises(InputError, match="generator"):
        placebo_directions(2, 4, 0)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="exclude"):
        placebo_directions(2, 4, torch.Generator(), exclude=torch.zeros(4))
    with pytest.raises(InputError, match="exclude"):
        placebo_directions(2, 4, torch.Generator(), exclude=torch.ones(5))


values = st.floats(allow_nan=True, allow_infinity=True, width=32)


@FAST
@given(
    z=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=2, max_side=6), elements=values),
    scale=st.floats(-3, 3),
    reshape=st.booleans(),
)
def test_fisher_metric_speed_valid_or_input_error(z, scale, reshape):
    dz = (z * scale) if not reshape else z.reshape(-1)
    try:
        out = fisher_metric_speed(torch.as_tensor(z), torch.as_tensor(dz))
    except InputError as exc:
        assert "logits" in str(exc)
        return
    assert bool(torch.isfinite(out).all()) and bool((out >= 0).all())
    assert out.shape == z.shape[:-1]


@FAST
@given(
    num=hnp.arrays(
        np.float64, st.integers(0, 12), elements=st.one_of(st.floats(-5, 5), st.just(math.nan))
    ),
    den=hnp.arrays(
        np.float64, st.integers(0, 12), elements=st.one_of(st.floats(-1, 5), st.just(math.inf))
    ),
)
def test_ratio_ci_valid_or_input_error(num, den):
    try:
        point, lo, hi = ratio_ci(num, den, np.random.default_rng(0), n_resamples=200)
    except InputError as exc:
        assert any(p in str(exc) for p in ("num", "den", "rows"))
        return
    assert all(math.isfinite(x) for x in (point, lo, hi)) and lo <= hi
    assert point == pytest.approx(num.mean() / den.mean())


@FAST
@given(
    shape_a=hnp.array_shapes(min_dims=1, max_dims=4, max_side=4),
    shape_b=hnp.array_shapes(min_dims=1, max_dims=4, max_side=4),
    position=st.integers(-6, 6),
)
def test_layer_cosines_valid_or_input_error(shape_a, shape_b, position):
    a, b = torch.randn(shape_a), torch.randn(shape_b)
    try:
        cos = layer_cosines(a, b, position)
    except InputError:
        assert a.dim() != 3 or a.shape != b.shape or not -a.shape[1] <= position < a.shape[1]
        return
    assert cos.shape == (a.shape[0],)
    assert bool(((cos.abs() <= 1 + 1e-5) | torch.isnan(cos)).all())


audit_keys = st.sampled_from(
    ["eps", "alphas", "gate_benign_rates", "n_placebo", "placebo_tolerance", "em_drop_tolerance",
     "jailbreak_tokens", "max_layer_fraction", "placebo_criterion", "n_bootstrap"]
)  # fmt: skip
audit_values = st.one_of(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=4),
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.none(),
)


@FAST
@given(key=audit_keys, value=audit_values)
def test_config_audit_settings_valid_or_config_error_naming_the_key(key, value):
    from trustlab.core import resolve_config
    from trustlab.methods.rheology.experiment import RheologyConfig

    try:
        cfg = resolve_config(RheologyConfig, overrides={"audit": {key: value}})
    except ConfigError as exc:
        assert f"audit.{key}" in str(exc) or "audit" in str(exc)
        return
    got = getattr(cfg.audit, key)
    if isinstance(got, tuple):
        assert all(math.isfinite(x) for x in got)
    if key in ("alphas", "gate_benign_rates", "eps"):
        assert len(got) >= 1 and list(got) == sorted(got)
