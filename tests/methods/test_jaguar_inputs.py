"""jaguar's public API, property by property, and on malformed input (issue 38's contract).

Each group below states what would be wrong if the function were: decryption inverts
encryption (also after a modulus switch), every polynomial product agrees with an independent
one, a linear layer's shares open to the plaintext product, OT receivers get exactly the chosen
message, comparisons/ReLU/pooling agree with plaintext, truncation errs by at most one, a saved
network loads back the same. Malformed input (wrong dtype, shape, modulus, range, a key or
layout of another parameter set, a non-party) gives an ``InputError`` naming the parameter,
before any message is sent -- never a raw numpy error or a silently wrong answer.
Sizes are tiny (N <= 256, a few shares) so the module stays within a few CPU seconds.
"""

from __future__ import annotations

import math
import socket
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.core.errors import DataError, InputError, NotFittedError
from trustlab.methods.jaguar import (
    KAPPA,
    AvgPool,
    Channel,
    ChannelError,
    ChannelStats,
    CheetahClient,
    CheetahServer,
    Ciphertext,
    ConvLayout,
    FCLayout,
    IKNPReceiver,
    IKNPSender,
    InferenceResult,
    JaguarClient,
    JaguarParams,
    JaguarServer,
    LayerCost,
    LinearResponse,
    MaxPool,
    NoiseBudget,
    NTTContext,
    OTSuite,
    Party,
    PrimeParams,
    ProtocolConfig,
    QuantNet,
    Residual,
    RNSCiphertext,
    Sampler,
    SecretKey,
    SumPool,
    accept,
    and_gates,
    aux_negacyclic_mul,
    avg_pool,
    base_ot_receive,
    base_ot_send,
    bit_triples,
    centered,
    channel_pair,
    cheetah_params,
    connect,
    decrypt,
    digits_data,
    drelu,
    encrypt,
    error_bound,
    extend,
    find_ntt_primes,
    fixed_point_forward,
    float_forward,
    from_torch,
    keygen,
    linear_noise_budget,
    listen,
    load_quantnet,
    max_pool,
    millionaire,
    mod_switch,
    monomial_mul,
    mux,
    negacyclic_mul_exact,
    open_arith,
    open_bool,
    phase,
    plan_conv,
    plan_fc,
    private_inference,
    quantise,
    query,
    relu,
    run_party,
    save_quantnet,
    serve,
    share,
    sum_pool,
    to_ring,
    train_digits_cnn,
    truncate,
    wrap_shares,
)
from trustlab.methods.jaguar.network import Conv, Dense, Flatten, ReLU

from ..malformed import ARRAY, INT, OBJECT, Case, malformed_input_tests, scalar
from .test_jaguar_2pc import two_party

SETTINGS = settings(max_examples=12, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

P64 = JaguarParams(n=64, k=48, ell_in=20, shift=0, response_bits=30, allow_insecure=True)
SK = keygen(P64, Sampler.seeded(0))
SK128 = keygen(JaguarParams(n=128, k=48, ell_in=20, shift=0, response_bits=30,
                            allow_insecure=True), Sampler.seeded(1))


def _raises(name: str, call) -> None:
    """``call()`` raises an InputError whose one-line message names ``name``."""
    with pytest.raises(InputError) as info:
        call()
    message = str(info.value)
    assert f"'{name}'" in message and "\n" not in message, message


# -- RLWE over Z_{2^K}[X]/(X^N+1) --------------------------------------------------------------
@SETTINGS
@given(seed=st.integers(0, 2**16), bits=st.integers(1, P64.k - 8), lead=st.integers(0, 2),
       drop=st.integers(0, 20))
def test_decrypt_inverts_encrypt_and_mod_switch(seed, bits, lead, drop):
    sampler = Sampler.seeded(seed)
    rng = np.random.default_rng(seed)
    m = rng.integers(-(2**40), 2**40, (*([lead] if lead else []), P64.n))
    ct = encrypt(SK, m, bits, sampler)
    want = to_ring(m, bits)
    assert ct.c0.shape == m.shape and ct.k == P64.k
    assert np.array_equal(decrypt(SK, ct, bits), want)
    new_k = max(bits + 10, P64.k - drop)  # room for the switch's rounding noise (<= N/2 + 1)
    assert np.array_equal(decrypt(SK, mod_switch(ct, new_k), bits), want)
    if lead == 1:  # the O(N log N) client product is the exact schoolbook one
        assert np.array_equal(phase(SK, ct, "ntt"), phase(SK, ct, "schoolbook"))


def _ct():
    return encrypt(SK, np.arange(P64.n), 20, Sampler.seeded(2))


RLWE_BAD = [
    ("message", lambda: encrypt(SK, np.arange(P64.n - 1), 20, Sampler.seeded(0))),
    ("message", lambda: encrypt(SK, np.arange(P64.n) + 0.5, 20, Sampler.seeded(0))),
    ("message", lambda: encrypt(SK, np.full(P64.n, np.nan), 20, Sampler.seeded(0))),
    ("message", lambda: encrypt(SK, np.arange(P64.n) > 3, 20, Sampler.seeded(0))),
    ("message", lambda: encrypt(SK, "hello", 20, Sampler.seeded(0))),
    ("plain_bits", lambda: encrypt(SK, np.arange(P64.n), 0, Sampler.seeded(0))),
    ("plain_bits", lambda: encrypt(SK, np.arange(P64.n), P64.k, Sampler.seeded(0))),
    ("plain_bits", lambda: encrypt(SK, np.arange(P64.n), 2.5, Sampler.seeded(0))),
    ("plain_bits", lambda: encrypt(SK, np.arange(P64.n), True, Sampler.seeded(0))),
    ("sampler", lambda: encrypt(SK, np.arange(P64.n), 20, 7)),
    ("sk", lambda: encrypt(SK.s, np.arange(P64.n), 20, Sampler.seeded(0))),
    ("ct", lambda: decrypt(SK128, _ct(), 20)),  # a key of another ring degree
    ("ct", lambda: decrypt(SK, (_ct().c0, _ct().c1), 20)),
    ("ct", lambda: decrypt(SK, Ciphertext(_ct().c0, _ct().c1, 64), 20)),  # modulus above K
    ("ct", lambda: phase(SK, Ciphertext(_ct().c0 | np.uint64(1 << 50), _ct().c1, 48))),
    ("sk", lambda: decrypt("key", _ct(), 20)),
    ("plain_bits", lambda: decrypt(SK, _ct(), 49)),
    ("plain_bits", lambda: decrypt(SK, _ct(), float("nan"))),
    ("method", lambda: decrypt(SK, _ct(), 20, method="fft")),
    ("method", lambda: phase(SK, _ct(), method=None)),
    ("new_k", lambda: mod_switch(_ct(), 49)),
    ("new_k", lambda: mod_switch(_ct(), 0)),
    ("new_k", lambda: mod_switch(_ct(), "30")),
    ("ct", lambda: mod_switch((1, 2), 30)),
    ("c0", lambda: Ciphertext(_ct().c0.astype(np.int64), _ct().c1, 48)),
    ("c0", lambda: Ciphertext(_ct().c0, _ct().c1[None], 48)),
    ("k", lambda: Ciphertext(_ct().c0, _ct().c1, 65)),
    ("s", lambda: SecretKey(P64, SK.s * 2, SK.s_hat)),
    ("s", lambda: SecretKey(P64, SK.s[:10], SK.s_hat)),
    ("params", lambda: SecretKey(None, SK.s, SK.s_hat)),
    ("params", lambda: keygen({"n": 64}, Sampler.seeded(0))),
    ("sampler", lambda: keygen(P64, 3)),
]


@pytest.mark.parametrize(("name", "call"), RLWE_BAD, ids=[f"{i}-{n}" for i, (n, _) in
                                                          enumerate(RLWE_BAD)])
def test_rlwe_rejects_malformed_input(name, call):
    _raises(name, call)


# -- polynomial products: schoolbook, NTT, auxiliary-prime NTT --------------------------------
POLY = st.lists(st.integers(-(2**70), 2**70), min_size=1, max_size=12)


@SETTINGS
@given(a=POLY, data=st.data())
def test_negacyclic_schoolbook_is_the_ring_product(a, data):
    """X^N = -1 (against monomial_mul), 1 is neutral, the product is commutative and
    distributive, and the modulus reduces every coefficient."""
    n = len(a)
    b = data.draw(st.lists(st.integers(-(2**70), 2**70), min_size=n, max_size=n), label="b")
    c = data.draw(st.lists(st.integers(-(2**20), 2**20), min_size=n, max_size=n), label="c")
    one, x = [1] + [0] * (n - 1), [0] * n
    x[1 % n] = 1 if n > 1 else -1  # X = -1 in Z[X]/(X + 1)
    ab = negacyclic_mul_exact(np.array(a, dtype=object), np.array(b, dtype=object))
    assert list(negacyclic_mul_exact(np.array(a, dtype=object), np.array(one))) == a
    assert list(ab) == list(negacyclic_mul_exact(np.array(b, dtype=object), np.array(a, dtype=object)))
    a_c = negacyclic_mul_exact(np.array(a, dtype=object), np.array(c))
    bc = np.array([u + v for u, v in zip(b, c, strict=True)], dtype=object)
    assert list(negacyclic_mul_exact(np.array(a, dtype=object), bc)) == [
        u + v for u, v in zip(ab, a_c, strict=True)]
    a64 = to_ring(np.array(a, dtype=object), 64)
    assert list(to_ring(negacyclic_mul_exact(a64, np.array(x)), 64)) == list(monomial_mul(a64, 1))
    assert [int(v) for v in negacyclic_mul_exact(np.array(a, dtype=object), np.array(b, dtype=object),
                                                 97)] == [int(v) % 97 for v in ab]


@SETTINGS
@given(log_n=st.integers(1, 7), seed=st.integers(0, 2**16), bits=st.integers(20, 50))
def test_ntt_product_equals_schoolbook_and_inverse_inverts(log_n, seed, bits):
    n = 1 << log_n
    p = find_ntt_primes(n, bits, 1)[0]
    ctx = NTTContext(n, p, backend="numpy")
    rng = np.random.default_rng(seed)
    a = rng.integers(0, p, n, dtype=np.uint64)
    b = rng.integers(0, p, (2, n), dtype=np.uint64)  # broadcast over a leading axis
    want = np.stack([negacyclic_mul_exact(a, row, p) for row in b]).astype(np.uint64)
    assert np.array_equal(ctx.multiply(a, b), want)
    assert np.array_equal(ctx.inverse(ctx.forward(b)), b)


@SETTINGS
@given(log_n=st.integers(1, 6), k=st.integers(1, 64), seed=st.integers(0, 2**16),
       bound=st.sampled_from([1, 3, 1000]))
def test_aux_ntt_product_equals_schoolbook_mod_2k(log_n, k, seed, bound):
    n = 1 << log_n
    rng = np.random.default_rng(seed)
    c = to_ring(rng.integers(-(2**62), 2**62, (2, n)), k)
    small = rng.integers(-bound, bound + 1, n)
    want = np.stack([to_ring(negacyclic_mul_exact(row, small, 1 << k), k) for row in c])
    assert np.array_equal(aux_negacyclic_mul(c, small, k), want)


P257 = find_ntt_primes(64, 30, 1)[0]
CTX = NTTContext(64, P257, backend="numpy")
U64 = np.arange(64, dtype=np.uint64)
NTT_BAD = [
    ("n", lambda: NTTContext(100, P257)),
    ("n", lambda: NTTContext(2.5, P257)),
    ("p", lambda: NTTContext(64, 129)),  # = 1 mod 128 but 3 * 43: not a field
    ("p", lambda: NTTContext(64, 2**51 + 1)),
    ("p", lambda: NTTContext(64, 97)),  # prime, but not = 1 mod 2N
    ("p", lambda: NTTContext(64, None)),
    ("a", lambda: CTX.forward(U64[:-1])),
    ("a", lambda: CTX.forward(U64 + np.uint64(P257))),
    ("a", lambda: CTX.forward(np.full(64, np.nan))),
    ("a", lambda: CTX.forward("poly")),
    ("a_hat", lambda: CTX.inverse(-np.ones(64, dtype=np.int64))),
    ("b", lambda: CTX.multiply(U64, U64[:32])),
    ("a", lambda: negacyclic_mul_exact(np.ones((2, 4), dtype=int), np.ones(4, dtype=int))),
    ("b", lambda: negacyclic_mul_exact(np.ones(4, dtype=int), np.ones(5, dtype=int))),
    ("a", lambda: negacyclic_mul_exact(np.array([0.5, 1.0]), np.ones(2, dtype=int))),
    ("a", lambda: negacyclic_mul_exact([], [])),
    ("modulus", lambda: negacyclic_mul_exact([1, 2], [3, 4], 0)),
    ("modulus", lambda: negacyclic_mul_exact([1, 2], [3, 4], 2.5)),
    ("c", lambda: aux_negacyclic_mul(np.arange(64), np.ones(64, dtype=int), 40)),  # not uint64
    ("c", lambda: aux_negacyclic_mul(U64 << np.uint64(45), np.ones(64, dtype=int), 40)),
    ("c (last axis)", lambda: aux_negacyclic_mul(np.zeros(24, np.uint64), np.ones(24, int), 40)),
    ("small", lambda: aux_negacyclic_mul(U64, np.full(64, 2**44), 40)),  # not small: inexact
    ("small", lambda: aux_negacyclic_mul(U64, np.ones(32, dtype=int), 40)),
    ("small", lambda: aux_negacyclic_mul(U64, np.full(64, 0.5), 40)),
    ("k", lambda: aux_negacyclic_mul(U64, np.ones(64, dtype=int), 0)),
    ("k", lambda: aux_negacyclic_mul(U64, np.ones(64, dtype=int), 65)),
]


@pytest.mark.parametrize(("name", "call"), NTT_BAD, ids=[f"{i}-{n}" for i, (n, _) in
                                                         enumerate(NTT_BAD)])
def test_polynomial_products_reject_malformed_input(name, call):
    _raises(name, call)


# -- one linear layer between client and server, both systems -----------------------------
JP = JaguarParams(n=256, k=64, ell_in=30, shift=0, response_bits=44, allow_insecure=True)
CP = cheetah_params(n=256, ell=30, prime_bits=45, allow_insecure=True)
J_CLIENT = JaguarClient(JP, Sampler.seeded(3)).keygen()
J_SERVER = JaguarServer(JP, J_CLIENT.public_key_, sampler=Sampler.seeded(4))
C_CLIENT = CheetahClient(CP, Sampler.seeded(5)).keygen()


@SETTINGS
@given(m=st.integers(1, 12), d=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_fc_layer_shares_open_to_the_product_in_both_systems(m, d, seed):
    rng = np.random.default_rng(seed)
    layout = plan_fc(256, m, d)
    assert isinstance(layout, FCLayout)
    x = rng.integers(-(2**12), 2**12, d)
    w = rng.integers(-100, 100, (m, d))
    x_s = rng.integers(0, 2**30, d)
    x_c = np.mod(x - x_s, 2**30)
    want = (w.astype(object) @ x.astype(object)) % 2**30
    resp, y_s = J_SERVER.answer(J_CLIENT.encrypt_share(x_c, layout), x_s, w, layout)
    assert isinstance(resp, LinearResponse) and resp.k == JP.response_bits
    y = (J_CLIENT.decrypt_share(resp, layout).astype(object) + y_s.astype(object)) % 2**30
    assert np.array_equal(y, want)
    server = CheetahServer(CP, C_CLIENT.public_key_, sampler=Sampler.seeded(seed)).prepare(w, layout)
    query = C_CLIENT.encrypt_share(x_c, layout)
    assert isinstance(query, RNSCiphertext) and query.primes == CP.primes
    resp, y_s = server.answer(query, x_s)
    y = (C_CLIENT.decrypt_share(resp, layout).astype(object) + y_s.astype(object)) % 2**30
    assert np.array_equal(y, want)


@SETTINGS
@given(l2=st.floats(0, 1e6), scale=st.floats(1.0, 100.0))
def test_noise_budget_adds_up_and_grows_with_the_weights(l2, scale):
    small, big = linear_noise_budget(JP, l2), linear_noise_budget(JP, l2 * scale)
    assert isinstance(small, NoiseBudget)
    assert small.std_total == pytest.approx(np.sqrt(small.std_product**2 + small.std_rerandomise**2
                                                    + small.std_switch**2))
    assert big.std_product == pytest.approx(small.std_product * scale, rel=1e-9, abs=1e-300)
    assert big.log2_fail >= small.log2_fail - 1e-9 and small.log2_fail <= 0


CONV = plan_conv(256, 2, 5, 5, 2, 3, 1, 1)
FC = plan_fc(256, 3, 10)
X_FC = np.arange(10)


def _j_resp():
    return J_SERVER.answer(J_CLIENT.encrypt_share(X_FC, FC), X_FC, np.ones((3, 10), int), FC)[0]


def _c_server():
    return CheetahServer(CP, C_CLIENT.public_key_, sampler=Sampler.seeded(0)).prepare(
        np.ones((3, 10), int), FC)


LINEAR_BAD = [
    ("params", lambda: JaguarClient(CP)),
    ("params", lambda: CheetahClient(JP)),
    ("params", lambda: JaguarServer(None)),
    ("params", lambda: CheetahServer({"n": 256})),
    ("sampler", lambda: JaguarClient(JP, sampler=np.random.default_rng(0))),
    ("sampler", lambda: CheetahServer(CP, sampler=0)),
    ("public_key", lambda: JaguarServer(JP, public_key=C_CLIENT.public_key_)),
    ("public_key", lambda: CheetahServer(CP, public_key=J_CLIENT.public_key_)),
    ("layout", lambda: J_CLIENT.encrypt_share(X_FC, plan_fc(512, 3, 10))),  # another N
    ("layout", lambda: J_CLIENT.encrypt_share(X_FC, (3, 10))),
    ("layout", lambda: C_CLIENT.encrypt_share(X_FC, "fc")),
    ("x", lambda: J_CLIENT.encrypt_share(np.arange(11), FC)),
    ("x_share", lambda: C_CLIENT.encrypt_share(X_FC + 0.5, FC)),
    ("x_share", lambda: J_SERVER.evaluate(J_CLIENT.encrypt_share(X_FC, FC), "x", np.ones((3, 10)),
                                          FC)),
    ("weight", lambda: J_SERVER.evaluate(J_CLIENT.encrypt_share(X_FC, FC), X_FC, np.ones((10, 3)),
                                         FC)),
    ("weight", lambda: CheetahServer(CP).prepare(np.full((3, 10), 0.5), FC)),
    ("query", lambda: J_SERVER.evaluate(C_CLIENT.encrypt_share(X_FC, FC), X_FC, np.ones((3, 10)),
                                        FC)),
    ("query", lambda: J_SERVER.evaluate(mod_switch(J_CLIENT.encrypt_share(X_FC, FC), 50), X_FC,
                                        np.ones((3, 10)), FC)),
    ("query", lambda: _c_server().evaluate(J_CLIENT.encrypt_share(X_FC, FC), X_FC)),
    ("query", lambda: _c_server().evaluate(  # a query of a wider layer
        C_CLIENT.encrypt_share(np.arange(300), plan_fc(256, 3, 300)), X_FC)),
    ("product", lambda: J_SERVER.respond(J_CLIENT.encrypt_share(X_FC, FC), CONV)),
    ("response", lambda: J_CLIENT.decrypt_share(_j_resp(), CONV)),  # another layer's answer
    ("response", lambda: J_CLIENT.decrypt_share((_j_resp().c0, _j_resp().c1), FC)),
    ("response", lambda: J_CLIENT.decrypt_share(
        LinearResponse(_j_resp().c0 | np.uint64(1 << 50), _j_resp().c1, 44), FC)),
    ("response", lambda: C_CLIENT.decrypt_share(LinearResponse(_j_resp().c0, _j_resp().c1, 20),
                                                FC)),  # below the output ring
    ("phase_method", lambda: J_CLIENT.decrypt_share(_j_resp(), FC, phase_method="fast")),
    ("k", lambda: LinearResponse(np.zeros(3, np.uint64), np.zeros((1, 1, 256), np.uint64), 70)),
    ("c1", lambda: LinearResponse(np.zeros(3, np.uint64), np.zeros((1, 1, 256)), 40)),
    ("c0", lambda: RNSCiphertext(np.zeros((1, 1, 3, 256), np.uint64),
                                 np.zeros((1, 1, 3, 256), np.uint64), CP.primes)),
    ("primes", lambda: RNSCiphertext(np.zeros((1, 2, 256), np.uint64),
                                     np.zeros((1, 2, 256), np.uint64), (4.5, 7))),
    ("polys", lambda: FC.extract(np.zeros((2, 1, 256), np.uint64))),
    ("polys", lambda: CONV.extract(np.zeros((2, 1, 256)))),
    ("x", lambda: CONV.pack_input(np.zeros((2, 5, 4), int))),
    ("weight", lambda: CONV.term_weights(np.zeros((2, 2, 3, 3)) + np.nan)),
    ("max_weight_l2", lambda: linear_noise_budget(JP, float("nan"))),
    ("max_weight_l2", lambda: linear_noise_budget(JP, -1.0)),
    ("params", lambda: linear_noise_budget(CP, 1.0)),
    ("n", lambda: JaguarParams(n=256.5, allow_insecure=True)),
    ("sigma", lambda: JaguarParams(n=256, sigma=float("nan"), allow_insecure=True)),
    ("allow_insecure", lambda: JaguarParams(n=256, allow_insecure="yes")),
    ("primes", lambda: PrimeParams(256, (CP.primes[0], CP.primes[0]), 30, 40, allow_insecure=True)),
    ("primes", lambda: PrimeParams(256, (CP.primes[0] * 3,), 30, 40, allow_insecure=True)),
    ("primes", lambda: PrimeParams(256, "primes", 30, 40, allow_insecure=True)),
    ("ell", lambda: PrimeParams(256, CP.primes[:1], 40, 44, allow_insecure=True)),
    ("response_bits", lambda: PrimeParams(256, CP.primes, 30, 20, allow_insecure=True)),
]


@pytest.mark.parametrize(("name", "call"), LINEAR_BAD, ids=[f"{i}-{n}" for i, (n, _) in
                                                            enumerate(LINEAR_BAD)])
def test_linear_layer_rejects_malformed_input(name, call):
    _raises(name, call)


def test_layouts_are_the_planned_types():
    assert isinstance(CONV, ConvLayout) and isinstance(FC, FCLayout)


# -- two parties: channel, OT, comparison, ReLU, truncation, pooling ------------------------
def _two(f0, f1, timeout: float = 20.0):
    """``f0(ch)`` as the server and ``f1(ch)`` as the client (test_jaguar_2pc's harness)."""
    return two_party(f0, f1, timeout)


def _spmd(fn, dealer: bool = True, seed: int = 0):
    def side(i):
        return lambda ch: fn(Party(ch, Sampler.seeded(seed + i), dealer=dealer).setup())
    return _two(side(0), side(1))


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(ell=st.integers(4, 40), m=st.integers(1, 4), n=st.integers(1, 5), s=st.integers(1, 3),
       seed=st.integers(0, 2**16))
def test_protocols_agree_with_plaintext(ell, m, n, s, seed):
    """One session (test-only dealer OTs) runs every protocol on shares of random secrets; the
    opened results are the plaintext ones (truncation: floor, or one below)."""
    rng = np.random.default_rng(seed)
    half = 1 << (ell - 1)
    x = rng.integers(-half, half, n)
    x[0] = rng.choice([0, -1, half - 1, -half])
    y = rng.integers(0, half, n)  # known MSB = 0
    a, b = rng.integers(0, half, n, dtype=np.uint64), rng.integers(0, half, n, dtype=np.uint64)
    bits = rng.integers(0, 2, n)
    u, v = rng.integers(0, 2, n), rng.integers(0, 2, n)
    z = rng.integers(0, 1 << max(1, ell - 3), (1, 2, 4, 4))  # pooling: |a - b| < 2^(ell-1)
    xs, ys, zs = share(x, ell, rng), share(y, ell, rng), share(z, ell, rng)
    bs = rng.integers(0, 2, n).astype(np.uint8)
    bs = (bs, bs ^ bits.astype(np.uint8))
    us, vs = [(r, r ^ w.astype(np.uint8)) for w in (u, v)
              for r in [rng.integers(0, 2, n).astype(np.uint8)]]

    def fn(p):
        i = p.role
        triples = bit_triples(p, n)
        return dict(
            drelu=drelu(p, xs[i], ell, m), relu=relu(p, xs[i], ell, m),
            mux=mux(p, bs[i], xs[i], ell), lt=millionaire(p, a if i == 0 else b, ell - 1, m),
            ext=extend(p, ys[i], ell, ell + s), trunc=truncate(p, ys[i], ell, s),
            wrap=wrap_shares(p, ys[i], ell, ell), open=open_arith(p, xs[i], ell),
            open_b=open_bool(p, bs[i]), triples=triples, and_=and_gates(p, us[i], vs[i], triples),
            max=max_pool(p, zs[i], 2, ell, m), avg=avg_pool(p, zs[i], 2, ell),
            sum=sum_pool(zs[i], 2, ell))

    r0, r1 = _spmd(fn, seed=seed)
    ring = 1 << ell

    def opened(key, bits_=ell):
        return (r0[key].astype(object) + r1[key].astype(object)) % (1 << bits_)

    assert np.array_equal(r0["drelu"] ^ r1["drelu"], (x >= 0).astype(np.uint8))
    assert np.array_equal(centered(opened("relu"), ell), np.maximum(x, 0))
    assert np.array_equal(centered(opened("mux"), ell), bits * x)
    assert np.array_equal(r0["lt"] ^ r1["lt"], (a < b).astype(np.uint8))
    assert np.array_equal(opened("ext", ell + s), y)
    err = centered(opened("trunc"), ell) - y // (1 << s)
    assert set(err.tolist()) <= {0, -1}
    assert np.array_equal(opened("wrap"), (ys[0].astype(object) + ys[1].astype(object)) >= ring)
    assert np.array_equal(r0["open"], r1["open"]) and np.array_equal(r0["open"], x % ring)
    assert np.array_equal(r0["open_b"], bits) and np.array_equal(r1["open_b"], bits)
    ta, tb, tc = (r0["triples"][j] ^ r1["triples"][j] for j in range(3))
    assert np.array_equal(tc, ta & tb)
    assert np.array_equal(r0["and_"] ^ r1["and_"], u & v)
    win = z.reshape(1, 2, 2, 2, 2, 2)
    assert np.array_equal(opened("max"), win.max(axis=(3, 5)))
    assert np.array_equal(opened("sum"), win.sum(axis=(3, 5)))
    assert set((centered(opened("avg"), ell) - win.sum(axis=(3, 5)) // 4).ravel().tolist()) <= {
        0, -1}


def test_real_ot_delivers_exactly_the_chosen_messages():
    """Base OT (X25519) and IKNP extension, no dealer: each receiver gets its choice only."""
    rng = np.random.default_rng(5)
    c = rng.integers(0, 2, 40).astype(np.uint8)
    m0, m1 = rng.integers(0, 2**40, (2, 40), dtype=np.uint64)
    delta = rng.integers(0, 2**20, 40, dtype=np.uint64)
    msgs = rng.integers(0, 4, (40, 8), dtype=np.uint64)
    cn = rng.integers(0, 8, 40)

    def sender(ch):
        keys = base_ot_send(ch, 8, Sampler.seeded(1))
        suite = OTSuite(ch, Sampler.seeded(2)).setup()
        suite.ot_send(m0, m1, 40)
        x0 = suite.cot_send(delta, 20)
        suite.ot_n_send(msgs, 2)
        return keys, x0

    def receiver(ch):
        kc = base_ot_receive(ch, c[:8], Sampler.seeded(3))
        suite = OTSuite(ch, Sampler.seeded(4)).setup()
        return kc, suite.ot_receive(c, 40), suite.cot_receive(c, 20), suite.ot_n_receive(cn, 3, 2)

    ((k0, k1), x0), (kc, got, cot, got_n) = _two(sender, receiver)
    assert kc == [k1[i] if c[i] else k0[i] for i in range(8)]
    assert all(kc[i] != (k0[i] if c[i] else k1[i]) for i in range(8))
    assert np.array_equal(got, np.where(c == 1, m1, m0))
    assert np.array_equal(cot, (x0 + c * delta) % 2**20)
    assert np.array_equal(got_n, msgs[np.arange(40), cn])


@SETTINGS
@given(m=st.integers(0, 300), seed=st.integers(0, 2**16))
def test_iknp_rows_are_correlated_by_the_senders_secret(m, seed):
    """q_j = t_j ^ r_j s for IKNP built directly from base-OT seeds (no channel)."""
    rng = np.random.default_rng(seed)
    seeds0 = [rng.bytes(16) for _ in range(KAPPA)]
    seeds1 = [rng.bytes(16) for _ in range(KAPPA)]
    s = rng.integers(0, 2, KAPPA)
    receiver = IKNPReceiver(seeds0, seeds1)
    sender = IKNPSender(s, [seeds1[i] if s[i] else seeds0[i] for i in range(KAPPA)])
    r = rng.integers(0, 2, m) > 0  # a boolean mask is a valid choice vector
    u, t, tw = receiver.extend(r)
    q, tw2 = sender.extend(u, m)
    assert np.array_equal(tw, tw2)
    assert np.array_equal(q, t ^ (r[:, None].astype(np.uint64) * sender.s_block_[None, :]))


ITEMS = st.lists(st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.binary(max_size=20), st.text(max_size=10),
    st.lists(st.integers(0, 2**64 - 1), max_size=5).map(lambda v: np.array(v, dtype=np.uint64)),
    st.lists(st.integers(0, 255), max_size=5).map(lambda v: np.array(v, dtype=np.uint8))),
    max_size=4)


@SETTINGS
@given(items=ITEMS, bits=st.integers(1, 64), seed=st.integers(0, 2**16))
def test_channel_delivers_items_and_counts_both_ends(items, bits, seed):
    ring = np.random.default_rng(seed).integers(0, 2**63, 7, dtype=np.uint64) >> np.uint64(
        max(0, 63 - bits))

    def server(ch):
        before = ch.stats()
        ch.send(*items)
        ch.send_ring(ring, bits)
        got = ch.recv_one()
        return got, ch.stats(), ch.stats().minus(before)

    def client(ch):
        got = ch.recv()
        values = ch.recv_ring(bits, (7,))
        ch.send(b"ack")
        return got, values, ch.stats()

    (ack, s_stats, delta), (got, values, c_stats) = _two(server, client)
    assert ack == b"ack" and isinstance(s_stats, ChannelStats)
    assert len(got) == len(items)
    for g, w in zip(got, items, strict=True):
        assert np.array_equal(g, w) if isinstance(w, np.ndarray) else g == w
    assert np.array_equal(values, ring)
    assert s_stats.bytes_sent == c_stats.bytes_received and s_stats.bytes_received == c_stats.bytes_sent
    assert delta.messages_sent == 2 and c_stats.rounds >= 1
    assert s_stats.bytes_total == s_stats.bytes_sent + s_stats.bytes_received


def test_tcp_parties_connect_and_malformed_frames_are_channel_errors():
    srv = listen("127.0.0.1", 0)
    port = srv.getsockname()[1]
    box: dict = {}
    t = threading.Thread(target=lambda: box.setdefault("c", connect("127.0.0.1", port, 5.0)))
    t.start()
    server = accept(srv, 5.0)
    t.join()
    client = box["c"]
    client.send(np.arange(3, dtype=np.int64))
    assert np.array_equal(server.recv_one(), np.arange(3))
    client.sock.sendall(b"\x05\x00\x00\x00\x00\x00\x00\x00junk!")  # a frame that decodes to nothing
    with pytest.raises(ChannelError):
        server.recv()
    client.close()
    server.close()
    srv.close()


@pytest.fixture(scope="module")
def parties():
    """Two set-up dealer-mode parties; malformed calls must fail before any message is sent
    (if one did not, the 3 s timeout turns it into a ChannelError and the test fails)."""
    c0, c1 = channel_pair(timeout=3.0)
    box: dict = {}
    t = threading.Thread(target=lambda: box.setdefault(1, Party(c1, Sampler.seeded(1),
                                                                 dealer=True).setup()))
    t.start()
    p0 = Party(c0, Sampler.seeded(0), dealer=True).setup()
    t.join()
    yield p0, box[1]
    c0.close()
    c1.close()


X8 = np.arange(6, dtype=np.uint64)
SEEDS = [bytes(16)] * KAPPA
PARTY_BAD = [
    ("p", lambda p: drelu("party", X8, 8)),
    ("x", lambda p: drelu(p, X8 + np.uint64(256), 8)),  # a share outside [0, 2^ell)
    ("x", lambda p: drelu(p, X8 + 0.5, 8)),
    ("x", lambda p: drelu(p, -np.arange(3), 8)),
    ("ell", lambda p: drelu(p, X8, 1)),
    ("ell", lambda p: drelu(p, X8, 65)),
    ("m", lambda p: drelu(p, X8, 8, m=9)),
    ("x", lambda p: relu(p, np.full(3, np.nan), 8)),
    ("ell", lambda p: relu(p, X8, 8.5)),
    ("b", lambda p: mux(p, [0, 1, 2, 0, 1, 0], X8, 8)),
    ("b", lambda p: mux(p, [0, 1], X8, 8)),
    ("x", lambda p: mux(p, np.ones(6, np.uint8), "x", 8)),
    ("out_bits", lambda p: wrap_shares(p, X8, 8, 0)),
    ("y", lambda p: wrap_shares(p, X8 + np.uint64(300), 8, 8)),
    ("new_bits", lambda p: extend(p, X8, 8, 7)),
    ("new_bits", lambda p: extend(p, X8, 8, 65)),
    ("shift", lambda p: truncate(p, X8, 8, 8)),
    ("shift", lambda p: truncate(p, X8, 8, 0)),
    ("y", lambda p: truncate(p, [[1, 2], [3]], 8, 2)),
    ("value", lambda p: millionaire(p, X8 + np.uint64(16), 4)),
    ("nbits", lambda p: millionaire(p, X8, 0)),
    ("m", lambda p: millionaire(p, X8, 8, m=0)),
    ("n", lambda p: bit_triples(p, -1)),
    ("n", lambda p: bit_triples(p, 2.5)),
    ("y", lambda p: and_gates(p, [0, 1], [1], bit_triples(p, 0))),
    ("triples", lambda p: and_gates(p, [0, 1], [1, 1], (1, 2))),
    ("triples", lambda p: and_gates(p, [0, 1], [1, 1], bit_triples(p, 0))),
    ("x", lambda p: open_arith(p, X8 + np.uint64(256), 8)),
    ("bits", lambda p: open_arith(p, X8, 0)),
    ("b", lambda p: open_bool(p, [0, 2])),
    ("x", lambda p: max_pool(p, np.zeros((4, 4), np.uint64), 2, 8)),
    ("k", lambda p: max_pool(p, np.zeros((1, 4, 4), np.uint64), 0, 8)),
    ("k", lambda p: max_pool(p, np.zeros((1, 4, 4), np.uint64), 5, 8)),
    ("k", lambda p: avg_pool(p, np.zeros((1, 6, 6), np.uint64), 3, 8)),
    ("ell", lambda p: sum_pool(np.zeros((1, 4, 4), np.uint64), 2, 70)),
    ("x", lambda p: sum_pool("x", 2, 8)),
    ("values", lambda p: share([0.5, 1], 8, np.random.default_rng(0))),
    ("bits", lambda p: share([1, 2], 0, np.random.default_rng(0))),
    ("rng", lambda p: share([1, 2], 8, 0)),
    ("ch", lambda p: OTSuite("channel")),
    ("dealer", lambda p: OTSuite(p.ch, dealer="yes")),
    ("sampler", lambda p: OTSuite(p.ch, sampler=np.random.default_rng(0))),
    ("m0", lambda p: p.ot.ot_send(X8, X8[:-1], 8)),
    ("m0", lambda p: p.ot.ot_send(X8 + np.uint64(256), X8, 8)),
    ("bits", lambda p: p.ot.cot_send(X8, 0)),
    ("delta", lambda p: p.ot.cot_both(-np.ones(6, int), np.ones(6, np.uint8), 8)),
    ("choices", lambda p: p.ot.ot_receive([0, 2], 8)),
    ("choices", lambda p: p.ot.cot_receive([0.5], 8)),
    ("messages", lambda p: p.ot.ot_n_send(X8, 2)),
    ("bits", lambda p: p.ot.ot_n_send(np.zeros((2, 4), np.uint64), 9)),
    ("choices", lambda p: p.ot.ot_n_receive([16], 4, 2)),
    ("m", lambda p: p.ot.rot_send(-1)),
    ("choices", lambda p: p.ot.rot_receive("0101")),
    ("ch", lambda p: base_ot_send("channel", 4, Sampler.seeded(0))),
    ("n", lambda p: base_ot_send(p.ch, 0, Sampler.seeded(0))),
    ("sampler", lambda p: base_ot_send(p.ch, 4, None)),
    ("choices", lambda p: base_ot_receive(p.ch, [0, 2], Sampler.seeded(0))),
    ("choices", lambda p: base_ot_receive(p.ch, [], Sampler.seeded(0))),
    ("s", lambda p: IKNPSender(np.zeros(KAPPA - 1, int), SEEDS)),
    ("s", lambda p: IKNPSender(np.full(KAPPA, 2), SEEDS)),
    ("seeds", lambda p: IKNPSender(np.zeros(KAPPA, int), SEEDS[:3])),
    ("seeds1", lambda p: IKNPReceiver(SEEDS, "seeds")),
    ("choices", lambda p: IKNPReceiver(SEEDS, SEEDS).extend([0, 2])),
    ("m", lambda p: IKNPSender(np.zeros(KAPPA, int), SEEDS).extend(np.zeros((KAPPA, 1),
                                                                            np.uint8), -3)),
    ("ch", lambda p: Party("channel")),
    ("sampler", lambda p: Party(p.ch, sampler=3)),
    ("dealer", lambda p: Party(p.ch, dealer=1)),
    ("values", lambda p: p.ch.send_ring([256], 8)),
    ("bits", lambda p: p.ch.send_ring(X8, 65)),
    ("shape", lambda p: p.ch.recv_ring(8, (-1,))),
    ("sock", lambda p: Channel("socket", 0)),
    ("timeout", lambda p: channel_pair(timeout=0)),
    ("timeout", lambda p: channel_pair(timeout=math.nan)),
    ("port", lambda p: listen("127.0.0.1", 70000)),
    ("host", lambda p: listen(None, 0)),
    ("port", lambda p: connect("127.0.0.1", 0)),
    ("retry_s", lambda p: connect("127.0.0.1", 9, retry_s=-1)),
    ("srv", lambda p: accept("server")),
    ("items", lambda p: p.ch.send(1.5)),
    ("items", lambda p: p.ch.send(np.zeros(2))),  # float arrays are not wire types
    ("seed", lambda p: Sampler.seeded(-1)),
    ("seed", lambda p: Sampler.seeded("7")),
    ("nbits", lambda p: Sampler.seeded(0).bits(4, 0)),
    ("bound", lambda p: Sampler.seeded(0).below(4, 0)),
    ("sigma", lambda p: Sampler.seeded(0).gaussian(4, float("nan"))),
]


@pytest.mark.parametrize(("name", "call"), PARTY_BAD, ids=[f"{i}-{n}" for i, (n, _) in
                                                           enumerate(PARTY_BAD)])
def test_two_party_calls_reject_malformed_input_before_sending(parties, name, call):
    p0, _ = parties
    sent = p0.ch.stats()
    _raises(name, lambda: call(p0))
    assert p0.ch.stats() == sent  # nothing went out: the peer is not left waiting


def test_role_and_setup_are_checked():
    a, b = socket.socketpair()
    _raises("role", lambda: Channel(a, 2))
    a.close()
    b.close()
    c0, c1 = channel_pair(timeout=3.0)
    with pytest.raises(NotFittedError, match="setup"):
        drelu(Party(c0), X8, 8)
    with pytest.raises(NotFittedError, match="setup"):
        OTSuite(c0).rot_send(3)
    c0.close()
    c1.close()


# -- networks: float and fixed-point forward, (de)serialisation, private inference ----------
def _tiny_layers(rng: np.random.Generator, c: int = 2) -> tuple:
    return (Conv(rng.normal(0, 0.4, (c, 1, 3, 3)), rng.normal(0, 0.1, c), 1, 1), ReLU(),
            MaxPool(2), Residual((Conv(rng.normal(0, 0.4, (c, c, 1, 1)), np.zeros(c)), ReLU())),
            AvgPool(2), Flatten(), Dense(rng.normal(0, 0.3, (3, c)), rng.normal(0, 0.1, 3)))


def _reference_float(layers: tuple, x: np.ndarray) -> np.ndarray:
    """An independent float reference for _tiny_layers (explicit loops)."""
    conv, _, _, res, _, _, dense = layers
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    h = np.array([[[(xp[:, i:i + 3, j:j + 3] * conv.weight[o]).sum() + conv.bias[o]
                    for j in range(4)] for i in range(4)] for o in range(conv.weight.shape[0])])
    h = np.maximum(h, 0).reshape(-1, 2, 2, 2, 2).max(axis=(2, 4))
    w1 = res.body[0].weight[:, :, 0, 0]
    h = h + np.maximum(np.einsum("oc,chw->ohw", w1, h), 0)
    return dense.weight @ h.mean(axis=(1, 2)) + dense.bias


@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), system=st.sampled_from(["jaguar", "cheetah"]),
       frac=st.integers(6, 10))
def test_private_inference_stays_within_the_error_bound(seed, system, frac):
    """Both parties in threads (test-only dealer OTs, N = 4096): the client's logits differ from
    the plaintext fixed-point network by at most error_bound, which tracks the float network."""
    rng = np.random.default_rng(seed)
    layers = _tiny_layers(rng)
    images = rng.uniform(-1, 1, (2, 1, 4, 4))
    for x in images:
        assert np.allclose(float_forward(layers, x), _reference_float(layers, x))
    net = quantise(layers, frac, (1, 4, 4), classes=3)
    assert isinstance(net, QuantNet) and any(isinstance(v, SumPool) for v in net.layers)
    ref = np.stack([fixed_point_forward(net, net.quantise_input(x)) for x in images])
    floats = np.stack([float_forward(layers, x) for x in images])
    assert np.abs(ref / 2.0**frac - floats).max() < 0.1
    cfg = ProtocolConfig(system=system, ell=20, dealer=True, timeout=60.0)
    none, res = _two(lambda ch: run_party(ch, net, None, cfg, Sampler.seeded(seed)),
                     lambda ch: run_party(ch, None, images, cfg, Sampler.seeded(seed + 1)),
                     timeout=60.0)
    assert none is None and isinstance(res, InferenceResult)
    bound = error_bound(net, 1.0 if system == "jaguar" else 2.0)
    assert bound >= 1.0 and np.abs(res.logits - ref).max() <= bound
    kinds = res.by_kind()
    assert all(isinstance(c, LayerCost) for c in kinds.values())
    assert sum(c.bytes for c in kinds.values()) == sum(c.bytes for c in res.layers)
    assert {"linear", "relu", "maxpool", "sumpool"} <= set(kinds)


@SETTINGS
@given(seed=st.integers(0, 2**16), frac=st.integers(1, 20))
def test_save_and_load_round_trip(tmp_path_factory, seed, frac):
    rng = np.random.default_rng(seed)
    net = quantise(_tiny_layers(rng, c=3), frac, (1, 4, 4), classes=3)
    path = tmp_path_factory.mktemp("net") / "net.npz"
    save_quantnet(net, str(path))
    back = load_quantnet(path)
    assert (back.frac_bits, back.input_shape, back.classes) == (frac, (1, 4, 4), 3)
    x = net.quantise_input(rng.uniform(-1, 1, (1, 4, 4)))
    assert np.array_equal(fixed_point_forward(back, x), fixed_point_forward(net, x))
    assert [p.name for p in path.parent.iterdir()] == ["net.npz"]  # no temporary left behind


@SETTINGS
@given(costs=st.lists(st.tuples(st.sampled_from(["linear", "relu", "maxpool"]),
                                st.floats(0, 10), st.integers(0, 10**6), st.integers(0, 50)),
                      max_size=8))
def test_inference_result_sums_costs_per_kind(costs):
    res = InferenceResult(np.zeros((1, 3), np.int64), [LayerCost(*c) for c in costs])
    kinds = res.by_kind()
    assert set(kinds) == {c[0] for c in costs}
    for kind, total in kinds.items():
        mine = [c for c in costs if c[0] == kind]
        assert total.bytes == sum(c[2] for c in mine) and total.rounds == sum(c[3] for c in mine)
        assert total.seconds == pytest.approx(sum(c[1] for c in mine))


def test_digits_data_and_training_are_seeded_and_well_formed():
    x, y, xt, yt = digits_data(3)
    assert x.shape[1:] == (1, 8, 8) and xt.shape[1:] == (1, 8, 8) and len(x) + len(xt) == 1797
    assert x.min() >= 0 and x.max() <= 1 and set(np.unique(y)) == set(range(10))
    assert np.array_equal(digits_data(3)[1], y) and not np.array_equal(digits_data(4)[1], y)
    layers = train_digits_cnn(seed=0, epochs=2, channels=(4, 8))
    assert [type(v).__name__ for v in layers] == ["Conv", "ReLU", "MaxPool", "Conv", "ReLU",
                                                  "AvgPool", "Flatten", "Dense"]
    again = train_digits_cnn(seed=0, epochs=2, channels=(4, 8))
    assert np.array_equal(layers[0].weight, again[0].weight)
    acc = np.mean([float_forward(layers, v).argmax() == c for v, c in zip(xt, yt, strict=True)])
    assert acc > 0.5  # two epochs of a narrow net (0.71 measured): far above chance (0.1)


def test_torch_converter_agrees_with_torch():
    torch = pytest.importorskip("torch", reason="the converter is tested when torch is installed")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.BatchNorm2d(2),
                                torch.nn.ReLU(), torch.nn.AvgPool2d(2), torch.nn.Flatten(),
                                torch.nn.Linear(8, 3)).eval()
    model[1].running_var.uniform_(0.5, 2.0)
    x = torch.rand(1, 1, 4, 4)
    with torch.no_grad():
        theirs = model(x)[0].numpy()
    assert np.allclose(float_forward(from_torch(model), x[0].numpy().astype(float)), theirs,
                       atol=1e-5)
    _raises("module", lambda: from_torch([model]))
    with pytest.raises(InputError, match="does not support"):
        from_torch(torch.nn.Sequential(torch.nn.Sigmoid()))


NET_LAYERS = _tiny_layers(np.random.default_rng(0))
QNET = quantise(NET_LAYERS, 8, (1, 4, 4), classes=3)
CFG = ProtocolConfig(dealer=True, timeout=3.0)
NETWORK_BAD = [
    ("weight", lambda: Conv(np.full((2, 1, 3, 3), np.nan), np.zeros(2))),
    ("weight", lambda: Conv(np.zeros((2, 1, 3, 2)), np.zeros(2))),
    ("weight", lambda: Conv("w", np.zeros(2))),
    ("bias", lambda: Conv(np.zeros((2, 1, 3, 3)), np.zeros(3))),
    ("groups", lambda: Conv(np.zeros((3, 1, 3, 3)), np.zeros(3), groups=2)),
    ("stride", lambda: Conv(np.zeros((2, 1, 3, 3)), np.zeros(2), stride=0)),
    ("pad", lambda: Conv(np.zeros((2, 1, 3, 3)), np.zeros(2), pad=-1)),
    ("weight", lambda: Dense(np.zeros(3), np.zeros(3))),
    ("bias", lambda: Dense(np.zeros((3, 2)), np.zeros(2))),
    ("k", lambda: MaxPool(0)),
    ("k", lambda: AvgPool(2.5)),
    ("k", lambda: SumPool("2")),
    ("body", lambda: Residual(("relu",))),
    ("body", lambda: Residual(())),
    ("shortcut", lambda: Residual((ReLU(),), shortcut=[np.eye(2)])),
    ("layers", lambda: QuantNet([ReLU(), "dense"], 8, (1, 4, 4))),
    ("frac_bits", lambda: QuantNet((ReLU(),), 0, (1, 4, 4))),
    ("input_shape", lambda: QuantNet((ReLU(),), 8, (1, 4))),
    ("classes", lambda: QuantNet((ReLU(),), 8, (1, 4, 4), classes=0)),
    ("x", lambda: float_forward(NET_LAYERS, np.zeros((4, 4)))),
    ("x", lambda: float_forward(NET_LAYERS, np.full((1, 4, 4), np.inf))),
    ("layers", lambda: float_forward("net", np.zeros((1, 4, 4)))),
    ("layers", lambda: float_forward((*NET_LAYERS[:1], Dense(np.zeros((3, 5)), np.zeros(3))),
                                     np.zeros((1, 4, 4)))),  # a Dense layer on a 3-D map
    ("x_q", lambda: fixed_point_forward(QNET, np.zeros((1, 4, 4)) + 0.5)),
    ("net", lambda: fixed_point_forward(NET_LAYERS, np.zeros((1, 4, 4), int))),
    ("net", lambda: error_bound(NET_LAYERS, 1.0)),
    ("per_trunc", lambda: error_bound(QNET, -1.0)),
    ("e_in", lambda: error_bound(QNET, 1.0, e_in=float("nan"))),
    ("classes", lambda: quantise(NET_LAYERS, 8, (1, 4, 4), classes=10)),
    ("layers", lambda: quantise(NET_LAYERS, 8, (2, 4, 4), classes=3)),  # channels do not fit
    ("layers", lambda: quantise((Residual((Conv(np.zeros((3, 1, 1, 1)), np.zeros(3)),)),), 8,
                                (1, 4, 4), classes=3)),  # branches of different shapes
    ("net", lambda: save_quantnet(NET_LAYERS, "/tmp/x.npz")),
    ("path", lambda: save_quantnet(QNET, "/no/such/folder/net.npz")),
    ("path", lambda: save_quantnet(QNET, None)),
    ("path", lambda: load_quantnet("/no/such/net.npz")),
    ("seed", lambda: digits_data(-1)),
    ("seed", lambda: digits_data(0.5)),
    ("epochs", lambda: train_digits_cnn(epochs=0)),
    ("channels", lambda: train_digits_cnn(channels=(8,))),
    ("channels", lambda: train_digits_cnn(channels=(8, 0))),
    ("kind", lambda: LayerCost("", 0.0, 0, 0)),
    ("bytes", lambda: LayerCost("relu", 0.0, -1, 0)),
    ("seconds", lambda: LayerCost("relu", float("nan"), 0, 0)),
    ("layers", lambda: InferenceResult(np.zeros((1, 3)), [("relu", 0.0, 0, 0)])),
    ("net", lambda: serve(NET_LAYERS, CFG)),
    ("cfg", lambda: serve(QNET, {"dealer": True})),
    ("port_out", lambda: serve(QNET, CFG, port_out=[])),
    ("port", lambda: serve(QNET, CFG, port=-5)),
    ("images", lambda: query(np.zeros((1, 4, 4)), CFG)),
    ("images", lambda: query(np.full((1, 1, 4, 4), np.nan), CFG)),
    ("cfg", lambda: query(np.zeros((1, 1, 4, 4)), "jaguar")),
    ("dealer", lambda: ProtocolConfig(dealer="yes")),
    ("seed", lambda: private_inference(QNET, np.zeros((1, 1, 4, 4)), CFG, seed=-1)),
    ("seed", lambda: private_inference(QNET, np.zeros((1, 1, 4, 4)), CFG, seed=0.5)),
    ("net", lambda: private_inference(NET_LAYERS, np.zeros((1, 1, 4, 4)), CFG)),
]


@pytest.mark.parametrize(("name", "call"), NETWORK_BAD, ids=[f"{i}-{n}" for i, (n, _) in
                                                             enumerate(NETWORK_BAD)])
def test_networks_reject_malformed_input(name, call):
    _raises(name, call)


def test_damaged_model_file_is_a_data_error(tmp_path):
    bad = tmp_path / "net.npz"
    bad.write_bytes(b"not a zip file")
    with pytest.raises(DataError, match="Cannot read"):
        load_quantnet(bad)


RUN_BAD = [
    ("net", lambda ch: run_party(ch, None, None, CFG)),  # the server needs the network
    ("net", lambda ch: run_party(ch, NET_LAYERS, None, CFG)),
    ("cfg", lambda ch: run_party(ch, QNET, None, {"system": "jaguar"})),
    ("sampler", lambda ch: run_party(ch, QNET, None, CFG, sampler=1)),
    ("ch", lambda ch: run_party("channel", QNET, None, CFG)),
]


@pytest.mark.parametrize(("name", "call"), RUN_BAD, ids=[f"{i}-{n}" for i, (n, _) in
                                                         enumerate(RUN_BAD)])
def test_run_party_checks_before_sending(parties, name, call):
    p0, p1 = parties
    sent = p0.ch.stats(), p1.ch.stats()
    _raises(name, lambda: call(p0.ch))
    for bad in (None, np.zeros((1, 4, 4)), np.full((1, 1, 4, 4), np.nan)):  # the client's side
        _raises("images", lambda bad=bad: run_party(p1.ch, None, bad, CFG))
    assert (p0.ch.stats(), p1.ch.stats()) == sent


# -- the house sweep (tests/malformed.py): every corruption of every array/scalar argument ----
def _enc_dec(message, plain_bits):
    return decrypt(SK, encrypt(SK, message, plain_bits, Sampler.seeded(0)), plain_bits)


def _share(values, bits):
    return share(values, bits, np.random.default_rng(0))


_R = np.random.default_rng(9)
ARRAY_3D = ARRAY.without("pandas")  # a DataFrame cannot hold a (C, H, W) map
CASES = [
    Case("encrypt+decrypt", _enc_dec, {"message": _R.integers(-(2**30), 2**30, (2, P64.n)),
                                       "plain_bits": 20},
         {"message": ARRAY, "plain_bits": INT(P64.k, lo=1)}),
    Case("negacyclic_mul_exact", negacyclic_mul_exact,
         {"a": _R.integers(-99, 99, 8), "b": _R.integers(-99, 99, 8), "modulus": 257},
         {"a": ARRAY, "b": ARRAY, "modulus": INT(lo=1).without("None")}),  # None: no reduction
    Case("share", _share, {"values": _R.integers(-1000, 1000, 6), "bits": 16},
         {"values": ARRAY.without("extra dimension"), "bits": INT(65, lo=1)}),  # any shape
    Case("sum_pool", sum_pool, {"x": _R.integers(0, 2**10, (2, 4, 4)), "k": 2, "ell": 16},
         {"x": ARRAY_3D, "k": INT(5, lo=1), "ell": INT(65, lo=2)}),
    Case("float_forward", float_forward, {"layers": NET_LAYERS, "x": _R.uniform(-1, 1, (1, 4, 4))},
         {"layers": OBJECT, "x": ARRAY_3D}),
    Case("fixed_point_forward", fixed_point_forward,
         {"net": QNET, "x_q": _R.integers(-256, 256, (1, 4, 4))},
         {"net": OBJECT, "x_q": ARRAY_3D}),
    Case("linear_noise_budget", linear_noise_budget, {"params": JP, "max_weight_l2": 100.0},
         {"params": OBJECT, "max_weight_l2": scalar("non-negative", -1.0)}),
    Case("error_bound", error_bound, {"net": QNET, "per_trunc": 1.0},
         {"net": OBJECT, "per_trunc": scalar("non-negative", -0.5)}),
    Case("digits_data", digits_data, {"seed": 1}, {"seed": INT(lo=0)}),
]

test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


@pytest.mark.parametrize("args", [
    ["query", "--image", "digits:0-1", "--network", "moon", "--port", "1"],  # not after the run
    ["query", "--image", "/no/such/images.npy", "--port", "1"],
    ["serve", "--system", "foo"],  # before training the model
    ["export-digits", "--out", "/no/such/folder/net.npz"],  # before training, not after
], ids=["network", "image", "system", "out"])
def test_cli_checks_options_before_any_work(args):
    """Each bad option is an InputError (exit 2 from `trustlab`) raised before the model is
    trained or a connection attempted (the query port 1 would retry for 10 s)."""
    import time

    from typer.testing import CliRunner

    from trustlab.cli import _mount_method_clis, app

    _mount_method_clis(["jaguar"])
    start = time.perf_counter()
    res = CliRunner().invoke(app, ["jaguar", *args])
    assert isinstance(res.exception, InputError), res.output
    assert time.perf_counter() - start < 5.0
