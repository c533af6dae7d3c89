"""Jaguar part 1: power-of-two RLWE, SPA-Conv, local-shift truncation, aux-NTT decryption."""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.core.errors import InputError, NotFittedError
from trustlab.methods.jaguar import (
    HE_STANDARD_128,
    CheetahClient,
    CheetahServer,
    JaguarClient,
    JaguarParams,
    JaguarServer,
    Sampler,
    aux_negacyclic_mul,
    centered,
    cheetah_params,
    conv2d_int,
    decrypt,
    encrypt,
    find_ntt_primes,
    jaguar_params,
    keygen,
    linear_noise_budget,
    mod_switch,
    monomial_mul,
    negacyclic_mul_exact,
    phase,
    plan_conv,
    plan_fc,
    security_bits,
    spa_accumulate,
    spa_accumulate_reference,
    to_ring,
)
from trustlab.methods.jaguar.ntt import NTTContext
from trustlab.methods.jaguar.rlwe import encrypt_zero_public, public_keygen

SMALL = dict(n=256, allow_insecure=True)


def _signed(v, bits):
    v = np.asarray(v, dtype=object) % (1 << bits)
    return np.where(v >= 1 << (bits - 1), v - (1 << bits), v)


# -- ring, NTT, security ---------------------------------------------------------------------
def test_security_table_and_refusal():
    assert HE_STANDARD_128[4096] == 109 and HE_STANDARD_128[8192] == 218
    assert security_bits(4096, 64) == 192 and security_bits(4096, 100) == 128
    assert security_bits(2048, 64) == 0
    with pytest.raises(InputError, match="below 128-bit"):
        JaguarParams(n=2048, k=64, ell_in=37, shift=12, response_bits=35)
    assert jaguar_params().security >= 128
    assert cheetah_params().security >= 128


@pytest.mark.parametrize("k", [64, 45])
def test_monomial_rotation_matches_schoolbook(k):
    rng = np.random.default_rng(0)
    a = to_ring(rng.integers(-(2**40), 2**40, 32), k)
    for shift in (0, 1, 17, 31, 32, 50):
        mono = np.zeros(32, dtype=np.int64)
        mono[shift % 32] = -1 if (shift // 32) % 2 else 1
        ref = to_ring(negacyclic_mul_exact(a, mono, 1 << k), k)
        assert np.array_equal(to_ring(monomial_mul(a, shift), k), ref)


def test_ntt_product_equals_schoolbook():
    n = 64
    for p in find_ntt_primes(n, 50, 2):
        assert (p - 1) % (2 * n) == 0 and p < 2**50
        rng = np.random.default_rng(p % 1000)
        a, b = (rng.integers(0, p, n, dtype=np.uint64) for _ in range(2))
        assert list(NTTContext(n, p).multiply(a, b)) == list(negacyclic_mul_exact(a, b, p))


@pytest.mark.parametrize(("n", "k"), [(64, 64), (64, 33), (4096, 64)])
def test_aux_ntt_product_equals_schoolbook(n, k):
    rng = np.random.default_rng(n + k)
    c = to_ring(rng.integers(-(2**62), 2**62, n) * 3, k)
    s = rng.integers(-1, 2, n)
    got = aux_negacyclic_mul(c, s, k)
    if n == 4096:  # full schoolbook is slow in Python: check 64 coefficients one by one
        ci, si = [int(v) for v in c], [int(v) for v in s]
        for i in rng.choice(n, 64, replace=False):
            ref_i = sum(ci[j] * si[i - j] for j in range(i + 1)) - sum(
                ci[j] * si[n + i - j] for j in range(i + 1, n))
            assert int(got[i]) == ref_i % (1 << k)
    else:
        assert list(got.astype(object)) == list(negacyclic_mul_exact(c, s, 1 << k))


# -- encryption ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "params",
    [jaguar_params(), jaguar_params(n=8192, ell_out=30, shift=16),
     JaguarParams(n=256, k=40, ell_in=20, shift=4, response_bits=20, allow_insecure=True)],
    ids=["n4096-k64", "n8192-k64", "toy-k40"],
)
def test_decryption_inverts_encryption(params):
    sampler = Sampler.seeded(1)
    sk = keygen(params, sampler)
    for bits in (1, params.ell_in, params.k - 10):
        m = sampler.bits((3, params.n), bits)
        ct = encrypt(sk, m, bits, sampler)
        assert np.array_equal(decrypt(sk, ct, bits), m)
        switched = mod_switch(ct, min(params.k, bits + 12))  # local right shift of (c0, c1)
        assert np.array_equal(decrypt(sk, switched, bits), m)


def test_aux_ntt_decryption_equals_direct():
    params = JaguarParams(n=128, k=64, ell_in=30, shift=5, response_bits=40, allow_insecure=True)
    sampler = Sampler.seeded(2)
    sk = keygen(params, sampler)
    ct = encrypt(sk, sampler.bits((2, params.n), 30), 30, sampler)
    assert np.array_equal(phase(sk, ct, "ntt"), phase(sk, ct, "schoolbook"))


def test_fresh_noise_within_bound_at_secure_set():
    params = jaguar_params()
    sampler = Sampler.seeded(3)
    sk = keygen(params, sampler)
    ct = encrypt(sk, np.zeros((4, params.n), dtype=np.int64), params.ell_in, sampler)
    noise = centered(phase(sk, ct), params.k)
    assert np.abs(noise).max() <= np.ceil(6 * params.sigma)  # tail-cut Gaussian
    assert abs(noise.std() - params.sigma) < 0.15
    pk = public_keygen(sk, sampler)
    zero = centered(phase(sk, encrypt_zero_public(pk, 4, sampler)), params.k)
    predicted = params.sigma * np.sqrt(1 + 4 * params.n / 3)
    assert 0.8 * predicted < zero.std() < 1.2 * predicted


def test_secure_sampler_uses_os_randomness():
    a, b = Sampler.from_os(), Sampler.from_os()
    assert a.secure and not np.array_equal(a.words(8), b.words(8))
    t = a.ternary(30000)
    assert set(np.unique(t)) == {-1, 0, 1} and abs(t.mean()) < 0.03


# -- SPA kernels -----------------------------------------------------------------------------
@pytest.mark.parametrize("k", [64, 41])
def test_gemm_kernel_equals_literal_spa(k):
    rng = np.random.default_rng(k)
    polys = to_ring(rng.integers(-(2**62), 2**62, (3, 2, 2, 128)), k)
    shifts = rng.choice(128, 20, replace=False)
    weights = rng.integers(-(2**14), 2**14, (5, 3, 20))
    assert np.array_equal(spa_accumulate(polys, shifts, weights, k),
                          spa_accumulate_reference(polys, shifts, weights, k))
    huge = rng.integers(-(2**40), 2**40, (5, 3, 20))  # falls back to the exact loop
    assert np.array_equal(spa_accumulate(polys, shifts, huge, k),
                          spa_accumulate_reference(polys, shifts, huge, k))


# -- the linear layer ------------------------------------------------------------------------
CONV_SHAPES = [  # (C, H, W, C_out, h, stride, pad)
    (3, 9, 8, 4, 3, 1, 1),
    (5, 7, 7, 3, 3, 2, 1),
    (2, 12, 10, 2, 5, 1, 2),
    (9, 6, 6, 2, 1, 1, 0),
    (2, 30, 11, 2, 3, 2, 0),  # needs row tiles at N = 256
]


def _run_jaguar(params, shape, seed, kernel="gemm", weight_bits=7, x_bits=None):
    c, h, w, c_out, k, stride, pad = shape
    rng = np.random.default_rng(seed)
    sampler = Sampler.seeded(seed)
    client = JaguarClient(params, sampler).keygen()
    server = JaguarServer(params, client.public_key_, kernel=kernel, sampler=sampler)
    layout = plan_conv(params.n, c, h, w, c_out, k, stride, pad)
    x_bits = x_bits or params.ell_in - weight_bits - 6
    x = rng.integers(-(2**x_bits), 2**x_bits, (c, h, w))
    weight = rng.integers(-(2**weight_bits), 2**weight_bits, (c_out, c, k, k))
    x_s = sampler.bits((c, h, w), params.ell_in).astype(np.int64)
    x_c = np.mod(x - x_s, 1 << params.ell_in)
    response, y_s = server.answer(client.encrypt_share(x_c, layout), x_s, weight, layout)
    y_c = client.decrypt_share(response, layout)
    y = (y_c.astype(object) + y_s.astype(object)) % (1 << params.ell_out)
    exact = conv2d_int(x, weight, stride, pad)
    return layout, y, exact, response


@pytest.mark.parametrize("shape", CONV_SHAPES)
def test_spa_conv_without_shift_equals_plaintext_conv(shape):
    params = JaguarParams(n=256, k=64, ell_in=30, shift=0, response_bits=44, allow_insecure=True)
    layout, y, exact, _ = _run_jaguar(params, shape, seed=sum(shape))
    assert layout.ct * layout.ht * layout.wp <= params.n
    assert np.array_equal(y, exact % (1 << 30))


def test_row_tiles_and_channel_tiles_are_exercised():
    """The exactness tests above run shapes that need channel tiles (every one at N = 256,
    including a 1x1 conv whose 9 channels do not fit one polynomial) and row tiles (the last)."""
    layouts = [plan_conv(256, *shape) for shape in CONV_SHAPES]
    assert [lay.n_ctiles for lay in layouts] == [2, 2, 2, 2, 2]
    assert [lay.n_rtiles for lay in layouts] == [1, 1, 1, 1, 2]
    assert layouts[3].ct == 7 and layouts[3].ct * layouts[3].ht * layouts[3].wp <= 256


def test_reference_kernel_gives_the_same_answer():
    params = JaguarParams(n=256, k=64, ell_in=30, shift=0, response_bits=44, allow_insecure=True)
    _, y_gemm, _, _ = _run_jaguar(params, CONV_SHAPES[1], seed=5)
    _, y_ref, _, _ = _run_jaguar(params, CONV_SHAPES[1], seed=5, kernel="reference")
    assert np.array_equal(y_gemm, y_ref)


def test_fully_connected_equals_plaintext_matmul():
    params = JaguarParams(n=256, k=64, ell_in=30, shift=0, response_bits=44, allow_insecure=True)
    sampler = Sampler.seeded(7)
    rng = np.random.default_rng(7)
    client = JaguarClient(params, sampler).keygen()
    server = JaguarServer(params, client.public_key_, sampler=sampler)
    for m, d in ((10, 64), (7, 300), (40, 20)):
        layout = plan_fc(params.n, m, d)
        x = rng.integers(-(2**12), 2**12, d)
        weight = rng.integers(-100, 100, (m, d))
        x_s = sampler.bits(d, 30).astype(np.int64)
        response, y_s = server.answer(client.encrypt_share(np.mod(x - x_s, 2**30), layout),
                                      x_s, weight, layout)
        y = (client.decrypt_share(response, layout).astype(object) + y_s.astype(object)) % 2**30
        assert np.array_equal(y, (weight.astype(object) @ x.astype(object)) % 2**30)


def test_truncation_by_local_shifts_matches_rounded_division():
    params = jaguar_params(n=256, ell_out=20, shift=8, guard_bits=10, allow_insecure=True)
    diffs = []
    for seed, shape in enumerate(CONV_SHAPES[:3]):
        _, y, exact, _ = _run_jaguar(params, shape, seed=seed, x_bits=18)
        rounded = (exact + (1 << 7)) // (1 << 8)  # round-half-up of M / 2^s
        diffs.append(_signed(y - rounded, params.ell_out).ravel())
    d = np.concatenate(diffs).astype(int)
    assert set(np.unique(d)) <= {-1, 0, 1}  # the documented guarantee
    assert (d == 0).mean() > 0.6  # exact most of the time (two independent roundings)
    assert abs(d.mean()) < 0.15  # and unbiased


def test_noise_budget_prediction_matches_measurement():
    params = jaguar_params()
    sampler = Sampler.seeded(11)
    client = JaguarClient(params, sampler).keygen()
    server = JaguarServer(params, client.public_key_, sampler=sampler)
    layout = plan_conv(params.n, 16, 14, 14, 4, 3, 1, 1)
    rng = np.random.default_rng(11)
    weight = rng.integers(-(2**11), 2**11, (4, 16, 3, 3))
    product = server.evaluate(client.encrypt_share(np.zeros((16, 14, 14), np.int64), layout),
                              np.zeros((16, 14, 14), np.int64), weight, layout)
    noise = centered(phase(client.secret_key_, product), params.k)[:, :, :][
        layout.output_mask()].astype(float)
    l2 = float(np.sqrt((weight.reshape(4, -1).astype(float) ** 2).sum(1)).max())
    budget = linear_noise_budget(params, l2)
    ulp_in = 2.0 ** (params.k - params.ell_out)
    assert noise.std() / ulp_in < budget.std_product * 1.2
    assert budget.log2_fail < -100  # the default set has a huge margin


def test_baseline_and_jaguar_give_identical_plaintext_results():
    shape = (3, 9, 8, 4, 3, 2, 1)
    jp = JaguarParams(n=256, k=64, ell_in=30, shift=0, response_bits=44, allow_insecure=True)
    _, y_jaguar, exact, _ = _run_jaguar(jp, shape, seed=21)
    cp = cheetah_params(n=256, ell=30, prime_bits=45, allow_insecure=True)
    sampler = Sampler.seeded(21)
    rng = np.random.default_rng(21)
    c, h, w, c_out, k, stride, pad = shape
    x = rng.integers(-(2**17), 2**17, (c, h, w))
    weight = rng.integers(-(2**7), 2**7, (c_out, c, k, k))
    layout = plan_conv(256, c, h, w, c_out, k, stride, pad)
    client = CheetahClient(cp, sampler).keygen()
    server = CheetahServer(cp, client.public_key_, sampler=sampler).prepare(weight, layout)
    x_s = sampler.bits((c, h, w), 30).astype(np.int64)
    response, y_s = server.answer(client.encrypt_share(np.mod(x - x_s, 2**30), layout), x_s)
    y_cheetah = (client.decrypt_share(response, layout).astype(object) + y_s.astype(object)) % 2**30
    assert np.array_equal(y_cheetah, conv2d_int(x, weight, stride, pad, 30))
    # and Jaguar on the same input and weights gives the same plaintext
    jclient = JaguarClient(jp, sampler).keygen()
    jserver = JaguarServer(jp, jclient.public_key_, sampler=sampler)
    resp_j, ys_j = jserver.answer(jclient.encrypt_share(np.mod(x - x_s, 2**30), layout), x_s,
                                  weight, layout)
    y_j = (jclient.decrypt_share(resp_j, layout).astype(object) + ys_j.astype(object)) % 2**30
    assert np.array_equal(y_j, y_cheetah)
    assert y_jaguar.shape == exact.shape


def test_masked_response_is_uniform():
    """c0 at used positions and c1 pass a chi-square test for uniform top bits; without
    re-randomisation, even weights make c1 even (the leak the public-key zero closes)."""
    from scipy import stats

    # no modulus switch here: switching drops the low bits where the parity leak lives
    params = JaguarParams(n=256, k=64, ell_in=30, shift=6, response_bits=64, allow_insecure=True)
    sampler = Sampler.seeded(31)
    client = JaguarClient(params, sampler).keygen()
    layout = plan_conv(256, 2, 8, 8, 16, 3, 1, 1)
    weight = 2 * np.random.default_rng(31).integers(-50, 50, (16, 2, 3, 3))
    x = np.zeros((2, 8, 8), np.int64)  # the most structured input
    query = client.encrypt_share(x, layout)
    for pk, expect_uniform in ((client.public_key_, True), (None, False)):
        server = JaguarServer(params, pk, sampler=sampler)
        response, _ = server.answer(query, x, weight, layout)
        top_c0 = (response.c0 >> np.uint64(response.k - 4)).astype(int)
        assert stats.chisquare(np.bincount(top_c0, minlength=16)).pvalue > 1e-3
        low_c1 = (response.c1 & np.uint64(1)).astype(int).ravel()
        p_low = stats.chisquare(np.bincount(low_c1, minlength=2)).pvalue
        assert (p_low > 1e-3) == expect_uniform


def test_lifecycle_and_shape_errors():
    params = JaguarParams(n=256, k=64, ell_in=30, shift=4, response_bits=40, allow_insecure=True)
    layout = plan_conv(256, 2, 6, 6, 2, 3, 1, 1)
    with pytest.raises(NotFittedError, match="keygen"):
        JaguarClient(params, Sampler.seeded(0)).encrypt_share(np.zeros((2, 6, 6)), layout)
    with pytest.raises(InputError, match="shape"):
        layout.pack_input(np.zeros((3, 6, 6)))
    with pytest.raises(InputError, match="exceeds N"):
        plan_conv(256, 1, 100, 100, 1, 3)
