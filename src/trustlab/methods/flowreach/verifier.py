"""The flowreach pipeline on one (network, VNN-LIB property) instance, with its baselines.

Per input region of the property: (1) falsify (random + Adam, re-checked on onnxruntime);
(2) sample the box and run the network with onnxruntime; (3) fit a flow-matching model on
``n_train`` outputs and calibrate its latent-norm reach set on ``n_cal`` fresh ones (coverage
``1 - alpha``, PAC confidence ``1 - delta`` when ``delta`` is set); (4) bound the probability of
the unsafe set under the learned law restricted to the calibrated ball by bounded AMS
(``u``, at confidence ``1 - ams_delta``). Certificate: ``P(violation) <= alpha + u``; the verdict
is ``unsat`` ("holds with this certificate") when ``alpha + u <= epsilon``. A counterexample
anywhere makes the verdict ``sat`` and no certificate is issued.

Baselines in the same harness: box / ellipsoid / PCA-zonotope conformal reach sets (exact
spec checks; certificate ``alpha``), plain Monte Carlo (Clopper–Pearson bound on the sampled
violation rate), and the sound IBP / CROWN bounds.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from trustlab.core.errors import DataError, InputError
from trustlab.datasets.onnx_nets import OnnxNetwork
from trustlab.datasets.vnnlib import VnnlibRegion, VnnlibSpec
from trustlab.methods.flowreach.ams import AMSResult, bounded_ams
from trustlab.methods.flowreach.bounds import prove_region
from trustlab.methods.flowreach.conformal import (
    BoxReachSet,
    EllipsoidReachSet,
    FlowReachSet,
    ZonotopeReachSet,
)
from trustlab.methods.flowreach.falsify import (
    Counterexample,
    falsify,
    margin_np,
    margin_torch,
    sample_box,
)
from trustlab.methods.flowreach.flow import FlowMatching
from trustlab.stats import clopper_pearson_upper

__all__ = [
    "METHODS",
    "InstanceResult",
    "VerifySettings",
    "format_witness",
    "verify_instance",
]

METHODS = ("flowreach", "box", "ellipsoid", "zonotope", "mc", "ibp", "crown")
_SHAPES = {"box": BoxReachSet, "ellipsoid": EllipsoidReachSet, "zonotope": ZonotopeReachSet}


@dataclass(frozen=True)
class VerifySettings:
    """Options of one verification run (the paper's symbols where it names them).

    ``alpha``: conformal miscoverage of the reach set; ``delta``: PAC miscoverage of the
    calibration (None = marginal guarantee); ``epsilon``: the violation probability a
    certificate must bound; ``ams_delta``: miscoverage of AMS's upper bound.
    """

    alpha: float = 0.005
    delta: float | None = 0.01
    epsilon: float = 0.01
    ams_delta: float = 0.01
    n_train: int = 2000
    n_cal: int = 2000
    flow_iters: int = 300
    flow_hidden: int = 64
    ode_steps: int = 8
    ams_particles: int = 32
    ams_p_min: float = 1e-3
    ams_mcmc: int = 6
    ams_max_rounds: int = 40
    falsify_random: int = 2000
    falsify_starts: int = 256
    falsify_steps: int = 120
    falsify_rounds: int = 1
    timeout: float = 120.0
    baselines: bool = True
    sound: bool = True

    def check(self) -> None:
        for name in ("alpha", "epsilon", "ams_delta", "ams_p_min"):
            v = getattr(self, name)
            if not 0 < v < 1:
                raise InputError(f"The '{name}' parameter of flowreach must be in (0, 1). Got {v}.")
        if self.delta is not None and not 0 < self.delta < 1:
            raise InputError(f"The 'delta' parameter of flowreach must be in (0, 1). Got "
                             f"{self.delta}.")


@dataclass
class RegionDetail:
    """What the pipeline learned on one input region (for reports and figures)."""

    radius: float = math.nan
    ams: AMSResult | None = None
    certificate: float = math.nan  # alpha + AMS upper bound
    mc_upper: float = math.nan
    flow_coverage_check: float = math.nan  # share of the calibration outputs inside the set
    y_sample: NDArray[np.float64] | None = None
    flow_sample: NDArray[np.float64] | None = None


@dataclass
class InstanceResult:
    """Verdicts (``sat``/``unsat``/``unknown``/``timeout``) and seconds per method."""

    verdicts: dict[str, str]
    seconds: dict[str, float]
    counterexample: Counterexample | None = None
    certificate: float = math.nan  # flowreach's bound on P(violation) when it says unsat
    falsify_seconds: float = 0.0
    best_margin: float = math.inf
    details: list[RegionDetail] = field(default_factory=list)


def _combine(verdicts: list[str]) -> str:
    if "sat" in verdicts:
        return "sat"
    if "timeout" in verdicts:
        return "timeout"
    if verdicts and all(v == "unsat" for v in verdicts):
        return "unsat"
    return "unknown"


def _torch_net(net: OnnxNetwork) -> Any:
    try:
        return net.mlp_torch()
    except DataError:
        return net.to_torch()


def verify_instance(
    net: OnnxNetwork,
    spec: VnnlibSpec,
    settings: VerifySettings,
    rng: np.random.Generator,
    *,
    keep_samples: bool = False,
) -> InstanceResult:
    """Run falsification, flowreach and (optionally) every baseline on one instance."""
    settings.check()
    if spec.n_inputs != net.n_inputs or spec.n_outputs != net.n_outputs:
        raise InputError(
            f"The property has {spec.n_inputs} inputs / {spec.n_outputs} outputs but the network "
            f"{net.name} has {net.n_inputs} / {net.n_outputs}."
        )
    start = time.perf_counter()
    deadline = start + settings.timeout
    methods = list(METHODS if settings.baselines else ("flowreach",))
    if not settings.sound:
        methods = [m for m in methods if m not in ("ibp", "crown")]
    per_region: dict[str, list[str]] = {m: [] for m in methods}
    seconds = dict.fromkeys(methods, 0.0)
    tnet = _torch_net(net)
    result = InstanceResult({}, seconds)

    # 1. falsification first, on every region
    for region in spec.regions:
        left = max(0.1, deadline - time.perf_counter())
        fres = falsify(
            tnet, region, net.run, rng,
            n_random=settings.falsify_random, n_starts=settings.falsify_starts,
            n_steps=settings.falsify_steps, max_rounds=settings.falsify_rounds, time_limit=left,
        )
        result.falsify_seconds += fres.seconds
        result.best_margin = min(result.best_margin, fres.best_margin)
        if fres.counterexample is not None:
            result.counterexample = fres.counterexample
            break
    for m in methods:
        if m not in ("ibp", "crown"):
            seconds[m] += result.falsify_seconds

    # 2. sound baselines (they never answer sat)
    if "ibp" in methods or "crown" in methods:
        try:
            mlp = net.relu_mlp()
        except DataError:
            mlp = None
        for m in ("ibp", "crown"):
            if m not in methods:
                continue
            for region in spec.regions:
                if mlp is None:
                    per_region[m].append("unknown")
                    continue
                left = max(0.05, deadline - time.perf_counter())
                br = prove_region(mlp, region, m, timeout=left)
                per_region[m].append(br.verdict)
                seconds[m] += br.seconds

    if result.counterexample is not None:
        for m in methods:
            if m not in ("ibp", "crown"):
                per_region[m] = ["sat"]
        result.verdicts = {m: _combine(v) for m, v in per_region.items()}
        return result

    # 3. the probabilistic methods, region by region
    certs = []
    for region in spec.regions:
        detail = RegionDetail()
        result.details.append(detail)
        t0 = time.perf_counter()
        x = sample_box(region, settings.n_train + settings.n_cal, rng)
        y = net.run(x).astype(np.float64)
        t_sample = time.perf_counter() - t0
        bad = np.flatnonzero(region.output_violated(y))
        if len(bad):  # an onnxruntime sample is itself a confirmed counterexample
            i = bad[np.argmin(margin_np(region, y[bad]))]
            result.counterexample = Counterexample(
                x[i].copy(), y[i].astype(np.float32), float(margin_np(region, y[i : i + 1])[0])
            )
            for m in methods:
                if m not in ("ibp", "crown"):
                    per_region[m].append("sat")
            break
        y_train, y_cal = y[: settings.n_train], y[settings.n_train :]
        if "mc" in methods:
            detail.mc_upper = float(clopper_pearson_upper(0, len(y), settings.ams_delta))
            per_region["mc"].append("unsat" if detail.mc_upper <= settings.epsilon else "unknown")
            seconds["mc"] += t_sample
        for name, cls in _SHAPES.items():
            if name not in methods:
                continue
            t1 = time.perf_counter()
            shape = cls(alpha=settings.alpha, delta=settings.delta).fit(y_train).calibrate(y_cal)
            ok = settings.alpha <= settings.epsilon and not shape.intersects(region)
            per_region[name].append("unsat" if ok else "unknown")
            seconds[name] += t_sample + time.perf_counter() - t1
        t2 = time.perf_counter()
        if t2 > deadline:
            per_region["flowreach"].append("timeout")
            seconds["flowreach"] += t_sample
            continue
        verdict, cert = _flowreach_region(region, y_train, y_cal, settings, rng, detail,
                                          keep_samples, deadline)
        per_region["flowreach"].append(verdict)
        certs.append(cert)
        seconds["flowreach"] += t_sample + time.perf_counter() - t2
    if result.counterexample is not None:
        for m in methods:
            if m not in ("ibp", "crown"):
                per_region[m] = ["sat"]
    result.verdicts = {m: _combine(v) for m, v in per_region.items()}
    if result.verdicts.get("flowreach") == "unsat":
        result.certificate = float(max(certs))
    return result


def _flowreach_region(
    region: VnnlibRegion,
    y_train: NDArray[np.float64],
    y_cal: NDArray[np.float64],
    s: VerifySettings,
    rng: np.random.Generator,
    detail: RegionDetail,
    keep_samples: bool,
    deadline: float,
) -> tuple[str, float]:
    flow = FlowMatching(hidden=s.flow_hidden, n_iters=s.flow_iters, ode_steps=s.ode_steps,
                        seed=int(rng.integers(0, 2**31)))
    reach = FlowReachSet(flow, alpha=s.alpha, delta=s.delta).fit(y_train).calibrate(y_cal)
    radius = reach.radius_
    detail.radius = radius
    detail.flow_coverage_check = float(np.mean(reach.cal_scores_ <= radius))
    fl = reach.flow_
    mean = torch.as_tensor(fl.mean_, dtype=torch.float32)
    std = torch.as_tensor(fl.std_, dtype=torch.float32)

    def score(z: NDArray[np.float64]) -> NDArray[np.float64]:
        y = fl.decode_std(torch.as_tensor(z, dtype=torch.float32)) * std + mean
        return (-margin_torch(region, y.to(torch.float64))).numpy()

    if time.perf_counter() > deadline:
        return "timeout", math.nan
    ams = bounded_ams(
        score, fl.dim_, rng, radius=radius, n_particles=s.ams_particles, p_min=s.ams_p_min,
        max_rounds=s.ams_max_rounds, n_mcmc=s.ams_mcmc, delta=s.ams_delta,
    )
    detail.ams = ams
    cert = s.alpha + ams.upper
    detail.certificate = cert
    if keep_samples:
        detail.y_sample = y_cal[:2000]
        detail.flow_sample = fl.decode(
            rng.standard_normal((min(2000, len(y_cal)), fl.dim_))
        )
    return ("unsat" if cert <= s.epsilon else "unknown"), cert


def format_witness(result: InstanceResult) -> str:
    """VNN-COMP result text: ``sat`` + ``((X_0 v) ... (Y_0 v) ...)``, or the verdict alone."""
    verdict = result.verdicts.get("flowreach", "unknown")
    if verdict != "sat" or result.counterexample is None:
        return verdict + "\n"
    cex = result.counterexample
    parts = [f"(X_{i} {float(v)!r})" for i, v in enumerate(cex.x)]
    parts += [f"(Y_{j} {float(v)!r})" for j, v in enumerate(cex.y)]
    return "sat\n(" + "\n ".join(parts) + ")\n"
