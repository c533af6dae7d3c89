"""RLWE encryption over the power-of-two ring ``Z_{2^K}[X]/(X^N+1)`` (Jaguar's substrate).

A ciphertext ``(c0, c1)`` of a message ``m`` mod ``t = 2^ell`` has the *phase*
``c0 + c1*s = Delta*m + e (mod 2^K)`` with ``Delta = 2^(K - ell)``: the scale divides ``q``
exactly, so plaintext products wrap cleanly (``Delta * t = q``). Decryption rounds the phase
at scale ``Delta``; reading the *same* phase at scale ``Delta * 2^s`` divides the message by
``2^s`` with rounding, which is Jaguar's ciphertext-side truncation.

The client's one polynomial product ``c1*s`` goes through an auxiliary NTT prime
(``aux_negacyclic_mul``, O(N log N)); ``phase(..., method="schoolbook")`` is the O(N^2)
exact reference it is tested against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trustlab.core.errors import InputError
from trustlab.core.validation import check_choice
from trustlab.methods.jaguar.checks import as_int_array, check_instance, check_int
from trustlab.methods.jaguar.ntt import aux_negacyclic_mul, aux_prime, ntt_context
from trustlab.methods.jaguar.params import JaguarParams
from trustlab.methods.jaguar.ring import mask, negacyclic_mul_exact, to_ring
from trustlab.methods.jaguar.sampling import Sampler, expand_seed

__all__ = [
    "Ciphertext",
    "PublicKey",
    "SecretKey",
    "decode",
    "decrypt",
    "encrypt",
    "encrypt_zero_public",
    "keygen",
    "mod_switch",
    "phase",
    "public_keygen",
]


@dataclass(frozen=True)
class SecretKey:
    """A ternary secret ``s`` and its forward NTT modulo the auxiliary prime."""

    params: JaguarParams
    s: np.ndarray
    s_hat: np.ndarray

    def __post_init__(self) -> None:
        check_instance(self.params, JaguarParams, "params", "SecretKey")
        n = self.params.n
        for name, arr, kind in (("s", self.s, "i"), ("s_hat", self.s_hat, "u")):
            if not isinstance(arr, np.ndarray) or arr.shape != (n,) or arr.dtype.kind != kind:
                raise InputError(f"The '{name}' parameter of SecretKey must be a "
                                 f"{'int64' if kind == 'i' else 'uint64'} array of shape ({n},). "
                                 f"Got {getattr(arr, 'shape', type(arr).__name__)}.")
        if np.any(np.abs(self.s) > 1):
            raise InputError("The 's' parameter of SecretKey must be ternary (-1, 0, 1).")


@dataclass(frozen=True)
class PublicKey:
    """``(b, a)`` with ``b = -a*s + e``: lets the server re-randomise answers."""

    params: JaguarParams
    b: np.ndarray
    a: np.ndarray


@dataclass(frozen=True)
class Ciphertext:
    """A batch of ciphertexts ``(c0, c1)`` mod ``2^k`` (uint64, shape (..., N)).

    ``seeds`` (one 32-byte seed per polynomial, or None) regenerate ``c1`` of a fresh
    symmetric ciphertext, so it need not be sent.
    """

    c0: np.ndarray
    c1: np.ndarray
    k: int
    seeds: tuple[bytes, ...] | None = None

    def __post_init__(self) -> None:
        k = check_int(self.k, "k", "Ciphertext", lo=1, hi=64)
        for name in ("c0", "c1"):
            arr = getattr(self, name)
            if not isinstance(arr, np.ndarray) or arr.dtype != np.uint64 or arr.ndim < 1:
                raise InputError(f"The '{name}' parameter of Ciphertext must be a uint64 array "
                                 f"of ring elements. Got {getattr(arr, 'dtype', type(arr).__name__)}.")
        if self.c0.shape != self.c1.shape:
            raise InputError(f"The 'c0' and 'c1' parameters of Ciphertext must have the same "
                             f"shape. Got {self.c0.shape} and {self.c1.shape}.")
        object.__setattr__(self, "k", k)

    @property
    def count(self) -> int:
        return int(np.prod(self.c0.shape[:-1], dtype=np.int64))


def _poly_hat(s: np.ndarray) -> np.ndarray:
    n = s.shape[-1]
    ctx = ntt_context(n, aux_prime(n))
    return ctx.forward(np.where(s < 0, s + ctx.p, s).astype(np.uint64))


def keygen(params: JaguarParams, sampler: Sampler) -> SecretKey:
    """A uniform ternary secret (use ``Sampler.from_os()`` outside tests)."""
    check_instance(params, JaguarParams, "params", "keygen")
    check_instance(sampler, Sampler, "sampler", "keygen")
    s = sampler.ternary(params.n)
    return SecretKey(params, s, _poly_hat(s))


def public_keygen(sk: SecretKey, sampler: Sampler) -> PublicKey:
    p = sk.params
    a = mask(sampler.words(p.n), p.k)
    e = sampler.gaussian(p.n, p.sigma)
    b = mask(to_ring(e, p.k) - aux_negacyclic_mul(a, sk.s, p.k, sk.s_hat), p.k)
    return PublicKey(p, b, a)


def _check_message(m: np.ndarray, n: int) -> np.ndarray:
    m = as_int_array(m, "message", "encrypt")
    if m.ndim < 1 or m.shape[-1] != n:
        raise InputError(f"The 'message' parameter of encrypt must have N={n} coefficients on "
                         f"its last axis. Got shape {m.shape}.")
    if m.dtype == object:  # Python big ints: their residues mod 2^64 are what counts
        m = np.array([int(v) % (1 << 64) for v in m.ravel()], dtype=np.uint64).reshape(m.shape)
    return m


def _check_key_and_ct(sk: SecretKey, ct: Ciphertext, where: str) -> None:
    check_instance(sk, SecretKey, "sk", where)
    check_instance(ct, Ciphertext, "ct", where)
    n = sk.params.n
    if ct.c0.shape[-1] != n:
        raise InputError(f"The 'ct' parameter of {where} holds polynomials of degree "
                         f"{ct.c0.shape[-1]} but the key's ring degree is {n}: a ciphertext of "
                         "another key or parameter set.")
    if ct.k > sk.params.k:
        raise InputError(f"The 'ct' parameter of {where} is mod 2^{ct.k}, above the key's "
                         f"modulus 2^{sk.params.k}: a ciphertext of another parameter set.")
    if ct.k < 64 and ct.c0.size and (int(ct.c0.max()) >> ct.k or int(ct.c1.max()) >> ct.k):
        raise InputError(f"The 'ct' parameter of {where} holds coefficients >= 2^k={ct.k}.")


def encrypt(
    sk: SecretKey, message: np.ndarray, plain_bits: int, sampler: Sampler
) -> Ciphertext:
    """Symmetric encryption of ``message`` (integers, read mod ``2^plain_bits``).

    ``c1 = a`` is expanded from a fresh seed per polynomial; ``c0 = -a*s + e + Delta*m``.
    """
    check_instance(sk, SecretKey, "sk", "encrypt")
    p = sk.params
    m = _check_message(message, p.n)
    plain_bits = check_int(plain_bits, "plain_bits", "encrypt", lo=1, hi=p.k - 1)
    check_instance(sampler, Sampler, "sampler", "encrypt")
    lead = m.shape[:-1]
    count = int(np.prod(lead, dtype=np.int64))
    seeds = tuple(sampler.seed32() for _ in range(count))
    a = np.stack([expand_seed(sd, p.n) for sd in seeds]).reshape(*lead, p.n) if count else (
        np.zeros((*lead, p.n), dtype=np.uint64))
    a = mask(a, p.k)
    e = to_ring(sampler.gaussian((*lead, p.n), p.sigma), p.k)
    delta_m = to_ring(np.asarray(m), plain_bits) << np.uint64(p.k - plain_bits)
    c0 = mask(e + delta_m - aux_negacyclic_mul(a, sk.s, p.k, sk.s_hat), p.k)
    return Ciphertext(c0, a, p.k, seeds)


def encrypt_zero_public(pk: PublicKey, count: int, sampler: Sampler) -> Ciphertext:
    """``count`` public-key encryptions of zero: ``(b*u + e0, a*u + e1)``, ``u`` ternary."""
    p = pk.params
    u = sampler.ternary((count, p.n))
    u_hat = _poly_hat(u)
    c0 = aux_negacyclic_mul(pk.b, u, p.k, u_hat)
    c1 = aux_negacyclic_mul(pk.a, u, p.k, u_hat)
    c0 = mask(c0 + to_ring(sampler.gaussian((count, p.n), p.sigma), p.k), p.k)
    c1 = mask(c1 + to_ring(sampler.gaussian((count, p.n), p.sigma), p.k), p.k)
    return Ciphertext(c0, c1, p.k)


def phase(sk: SecretKey, ct: Ciphertext, method: str = "ntt") -> np.ndarray:
    """``c0 + c1*s mod 2^k`` (uint64). ``method``: "ntt" (auxiliary prime) or "schoolbook"."""
    _check_key_and_ct(sk, ct, "phase")
    check_choice(method, "method", ("ntt", "schoolbook"), "phase")
    if method == "ntt":
        prod = aux_negacyclic_mul(ct.c1, sk.s, ct.k, sk.s_hat)
    elif method == "schoolbook":
        flat = ct.c1.reshape(-1, ct.c1.shape[-1])
        prod = np.stack(
            [to_ring(negacyclic_mul_exact(row, sk.s, 1 << ct.k), ct.k) for row in flat]
        ).reshape(ct.c1.shape)
    else:
        raise InputError(f"The phase method must be 'ntt' or 'schoolbook'. Got {method!r}.")
    return mask(ct.c0 + prod, ct.k)


def decode(ph: np.ndarray, k: int, plain_bits: int) -> np.ndarray:
    """Round a phase mod ``2^k`` at scale ``2^(k - plain_bits)``: the message mod ``2^plain_bits``.

    Rounding is half-up: ``floor((phase + Delta/2) / Delta)``.
    """
    shift = k - plain_bits
    if shift == 0:
        return mask(ph, k)
    half = np.uint64(1 << (shift - 1))
    # ph < 2^k; a carry lost past 2^64 (only when k = 64) is 2^plain_bits after the shift.
    return mask((ph + half) >> np.uint64(shift), plain_bits)


def decrypt(sk: SecretKey, ct: Ciphertext, plain_bits: int, method: str = "ntt") -> np.ndarray:
    """The message mod ``2^plain_bits`` (uint64), read at scale ``2^(k - plain_bits)``."""
    _check_key_and_ct(sk, ct, "decrypt")
    plain_bits = check_int(plain_bits, "plain_bits", "decrypt", lo=1, hi=ct.k)
    return decode(phase(sk, ct, method), ct.k, plain_bits)


def mod_switch(ct: Ciphertext, new_k: int) -> Ciphertext:
    """Switch ``2^k -> 2^new_k`` by a rounded local right shift of both components.

    For a power-of-two modulus this is exact division by ``2^(k - new_k)`` with rounding; it
    adds noise ``u0 + u1*s`` with ``|u_i| <= 1/2`` (the server uses it to shrink its answer).
    """
    check_instance(ct, Ciphertext, "ct", "mod_switch")
    new_k = check_int(new_k, "new_k", "mod_switch", lo=1, hi=ct.k)
    drop = ct.k - new_k
    if drop == 0:
        return ct
    half = np.uint64(1 << (drop - 1))

    def shift(x: np.ndarray) -> np.ndarray:
        # x < 2^k; a carry lost past 2^64 (only when k = 64) is 2^new_k after the shift.
        return mask((x + half) >> np.uint64(drop), new_k)

    return Ciphertext(shift(ct.c0), shift(ct.c1), new_k)
