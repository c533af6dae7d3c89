"""Jaguar part 2: OT, comparison, ReLU, pooling, and private inference between two processes."""

from __future__ import annotations

import socket
import struct
import threading

import numpy as np
import pytest

from trustlab.methods.jaguar.channel import (
    Channel,
    ChannelError,
    channel_pair,
    pack_ring,
    unpack_ring,
)
from trustlab.methods.jaguar.inference import ProtocolConfig, estimate_time, private_inference
from trustlab.methods.jaguar.millionaire import millionaire
from trustlab.methods.jaguar.network import (
    AvgPool,
    Conv,
    Dense,
    Flatten,
    ReLU,
    Residual,
    digits_data,
    error_bound,
    fixed_point_forward,
    float_forward,
    quantise,
    train_digits_cnn,
)
from trustlab.methods.jaguar.ot import KAPPA, OTSuite, base_ot_receive, base_ot_send
from trustlab.methods.jaguar.party import Party, share
from trustlab.methods.jaguar.pooling import avg_pool, max_pool, sum_pool
from trustlab.methods.jaguar.relu import drelu, extend, relu, truncate
from trustlab.methods.jaguar.ring import centered
from trustlab.methods.jaguar.sampling import Sampler


def two_party(f0, f1, timeout: float = 60.0):
    """Run f0(ch) as the server and f1(ch) as the client over a socket pair (two threads)."""
    c0, c1 = channel_pair(timeout)
    out: dict = {}

    def work(i, f, c):
        try:
            out[i] = f(c)
        except BaseException as exc:  # surfaced below
            out[f"e{i}"] = exc

    t = threading.Thread(target=work, args=(1, f1, c1))
    t.start()
    work(0, f0, c0)
    t.join()
    for k in ("e0", "e1"):
        if k in out:
            raise out[k]
    c0.close()
    c1.close()
    return out[0], out[1]


def spmd(fn, dealer: bool = False):
    """Both parties run fn(party) with a set-up Party (real base OT + IKNP unless dealer)."""
    def side(seed):
        return lambda ch: fn(Party(ch, Sampler.seeded(seed), dealer=dealer).setup())
    return two_party(side(100), side(101))


# -- channel --------------------------------------------------------------------------------
def test_ring_packing_roundtrip():
    rng = np.random.default_rng(0)
    for bits in (1, 2, 7, 8, 25, 37, 50, 64):
        v = rng.integers(0, 2**bits, 1001, dtype=np.uint64) if bits < 64 else rng.integers(
            0, 2**63, 1001, dtype=np.uint64)
        packed = pack_ring(v, bits)
        assert packed.size == -(-1001 * bits // 8)
        assert np.array_equal(unpack_ring(packed, bits, 1001), v)


def test_channel_counts_bytes_and_latency_depth():
    def server(ch):
        ch.send(np.arange(10, dtype=np.uint64), b"abc", 7, "x")
        got = ch.recv()
        return got, ch.stats()

    def client(ch):
        items = ch.recv()
        ch.send(items[2] + 1)
        return items, ch.stats()

    (got, s0), (items, s1) = two_party(server, client)
    assert np.array_equal(items[0], np.arange(10)) and items[1:] == [b"abc", 7, "x"]
    assert got == [8]
    assert s0.bytes_sent == s1.bytes_received and s1.bytes_sent == s0.bytes_received
    assert s0.rounds == 2 and s1.rounds == 1  # ping-pong: two one-way latencies


def test_channel_rejects_malformed_dropped_and_wrong_version():
    a, b = socket.socketpair()
    box: dict = {}
    t = threading.Thread(target=lambda: box.setdefault("c", Channel(b, 1, timeout=5)))
    t.start()
    ch = Channel(a, 0, timeout=5)
    t.join()
    # a frame whose payload has an unknown tag
    box["c"]._send_raw(struct.pack("<II", 5, 0) + struct.pack("<I", 1) + b"Z")
    with pytest.raises(ChannelError, match="Malformed"):
        ch.recv()
    box["c"].close()
    with pytest.raises(ChannelError, match="closed"):
        ch.recv()
    ch.close()

    a, b = socket.socketpair()
    b.sendall(struct.pack("<4sHB", b"TLJG", 99, 1))
    with pytest.raises(ChannelError, match="version"):
        Channel(a, 0, timeout=5)
    a.close()
    b.close()


# -- oblivious transfer ---------------------------------------------------------------------------
def test_base_ot_delivers_chosen_key_only():
    choices = np.random.default_rng(1).integers(0, 2, 64)
    (k0, k1), kc = two_party(lambda ch: base_ot_send(ch, 64, Sampler.seeded(2)),
                             lambda ch: base_ot_receive(ch, choices, Sampler.seeded(3)))
    for i, c in enumerate(choices):
        assert kc[i] == (k1[i] if c else k0[i])
        assert kc[i] != (k0[i] if c else k1[i])
    # the receiver's key is unrelated to the unchosen one: their XOR has balanced bits
    diff = np.frombuffer(b"".join(bytes(x ^ y for x, y in zip(kc[i], (k0[i] if c else k1[i]),
                                                              strict=True))
                                  for i, c in enumerate(choices)), dtype=np.uint8)
    frac = np.unpackbits(diff).mean()
    assert abs(frac - 0.5) < 4 * 0.5 / np.sqrt(diff.size * 8)


def test_iknp_correlation_and_privacy():
    m = 5000
    r = np.random.default_rng(4).integers(0, 2, m).astype(np.uint8)

    def sender(ch):
        suite = OTSuite(ch, Sampler.seeded(5)).setup()
        u = ch.recv_one()
        q, _ = suite.sender_.extend(u, m)
        return q, suite.sender_.s_block_, u

    def receiver(ch):
        suite = OTSuite(ch, Sampler.seeded(6)).setup()
        u, t, _ = suite.receiver_.extend(r)
        ch.send(u)
        return t

    (q, s, u), t = two_party(sender, receiver)
    expect = t ^ (r[:, None].astype(np.uint64) * s[None, :])
    assert np.array_equal(q, expect)  # q_j = t_j ^ r_j s
    assert u.shape == (KAPPA, m // 8)
    # what the sender sees (u) carries no bias towards the choice bits
    bits = np.unpackbits(u, axis=1, bitorder="little")[:, :m]
    for val in (0, 1):
        frac = bits[:, r == val].mean()
        assert abs(frac - 0.5) < 4 * 0.5 / np.sqrt(bits[:, r == val].size)


def test_ot_variants_deliver_chosen_messages_and_hide_the_other():
    rng = np.random.default_rng(7)
    n = 3000
    c = rng.integers(0, 2, n).astype(np.uint8)
    m0 = rng.integers(0, 2**40, n, dtype=np.uint64)
    m1 = rng.integers(0, 2**40, n, dtype=np.uint64)
    delta = rng.integers(0, 2**25, n, dtype=np.uint64)
    msgs = rng.integers(0, 4, (n, 16), dtype=np.uint64)
    cn = rng.integers(0, 16, n)

    def sender(ch):
        suite = OTSuite(ch, Sampler.seeded(8)).setup()
        suite.ot_send(m0, m1, 40)
        x0 = suite.cot_send(delta, 25)
        suite.ot_n_send(msgs, 2)
        k0, k1 = suite.rot_send(n)
        return x0, k0, k1

    def receiver(ch):
        suite = OTSuite(ch, Sampler.seeded(9)).setup()
        return (suite.ot_receive(c, 40), suite.cot_receive(c, 25), suite.ot_n_receive(cn, 4, 2),
                suite.rot_receive(c))

    (x0, k0, k1), (got, cot, got_n, kr) = two_party(sender, receiver)
    assert np.array_equal(got, np.where(c == 1, m1, m0))
    assert np.array_equal(cot, (x0 + c * delta) % 2**25)
    assert np.array_equal(got_n, msgs[np.arange(n), cn])
    assert np.array_equal(kr, np.where(c[:, None] == 1, k1, k0))
    other = np.where(c[:, None] == 1, k0, k1)  # the unchosen random-OT pad
    bits = np.unpackbits((other ^ kr).view(np.uint8))
    assert abs(bits.mean() - 0.5) < 4 * 0.5 / np.sqrt(bits.size)


# -- comparison, ReLU -------------------------------------------------------------------------
@pytest.mark.parametrize(("nbits", "m"), [(24, 4), (13, 3), (36, 4)])
def test_millionaire_equals_plaintext(nbits, m):
    rng = np.random.default_rng(nbits)
    n = 600
    a = rng.integers(0, 2**nbits, n, dtype=np.uint64)
    b = rng.integers(0, 2**nbits, n, dtype=np.uint64)
    top = np.uint64(2**nbits - 1)
    a[:6] = [0, 0, top, top, 5, 17]
    b[:6] = [0, top, 0, top, 5, 16]
    b[6:40] = a[6:40]  # equal values
    b[40:80] = a[40:80] + np.uint64(1) & top
    r0, r1 = spmd(lambda p: millionaire(p, a if p.role == 0 else b, nbits, m))
    assert np.array_equal(r0 ^ r1, (a < b).astype(np.uint8))


def _edge_values(ell, rng, n):
    half = 2 ** (ell - 1)
    x = rng.integers(-half, half, n)
    x[:7] = [0, 1, -1, 2, -2, half - 1, -half]
    return x


@pytest.mark.parametrize("ell", [25, 37])
def test_drelu_and_relu_equal_plaintext_on_random_shares(ell):
    rng = np.random.default_rng(ell)
    x = _edge_values(ell, rng, 800)
    x0, x1 = share(x, ell, rng)
    x0[7] = 0  # a share that is exactly 0 ...
    x1[7] = x[7] % 2**ell
    x0[8], x1[8] = 2**ell - 1, (x[8] + 1) % 2**ell  # ... and one at the top of the ring

    def fn(p):
        mine = x0 if p.role == 0 else x1
        return drelu(p, mine, ell), relu(p, mine, ell)

    (d0, y0), (d1, y1) = spmd(fn)
    assert np.array_equal(d0 ^ d1, (x >= 0).astype(np.uint8))
    assert np.array_equal(centered(y0 + y1, ell), np.maximum(x, 0))


def test_relu_with_trusted_dealer_mode_matches():
    rng = np.random.default_rng(3)
    x = _edge_values(25, rng, 300)
    x0, x1 = share(x, 25, rng)
    y0, y1 = spmd(lambda p: relu(p, x0 if p.role == 0 else x1, 25), dealer=True)
    assert np.array_equal(centered(y0 + y1, 25), np.maximum(x, 0))


def test_extend_and_truncate_with_known_msb():
    rng = np.random.default_rng(11)
    ell, s = 25, 12
    y = rng.integers(0, 2 ** (ell - 1), 700)
    y[:3] = [0, 1, 2 ** (ell - 1) - 1]
    y0, y1 = share(y, ell, rng)

    def fn(p):
        mine = y0 if p.role == 0 else y1
        return extend(p, mine, ell, ell + s), truncate(p, mine, ell, s)

    (e0, t0), (e1, t1) = spmd(fn)
    assert np.array_equal((e0 + e1) % 2 ** (ell + s), y)
    err = centered(t0 + t1, ell) - y // 2**s
    assert set(np.unique(err).tolist()) <= {0, -1}  # floor(y / 2^s) - {0, 1}


def test_pooling_equals_plaintext():
    rng = np.random.default_rng(12)
    ell = 25
    x = rng.integers(0, 2**20, (2, 3, 6, 6))
    x[0, 0, :2, :2] = 7  # ties
    x0, x1 = share(x, ell, rng)

    def fn(p):
        mine = x0 if p.role == 0 else x1
        return max_pool(p, mine, 2, ell), max_pool(p, mine, 3, ell), avg_pool(p, mine, 2, ell)

    (a0, b0, v0), (a1, b1, v1) = spmd(fn)
    win2 = x.reshape(2, 3, 3, 2, 3, 2)
    win3 = x.reshape(2, 3, 2, 3, 2, 3)
    assert np.array_equal((a0 + a1) % 2**ell, win2.max(axis=(3, 5)))
    assert np.array_equal((b0 + b1) % 2**ell, win3.max(axis=(3, 5)))
    assert np.array_equal((sum_pool(x0, 2, ell) + sum_pool(x1, 2, ell)) % 2**ell,
                          win2.sum(axis=(3, 5)))
    err = centered(v0 + v1, ell) - win2.sum(axis=(3, 5)) // 4
    assert set(np.unique(err).tolist()) <= {0, -1}


# -- networks -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def digits_net():
    layers = train_digits_cnn(seed=0, epochs=3)
    _, _, x_test, y_test = digits_data(0)
    return layers, quantise(layers, 12, (1, 8, 8)), x_test, y_test


@pytest.mark.parametrize("system", ["jaguar", "cheetah"])
def test_private_digits_inference_between_two_processes(digits_net, system):
    _, net, x_test, _ = digits_net
    images = x_test[:3]
    res = private_inference(net, images, ProtocolConfig(system=system), seed=21)
    ref = np.stack([fixed_point_forward(net, net.quantise_input(x)) for x in images])
    bound = error_bound(net, 1.0 if system == "jaguar" else 2.0)
    assert np.abs(res.logits - ref).max() <= bound
    assert np.array_equal(res.logits.argmax(1), ref.argmax(1))
    kinds = res.by_kind()
    assert {"linear", "relu", "maxpool"} <= set(kinds)
    assert ("extend" if system == "jaguar" else "truncate") in kinds
    assert res.bytes > 0 and res.rounds > 0
    assert estimate_time(res.seconds, res.bytes, res.rounds, "wan") > estimate_time(
        res.seconds, res.bytes, res.rounds, "lan")


def _check_private_equals_plaintext(net, images, seed):  # type: ignore[no-untyped-def]
    res = private_inference(net, images, ProtocolConfig(), seed=seed)
    ref = np.stack([fixed_point_forward(net, net.quantise_input(x)) for x in images])
    err = np.abs(res.logits - ref)
    assert err.max() <= error_bound(net, 1.0)
    # the prediction may only differ where the plaintext top-2 margin is within the error
    margin = np.sort(ref, axis=1)[:, -1] - np.sort(ref, axis=1)[:, -2]
    agree = res.logits.argmax(1) == ref.argmax(1)
    assert np.all(agree | (margin <= 2 * err.max()))
    return agree


def _stratified(labels: np.ndarray, per_class: int) -> np.ndarray:
    """The first ``per_class`` test images of every class (in the seeded split's order)."""
    return np.concatenate([np.flatnonzero(labels == c)[:per_class] for c in np.unique(labels)])


@pytest.mark.acceptance
def test_private_digits_inference_stratified_test_images(digits_net):
    """Acceptance (the jaguar 2/2 claim, issue #18's item): Jaguar's private inference between
    two processes (base OT + IKNP, compiled kernels) equals the plaintext fixed-point network
    on 6 test images of every class (60 of 360), each within the propagated error bound. All
    360 images are the ``slow`` test below; the subset keeps CI within 4 minutes on 2 cores."""
    _, net, x_test, y_test = digits_net
    idx = _stratified(y_test, 6)
    assert len(idx) == 60 and set(y_test[idx]) == set(range(10))
    agree = _check_private_equals_plaintext(net, x_test[idx], seed=22)
    assert agree.mean() >= 0.98


@pytest.mark.slow
def test_private_digits_inference_every_test_image(digits_net):
    _, net, x_test, _ = digits_net
    _check_private_equals_plaintext(net, x_test, seed=22)


def test_fixed_point_net_tracks_float_net(digits_net):
    layers, net, x_test, y_test = digits_net
    pf = np.array([float_forward(layers, x).argmax() for x in x_test[:100]])
    pq = np.array([fixed_point_forward(net, net.quantise_input(x)).argmax() for x in x_test[:100]])
    assert np.mean(pf == pq) >= 0.98
    assert np.mean(pq == y_test[:100]) > 0.8


def test_residual_and_depthwise_network_in_one_session():
    rng = np.random.default_rng(5)
    c = 4
    layers = (
        Conv(rng.normal(0, 0.4, (c, 2, 3, 3)), rng.normal(0, 0.1, c), 1, 1), ReLU(),
        Residual((Conv(rng.normal(0, 0.4, (c, 1, 3, 3)), rng.normal(0, 0.1, c), 1, 1, groups=c),
                  ReLU(), Conv(rng.normal(0, 0.3, (c, c, 1, 1)), np.zeros(c)))),
        ReLU(), AvgPool(2), Flatten(), Dense(rng.normal(0, 0.3, (3, c * 4)), np.zeros(3)),
    )
    net = quantise(layers, 10, (2, 4, 4), classes=3)
    images = rng.uniform(-1, 1, (2, 2, 4, 4))
    ref = np.stack([fixed_point_forward(net, net.quantise_input(x)) for x in images])
    for system in ("jaguar", "cheetah"):
        cfg = ProtocolConfig(system=system, ell=22, dealer=True)
        from trustlab.methods.jaguar.inference import run_party

        _, res = two_party(lambda ch, cfg=cfg: run_party(ch, net, None, cfg, Sampler.seeded(1)),
                           lambda ch, cfg=cfg: run_party(ch, None, images, cfg, Sampler.seeded(2)),
                           timeout=120)
        assert np.abs(res.logits - ref).max() <= error_bound(net, 1.0 if system == "jaguar"
                                                             else 2.0)


def test_torch_converter_folds_batchnorm():
    torch = pytest.importorskip("torch", reason="the converter is tested when torch is installed")
    from trustlab.methods.jaguar.network import from_torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(4, 4, 3, padding=1, groups=4), torch.nn.ReLU(),
        torch.nn.AvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(16, 5))
    model[1].running_mean.uniform_(-0.5, 0.5)
    model[1].running_var.uniform_(0.5, 2.0)
    model.eval()
    x = torch.rand(1, 1, 8, 8)
    layers = from_torch(model)
    ours = float_forward(layers, x[0].numpy().astype(np.float64))
    with torch.no_grad():
        theirs = model(x)[0].numpy()
    assert np.allclose(ours, theirs, atol=1e-4)
