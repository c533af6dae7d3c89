"""SPA-Conv: scalar–polynomial accumulation in the coefficient domain (no NTT).

Every linear layer is ``out[o] = sum_b sum_t W[o, b, t] * X^shift[t] * ct[b]`` over input
polynomials ``b`` and terms ``t`` (see ``layout``). Over ``Z_{2^K}`` with ``K <= 64`` each term
is a negacyclic rotation and a scalar multiply-add in native uint64 wrap-around arithmetic.

Two kernels compute exactly the same thing:

- ``spa_accumulate_reference``: the literal loop, one rotation and one scalar multiply-add per
  term, in uint64 (exact for any weights; slow; the test oracle).
- ``spa_accumulate``: the same sum batched over output channels as a matrix product. The
  rotated polynomials are cut into ``L`` bit-limbs narrow enough that
  ``(#terms) * max|W| * 2^limb < 2^53``; each limb's product with the weight matrix is then an
  *exact* float64 GEMM (BLAS), and the limbs are recombined with uint64 wrap-around. Weights too
  large for a 1-bit limb fall back to the reference kernel. Limbs are split before the
  rotation (a rotation only moves and negates coefficients), so the gather is done on float64
  limbs directly.
"""

from __future__ import annotations

import math

import numpy as np

from trustlab.core.errors import InputError
from trustlab.methods.jaguar.checks import as_int_array
from trustlab.methods.jaguar.ring import mask

__all__ = ["gemm_limb_bits", "spa_accumulate", "spa_accumulate_reference"]

_GATHER_BUDGET = 1 << 22  # uint64 words held by one batch of rotated polynomials (32 MiB)


def _rotation_gather(shifts: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Index and sign tables: coefficient j of ``X^s p`` is ``+-p[(j - s) mod N]``."""
    idx = np.arange(n)[None, :] - np.asarray(shifts, dtype=np.int64)[:, None]
    return idx % n, idx < 0


def _check(polys: np.ndarray, shifts: np.ndarray, weights: np.ndarray) -> None:
    as_int_array(weights, "weights", "spa_accumulate", ndim=3, allow_empty=True)
    as_int_array(shifts, "shifts", "spa_accumulate", ndim=1, allow_empty=True, lo=0)
    if not isinstance(polys, np.ndarray) or polys.dtype != np.uint64 or polys.ndim != 4:
        raise InputError(
            f"SPA expects uint64 polynomials of shape (n_in, n_r, comps, N). Got "
            f"{polys.dtype} {polys.shape}."
        )
    if weights.ndim != 3 or weights.shape[1] != polys.shape[0] or weights.shape[2] != len(shifts):
        raise InputError(
            f"SPA weights must have shape (O, {polys.shape[0]}, {len(shifts)}). Got {weights.shape}."
        )


def spa_accumulate_reference(
    polys: np.ndarray, shifts: np.ndarray, weights: np.ndarray, k: int
) -> np.ndarray:
    """The literal scalar–polynomial accumulation (exact, O(O * B * T * N) uint64 ops).

    polys: (B, R, comps, N) uint64 mod 2^k; weights: (O, B, T) signed ints -> (O, R, comps, N).
    """
    _check(polys, shifts, weights)
    n_in, n_r, comps, n = polys.shape
    idx, wrapped = _rotation_gather(shifts, n)
    w_ring = np.asarray(weights, dtype=np.int64).view(np.uint64)
    out = np.zeros((weights.shape[0], n_r, comps, n), dtype=np.uint64)
    for b in range(n_in):
        for t in range(len(shifts)):
            rotated = polys[b][..., idx[t]]
            np.negative(rotated, out=rotated, where=wrapped[t])
            out += w_ring[:, b, t, None, None, None] * rotated[None]
    return mask(out, k)


def gemm_limb_bits(inner: int, max_weight: int) -> int:
    """Widest limb for which an ``inner``-term dot product with weights ``<= max_weight`` is exact."""
    if max_weight == 0:
        return 64
    return min(64, 52 - math.ceil(math.log2(inner * max_weight + 1)))


def spa_accumulate(polys: np.ndarray, shifts: np.ndarray, weights: np.ndarray, k: int) -> np.ndarray:
    """Scalar–polynomial accumulation batched as exact float64 GEMMs over bit-limbs.

    Same contract as ``spa_accumulate_reference``, identical output bit for bit.
    """
    _check(polys, shifts, weights)
    weights = np.asarray(weights, dtype=np.int64)
    n_in, n_r, comps, n = polys.shape
    n_out, _, n_t = weights.shape
    max_w = int(np.max(np.abs(weights))) if weights.size else 0
    cols = n_r * comps
    group = max(1, min(n_in, _GATHER_BUDGET // max(1, n_t * n * cols)))
    if gemm_limb_bits(group * n_t, max_w) < 1:
        return spa_accumulate_reference(polys, shifts, weights, k)
    idx, wrapped = _rotation_gather(shifts, n)
    # (B, N, R*comps): gathering whole rows of the transposed input keeps the copy contiguous.
    polys_t = np.ascontiguousarray(polys.reshape(n_in, cols, n).transpose(0, 2, 1))
    out = np.zeros((n_out, n * cols), dtype=np.uint64)
    for start in range(0, n_in, group):
        stop = min(n_in, start + group)
        w_block = weights[:, start:stop].reshape(n_out, -1).astype(np.float64)
        limb = gemm_limb_bits(w_block.shape[1], max_w)
        block = polys_t[start:stop]
        for lo in range(0, k, limb):
            # Split into limbs *before* rotating: X^s (sum_l x_l 2^(l*limb)) is
            # sum_l (X^s x_l) 2^(l*limb), and a rotation only moves and negates coefficients.
            part = block >> np.uint64(lo)
            if limb < 64:
                part &= np.uint64((1 << limb) - 1)
            gathered = part.astype(np.float64)[:, idx]  # (g, T, N, cols), exact below 2^53
            np.negative(gathered, out=gathered, where=wrapped[None, :, :, None])
            gathered = gathered.reshape((stop - start) * n_t, n * cols)
            exact = (w_block @ gathered).astype(np.int64)
            out += exact.view(np.uint64) << np.uint64(lo)
    out = out.reshape(n_out, n, n_r, comps).transpose(0, 2, 3, 1)
    return mask(np.ascontiguousarray(out), k)
