"""Manifold sensitivity: the Fisher–Rao response of the output distribution to a push along a
direction in the residual stream, normalised by the response to matched-norm random directions.

Definitions (per prompt ``n``, site ``s``, unit direction ``u``, typical residual norm ``rho``):

* the perturbed stream is ``h + eps * rho * u`` at every real token of the prompt at ``s``;
* the response is ``d_n(eps) = FR(p_n(0), p_n(eps))`` with ``FR(p, q) = 2 arccos sum sqrt(p q)``
  on the next-token distribution (averaged over ``T`` teacher-forced reply tokens when asked);
* its infinitesimal version is the Fisher–Rao *speed*
  ``v_n(u) = d/d|eps| d_n(eps) at 0 = rho * sqrt(u^T G_n u)`` with ``G_n = J^T (diag p - p p^T) J``
  the pullback of the Fisher metric through the logits' Jacobian ``J`` (``= rho * std_p(J u)``);
* manifold sensitivity = the direction's response divided by the mean response of ``k``
  matched-norm placebo directions (Gaussian, unit-normalised): unit-free, 1 = "no more than a
  random direction". Scalars: ``speed_ratio`` (small-eps limit) and ``auc_ratio`` (area under
  the curve over the eps grid, both signs), each a ratio of prompt means with a bootstrap CI.

The curve is computed in one batched pass: every (eps, direction) pair is a copy of the prompt
batch with its own added vector, so a full curve costs about ``len(eps) * (1 + k)`` plain
forwards' worth of rows, with no Python loop over perturbations.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from trustlab.core.errors import InputError
from trustlab.lm import LanguageModel, Prompt, fisher_rao, row_additions

__all__ = [
    "SensitivityCurve",
    "fisher_metric_speed",
    "fisher_speed",
    "ratio_ci",
    "sensitivity_curve",
    "typical_norm",
]


def fisher_metric_speed(logits: torch.Tensor, dlogits: torch.Tensor) -> torch.Tensor:
    """``sqrt(dz^T (diag p - p p^T) dz)`` = the Fisher–Rao speed of ``softmax(z + t dz)`` at t=0.

    ``logits`` and ``dlogits`` are [..., V]; this is the standard deviation of ``dz`` under
    ``p = softmax(z)`` (the Fisher information metric pulled back through the softmax).
    """
    try:
        z = torch.as_tensor(logits, dtype=torch.float64)
        dz = torch.as_tensor(dlogits, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise InputError("fisher_metric_speed takes numeric logits and dlogits arrays.") from exc
    if z.shape != dz.shape:
        raise InputError(f"logits and dlogits must have one shape. Got {z.shape} and {dz.shape}.")
    if z.dim() == 0 or z.shape[-1] == 0:
        raise InputError(f"logits must be [..., V] with V >= 1. Got shape {tuple(z.shape)}.")
    if bool(torch.isnan(z).any()) or bool((z == math.inf).any()):
        raise InputError("The 'logits' parameter of fisher_metric_speed holds NaN or +inf.")
    if not bool(torch.isfinite(z).any(-1).all()):
        raise InputError(
            "The 'logits' parameter of fisher_metric_speed has a row with no finite logit."
        )
    if not bool(torch.isfinite(dz).all()):
        raise InputError("The 'dlogits' parameter of fisher_metric_speed holds NaN or inf.")
    p = torch.softmax(z, -1)
    dz = torch.where(p > 0, dz, torch.zeros_like(dz))
    mean = (p * dz).sum(-1, keepdim=True)
    return ((p * (dz - mean) ** 2).sum(-1)).clamp_min(0.0).sqrt()


def _token_rows(
    lm: LanguageModel, prompts: Sequence[Prompt], continuations: Sequence[Sequence[int]] | None
) -> list[list[int]]:
    rows = lm.tokenize(prompts)
    if continuations is not None:
        rows = [r + list(c) for r, c in zip(rows, continuations, strict=True)]
    return rows


def _logits_rows(
    lm: LanguageModel,
    rows: list[list[int]],
    site: str,
    deltas: torch.Tensor,
    n_last: int,
    *,
    max_rows: int,
) -> torch.Tensor:
    """Log-probs [K, N, n_last, V] for each of K deltas applied to all N token rows."""
    k, n = deltas.shape[0], len(rows)
    out = torch.empty((k, n, n_last, lm.vocab_size), dtype=torch.float32)
    base = lm.pad(rows, "left")
    # rows per chunk: at most max_rows, and at most ~2^27 logits in flight (a 50k vocabulary
    # with long prompts would otherwise need gigabytes for one chunk)
    width = base.input_ids.shape[1] if n_last > 1 else 1
    budget = max(1, (1 << 27) // max(1, width * lm.vocab_size))
    per_chunk = max(1, min(max_rows, budget) // n)
    with torch.no_grad():
        for start in range(0, k, per_chunk):
            ks = range(start, min(k, start + per_chunk))
            batch = _repeat_batch(base, len(ks))
            d = deltas[list(ks)].repeat_interleave(n, 0)
            with row_additions(lm, site, d):
                logits = lm.forward(batch, last_only=n_last == 1)[:, -n_last:, :]
            logp = torch.log_softmax(logits.float(), -1).cpu()
            out[list(ks)] = logp.reshape(len(ks), n, n_last, -1)
    return out


def _repeat_batch(batch, times: int):
    from trustlab.lm import Batch

    def rep(t: torch.Tensor) -> torch.Tensor:
        return t.repeat(times, *([1] * (t.dim() - 1)))

    return Batch(
        input_ids=rep(batch.input_ids),
        attention_mask=rep(batch.attention_mask),
        position_ids=rep(batch.position_ids),
        prompt_len=rep(batch.prompt_len),
    )


def typical_norm(
    lm: LanguageModel, prompts: Sequence[Prompt], site: str, *, batch_size: int = 32
) -> float:
    """Mean L2 norm of the residual stream at ``site`` over the prompts' post-instruction tokens.

    The scale ``rho`` of the eps grid, so eps is a fraction of the layer's typical norm.
    """
    from trustlab.lm import get_activations

    if isinstance(prompts, str) or len(prompts) == 0:
        raise InputError("The 'prompts' parameter of typical_norm must be a non-empty list.")
    acts = get_activations(lm, list(prompts), [site], "post_instruction", batch_size=batch_size)
    return float(acts[:, 0].double().norm(dim=-1).mean())


@dataclass(frozen=True)
class SensitivityCurve:
    """The Fisher–Rao response to ``eps * rho * direction`` and to matched-norm placebos.

    ``distance``: [E, N] Fisher–Rao distance per eps and prompt for the direction;
    ``placebo_distance``: [E, k, N] for the placebos; ``refusal_shift`` [E, N] and
    ``placebo_refusal_shift`` [E, k, N]: signed change of the refusal-token probability mass
    of the first reply token (0 when no refusal tokens were given).
    """

    eps: np.ndarray
    scale: float
    distance: np.ndarray
    placebo_distance: np.ndarray
    refusal_shift: np.ndarray
    placebo_refusal_shift: np.ndarray

    def __post_init__(self) -> None:
        eps = np.asarray(self.eps, dtype=np.float64)
        d = np.asarray(self.distance, dtype=np.float64)
        pd = np.asarray(self.placebo_distance, dtype=np.float64)
        if eps.ndim != 1 or eps.size == 0 or d.ndim != 2 or d.shape[0] != eps.size:
            raise InputError(
                f"SensitivityCurve needs eps [E] and distance [E, N]. Got {eps.shape} and "
                f"{d.shape}."
            )
        if pd.ndim != 3 or pd.shape[0] != eps.size or pd.shape[2] != d.shape[1] or pd.shape[1] < 1:
            raise InputError(
                f"SensitivityCurve needs placebo_distance [E, k>=1, N] = [{eps.size}, k, "
                f"{d.shape[1]}]. Got {pd.shape}."
            )
        if (
            np.shape(self.refusal_shift) != d.shape
            or np.shape(self.placebo_refusal_shift) != pd.shape
        ):
            raise InputError("SensitivityCurve's refusal shifts must match the distances' shapes.")
        for name, arr in (("eps", eps), ("distance", d), ("placebo_distance", pd)):
            if not np.all(np.isfinite(arr)):
                raise InputError(f"The '{name}' of a SensitivityCurve holds NaN or inf.")
        if np.any(d < 0) or np.any(pd < 0):
            raise InputError("Fisher–Rao distances in a SensitivityCurve must be >= 0.")

    @property
    def mean_distance(self) -> np.ndarray:
        return self.distance.mean(-1)

    @property
    def mean_placebo_distance(self) -> np.ndarray:
        return self.placebo_distance.mean((-1, -2))

    @property
    def ratio(self) -> np.ndarray:
        """[E] sensitivity per eps: direction response / mean placebo response (NaN at eps=0)."""
        num, den = self.mean_distance, self.mean_placebo_distance
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, num / den, np.nan)

    def auc_per_prompt(self) -> tuple[np.ndarray, np.ndarray]:
        """Trapezoid areas over the eps grid: ([N] direction, [N] placebo mean)."""
        order = np.argsort(self.eps)
        x = self.eps[order]
        a = np.trapezoid(self.distance[order], x, axis=0)
        b = np.trapezoid(self.placebo_distance[order].mean(1), x, axis=0)
        return a, b

    def auc_ratio(self) -> float:
        a, b = self.auc_per_prompt()
        return float(a.mean() / b.mean()) if b.mean() > 0 else float("nan")


def sensitivity_curve(
    lm: LanguageModel,
    prompts: Sequence[Prompt],
    site: str,
    direction: torch.Tensor,
    eps: Sequence[float],
    placebos: torch.Tensor,
    *,
    scale: float = 1.0,
    refusal_ids: Sequence[int] = (),
    response_tokens: Sequence[Sequence[int]] | None = None,
    max_rows: int = 2048,
) -> SensitivityCurve:
    """Fisher–Rao response curves for ``direction`` and each placebo (one batched pass).

    ``direction`` [D] and ``placebos`` [k, D] are unit-normalised here, so their norm never
    matters; each is added as ``eps * scale * unit`` at every real token at ``site``.
    ``response_tokens``: per prompt, reply tokens to teacher-force; the distance is then the
    mean over the first reply token and these ``T`` tokens (all prompts need the same ``T``).
    """
    if isinstance(prompts, str) or len(prompts) == 0:
        raise InputError("The 'prompts' parameter of sensitivity_curve must be a non-empty list.")
    eps_arr = np.asarray(list(eps), dtype=np.float64)
    if eps_arr.ndim != 1 or eps_arr.size == 0 or not np.isfinite(eps_arr).all():
        raise InputError(f"eps must be a non-empty list of finite numbers. Got {list(eps)}.")
    if (
        isinstance(scale, bool)
        or not isinstance(scale, int | float)
        or not (math.isfinite(scale) and scale > 0)
    ):
        raise InputError(f"The 'scale' parameter of sensitivity_curve must be > 0. Got {scale!r}.")
    u = torch.as_tensor(direction, dtype=torch.float64).reshape(-1)
    if float(u.norm()) == 0.0:
        raise InputError("The direction is the zero vector; it has no direction.")
    u = u / u.norm()
    plac = torch.as_tensor(placebos, dtype=torch.float64)
    if plac.dim() != 2 or plac.shape[1] != u.shape[0] or plac.shape[0] == 0:
        raise InputError(f"placebos must be [k>=1, {u.shape[0]}]. Got {tuple(plac.shape)}.")
    plac = plac / plac.norm(dim=-1, keepdim=True)
    dirs = torch.cat([u.unsqueeze(0), plac], 0)  # [1 + k, D]
    e = torch.as_tensor(eps_arr)
    deltas = (e.view(-1, 1, 1) * scale * dirs.unsqueeze(0)).reshape(-1, u.shape[0])
    deltas = torch.cat([torch.zeros(1, u.shape[0], dtype=torch.float64), deltas], 0).float()
    t = 0 if response_tokens is None else len(response_tokens[0])
    if response_tokens is not None and any(len(c) != t for c in response_tokens):
        raise InputError("Every prompt needs the same number of teacher-forced reply tokens.")
    rows = _token_rows(lm, prompts, response_tokens)
    logp = _logits_rows(lm, rows, site, deltas, t + 1, max_rows=max_rows)  # [1+E(1+k), N, T+1, V]
    base, pert = logp[0], logp[1:]
    dist = fisher_rao(base.unsqueeze(0).expand_as(pert), pert, log=True).mean(-1)  # [E(1+k), N]
    n_e, n_d, n = eps_arr.size, dirs.shape[0], len(prompts)
    dist = dist.reshape(n_e, n_d, n).numpy()
    if refusal_ids:
        ids = list(refusal_ids)
        mass = torch.logsumexp(logp[:, :, 0, ids].double(), -1).exp()  # [1+E(1+k), N]
        shift = (mass[1:] - mass[0]).reshape(n_e, n_d, n).numpy()
    else:
        shift = np.zeros((n_e, n_d, n))
    return SensitivityCurve(
        eps=eps_arr,
        scale=float(scale),
        distance=dist[:, 0],
        placebo_distance=dist[:, 1:],
        refusal_shift=shift[:, 0],
        placebo_refusal_shift=shift[:, 1:],
    )


def fisher_speed(
    lm: LanguageModel,
    prompts: Sequence[Prompt],
    site: str,
    directions: torch.Tensor,
    *,
    scale: float = 1.0,
) -> torch.Tensor:
    """Exact Fisher–Rao speed ``scale * sqrt(u^T G_n u)`` [M, N] of each unit direction
    ([M, D], normalised here) on each prompt's next-token distribution.

    The directional derivative of the logits ``J u`` comes from autograd (the double-backward
    form of a Jacobian-vector product), so no finite-difference step is involved.
    """
    try:
        dirs = torch.as_tensor(directions, dtype=torch.float32)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise InputError("The 'directions' parameter of fisher_speed must be numeric.") from exc
    if dirs.dim() == 1:
        dirs = dirs.unsqueeze(0)
    if dirs.dim() != 2 or dirs.shape[1] != lm.d_model or dirs.shape[0] == 0:
        raise InputError(
            f"The 'directions' parameter of fisher_speed must be [M>=1, {lm.d_model}]. Got "
            f"{tuple(dirs.shape)}."
        )
    if not bool(torch.isfinite(dirs).all()) or bool((dirs.norm(dim=-1) == 0).any()):
        raise InputError(
            "The 'directions' parameter of fisher_speed must hold finite, non-zero vectors."
        )
    if (
        isinstance(scale, bool)
        or not isinstance(scale, int | float)
        or not (math.isfinite(scale) and scale > 0)
    ):
        raise InputError(f"The 'scale' parameter of fisher_speed must be > 0. Got {scale!r}.")
    if isinstance(prompts, str) or len(prompts) == 0:
        raise InputError("The 'prompts' parameter of fisher_speed must be a non-empty list.")
    dirs = dirs / dirs.norm(dim=-1, keepdim=True)
    batch = lm.encode(list(prompts))
    out = torch.empty((dirs.shape[0], len(prompts)), dtype=torch.float64)
    for m in range(dirs.shape[0]):
        t = torch.zeros((), requires_grad=True)
        deltas = (t * scale * dirs[m]).unsqueeze(0).expand(len(prompts), -1)
        # the math SDPA kernel is made of differentiable ops (the fused ones lack 2nd derivatives)
        with _math_attention(), row_additions(lm, site, deltas):
            logits = lm.forward(batch, last_only=True, grad=True)[:, -1, :].float()
        v = torch.zeros_like(logits, requires_grad=True)
        (g,) = torch.autograd.grad(logits, t, grad_outputs=v, create_graph=True)
        (dz,) = torch.autograd.grad(g, v)
        out[m] = fisher_metric_speed(logits.detach(), dz.detach())
    return out


@contextlib.contextmanager
def _math_attention() -> Iterator[None]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        yield


def ratio_ci(
    num: np.ndarray,
    den: np.ndarray,
    rng: np.random.Generator,
    *,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
) -> tuple[float, float, float]:
    """``mean(num) / mean(den)`` with a paired percentile bootstrap CI over prompts (rows)."""
    from trustlab.stats import bootstrap_ci

    try:
        a = np.asarray(num, dtype=np.float64)
        b = np.asarray(den, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError("ratio_ci takes two numeric arrays (num, den).") from exc
    if a.ndim != 1 or a.shape != b.shape:
        raise InputError(
            f"ratio_ci needs 1-D 'num' and 'den' of one length (paired rows). Got {a.shape} and "
            f"{b.shape}."
        )
    if a.size < 2:
        raise InputError(f"ratio_ci needs at least 2 paired rows for an interval. Got {a.size}.")
    for name, arr in (("num", a), ("den", b)):
        if not np.all(np.isfinite(arr)):
            raise InputError(f"The '{name}' parameter of ratio_ci holds NaN or inf.")
    if not b.mean() > 0:
        raise InputError(
            f"The 'den' parameter of ratio_ci must have a positive mean. Got {b.mean()}."
        )
    if not isinstance(rng, np.random.Generator):
        raise InputError(
            f"The 'rng' parameter of ratio_ci must be a numpy Generator. Got {type(rng).__name__}."
        )
    point = float(a.mean() / b.mean())

    def stat(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return x.mean(axis) / np.maximum(y.mean(axis), 1e-300)

    res = bootstrap_ci(
        (a, b),
        stat,
        n_resamples=n_resamples,
        confidence_level=confidence_level,
        rng=rng,
        paired=True,
        vectorized=True,
    )
    return point, float(res.low), float(res.high)
