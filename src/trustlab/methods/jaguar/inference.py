"""End-to-end private CNN inference between a server (weights) and a client (images).

Both parties run ``run_party`` over a ``Channel`` (SPMD: one code path, branches on the role).

Jaguar (``system="jaguar"``): linear layers are part 1's power-of-two RLWE answers, already
truncated to the target ring ``ell`` (``y = round(W x / 2^f) + {-1,0,1}``); ReLU and
max-pooling run at ``ell`` bits; before the next linear layer the shares are *extended* to
``ell + f`` bits (one COT per element, known MSB). The Cheetah baseline (``system="cheetah"``)
keeps the whole network at ``L = ell + f`` bits: its prime-modulus linear layers return the
untruncated product (scale ``2^(2f)``), ReLU/max-pool run at ``L`` bits and a post-ReLU
truncation protocol (one COT per element, known MSB) rescales before the next linear layer.
Signed values are extended/truncated through a public offset ``2^(bits-2)``.

What each party learns (semi-honest): the client learns the architecture (shapes), the
logits of its images and nothing else; the server learns the number of images and nothing
about them. Every byte and latency (``Channel.stats``) is counted per layer.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from dataclasses import dataclass, field

import numpy as np

from trustlab.core.errors import InputError
from trustlab.core.validation import as_float_array, check_choice, check_scalar
from trustlab.methods.jaguar.channel import Channel, ChannelError, accept, connect, listen
from trustlab.methods.jaguar.checks import check_instance, check_int
from trustlab.methods.jaguar.cheetah import (
    CheetahClient,
    CheetahServer,
    RNSCiphertext,
    _uniform_rns,
    cheetah_params,
)
from trustlab.methods.jaguar.layout import plan_conv, plan_fc
from trustlab.methods.jaguar.linear import JaguarClient, JaguarServer, LinearResponse
from trustlab.methods.jaguar.network import (
    Conv,
    Dense,
    Flatten,
    MaxPool,
    QuantNet,
    ReLU,
    Residual,
    SumPool,
    architecture,
    public_net,
)
from trustlab.methods.jaguar.params import jaguar_params
from trustlab.methods.jaguar.party import Party
from trustlab.methods.jaguar.pooling import max_pool, sum_pool
from trustlab.methods.jaguar.relu import extend, relu, truncate
from trustlab.methods.jaguar.ring import centered, mask, to_ring
from trustlab.methods.jaguar.rlwe import Ciphertext, PublicKey
from trustlab.methods.jaguar.sampling import Sampler, expand_seed

__all__ = [
    "NETWORKS",
    "InferenceResult",
    "LayerCost",
    "ProtocolConfig",
    "estimate_time",
    "private_inference",
    "query",
    "run_party",
    "serve",
]

#: Cheetah's artefact network models: (bandwidth bit/s, round-trip time s).
NETWORKS = {"lan": (3e9, 0.3e-3), "wan": (400e6, 40e-3)}


@dataclass(frozen=True)
class ProtocolConfig:
    """system: "jaguar" or "cheetah". ell: Jaguar's target ring bits (ReLU precision); the
    baseline runs at ``ell + frac_bits``. n: RLWE degree. leaf_bits: m of the millionaires'
    leaves. dealer: **test-only** trusted-dealer OT. timeout: seconds per receive."""

    system: str = "jaguar"
    ell: int = 25
    n: int = 4096
    guard_bits: int = 10
    leaf_bits: int = 4
    dealer: bool = False
    timeout: float = 120.0

    def __post_init__(self) -> None:
        check_choice(self.system, "system", ("jaguar", "cheetah"), "ProtocolConfig")
        check_int(self.ell, "ell", "ProtocolConfig", lo=8, hi=40)
        n = check_int(self.n, "n", "ProtocolConfig", lo=16)
        if n & (n - 1):
            raise InputError(f"The 'n' parameter of ProtocolConfig must be a power of two. Got {n}.")
        check_int(self.guard_bits, "guard_bits", "ProtocolConfig", lo=1, hi=20)
        check_int(self.leaf_bits, "leaf_bits", "ProtocolConfig", lo=1, hi=8)
        check_scalar(self.timeout, "timeout", "ProtocolConfig", lo=0, closed="neither")
        if not isinstance(self.dealer, bool):
            raise InputError(f"The 'dealer' parameter of ProtocolConfig must be a bool (True only "
                             f"in tests: it is insecure). Got {self.dealer!r}.")


@dataclass
class LayerCost:
    kind: str
    seconds: float
    bytes: int
    rounds: int

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind:
            raise InputError(f"The 'kind' parameter of LayerCost must be a layer kind name. Got "
                             f"{self.kind!r}.")
        self.seconds = check_scalar(self.seconds, "seconds", "LayerCost", lo=0)
        self.bytes = check_int(self.bytes, "bytes", "LayerCost", lo=0)
        self.rounds = check_int(self.rounds, "rounds", "LayerCost", lo=0)


@dataclass
class InferenceResult:
    """The client's result: logits (int64 at scale 2^f), per-layer costs, totals."""

    logits: np.ndarray
    layers: list[LayerCost] = field(default_factory=list)
    seconds: float = 0.0
    bytes: int = 0
    rounds: int = 0
    setup_seconds: float = 0.0
    setup_bytes: int = 0

    def __post_init__(self) -> None:
        if not all(isinstance(c, LayerCost) for c in self.layers):
            raise InputError("The 'layers' parameter of InferenceResult must hold LayerCost items.")

    def by_kind(self) -> dict[str, LayerCost]:
        """Costs summed per layer kind (in order of first appearance)."""
        out: dict[str, LayerCost] = {}
        for c in self.layers:
            cur = out.setdefault(c.kind, LayerCost(c.kind, 0.0, 0, 0))
            cur.seconds += c.seconds
            cur.bytes += c.bytes
            cur.rounds += c.rounds
        return out


def estimate_time(seconds: float, nbytes: int, rounds: int, network: str) -> float:
    """Measured compute time plus ``bytes / bandwidth`` plus one half-RTT per latency."""
    check_choice(network, "network", sorted(NETWORKS), "estimate_time")
    seconds = check_scalar(seconds, "seconds", "estimate_time", lo=0)
    nbytes = check_int(nbytes, "nbytes", "estimate_time", lo=0)
    rounds = check_int(rounds, "rounds", "estimate_time", lo=0)
    bw, rtt = NETWORKS[network]
    return seconds + 8 * nbytes / bw + rounds * rtt / 2


@dataclass
class _Sh:
    """Shares of a batch: ``v`` uint64 (B, ...), ``bits`` ring, ``pending`` extra scale bits."""

    v: np.ndarray
    bits: int
    pending: int = 0
    nonneg: bool = False


class _Engine:
    def __init__(self, party: Party, net: QuantNet, cfg: ProtocolConfig) -> None:
        self.p, self.net, self.cfg = party, net, cfg
        self.f = net.frac_bits
        self.ell = cfg.ell if cfg.system == "jaguar" else cfg.ell + self.f
        self.ell_in = cfg.ell + self.f
        self.costs: list[LayerCost] = []

    # -- setup: keys --------------------------------------------------------------------------
    def setup(self, sampler: Sampler) -> None:
        cfg, ch = self.cfg, self.p.ch
        if cfg.system == "jaguar":
            self.jp = jaguar_params(cfg.n, cfg.ell, self.f, guard_bits=cfg.guard_bits)
            if self.p.role == 1:
                self.jc = JaguarClient(self.jp, sampler).keygen()
                ch.send_ring(np.concatenate([self.jc.public_key_.b, self.jc.public_key_.a]), 64)
            else:
                ba = ch.recv_ring(64, (2 * cfg.n,))
                self.js = JaguarServer(self.jp, PublicKey(self.jp, ba[: cfg.n], ba[cfg.n :]),
                                       sampler=sampler)
        else:
            self.cp = cheetah_params(cfg.n, self.ell_in, guard_bits=cfg.guard_bits)
            self.qbits = max(p.bit_length() for p in self.cp.primes)
            if self.p.role == 1:
                self.cc = CheetahClient(self.cp, sampler).keygen()
                ch.send_ring(np.stack(self.cc.public_key_), self.qbits)
            else:
                pk = ch.recv_ring(self.qbits, (2, len(self.cp.primes), cfg.n))
                self.cs_pk = (pk[0], pk[1])
                self.sampler = sampler
                self.prepared = self._prepare_offline()

    def _prepare_offline(self) -> dict:
        """The baseline server's weight NTTs for every linear layer, computed before any input
        arrives (they depend on the weights only), as in the linear benchmark."""
        prepared: dict = {}

        def walk(layers: tuple, shape: tuple) -> tuple:
            for layer in layers:
                if isinstance(layer, Conv | Dense):
                    for gi, (_, w, _, lay) in enumerate(self._groups(layer, shape)):
                        prepared[(id(layer), gi)] = CheetahServer(
                            self.cp, self.cs_pk, self.sampler).prepare(w, lay)
                    if isinstance(layer, Dense):
                        shape = (layer.weight.shape[0],)
                    else:
                        k, s, pd = layer.weight.shape[2], layer.stride, layer.pad
                        shape = (layer.weight.shape[0], (shape[1] + 2 * pd - k) // s + 1,
                                 (shape[2] + 2 * pd - k) // s + 1)
                elif isinstance(layer, MaxPool | SumPool):
                    shape = (shape[0], shape[1] // layer.k, shape[2] // layer.k)
                elif isinstance(layer, Flatten):
                    shape = (int(np.prod(shape)),)
                elif isinstance(layer, Residual):
                    out = walk(layer.body, shape)
                    if layer.shortcut:
                        walk(layer.shortcut, shape)
                    shape = out
            return shape

        walk(self.net.layers, tuple(self.net.input_shape))
        return prepared

    # -- linear layers --------------------------------------------------------------------------
    def _groups(self, layer: Conv | Dense, in_shape: tuple) -> list:
        if isinstance(layer, Dense):
            return [(slice(None), layer.weight, layer.bias, plan_fc(self.cfg.n, *layer.weight.shape))]
        g = layer.groups
        c, h, w = in_shape
        ci, co = c // g, layer.weight.shape[0] // g
        out = []
        for i in range(g):
            lay = plan_conv(self.cfg.n, ci, h, w, co, layer.weight.shape[2], layer.stride,
                            layer.pad)
            out.append((slice(i * ci, (i + 1) * ci), layer.weight[i * co : (i + 1) * co],
                        layer.bias[i * co : (i + 1) * co], lay))
        return out

    def linear(self, layer: Conv | Dense, x: _Sh) -> _Sh:
        x = self.prepare_linear_input(x)
        groups = self._groups(layer, x.v.shape[1:])
        if self.cfg.system == "jaguar":
            outs = self._jaguar_linear(x.v, groups)
            return _Sh(outs, self.ell, 0)
        outs = self._cheetah_linear(x.v, groups, layer)
        return _Sh(outs, self.ell, self.f)

    def _jaguar_linear(self, xv: np.ndarray, groups: list) -> np.ndarray:
        ch, jp, n, batch = self.p.ch, self.jp, self.cfg.n, xv.shape[0]
        if self.p.role == 1:
            queries = [self.jc.encrypt_share(centered(xv[b][sl], jp.ell_in), lay)
                       for b in range(batch) for sl, _, _, lay in groups]
            ch.send(np.concatenate([q.c0.ravel() for q in queries]),
                    b"".join(s for q in queries for s in q.seeds))
            sizes = [(int(lay.output_mask().sum()), lay.output_mask().size)
                     for _ in range(batch) for _, _, _, lay in groups]
            total = sum(a + b for a, b in sizes)
            flat = ch.recv_ring(jp.response_bits, (total,))
            outs, pos = [], 0
            for (nu, nc), (_, _, _, lay) in zip(sizes, groups * batch, strict=True):
                resp = LinearResponse(flat[pos : pos + nu],
                                      flat[pos + nu : pos + nu + nc].reshape(
                                          lay.output_mask().shape), jp.response_bits)
                pos += nu + nc
                outs.append(self.jc.decrypt_share(resp, lay))
        else:
            c0_all, seeds = ch.recv()
            outs, parts, pos, spos = [], [], 0, 0
            for b in range(batch):
                for sl, w, bias, lay in groups:
                    shape = (lay.n_in_cts // lay.n_rtiles, lay.n_rtiles, n)
                    cnt = int(np.prod(shape))
                    if c0_all.size < pos + cnt or len(seeds) < spos + 32 * cnt // n:
                        raise ChannelError("The client's query is shorter than the layer needs.")
                    c0 = c0_all[pos : pos + cnt].reshape(shape)
                    sd = tuple(seeds[spos + 32 * i : spos + 32 * i + 32] for i in range(cnt // n))
                    pos, spos = pos + cnt, spos + 32 * (cnt // n)
                    a = mask(np.stack([expand_seed(s, n) for s in sd]).reshape(shape), jp.k)
                    resp, y = self.js.answer(Ciphertext(c0, a, jp.k, sd),
                                             centered(xv[b][sl], jp.ell_in), w, lay)
                    parts += [resp.c0.ravel(), resp.c1.ravel()]
                    outs.append(self._add_bias(y, bias, 0))
            ch.send_ring(np.concatenate(parts), jp.response_bits)
        return self._assemble(outs, batch, len(groups))

    def _cheetah_linear(self, xv: np.ndarray, groups: list, layer: Conv | Dense) -> np.ndarray:
        ch, cp, n, batch = self.p.ch, self.cp, self.cfg.n, xv.shape[0]
        nl = len(cp.primes)
        if self.p.role == 1:
            queries = [self.cc.encrypt_share(xv[b][sl].astype(np.int64), lay)
                       for b in range(batch) for sl, _, _, lay in groups]
            ch.send(np.concatenate([q.c0.ravel() for q in queries]),
                    b"".join(s for q in queries for s in q.seeds))
            sizes = [(int(lay.output_mask().sum()), lay.output_mask().size)
                     for _ in range(batch) for _, _, _, lay in groups]
            flat = ch.recv_ring(cp.response_bits, (sum(a + b for a, b in sizes),))
            outs, pos = [], 0
            for (nu, nc), (_, _, _, lay) in zip(sizes, groups * batch, strict=True):
                resp = LinearResponse(flat[pos : pos + nu], flat[pos + nu : pos + nu + nc].reshape(
                    lay.output_mask().shape), cp.response_bits)
                pos += nu + nc
                outs.append(self.cc.decrypt_share(resp, lay))
        else:
            c0_all, seeds = ch.recv()
            outs, parts, pos, spos = [], [], 0, 0
            for b in range(batch):
                for gi, (sl, _, bias, lay) in enumerate(groups):
                    lead = (lay.n_in_cts // lay.n_rtiles, lay.n_rtiles)
                    cnt = int(np.prod(lead))
                    if c0_all.size < pos + cnt * nl * n or len(seeds) < spos + 32 * cnt:
                        raise ChannelError("The client's query is shorter than the layer needs.")
                    c0 = c0_all[pos : pos + cnt * nl * n].reshape(*lead, nl, n)
                    sd = tuple(seeds[spos + 32 * i : spos + 32 * i + 32] for i in range(cnt))
                    pos, spos = pos + cnt * nl * n, spos + 32 * cnt
                    a = np.stack([_uniform_rns(s, n, cp.primes) for s in sd]).reshape(*lead, nl, n)
                    server = self.prepared[(id(layer), gi)]  # offline (setup) weight NTTs
                    resp, y = server.answer(RNSCiphertext(c0, a, cp.primes, sd),
                                            xv[b][sl].astype(np.int64))
                    parts += [resp.c0.ravel(), resp.c1.ravel()]
                    outs.append(self._add_bias(y, bias, self.f))
            ch.send_ring(np.concatenate(parts), cp.response_bits)
        return self._assemble(outs, batch, len(groups))

    def _add_bias(self, y: np.ndarray, bias: np.ndarray, extra: int) -> np.ndarray:
        b = to_ring(np.asarray(bias, dtype=np.int64), 64) << np.uint64(extra)
        b = b[:, None, None] if y.ndim == 3 else b
        return mask(y + b, self.ell)

    @staticmethod
    def _assemble(outs: list, batch: int, n_groups: int) -> np.ndarray:
        return np.stack([np.concatenate(outs[b * n_groups : (b + 1) * n_groups])
                         for b in range(batch)]).astype(np.uint64)

    # -- precision management ----------------------------------------------------------------
    def _offset(self, bits: int) -> np.uint64:
        return np.uint64(1 << (bits - 2)) if self.p.role == 0 else np.uint64(0)

    def prepare_linear_input(self, x: _Sh) -> _Sh:
        """Jaguar: extend ell -> ell + f. Cheetah: truncate a pending 2^f."""
        if self.cfg.system == "jaguar" and x.bits < self.ell_in:
            if x.nonneg:
                v = extend(self.p, x.v, x.bits, self.ell_in)
            else:
                off = self._offset(x.bits)
                v = mask(extend(self.p, mask(x.v + off, x.bits), x.bits, self.ell_in) - off,
                         self.ell_in)
            return _Sh(v, self.ell_in, 0, x.nonneg)
        if self.cfg.system == "cheetah" and x.pending:
            return self.rescale(x)
        return x

    def rescale(self, x: _Sh) -> _Sh:
        if x.nonneg:
            v = truncate(self.p, x.v, x.bits, x.pending)
        else:
            off = self._offset(x.bits)
            v = mask(truncate(self.p, mask(x.v + off, x.bits), x.bits, x.pending)
                     - (off >> np.uint64(x.pending)), x.bits)
        return _Sh(v, x.bits, 0, x.nonneg)

    def to_ring(self, x: _Sh, bits: int) -> _Sh:
        return _Sh(mask(x.v, bits), bits, x.pending, x.nonneg)

    # -- the network -----------------------------------------------------------------------------
    def run(self, layers: tuple, x: _Sh) -> _Sh:
        for layer in layers:
            t0, s0 = time.perf_counter(), self.p.ch.stats()
            kind = type(layer).__name__.lower()
            if isinstance(layer, Conv | Dense):
                kind = "linear"
                if self.cfg.system == "jaguar" and x.bits < self.ell_in:
                    x = self.prepare_linear_input(x)
                    self._record("extend" if self.cfg.system == "jaguar" else "truncate", t0, s0)
                    t0, s0 = time.perf_counter(), self.p.ch.stats()
                if self.cfg.system == "cheetah" and x.pending:
                    x = self.rescale(x)
                    self._record("truncate", t0, s0)
                    t0, s0 = time.perf_counter(), self.p.ch.stats()
                x = self.linear(layer, x)
            elif isinstance(layer, ReLU):
                x = self.to_ring(x, self.ell)
                x = _Sh(relu(self.p, x.v, x.bits, self.cfg.leaf_bits), x.bits, x.pending, True)
            elif isinstance(layer, MaxPool):
                x = self.to_ring(x, self.ell)
                x = _Sh(max_pool(self.p, x.v, layer.k, x.bits, self.cfg.leaf_bits), x.bits,
                        x.pending, x.nonneg)
            elif isinstance(layer, SumPool):
                x = _Sh(sum_pool(x.v, layer.k, x.bits), x.bits, x.pending, x.nonneg)
            elif isinstance(layer, Flatten):
                x = _Sh(x.v.reshape(x.v.shape[0], -1), x.bits, x.pending, x.nonneg)
            elif isinstance(layer, Residual):
                kind = "residual"
                body = self.run(layer.body, x)
                short = self.run(layer.shortcut, x) if layer.shortcut else x
                t0, s0 = time.perf_counter(), self.p.ch.stats()
                body, short = self.to_ring(body, self.ell), self.to_ring(short, self.ell)
                if short.pending < body.pending:  # baseline: lift the shortcut's scale locally
                    short = _Sh(mask(short.v << np.uint64(body.pending - short.pending),
                                     self.ell), self.ell, body.pending, short.nonneg)
                x = _Sh(mask(body.v + short.v, self.ell), self.ell, body.pending, False)
            else:
                raise InputError(f"Unknown layer {type(layer).__name__} in the private network.")
            self._record(kind, t0, s0)
        return x

    def _record(self, kind: str, t0: float, s0) -> None:  # type: ignore[no-untyped-def]
        d = self.p.ch.stats().minus(s0)
        self.costs.append(LayerCost(kind, time.perf_counter() - t0, d.bytes_total, d.rounds))


def _check_images(images: np.ndarray, where: str) -> np.ndarray:
    """The client's images: a finite, non-empty (B, C, H, W) float array."""
    if images is None:
        raise InputError(f"The 'images' parameter of {where} is required on the client "
                         "(role 1).")
    return as_float_array(images, "images", where, ndim=4)


def run_party(ch: Channel, net: QuantNet | None, images: np.ndarray | None,
              cfg: ProtocolConfig, sampler: Sampler | None = None) -> InferenceResult | None:
    """One party's side. The server passes ``net`` (weights), the client ``images`` (B, C, H, W)
    floats; the client gets an ``InferenceResult``, the server ``None``."""
    where = "run_party"
    check_instance(ch, Channel, "ch", where)
    check_instance(cfg, ProtocolConfig, "cfg", where)
    if sampler is not None:
        check_instance(sampler, Sampler, "sampler", where)
    if ch.role == 0:
        check_instance(net, QuantNet, "net", where)
    else:
        images = _check_images(images, where)
    t_start = time.perf_counter()
    sampler = sampler or Sampler.from_os()
    if ch.role == 0:
        ch.send(architecture(net), cfg.system, cfg.ell, cfg.n, cfg.leaf_bits, int(cfg.dealer))
        batch = ch.recv_one()
        if not isinstance(batch, int) or batch < 1:
            raise ChannelError("The client sent an invalid batch size.")
    else:
        arch, system, ell, n, leaf, dealer = ch.recv()
        if (system, ell, n, leaf, bool(dealer)) != (cfg.system, cfg.ell, cfg.n, cfg.leaf_bits,
                                                     cfg.dealer):
            raise ChannelError(
                f"The server runs {system} (ell={ell}, N={n}, m={leaf}, dealer={bool(dealer)}); "
                f"this client was configured for {cfg.system} (ell={cfg.ell}, N={cfg.n}, "
                f"m={cfg.leaf_bits}, dealer={cfg.dealer}).")
        net = public_net(arch)
        if images.shape[1:] != tuple(net.input_shape):
            raise InputError(f"The 'images' parameter of run_party must have shape (B, "
                             f"{', '.join(map(str, net.input_shape))}) for the server's network. "
                             f"Got {images.shape}.")
        batch = images.shape[0]
        ch.send(batch)
    party = Party(ch, sampler, dealer=cfg.dealer).setup()
    eng = _Engine(party, net, cfg)
    eng.setup(sampler)
    setup_stats, setup_s = ch.stats(), time.perf_counter() - t_start
    t0 = time.perf_counter()
    bits0 = eng.ell_in
    if ch.role == 1:
        xq = np.stack([net.quantise_input(im) for im in images])
        x = _Sh(to_ring(xq, 64) & np.uint64((1 << bits0) - 1), bits0)
    else:
        x = _Sh(np.zeros((batch, *net.input_shape), dtype=np.uint64), bits0)
    out = eng.run(net.layers, x)
    if ch.role == 0:
        ch.send_ring(out.v, out.bits)
        ch.recv_one()  # the client's acknowledgement: the server stays until the end
        return None
    peer = ch.recv_ring(out.bits, out.v.shape)
    logits = centered(out.v + peer, out.bits)
    if out.pending:  # the baseline's last layer is left at scale 2^(2f): rescale locally
        logits = (logits + (1 << (out.pending - 1))) >> out.pending
    ch.send(b"ok")
    total = ch.stats().minus(setup_stats)
    return InferenceResult(logits, eng.costs, time.perf_counter() - t0, total.bytes_total,
                           total.rounds, setup_s, setup_stats.bytes_total)


def serve(net: QuantNet, cfg: ProtocolConfig, host: str = "127.0.0.1", port: int = 0,
          port_out=None, sampler: Sampler | None = None) -> None:  # type: ignore[no-untyped-def]
    """Serve one client over TCP (``port=0``: a free port, reported through ``port_out.put``)."""
    check_instance(net, QuantNet, "net", "serve")
    check_instance(cfg, ProtocolConfig, "cfg", "serve")
    if port_out is not None and not callable(getattr(port_out, "put", None)):
        raise InputError("The 'port_out' parameter of serve must be a queue (with .put) or None. "
                         f"Got {type(port_out).__name__}.")
    srv = listen(host, port)
    try:
        if port_out is not None:
            port_out.put(srv.getsockname()[1])
        with accept(srv, cfg.timeout) as ch:
            run_party(ch, net, None, cfg, sampler)
    finally:
        srv.close()


def query(images: np.ndarray, cfg: ProtocolConfig, host: str = "127.0.0.1", port: int = 0,
          sampler: Sampler | None = None) -> InferenceResult:
    """Connect to a server and classify ``images`` privately."""
    images = _check_images(images, "query")
    check_instance(cfg, ProtocolConfig, "cfg", "query")
    with connect(host, port, cfg.timeout) as ch:
        result = run_party(ch, None, images, cfg, sampler)
    assert result is not None
    return result


def _server_main(net: QuantNet, cfg: ProtocolConfig, port_q, err_q, seed: int | None
                 ) -> None:  # type: ignore[no-untyped-def]
    try:
        serve(net, cfg, port_out=port_q,
              sampler=Sampler.seeded(seed) if seed is not None else None)
    except BaseException as exc:  # reported to the parent
        err_q.put(f"{type(exc).__name__}: {exc}")
        raise


def private_inference(net: QuantNet, images: np.ndarray, cfg: ProtocolConfig,
                      seed: int | None = None) -> InferenceResult:
    """Run the server in a separate process and the client here, over TCP on 127.0.0.1.

    seed: reproducible (insecure) randomness for both parties; ``None`` uses the OS.
    """
    check_instance(net, QuantNet, "net", "private_inference")
    if seed is not None:  # checked here: a bad seed in the server process would hang the client
        seed = check_int(seed, "seed", "private_inference", lo=0, hi=2**63 - 2)
    images = as_float_array(images, "images", "private_inference", ndim=4)
    if images.shape[1:] != tuple(net.input_shape):
        raise InputError(f"The 'images' parameter of private_inference must have shape (B, "
                         f"{', '.join(map(str, net.input_shape))}). Got {images.shape}.")
    if not isinstance(cfg, ProtocolConfig):
        raise InputError(f"The 'cfg' parameter of private_inference must be a ProtocolConfig. "
                         f"Got {type(cfg).__name__}.")
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    port_q, err_q = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=_server_main, args=(net, cfg, port_q, err_q, seed), daemon=True)
    proc.start()
    try:
        try:
            port = port_q.get(timeout=cfg.timeout)
        except Exception as exc:
            raise ChannelError("The server process did not start listening.") from exc
        try:
            return query(images, cfg, port=port,
                         sampler=Sampler.seeded(seed + 1) if seed is not None else None)
        except ChannelError as exc:
            detail = err_q.get(timeout=5) if not err_q.empty() else ""
            raise ChannelError(f"{exc} {('Server: ' + detail) if detail else ''}".strip()) from exc
    finally:
        proc.join(timeout=cfg.timeout)
        if proc.is_alive():  # pragma: no cover - only on a hung server
            proc.terminate()
            proc.join()
