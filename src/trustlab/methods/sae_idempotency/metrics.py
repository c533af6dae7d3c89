"""Standard SAE metrics: FVU, L0, dead latents, feature recovery and delta-loss.

Every function takes tensors (or an encoder/decoder pair) and returns numbers; none trains.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar
from trustlab.methods.sae_idempotency.sae import as_activations

__all__ = [
    "DeltaLoss",
    "EncoderDecoder",
    "FunctionalEncoderDecoder",
    "dead_latent_fraction",
    "delta_loss",
    "feature_recovery",
    "fraction_of_variance_unexplained",
    "l0",
    "latent_fire_counts",
    "reconstruct",
]


@runtime_checkable
class EncoderDecoder(Protocol):
    """Anything with ``encode(x) -> z`` and ``decode(z) -> x̂`` (our SAEs, SAELens SAEs, ...)."""

    def encode(self, x: torch.Tensor) -> torch.Tensor: ...

    def decode(self, z: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class FunctionalEncoderDecoder:
    """Wrap two callables as an :class:`EncoderDecoder` (e.g. an SAE from another library)."""

    encode_fn: Callable[[torch.Tensor], torch.Tensor]
    decode_fn: Callable[[torch.Tensor], torch.Tensor]

    def __post_init__(self) -> None:
        if not (callable(self.encode_fn) and callable(self.decode_fn)):
            raise InputError("FunctionalEncoderDecoder needs two callables, encode_fn and "
                             f"decode_fn. Got {type(self.encode_fn).__name__} and "
                             f"{type(self.decode_fn).__name__}.")

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.encode_fn(x)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.decode_fn(z)


def prepare(sae: Any, x: Any, where: str) -> torch.Tensor:
    """Check that ``sae`` is an encoder/decoder pair and return ``x`` as finite activations
    [n, d_in] in the pair's dtype (a torch module's parameters' dtype; e.g. float64 inputs to a
    float32 SAE are cast, not refused)."""
    if not (callable(getattr(sae, "encode", None)) and callable(getattr(sae, "decode", None))):
        raise InputError(f"The 'sae' parameter of {where} must have encode(x) and decode(z) "
                         f"(an SAE or a FunctionalEncoderDecoder). Got {type(sae).__name__}.")
    dtype = None
    if isinstance(sae, torch.nn.Module):
        dtype = next((p.dtype for p in sae.parameters() if p.is_floating_point()), None)
    width = getattr(sae, "d_in", None)
    return as_activations(x, "x", where, width=width if isinstance(width, int) else None,
                          dtype=dtype)


def check_codes(z: Any, where: str) -> torch.Tensor:
    """Latent codes returned by an encoder: a finite tensor (a NaN code is the encoder's fault,
    said so instead of being averaged into a result)."""
    if not isinstance(z, torch.Tensor) or z.dim() < 1:
        raise InputError(f"The encoder given to {where} must return a tensor of codes. "
                         f"Got {type(z).__name__}.")
    if not bool(torch.isfinite(z).all()):
        raise InputError(f"The encoder given to {where} returned NaN or infinite codes.")
    return z


def _eval_mode(sae: Any) -> Any:
    """Put a torch module in eval mode (BatchTopK uses its threshold at inference)."""
    if isinstance(sae, torch.nn.Module):
        sae.eval()
    return sae


@torch.no_grad()
def reconstruct(
    sae: EncoderDecoder, x: torch.Tensor, *, batch_size: int = 8192
) -> tuple[torch.Tensor, torch.Tensor]:
    """Latents and reconstructions of ``x`` [n, d_in] in inference mode, batched."""
    x = prepare(sae, x, "reconstruct")
    batch_size = check_scalar(batch_size, "batch_size", "reconstruct", kind=int, lo=1)
    _eval_mode(sae)
    zs, xs = [], []
    for start in range(0, x.shape[0], batch_size):
        z = sae.encode(x[start : start + batch_size])
        zs.append(z)
        xs.append(sae.decode(z))
    return torch.cat(zs), torch.cat(xs)


def fraction_of_variance_unexplained(x: torch.Tensor, x_hat: torch.Tensor) -> float:
    """FVU = Σ‖x − x̂‖² / Σ‖x − x̄‖²: 0 for a perfect reconstruction, 1 for predicting the mean."""
    where = "fraction_of_variance_unexplained"
    x = as_activations(x, "x", where)
    x_hat = as_activations(x_hat, "x_hat", where)
    if x.shape != x_hat.shape:
        raise InputError(
            f"FVU needs x and x_hat of equal shape [n, d]. Got {tuple(x.shape)}, {tuple(x_hat.shape)}."
        )
    x64, xh64 = x.double(), x_hat.double()
    total = (x64 - x64.mean(0)).pow(2).sum()
    if total <= 0:
        raise InputError("FVU is undefined when x has zero variance.")
    return float((x64 - xh64).pow(2).sum() / total)


def l0(z: torch.Tensor) -> float:
    """Mean number of non-zero latents per input (``z`` is [n, d_sae])."""
    z = as_activations(z, "z", "l0")
    return float((z != 0).sum(-1).double().mean())


def latent_fire_counts(z: torch.Tensor) -> torch.Tensor:
    """How many inputs each latent fires (is non-zero) on: [d_sae] (``z`` is [n, d_sae])."""
    z = as_activations(z, "z", "latent_fire_counts")
    return (z != 0).sum(0)


def dead_latent_fraction(z: torch.Tensor) -> float:
    """Share of latents that never fire on the given inputs."""
    return float((latent_fire_counts(z) == 0).double().mean())


def feature_recovery(
    learned: torch.Tensor, truth: torch.Tensor, *, threshold: float = 0.9
) -> tuple[float, float]:
    """How well learned dictionary rows recover ground-truth feature directions.

    ``learned`` [d_sae, d_in] (decoder rows), ``truth`` [n_features, d_in]. Returns the mean
    max cosine similarity (MMCS) of each true feature with its best learned row, and the share
    of true features whose best cosine exceeds ``threshold``.
    """
    where = "feature_recovery"
    learned = as_activations(learned, "learned", where)
    truth = as_activations(truth, "truth", where)
    threshold = check_scalar(threshold, "threshold", where, lo=-1.0, hi=1.0)
    if learned.shape[-1] != truth.shape[-1]:
        raise InputError(
            f"Learned and true features need the same width. Got {learned.shape}, {truth.shape}."
        )
    a = torch.nn.functional.normalize(learned.double(), dim=-1)
    b = torch.nn.functional.normalize(truth.double(), dim=-1)
    best = (b @ a.t()).max(dim=1).values
    return float(best.mean()), float((best > threshold).double().mean())


@dataclass(frozen=True)
class DeltaLoss:
    """Next-token cross-entropy (nats/token) clean, with the SAE spliced in, and zero-ablated.

    ``delta`` = spliced − clean; ``loss_recovered`` = (zero − spliced)/(zero − clean), the share
    of the loss gap between zero-ablating the site and the clean model that the SAE recovers.
    """

    clean: float
    spliced: float
    zero_ablated: float
    n_tokens: int

    def __post_init__(self) -> None:
        for name in ("clean", "spliced", "zero_ablated"):
            check_scalar(getattr(self, name), name, "DeltaLoss", lo=0.0)
        check_scalar(self.n_tokens, "n_tokens", "DeltaLoss", kind=int, lo=1)

    @property
    def delta(self) -> float:
        return self.spliced - self.clean

    @property
    def loss_recovered(self) -> float:
        gap = self.zero_ablated - self.clean
        return float("nan") if gap == 0 else (self.zero_ablated - self.spliced) / gap


@torch.no_grad()
def delta_loss(
    model: Any,
    sae: EncoderDecoder,
    prompts: Sequence[Any],
    site: str,
    *,
    input_scale: float = 1.0,
    batch_size: int = 16,
) -> DeltaLoss:
    """The LM's loss when ``site`` is replaced by the SAE reconstruction at every real token.

    ``model`` is a :class:`trustlab.lm.LanguageModel`; ``input_scale`` s is the factor the SAE's
    training activations were multiplied by, so the spliced activation is D(E(s·h))/s.
    The reconstruction is written at every non-padding token of the prompt, and the loss is the
    mean next-token cross-entropy over all real tokens that have a real successor.
    """
    from trustlab import lm

    where = "delta_loss"
    if not isinstance(model, lm.LanguageModel):
        raise InputError(f"The 'model' parameter of {where} must be a trustlab.lm.LanguageModel "
                         f"(lm.load('organism:chat-xs'), lm.load('hf:/path')). "
                         f"Got {type(model).__name__}.")
    if not (callable(getattr(sae, "encode", None)) and callable(getattr(sae, "decode", None))):
        raise InputError(f"The 'sae' parameter of {where} must have encode(x) and decode(z). "
                         f"Got {type(sae).__name__}.")
    if isinstance(prompts, str) or not isinstance(prompts, Sequence) or not prompts \
            or not all(isinstance(p, str) for p in prompts):
        raise InputError(f"The 'prompts' parameter of {where} must be a non-empty list of "
                         f"strings. Got {type(prompts).__name__}.")
    if not isinstance(site, str) or not site:
        raise InputError(f"The 'site' parameter of {where} must be a site name such as "
                         f"'blocks.1.resid_post'. Got {site!r}.")
    input_scale = check_scalar(input_scale, "input_scale", where, lo=0.0, closed="neither")
    batch_size = check_scalar(batch_size, "batch_size", where, kind=int, lo=1)
    _eval_mode(sae)
    totals = {"clean": 0.0, "spliced": 0.0, "zero": 0.0}
    n_tokens = 0

    def splice(_site: str, h: torch.Tensor, step: Any) -> torch.Tensor:
        flat = h.reshape(-1, h.shape[-1]).to(torch.float32)
        rec = sae.decode(sae.encode(flat * input_scale)) / input_scale
        rec = rec.reshape(h.shape).to(h.dtype)
        valid = step.valid.unsqueeze(-1)
        return torch.where(valid, rec, h)

    def zero(_site: str, h: torch.Tensor, step: Any) -> torch.Tensor:
        return torch.where(step.valid.unsqueeze(-1), torch.zeros_like(h), h)

    for start in range(0, len(prompts), batch_size):
        batch = model.encode(list(prompts[start : start + batch_size]))
        mask = batch.attention_mask.bool()
        target_mask = (mask[:, :-1] & mask[:, 1:]).to(model.device)
        targets = batch.input_ids[:, 1:].to(model.device)

        def ce(logits: torch.Tensor, target_mask=target_mask, targets=targets) -> float:
            logp = torch.log_softmax(logits[:, :-1].double(), dim=-1)
            nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            return float(nll[target_mask].sum())

        totals["clean"] += ce(model.forward(batch))
        with lm.hook(model, [site], splice):
            totals["spliced"] += ce(model.forward(batch))
        with lm.hook(model, [site], zero):
            totals["zero"] += ce(model.forward(batch))
        n_tokens += int(target_mask.sum())
    if n_tokens == 0:
        raise InputError("delta_loss needs prompts with at least two tokens.")
    return DeltaLoss(
        clean=totals["clean"] / n_tokens,
        spliced=totals["spliced"] / n_tokens,
        zero_ablated=totals["zero"] / n_tokens,
        n_tokens=n_tokens,
    )
