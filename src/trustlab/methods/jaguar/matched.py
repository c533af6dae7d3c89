"""A matched comparison of SPA-Conv and the NTT baseline at ImageNet scale: networks, an
operation-count model, and a timing harness over full layers (no extrapolation).

Networks: every distinct convolution of ResNet-18, ResNet-50 (torchvision v1.5: stride in the
3x3) and MobileNetV2 (depthwise included) at full channel counts and 224x224 inputs, with how
often each occurs, plus the final FC layer. A 1x1 convolution with stride s reads every s-th
pixel only, and subsampling additive shares is local, so both systems run it as a stride-1
1x1 conv on the subsampled input (``effective``). Depthwise convolutions run one channel per
query (coefficient packing cannot keep channels apart under per-channel weights).

Two ways of treating the ciphertext component ``c1`` (the uniform polynomial ``a`` the client
expands from a seed) are measured for *both* systems:

- ``online``: everything after the query arrives (Cheetah's protocol, no offline phase);
- ``c1-offline``: ``a`` does not depend on the input, so a client may send its seeds ahead of
  time and the server computes ``W * a`` (SPA: all N coefficients; NTT: forward transforms,
  products and inverse transforms of c1) before the input exists. Online work is then the c0
  component only. This is a structural option of both systems, not of SPA-Conv alone.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field

import numpy as np

from trustlab.methods.jaguar import kernels
from trustlab.methods.jaguar.layout import ConvLayout, FCLayout, plan_conv, plan_fc
from trustlab.methods.jaguar.params import JaguarParams, PrimeParams

__all__ = [
    "NETWORKS",
    "LayerOps",
    "LayerTimes",
    "Linear",
    "NonlinearCounts",
    "network_layers",
    "nonlinear_counts",
    "op_count",
    "time_layer",
]


@dataclass(frozen=True)
class Linear:
    """One distinct linear layer: conv (``kernel > 0``) or FC (``kernel == 0``: ``c`` inputs,
    ``c_out`` outputs); ``count``: occurrences in the network; ``groups``: 1 or C (depthwise);
    ``relu``: whether a ReLU follows (``6`` for ReLU6)."""

    name: str
    c: int
    h: int
    c_out: int
    kernel: int
    stride: int = 1
    pad: int = 0
    count: int = 1
    groups: int = 1
    relu: int = 1

    @property
    def depthwise(self) -> bool:
        return self.groups > 1

    @property
    def h_out(self) -> int:
        if self.kernel == 0:
            return 1
        return (self.h + 2 * self.pad - self.kernel) // self.stride + 1

    def effective(self) -> Linear:
        """A 1x1 stride-s conv as a stride-1 conv on the (locally) subsampled input."""
        if self.kernel == 1 and self.stride > 1:
            return Linear(self.name, self.c, self.h_out, self.c_out, 1, 1, 0, self.count,
                          self.groups, self.relu)
        return self

    def layout(self, n: int) -> ConvLayout | FCLayout:
        e = self.effective()
        if e.kernel == 0:
            return plan_fc(n, e.c_out, e.c)
        if e.depthwise:
            return plan_conv(n, 1, e.h, e.h, 1, e.kernel, e.stride, e.pad)
        return plan_conv(n, e.c, e.h, e.h, e.c_out, e.kernel, e.stride, e.pad)

    @property
    def queries(self) -> int:
        """Independent HE queries per occurrence (one per channel when depthwise)."""
        return self.c if self.depthwise else 1

    @property
    def input_elements(self) -> int:
        e = self.effective()
        return e.c * (e.h * e.h if e.kernel else 1)

    @property
    def output_elements(self) -> int:
        return self.c_out * self.h_out * self.h_out


def _resnet18() -> tuple[Linear, ...]:
    L = Linear
    return (
        L("conv1_7x7_s2", 3, 224, 64, 7, 2, 3),
        L("layer1_3x3", 64, 56, 64, 3, 1, 1, count=4),
        L("layer2_3x3_s2", 64, 56, 128, 3, 2, 1),
        L("layer2_3x3", 128, 28, 128, 3, 1, 1, count=3),
        L("layer2_down_1x1_s2", 64, 56, 128, 1, 2, 0, relu=0),
        L("layer3_3x3_s2", 128, 28, 256, 3, 2, 1),
        L("layer3_3x3", 256, 14, 256, 3, 1, 1, count=3),
        L("layer3_down_1x1_s2", 128, 28, 256, 1, 2, 0, relu=0),
        L("layer4_3x3_s2", 256, 14, 512, 3, 2, 1),
        L("layer4_3x3", 512, 7, 512, 3, 1, 1, count=3),
        L("layer4_down_1x1_s2", 256, 14, 512, 1, 2, 0, relu=0),
        L("fc", 512, 1, 1000, 0, relu=0),
    )


def _resnet50() -> tuple[Linear, ...]:
    L = Linear
    out: list[Linear] = [L("conv1_7x7_s2", 3, 224, 64, 7, 2, 3)]
    # (stage, width, blocks, input size, first block's input channels)
    for stage, width, blocks, h, c_first in ((1, 64, 3, 56, 64), (2, 128, 4, 56, 256),
                                              (3, 256, 6, 28, 512), (4, 512, 3, 14, 1024)):
        s = 1 if stage == 1 else 2
        h2 = h // s
        out += [
            L(f"l{stage}_reduce_first", c_first, h, width, 1),
            L(f"l{stage}_3x3_s{s}" if s > 1 else f"l{stage}_3x3", width, h, width, 3, s, 1,
              count=1 if s > 1 else blocks),
            L(f"l{stage}_expand", width, h2, 4 * width, 1, count=blocks),  # ReLU after the add
            L(f"l{stage}_down_1x1_s{s}", c_first, h, 4 * width, 1, s, 0, relu=0),
            L(f"l{stage}_reduce", 4 * width, h2, width, 1, count=blocks - 1),
        ]
        if s > 1:
            out.append(L(f"l{stage}_3x3", width, h2, width, 3, 1, 1, count=blocks - 1))
    out.append(L("fc", 2048, 1, 1000, 0, relu=0))
    return tuple(out)


def _mobilenetv2() -> tuple[Linear, ...]:
    L = Linear
    layers: dict[tuple, Linear] = {}

    def add(layer: Linear) -> None:
        key = (layer.c, layer.h, layer.c_out, layer.kernel, layer.stride, layer.groups,
               layer.relu)
        if key in layers:
            old = layers[key]
            layers[key] = L(old.name, old.c, old.h, old.c_out, old.kernel, old.stride, old.pad,
                            old.count + 1, old.groups, old.relu)
        else:
            layers[key] = layer

    add(L("stem_3x3_s2", 3, 224, 32, 3, 2, 1, relu=6))
    c_in, h = 32, 112
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = c_in * t
            if t != 1:
                add(L(f"pw_expand_{c_in}_{hidden}_{h}", c_in, h, hidden, 1, relu=6))
            add(L(f"dw_3x3_{hidden}_{h}" + (f"_s{stride}" if stride > 1 else ""), hidden, h,
                  hidden, 3, stride, 1, groups=hidden, relu=6))
            h = h // stride
            add(L(f"pw_project_{hidden}_{c}_{h}", hidden, h, c, 1, relu=0))
            c_in = c
    add(L("head_1x1", 320, 7, 1280, 1, relu=6))
    add(L("fc", 1280, 1, 1000, 0, relu=0))
    return tuple(layers.values())


#: name -> (distinct linear layers, max-pool comparisons per image)
NETWORKS: dict[str, tuple[Linear, ...]] = {
    "resnet18": _resnet18(),
    "resnet50": _resnet50(),
    "mobilenetv2": _mobilenetv2(),
}
#: elements compared by each network's max-pool (3x3 stride 2 after conv1: 8 comparisons per
#: output of 64x56x56); MobileNetV2 has none.
MAXPOOL_COMPARISONS = {"resnet18": 8 * 64 * 56 * 56, "resnet50": 8 * 64 * 56 * 56,
                       "mobilenetv2": 0}


def network_layers(name: str) -> tuple[Linear, ...]:
    return NETWORKS[name]


@dataclass(frozen=True)
class NonlinearCounts:
    """Per image: ReLU comparisons (ReLU6 counts two, max-pool eight per output), elements
    truncated by the baseline (every linear output), elements extended by Jaguar (every linear
    input, once per tensor), and sequential protocol steps (for rounds)."""

    relu: int
    truncate: int
    extend: int
    relu_layers: int
    linear_layers: int


def nonlinear_counts(name: str) -> NonlinearCounts:
    layers = NETWORKS[name]
    relu = sum(lay.count * lay.output_elements * (2 if lay.relu == 6 else lay.relu)
               for lay in layers) + MAXPOOL_COMPARISONS[name]
    truncate = sum(lay.count * lay.output_elements for lay in layers)
    # a downsampling shortcut reads the block input the block's first conv already extended
    extend = sum(lay.count * lay.input_elements for lay in layers if "down" not in lay.name)
    relu_layers = sum(lay.count * (2 if lay.relu == 6 else lay.relu) for lay in layers) + (
        4 if MAXPOOL_COMPARISONS[name] else 0)  # a 3x3 max is a depth-4 tree of comparisons
    linear_layers = sum(lay.count for lay in layers)
    return NonlinearCounts(relu, truncate, extend, relu_layers, linear_layers)


# -- operation counts -------------------------------------------------------------------------
@dataclass(frozen=True)
class LayerOps:
    """Per occurrence of a layer (all queries), by ciphertext component where it matters.

    spa_c0: multiply-adds SPA executes for c0 (the used spans); spa_c0_min: the outputs'
    multiply-adds (a direct convolution); spa_c1: multiply-adds for c1 (all N coefficients);
    mulmod_c0/c1: the baseline's pointwise products; ntt_in_c0/c1, ntt_out_c0/c1: its forward
    and inverse transforms (each over one RNS limb); weight_bytes: the baseline's precomputed
    weight NTTs with their Shoup quotients; client_ntt: aux/RNS transforms at the client (same
    count for both systems); bytes_*: query + response.
    """

    spa_c0: int
    spa_c0_min: int
    spa_c1: int
    mulmod_c0: int
    mulmod_c1: int
    ntt_in_c0: int
    ntt_in_c1: int
    ntt_out_c0: int
    ntt_out_c1: int
    weight_bytes: int
    bytes_jaguar: int
    bytes_cheetah: int
    n_in: int
    n_out: int

    def spa(self, mode: str) -> int:
        return self.spa_c0 + (self.spa_c1 if mode == "online" else 0)

    def mulmods(self, mode: str) -> int:
        return self.mulmod_c0 + (self.mulmod_c1 if mode == "online" else 0)

    def ntts(self, mode: str) -> int:
        c0 = self.ntt_in_c0 + self.ntt_out_c0
        return c0 + (self.ntt_in_c1 + self.ntt_out_c1 if mode == "online" else 0)


def _query_bytes(n_cts: int, n: int, bits: float) -> int:
    return n_cts * (math.ceil(n * bits / 8) + 32)


def op_count(layer: Linear, jp: JaguarParams, cp: PrimeParams) -> LayerOps:
    """The operation-count model of one occurrence of ``layer`` (see ``LayerOps``)."""
    lay = layer.layout(jp.n)
    n, n_l, q = jp.n, len(cp.primes), layer.queries
    terms_nz = _nonzero_terms(layer, lay)  # nonzero (output poly, input poly, term) triples
    _, length = lay.used_spans()
    pairs = lay.n_out_cts // lay.n_rtiles * lay.n_in_cts  # (output channel, input poly) pairs
    if isinstance(lay, FCLayout):
        spa_c0 = terms_nz * int(length.sum())
        spa_c0_min = layer.c * layer.c_out
        used = layer.c_out
    else:
        span_per_r = length.sum(axis=1)
        spa_c0 = terms_nz // lay.n_rtiles * int(span_per_r.sum())
        spa_c0_min = lay.c_out * lay.c * lay.kernel**2 * lay.h_out * lay.w_out
        used = lay.c_out * lay.h_out * lay.w_out
    spa_c1 = terms_nz * n
    q_bits = sum(p.bit_length() for p in cp.primes)
    bj = _query_bytes(lay.n_in_cts, n, jp.k) + math.ceil(
        (used + lay.n_out_cts * n) * jp.response_bits / 8)
    bc = _query_bytes(lay.n_in_cts, n, q_bits) + math.ceil(
        (used + lay.n_out_cts * n) * cp.response_bits / 8)
    return LayerOps(
        spa_c0=q * spa_c0, spa_c0_min=q * spa_c0_min, spa_c1=q * spa_c1,
        mulmod_c0=q * pairs * n_l * n, mulmod_c1=q * pairs * n_l * n,
        ntt_in_c0=q * lay.n_in_cts * n_l, ntt_in_c1=q * lay.n_in_cts * n_l,
        ntt_out_c0=q * lay.n_out_cts * n_l, ntt_out_c1=q * lay.n_out_cts * n_l,
        weight_bytes=q * pairs * n_l * n * 16, bytes_jaguar=q * bj, bytes_cheetah=q * bc,
        n_in=q * lay.n_in_cts, n_out=q * lay.n_out_cts)


def _nonzero_terms(layer: Linear, lay: ConvLayout | FCLayout) -> int:
    """Nonzero (output polynomial, input polynomial, term) triples, i.e. multiply-adds per
    coefficient computed: padding channels and FC padding rows carry zero weights (skipped)."""
    if isinstance(lay, FCLayout):
        return layer.c_out * layer.c * 1  # each weight once, in its group and input chunk
    return lay.c_out * lay.c * lay.kernel**2 * lay.n_rtiles


# -- timing -------------------------------------------------------------------------------------
@dataclass
class LayerTimes:
    """Per repeat (seconds of thread CPU time), one occurrence of the layer.

    spa_c0 / spa_c1: SPA-Conv on each component (extension of the input included);
    ntt_c0: forward NTTs of c0, its products and inverse NTTs; ntt_both: the same for both
    components in one pass (weights read once); client_*: encryption of the query plus
    decryption of the answer with the real client API.
    """

    spa_c0: list[float] = field(default_factory=list)
    spa_c1: list[float] = field(default_factory=list)
    ntt_c0: list[float] = field(default_factory=list)
    ntt_both: list[float] = field(default_factory=list)
    client_jaguar: list[float] = field(default_factory=list)
    client_cheetah: list[float] = field(default_factory=list)
    prepare_s: float = 0.0  # offline: the baseline's weight NTTs and Shoup quotients

    def server(self, system: str, mode: str) -> np.ndarray:
        if system == "jaguar":
            c0, c1 = np.array(self.spa_c0), np.array(self.spa_c1)
            return c0 + c1 if mode == "online" else c0
        return np.array(self.ntt_both if mode == "online" else self.ntt_c0)

    def client(self, system: str) -> np.ndarray:
        return np.array(self.client_jaguar if system == "jaguar" else self.client_cheetah)


def _cpu() -> float:
    return time.thread_time()


def time_layer(layer: Linear, jp: JaguarParams, cp: PrimeParams, repeats: int = 5,
               seed: int = 0, block_bytes: int = 1 << 26, accumulate: str = "shoup",
               clients: tuple | None = None, progress=None) -> LayerTimes:  # type: ignore[no-untyped-def]
    """Time one occurrence of ``layer`` at full size on both systems, ``repeats`` times.

    Output channels are processed in blocks whose precomputed weight NTTs take at most
    ``block_bytes``; each block's weight NTTs are prepared (offline, untimed, reused by every
    repeat), then the repeats of the four server items run interleaved in a shuffled order.
    A repeat's time is the sum over blocks (every output channel is computed and timed) plus
    the input-side work (extension / forward NTTs), timed once per repeat. Inputs are uniform
    ring elements of the right shapes (the kernels' cost does not depend on values;
    correctness is the tests' job).
    """
    kernels._require()
    rng = np.random.default_rng(seed)
    order = random.Random(seed)
    lay = layer.layout(jp.n)
    n, primes, n_l = jp.n, cp.primes, len(cp.primes)
    tab = kernels.ntt_tables(n, primes)
    shifts = lay.shifts()
    spans = lay.used_spans()
    out = LayerTimes()
    n_r = lay.n_rtiles
    diag = layer.depthwise
    conv = isinstance(lay, ConvLayout)
    if diag:  # one query per channel, batched: output channel o reads input channel o
        b_in, n_groups = layer.c, layer.c
        w_full = rng.integers(-(2**11), 2**11, (layer.c, 1, 1, lay.kernel, lay.kernel))
        terms = np.concatenate([lay.term_weights(w) for w in w_full])  # (C, 1, T)
    else:
        b_in, n_groups = lay.n_in_cts // n_r, lay.n_out_cts // n_r
        if isinstance(lay, FCLayout):
            w_full = rng.integers(-(2**11), 2**11, (lay.m, lay.d))
        else:
            w_full = rng.integers(-(2**11), 2**11, (lay.c_out, lay.c, lay.kernel, lay.kernel))
        terms = lay.term_weights(w_full)  # (groups, b_in, T)
    per_out = (1 if diag else b_in) * n_l * n * 16
    block = max(1, min(n_groups, block_bytes // max(per_out, 1)))
    sums = {k: np.zeros(repeats) for k in ("spa_c0", "spa_c1", "ntt_c0", "ntt_both")}
    ring = rng.integers(0, 2**64, (b_in, n_r, 2, n), dtype=np.uint64)
    rns = np.stack([rng.integers(0, p, (b_in, n_r, 2, n), dtype=np.uint64) for p in primes],
                   axis=3)
    # the input side (extension / forward NTTs), once per repeat
    ext: dict[int, np.ndarray] = {}
    x_hat = rns
    for rep in range(repeats):
        items = ["spa", "ntt"]
        order.shuffle(items)
        for item in items:
            if item == "spa":
                t0 = _cpu()  # c0: conv outputs never wrap, FC outputs do (extension)
                ext[0] = (np.ascontiguousarray(ring[:, :, 0]) if conv
                          else kernels.extend_negacyclic(ring[:, :, 0]))
                t1 = _cpu()
                ext[1] = kernels.extend_negacyclic(ring[:, :, 1])
                t2 = _cpu()
                sums["spa_c0"][rep] += t1 - t0
                sums["spa_c1"][rep] += t2 - t1
            else:
                src = np.ascontiguousarray(rns)
                src0 = np.ascontiguousarray(rns[:, :, :1])
                t0 = _cpu()
                kernels.ntt_forward(src0, tab)
                t1 = _cpu()
                x_hat = kernels.ntt_forward(src, tab)
                t2 = _cpu()
                sums["ntt_c0"][rep] += t1 - t0
                sums["ntt_both"][rep] += t2 - t1
    for g0 in range(0, n_groups, block):
        g1 = min(n_groups, g0 + block)
        w_blk = np.ascontiguousarray(terms[g0:g1])
        t0 = time.perf_counter()
        polys = np.zeros((g1 - g0, w_blk.shape[1], n), dtype=np.int64)
        polys[..., shifts] = w_blk
        w_rns = np.stack([np.mod(polys, p).astype(np.uint64) for p in primes], axis=2)
        w_hat = kernels.ntt_forward(w_rns, tab)
        w_sh = kernels.shoup_quotients(w_hat, primes) if accumulate == "shoup" or diag else None
        out.prepare_s += time.perf_counter() - t0
        e0 = ext[0][g0:g1] if diag else ext[0]
        e1 = ext[1][g0:g1] if diag else ext[1]
        xh = np.ascontiguousarray(x_hat[g0:g1]) if diag else x_hat
        acc0 = np.empty((g1 - g0, n_r, 1, n_l, n), dtype=np.uint64)
        acc2 = np.empty((g1 - g0, n_r, 2, n_l, n), dtype=np.uint64)
        spa_out = np.zeros((g1 - g0, n_r, n), dtype=np.uint64)
        for rep in range(repeats):
            items = ["spa_c0", "spa_c1", "ntt_c0", "ntt_both"]
            order.shuffle(items)
            for item in items:
                if item == "spa_c0":
                    spa_out[:] = 0
                    t0 = _cpu()
                    kernels.spa_used(e0, shifts, w_blk, spans, spa_out, diag, extended=not conv)
                elif item == "spa_c1":
                    spa_out[:] = 0
                    t0 = _cpu()
                    kernels.spa_full(e1, shifts, w_blk, spa_out, diag)
                elif item == "ntt_c0":
                    t0 = _cpu()
                    kernels.ntt_accumulate(xh, w_hat, w_sh, primes, (0,), acc0, diag)
                    kernels.ntt_inverse(acc0, tab)
                else:
                    t0 = _cpu()
                    kernels.ntt_accumulate(xh, w_hat, w_sh, primes, (0, 1), acc2, diag)
                    kernels.ntt_inverse(acc2, tab)
                sums[item][rep] += _cpu() - t0
        if progress is not None:
            progress(g1 - g0)
    out.spa_c0, out.spa_c1 = list(sums["spa_c0"]), list(sums["spa_c1"])
    out.ntt_c0, out.ntt_both = list(sums["ntt_c0"]), list(sums["ntt_both"])
    if clients is not None:
        _time_clients(layer, lay, clients, repeats, out, rng)
    return out


def _time_clients(layer, lay, clients, repeats, out, rng):  # type: ignore[no-untyped-def]
    """Encryption of the query and decryption of a (random) answer, real client API, both
    systems interleaved; depthwise layers run every channel."""
    from trustlab.methods.jaguar.linear import LinearResponse

    jclient, cclient = clients
    jp, cp = jclient.params, cclient.params
    mask = lay.output_mask()
    x_shape = (lay.d,) if isinstance(lay, FCLayout) else (lay.c, lay.h_in, lay.w_in)
    for rep in range(repeats):
        for system in random.Random(rep).sample(["jaguar", "cheetah"], 2):
            client, bits = (jclient, jp.response_bits) if system == "jaguar" else (
                cclient, cp.response_bits)
            x = rng.integers(0, 2**20, x_shape)
            c0 = rng.integers(0, 2**bits, int(mask.sum()), dtype=np.uint64)
            c1 = rng.integers(0, 2**bits, mask.shape, dtype=np.uint64)
            resp = LinearResponse(c0, c1, bits)
            t0 = _cpu()
            for _ in range(layer.queries):
                client.encrypt_share(x, lay)
                client.decrypt_share(resp, lay)
            (out.client_jaguar if system == "jaguar" else out.client_cheetah).append(_cpu() - t0)
