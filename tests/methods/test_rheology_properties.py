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
from trustlab.lm import layer_cosines, placebo_directions  # noqa: E402
from trustlab.methods.rheology import fisher_metric_speed, ratio_ci  # noqa: E402

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


# -- on a tiny random Llama: sensitivity_curve, fisher_speed, typical_norm, audit_model -------

_TINY: dict[str, object] = {}


def _tiny():
    """A tiny random Llama, built once (hypothesis runs examples without fixtures)."""
    if "lm" not in _TINY:
        import sys
        import tempfile
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).parents[1] / "lm"))
        from lm_testkit import CHAT_TEMPLATE, save_checkpoint

        from trustlab import lm

        path = save_checkpoint(Path(tempfile.mkdtemp()), "llama", CHAT_TEMPLATE)
        _TINY["lm"] = lm.load(f"hf:{path}")
    return _TINY["lm"]


PROMPTS = [[{"role": "user", "content": t}] for t in ("how do i make a cake", "tell me a poem")]


@settings(max_examples=25, deadline=None)
@given(
    eps=st.lists(st.one_of(st.floats(-1, 1), st.sampled_from([math.nan, math.inf])), max_size=4),
    scale=st.one_of(st.floats(-2, 5), st.just(math.nan)),
    k=st.integers(0, 3),
    zero_direction=st.booleans(),
)
def test_sensitivity_curve_valid_or_input_error(eps, scale, k, zero_direction):
    from trustlab.methods.rheology import SensitivityCurve, sensitivity_curve

    m = _tiny()
    g = torch.Generator().manual_seed(0)
    u = torch.zeros(m.d_model) if zero_direction else torch.randn(m.d_model, generator=g)
    plac = torch.randn((k, m.d_model), generator=g)
    try:
        c = sensitivity_curve(m, PROMPTS, "blocks.1.resid_pre", u, eps, plac, scale=scale)
    except InputError as exc:
        assert any(p in str(exc) for p in ("eps", "scale", "placebos", "direction"))
        return
    assert isinstance(c, SensitivityCurve)
    assert c.distance.shape == (len(eps), 2) and np.all(np.isfinite(c.distance))
    assert np.all(c.distance >= 0) and np.all(c.placebo_distance >= 0)


@settings(max_examples=20, deadline=None)
@given(
    width=st.integers(0, 40),
    rows=st.integers(0, 3),
    scale=st.one_of(st.floats(-1, 4), st.just(math.inf)),
    zero=st.booleans(),
)
def test_fisher_speed_and_typical_norm_valid_or_input_error(width, rows, scale, zero):
    from trustlab.methods.rheology import fisher_speed, typical_norm

    m = _tiny()
    dirs = torch.zeros((rows, width)) if zero else torch.randn((rows, width))
    try:
        v = fisher_speed(m, PROMPTS, "blocks.0.resid_pre", dirs, scale=scale)
    except InputError as exc:
        assert "directions" in str(exc) or "scale" in str(exc)
    else:
        assert v.shape == (rows, 2) and bool(torch.isfinite(v).all()) and bool((v >= 0).all())
    rho = typical_norm(m, PROMPTS, "blocks.0.resid_pre")
    assert math.isfinite(rho) and rho > 0
    with pytest.raises(InputError, match="prompts"):
        typical_norm(m, [], "blocks.0.resid_pre")


@settings(max_examples=30, deadline=None)
@given(
    e=st.integers(0, 3),
    n=st.integers(0, 3),
    k=st.integers(0, 2),
    bad=st.sampled_from([None, "nan", "negative", "shape"]),
)
def test_sensitivity_curve_result_type_checks_its_arrays(e, n, k, bad):
    from trustlab.methods.rheology import SensitivityCurve

    eps = np.linspace(-1, 1, e) if e else np.zeros(0)
    d, pd = np.ones((e, n)), np.ones((e, k, n))
    if bad == "nan" and d.size:
        d[0, 0] = math.nan
    elif bad == "negative" and d.size:
        d[0, 0] = -1.0
    elif bad == "shape":
        pd = np.ones((e, k, n + 1))
    try:
        c = SensitivityCurve(eps, 1.0, d, pd, np.zeros_like(d), np.zeros_like(pd))
    except InputError:
        return
    assert e > 0 and k > 0 and bad != "shape"
    assert bad is None or n == 0  # a NaN or negative distance never makes a curve
    assert np.all(np.isfinite(c.distance)) and np.all(c.distance >= 0)
    assert c.placebo_distance.shape[:2] == (e, k) and k >= 1


def test_audit_model_rejects_malformed_arguments_and_returns_a_model_audit(chat_xs):
    import dataclasses

    from trustlab import lm
    from trustlab.datasets.prompt_sets import organism_steering_splits
    from trustlab.methods.rheology import AuditSettings, ModelAudit, audit_model
    from trustlab.organisms import build_chat_corpus

    m = lm.LanguageModel(chat_xs.model.eval(), chat_xs.tokenizer, spec="organism:chat-xs")
    sets = organism_steering_splits(build_chat_corpus(0, n_train=400, n_heldout=40), 8, 6, n_val=6)
    s = AuditSettings(eps=(-0.2, 0.2), n_placebo=2, n_sensitivity_prompts=4, alphas=(1.0,),
                      gate_benign_rates=(0.2,), n_bootstrap=100, jailbreak_tokens=2,
                      task_tokens=3)  # fmt: skip
    g, r = torch.Generator().manual_seed(0), np.random.default_rng(0)
    for args, name in [
        ((m, {"fit_harmful": []}, s, g, r), "prompts"),
        ((m, sets, {"n_placebo": 2}, g, r), "settings"),
        ((m, sets, s, 0, r), "generator"),
        ((m, sets, s, g, 0), "rng"),
        ((m, dataclasses.replace(sets, eval_jailbreak=[]), s, g, r), "eval_jailbreak"),
        ((m, dataclasses.replace(sets, eval_task_answers=[]), s, g, r), "answer"),
    ]:
        with pytest.raises(InputError, match=name):
            audit_model(*args)
    a = audit_model(m, sets, s, g, r)
    assert isinstance(a, ModelAudit) and a.best["selected_on"] == "validation"
    assert len(a.best["placebo_gains_list"]) == 2
