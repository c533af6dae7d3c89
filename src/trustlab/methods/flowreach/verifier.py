"""The flowreach pipeline on one (network, VNN-LIB property) instance, with its baselines.

Per input region of the property, within one time budget (``timeout``):

1. falsify quickly (uniform samples, one round of Adam restarts; witnesses re-checked on
   onnxruntime);
2. sample the box and run the network (onnxruntime); fit a flow-matching model on ``n_train``
   outputs and calibrate its latent-norm reach set on ``n_cal`` fresh ones (coverage
   ``1 - alpha`` with PAC confidence ``1 - delta``); measure the flow's round-trip error and
   inflate the latent radius by it; bound the probability of the unsafe set under the learned
   law restricted to the inflated ball by bounded AMS (``u``, confidence ``1 - ams_delta``).
   The probabilistic certificate is ``P(violation) <= alpha + u``;
3. keep falsifying until the budget is spent (Adam rounds, exact linear-region descent, and a
   CROWN branch and bound that also *proves* the region when it closes every box).

Every verdict carries a **guarantee**: ``sound`` (a proof by IBP, CROWN, CROWN+BaB, or the
pipeline's own box search), ``probabilistic`` (a certificate with its bound, confidence and
assumptions), ``falsified`` (a witness confirmed on onnxruntime) or ``none``. Only a sound
``unsat`` is written as ``unsat`` in a VNN-COMP result file (unless the user opts in).

Baselines in the same harness: box / ellipsoid / PCA-zonotope conformal reach sets (exact
spec checks; certificate ``alpha``), plain Monte Carlo (Clopper–Pearson on the same samples),
and the sound IBP / CROWN / CROWN+BaB.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from trustlab.core.errors import DataError, InputError
from trustlab.datasets.onnx_nets import OnnxNetwork
from trustlab.datasets.vnnlib import VnnlibRegion, VnnlibSpec
from trustlab.methods.flowreach.ams import AMSResult, bounded_ams, restricted_gaussian
from trustlab.methods.flowreach.bounds import prove_region, prove_region_bab
from trustlab.methods.flowreach.conformal import (
    BoxReachSet,
    EllipsoidReachSet,
    FlowReachSet,
    ZonotopeReachSet,
    pac_rank,
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
    "GUARANTEES",
    "METHODS",
    "SOUND_METHODS",
    "InstanceResult",
    "VerifySettings",
    "format_witness",
    "verify_instance",
]

METHODS = ("flowreach", "box", "ellipsoid", "zonotope", "mc", "ibp", "crown", "crown_bab")
SOUND_METHODS = ("ibp", "crown", "crown_bab")
PROBABILISTIC_METHODS = ("flowreach", "box", "ellipsoid", "zonotope", "mc")
GUARANTEES = ("sound", "probabilistic", "falsified", "none")
# input splitting and exact linear-region descent pay off in low input dimension (ACAS Xu: 5);
# on MNIST (784 inputs) one LP or one split barely moves, so the falsifier keeps to Adam there
SEARCH_MAX_INPUTS = 64
_SHAPES = {"box": BoxReachSet, "ellipsoid": EllipsoidReachSet, "zonotope": ZonotopeReachSet}


class VerifySettings(BaseModel):
    """Options of one verification run (the paper's symbols where it names them).

    ``alpha``: conformal miscoverage of the reach set; ``delta``: PAC miscoverage of the
    calibration (None = marginal guarantee); ``epsilon``: the violation probability a
    certificate must bound; ``ams_delta``: miscoverage of AMS's (and Monte Carlo's) upper
    bound. ``timeout`` is the per-instance budget: the pipeline keeps falsifying until it is
    spent unless a witness or a proof ends it earlier. The CLI (``trustlab verify``) and the
    experiment share these defaults.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    alpha: float = Field(0.005, gt=0.0, lt=1.0, description="Conformal miscoverage.")
    delta: float | None = Field(0.01, gt=0.0, lt=1.0,
                                description="PAC miscoverage of the calibration (None: marginal).")
    epsilon: float = Field(0.01, gt=0.0, lt=1.0,
                           description="Violation probability a certificate must bound.")
    ams_delta: float = Field(0.01, gt=0.0, lt=1.0,
                             description="Miscoverage of the AMS and Monte-Carlo upper bounds.")
    n_train: int = Field(1500, ge=50, description="Network samples to train the flow on.")
    n_cal: int = Field(2000, ge=50, description="Fresh samples to calibrate every reach set.")
    flow_iters: int = Field(200, ge=1, description="Adam steps of flow-matching training.")
    flow_hidden: int = Field(64, ge=4, description="Width of the velocity MLP.")
    ode_steps: int = Field(8, ge=1, description="RK4 steps of the flow's ODE.")
    roundtrip_samples: int = Field(10_000, ge=0, description="Latent ball samples on which the "
                                   "round-trip error |encode(decode(z)) - z| is measured; the "
                                   "AMS radius is inflated by its maximum (0: no inflation).")
    ams_particles: int = Field(32, ge=2, description="AMS particles.")
    ams_p_min: float = Field(1e-3, gt=0.0, lt=1.0, description="AMS stops below this estimate.")
    ams_mcmc: int = Field(6, ge=1, description="MCMC steps per AMS move.")
    ams_clone: bool = Field(True, description="Start AMS moves from a clone above the level "
                            "(a move still needs an accepted MCMC step).")
    ams_max_rounds: int = Field(40, ge=1, description="AMS round budget.")
    falsify_random: int = Field(2000, ge=0, description="Uniform samples of the falsifier.")
    falsify_starts: int = Field(256, ge=1, description="Adam restarts per falsifier round.")
    falsify_steps: int = Field(120, ge=1, description="Adam steps per restart.")
    falsify_until_timeout: bool = Field(True, description="Keep falsifying (Adam rounds, "
                                        "linear-region descent, CROWN box search) until the "
                                        "timeout when no witness or proof ends the search.")
    timeout: float = Field(116.0, gt=0.0, description="Seconds per instance (VNN-COMP: 116).")
    clock: Literal["wall", "process"] = Field("wall", description="What the timeout counts: "
                                              "wall seconds (VNN-COMP) or this process's CPU "
                                              "seconds (load-independent, for shared machines).")
    baselines: bool = Field(True, description="Also run box/ellipsoid/zonotope/Monte Carlo.")
    sound: bool = Field(True, description="Also run IBP, CROWN and CROWN+BaB.")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"]) or "settings"
            raise InputError(f"The '{loc}' parameter of VerifySettings is invalid: "
                             f"{err['msg']}. Got {err.get('input')!r}.") from None

    @model_validator(mode="after")
    def _cross_checks(self) -> VerifySettings:
        if self.alpha > self.epsilon:
            raise ValueError(f"alpha ({self.alpha}) must not exceed epsilon ({self.epsilon}): a "
                             "certificate is alpha + u, so none could ever be issued")
        if self.delta is not None:
            need = math.ceil(math.log(self.delta) / math.log(1 - self.alpha))
            if self.n_cal < need:
                raise ValueError(f"n_cal ({self.n_cal}) is too small for alpha={self.alpha}, "
                                 f"delta={self.delta}: at least {need} calibration samples")
        return self

    def now(self) -> float:
        """The clock the budget counts (seconds)."""
        return time.perf_counter() if self.clock == "wall" else time.process_time()


@dataclass
class RegionDetail:
    """What the pipeline learned on one input region (for reports, figures and certificates)."""

    radius: float = math.nan  # calibrated latent radius q
    roundtrip_error: float = math.nan  # max |encode(decode(z)) - z| over the ball samples
    ams_radius: float = math.nan  # q + roundtrip_error: the ball AMS samples
    ams: AMSResult | None = None
    certificate: float = math.nan  # alpha + AMS upper bound
    mc_upper: float = math.nan
    flow_coverage_check: float = math.nan  # share of the calibration outputs inside the set
    y_sample: NDArray[np.float64] | None = None
    flow_sample: NDArray[np.float64] | None = None


@dataclass
class InstanceResult:
    """Verdicts (``sat``/``unsat``/``unknown``/``timeout``), their guarantees and seconds."""

    verdicts: dict[str, str]
    seconds: dict[str, float]
    guarantees: dict[str, str] = field(default_factory=dict)
    counterexample: Counterexample | None = None
    certificate: float = math.nan  # flowreach's bound on P(violation) (worst region)
    certificates: dict[str, dict[str, Any]] = field(default_factory=dict)
    falsify_seconds: float = 0.0
    certificate_seconds: float = math.nan  # from the start of the pipeline to the certificate
    falsify_stage: str = "none"
    best_margin: float = math.inf
    proved_by_search: bool = False  # flowreach's box search closed every box (sound)
    search_boxes: int = 0
    bab_boxes: int = 0
    details: list[RegionDetail] = field(default_factory=list)

    def guarantee(self, method: str = "flowreach") -> str:
        return self.guarantees.get(method, "none")


def _combine(verdicts: list[str]) -> str:
    if "sat" in verdicts:
        return "sat"
    if "timeout" in verdicts:
        return "timeout"
    if verdicts and all(v == "unsat" for v in verdicts):
        return "unsat"
    return "unknown"


def _guarantee(method: str, verdict: str, proved: bool = False) -> str:
    if verdict == "sat":
        return "falsified"
    if verdict != "unsat":
        return "none"
    if method in SOUND_METHODS or proved:
        return "sound"
    return "probabilistic"


def _torch_net(net: OnnxNetwork) -> Any:
    try:
        return net.mlp_torch()
    except DataError:
        return net.to_torch()


def _relu_mlp(net: OnnxNetwork) -> Any:
    try:
        return net.relu_mlp()
    except DataError:
        return None


def verify_instance(
    net: OnnxNetwork,
    spec: VnnlibSpec,
    settings: VerifySettings | None = None,
    rng: np.random.Generator | None = None,
    *,
    keep_samples: bool = False,
) -> InstanceResult:
    """Run falsification, flowreach and (optionally) every baseline on one instance."""
    if not isinstance(net, OnnxNetwork):
        raise InputError(f"The 'net' parameter of verify_instance must be an OnnxNetwork. "
                         f"Got {type(net).__name__}.")
    if not isinstance(spec, VnnlibSpec):
        raise InputError(f"The 'spec' parameter of verify_instance must be a VnnlibSpec "
                         f"(load_vnnlib). Got {type(spec).__name__}.")
    settings = VerifySettings() if settings is None else settings
    if not isinstance(settings, VerifySettings):
        raise InputError(f"The 'settings' parameter of verify_instance must be VerifySettings. "
                         f"Got {type(settings).__name__}.")
    if rng is None:
        rng = np.random.default_rng(0)
    if not isinstance(rng, np.random.Generator):
        raise InputError(f"The 'rng' parameter of verify_instance must be a numpy Generator "
                         f"(np.random.default_rng). Got {type(rng).__name__}.")
    if spec.n_inputs != net.n_inputs or spec.n_outputs != net.n_outputs:
        raise InputError(
            f"The property has {spec.n_inputs} inputs / {spec.n_outputs} outputs but the network "
            f"{net.name} has {net.n_inputs} / {net.n_outputs}."
        )
    start = settings.now()
    deadline = start + settings.timeout
    methods = list(METHODS if settings.baselines else ("flowreach",))
    if not settings.sound:
        methods = [m for m in methods if m not in SOUND_METHODS]
    elif "ibp" not in methods:
        methods += list(SOUND_METHODS)
    prob_methods = [m for m in methods if m in PROBABILISTIC_METHODS]
    per_region: dict[str, list[str]] = {m: [] for m in methods}
    seconds = dict.fromkeys(methods, 0.0)
    tnet = _torch_net(net)
    mlp = _relu_mlp(net)
    result = InstanceResult({}, seconds)

    def finish() -> InstanceResult:
        result.verdicts = {m: _combine(v) for m, v in per_region.items()}
        result.guarantees = {
            m: _guarantee(m, v, proved=(m == "flowreach" and result.proved_by_search))
            for m, v in result.verdicts.items()
        }
        return result

    # 1. the sound baselines, each with the whole budget (they never use the falsifier)
    for m in (x for x in ("ibp", "crown") if x in methods):
        for region in spec.regions:
            if mlp is None:
                per_region[m].append("unknown")
                continue
            br = prove_region(mlp, region, m, timeout=settings.timeout, clock=settings.now)
            per_region[m].append(br.verdict)
            seconds[m] += br.seconds
    if "crown_bab" in methods:
        per_region["crown_bab"] = _crown_bab(net, mlp, spec, settings, result)
        seconds["crown_bab"] = result.certificates.get("crown_bab", {}).get("seconds", 0.0)
    start = settings.now()  # the probabilistic pipeline's budget starts now
    deadline = start + settings.timeout

    # 2. quick falsification on every region
    t_f = settings.now()
    for region in spec.regions:
        fres = falsify(
            tnet, region, net.run, rng,
            n_random=settings.falsify_random, n_starts=settings.falsify_starts,
            n_steps=settings.falsify_steps, max_rounds=1,
            time_limit=max(0.1, deadline - settings.now()), clock=settings.now,
        )
        result.best_margin = min(result.best_margin, fres.best_margin)
        if fres.counterexample is not None:
            result.counterexample = fres.counterexample
            result.falsify_stage = fres.stage
            break
    result.falsify_seconds = settings.now() - t_f
    if result.counterexample is not None:
        for m in prob_methods:
            per_region[m] = ["sat"]
            seconds[m] += result.falsify_seconds
        return finish()

    # 3. the probabilistic methods, region by region (same samples for every method)
    certs: list[float] = []
    for region in spec.regions:
        detail = RegionDetail()
        result.details.append(detail)
        t0 = settings.now()
        x = sample_box(region, settings.n_train + settings.n_cal, rng)
        y = net.run(x).astype(np.float64)
        t_sample = settings.now() - t0
        bad = np.flatnonzero(region.output_violated(y))
        if len(bad):  # an onnxruntime sample is itself a confirmed counterexample
            i = bad[np.argmin(margin_np(region, y[bad]))]
            result.counterexample = Counterexample(
                x[i].copy(), y[i].astype(np.float32), float(margin_np(region, y[i : i + 1])[0])
            )
            result.falsify_stage = "sampling"
            break
        y_train, y_cal = y[: settings.n_train], y[settings.n_train :]
        for m in prob_methods:
            seconds[m] += t_sample
        if "mc" in methods:
            detail.mc_upper = float(clopper_pearson_upper(0, len(y), settings.ams_delta))
            per_region["mc"].append("unsat" if detail.mc_upper <= settings.epsilon else "unknown")
        for name, cls in _SHAPES.items():
            if name not in methods:
                continue
            t1 = settings.now()
            shape = cls(alpha=settings.alpha, delta=settings.delta).fit(y_train).calibrate(y_cal)
            ok = settings.alpha <= settings.epsilon and not shape.intersects(region)
            per_region[name].append("unsat" if ok else "unknown")
            seconds[name] += settings.now() - t1
        t2 = settings.now()
        if t2 > deadline:
            per_region["flowreach"].append("timeout")
            continue
        verdict, cert = _flowreach_region(region, y_train, y_cal, settings, rng, detail,
                                          keep_samples, deadline)
        per_region["flowreach"].append(verdict)
        certs.append(cert)
        seconds["flowreach"] += settings.now() - t2
    result.certificate_seconds = settings.now() - start
    if certs:
        result.certificate = float(max(certs))
    _record_certificates(result, settings, prob_methods, len(spec.regions))

    # 4. keep falsifying (and searching for a proof) until the budget is spent
    if result.counterexample is None and settings.falsify_until_timeout:
        t3 = settings.now()
        proved = []
        regions = list(spec.regions)
        for k, region in enumerate(regions):
            share = (deadline - settings.now()) / (len(regions) - k)
            if share <= 0.05:
                proved.append(False)
                continue
            fres = falsify(
                tnet, region, net.run, rng,
                n_random=0, n_starts=settings.falsify_starts, n_steps=settings.falsify_steps,
                max_rounds=None, time_limit=share, clock=settings.now,
                mlp=mlp if net.n_inputs <= SEARCH_MAX_INPUTS else None,
            )
            result.search_boxes += fres.boxes
            result.best_margin = min(result.best_margin, fres.best_margin)
            if fres.counterexample is not None:
                result.counterexample = fres.counterexample
                result.falsify_stage = fres.stage
                break
            proved.append(fres.proved)
        result.proved_by_search = (result.counterexample is None and len(proved) == len(regions)
                                   and all(proved))
        result.falsify_seconds += settings.now() - t3
    for m in prob_methods:
        seconds[m] += result.falsify_seconds
    if result.counterexample is not None:
        for m in prob_methods:
            per_region[m] = ["sat"]
    elif result.proved_by_search:
        per_region["flowreach"] = ["unsat"] * len(spec.regions)
    return finish()


def _crown_bab(net, mlp, spec, settings, result) -> list[str]:
    """CROWN + input branch and bound with the whole budget; witnesses confirmed on ORT."""
    if mlp is None:
        result.certificates["crown_bab"] = {"seconds": 0.0, "boxes": 0}
        return ["unknown"]
    verdicts, total, boxes = [], 0.0, 0
    share = settings.timeout / len(spec.regions)
    for region in spec.regions:

        def confirm(x: NDArray[np.float64], region: VnnlibRegion = region) -> bool:
            from trustlab.methods.flowreach.falsify import _confirm

            return _confirm(region, x[None], net.run) is not None

        bab = prove_region_bab(mlp, region, timeout=share, confirm=confirm,
                               clock=settings.now)
        verdicts.append(bab.verdict)
        total += bab.seconds
        boxes += bab.boxes
        if bab.verdict == "sat":
            break
    result.bab_boxes = boxes
    result.certificates["crown_bab"] = {"seconds": total, "boxes": boxes}
    return verdicts


def _record_certificates(result: InstanceResult, s: VerifySettings, methods: list[str],
                         n_regions: int) -> None:
    """The full probabilistic certificate of every probabilistic method (for the sidecar)."""
    law = "uniform on each input box of the property"
    n = s.n_train + s.n_cal
    for m in methods:
        if m == "flowreach":
            regions = [{
                "radius": d.radius, "roundtrip_error": d.roundtrip_error,
                "ams_radius": d.ams_radius,
                "ams_upper": d.ams.upper if d.ams else None,
                "ams_estimate": d.ams.estimate if d.ams else None,
                "ams_n_crossed": d.ams.n_crossed if d.ams else None,
                "ams_finished": d.ams.finished if d.ams else None,
                "bound": d.certificate,
            } for d in result.details]
            result.certificates[m] = {
                "bound": result.certificate, "alpha": s.alpha, "delta": s.delta,
                "ams_delta": s.ams_delta, "n_cal": s.n_cal, "n_train": s.n_train,
                "epsilon": s.epsilon,
                "confidence": 1 - (s.delta or 0.0) - s.ams_delta,
                "input_law": law,
                "assumptions": [
                    "the flow models the network's output law on the calibrated reach set "
                    "(P_network(R and V) <= the AMS bound of P_flow(R and V))",
                    "AMS's MCMC draws from the conditioned law (the usual splitting assumption)",
                    "the round-trip error measured on the ball samples bounds it on the ball",
                ],
                "rests_on_flow_mass": any((r["ams_n_crossed"] or 0) > 0 for r in regions),
                "regions": regions,
            }
        elif m == "mc":
            result.certificates[m] = {
                "bound": float(max(d.mc_upper for d in result.details)) if result.details
                else math.nan,
                "delta": s.ams_delta, "n_samples": n, "confidence": 1 - s.ams_delta,
                "input_law": law,
                "assumptions": ["none beyond independent uniform samples (Clopper-Pearson, "
                                "zero violations observed)"],
            }
        else:
            result.certificates[m] = {
                "bound": s.alpha, "alpha": s.alpha, "delta": s.delta, "n_cal": s.n_cal,
                "n_train": s.n_train, "confidence": 1 - (s.delta or 0.0), "input_law": law,
                "assumptions": [f"none beyond exchangeable samples: the calibrated {m} set is "
                                "checked exactly against the unsafe set"],
            }
    del n_regions


def _roundtrip_error(fl: FlowMatching, radius: float, n: int,
                     rng: np.random.Generator) -> float:
    """Max of ``|encode(decode(z)) - z|`` over ``n`` draws of the restricted latent law plus
    ``n // 10`` points on the sphere of the calibrated radius (where the ball's edge is)."""
    if n == 0:
        return 0.0
    z = restricted_gaussian(n, fl.dim_, radius, rng)
    edge = rng.standard_normal((max(1, n // 10), fl.dim_))
    edge *= radius / np.linalg.norm(edge, axis=1, keepdims=True)
    z = np.concatenate([z, edge])
    with torch.no_grad():
        y_std = fl.decode_std(torch.as_tensor(z, dtype=torch.float32))
        back = fl._integrate(y_std, 1.0, 0.0)
    return float(np.linalg.norm(back.numpy().astype(np.float64) - z, axis=1).max())


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
    detail.roundtrip_error = _roundtrip_error(fl, radius, s.roundtrip_samples, rng)
    detail.ams_radius = radius + detail.roundtrip_error
    mean = torch.as_tensor(fl.mean_, dtype=torch.float32)
    std = torch.as_tensor(fl.std_, dtype=torch.float32)

    def score(z: NDArray[np.float64]) -> NDArray[np.float64]:
        y = fl.decode_std(torch.as_tensor(z, dtype=torch.float32)) * std + mean
        return (-margin_torch(region, y.to(torch.float64))).numpy()

    if s.now() > deadline:
        return "timeout", math.nan
    ams = bounded_ams(
        score, fl.dim_, rng, radius=detail.ams_radius, n_particles=s.ams_particles,
        p_min=s.ams_p_min, max_rounds=s.ams_max_rounds, n_mcmc=s.ams_mcmc, delta=s.ams_delta,
        clone=s.ams_clone,
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


def min_certificate(settings: VerifySettings) -> float:
    """The smallest flowreach certificate the settings allow: the PAC conformal level.

    With ``delta`` set, the calibrated rank is at most ``n_cal``, so the certified miscoverage
    ``alpha`` can only be met when ``alpha >= 1 - delta**(1/n_cal)``; that is the
    Clopper–Pearson bound of zero hits in ``n_cal`` samples. Monte Carlo on all
    ``n_train + n_cal`` samples has the smaller bound ``1 - ams_delta**(1/(n_train+n_cal))``
    (docs: "Monte Carlo dominance").
    """
    if settings.delta is None:
        return 1.0 / (settings.n_cal + 1)
    pac_rank(settings.n_cal, settings.alpha, settings.delta)  # raises when infeasible
    return 1.0 - settings.delta ** (1.0 / settings.n_cal)


def format_witness(result: InstanceResult, method: str = "flowreach", *,
                   probabilistic_unsat: bool = False) -> str:
    """VNN-COMP result text for one method's verdict.

    ``sat`` + ``((X_0 v) ... (Y_0 v) ...)`` for a witness; ``unsat`` only for a *sound* proof
    (or, with ``probabilistic_unsat=True``, also for a probabilistic certificate); ``timeout``;
    ``unknown`` otherwise. VNN-COMP scorers read ``unsat`` as a proof.
    """
    if not isinstance(result, InstanceResult):
        raise InputError(f"The 'result' parameter of format_witness must be an InstanceResult. "
                         f"Got {type(result).__name__}.")
    verdict = result.verdicts.get(method, "unknown")
    guarantee = result.guarantee(method)
    if verdict == "sat" and result.counterexample is not None:
        cex = result.counterexample
        parts = [f"(X_{i} {float(v)!r})" for i, v in enumerate(cex.x)]
        parts += [f"(Y_{j} {float(v)!r})" for j, v in enumerate(cex.y)]
        return "sat\n(" + "\n ".join(parts) + ")\n"
    if verdict == "unsat" and (guarantee == "sound"
                               or (guarantee == "probabilistic" and probabilistic_unsat)):
        return "unsat\n"
    if verdict == "timeout":
        return "timeout\n"
    return "unknown\n"
