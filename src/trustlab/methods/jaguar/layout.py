"""Coefficient encoding of convolutions and matrix products (Cheetah's packing).

A tile of the (zero-padded) input, ``Ct`` channels by ``Ht`` rows by the full padded width
``Wp``, is packed into one polynomial: ``x[c, i, j] -> X^(c*Ht*Wp + i*Wp + j)``. A kernel weight
``w[o, c, ki, kj]`` multiplies the monomial ``X^(O - c*Ht*Wp - ki*Wp - kj)`` with
``O = (Ct-1)*Ht*Wp + (h-1)*Wp + (h-1)``, so the product's coefficient ``O + i*Wp + j`` is the
stride-1 convolution output at ``(i, j)``. With ``Ct*Ht*Wp <= N`` no negacyclic wrap lands on
those positions (Cheetah, Prop. 1). Strided outputs are read at every ``stride``-th position.

Everything is expressed as *terms*: a shared list of shifts and a weight matrix
``W[o, input_tile, term]``; SPA-Conv and the NTT baseline consume the same terms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from trustlab.core.errors import InputError
from trustlab.methods.jaguar.checks import as_int_array, check_int

__all__ = ["ConvLayout", "FCLayout", "conv2d_int", "plan_conv", "plan_fc"]


def _check_polys(polys: np.ndarray, shape: tuple[int, ...], where: str) -> None:
    if not isinstance(polys, np.ndarray) or polys.shape != shape or polys.dtype.kind not in "iu":
        raise InputError(f"The 'polys' parameter of {where} must be an integer array of shape "
                         f"{shape}. Got {getattr(polys, 'shape', type(polys).__name__)}.")


@dataclass(frozen=True)
class ConvLayout:
    """Geometry of one conv layer under coefficient encoding with ring degree ``n``."""

    n: int
    c: int
    h_in: int
    w_in: int
    c_out: int
    kernel: int
    stride: int
    pad: int
    ct: int  # channels per tile
    ht: int  # padded input rows per tile

    # -- derived geometry -----------------------------------------------------------------
    @property
    def hp(self) -> int:
        return self.h_in + 2 * self.pad

    @property
    def wp(self) -> int:
        return self.w_in + 2 * self.pad

    @property
    def h_out(self) -> int:
        return (self.hp - self.kernel) // self.stride + 1

    @property
    def w_out(self) -> int:
        return (self.wp - self.kernel) // self.stride + 1

    @property
    def rows_per_tile(self) -> int:
        """Stride-1 output rows each row-tile yields."""
        return self.ht - self.kernel + 1

    @property
    def n_ctiles(self) -> int:
        return math.ceil(self.c / self.ct)

    @property
    def n_rtiles(self) -> int:
        rows1 = (self.h_out - 1) * self.stride + 1  # stride-1 rows actually needed
        return math.ceil(rows1 / self.rows_per_tile)

    @property
    def n_in_cts(self) -> int:
        return self.n_ctiles * self.n_rtiles

    @property
    def n_out_cts(self) -> int:
        return self.c_out * self.n_rtiles

    @property
    def n_terms(self) -> int:
        return self.ct * self.kernel * self.kernel

    @property
    def offset(self) -> int:
        k = self.kernel
        return (self.ct - 1) * self.ht * self.wp + (k - 1) * self.wp + (k - 1)

    # -- packing ------------------------------------------------------------------------
    def pack_input(self, x: np.ndarray) -> np.ndarray:
        """(C, H, W) integers -> (n_ctiles, n_rtiles, N) polynomials (same dtype)."""
        x = as_int_array(x, "x", "ConvLayout.pack_input", shape=(self.c, self.h_in, self.w_in))
        rows_total = (self.n_rtiles - 1) * self.rows_per_tile + self.ht
        padded = np.zeros((self.n_ctiles * self.ct, max(rows_total, self.hp), self.wp), x.dtype)
        padded[: self.c, self.pad : self.pad + self.h_in, self.pad : self.pad + self.w_in] = x
        out = np.zeros((self.n_ctiles, self.n_rtiles, self.n), dtype=x.dtype)
        size = self.ct * self.ht * self.wp
        for r in range(self.n_rtiles):
            r0 = r * self.rows_per_tile
            block = padded[:, r0 : r0 + self.ht, :].reshape(self.n_ctiles, size)
            out[:, r, :size] = block
        return out

    def shifts(self) -> np.ndarray:
        """Monomial exponent of each term ``(c_local, ki, kj)``, in that (C-order) sequence."""
        k, hw = self.kernel, self.ht * self.wp
        c_l, ki, kj = np.meshgrid(np.arange(self.ct), np.arange(k), np.arange(k), indexing="ij")
        return (self.offset - (c_l * hw + ki * self.wp + kj)).ravel()

    def term_weights(self, weight: np.ndarray) -> np.ndarray:
        """(C_out, C, h, h) weights -> W[o, ctile, term] (int64, zero for padding channels)."""
        shape = (self.c_out, self.c, self.kernel, self.kernel)
        weight = as_int_array(weight, "weight", "ConvLayout.term_weights", shape=shape,
                              lo=-(2**62), hi=2**62)
        full = np.zeros((self.c_out, self.n_ctiles * self.ct, self.kernel, self.kernel), np.int64)
        full[:, : self.c] = weight
        return full.reshape(self.c_out, self.n_ctiles, self.n_terms)

    def output_positions(self) -> tuple[np.ndarray, np.ndarray]:
        """For each output (o-independent) pixel: (row-tile index, coefficient index).

        Returns two (H_out, W_out) integer arrays.
        """
        i = np.arange(self.h_out) * self.stride  # stride-1 row
        j = np.arange(self.w_out) * self.stride
        tile = i // self.rows_per_tile
        local = i % self.rows_per_tile
        coeff = self.offset + local[:, None] * self.wp + j[None, :]
        return np.broadcast_to(tile[:, None], coeff.shape), coeff

    def used_mask(self) -> np.ndarray:
        """(n_rtiles, N) booleans: coefficients of an output polynomial that carry results."""
        used = np.zeros((self.n_rtiles, self.n), dtype=bool)
        tile, coeff = self.output_positions()
        used[tile, coeff] = True
        return used

    def output_mask(self) -> np.ndarray:
        """(C_out, n_rtiles, N) booleans: the coefficients the client needs."""
        return np.broadcast_to(self.used_mask()[None], (self.c_out, self.n_rtiles, self.n))

    def used_spans(self) -> tuple[np.ndarray, np.ndarray]:
        """Contiguous coefficient spans that cover the outputs: ``(start, length)``, each
        (n_rtiles, S) int64 (length 0 pads). Stride 1: one span per row tile from its first
        to its last output (the ``Wp - W_out`` halo columns between rows come along);
        stride > 1: one span per output row (every ``stride``-th coefficient is read)."""
        tile, coeff = self.output_positions()
        if self.stride == 1:
            start = np.zeros((self.n_rtiles, 1), dtype=np.int64)
            length = np.zeros((self.n_rtiles, 1), dtype=np.int64)
            for r in range(self.n_rtiles):
                pos = coeff[tile == r]
                start[r, 0], length[r, 0] = pos.min(), pos.max() - pos.min() + 1
            return start, length
        rows_tile = tile[:, 0]
        width = int(np.bincount(rows_tile, minlength=self.n_rtiles).max())
        start = np.zeros((self.n_rtiles, width), dtype=np.int64)
        length = np.zeros((self.n_rtiles, width), dtype=np.int64)
        for r in range(self.n_rtiles):
            rows = coeff[rows_tile == r, 0]
            start[r, : rows.size] = rows
            length[r, : rows.size] = (self.w_out - 1) * self.stride + 1
        return start, length

    def extract(self, polys: np.ndarray) -> np.ndarray:
        """(C_out, n_rtiles, N) output polynomials -> (C_out, H_out, W_out) values."""
        _check_polys(polys, (self.c_out, self.n_rtiles, self.n), "ConvLayout.extract")
        tile, coeff = self.output_positions()
        return polys[:, tile, coeff]


def plan_conv(
    n: int, c: int, h_in: int, w_in: int, c_out: int, kernel: int, stride: int = 1, pad: int = 0
) -> ConvLayout:
    """Pick the tile ``(Ct, Ht)`` minimising input plus output ciphertexts (Cheetah's rule)."""
    n = check_int(n, "n", "plan_conv", lo=16)
    if n & (n - 1):
        raise InputError(f"The 'n' parameter of plan_conv must be a power of two. Got {n}.")
    c, h_in, w_in, c_out, kernel, stride = (
        check_int(v, name, "plan_conv", lo=1) for name, v in (
            ("c", c), ("h_in", h_in), ("w_in", w_in), ("c_out", c_out), ("kernel", kernel),
            ("stride", stride)))
    pad = check_int(pad, "pad", "plan_conv", lo=0)
    hp, wp = h_in + 2 * pad, w_in + 2 * pad
    if kernel > min(hp, wp):
        raise InputError(f"The kernel ({kernel}) is larger than the padded input ({hp}x{wp}).")
    if kernel * wp > n:
        raise InputError(
            f"A {kernel}-row strip of the padded input ({kernel}x{wp}) exceeds N={n}; "
            "split the image by columns first."
        )
    best: ConvLayout | None = None
    best_cost = math.inf
    for ht in range(kernel, hp + 1):
        ct = min(c, n // (ht * wp))
        if ct < 1:
            break
        lay = ConvLayout(n, c, h_in, w_in, c_out, kernel, stride, pad, ct, ht)
        cost = lay.n_in_cts + lay.n_out_cts
        if cost < best_cost:
            best, best_cost = lay, cost
    assert best is not None
    return best


@dataclass(frozen=True)
class FCLayout:
    """``y = W x`` with ``W`` (m, d): input chunks of ``chunk`` entries, ``rows`` outputs per poly.

    ``x`` chunk ``b`` -> ``sum_j x[b*chunk + j] X^j``; the rows ``o`` of output poly ``g`` sit at
    ``X^(o_local*chunk + chunk - 1)``, from terms ``w[o, j] X^(o_local*chunk + chunk - 1 - j)``.
    """

    n: int
    m: int
    d: int
    chunk: int
    rows: int

    @property
    def n_in_cts(self) -> int:
        return math.ceil(self.d / self.chunk)

    @property
    def n_groups(self) -> int:
        return math.ceil(self.m / self.rows)

    @property
    def n_out_cts(self) -> int:
        return self.n_groups

    @property
    def n_terms(self) -> int:
        return self.rows * self.chunk

    @property
    def n_rtiles(self) -> int:
        return 1

    def pack_input(self, x: np.ndarray) -> np.ndarray:
        """(d,) -> (n_in_cts, 1, N)."""
        x = as_int_array(x, "x", "FCLayout.pack_input", shape=(self.d,))
        out = np.zeros((self.n_in_cts, self.n), dtype=x.dtype)
        padded = np.zeros(self.n_in_cts * self.chunk, dtype=x.dtype)
        padded[: self.d] = x
        out[:, : self.chunk] = padded.reshape(self.n_in_cts, self.chunk)
        return out[:, None, :]

    def shifts(self) -> np.ndarray:
        o_l, j = np.meshgrid(np.arange(self.rows), np.arange(self.chunk), indexing="ij")
        return (o_l * self.chunk + self.chunk - 1 - j).ravel()

    def term_weights(self, weight: np.ndarray) -> np.ndarray:
        """(m, d) -> W[group, in_chunk, term]."""
        weight = as_int_array(weight, "weight", "FCLayout.term_weights", shape=(self.m, self.d),
                              lo=-(2**62), hi=2**62)
        full = np.zeros((self.n_groups * self.rows, self.n_in_cts * self.chunk), np.int64)
        full[: self.m, : self.d] = weight
        full = full.reshape(self.n_groups, self.rows, self.n_in_cts, self.chunk)
        return full.transpose(0, 2, 1, 3).reshape(self.n_groups, self.n_in_cts, self.n_terms)

    def positions(self) -> tuple[np.ndarray, np.ndarray]:
        o = np.arange(self.m)
        return o // self.rows, (o % self.rows) * self.chunk + self.chunk - 1

    def used_spans(self) -> tuple[np.ndarray, np.ndarray]:
        """One span of length one per output row of a group (the last group's missing rows
        are computed too and never read)."""
        start = np.arange(self.rows, dtype=np.int64)[None, :] * self.chunk + self.chunk - 1
        return start, np.ones_like(start)

    def output_mask(self) -> np.ndarray:
        """(n_groups, 1, N) booleans: the coefficients the client needs."""
        used = np.zeros((self.n_groups, 1, self.n), dtype=bool)
        g, coeff = self.positions()
        used[g, 0, coeff] = True
        return used

    def extract(self, polys: np.ndarray) -> np.ndarray:
        """(n_groups, 1, N) -> (m,)."""
        _check_polys(polys, (self.n_groups, 1, self.n), "FCLayout.extract")
        g, coeff = self.positions()
        return polys[g, 0, coeff]


def plan_fc(n: int, m: int, d: int) -> FCLayout:
    """Chunks of ``min(d, N)`` inputs, ``N // chunk`` output rows per polynomial."""
    n = check_int(n, "n", "plan_fc", lo=16)
    if n & (n - 1):
        raise InputError(f"The 'n' parameter of plan_fc must be a power of two. Got {n}.")
    m, d = check_int(m, "m", "plan_fc", lo=1), check_int(d, "d", "plan_fc", lo=1)
    chunk = min(d, n)
    return FCLayout(n, m, d, chunk, max(1, min(m, n // chunk)))


def conv2d_int(
    x: np.ndarray, weight: np.ndarray, stride: int = 1, pad: int = 0, modulus_bits: int | None = None
) -> np.ndarray:
    """Plaintext integer convolution (cross-correlation, as in CNNs), exact in Python ints.

    (C, H, W) x (C_out, C, h, h) -> (C_out, H_out, W_out); reduced mod ``2^modulus_bits``
    when given (object arrays, so no overflow at any width).
    """
    x = np.asarray(as_int_array(x, "x", "conv2d_int", ndim=3), dtype=object)
    weight = np.asarray(as_int_array(weight, "weight", "conv2d_int", ndim=4), dtype=object)
    stride = check_int(stride, "stride", "conv2d_int", lo=1)
    pad = check_int(pad, "pad", "conv2d_int", lo=0)
    c, h_in, w_in = x.shape
    _, c_w, k, k2 = weight.shape
    if c_w != c or k != k2:
        raise InputError(f"The 'weight' parameter of conv2d_int must have shape (C_out, {c}, k, "
                         f"k) for an input of {c} channels. Got {weight.shape}.")
    if k > min(h_in, w_in) + 2 * pad:
        raise InputError(f"The kernel ({k}) of conv2d_int is larger than the padded input "
                         f"({h_in + 2 * pad}x{w_in + 2 * pad}).")
    out = conv2d(x, weight, stride, pad)
    if modulus_bits is not None:
        out = out % (1 << check_int(modulus_bits, "modulus_bits", "conv2d_int", lo=1))
    return out


def conv2d(x: np.ndarray, weight: np.ndarray, stride: int = 1, pad: int = 0) -> np.ndarray:
    """Cross-correlation of checked arrays in their own dtype (object for exact integers,
    float64 for the float reference); no input checks (library-internal)."""
    c, h_in, w_in = x.shape
    c_out, _, k, _ = weight.shape
    xp = np.zeros((c, h_in + 2 * pad, w_in + 2 * pad), dtype=object)
    xp[:, pad : pad + h_in, pad : pad + w_in] = x
    h_out = (h_in + 2 * pad - k) // stride + 1
    w_out = (w_in + 2 * pad - k) // stride + 1
    out = np.zeros((c_out, h_out, w_out), dtype=object)
    for ki in range(k):
        for kj in range(k):
            patch = xp[:, ki : ki + stride * h_out : stride, kj : kj + stride * w_out : stride]
            out += np.tensordot(weight[:, :, ki, kj], patch, axes=([1], [0]))
    return out
