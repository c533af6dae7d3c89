"""One party of the two-party protocol: its role, channel, OT machinery and randomness.

Every protocol function in ``millionaire``, ``relu`` and ``pooling`` is called by *both*
parties with their own ``Party`` and their own shares (SPMD style); role 0 is the server (it
holds the weights), role 1 the client (it holds the input). Arithmetic shares are uint64
residues mod ``2^bits``; boolean shares are uint8 arrays of 0/1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from trustlab.core.errors import InputError, NotFittedError
from trustlab.methods.jaguar.channel import Channel
from trustlab.methods.jaguar.checks import (
    as_bits,
    as_int_array,
    as_ring_array,
    check_instance,
    check_int,
)
from trustlab.methods.jaguar.ot import OTSuite
from trustlab.methods.jaguar.ring import mask, to_ring
from trustlab.methods.jaguar.sampling import Sampler

__all__ = ["Party", "check_party", "open_arith", "open_bool", "share"]


@dataclass
class Party:
    """``ch``: the channel; ``sampler``: randomness (``Sampler.from_os()`` unless testing).

    dealer: **test-only** trusted-dealer OT (no base OTs; insecure). Call ``setup()`` first.
    """

    ch: Channel
    sampler: Sampler | None = None
    dealer: bool = False
    ot: OTSuite | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        check_instance(self.ch, Channel, "ch", "Party")
        if self.sampler is not None:
            check_instance(self.sampler, Sampler, "sampler", "Party")
        if not isinstance(self.dealer, bool):
            raise InputError(f"The 'dealer' parameter of Party must be a bool. Got {self.dealer!r}.")

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


def check_party(p: Party, where: str, setup: bool = True) -> Party:
    """``p`` is a ``Party`` (set up, when the protocol needs OTs): checked before any message."""
    check_instance(p, Party, "p", where)
    if setup and p.ot is None:
        raise NotFittedError(f"Call Party.setup() before {where}.")
    return p


def share(values: np.ndarray, bits: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Split signed integers into two uniform additive shares mod ``2^bits`` (tests, input)."""
    bits = check_int(bits, "bits", "share", lo=1, hi=64)
    v = as_int_array(values, "values", "share", lo=-(2**63), hi=2**63 - 1)
    v = v.astype(np.int64)
    check_instance(rng, np.random.Generator, "rng", "share")
    s0 = rng.integers(0, 2**bits, v.shape, dtype=np.uint64, endpoint=False) if bits < 64 else (
        rng.integers(0, 2**63, v.shape, dtype=np.uint64) * np.uint64(2))
    return s0, mask(to_ring(v, 64) - s0, bits)


def open_arith(p: Party, x: np.ndarray, bits: int) -> np.ndarray:
    """Reveal an arithmetic sharing to both parties (uint64 mod ``2^bits``)."""
    check_party(p, "open_arith", setup=False)
    bits = check_int(bits, "bits", "open_arith", lo=1, hi=64)
    x = as_ring_array(x, "x", "open_arith", bits)
    other = p.ch.exchange_ring(mask(x, bits), bits)
    return mask(x + other.reshape(np.shape(x)), bits)


def open_bool(p: Party, b: np.ndarray) -> np.ndarray:
    """Reveal a boolean sharing (0/1 per party) to both parties."""
    check_party(p, "open_bool", setup=False)
    shape = np.shape(b)
    b = as_bits(b, "b", "open_bool").reshape(shape)
    other = p.ch.exchange_ring(b.astype(np.uint64), 1)
    return b ^ other.reshape(b.shape).astype(np.uint8)
