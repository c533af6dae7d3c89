"""Idempotency diagnostics for any encoder/decoder pair (E, D).

An SAE is idempotent when re-encoding its output reproduces its code: E(D(E(x))) = E(x).
Measures (all computed in inference mode, in float64 for the norms):

* re-encoding error      ‖E(D(z)) − z‖ / ‖z‖ with z = E(x) (inputs with z = 0 are skipped);
* active-set Jaccard     |A ∩ A'| / |A ∪ A'| for A = supp z, A' = supp E(D(z)) (1 when both empty);
* norm trajectory        ‖x_t‖ and ‖z_t‖ over x_{t+1} = D(E(x_t)), classified per input as
  converges / explodes / collapses / cycles / drifts;
* per-latent reliability for each latent i, the share of inputs with z_i > 0 whose re-encoding
  z'_i is also > 0 and within ``rel_tol``·z_i of z_i;
* scale sensitivity      ‖E(c·x) − c·E(x)‖ / ‖c·E(x)‖ and the Jaccard of supp E(c·x) vs supp E(x),
  per scale c (0 for a positively homogeneous, bias-free encoder).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar
from trustlab.methods.sae_idempotency.metrics import (
    EncoderDecoder,
    _eval_mode,
    check_codes,
    prepare,
)

__all__ = [
    "IdempotencyDiagnostics",
    "NormTrajectory",
    "ScaleSensitivity",
    "active_set_jaccard",
    "diagnose",
    "norm_trajectory",
    "per_latent_reliability",
    "reencoding_error",
    "scale_sensitivity",
]

TRAJECTORY_KINDS = ("converges", "explodes", "collapses", "cycles", "drifts")


@torch.no_grad()
def _reencode(sae: EncoderDecoder, x: torch.Tensor, where: str) -> tuple[torch.Tensor, torch.Tensor]:
    x = prepare(sae, x, where)
    _eval_mode(sae)
    z = check_codes(sae.encode(x), where)
    return z, check_codes(sae.encode(sae.decode(z)), where)


def _jaccard(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    sa, sb = a != 0, b != 0
    inter = (sa & sb).sum(-1).double()
    union = (sa | sb).sum(-1).double()
    return torch.where(union > 0, inter / union.clamp_min(1), torch.ones_like(union))


def reencoding_error(sae: EncoderDecoder, x: torch.Tensor) -> torch.Tensor:
    """Per input ‖E(D(E(x))) − E(x)‖ / ‖E(x)‖ (NaN where E(x) = 0: no code to re-encode)."""
    z, z2 = _reencode(sae, x, "reencoding_error")
    num = (z2.double() - z.double()).norm(dim=-1)
    den = z.double().norm(dim=-1)
    return torch.where(den > 0, num / den.clamp_min(1e-300), torch.full_like(den, torch.nan))


def active_set_jaccard(sae: EncoderDecoder, x: torch.Tensor) -> torch.Tensor:
    """Per input Jaccard similarity of the active sets of E(x) and E(D(E(x)))."""
    z, z2 = _reencode(sae, x, "active_set_jaccard")
    return _jaccard(z, z2)


def per_latent_reliability(
    sae: EncoderDecoder, x: torch.Tensor, *, rel_tol: float = 0.2
) -> torch.Tensor:
    """For each latent, the share of its firings that survive re-encoding at a similar magnitude.

    A firing (z_i > 0 on an input) survives when z'_i = E(D(z))_i > 0 and |z'_i − z_i| ≤
    ``rel_tol``·z_i. Latents that never fire on ``x`` get NaN. Returns [d_sae] float64.
    """
    rel_tol = check_scalar(rel_tol, "rel_tol", "per_latent_reliability", lo=0.0)
    z, z2 = _reencode(sae, x, "per_latent_reliability")
    z, z2 = z.double(), z2.double()
    fired = z > 0
    ok = fired & (z2 > 0) & ((z2 - z).abs() <= rel_tol * z)
    counts = fired.sum(0).double()
    return torch.where(counts > 0, ok.sum(0).double() / counts.clamp_min(1), torch.nan)


@dataclass(frozen=True)
class NormTrajectory:
    """Mean ‖x_t‖ and ‖z_t‖ over t = 0..n_iter of x_{t+1} = D(E(x_t)), and per-input outcomes."""

    x_norms: np.ndarray  # [n_iter + 1], mean over inputs of ‖x_t‖
    z_norms: np.ndarray  # [n_iter + 1], mean over inputs of ‖z_t‖
    outcome_shares: dict[str, float]  # share of inputs per kind in TRAJECTORY_KINDS
    x_norm_quantiles: np.ndarray  # [n_iter + 1, 3], the 10/50/90% quantiles of ‖x_t‖

    @property
    def growth(self) -> float:
        """Mean ‖z_T‖ / mean ‖z_1‖ (> 1: codes grow under iteration)."""
        return float(self.z_norms[-1] / self.z_norms[0]) if self.z_norms[0] > 0 else float("nan")


@torch.no_grad()
def norm_trajectory(
    sae: EncoderDecoder,
    x: torch.Tensor,
    n_iter: int = 10,
    *,
    tol: float = 1e-4,
    explode_factor: float = 10.0,
    max_period: int = 4,
) -> NormTrajectory:
    """Iterate x ↦ D(E(x)) ``n_iter`` times and classify what each input does.

    Per input, with x_T the last iterate: ``explodes`` if ‖x_T‖ > explode_factor·‖x_1‖;
    ``collapses`` if ‖x_T‖ < ‖x_1‖/explode_factor; ``converges`` if ‖x_T − x_{T−1}‖ ≤
    tol·‖x_T‖; ``cycles`` if ‖x_T − x_{T−p}‖ ≤ tol·‖x_T‖ for some period 2 ≤ p ≤ max_period;
    otherwise ``drifts``. (x_1 = D(E(x_0)) is the first reconstruction.)
    """
    where = "norm_trajectory"
    n_iter = check_scalar(n_iter, "n_iter", where, kind=int, lo=2)
    tol = check_scalar(tol, "tol", where, lo=0.0)
    explode_factor = check_scalar(explode_factor, "explode_factor", where, lo=1.0,
                                  closed="neither")
    max_period = check_scalar(max_period, "max_period", where, kind=int, lo=2)
    xt = x = prepare(sae, x, where)
    _eval_mode(sae)
    xs = [xt.double()]
    zs = []
    for _ in range(n_iter):
        z = check_codes(sae.encode(xt), where)
        xt = sae.decode(z)
        zs.append(z.double().norm(dim=-1))
        xs.append(xt.double())
    x_norm = torch.stack([v.norm(dim=-1) for v in xs])  # [T+1, n]
    z_norm = torch.stack(zs)
    last = xs[-1]
    scale = last.norm(dim=-1).clamp_min(1e-300)
    first = x_norm[1].clamp_min(1e-300)
    outcome = np.full(x.shape[0], "drifts", dtype=object)
    cyc = torch.zeros(x.shape[0], dtype=torch.bool)
    for p in range(2, max_period + 1):
        if p <= n_iter - 1:
            cyc |= (last - xs[-1 - p]).norm(dim=-1) <= tol * scale
    conv = (last - xs[-2]).norm(dim=-1) <= tol * scale
    outcome[cyc.numpy()] = "cycles"
    outcome[conv.numpy()] = "converges"
    outcome[(x_norm[-1] < first / explode_factor).numpy()] = "collapses"
    outcome[(x_norm[-1] > explode_factor * first).numpy()] = "explodes"
    shares = {kind: float(np.mean(outcome == kind)) for kind in TRAJECTORY_KINDS}
    finite = torch.nan_to_num(x_norm, nan=torch.inf)
    quant = torch.quantile(finite, torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64), dim=1)
    return NormTrajectory(
        x_norms=x_norm.mean(1).numpy(),
        z_norms=torch.cat([z_norm]).mean(1).numpy(),
        outcome_shares=shares,
        x_norm_quantiles=quant.t().numpy(),
    )


@dataclass(frozen=True)
class ScaleSensitivity:
    """Per scale c: mean ‖E(c·x) − c·E(x)‖/‖c·E(x)‖ and mean Jaccard of the active sets."""

    scales: np.ndarray
    relative_error: np.ndarray
    jaccard: np.ndarray

    @property
    def mean_relative_error(self) -> float:
        return float(np.nanmean(self.relative_error))


@torch.no_grad()
def scale_sensitivity(
    sae: EncoderDecoder, x: torch.Tensor, scales: Sequence[float] = (0.5, 0.8, 1.25, 2.0)
) -> ScaleSensitivity:
    """How far E is from positive homogeneity E(c·x) = c·E(x) over the given scales c > 0."""
    where = "scale_sensitivity"
    if isinstance(scales, str) or not isinstance(scales, Sequence | np.ndarray) or not len(scales):
        raise InputError(f"The 'scales' parameter of {where} must be a non-empty list of "
                         f"positive numbers. Got {scales!r}.")
    scales = [check_scalar(c, "scales", where, lo=0.0, closed="neither") for c in scales]
    x = prepare(sae, x, where)
    _eval_mode(sae)
    z = check_codes(sae.encode(x), where).double()
    errs, jacs = [], []
    for c in scales:
        zc = check_codes(sae.encode(x * c), where).double()
        den = (c * z).norm(dim=-1)
        rel = (zc - c * z).norm(dim=-1) / den.clamp_min(1e-300)
        rel = rel[den > 0]
        errs.append(float(rel.mean()) if rel.numel() else float("nan"))
        jacs.append(float(_jaccard(z, zc).mean()))
    return ScaleSensitivity(np.asarray(scales, float), np.asarray(errs), np.asarray(jacs))


@dataclass(frozen=True)
class IdempotencyDiagnostics:
    """All idempotency measures of one encoder/decoder pair on one set of inputs."""

    reencoding_error: float  # mean over inputs with E(x) != 0
    reencoding_error_median: float
    jaccard: float  # mean active-set Jaccard
    reliability: float  # mean per-latent reliability over latents that fire
    scale_error: float  # mean relative homogeneity error over the scales
    scale_jaccard: float
    trajectory: NormTrajectory
    latent_reliability: np.ndarray = field(repr=False)  # [d_sae], NaN for silent latents
    scale: ScaleSensitivity = field(repr=False)

    def as_row(self) -> dict[str, float]:
        row = {
            "reencode_error": self.reencoding_error,
            "reencode_error_median": self.reencoding_error_median,
            "jaccard": self.jaccard,
            "reliability": self.reliability,
            "scale_error": self.scale_error,
            "scale_jaccard": self.scale_jaccard,
            "norm_growth": self.trajectory.growth,
        }
        row.update({f"traj_{k}": v for k, v in self.trajectory.outcome_shares.items()})
        return row


def diagnose(
    sae: EncoderDecoder,
    x: torch.Tensor,
    *,
    n_iter: int = 10,
    rel_tol: float = 0.2,
    scales: Sequence[float] = (0.5, 0.8, 1.25, 2.0),
) -> IdempotencyDiagnostics:
    """Run every idempotency measure on inputs ``x`` [n, d_in]."""
    x = prepare(sae, x, "diagnose")
    err = reencoding_error(sae, x)
    err = err[~err.isnan()]
    rel = per_latent_reliability(sae, x, rel_tol=rel_tol)
    sc = scale_sensitivity(sae, x, scales)
    nan = float("nan")
    return IdempotencyDiagnostics(
        reencoding_error=float(err.mean()) if err.numel() else nan,
        reencoding_error_median=float(err.median()) if err.numel() else nan,
        jaccard=float(active_set_jaccard(sae, x).mean()),
        reliability=float(np.nanmean(rel.numpy())) if bool((~rel.isnan()).any()) else nan,
        scale_error=sc.mean_relative_error,
        scale_jaccard=float(np.mean(sc.jaccard)),
        trajectory=norm_trajectory(sae, x, n_iter),
        latent_reliability=rel.numpy(),
        scale=sc,
    )
