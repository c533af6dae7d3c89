"""Randomness for keys, noise and masks: reproducible for tests, OS-backed for real use.

``Sampler.seeded(seed)`` draws every bit from a numpy ``Generator`` (PCG64): runs are
reproducible, but PCG64 is *not* a cryptographic generator. ``Sampler.secure()`` draws every bit
from ``os.urandom`` (the kernel CSPRNG); use it for anything but experiments and tests.
The public polynomial ``a`` of a ciphertext is expanded from a 32-byte seed with SHAKE-256 in
both modes, so a query can send the seed instead of ``a`` (as SEAL and Cheetah do).
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Sampler", "expand_seed"]


def expand_seed(seed: bytes, count: int) -> np.ndarray:
    """``count`` uniform uint64 words from a 32-byte seed (SHAKE-256 as an extendable PRG)."""
    data = hashlib.shake_256(seed).digest(8 * count)
    return np.frombuffer(data, dtype="<u8").astype(np.uint64, copy=True)


@dataclass
class Sampler:
    """Uniform words, ternary secrets, discrete-Gaussian errors and seeds from one source."""

    rng: np.random.Generator | None = None
    secure: bool = False
    _cdt: dict[float, np.ndarray] = field(default_factory=dict, repr=False)

    @classmethod
    def seeded(cls, seed: int | np.random.Generator) -> Sampler:
        """Reproducible, **not** cryptographic randomness (tests, experiments)."""
        if not isinstance(seed, np.random.Generator):
            from trustlab.methods.jaguar.checks import check_int

            seed = check_int(seed, "seed", "Sampler.seeded", lo=0)
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        return cls(rng=rng, secure=False)

    @classmethod
    def from_os(cls) -> Sampler:
        """The secure mode: every random bit comes from ``os.urandom``."""
        return cls(rng=None, secure=True)

    # -- raw bits ----------------------------------------------------------------
    def bytes(self, count: int) -> bytes:
        if self.rng is None:
            return os.urandom(count)
        return self.rng.bytes(count)

    def words(self, shape: int | tuple[int, ...]) -> np.ndarray:
        """Uniform uint64 words."""
        size = math.prod(shape) if isinstance(shape, tuple) else int(shape)
        out = np.frombuffer(self.bytes(8 * size), dtype="<u8").astype(np.uint64, copy=True)
        return out.reshape(shape)

    def bits(self, shape: int | tuple[int, ...], nbits: int) -> np.ndarray:
        """Uniform integers in ``[0, 2^nbits)`` as uint64 (``nbits <= 64``)."""
        if type(nbits) is not int or not 1 <= nbits <= 64:
            from trustlab.methods.jaguar.checks import check_int

            nbits = check_int(nbits, "nbits", "Sampler.bits", lo=1, hi=64)
        w = self.words(shape)
        return w if nbits >= 64 else w >> np.uint64(64 - nbits)

    def below(self, shape: int | tuple[int, ...], bound: int) -> np.ndarray:
        """Uniform integers in ``[0, bound)`` by rejection (exactly uniform), ``bound < 2^63``."""
        if type(bound) is not int or not 1 <= bound < 1 << 63:
            from trustlab.methods.jaguar.checks import check_int

            bound = check_int(bound, "bound", "Sampler.below", lo=1, hi=(1 << 63) - 1)
        shape_t = (shape,) if isinstance(shape, int) else shape
        size = math.prod(shape_t)
        nbits = max(1, int(bound - 1).bit_length())
        out = np.empty(0, dtype=np.uint64)
        while out.size < size:
            draw = self.bits(int((size - out.size) * 1.1) + 8, nbits)
            out = np.concatenate([out, draw[draw < np.uint64(bound)]])
        return out[:size].reshape(shape_t)

    def seed32(self) -> bytes:
        return self.bytes(32)

    # -- distributions -----------------------------------------------------------
    def ternary(self, shape: int | tuple[int, ...]) -> np.ndarray:
        """Uniform secret coefficients in {-1, 0, 1} (int64)."""
        return self.below(shape, 3).astype(np.int64) - 1

    def gaussian(self, shape: int | tuple[int, ...], sigma: float) -> np.ndarray:
        """Discrete Gaussian of width ``sigma`` cut at 6 sigma (as SEAL), by CDT inversion."""
        cdt = self._cdt.get(sigma)
        if cdt is None:
            from trustlab.core.validation import check_scalar

            sigma = check_scalar(sigma, "sigma", "Sampler.gaussian", lo=0, hi=1e4, closed="right")
            bound = math.ceil(6 * sigma)
            support = np.arange(-bound, bound + 1)
            weights = np.exp(-(support.astype(np.float64) ** 2) / (2 * sigma**2))
            cum = np.cumsum(weights / weights.sum())
            cdt = np.floor(cum * 2.0**53).astype(np.uint64)
            cdt[-1] = np.uint64(1 << 53)  # every 53-bit draw falls inside the support
            self._cdt[sigma] = cdt
        bound = (len(cdt) - 1) // 2
        u = self.bits(shape, 53)
        return np.searchsorted(cdt, u, side="right").astype(np.int64) - bound
