"""The Cheetah-style baseline: coefficient-encoded convolution over a prime-modulus RLWE.

BFV with ``q = p_1 * ... * p_L`` (NTT-friendly primes below ``2^50``, residue number system),
plaintext modulus ``t = 2^ell`` and scale ``Delta = floor(q / t)``. The server multiplies the
query by the layer's plaintext polynomials in the NTT domain (forward NTT of the query, one
pointwise product per input/output polynomial pair, one inverse NTT per output), as Cheetah
does with SEAL. The answer is masked (``r`` mod ``t``), switched down to a single prime by
dropping RNS limbs, then to ``2^response_bits``, and carries the *untruncated* product mod
``2^ell``: the truncation is left to a 2PC protocol after ReLU (part 2 of the method).

Because ``t`` does not divide ``q``, products that overflow ``t`` add the error
``-(q mod t) * floor(x*W / t)``; ``q`` must be large enough to absorb it (Cheetah's q ~ 2^109).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from trustlab.core.errors import InputError, NotFittedError
from trustlab.methods.jaguar import kernels
from trustlab.methods.jaguar.checks import as_int_array, check_instance, check_int
from trustlab.methods.jaguar.layout import ConvLayout, FCLayout
from trustlab.methods.jaguar.linear import LinearResponse, check_layout, check_response
from trustlab.methods.jaguar.ntt import find_ntt_primes, mulmod, ntt_context
from trustlab.methods.jaguar.params import PrimeParams
from trustlab.methods.jaguar.ring import mask
from trustlab.methods.jaguar.sampling import Sampler, expand_seed

__all__ = [
    "CheetahClient",
    "CheetahServer",
    "RNSCiphertext",
    "cheetah_params",
]

Layout = ConvLayout | FCLayout


def cheetah_params(
    n: int = 4096, ell: int = 37, *, n_primes: int = 2, prime_bits: int = 50,
    guard_bits: int = 10, allow_insecure: bool = False,
) -> PrimeParams:
    """Cheetah's shape: ``q`` of two ~50-bit NTT primes (log q ~ 100 <= 109 at N=4096)."""
    n = check_int(n, "n", "cheetah_params", lo=16)
    ell = check_int(ell, "ell", "cheetah_params", lo=1, hi=62)
    n_primes = check_int(n_primes, "n_primes", "cheetah_params", lo=1)
    prime_bits = check_int(prime_bits, "prime_bits", "cheetah_params", lo=20, hi=50)
    guard_bits = check_int(guard_bits, "guard_bits", "cheetah_params", lo=1)
    primes = find_ntt_primes(n, prime_bits, n_primes)
    return PrimeParams(n=n, primes=primes, ell=ell, response_bits=ell + guard_bits,
                       allow_insecure=allow_insecure)


@dataclass(frozen=True)
class RNSCiphertext:
    """Ciphertexts in RNS form: ``c0, c1`` of shape (..., L, N), limb ``l`` mod ``primes[l]``."""

    c0: np.ndarray
    c1: np.ndarray
    primes: tuple[int, ...]
    seeds: tuple[bytes, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.primes, tuple) or not self.primes or not all(
                isinstance(p, int) and not isinstance(p, bool) and 2 < p < 1 << 50
                for p in self.primes):
            raise InputError("The 'primes' parameter of RNSCiphertext must be a non-empty tuple "
                             f"of NTT primes below 2^50. Got {self.primes!r:.80}.")
        for name in ("c0", "c1"):
            arr = getattr(self, name)
            if (not isinstance(arr, np.ndarray) or arr.dtype != np.uint64 or arr.ndim < 2
                    or arr.shape[-2] != len(self.primes)):
                raise InputError(f"The '{name}' parameter of RNSCiphertext must be a uint64 array "
                                 f"of shape (..., {len(self.primes)}, N) (one limb per prime). Got "
                                 f"{getattr(arr, 'shape', type(arr).__name__)}.")
        if self.c0.shape != self.c1.shape:
            raise InputError(f"The 'c0' and 'c1' parameters of RNSCiphertext must have the same "
                             f"shape. Got {self.c0.shape} and {self.c1.shape}.")


def _signed_to_rns(values: np.ndarray, primes: tuple[int, ...]) -> np.ndarray:
    """Signed int64 (..., N) -> (..., L, N) residues."""
    v = np.asarray(values, dtype=np.int64)
    return np.stack([np.mod(v, p).astype(np.uint64) for p in primes], axis=-2)


def _big_to_rns(value: int, primes: tuple[int, ...]) -> np.ndarray:
    return np.array([value % p for p in primes], dtype=np.uint64)[:, None]


def _addmod(a: np.ndarray, b: np.ndarray, p: np.ndarray) -> np.ndarray:
    s = a + b
    return np.where(s >= p, s - p, s)


def _submod(a: np.ndarray, b: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.where(a >= b, a - b, a + p - b)


def _ntt_all(x: np.ndarray, primes: tuple[int, ...], inverse: bool = False) -> np.ndarray:
    out = np.empty_like(x)
    n = x.shape[-1]
    for li, p in enumerate(primes):
        ctx = ntt_context(n, p)
        out[..., li, :] = ctx.inverse(x[..., li, :]) if inverse else ctx.forward(x[..., li, :])
    return out


def _mul_rns(a: np.ndarray, b: np.ndarray, primes: tuple[int, ...]) -> np.ndarray:
    out = np.empty(np.broadcast_shapes(a.shape, b.shape), dtype=np.uint64)
    for li, p in enumerate(primes):
        out[..., li, :] = mulmod(*np.broadcast_arrays(a[..., li, :], b[..., li, :]), p)
    return out


def _uniform_rns(seed: bytes, n: int, primes: tuple[int, ...]) -> np.ndarray:
    """Uniform residues mod each prime from a seed (rejection sampling on SHAKE-256 words)."""
    rows = []
    for li, p in enumerate(primes):
        bits = p.bit_length()
        draws = expand_seed(seed + bytes([li]), 2 * n) >> np.uint64(64 - bits)
        kept = draws[draws < np.uint64(p)]
        while kept.size < n:  # pragma: no cover - probability ~ 2^-n
            more = expand_seed(seed + bytes([li, kept.size % 256]), 2 * n) >> np.uint64(64 - bits)
            kept = np.concatenate([kept, more[more < np.uint64(p)]])
        rows.append(kept[:n])
    return np.stack(rows)


class CheetahClient:
    """The baseline's client: ternary secret, symmetric BFV encryption in RNS form."""

    def __init__(self, params: PrimeParams, sampler: Sampler | None = None) -> None:
        self.params = check_instance(params, PrimeParams, "params", "CheetahClient")
        self.sampler = sampler if sampler is None else check_instance(
            sampler, Sampler, "sampler", "CheetahClient")

    def keygen(self) -> CheetahClient:
        p = self.params
        sampler = self.sampler or Sampler.from_os()
        self.s_: np.ndarray = sampler.ternary(p.n)
        self.s_hat_: np.ndarray = _ntt_all(_signed_to_rns(self.s_, p.primes), p.primes)
        a = np.stack([_uniform_rns(sampler.seed32(), p.n, p.primes)])
        e = _signed_to_rns(sampler.gaussian((1, p.n), p.sigma), p.primes)
        a_s = _ntt_all(_mul_rns(_ntt_all(a, p.primes), self.s_hat_, p.primes), p.primes, True)
        pm = np.array(p.primes, dtype=np.uint64)[:, None]
        self.public_key_ = (_submod(e, a_s, pm)[0], a[0])  # (b, a) with b = -a s + e
        return self

    def encrypt_share(self, x_share: np.ndarray, layout: Layout) -> RNSCiphertext:
        if not hasattr(self, "s_"):
            raise NotFittedError("Call CheetahClient.keygen() before encrypting.")
        p = self.params
        check_layout(layout, p.n, "CheetahClient.encrypt_share")
        sampler = self.sampler or Sampler.from_os()
        x_share = as_int_array(x_share, "x_share", "CheetahClient.encrypt_share")
        packed = layout.pack_input(np.mod(x_share.astype(np.int64), 1 << p.ell))
        lead = packed.shape[:-1]
        count = math.prod(lead)
        seeds = tuple(sampler.seed32() for _ in range(count))
        a = np.stack([_uniform_rns(sd, p.n, p.primes) for sd in seeds]).reshape(
            *lead, len(p.primes), p.n)
        pm = np.array(p.primes, dtype=np.uint64)[:, None]
        delta = _big_to_rns(p.q // (1 << p.ell), p.primes)
        dm = _mul_rns(_signed_to_rns(packed, p.primes), np.broadcast_to(delta, (len(p.primes), p.n)),
                      p.primes)
        a_s = _ntt_all(_mul_rns(_ntt_all(a, p.primes), self.s_hat_, p.primes), p.primes, True)
        e = _signed_to_rns(sampler.gaussian((*lead, p.n), p.sigma), p.primes)
        c0 = _submod(_addmod(e, dm, pm), a_s, pm)
        return RNSCiphertext(c0, a, p.primes, seeds)

    def decrypt_share(self, response: LinearResponse, layout: Layout) -> np.ndarray:
        """Output share mod ``2^ell`` (the untruncated product), via the auxiliary NTT."""
        from trustlab.methods.jaguar.ntt import aux_negacyclic_mul
        from trustlab.methods.jaguar.rlwe import decode

        if not hasattr(self, "s_"):
            raise NotFittedError("Call CheetahClient.keygen() before decrypting.")
        where = "CheetahClient.decrypt_share"
        check_layout(layout, self.params.n, where)
        check_response(response, layout, 64, self.params.ell, where)
        prod = aux_negacyclic_mul(response.c1, self.s_, response.k)
        out_mask = layout.output_mask()
        full = np.zeros(out_mask.shape, dtype=np.uint64)
        full[out_mask] = mask(response.c0 + prod[out_mask], response.k)
        return layout.extract(decode(full, response.k, self.params.ell))


class CheetahServer:
    """The baseline's server: NTT-domain plaintext products, masking, modulus switching.

    ``prepare`` transforms the layer's plaintext polynomials once (offline, like cached
    kernels); ``evaluate`` is the online cost compared with SPA-Conv.
    kernel: "compiled" (numba: Harvey/Shoup NTTs, the weights' Shoup quotients precomputed
    offline, lazy accumulation), "numpy" (the vectorised reference) or "auto" (compiled when
    numba is installed). Both give the same answer bit for bit.
    """

    KERNELS = ("auto", "compiled", "numpy")

    def __init__(self, params: PrimeParams, public_key: tuple[np.ndarray, np.ndarray] | None = None,
                 sampler: Sampler | None = None, kernel: str = "auto") -> None:
        if kernel not in self.KERNELS:
            raise InputError(f"The 'kernel' parameter must be one of {self.KERNELS}. Got {kernel!r}.")
        if kernel == "auto":
            kernel = "compiled" if kernels.available() else "numpy"
        self.params = check_instance(params, PrimeParams, "params", "CheetahServer")
        if public_key is not None:
            shape = (len(params.primes), params.n)
            if (not isinstance(public_key, tuple) or len(public_key) != 2 or not all(
                    isinstance(a, np.ndarray) and a.dtype == np.uint64 and a.shape == shape
                    for a in public_key)):
                raise InputError("The 'public_key' parameter of CheetahServer must be the "
                                 f"client's (b, a): two uint64 arrays of shape {shape}.")
        if sampler is not None:
            check_instance(sampler, Sampler, "sampler", "CheetahServer")
        self.public_key = public_key
        self.sampler = sampler
        self.kernel = kernel

    def prepare(self, weight: np.ndarray, layout: Layout) -> CheetahServer:
        """Offline: the forward NTTs of the layer's plaintext polynomials (and, compiled, their
        Shoup quotients)."""
        p = self.params
        check_layout(layout, p.n, "CheetahServer.prepare")
        terms = layout.term_weights(weight)  # (O, B, T)
        polys = np.zeros((*terms.shape[:2], p.n), dtype=np.int64)
        polys[..., layout.shifts()] = terms
        rns = _signed_to_rns(polys, p.primes)  # (O, B, L, N)
        if self.kernel == "compiled":
            self.weight_hat_ = kernels.ntt_forward(np.ascontiguousarray(rns),
                                                   kernels.ntt_tables(p.n, p.primes))
            self.weight_shoup_ = kernels.shoup_quotients(self.weight_hat_, p.primes)
        else:
            self.weight_hat_ = _ntt_all(rns, p.primes)
        self.layout_ = layout
        return self

    def evaluate(self, query: RNSCiphertext, x_share: np.ndarray) -> RNSCiphertext:
        if not hasattr(self, "weight_hat_"):
            raise NotFittedError("Call CheetahServer.prepare(weight, layout) before evaluate.")
        p, layout = self.params, self.layout_
        where = "CheetahServer.evaluate"
        check_instance(query, RNSCiphertext, "query", where)
        want = (layout.n_in_cts // layout.n_rtiles, layout.n_rtiles, len(p.primes), p.n)
        if query.primes != p.primes or query.c0.shape != want:
            raise InputError(f"The 'query' parameter of {where} does not match the layout and "
                             f"primes: got shape {query.c0.shape}, expected {want}.")
        x_share = as_int_array(x_share, "x_share", where)
        pm = np.array(p.primes, dtype=np.uint64)[:, None]
        packed = layout.pack_input(np.mod(x_share.astype(np.int64), 1 << p.ell))
        delta = np.broadcast_to(_big_to_rns(p.q // (1 << p.ell), p.primes), (len(p.primes), p.n))
        c0 = _addmod(query.c0, _mul_rns(_signed_to_rns(packed, p.primes), delta, p.primes), pm)
        if self.kernel == "compiled":
            tab = kernels.ntt_tables(p.n, p.primes)
            x_hat = kernels.ntt_forward(np.stack([c0, query.c1], axis=2), tab)  # (B, R, 2, L, N)
            out = kernels.ntt_inverse(
                kernels.ntt_accumulate(x_hat, self.weight_hat_, self.weight_shoup_, p.primes,
                                       (0, 1)), tab)
            return RNSCiphertext(out[:, :, 0], out[:, :, 1], p.primes)
        ct_hat = _ntt_all(np.stack([c0, query.c1], axis=2), p.primes)  # (B, R, 2, L, N)
        n_out = self.weight_hat_.shape[0]
        acc = np.zeros((n_out, *ct_hat.shape[1:]), dtype=np.uint64)
        for b in range(ct_hat.shape[0]):
            w_b = self.weight_hat_[:, b][:, None, None]  # (O, 1, 1, L, N)
            acc = _addmod(acc, _mul_rns(w_b, ct_hat[b][None], p.primes), pm)
        out = _ntt_all(acc, p.primes, inverse=True)
        return RNSCiphertext(out[:, :, 0], out[:, :, 1], p.primes)

    def respond(self, product: RNSCiphertext) -> tuple[LinearResponse, np.ndarray]:
        if not hasattr(self, "layout_"):
            raise NotFittedError("Call CheetahServer.prepare(weight, layout) before respond.")
        p, layout = self.params, self.layout_
        check_instance(product, RNSCiphertext, "product", "CheetahServer.respond")
        want = (*layout.output_mask().shape[:2], len(p.primes), p.n)
        if product.primes != p.primes or product.c0.shape != want:
            raise InputError(f"The 'product' parameter of CheetahServer.respond does not match "
                             f"the layout: got shape {product.c0.shape}, expected {want}.")
        sampler = self.sampler or Sampler.from_os()
        pm = np.array(p.primes, dtype=np.uint64)[:, None]
        c0, c1 = product.c0, product.c1
        if self.public_key is not None:
            count = math.prod(c0.shape[:-2])
            u = sampler.ternary((count, p.n))
            u_hat = _ntt_all(_signed_to_rns(u, p.primes), p.primes)
            b_hat = _ntt_all(self.public_key[0][None], p.primes)
            a_hat = _ntt_all(self.public_key[1][None], p.primes)
            z0 = _ntt_all(_mul_rns(u_hat, b_hat, p.primes), p.primes, True)
            z1 = _ntt_all(_mul_rns(u_hat, a_hat, p.primes), p.primes, True)
            e0 = _signed_to_rns(sampler.gaussian((count, p.n), p.sigma), p.primes)
            e1 = _signed_to_rns(sampler.gaussian((count, p.n), p.sigma), p.primes)
            c0 = _addmod(c0, _addmod(z0, e0, pm).reshape(c0.shape), pm)
            c1 = _addmod(c1, _addmod(z1, e1, pm).reshape(c1.shape), pm)
        out_mask = layout.output_mask()
        r = sampler.bits(int(out_mask.sum()), p.ell)
        delta = p.q // (1 << p.ell)
        c0 = c0.copy()
        for li, prime in enumerate(p.primes):
            dr_l = mulmod(np.mod(r, prime).astype(np.uint64),
                          np.full(r.shape, delta % prime, dtype=np.uint64), prime)
            limb = c0[..., li, :]
            limb[out_mask] = _submod(limb[out_mask], dr_l, np.uint64(prime))
        k0 = _switch_to_power_of_two(c0, p.primes, p.response_bits)
        k1 = _switch_to_power_of_two(c1, p.primes, p.response_bits)
        response = LinearResponse(k0[out_mask], k1, p.response_bits)
        y_s = np.zeros(out_mask.shape, dtype=np.uint64)
        y_s[out_mask] = r
        return response, layout.extract(y_s)

    def answer(self, query: RNSCiphertext, x_share: np.ndarray) -> tuple[LinearResponse, np.ndarray]:
        return self.respond(self.evaluate(query, x_share))


def _switch_to_power_of_two(c: np.ndarray, primes: tuple[int, ...], bits: int) -> np.ndarray:
    """``round(c * 2^bits / q) mod 2^bits`` from RNS (..., L, N) to uint64 (..., N).

    First drop limbs one by one (exact RNS rescaling ``(c - [c]_pL) / pL``, as SEAL's
    ``mod_switch_to_next``), then scale the last residue by ``2^bits / p_1`` in float64
    (error < 2^(bits-53), absorbed in the rounding noise).
    """
    cur = c
    ps = list(primes)
    while len(ps) > 1:
        p_last = ps.pop()
        last = cur[..., -1, :]
        nxt = np.empty((*cur.shape[:-2], len(ps), cur.shape[-1]), dtype=np.uint64)
        for li, p in enumerate(ps):
            inv = pow(p_last, -1, p)
            diff = _submod(cur[..., li, :], np.mod(last, np.uint64(p)), np.uint64(p))
            nxt[..., li, :] = mulmod(diff, np.full(diff.shape, inv, dtype=np.uint64), p)
        cur = nxt
    p1 = ps[0]
    scaled = np.rint(cur[..., 0, :].astype(np.float64) * (2.0**bits / p1))
    return mask(scaled.astype(np.uint64), bits)
