"""A negacyclic number-theoretic transform in numpy, for primes below ``2^50``.

Used twice: by the Cheetah-style baseline (RNS limbs of ``q``) and by Jaguar's client, whose
single polynomial product at decryption goes through an *auxiliary* NTT prime
(``aux_negacyclic_mul``). Modular products use the floating-point quotient trick: the quotient
``floor(a*b/p)`` is estimated in float64 (off by at most one when ``p < 2^50``) and the
remainder is computed exactly with uint64 wrap-around, then corrected.
"""

from __future__ import annotations

import functools

import numpy as np

from trustlab.core.errors import InputError

__all__ = [
    "NTTContext",
    "aux_limb_bits",
    "aux_negacyclic_mul",
    "aux_prime",
    "find_ntt_primes",
    "is_prime",
    "mulmod",
    "ntt_context",
]

_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)  # deterministic below 3.3e24
_MAX_PRIME_BITS = 50


def is_prime(n: int) -> bool:
    """Deterministic Miller–Rabin for ``n < 3.3e24``."""
    if n < 2:
        return False
    for p in _MR_BASES:
        if n % p == 0:
            return n == p
    d, r = n - 1, 0
    while d % 2 == 0:
        d //= 2
        r += 1
    for a in _MR_BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def find_ntt_primes(n: int, bits: int, count: int) -> tuple[int, ...]:
    """The ``count`` largest primes ``p < 2^bits`` with ``p = 1 mod 2N`` (NTT-friendly)."""
    from trustlab.methods.jaguar.checks import check_int

    n = check_int(n, "n", "find_ntt_primes", lo=2)
    if n & (n - 1):
        raise InputError(f"The 'n' parameter of find_ntt_primes must be a power of two. Got {n}.")
    bits = check_int(bits, "bits", "find_ntt_primes", lo=2, hi=_MAX_PRIME_BITS)
    count = check_int(count, "count", "find_ntt_primes", lo=1, hi=64)
    step = 2 * n
    p = ((1 << bits) - 1) // step * step + 1
    found: list[int] = []
    while len(found) < count and p > step:
        if p < 1 << bits and is_prime(p):
            found.append(p)
        p -= step
    if len(found) < count:
        raise InputError(f"Only {len(found)} NTT primes below 2^{bits} for N={n}.")
    return tuple(found)


def mulmod(a: np.ndarray, b: np.ndarray, p: int) -> np.ndarray:
    """``a * b mod p`` elementwise for uint64 ``a, b < p < 2^50``."""
    pf = float(p)
    quot = np.floor(a.astype(np.float64) * b.astype(np.float64) / pf).astype(np.uint64)
    r = (a * b - quot * np.uint64(p)).view(np.int64)  # exact mod 2^64; true value in [-p, 2p)
    r = np.where(r < 0, r + p, r)
    r = np.where(r >= p, r - p, r)
    return r.view(np.uint64)


def _primitive_root_2n(n: int, p: int) -> int:
    for g in range(2, 10_000):
        psi = pow(g, (p - 1) // (2 * n), p)
        if pow(psi, n, p) == p - 1:
            return psi
    raise InputError(f"No primitive 2N-th root of unity mod {p}.")  # pragma: no cover


class NTTContext:
    """Tables for the negacyclic NTT of length ``n`` modulo ``p`` (``p = 1 mod 2n``).

    backend: "numpy" (the vectorised reference below), "compiled" (``kernels``: Harvey/Shoup
    butterflies, same results) or "auto" (compiled when numba is installed).
    """

    def __init__(self, n: int, p: int, backend: str = "auto") -> None:
        from trustlab.methods.jaguar.checks import check_int, check_power_of_two

        n = check_power_of_two(n, "n", "NTTContext", lo=2, hi=1 << 20)
        p = check_int(p, "p", "NTTContext", lo=3, hi=(1 << _MAX_PRIME_BITS) - 1)
        if (p - 1) % (2 * n) or not is_prime(p):
            raise InputError(f"The 'p' parameter of NTTContext must be a prime = 1 mod 2N "
                             f"(and < 2^50). Got {p} for N={n}.")
        if backend not in ("auto", "numpy", "compiled"):
            raise InputError(
                f"The 'backend' parameter must be 'auto', 'numpy' or 'compiled'. Got {backend!r}."
            )
        from trustlab.methods.jaguar import kernels

        if backend == "auto":
            backend = "compiled" if kernels.available() else "numpy"
        self.backend = backend
        self.n, self.p = n, p
        psi = _primitive_root_2n(n, p)
        psi_inv = pow(psi, p - 2, p)
        omega = psi * psi % p
        self.psi_pows = _powers(psi, n, p)
        self.psi_inv_pows_scaled = np.array(
            [pow(psi_inv, i, p) * pow(n, p - 2, p) % p for i in range(n)], dtype=np.uint64
        )
        bits = n.bit_length() - 1
        self.bitrev = np.array([int(f"{i:0{bits}b}"[::-1], 2) for i in range(n)], dtype=np.int64)
        self.twiddles = _stage_twiddles(omega, n, p)
        self.twiddles_inv = _stage_twiddles(pow(omega, p - 2, p), n, p)

    def _check(self, a: np.ndarray, name: str, where: str) -> np.ndarray:
        """Residues mod p on the last axis of length n (uint64; other integers converted)."""
        from trustlab.methods.jaguar.checks import as_ring_array

        if not (isinstance(a, np.ndarray) and a.dtype == np.uint64):
            a = as_ring_array(a, name, f"NTTContext.{where}", 64)
        if a.ndim < 1 or a.shape[-1] != self.n:
            raise InputError(f"The '{name}' parameter of NTTContext.{where} must have N={self.n} "
                             f"coefficients on its last axis. Got shape {a.shape}.")
        if a.size and int(a.max()) >= self.p:
            raise InputError(f"The '{name}' parameter of NTTContext.{where} must hold residues "
                             f"mod p={self.p} (in [0, p)). Got {int(a.max())}.")
        return a

    def _transform(self, a: np.ndarray, twiddles: list[np.ndarray]) -> np.ndarray:
        n, p = self.n, np.uint64(self.p)
        lead = a.shape[:-1]
        x = a[..., self.bitrev]
        m = 1
        for w in twiddles:
            blocks = x.reshape(*lead, n // (2 * m), 2, m)
            u = blocks[..., 0, :]
            v = mulmod(blocks[..., 1, :], np.broadcast_to(w, blocks[..., 1, :].shape), self.p)
            s = u + v
            s = np.where(s >= p, s - p, s)
            d = u + p - v
            d = np.where(d >= p, d - p, d)
            x = np.stack([s, d], axis=-2).reshape(*lead, n)
            m *= 2
        return x

    def forward(self, a: np.ndarray) -> np.ndarray:
        """Negacyclic NTT over the last axis (values in ``[0, p)``, uint64): ``a(psi^(2k+1))``."""
        a = self._check(a, "a", "forward")
        if self.backend == "compiled":
            from trustlab.methods.jaguar import kernels

            tab = kernels.ntt_tables(self.n, (self.p,))
            x = np.array(a, dtype=np.uint64, order="C", copy=True)
            return kernels.ntt_forward(x, tab)[..., tab.perm]
        pre = mulmod(a, np.broadcast_to(self.psi_pows, a.shape), self.p)
        return self._transform(pre, self.twiddles)

    def inverse(self, a_hat: np.ndarray) -> np.ndarray:
        a_hat = self._check(a_hat, "a_hat", "inverse")
        if self.backend == "compiled":
            from trustlab.methods.jaguar import kernels

            tab = kernels.ntt_tables(self.n, (self.p,))
            x = np.ascontiguousarray(np.asarray(a_hat, dtype=np.uint64)[..., tab.perm])
            return kernels.ntt_inverse(x, tab)
        x = self._transform(a_hat, self.twiddles_inv)
        return mulmod(x, np.broadcast_to(self.psi_inv_pows_scaled, x.shape), self.p)

    def multiply(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``a * b mod (X^N + 1, p)``."""
        a, b = self._check(a, "a", "multiply"), self._check(b, "b", "multiply")
        try:
            a, b = np.broadcast_arrays(a, b)
        except ValueError:
            raise InputError(f"The 'a' and 'b' parameters of NTTContext.multiply must have "
                             f"broadcastable shapes. Got {a.shape} and {b.shape}.") from None
        return self.inverse(mulmod(self.forward(a), self.forward(b), self.p))


def _powers(base: int, n: int, p: int) -> np.ndarray:
    out = np.empty(n, dtype=np.uint64)
    acc = 1
    for i in range(n):
        out[i] = acc
        acc = acc * base % p
    return out


def _stage_twiddles(omega: int, n: int, p: int) -> list[np.ndarray]:
    """Per butterfly stage of half-size m: ``omega_{2m}^j`` for ``j < m``."""
    out = []
    m = 1
    while m < n:
        out.append(_powers(pow(omega, n // (2 * m), p), m, p))
        m *= 2
    return out


@functools.lru_cache(maxsize=32)
def ntt_context(n: int, p: int) -> NTTContext:
    """Cached NTT tables (they depend only on ``n`` and ``p``)."""
    return NTTContext(n, p)


@functools.lru_cache(maxsize=16)
def aux_prime(n: int) -> int:
    """The auxiliary prime of Jaguar's client: the largest NTT prime below 2^50 for ``n``."""
    return find_ntt_primes(n, _MAX_PRIME_BITS, 1)[0]


def aux_limb_bits(n: int, small_bound: int) -> int:
    """Largest limb width whose exact product with a ``small_bound``-bounded poly fits the prime."""
    p = aux_prime(n)
    bits = 1
    while 2 * n * small_bound * (1 << (bits + 1)) < p:
        bits += 1
    return min(bits, 32)


def aux_negacyclic_mul(
    c: np.ndarray, small: np.ndarray, k: int, small_hat: np.ndarray | None = None
) -> np.ndarray:
    """``c * small mod (X^N + 1, 2^k)`` in O(N log N) through one auxiliary NTT prime.

    ``c`` holds uint64 residues mod ``2^k`` (any leading shape); ``small`` is a signed
    polynomial with ``|coefficient| <= B`` (a ternary secret: B = 1). ``c`` is cut into limbs
    narrow enough that each limb's *integer* negacyclic product with ``small`` is smaller than
    half the prime, so the NTT result, read as a signed residue, is the exact integer product;
    the limbs are then recombined with uint64 wrap-around, i.e. reduced mod ``2^k``.
    ``small_hat`` (the forward NTT of ``small``) may be passed in to reuse it.
    """
    from trustlab.methods.jaguar.checks import as_int_array, check_int, check_power_of_two

    where = "aux_negacyclic_mul"
    k = check_int(k, "k", where, lo=1, hi=64)
    if not (isinstance(c, np.ndarray) and c.dtype == np.uint64):
        raise InputError(f"The 'c' parameter of {where} must be a uint64 array of residues mod "
                         f"2^k (use to_ring). Got {getattr(c, 'dtype', type(c).__name__)}.")
    n = check_power_of_two(c.shape[-1] if c.ndim else 0, "c (last axis)", where, lo=2)
    if k < 64 and c.size and int(c.max()) >> k:
        raise InputError(f"The 'c' parameter of {where} must hold residues mod 2^k={k}.")
    small = as_int_array(small, "small", where)
    if small.shape[-1:] != (n,):
        raise InputError(f"The 'small' parameter of {where} must have N={n} coefficients on "
                         f"its last axis. Got shape {small.shape}.")
    bound = max(1, int(np.max(np.abs(small))))
    ctx = ntt_context(n, aux_prime(n))
    if 4 * n * bound >= ctx.p:  # aux_limb_bits needs one exact bit of c per limb at least
        raise InputError(f"The 'small' parameter of {where} must be small: |coefficients| < "
                         f"{ctx.p // (4 * n)} at N={n}. Got {bound}.")
    small = small.astype(np.int64)
    p = np.uint64(ctx.p)
    if small_hat is not None:
        small_hat = ctx._check(small_hat, "small_hat", "forward")
        try:
            np.broadcast_shapes(c.shape, small_hat.shape)
        except ValueError:
            raise InputError(f"The 'small_hat' parameter of {where} does not match 'c': "
                             f"{small_hat.shape} against {c.shape}.") from None
    else:
        small_hat = ctx.forward(np.where(small < 0, small + ctx.p, small).astype(np.uint64))
        try:
            np.broadcast_shapes(c.shape, small_hat.shape)
        except ValueError:
            raise InputError(f"The 'small' parameter of {where} does not match 'c': "
                             f"{small.shape} against {c.shape}.") from None
    limb = aux_limb_bits(n, bound)
    out = np.zeros(np.broadcast_shapes(c.shape, small_hat.shape), dtype=np.uint64)
    c = np.broadcast_to(c, out.shape)
    limb_mask = np.uint64((1 << limb) - 1)
    for start in range(0, k, limb):
        part = (c >> np.uint64(start)) & limb_mask
        prod = ctx.inverse(mulmod(ctx.forward(part), np.broadcast_to(small_hat, out.shape), ctx.p))
        signed = np.where(prod > p // np.uint64(2), prod.view(np.int64) - ctx.p, prod.view(np.int64))
        out += signed.view(np.uint64) << np.uint64(start)
    if k < 64:
        out &= np.uint64((1 << k) - 1)
    return out
