"""Training SAEs over an activation stream, with the AuxK dead-latent loss and the idempotency loss.

The training objective, per batch of inputs x (rows), with z = E(x), x̂ = D(z)::

    L = ‖x − x̂‖²                                        reconstruction (summed over d_in)
      + λ_L1·Σ_i |z_i|·‖W_dec,i‖                         relu only
      + λ_L0·Σ_i H(pre_i − θ_i)                           jumprelu only (straight-through)
      + α_aux·‖e − ê‖² / ‖e‖²                             AuxK on dead latents (topk/batchtopk)
      + λ_idem·‖E(D(z)) − z‖²                             the idempotency loss

averaged over the batch. AuxK (Gao et al. 2024): e = x − x̂ (no gradient), ê = D₀(TopK_kaux(pre
restricted to dead latents)) without the decoder bias; a latent is dead once it has not fired
for ``dead_after`` training inputs. Sparsity coefficients warm up linearly over the first
``sparsity_warmup_fraction`` of steps; the learning rate decays linearly to 0 over the last 20%.

Which terms of the idempotency loss get gradients (``idempotency_grad``):

* ``"reencode"`` (default): z is treated as data, L = λ‖E(D(sg z)) − sg z‖²; gradients reach
  the encoder and decoder only through the re-encoding pass, so the loss asks E∘D to fix the
  codes the SAE already uses, without pulling those codes toward cheap (e.g. small) values.
* ``"full"``: no stop-gradient anywhere; the first encoding is also pushed toward codes that
  survive re-encoding.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch

from trustlab.core.errors import InputError, NotFittedError
from trustlab.methods.sae_idempotency.sae import (
    ARCHITECTURES,
    Architecture,
    SparseAutoencoder,
    StepFunction,
    topk_activation,
)

__all__ = ["SAETrainer", "TrainConfig", "normalization_scale"]

log = logging.getLogger(__name__)

Progress = Callable[..., Iterable[Any]]


@dataclass(frozen=True)
class TrainConfig:
    """Every knob of SAE training, grouped (see the module docstring for the objective).

    ``d_sae`` dictionary size; ``k`` active latents (topk/batchtopk); ``l1_coefficient`` λ_L1
    (relu); ``l0_coefficient`` λ_L0 (jumprelu); ``bandwidth`` ε and ``initial_threshold`` θ₀
    (jumprelu); ``unit_norm_decoder`` keeps decoder rows at norm 1 (gradient projected onto the
    sphere, rows renormalised after each step); ``auxk_alpha`` α_aux (None: 1/32 for
    topk/batchtopk, 0 otherwise) with ``auxk_k`` latents (None: d_in // 2); ``dead_after``
    inputs without firing mark a latent dead; ``idempotency_lambda`` λ_idem and
    ``idempotency_grad`` which terms get gradients.
    """

    architecture: Architecture = "topk"
    d_sae: int = 256
    k: int = 8
    l1_coefficient: float = 1.0
    l0_coefficient: float = 1.0
    bandwidth: float = 0.2
    initial_threshold: float = 0.5
    sparsity_warmup_fraction: float = 0.1
    unit_norm_decoder: bool = True
    auxk_alpha: float | None = None
    auxk_k: int | None = None
    dead_after: int = 20_000
    idempotency_lambda: float = 0.0
    idempotency_grad: Literal["reencode", "full"] = "reencode"
    lr: float = 3e-3
    batch_size: int = 256
    n_steps: int = 2000
    grad_clip: float = 1.0
    log_every: int = 50

    def validate(self) -> TrainConfig:
        checks = [
            (self.architecture in ARCHITECTURES, f"architecture in {ARCHITECTURES}"),
            (self.d_sae >= 1, "d_sae >= 1"),
            (1 <= self.k <= self.d_sae, "1 <= k <= d_sae"),
            (self.l1_coefficient >= 0 and self.l0_coefficient >= 0, "sparsity coefficients >= 0"),
            (self.bandwidth > 0 and self.initial_threshold > 0, "bandwidth, initial_threshold > 0"),
            (0 <= self.sparsity_warmup_fraction <= 1, "sparsity_warmup_fraction in [0, 1]"),
            (self.auxk_alpha is None or self.auxk_alpha >= 0, "auxk_alpha >= 0"),
            (self.auxk_k is None or self.auxk_k >= 1, "auxk_k >= 1"),
            (self.dead_after >= 1, "dead_after >= 1"),
            (self.idempotency_lambda >= 0, "idempotency_lambda >= 0"),
            (self.idempotency_grad in ("reencode", "full"), "idempotency_grad reencode|full"),
            (self.lr > 0 and self.batch_size >= 1 and self.n_steps >= 1, "lr, batch, steps > 0"),
            (self.grad_clip > 0 and self.log_every >= 1, "grad_clip > 0, log_every >= 1"),
        ]
        for ok, rule in checks:
            if not ok:
                raise InputError(f"SAE training config violates '{rule}'. Got {asdict(self)}.")
        return self

    @property
    def effective_auxk_alpha(self) -> float:
        if self.auxk_alpha is not None:
            return self.auxk_alpha
        return 1.0 / 32.0 if self.architecture in ("topk", "batchtopk") else 0.0


def normalization_scale(x: torch.Tensor) -> float:
    """The scalar s with E‖s·x‖² = d_in (unit variance per coordinate on average).

    Train on s·x; divide reconstructions by s to return to the model's scale.
    """
    if x.dim() != 2 or x.shape[0] == 0:
        raise InputError(f"Activations must be a non-empty [n, d_in] tensor. Got {tuple(x.shape)}.")
    msq = float(x.double().pow(2).sum(-1).mean())
    if msq <= 0:
        raise InputError("Activations are all zero; they cannot be normalised.")
    return (x.shape[1] / msq) ** 0.5


class SAETrainer:
    """Train one SAE: ``SAETrainer(TrainConfig(...)).fit(acts, generator=g)``.

    ``fit`` accepts a tensor [n, d_in] (shuffled minibatches, reshuffled each epoch) or an
    iterable of [m, d_in] chunks (an activation stream; each chunk is shuffled and cut into
    minibatches, and the stream is read once or until ``n_steps``). Learned state: ``sae_``,
    ``history_`` (dicts every ``log_every`` steps), ``tokens_since_fired_``, ``dead_mask_``.
    """

    def __init__(self, config: TrainConfig | None = None) -> None:
        self.config = config

    # -- data ------------------------------------------------------------------------
    def _batches(self, data: Any, generator: torch.Generator) -> Iterator[torch.Tensor]:
        cfg = self.config
        assert cfg is not None
        if isinstance(data, torch.Tensor):
            n = data.shape[0]
            while True:
                perm = torch.randperm(n, generator=generator)
                for start in range(0, n - cfg.batch_size + 1, cfg.batch_size):
                    yield data[perm[start : start + cfg.batch_size]]
                if n < cfg.batch_size:
                    yield data[perm]
        else:
            for chunk in data:
                chunk = torch.as_tensor(chunk, dtype=torch.float32)
                perm = torch.randperm(chunk.shape[0], generator=generator)
                for start in range(0, chunk.shape[0], cfg.batch_size):
                    yield chunk[perm[start : start + cfg.batch_size]]

    # -- training ---------------------------------------------------------------------
    def fit(
        self,
        data: torch.Tensor | Iterable[torch.Tensor],
        *,
        generator: torch.Generator | None = None,
        progress: Progress | None = None,
        init_sae: SparseAutoencoder | None = None,
    ) -> SAETrainer:
        """Train on ``data`` (already normalised, see :func:`normalization_scale`); returns self."""
        cfg = (self.config or TrainConfig()).validate()
        self.config = cfg
        gen = generator if generator is not None else torch.Generator().manual_seed(0)
        if isinstance(data, torch.Tensor):
            if data.dim() != 2 or data.shape[0] == 0:
                raise InputError(
                    f"Training activations must be a non-empty [n, d_in] tensor. Got {tuple(data.shape)}."
                )
            data = data.to(torch.float32)
            d_in = data.shape[1]
            first = data
        else:
            stream = iter(data)
            try:
                first = torch.as_tensor(next(stream), dtype=torch.float32)
            except StopIteration:
                raise InputError("The activation stream is empty.") from None
            d_in = first.shape[-1]
            data = _chain(first, stream)
        sae = init_sae or SparseAutoencoder(
            d_in,
            cfg.d_sae,
            cfg.architecture,
            k=cfg.k if cfg.architecture in ("topk", "batchtopk") else None,
            bandwidth=cfg.bandwidth,
            initial_threshold=cfg.initial_threshold,
            generator=gen,
        )
        with torch.no_grad():
            if init_sae is None:
                sae.b_dec.copy_(first.mean(0))
        sae.train()
        opt = torch.optim.Adam(sae.parameters(), lr=cfg.lr)
        tsf = torch.zeros(cfg.d_sae, dtype=torch.long)
        history: list[dict[str, float]] = []
        alpha_aux = cfg.effective_auxk_alpha
        k_aux = cfg.auxk_k or max(1, d_in // 2)
        warm = max(1, round(cfg.sparsity_warmup_fraction * cfg.n_steps))
        decay_start = int(0.8 * cfg.n_steps)
        steps: Iterable[int] = range(cfg.n_steps)
        if progress is not None:
            steps = progress(steps, description=f"train {cfg.architecture} SAE")
        batches = self._batches(data, gen)
        done = 0
        for step in steps:
            try:
                x = next(batches)
            except StopIteration:
                log.info("activation stream ended after %d steps", step)
                break
            frac = (cfg.n_steps - step) / max(1, cfg.n_steps - decay_start)
            for group in opt.param_groups:
                group["lr"] = cfg.lr * min(1.0, frac)
            sparsity_scale = min(1.0, (step + 1) / warm)
            terms, z = self._loss_terms(
                sae, x, tsf >= cfg.dead_after, sparsity_scale, alpha_aux, k_aux
            )
            loss = torch.stack(list(terms.values())).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.unit_norm_decoder:
                sae.remove_parallel_decoder_grad()
            torch.nn.utils.clip_grad_norm_(sae.parameters(), cfg.grad_clip)
            opt.step()
            if cfg.unit_norm_decoder:
                sae.normalize_decoder()
            sae.clamp_threshold()
            fired = (z.detach() > 0).any(0)
            tsf += x.shape[0]
            tsf[fired] = 0
            if cfg.architecture == "batchtopk" and step >= cfg.n_steps // 2:
                sae.update_batch_threshold(z.detach())
            if step % cfg.log_every == 0 or step == cfg.n_steps - 1:
                row = {"step": float(step)}
                row.update({name: float(v.detach()) for name, v in terms.items()})
                row["l0"] = float((z.detach() != 0).sum(-1).double().mean())
                row["dead_fraction"] = float((tsf >= cfg.dead_after).double().mean())
                history.append(row)
            done = step + 1
        sae.eval()
        self.sae_ = sae
        self.history_ = history
        self.tokens_since_fired_ = tsf
        self.dead_mask_ = tsf >= cfg.dead_after
        self.n_steps_ = done
        return self

    def _loss_terms(
        self,
        sae: SparseAutoencoder,
        x: torch.Tensor,
        dead: torch.Tensor,
        sparsity_scale: float,
        alpha_aux: float,
        k_aux: int,
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        cfg = self.config
        assert cfg is not None
        pre = sae.pre_activations(x)
        z = sae.activate(pre)
        x_hat = sae.decode(z)
        err = x - x_hat
        terms: dict[str, torch.Tensor] = {"mse": err.pow(2).sum(-1).mean()}
        if cfg.architecture == "relu":
            penalty = (z.abs() * sae.W_dec.norm(dim=1)).sum(-1).mean()
            terms["l1"] = sparsity_scale * cfg.l1_coefficient * penalty
        elif cfg.architecture == "jumprelu":
            l0 = StepFunction.apply(pre, sae.threshold, sae.bandwidth).sum(-1).mean()
            terms["l0"] = sparsity_scale * cfg.l0_coefficient * l0
        if alpha_aux > 0 and bool(dead.any()):
            e = err.detach()
            dead_pre = torch.where(dead, pre, torch.full_like(pre, -torch.inf))
            kk = min(k_aux, int(dead.sum()))
            z_aux = topk_activation(dead_pre, kk).nan_to_num(0.0)
            e_hat = z_aux @ sae.W_dec
            denom = e.pow(2).sum(-1).mean().clamp_min(1e-12)
            terms["auxk"] = alpha_aux * (e - e_hat).pow(2).sum(-1).mean() / denom
        if cfg.idempotency_lambda > 0:
            terms["idempotency"] = cfg.idempotency_lambda * idempotency_penalty(
                sae, z, cfg.idempotency_grad
            )
        return terms, z

    # -- state ------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "sae_"):
            raise NotFittedError("This SAETrainer is not fitted yet: call fit(activations) first.")

    @property
    def sae(self) -> SparseAutoencoder:
        self._check_fitted()
        return self.sae_


def idempotency_penalty(
    sae: SparseAutoencoder, z: torch.Tensor, grad: Literal["reencode", "full"] = "reencode"
) -> torch.Tensor:
    """Mean over the batch of ‖E(D(z)) − z‖² (see the module docstring for ``grad``)."""
    if grad == "reencode":
        target = z.detach()
        z2 = sae.encode(sae.decode(target))
    else:
        target = z
        z2 = sae.encode(sae.decode(z))
    return (z2 - target).pow(2).sum(-1).mean()


def _chain(first: torch.Tensor, rest: Iterator[Any]) -> Iterator[torch.Tensor]:
    yield first
    yield from rest
