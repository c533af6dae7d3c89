"""Run one conv layer through Jaguar and the Cheetah-style baseline; count bytes and time.

Shared by the experiment and the benchmark, so both report the same figures.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from trustlab.methods.jaguar.cheetah import CheetahClient, CheetahServer
from trustlab.methods.jaguar.layout import ConvLayout, conv2d_int, plan_conv
from trustlab.methods.jaguar.linear import JaguarClient, JaguarServer, query_nbytes
from trustlab.methods.jaguar.params import JaguarParams, PrimeParams
from trustlab.methods.jaguar.ring import centered

__all__ = [
    "MOBILENETV2_CONVS",
    "RESNET18_CONVS",
    "ConvShape",
    "LayerRun",
    "communication",
    "run_layer",
]


@dataclass(frozen=True)
class ConvShape:
    name: str
    c: int
    h: int
    c_out: int
    kernel: int
    stride: int = 1
    pad: int = 0

    def layout(self, n: int, c_out: int | None = None) -> ConvLayout:
        return plan_conv(n, self.c, self.h, self.h, c_out or self.c_out, self.kernel,
                         self.stride, self.pad)


#: The distinct conv shapes of ResNet-18 on ImageNet (224x224 input).
RESNET18_CONVS = (
    ConvShape("conv1_7x7_s2", 3, 224, 64, 7, 2, 3),
    ConvShape("layer1_3x3", 64, 56, 64, 3, 1, 1),
    ConvShape("layer2_3x3_s2", 64, 56, 128, 3, 2, 1),
    ConvShape("layer2_3x3", 128, 28, 128, 3, 1, 1),
    ConvShape("layer2_down_1x1_s2", 64, 56, 128, 1, 2, 0),
    ConvShape("layer3_3x3_s2", 128, 28, 256, 3, 2, 1),
    ConvShape("layer3_3x3", 256, 14, 256, 3, 1, 1),
    ConvShape("layer3_down_1x1_s2", 128, 28, 256, 1, 2, 0),
    ConvShape("layer4_3x3_s2", 256, 14, 512, 3, 2, 1),
    ConvShape("layer4_3x3", 512, 7, 512, 3, 1, 1),
    ConvShape("layer4_down_1x1_s2", 256, 14, 512, 1, 2, 0),
)
#: MobileNetV2's full and pointwise convs (depthwise convs are not covered by this part).
MOBILENETV2_CONVS = (
    ConvShape("stem_3x3_s2", 3, 224, 32, 3, 2, 1),
    ConvShape("pw_expand_112", 16, 112, 96, 1),
    ConvShape("pw_project_56", 144, 56, 24, 1),
    ConvShape("pw_expand_28", 32, 28, 192, 1),
    ConvShape("pw_expand_14", 64, 14, 384, 1),
    ConvShape("pw_project_7", 960, 7, 320, 1),
    ConvShape("head_1x1", 320, 7, 1280, 1),
)


def communication(shape: ConvShape, jp: JaguarParams, cp: PrimeParams) -> dict[str, int]:
    """Bytes of query and response for one layer (deterministic: depends on shapes only)."""
    lay = shape.layout(jp.n)
    used = lay.c_out * lay.h_out * lay.w_out
    q_bits_c = sum(p.bit_length() for p in cp.primes)
    return {
        "jaguar_query": query_nbytes(lay.n_in_cts, jp.n, jp.k),
        "jaguar_response": math.ceil((used + lay.n_out_cts * jp.n) * jp.response_bits / 8),
        "cheetah_query": query_nbytes(lay.n_in_cts, cp.n, q_bits_c),
        "cheetah_response": math.ceil((used + lay.n_out_cts * cp.n) * cp.response_bits / 8),
    }


@dataclass(frozen=True)
class LayerRun:
    """One layer through both systems (on ``c_out`` output channels)."""

    name: str
    c_out: int
    exact_cheetah: bool  # Cheetah's y_c + y_s == W x mod 2^ell_in
    truncation_errors: np.ndarray  # Jaguar's y - round(M / 2^s), signed
    jaguar_eval_s: float
    cheetah_eval_s: float
    cheetah_prepare_s: float
    jaguar_decrypt_s: float
    max_noise_ulp: float  # largest |product noise| before masking, in output ulps


def run_layer(
    shape: ConvShape, jclient: JaguarClient, cclient: CheetahClient, rng: np.random.Generator,
    weight_bits: int, c_out: int | None = None, time_it: bool = True,
) -> LayerRun:
    jp, cp = jclient.params, cclient.params
    c_out = min(c_out or shape.c_out, shape.c_out)
    lay = shape.layout(jp.n, c_out)
    x_bits = jp.ell_in - weight_bits - math.ceil(math.log2(shape.c * shape.kernel**2)) - 2
    x = rng.integers(-(2**x_bits), 2**x_bits, (shape.c, shape.h, shape.h))
    weight = rng.integers(-(2**weight_bits), 2**weight_bits, (c_out, shape.c, shape.kernel,
                                                               shape.kernel))
    x_s = rng.integers(0, 2**jp.ell_in, x.shape)
    x_c = np.mod(x - x_s, 2**jp.ell_in)
    exact = conv2d_int(x, weight, shape.stride, shape.pad)

    jserver = JaguarServer(jp, jclient.public_key_, sampler=jclient.sampler)
    query = jclient.encrypt_share(x_c, lay)
    t0 = time.perf_counter()
    product = jserver.evaluate(query, x_s, weight, lay)
    t_j = time.perf_counter() - t0
    noise = centered(_phase(jclient, product), jp.k)  # phase - Delta*M = noise
    m_ring = np.zeros(lay.output_mask().shape, dtype=object)
    tile, coeff = lay.output_positions()
    m_ring[:, tile, coeff] = exact % (1 << jp.ell_in)
    used = lay.output_mask()
    delta = 1 << jp.log_delta
    signal = np.array([(int(v) * delta) % (1 << 64) for v in m_ring[used]], dtype=np.uint64)
    noise_used = centered(noise[used].view(np.uint64) - signal, jp.k).astype(float)
    max_noise_ulp = float(np.abs(noise_used).max()) / 2.0 ** (jp.k - jp.ell_out)
    response, y_s = jserver.respond(product, lay)
    t0 = time.perf_counter()
    y_c = jclient.decrypt_share(response, lay)
    t_dec = time.perf_counter() - t0
    y = (y_c.astype(object) + y_s.astype(object)) % (1 << jp.ell_out)
    rounded = (exact + (1 << (jp.shift - 1))) // (1 << jp.shift)
    err = (y - rounded) % (1 << jp.ell_out)
    err = np.where(err >= 1 << (jp.ell_out - 1), err - (1 << jp.ell_out), err).astype(np.int64)

    cserver = CheetahServer(cp, cclient.public_key_, sampler=cclient.sampler)
    t0 = time.perf_counter()
    cserver.prepare(weight, lay)
    t_prep = time.perf_counter() - t0
    cquery = cclient.encrypt_share(x_c, lay)
    t0 = time.perf_counter()
    cproduct = cserver.evaluate(cquery, x_s)
    t_c = time.perf_counter() - t0
    cresp, cy_s = cserver.respond(cproduct)
    cy = (cclient.decrypt_share(cresp, lay).astype(object) + cy_s.astype(object)) % (1 << cp.ell)
    exact_c = bool(np.array_equal(cy, exact % (1 << cp.ell)))
    return LayerRun(shape.name, c_out, exact_c, err.ravel(), t_j, t_c, t_prep, t_dec,
                    max_noise_ulp)


def _phase(client: JaguarClient, product):
    from trustlab.methods.jaguar.rlwe import phase

    return phase(client.secret_key_, product)
