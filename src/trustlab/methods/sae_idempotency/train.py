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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from trustlab.core.errors import InputError, NotFittedError, SolverError
from trustlab.core.validation import check_choice, check_scalar
from trustlab.methods.sae_idempotency.sae import (
    ARCHITECTURES,
    Architecture,
    SparseAutoencoder,
    StepFunction,
    _topk,
    as_activations,
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

    def __post_init__(self) -> None:
        where = "TrainConfig"
        check_choice(self.architecture, "architecture", ARCHITECTURES, where)
        check_choice(self.idempotency_grad, "idempotency_grad", ("reencode", "full"), where)
        for name in ("unit_norm_decoder",):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"The '{name}' parameter of {where} must be True or False. "
                                 f"Got {getattr(self, name)!r}.")
        ints = {"d_sae": 1, "k": 1, "dead_after": 1, "batch_size": 1, "n_steps": 1, "log_every": 1}
        floats = {"l1_coefficient": ("left", 0.0), "l0_coefficient": ("left", 0.0),
                  "bandwidth": ("neither", 0.0), "initial_threshold": ("neither", 0.0),
                  "idempotency_lambda": ("left", 0.0), "lr": ("neither", 0.0),
                  "grad_clip": ("neither", 0.0)}
        checked: dict[str, Any] = {
            name: check_scalar(getattr(self, name), name, where, kind=int, lo=lo)
            for name, lo in ints.items()
        }
        for name, (closed, lo) in floats.items():
            checked[name] = check_scalar(getattr(self, name), name, where, lo=lo, closed=closed)
        checked["sparsity_warmup_fraction"] = check_scalar(
            self.sparsity_warmup_fraction, "sparsity_warmup_fraction", where, lo=0.0, hi=1.0)
        if self.auxk_alpha is not None:
            checked["auxk_alpha"] = check_scalar(self.auxk_alpha, "auxk_alpha", where, lo=0.0)
        if self.auxk_k is not None:
            checked["auxk_k"] = check_scalar(self.auxk_k, "auxk_k", where, kind=int, lo=1)
        if checked["k"] > checked["d_sae"]:
            raise InputError(f"The 'k' parameter of {where} must be <= d_sae={checked['d_sae']}. "
                             f"Got {checked['k']}.")
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @property
    def effective_auxk_alpha(self) -> float:
        if self.auxk_alpha is not None:
            return self.auxk_alpha
        return 1.0 / 32.0 if self.architecture in ("topk", "batchtopk") else 0.0


def normalization_scale(x: torch.Tensor) -> float:
    """The scalar s with E‖s·x‖² = d_in (unit variance per coordinate on average).

    Train on s·x; divide reconstructions by s to return to the model's scale.
    """
    x = as_activations(x, "x", "normalization_scale")
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
    @staticmethod
    def _as_data(data: Any) -> tuple[torch.Tensor | None, Iterator[torch.Tensor] | None]:
        """One dataset [n, d_in], or a stream of [m, d_in] chunks, by an explicit rule.

        A tensor, a numpy array or a nested list of numbers is one dataset. A list or tuple
        whose items are all 2-D tensors/arrays, or any other iterable (a generator, a
        DataLoader-like object), is a stream of chunks. Nothing else is accepted.
        """
        where = "SAETrainer.fit"
        if isinstance(data, torch.Tensor | np.ndarray):
            return as_activations(data, "data", where, dtype=torch.float32), None
        if isinstance(data, list | tuple):
            if data and all(isinstance(c, torch.Tensor | np.ndarray) and c.ndim == 2 for c in data):
                return None, iter(data)
            return as_activations(data, "data", where, dtype=torch.float32), None
        if isinstance(data, str | bytes | Mapping) or not isinstance(data, Iterable):
            raise InputError(
                f"The 'data' parameter of {where} must be activations [n, d_in] (a tensor, an "
                f"array or a list of rows) or an iterable of [m, d_in] chunks. "
                f"Got {type(data).__name__}."
            )
        return None, iter(data)

    def _batches(
        self, data: torch.Tensor | None, stream: Iterator[Any], d_in: int, generator: torch.Generator
    ) -> Iterator[torch.Tensor]:
        cfg = self.config
        assert cfg is not None
        if data is not None:
            n = data.shape[0]
            while True:
                perm = torch.randperm(n, generator=generator)
                for start in range(0, n - cfg.batch_size + 1, cfg.batch_size):
                    yield data[perm[start : start + cfg.batch_size]]
                if n < cfg.batch_size:
                    yield data[perm]
        else:
            for i, raw in enumerate(stream):
                chunk = as_activations(raw, f"data[{i}]", "SAETrainer.fit (a stream chunk)",
                                       width=d_in, dtype=torch.float32)
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
        """Train on ``data`` (already normalised, see :func:`normalization_scale`); returns self.

        ``data``: activations [n, d_in] (a tensor, a numpy array or a list of rows; shuffled
        minibatches, reshuffled every epoch) or a stream of [m, d_in] chunks (a list of 2-D
        tensors/arrays, a generator, any iterable; each chunk is shuffled and cut into
        minibatches; the stream is read once or until ``n_steps``). NaN/inf in any input is an
        InputError; a run whose loss or weights become non-finite stops with a SolverError.
        """
        where = "SAETrainer.fit"
        cfg = self.config if self.config is not None else TrainConfig()
        if not isinstance(cfg, TrainConfig):
            raise InputError(f"The 'config' of SAETrainer must be a TrainConfig. "
                             f"Got {type(cfg).__name__}.")
        self.config = cfg
        if generator is not None and not isinstance(generator, torch.Generator):
            raise InputError(f"The 'generator' parameter of {where} must be a torch.Generator. "
                             f"Got {type(generator).__name__}.")
        if progress is not None and not callable(progress):
            raise InputError(f"The 'progress' parameter of {where} must be callable.")
        gen = generator if generator is not None else torch.Generator().manual_seed(0)
        tensor, stream = self._as_data(data)
        if tensor is not None:
            first = tensor
        else:
            try:
                first = as_activations(next(stream), "data[0]",  # type: ignore[arg-type]
                                       f"{where} (a stream chunk)", dtype=torch.float32)
            except StopIteration:
                raise InputError("The activation stream is empty.") from None
            stream = _chain(first, stream)  # type: ignore[arg-type]
        d_in = first.shape[-1]
        if init_sae is not None and (not isinstance(init_sae, SparseAutoencoder)
                                     or init_sae.d_in != d_in or init_sae.d_sae != cfg.d_sae
                                     or init_sae.architecture != cfg.architecture):
            raise InputError(
                f"The 'init_sae' parameter of {where} must be a {cfg.architecture} "
                f"SparseAutoencoder with d_in={d_in} and d_sae={cfg.d_sae}. Got {init_sae!r}."
            )
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
        batches = self._batches(tensor, stream, d_in, gen)  # type: ignore[arg-type]
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
            if not bool(torch.isfinite(loss)):
                raise SolverError(f"SAE training diverged at step {step} (the loss is not finite); "
                                  "lower 'lr' or 'grad_clip'.")
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
        if not all(bool(torch.isfinite(p).all()) for p in sae.parameters()):
            raise SolverError("SAE training diverged (non-finite weights after the last step); "
                              "lower 'lr' or 'grad_clip'.")
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
            z_aux = _topk(dead_pre, kk).nan_to_num(0.0)
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
    check_choice(grad, "grad", ("reencode", "full"), "idempotency_penalty")
    if not isinstance(sae, SparseAutoencoder):
        raise InputError("The 'sae' parameter of idempotency_penalty must be a SparseAutoencoder. "
                         f"Got {type(sae).__name__}.")
    z = as_activations(z, "z", "idempotency_penalty", ndim=None, width=sae.d_sae)
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
