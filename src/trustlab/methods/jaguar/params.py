"""Parameter sets and their security level (HomomorphicEncryption.org standard table).

Jaguar works over the power-of-two ring ``Z_{2^K}[X]/(X^N+1)``; the Cheetah-style baseline
over ``Z_q[X]/(X^N+1)`` with ``q`` a product of NTT-friendly primes. Both are RLWE with a
ternary secret and error of standard deviation ``sigma`` = 3.19, for which the HE standard
(Albrecht et al., 2018, Table 1, classical 128-bit) bounds ``log2 q`` per ring degree ``N``.
The bound is about the size of ``q``, prime or not, so it covers ``q = 2^K``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar
from trustlab.methods.jaguar.checks import check_int

__all__ = [
    "HE_STANDARD_128",
    "JaguarParams",
    "PrimeParams",
    "jaguar_params",
    "security_bits",
]

#: N -> largest log2(q) with 128-bit classical security (ternary secret, sigma = 3.19).
HE_STANDARD_128: dict[int, int] = {1024: 27, 2048: 54, 4096: 109, 8192: 218, 16384: 438, 32768: 881}
#: The same table at the 192- and 256-bit levels (used to report the level a set reaches).
_HE_STANDARD_192 = {1024: 19, 2048: 37, 4096: 75, 8192: 152, 16384: 305, 32768: 611}
_HE_STANDARD_256 = {1024: 14, 2048: 29, 4096: 58, 8192: 118, 16384: 237, 32768: 476}

SIGMA = 8.0 / math.sqrt(2.0 * math.pi)  # 3.19, the HE standard's error width


def security_bits(n: int, log_q: float) -> int:
    """The classical security level (0, 128, 192 or 256) the HE standard assigns to (N, log q)."""
    n = check_int(n, "n", "security_bits", lo=1)
    log_q = check_scalar(log_q, "log_q", "security_bits", lo=0)
    level = 0
    for bits, table in ((128, HE_STANDARD_128), (192, _HE_STANDARD_192), (256, _HE_STANDARD_256)):
        if n in table and log_q <= table[n]:
            level = bits
    return level


def _check_ring(n: int, log_q: float, allow_insecure: bool, what: str) -> None:
    if n < 16 or n & (n - 1):
        raise InputError(f"The ring degree N of {what} must be a power of two >= 16. Got {n}.")
    if not allow_insecure and security_bits(n, log_q) < 128:
        limit = HE_STANDARD_128.get(n)
        raise InputError(
            f"{what} with N={n} and log2 q={log_q:.1f} is below 128-bit security "
            f"(HE standard allows log2 q <= {limit} at N={n}); pass allow_insecure=True "
            "only for tests."
        )


@dataclass(frozen=True)
class JaguarParams:
    """RLWE over ``Z_{2^K}[X]/(X^N+1)`` with a power-of-two plaintext modulus.

    n: ring degree ``N``. k: ciphertext modulus bits, ``q = 2^K`` (``K <= 64``: one uint64 limb,
    wrap-around arithmetic). ell_in: plaintext bits of a linear layer's input and product,
    ``t = 2^ell_in``, scale ``Delta = 2^(K - ell_in)``. shift: truncation ``s`` done on the
    ciphertext side, so outputs live mod ``2^(ell_in - s)`` (the 2PC ring ``ell``).
    response_bits: modulus bits of the server's answer after the local-shift modulus switch.
    """

    n: int = 4096
    k: int = 64
    ell_in: int = 37
    shift: int = 12
    response_bits: int = 35
    sigma: float = SIGMA
    allow_insecure: bool = False

    def __post_init__(self) -> None:
        for name in ("n", "k", "ell_in", "shift", "response_bits"):
            object.__setattr__(self, name, check_int(getattr(self, name), name, "JaguarParams"))
        object.__setattr__(self, "sigma", check_scalar(self.sigma, "sigma", "JaguarParams", lo=0,
                                                       hi=1e6, closed="right"))
        if not isinstance(self.allow_insecure, bool):
            raise InputError("The 'allow_insecure' parameter of JaguarParams must be a bool. Got "
                             f"{self.allow_insecure!r}.")
        if not 8 <= self.k <= 64:
            raise InputError(
                f"The ciphertext bits K of Jaguar must be in [8, 64] (one uint64 limb). Got {self.k}."
            )
        if not 1 <= self.ell_in < self.k:
            raise InputError(f"ell_in must be in [1, K={self.k}). Got {self.ell_in}.")
        if not 0 <= self.shift < self.ell_in:
            raise InputError(f"shift must be in [0, ell_in={self.ell_in}). Got {self.shift}.")
        if not self.ell_out < self.response_bits <= self.k:
            raise InputError(
                f"response_bits must be in (ell_out={self.ell_out}, K={self.k}]. "
                f"Got {self.response_bits}."
            )
        _check_ring(self.n, self.k, self.allow_insecure, "Jaguar")

    @property
    def ell_out(self) -> int:
        """Bits of the output ring after truncation: ``ell_in - shift``."""
        return self.ell_in - self.shift

    @property
    def log_delta(self) -> int:
        return self.k - self.ell_in

    @property
    def security(self) -> int:
        return security_bits(self.n, self.k)


@dataclass(frozen=True)
class PrimeParams:
    """Cheetah-style BFV: ``q`` = product of NTT primes (RNS), plaintext ``t = 2^ell``.

    primes: the RNS moduli, each ``= 1 mod 2N`` and below ``2^50`` (numpy mulmod limit).
    response_bits: bits of the modulus the answer is switched down to before sending.
    """

    n: int
    primes: tuple[int, ...]
    ell: int
    response_bits: int
    sigma: float = SIGMA
    allow_insecure: bool = False

    def __post_init__(self) -> None:
        where = "PrimeParams"
        for name in ("n", "ell", "response_bits"):
            object.__setattr__(self, name, check_int(getattr(self, name), name, where, lo=1))
        object.__setattr__(self, "sigma", check_scalar(self.sigma, "sigma", where, lo=0, hi=1e6,
                                                       closed="right"))
        if not isinstance(self.allow_insecure, bool):
            raise InputError(f"The 'allow_insecure' parameter of {where} must be a bool. Got "
                             f"{self.allow_insecure!r}.")
        if (not isinstance(self.primes, tuple | list) or not self.primes
                or any(isinstance(p, bool) or not isinstance(p, numbers.Integral)
                       for p in self.primes)):
            raise InputError(f"The 'primes' parameter of {where} must be a non-empty tuple of "
                             f"integers. Got {self.primes!r:.80}.")
        object.__setattr__(self, "primes", tuple(int(p) for p in self.primes))
        if len(set(self.primes)) != len(self.primes):
            raise InputError(f"The 'primes' parameter of {where} must not repeat a prime (the RNS "
                             f"moduli must be coprime). Got {self.primes}.")
        if not self.ell < self.response_bits <= 64:
            raise InputError(f"The 'response_bits' parameter of {where} must be in (ell={self.ell}"
                             f", 64]. Got {self.response_bits}.")
        for p in self.primes:
            from trustlab.methods.jaguar.ntt import is_prime

            if not is_prime(p):
                raise InputError(f"The 'primes' parameter of {where} must hold primes. Got {p}.")
        for p in self.primes:
            if p >= 1 << 50 or (p - 1) % (2 * self.n):
                raise InputError(
                    f"Every prime of the baseline must be < 2^50 and = 1 mod 2N. Got {p}."
                )
        _check_ring(self.n, self.log_q, self.allow_insecure, "The Cheetah baseline")
        if self.q >> (self.ell + 8) == 0:
            raise InputError(f"The 'ell' parameter of {where} leaves no room for noise: q has "
                             f"{self.log_q:.1f} bits, plaintexts {self.ell}.")

    @property
    def q(self) -> int:
        return math.prod(self.primes)

    @property
    def log_q(self) -> float:
        return math.log2(self.q)

    @property
    def security(self) -> int:
        return security_bits(self.n, self.log_q)


def jaguar_params(
    n: int = 4096,
    ell_out: int = 25,
    shift: int = 12,
    *,
    k: int = 64,
    guard_bits: int = 10,
    allow_insecure: bool = False,
) -> JaguarParams:
    """The Jaguar set for a 2PC ring of ``ell_out`` bits and ``shift`` fractional bits.

    The product needs ``ell_in = ell_out + shift`` bits; the answer keeps ``guard_bits`` below
    the output's last place so that the modulus-switching noise stays under 1/4 of an ulp.
    """
    n = check_int(n, "n", "jaguar_params", lo=16)
    ell_out = check_int(ell_out, "ell_out", "jaguar_params", lo=1)
    shift = check_int(shift, "shift", "jaguar_params", lo=0)
    k = check_int(k, "k", "jaguar_params", lo=8, hi=64)
    guard_bits = check_int(guard_bits, "guard_bits", "jaguar_params", lo=1)
    ell_in = ell_out + shift
    return JaguarParams(
        n=n, k=k, ell_in=ell_in, shift=shift, response_bits=min(k, ell_out + guard_bits),
        allow_insecure=allow_insecure,
    )
