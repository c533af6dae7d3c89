"""`trustlab run jaguar`: homomorphic conv layers on a power-of-two ring vs a Cheetah baseline.

Headline figures are deterministic for a seed: exactness against plaintext integer
convolution, the truncation error distribution, the noise margin, and bytes sent (which depend
on shapes only). Wall-clock speed ratios are reported as non-headline metrics.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from trustlab.core import ExperimentConfig, Report, RunContext, register
from trustlab.methods.jaguar.cheetah import CheetahClient, cheetah_params
from trustlab.methods.jaguar.comparison import (
    MOBILENETV2_CONVS,
    RESNET18_CONVS,
    ConvShape,
    communication,
    run_layer,
)
from trustlab.methods.jaguar.linear import JaguarClient, linear_noise_budget
from trustlab.methods.jaguar.params import jaguar_params
from trustlab.methods.jaguar.sampling import Sampler

_SMALL_LAYERS = (
    ConvShape("c16_h28_3x3", 16, 28, 16, 3, 1, 1),
    ConvShape("c16_h28_3x3_s2", 16, 28, 16, 3, 2, 1),
    ConvShape("c32_h14_1x1", 32, 14, 16, 1),
)


class JaguarConfig(ExperimentConfig):
    ring_degree: Literal[4096, 8192] = Field(4096, description="RLWE ring degree N.")
    ell_out: int = Field(25, ge=8, le=40, description="Bits of the 2PC ring after truncation (ell).")
    shift: int = Field(12, ge=1, le=20, description="Fractional bits s removed on the ciphertext side.")
    guard_bits: int = Field(10, ge=4, le=20, description="Answer bits kept below the output ulp.")
    weight_bits: int = Field(11, ge=1, le=16, description="Weights are integers in (-2^b, 2^b).")
    layers: Literal["small", "resnet18"] = Field(
        "resnet18", description="Layers run end to end: small synthetic ones or ResNet-18 shapes."
    )
    max_out_channels: int = Field(
        16, gt=0, le=512, description="Output channels run per layer (time scales linearly)."
    )
    max_layers: int = Field(4, gt=0, le=11, description="How many of the chosen layers to run.")

    QUICK: ClassVar[dict] = {"layers": "small", "max_out_channels": 8, "max_layers": 2}


@register("jaguar", config=JaguarConfig)
def run(config: JaguarConfig, ctx: RunContext) -> Report:
    report = ctx.report
    jp = jaguar_params(config.ring_degree, config.ell_out, config.shift,
                       guard_bits=config.guard_bits)
    cp = cheetah_params(config.ring_degree, jp.ell_in, guard_bits=config.guard_bits)
    sampler = Sampler.seeded(ctx.child_rng("keys"))
    with ctx.stage("keygen"):
        jclient = JaguarClient(jp, sampler).keygen()
        cclient = CheetahClient(cp, sampler).keygen()

    shapes = (_SMALL_LAYERS if config.layers == "small" else RESNET18_CONVS[1:])
    shapes = shapes[: config.max_layers]
    rng = ctx.child_rng("layers")
    runs = []
    with ctx.stage("layers"):
        for shape in ctx.progress(shapes, description="conv layers"):
            runs.append(run_layer(shape, jclient, cclient, rng, config.weight_bits,
                                  config.max_out_channels))

    errors = np.concatenate([r.truncation_errors for r in runs])
    budget = linear_noise_budget(
        jp, max(math.sqrt(s.c * s.kernel**2) for s in shapes) * 2.0**config.weight_bits)
    max_noise = max(r.max_noise_ulp for r in runs)
    report.metric("cheetah_exact_fraction", float(np.mean([r.exact_cheetah for r in runs])),
                  headline=True, description="layers where the baseline equals W x mod 2^ell_in")
    report.metric("truncation_within_one_ulp", bool(np.all(np.abs(errors) <= 1)), headline=True,
                  description="every Jaguar output within +-1 of round(Wx / 2^s)")
    report.metric("truncation_exact_fraction", float(np.mean(errors == 0)), headline=True,
                  description="outputs equal to round(Wx / 2^s) exactly")
    report.metric("truncation_mean_error_ulp", float(errors.mean()),
                  description="mean of y - round(Wx / 2^s) (bias)")
    report.metric("noise_margin_bits", float(math.log2(0.5 / max(max_noise, 1e-300))),
                  headline=True,
                  description="log2(half an output ulp / largest measured product noise)")
    report.metric("predicted_log2_failure", budget.log2_fail, headline=True,
                  description="log2 P(noise >= 1/2 ulp) per coefficient (Gaussian heuristic)")
    report.metric("jaguar_security_bits", jp.security, description="HE standard level, q = 2^K")
    report.metric("cheetah_log2_q", cp.log_q, description="baseline modulus bits")

    comm_rows = []
    for family, convs in (("resnet18", RESNET18_CONVS), ("mobilenetv2", MOBILENETV2_CONVS)):
        for shape in convs:
            c = communication(shape, jp, cp)
            comm_rows.append({"network": family, "layer": shape.name, **c,
                              "ratio": (c["cheetah_query"] + c["cheetah_response"])
                              / (c["jaguar_query"] + c["jaguar_response"])})
    for family in ("resnet18", "mobilenetv2"):
        rows = [r for r in comm_rows if r["network"] == family]
        total_j = sum(r["jaguar_query"] + r["jaguar_response"] for r in rows)
        total_c = sum(r["cheetah_query"] + r["cheetah_response"] for r in rows)
        report.metric(f"{family}_linear_comm_ratio", total_c / total_j, headline=True,
                      description=f"Cheetah / Jaguar bytes over the {family} convs listed")
        report.metric(f"{family}_linear_comm_mib_jaguar", total_j / 2**20, unit=" MiB",
                      description="Jaguar query + response bytes over those convs")
    report.table("communication", comm_rows,
                 caption="Bytes per conv layer (query: c0 + seed; response: used c0 + c1).")

    speed = [r.cheetah_eval_s / r.jaguar_eval_s for r in runs]
    report.metric("server_speedup_geomean", float(np.exp(np.mean(np.log(speed)))),
                  description="NTT-baseline / SPA-Conv server time (noisy, machine-dependent)")
    report.table("layers", [
        {"layer": r.name, "c_out_run": r.c_out, "cheetah_exact": r.exact_cheetah,
         "trunc_exact_fraction": float(np.mean(r.truncation_errors == 0)),
         "max_noise_ulp": r.max_noise_ulp, "spa_s": r.jaguar_eval_s, "ntt_s": r.cheetah_eval_s,
         "ntt_prepare_s": r.cheetah_prepare_s, "speedup": r.cheetah_eval_s / r.jaguar_eval_s,
         "client_decrypt_s": r.jaguar_decrypt_s}
        for r in runs], caption="Layers run end to end (times are wall-clock, noisy).")
    counts = {int(v): int(np.sum(errors == v)) for v in (-1, 0, 1)}
    report.table("truncation_errors", [{"error_ulp": k, "count": v} for k, v in counts.items()],
                 caption="y - round(Wx / 2^s) over all outputs of the layers run.")
    report.note(
        f"Jaguar: N={jp.n}, q=2^{jp.k}, ell_in={jp.ell_in}, s={jp.shift}, ell_out={jp.ell_out}, "
        f"answer modulus 2^{jp.response_bits}; {jp.security}-bit (HE standard). Baseline: "
        f"q = product of {len(cp.primes)} NTT primes (log2 q = {cp.log_q:.1f}), t = 2^{cp.ell}, "
        f"answer at 2^{cp.response_bits}. The baseline's answer is the untruncated product; its "
        "post-ReLU truncation protocol (part 2) is not counted here."
    )
    return report
