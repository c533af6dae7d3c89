"""Jaguar's compiled kernels (numba) are bit-exact against the numpy references, both sides.

SPA-Conv: the compiled server (c0 at the used coefficients, c1 in full) against the literal
numpy loop ``spa_accumulate_reference``; the NTT baseline: Harvey/Shoup NTTs and the compiled
``CheetahServer`` against the numpy ``NTTContext`` / ``CheetahServer``. Shapes are drawn at
random (strides, padding, channel and row tiles, FC layers).
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from trustlab.methods.jaguar import (
    CheetahClient,
    CheetahServer,
    JaguarClient,
    JaguarParams,
    JaguarServer,
    Sampler,
    cheetah_params,
    plan_conv,
    plan_fc,
    spa_accumulate_reference,
)
from trustlab.methods.jaguar import kernels as K
from trustlab.methods.jaguar.ntt import NTTContext, aux_negacyclic_mul, find_ntt_primes

pytestmark = pytest.mark.skipif(not K.available(), reason="numba is not installed")


def _random_conv(rng: np.random.Generator, n: int):
    while True:
        k = int(rng.choice([1, 3, 5]))
        stride = int(rng.choice([1, 2]))
        pad = int(rng.integers(0, k // 2 + 1))
        h, w = (int(v) for v in rng.integers(k, 19, 2))
        c, c_out = int(rng.integers(1, 13)), int(rng.integers(1, 6))
        if k * (w + 2 * pad) <= n and k <= min(h, w) + 2 * pad:
            return plan_conv(n, c, h, w, c_out, k, stride, pad)


SHAPES = [_random_conv(np.random.default_rng(1000 + i), int(n))
          for i, n in enumerate([128, 256] * 12)]


def test_random_shapes_cover_the_layout_cases():
    assert len(SHAPES) >= 20
    assert any(s.n_ctiles > 1 for s in SHAPES) and any(s.n_rtiles > 1 for s in SHAPES)
    assert {1, 2} <= {s.stride for s in SHAPES} and {1, 3, 5} <= {s.kernel for s in SHAPES}
    assert any(s.pad > 0 for s in SHAPES)


# -- NTT ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [16, 256, 4096])
def test_compiled_ntt_equals_numpy_ntt(n):
    primes = find_ntt_primes(n, 50, 2)
    tab = K.ntt_tables(n, primes)
    rng = np.random.default_rng(n)
    a = np.stack([rng.integers(0, p, (3, n), dtype=np.uint64) for p in primes], axis=1)
    ref = np.stack([NTTContext(n, p, backend="numpy").forward(a[:, li])
                    for li, p in enumerate(primes)], axis=1)
    got = K.ntt_forward(a.copy(), tab)
    assert np.array_equal(got[..., tab.perm], ref)  # same transform, bit-reversed order
    assert np.array_equal(K.ntt_inverse(got.copy(), tab), a)
    # lazy inputs up to 4p are accepted by the forward transform
    lazy = a + 3 * np.array(primes, dtype=np.uint64)[:, None]
    assert np.array_equal(K.ntt_forward(lazy, tab), got)
    for li, p in enumerate(primes):
        ctx = NTTContext(n, p, backend="compiled")
        assert np.array_equal(ctx.forward(a[:, li]), ref[:, li])
        assert np.array_equal(ctx.inverse(ref[:, li]), a[:, li])


def test_shoup_quotients_are_exact():
    primes = find_ntt_primes(64, 50, 2)
    rng = np.random.default_rng(3)
    w = np.stack([rng.integers(0, p, (5, 64), dtype=np.uint64) for p in primes], axis=1)
    w[0, :, 0] = 0
    w[0, 0, 1], w[0, 1, 1] = primes[0] - 1, primes[1] - 1
    got = K.shoup_quotients(w, primes)
    for idx in np.ndindex(w.shape):
        assert int(got[idx]) == (int(w[idx]) << 64) // primes[idx[1]]


@pytest.mark.parametrize("k", [64, 35])
def test_aux_product_is_the_same_with_either_ntt(k, monkeypatch):
    rng = np.random.default_rng(k)
    c = rng.integers(0, 2**63, (2, 256), dtype=np.uint64) & np.uint64((1 << k) - 1 if k < 64 else
                                                                      2**64 - 1)
    s = rng.integers(-1, 2, 256)
    fast = aux_negacyclic_mul(c, s, k)
    from trustlab.methods.jaguar import ntt

    ntt.ntt_context.cache_clear()
    monkeypatch.setattr(ntt, "ntt_context", lambda n, p: NTTContext(n, p, backend="numpy"))
    assert np.array_equal(aux_negacyclic_mul(c, s, k), fast)


# -- SPA ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_spa_full_kernel_equals_the_literal_loop(seed):
    rng = np.random.default_rng(seed)
    n, b, r, o, t = 128, int(rng.integers(1, 4)), int(rng.integers(1, 3)), 5, int(rng.integers(1, 30))
    polys = rng.integers(0, 2**64, (b, r, 2, n), dtype=np.uint64)
    shifts = rng.choice(n, t, replace=False)
    w = rng.integers(-(2**11), 2**11, (o, b, t))
    w[0, 0, : t // 2] = 0  # zero weights are skipped
    ref = spa_accumulate_reference(polys, shifts, w, 64)
    for comp in (0, 1):
        assert np.array_equal(K.spa_full(K.extend_negacyclic(polys[:, :, comp]), shifts, w),
                              ref[:, :, comp])


def _shares(lay, rng, bits):
    x = rng.integers(-(2**10), 2**10, (lay.c, lay.h_in, lay.w_in))
    x_s = rng.integers(0, 2**bits, x.shape)
    return x, x_s, np.mod(x - x_s, 2**bits)


@pytest.mark.parametrize("lay", SHAPES, ids=lambda s: f"N{s.n}-c{s.c}-h{s.h_in}x{s.w_in}-o{s.c_out}"
                         f"-k{s.kernel}s{s.stride}p{s.pad}")
def test_compiled_servers_equal_the_numpy_references(lay):
    """Both sides on the same random conv: the compiled SPA product equals the literal numpy
    loop (c0 at every used coefficient, c1 everywhere) and the full answer is identical; the
    compiled NTT product equals the numpy NTT product in every RNS limb and coefficient."""
    seed = lay.c * 1000 + lay.h_in * 10 + lay.kernel
    rng = np.random.default_rng(seed)
    jp = JaguarParams(n=lay.n, k=64, ell_in=30, shift=6, response_bits=40, allow_insecure=True)
    client = JaguarClient(jp, Sampler.seeded(seed)).keygen()
    _, x_s, x_c = _shares(lay, rng, jp.ell_in)
    w = rng.integers(-(2**9), 2**9, (lay.c_out, lay.c, lay.kernel, lay.kernel))
    query = client.encrypt_share(x_c, lay)
    fast = JaguarServer(jp, client.public_key_, kernel="compiled", sampler=Sampler.seeded(1))
    ref = JaguarServer(jp, client.public_key_, kernel="reference", sampler=Sampler.seeded(1))
    pf, pr = fast.evaluate(query, x_s, w, lay), ref.evaluate(query, x_s, w, lay)
    used = lay.output_mask()
    assert np.array_equal(pf.c0[used], pr.c0[used]) and np.array_equal(pf.c1, pr.c1)
    (rf, yf), (rr, yr) = fast.respond(pf, lay), ref.respond(pr, lay)
    assert np.array_equal(rf.c0, rr.c0) and np.array_equal(rf.c1, rr.c1) and np.array_equal(yf, yr)

    cp = cheetah_params(n=lay.n, ell=30, prime_bits=45, allow_insecure=True)
    cclient = CheetahClient(cp, Sampler.seeded(seed)).keygen()
    cquery = cclient.encrypt_share(x_c, lay)
    cf = CheetahServer(cp, kernel="compiled").prepare(w, lay).evaluate(cquery, x_s)
    cr = CheetahServer(cp, kernel="numpy").prepare(w, lay).evaluate(cquery, x_s)
    assert np.array_equal(cf.c0, cr.c0) and np.array_equal(cf.c1, cr.c1)


@pytest.mark.parametrize(("m", "d"), [(10, 64), (7, 300), (40, 20)])
def test_compiled_servers_on_fully_connected_layers(m, d):
    lay = plan_fc(256, m, d)
    rng = np.random.default_rng(m * d)
    jp = JaguarParams(n=256, k=64, ell_in=30, shift=0, response_bits=44, allow_insecure=True)
    client = JaguarClient(jp, Sampler.seeded(m)).keygen()
    x = rng.integers(-(2**12), 2**12, d)
    x_s = rng.integers(0, 2**30, d)
    w = rng.integers(-100, 100, (m, d))
    query = client.encrypt_share(np.mod(x - x_s, 2**30), lay)
    answers = []
    for kernel in ("compiled", "reference"):
        server = JaguarServer(jp, client.public_key_, kernel=kernel, sampler=Sampler.seeded(2))
        resp, y_s = server.answer(query, x_s, w, lay)
        answers.append((resp.c0, resp.c1, y_s))
        y = (client.decrypt_share(resp, lay).astype(object) + y_s.astype(object)) % 2**30
        assert np.array_equal(y, (w.astype(object) @ x.astype(object)) % 2**30)
    assert all(np.array_equal(a, b) for a, b in zip(*answers, strict=True))
    cp = cheetah_params(n=256, ell=30, prime_bits=45, allow_insecure=True)
    cq = CheetahClient(cp, Sampler.seeded(m)).keygen().encrypt_share(np.mod(x - x_s, 2**30), lay)
    cf = CheetahServer(cp, kernel="compiled").prepare(w, lay).evaluate(cq, x_s)
    cr = CheetahServer(cp, kernel="numpy").prepare(w, lay).evaluate(cq, x_s)
    assert np.array_equal(cf.c0, cr.c0) and np.array_equal(cf.c1, cr.c1)


def test_unknown_kernel_is_rejected():
    from trustlab.core.errors import InputError

    jp = JaguarParams(n=256, k=64, ell_in=30, shift=0, response_bits=44, allow_insecure=True)
    with pytest.raises(InputError, match="'kernel'"):
        JaguarServer(jp, kernel="blas")
    with pytest.raises(InputError, match="'kernel'"):
        CheetahServer(cheetah_params(n=256, ell=30, prime_bits=45, allow_insecure=True),
                      kernel="seal")


_GENERIC_CHECK = """
import numpy as np
from trustlab.methods.jaguar import kernels as K, plan_conv, spa_accumulate_reference
from trustlab.methods.jaguar.ntt import NTTContext, find_ntt_primes
rng = np.random.default_rng(0)
polys = rng.integers(0, 2**64, (2, 1, 2, 128), dtype=np.uint64)
shifts = rng.choice(128, 9, replace=False)
w = rng.integers(-2**11, 2**11, (3, 2, 9))
ref = spa_accumulate_reference(polys, shifts, w, 64)
assert np.array_equal(K.spa_full(K.extend_negacyclic(polys[:, :, 1]), shifts, w), ref[:, :, 1])
p = find_ntt_primes(128, 50, 1)[0]
a = rng.integers(0, p, (2, 128), dtype=np.uint64)
fast, ref = NTTContext(128, p, "compiled"), NTTContext(128, p, "numpy")
assert np.array_equal(fast.forward(a), ref.forward(a))
assert np.array_equal(fast.inverse(ref.forward(a)), a)
x = a.reshape(2, 1, 1, 1, 128)
w = a[::-1].copy().reshape(1, 2, 1, 128)
got = K.ntt_accumulate(x, w, K.shoup_quotients(w, (p,)), (p,), (0,))
want = (x[:, 0, 0, 0].astype(object) * w[0, :, 0].astype(object)).sum(0) % p
assert np.array_equal(got[0, 0, 0, 0], want.astype(np.uint64))
for name in ("spa", "ntt_forward", "ntt_inverse", "ntt_accumulate"):
    regs = K.vector_registers(name)
    assert regs["ymm"] == 0 and regs["zmm"] == 0, (name, regs)
print("generic", K.cpu_name())
"""


def test_generic_build_has_no_avx_and_the_same_results():
    """The paper measures with AVX disabled: under NUMBA_CPU_NAME=generic no kernel uses a ymm
    or zmm register, and the results are unchanged."""
    env = {**os.environ, "NUMBA_CPU_NAME": "generic"}
    out = subprocess.run([sys.executable, "-c", _GENERIC_CHECK], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "generic generic" in out.stdout


def test_both_pointwise_accumulations_agree():
    n = 64
    primes = find_ntt_primes(n, 50, 2)
    rng = np.random.default_rng(9)
    x = np.stack([rng.integers(0, p, (40, 2, 2, n), dtype=np.uint64) for p in primes], axis=3)
    w = np.stack([rng.integers(0, p, (3, 40, n), dtype=np.uint64) for p in primes], axis=2)
    w[0, :, :, :4] = np.array(primes, dtype=np.uint64)[None, :, None] - 1  # the largest residues
    x[:, :, :, :, :4] = np.array(primes, dtype=np.uint64)[None, None, None, :, None] - 1
    shoup = K.ntt_accumulate(x, w, K.shoup_quotients(w, primes), primes, (0, 1))
    mac = K.ntt_accumulate(x, w, None, primes, (0, 1))
    ref = np.empty_like(shoup)
    for li, p in enumerate(primes):
        prod = (w[:, :, None, None, li].astype(object) * x[None, :, :, :, li].astype(object))
        ref[:, :, :, li] = (prod.sum(axis=1) % p).astype(np.uint64)
    assert np.array_equal(shoup, ref) and np.array_equal(mac, ref)


def test_depthwise_batches_equal_one_query_per_channel():
    """Depthwise layers run all channels in one call (output o reads input o only); this equals
    running each channel as its own query, on both sides."""
    rng = np.random.default_rng(12)
    lay = plan_conv(128, 1, 9, 9, 1, 3, 2, 1)
    c = 5
    ext = K.extend_negacyclic(rng.integers(0, 2**64, (c, lay.n_rtiles, 128), dtype=np.uint64))
    terms = np.concatenate([lay.term_weights(rng.integers(-99, 99, (1, 1, 3, 3)))
                            for _ in range(c)])
    sh, spans = lay.shifts(), lay.used_spans()
    for fn, extra in ((K.spa_full, ()), (K.spa_used, (spans,))):
        batched = fn(ext, sh, terms, *extra, diag=True)
        for ch in range(c):
            assert np.array_equal(batched[ch], fn(ext[ch : ch + 1], sh, terms[ch : ch + 1],
                                                   *extra)[0])
    primes = find_ntt_primes(128, 50, 2)
    x = np.stack([rng.integers(0, p, (c, 2, 2, 128), dtype=np.uint64) for p in primes], axis=3)
    w = np.stack([rng.integers(0, p, (c, 1, 128), dtype=np.uint64) for p in primes], axis=2)
    ws = K.shoup_quotients(w, primes)
    batched = K.ntt_accumulate(x, w, ws, primes, (0, 1), diag=True)
    for ch in range(c):
        one = K.ntt_accumulate(x[ch : ch + 1], w[ch : ch + 1], ws[ch : ch + 1], primes, (0, 1))
        assert np.array_equal(batched[ch], one[0])


def test_plain_polynomials_serve_conv_spans_and_wrapping_spans_are_refused():
    rng = np.random.default_rng(4)
    for lay in SHAPES[:6]:
        x = rng.integers(0, 2**64, (lay.n_ctiles, lay.n_rtiles, lay.n), dtype=np.uint64)
        w = lay.term_weights(rng.integers(-50, 50, (lay.c_out, lay.c, lay.kernel, lay.kernel)))
        a = K.spa_used(x, lay.shifts(), w, lay.used_spans(), extended=False)
        b = K.spa_used(K.extend_negacyclic(x), lay.shifts(), w, lay.used_spans())
        assert np.array_equal(a, b)
    fc = plan_fc(128, 6, 40)
    x = rng.integers(0, 2**64, (fc.n_in_cts, 1, 128), dtype=np.uint64)
    w = fc.term_weights(rng.integers(-5, 5, (6, 40)))
    from trustlab.core.errors import InputError

    with pytest.raises(InputError, match="wrap"):
        K.spa_used(x, fc.shifts(), w, fc.used_spans(), extended=False)
