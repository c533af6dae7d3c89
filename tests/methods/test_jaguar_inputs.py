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

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.methods.jaguar import (
    CheetahClient,
    CheetahServer,
    Ciphertext,
    ConvLayout,
    FCLayout,
    JaguarClient,
    JaguarParams,
    JaguarServer,
    LinearResponse,
    NoiseBudget,
    NTTContext,
    PrimeParams,
    RNSCiphertext,
    Sampler,
    SecretKey,
    aux_negacyclic_mul,
    cheetah_params,
    decrypt,
    encrypt,
    find_ntt_primes,
    keygen,
    linear_noise_budget,
    mod_switch,
    monomial_mul,
    negacyclic_mul_exact,
    phase,
    plan_conv,
    plan_fc,
    to_ring,
)

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
