"""One party of the two-party protocol: its role, channel, OT machinery and randomness.

Every protocol function in ``millionaire``, ``relu`` and ``pooling`` is called by *both*
parties with their own ``Party`` and their own shares (SPMD style); role 0 is the server (it
holds the weights), role 1 the client (it holds the input). Arithmetic shares are uint64
residues mod ``2^bits``; boolean shares are uint8 arrays of 0/1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from trustlab.methods.jaguar.channel import Channel
from trustlab.methods.jaguar.ot import OTSuite
from trustlab.methods.jaguar.ring import mask, to_ring
from trustlab.methods.jaguar.sampling import Sampler

__all__ = ["Party", "open_arith", "open_bool", "share"]


@dataclass
class Party:
    """``ch``: the channel; ``sampler``: randomness (``Sampler.from_os()`` unless testing).

    dealer: **test-only** trusted-dealer OT (no base OTs; insecure). Call ``setup()`` first.
    """

    ch: Channel
    sampler: Sampler | None = None
    dealer: bool = False
    ot: OTSuite | None = field(default=None, init=False)

    @property
    def role(self) -> int:
        return self.ch.role

    def rand(self) -> Sampler:
        if self.sampler is None:
            self.sampler = Sampler.from_os()
        return self.sampler

    def setup(self) -> Party:
        """Base OTs in both directions (one exchange); IKNP extension from then on."""
        self.ot = OTSuite(self.ch, self.rand(), dealer=self.dealer).setup()
        return self

    def random_bits(self, n: int) -> np.ndarray:
        return self.rand().bits(n, 1).astype(np.uint8)

    def random_ring(self, shape: int | tuple[int, ...], bits: int) -> np.ndarray:
        return self.rand().bits(shape, bits)


def share(values: np.ndarray, bits: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Split signed integers into two uniform additive shares mod ``2^bits`` (tests, input)."""
    v = np.asarray(values, dtype=np.int64)
    s0 = rng.integers(0, 2**bits, v.shape, dtype=np.uint64, endpoint=False) if bits < 64 else (
        rng.integers(0, 2**63, v.shape, dtype=np.uint64) * np.uint64(2))
    return s0, mask(to_ring(v, 64) - s0, bits)


def open_arith(p: Party, x: np.ndarray, bits: int) -> np.ndarray:
    """Reveal an arithmetic sharing to both parties (uint64 mod ``2^bits``)."""
    other = p.ch.exchange_ring(mask(x, bits), bits)
    return mask(x + other.reshape(np.shape(x)), bits)


def open_bool(p: Party, b: np.ndarray) -> np.ndarray:
    b = np.asarray(b, dtype=np.uint8)
    other = p.ch.exchange_ring(b.astype(np.uint64), 1)
    return b ^ other.reshape(b.shape).astype(np.uint8)
