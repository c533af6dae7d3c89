"""Jaguar (2/2) benchmark: the 2PC nonlinear layers and end-to-end private inference.

    python benchmarks/jaguar_e2e.py [--quick]

Prints, as Cheetah / Jaguar ratios measured in this process (both parties over loopback TCP,
base OT + IKNP, no dealer): (1) ReLU on n elements at Jaguar's target ring (ell) vs the
baseline's doubled ring (ell + f) followed by its truncation protocol, (2) the digits CNN end
to end, (3) a ResNet-style basic block (residual, 16 channels, 16x16; random weights), with
bytes, one-way latencies and estimated LAN/WAN time (Cheetah's artefact network models).
"""

from __future__ import annotations

import argparse
import threading
import time

import numpy as np

from trustlab.methods.jaguar.channel import channel_pair
from trustlab.methods.jaguar.inference import (
    NETWORKS,
    ProtocolConfig,
    estimate_time,
    private_inference,
)
from trustlab.methods.jaguar.network import (
    AvgPool,
    Conv,
    Dense,
    Flatten,
    ReLU,
    Residual,
    digits_data,
    quantise,
    train_digits_cnn,
)
from trustlab.methods.jaguar.party import Party, share
from trustlab.methods.jaguar.relu import extend, relu, truncate
from trustlab.methods.jaguar.sampling import Sampler


def relu_cost(n: int, ell: int, f: int, system: str) -> tuple[float, int, int]:
    rng = np.random.default_rng(0)
    x = rng.integers(-(2 ** (ell - 3)), 2 ** (ell - 3), n)
    bits = ell if system == "jaguar" else ell + f
    shares = share(x << (0 if system == "jaguar" else f), bits, rng)
    c0, c1 = channel_pair(300)
    out: dict = {}

    def side(ch, i):
        p = Party(ch, Sampler.seeded(i)).setup()
        s0, t0 = ch.stats(), time.perf_counter()
        y = relu(p, shares[i], bits)
        y = extend(p, y, ell, ell + f) if system == "jaguar" else truncate(p, y, bits, f)
        d = ch.stats().minus(s0)
        out[i] = (time.perf_counter() - t0, d.bytes_total, d.rounds)

    t = threading.Thread(target=side, args=(c1, 1))
    t.start()
    side(c0, 0)
    t.join()
    return out[0][0], out[0][1], max(out[0][2], out[1][2])


def show(name: str, jag, che) -> None:  # type: ignore[no-untyped-def]
    tj, bj, rj = jag
    tc, bc, rc = che
    line = (f"{name:<28} bytes {bc / 2**20:8.2f} / {bj / 2**20:8.2f} MiB = {bc / bj:5.2f}x   "
            f"rounds {rc}/{rj}   compute {tc:6.2f}/{tj:6.2f} s = {tc / tj:5.2f}x")
    for net in NETWORKS:
        line += f"   {net.upper()} {estimate_time(tc, bc, rc, net) / estimate_time(tj, bj, rj, net):5.2f}x"
    print(line)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    ell, f = 25, 12
    n = 20000 if args.quick else 100000
    print(f"Cheetah / Jaguar (ratio > 1: Jaguar cheaper). ell={ell}, f={f}; baseline ring {ell + f}")
    show(f"ReLU+rescale x{n}", relu_cost(n, ell, f, "jaguar"), relu_cost(n, ell, f, "cheetah"))

    layers = train_digits_cnn(seed=0, epochs=3 if args.quick else 8)
    net = quantise(layers, f, (1, 8, 8))
    images = digits_data(0)[2][: 2 if args.quick else 16]
    res = {s: private_inference(net, images, ProtocolConfig(system=s, ell=ell), seed=1)
           for s in ("jaguar", "cheetah")}
    show(f"digits CNN x{len(images)} (online)", *((r.seconds, r.bytes, r.rounds)
                                                  for r in (res["jaguar"], res["cheetah"])))
    for kind in ("linear", "relu", "maxpool"):
        kj, kc = res["jaguar"].by_kind()[kind], res["cheetah"].by_kind()[kind]
        show(f"  digits {kind}", (kj.seconds, kj.bytes, kj.rounds), (kc.seconds, kc.bytes, kc.rounds))

    rng = np.random.default_rng(2)
    c, h = 16, 16
    block = (Conv(rng.normal(0, 0.3, (c, 3, 3, 3)), np.zeros(c), 1, 1), ReLU(),
             Residual((Conv(rng.normal(0, 0.1, (c, c, 3, 3)), np.zeros(c), 1, 1), ReLU(),
                       Conv(rng.normal(0, 0.1, (c, c, 3, 3)), np.zeros(c), 1, 1))), ReLU(),
             AvgPool(16), Flatten(), Dense(rng.normal(0, 0.3, (10, c)), np.zeros(10)))
    bnet = quantise(block, f, (3, h, h))
    imgs = rng.uniform(0, 1, (1, 3, h, h))
    rb = {s: private_inference(bnet, imgs, ProtocolConfig(system=s, ell=ell), seed=3)
          for s in ("jaguar", "cheetah")}
    show(f"ResNet basic block {c}x{h}x{h}", *((r.seconds, r.bytes, r.rounds)
                                             for r in (rb["jaguar"], rb["cheetah"])))


if __name__ == "__main__":
    main()
