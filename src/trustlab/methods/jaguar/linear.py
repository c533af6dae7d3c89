"""Jaguar's homomorphic linear layer between a client and a server holding additive shares.

The input ``x = x_c + x_s (mod 2^ell_in)`` is shared; the server holds the weights.

1. Client: packs ``x_c`` (coefficient encoding) and encrypts it at scale ``Delta = 2^(K-ell_in)``.
2. Server: adds ``Delta * x_s`` (the share wrap vanishes because ``Delta * 2^ell_in = 2^K``),
   runs SPA-Conv, re-randomises with a public-key encryption of zero, subtracts
   ``Delta * r`` (``r`` uniform mod ``2^ell_in``) at the output positions, switches the
   modulus down to ``2^response_bits`` by a rounded right shift, and sends ``c1`` plus only the
   used coefficients of ``c0``. Its output share is ``y_s = round(r / 2^s)``.
3. Client: reads the phase at scale ``2^(response_bits - ell_out)``, i.e. ``Delta * 2^s`` before
   the switch: ``y_c = round((M - r) / 2^s)``, computing ``c1*s`` through the auxiliary NTT.

So ``y_c + y_s = round(M / 2^s) + {-1, 0, 1}`` mod ``2^ell_out`` (``M`` the exact product mod
``2^ell_in``): the truncation is two *local* roundings, one per party, and there is no large
wrap error because the output ring ``2^(ell_in - s)`` absorbs the carry ``2^ell_in / 2^s``.
The next ReLU then runs at ``ell_out`` bits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.validation import check_scalar
from trustlab.methods.jaguar import kernels
from trustlab.methods.jaguar.checks import as_int_array, check_instance, check_int
from trustlab.methods.jaguar.layout import ConvLayout, FCLayout
from trustlab.methods.jaguar.params import JaguarParams
from trustlab.methods.jaguar.ring import mask, to_ring
from trustlab.methods.jaguar.rlwe import (
    Ciphertext,
    PublicKey,
    SecretKey,
    aux_negacyclic_mul,
    decode,
    encrypt,
    encrypt_zero_public,
    keygen,
    mod_switch,
    public_keygen,
)
from trustlab.methods.jaguar.sampling import Sampler
from trustlab.methods.jaguar.spa import spa_accumulate, spa_accumulate_reference

__all__ = [
    "JaguarClient",
    "JaguarServer",
    "LinearResponse",
    "NoiseBudget",
    "linear_noise_budget",
    "query_nbytes",
    "round_shift",
]

Layout = ConvLayout | FCLayout


def check_layout(layout: Layout, n: int, where: str) -> Layout:
    """A ``ConvLayout``/``FCLayout`` planned for ring degree ``n``."""
    check_instance(layout, (ConvLayout, FCLayout), "layout", where)
    if layout.n != n:
        raise InputError(f"The 'layout' parameter of {where} was planned for N={layout.n}; "
                         f"these parameters have N={n}.")
    return layout


def check_response(response: LinearResponse, layout: Layout, max_k: int, min_k: int,
                   where: str) -> LinearResponse:
    """A ``LinearResponse`` that answers ``layout`` at a modulus in ``[2^min_k, 2^max_k]``."""
    check_instance(response, LinearResponse, "response", where)
    out_mask = layout.output_mask()
    if response.c1.shape != out_mask.shape or response.c0.shape != (int(out_mask.sum()),):
        raise InputError(f"The 'response' parameter of {where} does not answer this layout: "
                         f"c0 {response.c0.shape}, c1 {response.c1.shape}; expected "
                         f"({int(out_mask.sum())},) and {out_mask.shape}.")
    if not min_k <= response.k <= max_k:
        raise InputError(f"The 'response' parameter of {where} is mod 2^{response.k}; these "
                         f"parameters expect 2^{min_k}..2^{max_k}.")
    if response.k < 64 and any(a.size and int(a.max()) >> response.k
                               for a in (response.c0, response.c1)):
        raise InputError(f"The 'response' parameter of {where} holds values >= 2^{response.k}.")
    return response


def round_shift(values: np.ndarray, shift: int, out_bits: int) -> np.ndarray:
    """``round(v / 2^shift) mod 2^out_bits`` (half-up) for uint64 residues ``v``."""
    shift = check_int(shift, "shift", "round_shift", lo=0, hi=63)
    out_bits = check_int(out_bits, "out_bits", "round_shift", lo=1, hi=64)
    v = as_int_array(values, "values", "round_shift", allow_empty=True, lo=0,
                     hi=2**64 - 1).astype(np.uint64)
    if shift == 0:
        return mask(v, out_bits)
    return mask((v + np.uint64(1 << (shift - 1))) >> np.uint64(shift), out_bits)


@dataclass(frozen=True)
class LinearResponse:
    """What the server sends back: ``c0`` at the used positions only, and all of ``c1``.

    ``c0``: (n_used,) uint64 in output-mask order; ``c1``: (O, R, N); both mod ``2^k``.
    """

    c0: np.ndarray
    c1: np.ndarray
    k: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", check_int(self.k, "k", "LinearResponse", lo=1, hi=64))
        for name in ("c0", "c1"):
            arr = getattr(self, name)
            if not isinstance(arr, np.ndarray) or arr.dtype != np.uint64:
                raise InputError(f"The '{name}' parameter of LinearResponse must be a uint64 "
                                 f"array. Got {getattr(arr, 'dtype', type(arr).__name__)}.")

    @property
    def nbytes(self) -> int:
        return math.ceil((self.c0.size + self.c1.size) * self.k / 8)


def query_nbytes(n_cts: int, n: int, k_bits: float) -> int:
    """Bytes of ``n_cts`` fresh symmetric ciphertexts: ``c0`` plus a 32-byte seed for ``c1``."""
    n_cts = check_int(n_cts, "n_cts", "query_nbytes", lo=0)
    n = check_int(n, "n", "query_nbytes", lo=1)
    k_bits = check_scalar(k_bits, "k_bits", "query_nbytes", lo=1, hi=1024)
    return n_cts * (math.ceil(n * k_bits / 8) + 32)


class JaguarClient:
    """The client: holds the secret key, encrypts its input share, decrypts its output share.

    params: a ``JaguarParams``. sampler: the randomness (``Sampler.from_os()`` for real use,
    ``Sampler.seeded(seed)`` for reproducible tests); defaults to the secure one.
    """

    def __init__(self, params: JaguarParams, sampler: Sampler | None = None) -> None:
        self.params = check_instance(params, JaguarParams, "params", "JaguarClient")
        self.sampler = sampler if sampler is None else check_instance(
            sampler, Sampler, "sampler", "JaguarClient")

    def keygen(self) -> JaguarClient:
        sampler = self.sampler or Sampler.from_os()
        self.secret_key_: SecretKey = keygen(self.params, sampler)
        self.public_key_: PublicKey = public_keygen(self.secret_key_, sampler)
        return self

    def _key(self) -> SecretKey:
        if not hasattr(self, "secret_key_"):
            raise NotFittedError("Call JaguarClient.keygen() before encrypting or decrypting.")
        return self.secret_key_

    def encrypt_share(self, x_share: np.ndarray, layout: Layout) -> Ciphertext:
        """Pack the client's share (mod ``2^ell_in``) and encrypt it: (B, R, N) ciphertexts."""
        sk = self._key()
        check_layout(layout, self.params.n, "JaguarClient.encrypt_share")
        x_share = as_int_array(x_share, "x_share", "JaguarClient.encrypt_share")
        packed = layout.pack_input(to_ring(x_share.astype(np.int64), self.params.ell_in))
        return encrypt(sk, packed, self.params.ell_in, self.sampler or Sampler.from_os())

    def decrypt_share(
        self, response: LinearResponse, layout: Layout, phase_method: str = "ntt"
    ) -> np.ndarray:
        """The client's output share mod ``2^ell_out`` (uint64), in the layer's output shape."""
        sk = self._key()
        p = self.params
        where = "JaguarClient.decrypt_share"
        check_layout(layout, p.n, where)
        check_response(response, layout, p.k, p.ell_out, where)
        if phase_method not in ("ntt", "schoolbook"):
            raise InputError(f"The 'phase_method' parameter of {where} must be 'ntt' or "
                             f"'schoolbook'. Got {phase_method!r}.")
        if phase_method == "ntt":
            prod = aux_negacyclic_mul(response.c1, sk.s, response.k, sk.s_hat)
        else:
            from trustlab.methods.jaguar.rlwe import phase

            zero = np.zeros_like(response.c1)
            prod = phase(sk, Ciphertext(zero, response.c1, response.k), method=phase_method)
        out_mask = layout.output_mask()
        full = np.zeros(out_mask.shape, dtype=np.uint64)
        full[out_mask] = mask(response.c0 + prod[out_mask], response.k)
        return layout.extract(decode(full, response.k, p.ell_out))


class JaguarServer:
    """The server: holds the weights; answers a query with SPA-Conv and local-shift truncation.

    params: the client's ``JaguarParams``. public_key: the client's, for re-randomisation
    (``None`` skips it: then ``c1`` leaks the weights' parity structure; tests only).
    kernel: "compiled" (numba: scalar uint64 accumulation, ``c0`` only at the coefficients the
    client reads, ``c1`` in full), "gemm" (numpy: batched exact float64 GEMM over bit-limbs),
    "reference" (numpy: the literal per-term loop) or "auto" (compiled when numba is
    installed, else gemm). All give the same answer bit for bit. sampler: randomness for masks
    (secure by default).
    """

    KERNELS = ("auto", "compiled", "gemm", "reference")

    def __init__(
        self,
        params: JaguarParams,
        public_key: PublicKey | None = None,
        kernel: str = "auto",
        sampler: Sampler | None = None,
    ) -> None:
        if kernel not in self.KERNELS:
            raise InputError(f"The 'kernel' parameter must be one of {self.KERNELS}. Got {kernel!r}.")
        if kernel == "auto":
            kernel = "compiled" if kernels.available() else "gemm"
        self.params = check_instance(params, JaguarParams, "params", "JaguarServer")
        if public_key is not None:
            check_instance(public_key, PublicKey, "public_key", "JaguarServer")
            if public_key.params.n != params.n or public_key.params.k != params.k:
                raise InputError("The 'public_key' parameter of JaguarServer belongs to another "
                                 f"parameter set (N={public_key.params.n}, K={public_key.params.k}"
                                 f"; the server has N={params.n}, K={params.k}).")
        if sampler is not None:
            check_instance(sampler, Sampler, "sampler", "JaguarServer")
        self.public_key = public_key
        self.kernel = kernel
        self.sampler = sampler

    def evaluate(self, query: Ciphertext, x_share: np.ndarray, weight: np.ndarray,
                 layout: Layout) -> Ciphertext:
        """The unmasked product ciphertexts (O, R, N) of ``W (x_c + x_s)`` mod ``2^ell_in``.

        With the compiled kernel, ``c0`` is computed only at the coefficients the client reads
        (``layout.output_mask()``) and is zero elsewhere; ``c1`` is always complete.
        """
        p = self.params
        check_layout(layout, p.n, "JaguarServer.evaluate")
        check_instance(query, Ciphertext, "query", "JaguarServer.evaluate")
        if query.k != p.k:
            raise InputError(f"The 'query' parameter of JaguarServer.evaluate is mod 2^{query.k}; "
                             f"these parameters encrypt mod 2^{p.k}.")
        if query.c0.shape != (layout.n_in_cts // layout.n_rtiles, layout.n_rtiles, p.n):
            raise InputError(
                f"The query does not match the layout: got {query.c0.shape}, expected "
                f"{(layout.n_in_cts // layout.n_rtiles, layout.n_rtiles, p.n)}."
            )
        x_share = as_int_array(x_share, "x_share", "JaguarServer.evaluate")
        packed = layout.pack_input(to_ring(x_share.astype(np.int64), p.ell_in))
        c0 = mask(query.c0 + (packed << np.uint64(p.log_delta)), p.k)
        terms = layout.term_weights(weight)
        if self.kernel == "compiled":
            shifts = layout.shifts()
            if isinstance(layout, ConvLayout):  # used conv outputs never wrap around X^N
                c0_out = kernels.spa_used(c0, shifts, terms, layout.used_spans(), extended=False)
            else:
                c0_out = kernels.spa_used(kernels.extend_negacyclic(c0), shifts, terms,
                                          layout.used_spans())
            c1_out = kernels.spa_full(kernels.extend_negacyclic(query.c1), shifts, terms)
            return Ciphertext(mask(c0_out, p.k), mask(c1_out, p.k), p.k)
        polys = np.stack([c0, query.c1], axis=2)  # (B, R, 2, N)
        if self.kernel == "gemm":
            out = spa_accumulate(polys, layout.shifts(), terms, p.k)
        else:
            out = spa_accumulate_reference(polys, layout.shifts(), terms, p.k)
        return Ciphertext(out[:, :, 0], out[:, :, 1], p.k)

    def respond(self, product: Ciphertext, layout: Layout) -> tuple[LinearResponse, np.ndarray]:
        """Re-randomise, mask, truncate by a local shift, switch down; returns (response, y_s)."""
        p = self.params
        check_layout(layout, p.n, "JaguarServer.respond")
        check_instance(product, Ciphertext, "product", "JaguarServer.respond")
        if product.k != p.k or product.c0.shape != layout.output_mask().shape:
            raise InputError(f"The 'product' parameter of JaguarServer.respond does not match the "
                             f"layout: shape {product.c0.shape} mod 2^{product.k}, expected "
                             f"{layout.output_mask().shape} mod 2^{p.k}.")
        sampler = self.sampler or Sampler.from_os()
        c0, c1 = product.c0, product.c1
        if self.public_key is not None:
            zero = encrypt_zero_public(self.public_key, c0.shape[0] * c0.shape[1], sampler)
            c0 = mask(c0 + zero.c0.reshape(c0.shape), p.k)
            c1 = mask(c1 + zero.c1.reshape(c1.shape), p.k)
        out_mask = layout.output_mask()
        r = sampler.bits(int(out_mask.sum()), p.ell_in)
        c0 = c0.copy()
        c0[out_mask] = mask(c0[out_mask] - (r << np.uint64(p.log_delta)), p.k)
        switched = mod_switch(Ciphertext(c0, c1, p.k), p.response_bits)
        response = LinearResponse(switched.c0[out_mask], switched.c1, p.response_bits)
        y_s = np.zeros(out_mask.shape, dtype=np.uint64)
        y_s[out_mask] = round_shift(r, p.shift, p.ell_out)
        return response, layout.extract(y_s)

    def answer(self, query: Ciphertext, x_share: np.ndarray, weight: np.ndarray,
               layout: Layout) -> tuple[LinearResponse, np.ndarray]:
        """``evaluate`` then ``respond``: the whole server side of one linear layer."""
        return self.respond(self.evaluate(query, x_share, weight, layout), layout)


@dataclass(frozen=True)
class NoiseBudget:
    """Noise of one answered output coefficient, in units of the output's last place.

    std_*: standard deviations (CLT Gaussian heuristic) of the product noise ``e*W``, the
    re-randomisation noise, and the modulus-switch rounding, all at the output scale.
    log2_fail: log2 of the per-coefficient probability that the total reaches 1/2 ulp, the
    point past which ``y - round(M/2^s)`` could leave {-1, 0, 1}.
    """

    std_product: float
    std_rerandomise: float
    std_switch: float
    log2_fail: float

    @property
    def std_total(self) -> float:
        return math.sqrt(self.std_product**2 + self.std_rerandomise**2 + self.std_switch**2)


def linear_noise_budget(params: JaguarParams, max_weight_l2: float) -> NoiseBudget:
    """Predicted noise for output coefficients whose weights have L2 norm ``<= max_weight_l2``.

    Product noise ``sum_t w_t e_t`` has variance ``sigma^2 ||w||^2``; a public-key zero
    encryption adds ``sigma^2 (1 + 4N/3)`` (``e*u + e0 + e1*s``, ternary ``u, s``); the switch
    by ``d = K - response_bits`` bits adds ``(1 + 2N/3)/12`` at the new scale. The output ulp is
    ``2^(K - ell_out)`` before the switch and ``2^(response_bits - ell_out)`` after it.
    """
    p = check_instance(params, JaguarParams, "params", "linear_noise_budget")
    max_weight_l2 = check_scalar(max_weight_l2, "max_weight_l2", "linear_noise_budget", lo=0)
    ulp_before = 2.0 ** (p.k - p.ell_out)
    ulp_after = 2.0 ** (p.response_bits - p.ell_out)
    std_prod = p.sigma * max_weight_l2 / ulp_before
    std_rr = p.sigma * math.sqrt(1 + 4 * p.n / 3) / ulp_before
    std_sw = math.sqrt((1 + 2 * p.n / 3) / 12) / ulp_after if p.response_bits < p.k else 0.0
    total = math.sqrt(std_prod**2 + std_rr**2 + std_sw**2)
    # two-sided Gaussian tail P(|Z| >= 0.5 / total), in log2, stable far in the tail
    z = 0.5 / total
    log2_fail = (math.log(special.erfc(z / math.sqrt(2))) if z < 30 else
                 -z * z / 2 - math.log(z * math.sqrt(math.pi / 2))) / math.log(2)
    return NoiseBudget(std_prod, std_rr, std_sw, log2_fail)
