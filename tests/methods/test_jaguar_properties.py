"""Property tests (hypothesis) for jaguar's public entry points: on any input, a correct result
or an ``InputError`` naming the parameter -- never a raw numpy error, a NaN, or a result on a
silently reinterpreted input (a float share truncated, a boolean mask read as numbers)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.methods.jaguar import (
    JaguarClient,
    JaguarParams,
    JaguarServer,
    ProtocolConfig,
    Sampler,
    cheetah_params,
    conv2d_int,
    fixed_point_forward,
    jaguar_params,
    plan_conv,
    plan_fc,
    private_inference,
    quantise,
)
from trustlab.methods.jaguar.network import Conv, Dense, Flatten, ReLU

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# values a careless caller might pass where an integer is expected
BAD_SCALARS = st.one_of(st.just(float("nan")), st.just(float("inf")), st.just(2.5), st.just(True),
                        st.just("3"), st.just(None), st.just(-1), st.just(0))


def _conv_ref(x, w, stride, pad):  # an independent reference: explicit loops in Python ints
    c, h, wd = x.shape
    o, _, k, _ = w.shape
    xp = np.zeros((c, h + 2 * pad, wd + 2 * pad), dtype=object)
    xp[:, pad:pad + h, pad:pad + wd] = x
    ho, wo = (h + 2 * pad - k) // stride + 1, (wd + 2 * pad - k) // stride + 1
    out = np.zeros((o, ho, wo), dtype=object)
    for a in range(o):
        for i in range(ho):
            for j in range(wo):
                patch = xp[:, i * stride:i * stride + k, j * stride:j * stride + k]
                out[a, i, j] = int((patch * w[a].astype(object)).sum())
    return out


@SETTINGS
@given(c=st.integers(1, 4), h=st.integers(1, 7), o=st.integers(1, 3), k=st.integers(1, 4),
       stride=st.integers(1, 3), pad=st.integers(0, 2), seed=st.integers(0, 2**16))
def test_conv2d_int_is_exact_or_refuses(c, h, o, k, stride, pad, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-(2**40), 2**40, (c, h, h))
    w = rng.integers(-(2**20), 2**20, (o, c, k, k))
    if k > h + 2 * pad:
        with pytest.raises(InputError, match="kernel"):
            conv2d_int(x, w, stride, pad)
        return
    assert np.array_equal(conv2d_int(x, w, stride, pad), _conv_ref(x, w, stride, pad))


@SETTINGS
@given(bad=st.sampled_from(["nan", "frac", "bool", "ndim", "channels", "str", "empty"]))
def test_conv2d_int_rejects_malformed_arrays(bad):
    x = np.ones((2, 4, 4), dtype=np.int64)
    w = np.ones((3, 2, 3, 3), dtype=np.int64)
    name = "x"
    if bad == "nan":
        x = x.astype(float)
        x[0, 0, 0] = np.nan
    elif bad == "frac":
        x = x + 0.5
    elif bad == "bool":
        x = x > 0
    elif bad == "ndim":
        x = x[0]
    elif bad == "channels":
        w, name = np.ones((3, 5, 3, 3), dtype=np.int64), "weight"
    elif bad == "str":
        x = "x"
    else:
        x = np.zeros((0, 4, 4))
    with pytest.raises(InputError, match=f"'{name}'"):
        conv2d_int(x, w, 1, 1)


@SETTINGS
@given(n=st.sampled_from([64, 128, 256, 100, 0, 2.5]), c=st.one_of(st.integers(1, 20), BAD_SCALARS),
       h=st.integers(1, 40), o=st.integers(1, 8), k=st.sampled_from([1, 3, 5, 0, 1.5]),
       stride=st.integers(0, 3), pad=st.integers(-1, 2))
def test_plan_conv_gives_a_valid_layout_or_refuses(n, c, h, o, k, stride, pad):
    try:
        lay = plan_conv(n, c, h, h, o, k, stride, pad)
    except InputError as exc:
        assert "'" in str(exc) or "kernel" in str(exc) or "exceeds" in str(exc)
        return
    # the documented invariants: no wrap onto an output, every output read once
    assert lay.ct * lay.ht * lay.wp <= lay.n and 1 <= lay.ct <= lay.c
    _, coeff = lay.output_positions()
    assert coeff.min() >= lay.offset and coeff.max() < lay.n
    assert lay.used_mask().sum() == lay.h_out * lay.w_out
    start, length = lay.used_spans()
    assert start[length > 0].min() - lay.shifts().max() >= 0  # c0 needs no extension


@SETTINGS
@given(m=st.one_of(st.integers(1, 50), BAD_SCALARS), d=st.one_of(st.integers(1, 300), BAD_SCALARS))
def test_plan_fc_valid_or_refuses(m, d):
    try:
        lay = plan_fc(256, m, d)
    except InputError as exc:
        assert "'m'" in str(exc) or "'d'" in str(exc)
        return
    assert lay.rows * lay.chunk <= 256 and lay.n_groups * lay.rows >= lay.m


@SETTINGS
@given(n=st.one_of(st.sampled_from([1024, 4096, 8192]), BAD_SCALARS),
       ell=st.one_of(st.integers(8, 40), BAD_SCALARS), shift=st.one_of(st.integers(1, 20), BAD_SCALARS))
def test_parameter_sets_are_secure_or_refused(n, ell, shift):
    try:
        jp = jaguar_params(n, ell, shift)
    except InputError:
        return
    assert jp.security >= 128 and jp.ell_in == ell + shift and jp.response_bits > jp.ell_out
    try:
        cp = cheetah_params(n, jp.ell_in)
    except InputError:
        return
    assert cp.security >= 128


JP = JaguarParams(n=256, k=64, ell_in=30, shift=0, response_bits=44, allow_insecure=True)
CLIENT = JaguarClient(JP, Sampler.seeded(0)).keygen()
SERVER = JaguarServer(JP, CLIENT.public_key_, sampler=Sampler.seeded(1))
LAYOUT = plan_conv(256, 2, 5, 5, 2, 3, 1, 1)


@SETTINGS
@given(seed=st.integers(0, 2**16),
       bad=st.sampled_from([None, "nan", "frac", "bool", "shape", "list", "huge"]))
def test_linear_layer_exact_or_input_error(seed, bad):
    """Valid shares (int arrays, whole-number floats or lists) give the exact product mod
    2^ell_in; malformed ones give InputError naming 'x_share'."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-(2**12), 2**12, (2, 5, 5))
    w = rng.integers(-64, 64, (2, 2, 3, 3))
    x_s = rng.integers(0, 2**30, x.shape)
    x_c = np.mod(x - x_s, 2**30)
    arg: object = x_c
    if bad == "nan":
        arg = x_c.astype(float)
        arg[0, 0, 0] = np.nan
    elif bad == "frac":
        arg = x_c + 0.25
    elif bad == "bool":
        arg = x_c > 2**29
    elif bad == "shape":
        arg = x_c[:, :4]
    elif bad == "list":
        arg = x_c.tolist()  # a valid list of ints is converted, not rejected
    elif bad == "huge":
        arg = x_c.astype(float) * 2.0**40  # whole floats beyond 2^53 cannot be exact
    if bad in (None, "list"):
        response, y_s = SERVER.answer(CLIENT.encrypt_share(arg, LAYOUT), x_s, w, LAYOUT)
        y = (CLIENT.decrypt_share(response, LAYOUT).astype(object) + y_s.astype(object)) % 2**30
        assert np.array_equal(y, conv2d_int(x, w, 1, 1, 30))
    else:
        with pytest.raises(InputError, match=r"'x_share'|'x'"):
            CLIENT.encrypt_share(arg, LAYOUT)


NET = quantise((Conv(np.full((2, 1, 3, 3), 0.1), np.zeros(2), 1, 1), ReLU(), Flatten(),
                Dense(np.full((3, 2 * 16), 0.05), np.zeros(3))), 8, (1, 4, 4), classes=3)


@SETTINGS
@given(bad=st.sampled_from(["nan", "shape", "ndim", "str", "empty", "bool"]))
def test_inference_inputs_are_checked_before_any_process_starts(bad):
    images = np.zeros((2, 1, 4, 4))
    if bad == "nan":
        images[0, 0, 0, 0] = np.nan
    elif bad == "shape":
        images = np.zeros((2, 1, 5, 4))
    elif bad == "ndim":
        images = np.zeros((1, 4, 4))
    elif bad == "str":
        images = "digits:0-9"
    elif bad == "empty":
        images = np.zeros((0, 1, 4, 4))
    else:
        images = images > 0
    with pytest.raises(InputError, match="'images'"):
        private_inference(NET, images, ProtocolConfig(dealer=True))
    with pytest.raises(InputError, match="'x_q'"):
        fixed_point_forward(NET, np.zeros((1, 4, 5)))


@SETTINGS
@given(frac=st.one_of(st.integers(-2, 25), BAD_SCALARS))
def test_quantise_refuses_bad_precision(frac):
    layers = (Conv(np.ones((1, 1, 1, 1)), np.zeros(1)),)
    try:
        net = quantise(layers, frac, (1, 2, 2))
    except InputError as exc:
        assert "'frac_bits'" in str(exc)
        return
    assert 1 <= net.frac_bits <= 20


MALFORMED = st.sampled_from([np.nan, 2.5, "7", None, True, [1.5, 2], np.array([np.inf])])


@SETTINGS
@given(values=st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=20),
       k=st.integers(1, 64), bad=MALFORMED)
def test_ring_helpers_are_exact_or_refuse(values, k, bad):
    from trustlab.methods.jaguar import centered, monomial_mul, round_shift, to_ring

    ring = to_ring(np.array(values), k)
    assert [int(v) for v in ring] == [v % (1 << k) for v in values]
    back = centered(ring, k)
    assert [int(v) for v in back] == [((v + (1 << (k - 1))) % (1 << k)) - (1 << (k - 1))
                                      for v in values]
    poly = to_ring(np.array(values), 64)
    n = len(values)
    rotated = monomial_mul(poly, 1)  # X * p: coefficients move up one, the top one wraps negated
    assert int(rotated[0]) == (-values[-1]) % 2**64 and [int(v) for v in rotated[1:]] == [
        v % 2**64 for v in values[: n - 1]]
    shifted = round_shift(ring, 1, k)
    assert [int(v) for v in shifted] == [((v % (1 << k)) + 1) // 2 % (1 << k) for v in values]
    for call in (lambda: to_ring(bad, k), lambda: centered(bad, k),
                 lambda: round_shift(bad, 1, k), lambda: monomial_mul(bad, 1),
                 lambda: to_ring(values, bad), lambda: monomial_mul(poly, bad)):
        with pytest.raises(InputError):
            call()


@SETTINGS
@given(n=st.one_of(st.sampled_from([64, 256, 4096]), BAD_SCALARS, st.just(100)),
       bits=st.one_of(st.integers(20, 50), st.just(60), BAD_SCALARS),
       count=st.one_of(st.integers(1, 3), BAD_SCALARS))
def test_ntt_primes_and_security_levels(n, bits, count):
    from trustlab.methods.jaguar import find_ntt_primes, query_nbytes, security_bits

    try:
        primes = find_ntt_primes(n, bits, count)
    except InputError:
        return
    assert len(primes) == count and all((p - 1) % (2 * n) == 0 and p < 2**bits for p in primes)
    assert security_bits(n, sum(p.bit_length() for p in primes)) in (0, 128, 192, 256)
    assert query_nbytes(3, n, bits) == 3 * (-(-n * bits // 8) + 32)
    with pytest.raises(InputError):
        security_bits(n, float("nan"))
    with pytest.raises(InputError):
        query_nbytes(-1, n, bits)


@SETTINGS
@given(seconds=st.one_of(st.floats(0, 100), st.just(float("nan")), st.just(-1.0)),
       nbytes=st.one_of(st.integers(0, 10**9), st.just(-5), st.just(2.5)),
       rounds=st.integers(-1, 100), network=st.sampled_from(["lan", "wan", "5g"]))
def test_estimate_time_adds_up_or_refuses(seconds, nbytes, rounds, network):
    from trustlab.methods.jaguar import NETWORKS, estimate_time

    ok = (np.isfinite(seconds) and seconds >= 0 and isinstance(nbytes, int) and nbytes >= 0
          and rounds >= 0 and network in NETWORKS)
    if not ok:
        with pytest.raises(InputError):
            estimate_time(seconds, nbytes, rounds, network)
        return
    bw, rtt = NETWORKS[network]
    assert estimate_time(seconds, nbytes, rounds, network) == pytest.approx(
        seconds + 8 * nbytes / bw + rounds * rtt / 2)


@SETTINGS
@given(seed=st.integers(0, 2**16), bad=st.sampled_from([None, "float_w", "shape", "nan"]))
def test_spa_kernels_agree_or_refuse(seed, bad):
    from trustlab.methods.jaguar import spa_accumulate, spa_accumulate_reference, to_ring

    rng = np.random.default_rng(seed)
    polys = to_ring(rng.integers(-(2**62), 2**62, (2, 1, 2, 32)), 64)
    shifts = rng.choice(32, 5, replace=False)
    w = rng.integers(-(2**10), 2**10, (3, 2, 5))
    if bad is None:
        assert np.array_equal(spa_accumulate(polys, shifts, w, 64),
                              spa_accumulate_reference(polys, shifts, w, 64))
        return
    arg = {"float_w": w + 0.5, "shape": w[:, :1], "nan": np.full(w.shape, np.nan)}[bad]
    for fn in (spa_accumulate, spa_accumulate_reference):
        with pytest.raises(InputError, match="weights"):
            fn(polys, shifts, arg, 64)
