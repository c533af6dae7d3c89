"""DReLU, ReLU, multiplexer, and the known-MSB extension and truncation on shares mod 2^ell.

- ``drelu``: ``x = x0 + x1 mod 2^ell``; ``MSB(x) = msb0 ^ msb1 ^ carry`` with
  ``carry = [x0' + x1' >= 2^(ell-1)] = [2^(ell-1) - 1 - x0' < x1']`` (``x'`` the low ell-1 bits),
  one millionaires' protocol on ``ell - 1`` bits; ``DReLU = 1 ^ MSB`` (so DReLU(0) = 1).
- ``mux``: ``b * x`` for a shared bit and a shared ring element with one correlated OT in each
  direction (CrypTFlow2's F_MUX): P_i sends ``delta = (1 - 2 b_i) x_i`` and keeps the random
  ``pad``; its share is ``b_i x_i - pad + got``.
- ``relu = mux(drelu(x), x)``: run at the *target* ring ``ell`` (Jaguar's linear layers have
  already truncated).
- ``wrap_shares``: for ``0 <= y < 2^(ell-1)`` (known MSB, e.g. after ReLU) the share wrap is
  ``w = msb0 | msb1``; one COT gives arithmetic shares of ``w`` mod ``2^out_bits``.
  ``extend`` lifts ``y`` from ``ell`` to ``ell + s`` bits (``y_i - 2^ell w_i``): what Jaguar
  needs before its next linear layer. ``truncate`` computes ``(y_i >> s) - 2^(ell-s) w_i``, i.e.
  ``floor(y / 2^s) - {0, 1}``: the Cheetah baseline's post-ReLU truncation.
Shares must lie in ``[0, 2^ell)`` (an InputError otherwise, before any message is sent); the
preconditions on the shared *value* (``0 <= y < 2^(ell-1)``) cannot be checked by one party:
when violated the results are wrong, not unsafe.
"""

from __future__ import annotations

import numpy as np

from trustlab.core.errors import InputError
from trustlab.methods.jaguar.checks import as_bits, as_ring_array, check_int
from trustlab.methods.jaguar.millionaire import millionaire
from trustlab.methods.jaguar.party import Party, check_party
from trustlab.methods.jaguar.ring import mask

__all__ = ["drelu", "extend", "mux", "relu", "truncate", "wrap_shares"]


def _check_bits(ell: int, where: str) -> int:
    return check_int(ell, "ell", where, lo=2, hi=64)


def _share(x: np.ndarray, name: str, where: str, bits: int) -> np.ndarray:
    """A share mod ``2^bits``: whole numbers in ``[0, 2^bits)`` (uint64), checked, never wrapped."""
    if isinstance(x, np.ndarray) and x.dtype == np.uint64:
        if bits < 64 and x.size and int(x.max()) >> bits:
            raise InputError(f"The '{name}' parameter of {where} must hold shares mod 2^{bits} "
                             f"(values below 2^{bits}). Got {int(x.max())}.")
        return x
    return as_ring_array(x, name, where, bits)


def drelu(p: Party, x: np.ndarray, ell: int, m: int = 4) -> np.ndarray:
    """Boolean shares of ``[x >= 0]`` for ``x`` shared mod ``2^ell`` (signed)."""
    check_party(p, "drelu")
    ell = _check_bits(ell, "drelu")
    m = check_int(m, "m", "drelu", lo=1, hi=8)
    x = _share(x, "x", "drelu", ell)
    top = np.uint64(ell - 1)
    msb = ((x >> top) & np.uint64(1)).astype(np.uint8)
    low = mask(x, ell - 1)
    arg = np.uint64((1 << (ell - 1)) - 1) - low if p.role == 0 else low
    carry = millionaire(p, arg, ell - 1, m)
    out = msb ^ carry
    return out ^ np.uint8(1) if p.role == 0 else out


def mux(p: Party, b: np.ndarray, x: np.ndarray, ell: int) -> np.ndarray:
    """Arithmetic shares of ``b * x`` mod ``2^ell`` (``b`` boolean-shared, ``x`` arithmetic)."""
    check_party(p, "mux")
    ell = _check_bits(ell, "mux")
    x = _share(x, "x", "mux", ell)
    shape = np.shape(x)
    x = x.ravel()
    b = as_bits(b, "b", "mux", size=x.size)
    assert p.ot is not None
    bx = b.astype(np.uint64) * x
    delta = mask(x - np.uint64(2) * bx, ell)  # (1 - 2b) x
    pad, got = p.ot.cot_both(delta, b, ell)
    return mask(bx - pad + got, ell).reshape(shape)


def relu(p: Party, x: np.ndarray, ell: int, m: int = 4) -> np.ndarray:
    """Shares of ``max(x, 0)`` mod ``2^ell``: one DReLU and one MUX."""
    check_party(p, "relu")
    ell = _check_bits(ell, "relu")
    x = _share(x, "x", "relu", ell)
    return mux(p, drelu(p, x, ell, m), x, ell)


def wrap_shares(p: Party, y: np.ndarray, ell: int, out_bits: int) -> np.ndarray:
    """Arithmetic shares mod ``2^out_bits`` of the wrap ``[y0 + y1 >= 2^ell]`` when MSB(y) = 0.

    The precondition is on the shared *value* (``0 <= y < 2^(ell-1)``), which neither party can
    check alone; a share out of ``[0, 2^ell)`` or a bad ``ell``/``out_bits`` is an InputError.
    """
    check_party(p, "wrap_shares")
    ell = _check_bits(ell, "wrap_shares")
    out_bits = check_int(out_bits, "out_bits", "wrap_shares", lo=1, hi=64)
    y = _share(y, "y", "wrap_shares", ell).ravel()
    assert p.ot is not None
    msb = ((y >> np.uint64(ell - 1)) & np.uint64(1)).astype(np.uint8)
    if p.role == 0:  # sender: m_t = (msb0 | t) - r, m_0 = pad  =>  r = msb0 - pad
        pad = p.ot.cot_send(np.uint64(1) - msb.astype(np.uint64), out_bits)
        return mask(msb.astype(np.uint64) - pad, out_bits)
    return p.ot.cot_receive(msb, out_bits)


def extend(p: Party, y: np.ndarray, ell: int, new_bits: int) -> np.ndarray:
    """Shares of the same value ``0 <= y < 2^(ell-1)`` mod ``2^new_bits`` (``new_bits >= ell``)."""
    check_party(p, "extend")
    ell = _check_bits(ell, "extend")
    new_bits = check_int(new_bits, "new_bits", "extend", lo=ell, hi=64)
    y = _share(y, "y", "extend", ell)
    shape = np.shape(y)
    w = wrap_shares(p, y, ell, new_bits)
    y = y.ravel()
    return mask(y - (w << np.uint64(ell)), new_bits).reshape(shape)


def truncate(p: Party, y: np.ndarray, ell: int, shift: int) -> np.ndarray:
    """Shares of ``floor(y / 2^shift) - {0, 1}`` mod ``2^ell`` for ``0 <= y < 2^(ell-1)``."""
    check_party(p, "truncate")
    ell = _check_bits(ell, "truncate")
    shift = check_int(shift, "shift", "truncate", lo=1, hi=ell - 1)
    y = _share(y, "y", "truncate", ell)
    shape = np.shape(y)
    w = wrap_shares(p, y, ell, ell)
    y = y.ravel()
    return mask((y >> np.uint64(shift)) - (w << np.uint64(ell - shift)), ell).reshape(shape)
