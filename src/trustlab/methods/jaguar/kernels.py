"""Compiled kernels for both sides of the SPA-Conv / NTT comparison, in one technology (numba).

Both systems' hot loops are written here as scalar loops over uint64 words and compiled by the
same LLVM with the same flags, single-threaded (no ``parallel=True``, no BLAS): whatever the
compiler does for one side (auto-vectorisation under AVX-512 in the default build; nothing
beyond SSE2 with ``NUMBA_CPU_NAME=generic``) it can do for the other.

Jaguar (power-of-two ring ``Z_{2^64}``):

- ``spa_full``: the literal scalar–polynomial accumulation of one ciphertext component over
  all ``N`` coefficients, ``out[o, r] += sum_b sum_t W[o, b, t] * X^shift_t * ct[b, r]``. The
  rotation is a slice of the *negacyclic extension* ``ext = (-x, x)`` (length ``2N``):
  ``(X^s x)[j] = ext[N - s + j]``, so every term is one contiguous multiply-add with no branch;
  zero weights (padding channels) are skipped; terms are fused four at a time.
- ``spa_used``: the same sum at the coefficients the client reads only (the conv outputs). The
  ``c0`` component is only sent at those positions, so computing the others is wasted work; this
  costs exactly a direct integer convolution (``C * C_out * k^2 * H_out * W_out`` multiply-adds).
  ``c1`` is needed in full (the client multiplies it by ``s``), so it always goes through
  ``spa_full``.

Baseline (RNS over NTT primes ``p < 2^50``, as the numpy reference):

- ``ntt_forward`` / ``ntt_inverse``: negacyclic Cooley–Tukey / Gentleman–Sande NTTs with
  Harvey's lazy reduction (values kept in ``[0, 4p)`` / ``[0, 2p)``) and Shoup's precomputed
  twiddle quotients (``w' = floor(w 2^64 / p)``: one high and two low 64-bit products per
  butterfly), twiddles in bit-reversed order (Longa–Naehrig, SEAL's layout); the transform is in
  bit-reversed order, which the pointwise products do not care about.
- ``ntt_accumulate``: ``acc[o, r, c, l] = sum_b W_hat[o, b, l] * x_hat[b, r, c, l] mod p_l`` with
  the weights' Shoup quotients precomputed *offline* (``shoup_quotients``), lazy sums in
  ``[0, 2p)`` and one reduction per output coefficient.

The 64x64 -> high-64 product is an LLVM ``i128`` multiply (one ``mul``/``mulx`` instruction on
x86-64), exposed to numba as an intrinsic. Everything here is bit-exact against the numpy
references (``spa.spa_accumulate_reference``, ``ntt.NTTContext``, ``cheetah.CheetahServer``);
the tests check it on random shapes.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from trustlab.core.errors import InputError, MissingDependencyError

__all__ = [
    "NTTTables",
    "available",
    "cpu_name",
    "extend_negacyclic",
    "ntt_accumulate",
    "ntt_forward",
    "ntt_inverse",
    "ntt_tables",
    "reduce_mod",
    "shoup_quotients",
    "spa_full",
    "spa_used",
    "vector_registers",
]

try:  # numba is an optional extra ("kernels"); the numpy paths stay the reference.
    from llvmlite import ir as _ir
    from numba import njit, types
    from numba.extending import intrinsic

    _HAVE_NUMBA = os.environ.get("TRUSTLAB_JAGUAR_KERNELS", "") != "numpy"
except ImportError:  # pragma: no cover - exercised where numba is absent
    _HAVE_NUMBA = False


def available() -> bool:
    """Whether the compiled kernels can run (numba installed, not disabled by the environment
    variable ``TRUSTLAB_JAGUAR_KERNELS=numpy``)."""
    return _HAVE_NUMBA


def _require() -> None:
    if not _HAVE_NUMBA:
        raise MissingDependencyError(
            "jaguar's compiled kernels need numba: pip install 'trustlab[kernels]' "
            "(or unset TRUSTLAB_JAGUAR_KERNELS=numpy)."
        )


def cpu_name() -> str:
    """The CPU the kernels are compiled for: ``NUMBA_CPU_NAME`` or the host's."""
    if not _HAVE_NUMBA:
        return "none"
    from numba.core import config

    return config.CPU_NAME or "host"


if _HAVE_NUMBA:

    @intrinsic
    def _mulhi(typingctx, a, b):  # type: ignore[no-untyped-def]
        """High 64 bits of the 128-bit product of two uint64 (one ``mul`` on x86-64)."""
        sig = types.uint64(types.uint64, types.uint64)

        def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
            i128 = _ir.IntType(128)
            prod = builder.mul(builder.zext(args[0], i128), builder.zext(args[1], i128))
            return builder.trunc(builder.lshr(prod, _ir.Constant(i128, 64)), _ir.IntType(64))

        return sig, codegen

    @intrinsic
    def _mac128(typingctx, lo, hi, a, b):  # type: ignore[no-untyped-def]
        """(hi:lo) + a*b as a 128-bit sum, returned as (lo, hi) (mul + add + adc on x86-64)."""
        ret = types.UniTuple(types.uint64, 2)
        sig = ret(types.uint64, types.uint64, types.uint64, types.uint64)

        def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
            i128, i64 = _ir.IntType(128), _ir.IntType(64)
            acc = builder.or_(builder.shl(builder.zext(args[1], i128), _ir.Constant(i128, 64)),
                              builder.zext(args[0], i128))
            acc = builder.add(acc, builder.mul(builder.zext(args[2], i128),
                                               builder.zext(args[3], i128)))
            new_lo = builder.trunc(acc, i64)
            new_hi = builder.trunc(builder.lshr(acc, _ir.Constant(i128, 64)), i64)
            return context.make_tuple(builder, ret, [new_lo, new_hi])

        return sig, codegen

    _jit = functools.partial(njit, cache=True, nogil=True, boundscheck=False)

    # -- NTT (baseline) -------------------------------------------------------------------
    @_jit
    def _shoup_one(w, p):  # type: ignore[no-untyped-def]
        """floor(w * 2^64 / p) for w < p < 2^50 by long division in 13-bit steps."""
        r = np.uint64(w)
        q = np.uint64(0)
        done = 0
        while done < 64:
            step = 13 if 64 - done >= 13 else 64 - done
            r = r << np.uint64(step)
            q = (q << np.uint64(step)) | (r // p)
            r = r % p
            done += step
        return q

    @_jit
    def _shoup_array(w, p, out):  # type: ignore[no-untyped-def]
        flat_w = w.ravel()
        flat_o = out.ravel()
        for i in range(flat_w.size):
            flat_o[i] = _shoup_one(flat_w[i], p)

    @_jit
    def _ntt_fwd_rows(a, primes, roots, roots_sh):  # type: ignore[no-untyped-def]
        """In-place forward negacyclic NTT of every row of ``a`` (rows, L, N), limb ``l`` mod
        ``primes[l]``; output in [0, p) in bit-reversed order. Inputs in [0, 4p)."""
        n = a.shape[2]
        for row in range(a.shape[0]):
            for li in range(a.shape[1]):
                p = primes[li]
                two_p = p + p
                x = a[row, li]
                rt = roots[li]
                rs = roots_sh[li]
                t = n
                m = 1
                while m < n:
                    t >>= 1
                    for i in range(m):
                        j1 = 2 * i * t
                        w = rt[m + i]
                        ws = rs[m + i]
                        for j in range(j1, j1 + t):
                            u = x[j]
                            if u >= two_p:
                                u -= two_p
                            y = x[j + t]
                            v = w * y - _mulhi(ws, y) * p
                            x[j] = u + v
                            x[j + t] = u - v + two_p
                    m <<= 1
                for j in range(n):
                    u = x[j]
                    if u >= two_p:
                        u -= two_p
                    if u >= p:
                        u -= p
                    x[j] = u

    @_jit
    def _ntt_inv_rows(a, primes, iroots, iroots_sh, ninv, ninv_sh):  # type: ignore[no-untyped-def]
        """In-place inverse of ``_ntt_fwd_rows`` (bit-reversed in, natural order out, [0, p)).
        Inputs in [0, 2p)."""
        n = a.shape[2]
        for row in range(a.shape[0]):
            for li in range(a.shape[1]):
                p = primes[li]
                two_p = p + p
                x = a[row, li]
                rt = iroots[li]
                rs = iroots_sh[li]
                t = 1
                m = n
                while m > 1:
                    h = m >> 1
                    j1 = 0
                    for i in range(h):
                        w = rt[h + i]
                        ws = rs[h + i]
                        for j in range(j1, j1 + t):
                            u = x[j]
                            v = x[j + t]
                            s = u + v
                            if s >= two_p:
                                s -= two_p
                            x[j] = s
                            d = u - v + two_p
                            x[j + t] = w * d - _mulhi(ws, d) * p
                        j1 += 2 * t
                    t <<= 1
                    m = h
                nv = ninv[li]
                nvs = ninv_sh[li]
                for j in range(n):
                    u = nv * x[j] - _mulhi(nvs, x[j]) * p
                    if u >= p:
                        u -= p
                    x[j] = u

    @_jit
    def _ntt_acc(x_hat, w_hat, w_sh, primes, comps, out, diag=False):  # type: ignore[no-untyped-def]
        """out[o, r, ci, l] = sum_b w_hat[o, b, l] * x_hat[b, r, comps[ci], l] mod p_l.

        x_hat: (B, R, C, L, N); w_hat, w_sh: (O, B, L, N); out: (O, R, len(comps), L, N).
        Lazy: each Shoup product is in [0, 2p); B < 2^13 of them fit a uint64 for p < 2^50.
        ``diag``: depthwise, output ``o`` uses input ``o`` only (w_hat is (O, 1, L, N)).
        """
        n_out, n_in, n_l, n = w_hat.shape
        n_r = x_hat.shape[1]
        n_c = comps.size
        for o in range(n_out):
            acc = out[o]
            acc[:] = 0
            for b in range(n_in):
                bx = o if diag else b
                for li in range(n_l):
                    p = primes[li]
                    w = w_hat[o, b, li]
                    ws = w_sh[o, b, li]
                    for r in range(n_r):
                        for ci in range(n_c):
                            x = x_hat[bx, r, comps[ci], li]
                            dst = acc[r, ci, li]
                            for j in range(n):
                                xj = x[j]
                                dst[j] += w[j] * xj - _mulhi(ws[j], xj) * p
            for r in range(n_r):
                for ci in range(n_c):
                    for li in range(n_l):
                        p = primes[li]
                        dst = acc[r, ci, li]
                        for j in range(n):
                            dst[j] = dst[j] % p

    @_jit
    def _ntt_acc128(x_hat, w_hat, primes, r64, r64_sh, inv64_sh, comps, out, hi):  # type: ignore[no-untyped-def]
        """Same contract as ``_ntt_acc`` without Shoup quotients: each product is added to a
        128-bit accumulator (``out`` low words, ``hi`` high words; fewer than 2^13 products
        of values < 2^50 stay below 2^113) and reduced once per output coefficient."""
        n_out, n_in, n_l, n = w_hat.shape
        n_r = x_hat.shape[1]
        n_c = comps.size
        for o in range(n_out):
            acc = out[o]
            acc[:] = 0
            hi[:] = 0
            for b in range(n_in):
                for li in range(n_l):
                    w = w_hat[o, b, li]
                    for r in range(n_r):
                        for ci in range(n_c):
                            x = x_hat[b, r, comps[ci], li]
                            lo_d = acc[r, ci, li]
                            hi_d = hi[r, ci, li]
                            for j in range(n):
                                lo_d[j], hi_d[j] = _mac128(lo_d[j], hi_d[j], w[j], x[j])
            for r in range(n_r):
                for ci in range(n_c):
                    for li in range(n_l):
                        p = primes[li]
                        lo_d = acc[r, ci, li]
                        hi_d = hi[r, ci, li]
                        c, cs, ls = r64[li], r64_sh[li], inv64_sh[li]
                        for j in range(n):
                            h = hi_d[j]
                            v = c * h - _mulhi(cs, h) * p  # hi * 2^64 mod p, in [0, 2p)
                            lo = lo_d[j]
                            v += lo - _mulhi(ls, lo) * p  # + lo mod p (in [0, 2p))
                            if v >= p + p:
                                v -= p + p
                            if v >= p:
                                v -= p
                            lo_d[j] = v

    @_jit
    def _reduce_rows(a, primes):  # type: ignore[no-untyped-def]
        """a (..., L, N) flattened as (rows, L, N): reduce each limb mod its prime in place."""
        for row in range(a.shape[0]):
            for li in range(a.shape[1]):
                p = primes[li]
                x = a[row, li]
                for j in range(x.size):
                    x[j] = x[j] % p

    # -- SPA (Jaguar) -------------------------------------------------------------------------
    @_jit
    def _extend(x, out):  # type: ignore[no-untyped-def]
        """x (rows, N) -> out (rows, 2N) = (-x, x) mod 2^64."""
        n = x.shape[1]
        for row in range(x.shape[0]):
            for j in range(n):
                v = x[row, j]
                out[row, j] = np.uint64(0) - v
                out[row, n + j] = v

    @_jit
    def _compact(wmat, offs, w_sel, b_sel, o_sel):  # type: ignore[no-untyped-def]
        """The nonzero terms of one output's weights ``wmat`` (B, T), across all inputs: their
        weights, input indices and extension offsets."""
        cnt = 0
        for b in range(wmat.shape[0]):
            for t in range(wmat.shape[1]):
                if wmat[b, t] != 0:
                    w_sel[cnt] = wmat[b, t]
                    b_sel[cnt] = b
                    o_sel[cnt] = offs[t]
                    cnt += 1
        return cnt

    @_jit
    def _mac_span(acc, ext, r, w_sel, b_sel, o_sel, cnt, lo, ln):  # type: ignore[no-untyped-def]
        """acc[lo : lo + ln] += sum_t w_sel[t] * ext[b_sel[t], r, o_sel[t] + lo : ... + ln],
        four terms per pass over the span (one load/store of ``acc`` per four multiply-adds,
        whichever inputs the terms come from)."""
        a = acc[lo : lo + ln]
        t = 0
        while t + 4 <= cnt:
            w0 = w_sel[t]
            w1 = w_sel[t + 1]
            w2 = w_sel[t + 2]
            w3 = w_sel[t + 3]
            e0 = ext[b_sel[t], r, o_sel[t] + lo : o_sel[t] + lo + ln]
            e1 = ext[b_sel[t + 1], r, o_sel[t + 1] + lo : o_sel[t + 1] + lo + ln]
            e2 = ext[b_sel[t + 2], r, o_sel[t + 2] + lo : o_sel[t + 2] + lo + ln]
            e3 = ext[b_sel[t + 3], r, o_sel[t + 3] + lo : o_sel[t + 3] + lo + ln]
            for j in range(ln):
                a[j] += w0 * e0[j] + w1 * e1[j] + w2 * e2[j] + w3 * e3[j]
            t += 4
        if t + 2 <= cnt:
            w0 = w_sel[t]
            w1 = w_sel[t + 1]
            e0 = ext[b_sel[t], r, o_sel[t] + lo : o_sel[t] + lo + ln]
            e1 = ext[b_sel[t + 1], r, o_sel[t + 1] + lo : o_sel[t + 1] + lo + ln]
            for j in range(ln):
                a[j] += w0 * e0[j] + w1 * e1[j]
            t += 2
        if t < cnt:
            w0 = w_sel[t]
            e0 = ext[b_sel[t], r, o_sel[t] + lo : o_sel[t] + lo + ln]
            for j in range(ln):
                a[j] += w0 * e0[j]

    @_jit
    def _spa_spans(ext, offs, weights, span_start, span_len, out, diag=False):  # type: ignore[no-untyped-def]
        """out[o, r, lo : lo + ln] += sum_b sum_t W[o, b, t] * ext[b, r, offs[t] + lo : ...]
        for every span (lo, ln) = (span_start[r, i], span_len[r, i]) of row tile r.

        ext: (B, R, 2N) uint64; offs: (T,) = N - shift_t; weights: (O, B, T) uint64 (two's
        complement of the signed weights); out: (O, R, N) uint64. One span (0, N) per tile is
        the literal SPA over all coefficients. ``diag``: depthwise, output ``o`` uses input
        ``o`` only (weights (O, 1, T)).
        """
        n_out, n_in, n_t = weights.shape
        n_r = ext.shape[1]
        n_span = span_start.shape[1]
        w_sel = np.zeros(n_in * n_t, dtype=np.uint64)
        b_sel = np.zeros(n_in * n_t, dtype=np.int64)
        o_sel = np.zeros(n_in * n_t, dtype=np.int64)
        for o in range(n_out):
            cnt = _compact(weights[o], offs, w_sel, b_sel, o_sel)
            if diag:
                b_sel[:cnt] = o
            for r in range(n_r):
                acc = out[o, r]
                for i in range(n_span):
                    if span_len[r, i] > 0:
                        _mac_span(acc, ext, r, w_sel, b_sel, o_sel, cnt, span_start[r, i],
                                  span_len[r, i])


# -- Python-level API -----------------------------------------------------------------------------
class NTTTables:
    """Twiddles for the compiled negacyclic NTT modulo each of ``primes`` (``p = 1 mod 2N``,
    ``p < 2^50``): (L, N) arrays in bit-reversed order with their Shoup quotients. ``perm``
    maps the bit-reversed transform to the natural order of ``ntt.NTTContext``:
    ``natural[..., k] = bitreversed[..., perm[k]]`` (and back, ``perm`` is an involution)."""

    def __init__(self, n: int, primes: tuple[int, ...], psis: tuple[int, ...]) -> None:
        self.n, self.primes = n, tuple(primes)
        bits = n.bit_length() - 1
        rev = [int(f"{i:0{bits}b}"[::-1], 2) for i in range(n)]
        roots, iroots, roots_sh, iroots_sh, ninv, ninv_sh = [], [], [], [], [], []
        for p, psi in zip(primes, psis, strict=True):
            psi_inv = pow(psi, p - 2, p)
            r = [pow(psi, k, p) for k in rev]
            ir = [pow(psi_inv, k, p) for k in rev]
            roots.append(r)
            iroots.append(ir)
            roots_sh.append([(w << 64) // p for w in r])
            iroots_sh.append([(w << 64) // p for w in ir])
            nv = pow(n, p - 2, p)
            ninv.append(nv)
            ninv_sh.append((nv << 64) // p)
        self.roots = np.array(roots, dtype=np.uint64)
        self.iroots = np.array(iroots, dtype=np.uint64)
        self.roots_sh = np.array(roots_sh, dtype=np.uint64)
        self.iroots_sh = np.array(iroots_sh, dtype=np.uint64)
        self.ninv = np.array(ninv, dtype=np.uint64)
        self.ninv_sh = np.array(ninv_sh, dtype=np.uint64)
        self.p = np.array(primes, dtype=np.uint64)
        self.perm = np.array(rev, dtype=np.int64)


@functools.lru_cache(maxsize=32)
def ntt_tables(n: int, primes: tuple[int, ...]) -> NTTTables:
    """Cached tables; each ``psi`` is the primitive 2N-th root ``ntt.NTTContext`` uses, so the
    transforms agree with the numpy reference up to the order ``perm``."""
    from trustlab.methods.jaguar.ntt import _primitive_root_2n

    return NTTTables(n, tuple(primes), tuple(_primitive_root_2n(n, p) for p in primes))


def _limb_rows(a: np.ndarray, n_limbs: int) -> np.ndarray:
    if a.dtype != np.uint64 or not a.flags.c_contiguous:
        raise ValueError("compiled NTT kernels need C-contiguous uint64 arrays")
    if n_limbs > 1 and (a.ndim < 2 or a.shape[-2] != n_limbs):
        raise ValueError(f"expected (..., {n_limbs}, N) limbs, got {a.shape}")
    return a.reshape(-1, n_limbs, a.shape[-1])


def ntt_forward(a: np.ndarray, tables: NTTTables) -> np.ndarray:
    """In place: the forward NTT (bit-reversed order) of every polynomial of ``a``, shaped
    (..., L, N) for L primes or (..., N) for one (values < 4p in, < p out)."""
    _require()
    _ntt_fwd_rows(_limb_rows(a, len(tables.primes)), tables.p, tables.roots, tables.roots_sh)
    return a


def ntt_inverse(a: np.ndarray, tables: NTTTables) -> np.ndarray:
    """In place: the inverse of ``ntt_forward`` (values < 2p in, natural order out, < p)."""
    _require()
    _ntt_inv_rows(_limb_rows(a, len(tables.primes)), tables.p, tables.iroots, tables.iroots_sh,
                  tables.ninv, tables.ninv_sh)
    return a


def shoup_quotients(w: np.ndarray, primes: tuple[int, ...]) -> np.ndarray:
    """``floor(w * 2^64 / p_l)`` for ``w`` of shape (..., L, N) (limb ``l`` mod ``primes[l]``)."""
    _require()
    out = np.empty_like(w)
    for li, p in enumerate(primes):
        src = np.ascontiguousarray(w[..., li, :])
        dst = np.empty_like(src)
        _shoup_array(src, np.uint64(p), dst)
        out[..., li, :] = dst
    return out


def ntt_accumulate(x_hat: np.ndarray, w_hat: np.ndarray, w_sh: np.ndarray | None,
                   primes: tuple[int, ...], comps: tuple[int, ...], out: np.ndarray | None = None,
                   diag: bool = False) -> np.ndarray:
    """``sum_b W_hat[o, b] * x_hat[b, r, c]`` per limb, fully reduced: (O, R, len(comps), L, N).

    With the weights' Shoup quotients ``w_sh`` each product is a Shoup multiplication (three
    64-bit products, 16 weight bytes per coefficient); with ``w_sh=None`` it is one 64x64->128
    product added to a 128-bit accumulator (8 weight bytes), reduced once at the end.
    ``diag=True``: depthwise (w_hat (O, 1, L, N), output ``o`` reads input ``o``).
    """
    _require()
    n_out = w_hat.shape[0]
    shape = (n_out, x_hat.shape[1], len(comps), *w_hat.shape[2:])
    if out is None:
        out = np.empty(shape, dtype=np.uint64)
    if x_hat.shape[0] >= 1 << 13:
        raise InputError("lazy accumulation supports fewer than 8192 input polynomials")
    pv = np.array(primes, dtype=np.uint64)
    cv = np.array(comps, np.int64)
    if diag and (w_hat.shape[1] != 1 or x_hat.shape[0] != n_out):
        raise InputError("diag=True needs w_hat (O, 1, L, N) and x_hat with O inputs.")
    if w_sh is not None:
        _ntt_acc(x_hat, w_hat, w_sh, pv, cv, out, diag)
        return out
    if diag:
        raise InputError("diag=True is implemented for the Shoup accumulation only.")
    r64 = [(1 << 64) % p for p in primes]
    _ntt_acc128(x_hat, w_hat, pv, np.array(r64, np.uint64),
                np.array([(r << 64) // p for r, p in zip(r64, primes, strict=True)], np.uint64),
                np.array([(1 << 64) // p for p in primes], np.uint64), cv, out,
                np.empty(shape[1:], dtype=np.uint64))
    return out


def reduce_mod(a: np.ndarray, primes: tuple[int, ...]) -> np.ndarray:
    """In place: reduce a (..., L, N) array limb-wise mod ``primes``."""
    _require()
    _reduce_rows(a.reshape(-1, len(primes), a.shape[-1]), np.array(primes, dtype=np.uint64))
    return a


def extend_negacyclic(polys: np.ndarray) -> np.ndarray:
    """(..., N) uint64 -> (..., 2N) ``(-x, x)``: ``X^s x`` is the slice ``[N - s, 2N - s)``."""
    _require()
    n = polys.shape[-1]
    flat = np.ascontiguousarray(polys).reshape(-1, n)
    out = np.empty((flat.shape[0], 2 * n), dtype=np.uint64)
    _extend(flat, out)
    return out.reshape(*polys.shape[:-1], 2 * n)


def _check_spa(ext: np.ndarray, shifts: np.ndarray, weights: np.ndarray,
               diag: bool = False) -> tuple[int, int]:
    if ext.dtype != np.uint64 or ext.ndim != 3 or ext.shape[-1] % 2:
        raise InputError(f"'ext' must be (B, R, 2N) uint64. Got {ext.dtype} {ext.shape}.")
    n = ext.shape[-1] // 2
    shifts = np.asarray(shifts)
    if diag:
        if weights.ndim != 3 or weights.shape != (ext.shape[0], 1, shifts.size):
            raise InputError(f"Depthwise 'weights' must have shape ({ext.shape[0]}, 1, "
                             f"{shifts.size}). Got {weights.shape}.")
    elif weights.ndim != 3 or weights.shape[1:] != (ext.shape[0], shifts.size):
        raise InputError(f"'weights' must have shape (O, {ext.shape[0]}, {shifts.size}). "
                         f"Got {weights.shape}.")
    if shifts.size and (shifts.min() < 0 or shifts.max() >= n):
        raise InputError(f"'shifts' must lie in [0, {n}).")
    return ext.shape[1], n


def _weights_u64(weights: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(weights, dtype=np.int64).view(np.uint64))


def spa_full(ext: np.ndarray, shifts: np.ndarray, weights: np.ndarray,
             out: np.ndarray | None = None, diag: bool = False) -> np.ndarray:
    """All N coefficients: ``out[o, r] (+)= sum_b sum_t W[o, b, t] X^shift_t x[b, r]`` mod 2^64.

    ext: (B, R, 2N) from ``extend_negacyclic``; shifts: (T,) in [0, N); weights: (O, B, T)
    signed integers. Returns (O, R, N) uint64 (accumulated into ``out`` when given).
    """
    _require()
    n_r, n = _check_spa(ext, shifts, weights, diag)
    spans = (np.zeros((n_r, 1), np.int64), np.full((n_r, 1), n, np.int64))
    return _run_spans(ext, shifts, weights, spans, out, diag)


def spa_used(ext: np.ndarray, shifts: np.ndarray, weights: np.ndarray, spans: tuple,
             out: np.ndarray | None = None, diag: bool = False, extended: bool = True
             ) -> np.ndarray:
    """``spa_full`` on the spans ``(start, length)`` of each row tile only (a layout's
    ``used_spans()``, which cover every coefficient the client reads); ``out`` elsewhere is
    left as it is (zero when allocated here). ``diag``: depthwise (weights (O, 1, T), output
    ``o`` reads input ``o``).

    ``extended=False``: ``ext`` holds the polynomials themselves, (B, R, N). Allowed when no
    used coefficient wraps around ``X^N`` (``start - shift >= 0`` for every span and term, true
    of every conv layout): the rotation is then a plain offset and needs no extension.
    """
    _require()
    if extended:
        n_r, n = _check_spa(ext, shifts, weights, diag)
    else:
        if ext.dtype != np.uint64 or ext.ndim != 3:
            raise InputError(f"'ext' must be (B, R, N) uint64. Got {ext.dtype} {ext.shape}.")
        n_r, n = _check_spa(_shape_only(ext), shifts, weights, diag)  # type: ignore[arg-type]
    start, length = spans
    if start.shape != length.shape or start.shape[0] != n_r:
        raise InputError(f"'spans' must be two (R={n_r}, S) arrays. Got {start.shape}, "
                         f"{length.shape}.")
    if np.any((length > 0) & ((start < 0) | (start + length > n))):
        raise InputError(f"'spans' must lie in [0, {n}).")
    if not extended:
        sh = np.asarray(shifts, dtype=np.int64)
        live = length > 0
        if sh.size and live.any() and int(start[live].min()) - int(sh.max()) < 0:
            raise InputError("These spans wrap around X^N: pass the negacyclic extension.")
    return _run_spans(ext, shifts, weights, spans, out, diag, not extended)


class _shape_only:  # a stand-in array for the shape checks of plain polynomials
    dtype = np.dtype(np.uint64)
    ndim = 3

    def __init__(self, polys: np.ndarray) -> None:
        self.shape = (polys.shape[0], polys.shape[1], 2 * polys.shape[2])


def _run_spans(ext, shifts, weights, spans, out, diag=False, no_wrap=False):  # type: ignore[no-untyped-def]
    n_r = ext.shape[1]
    n = ext.shape[2] if no_wrap else ext.shape[2] // 2
    if out is None:
        out = np.zeros((weights.shape[0], n_r, n), dtype=np.uint64)
    base = 0 if no_wrap else n
    offs = (base - np.asarray(shifts, dtype=np.int64)).astype(np.int64)
    _spa_spans(np.ascontiguousarray(ext), offs, _weights_u64(weights),
               np.ascontiguousarray(spans[0], dtype=np.int64),
               np.ascontiguousarray(spans[1], dtype=np.int64), out, diag)
    return out


def vector_registers(name: str) -> dict[str, int]:
    """Counts of xmm/ymm/zmm register uses in a kernel's assembly, compiled afresh for this
    process's target (0 ymm/zmm: no AVX). Cached code cannot be inspected, so the kernel and its
    callees are recompiled here without the cache."""
    _require()
    fns = {"spa": (_spa_spans, _mac_span), "ntt_forward": (_ntt_fwd_rows,),
           "ntt_inverse": (_ntt_inv_rows,), "ntt_accumulate": (_ntt_acc,)}[name]
    asm = ""
    for fn in fns:
        if not fn.signatures:
            raise InputError(f"Run the '{name}' kernel once before inspecting it.")
        fresh = njit(boundscheck=False)(fn.py_func)
        for sig in fn.signatures:
            fresh.compile(sig)
        asm += "\n".join(fresh.inspect_asm().values())
    return {reg: asm.count(reg) for reg in ("xmm", "ymm", "zmm")}
