"""Sparse autoencoder architectures: ReLU + L1, TopK, BatchTopK and JumpReLU.

One module, :class:`SparseAutoencoder`, in the SAELens parameter layout::

    pre  = (x - b_dec·[apply_b_dec_to_input]) @ W_enc + b_enc      W_enc [d_in, d_sae]
    z    = act(pre)                                                 (per architecture)
    x̂    = z @ W_dec + b_dec                                        W_dec [d_sae, d_in]

Activations (``act``):

* ``relu``      z = ReLU(pre); trained with an L1 penalty Σ|z_i|·‖W_dec,i‖.
* ``topk``      z = ReLU(TopK_k(pre)): exactly the k largest pre-activations per row (Gao et al.).
* ``batchtopk`` training: the k·B largest ReLU'd pre-activations over the whole batch (Bussmann
  et al.); inference: z = pre·1[pre > θ] with θ the running mean of the smallest kept value.
* ``jumprelu``  z = pre·H(pre − θ), learned θ_i > 0, clamped at 1e-6 (Rajamanoharan et al.);
  trained through straight-through estimators (:class:`JumpReLUFunction`, :class:`StepFunction`)
  with a rectangle kernel of bandwidth ε.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from trustlab.core.errors import InputError

__all__ = [
    "ARCHITECTURES",
    "Architecture",
    "JumpReLUFunction",
    "SparseAutoencoder",
    "StepFunction",
    "batch_topk",
    "rectangle",
    "topk_activation",
]

Architecture = Literal["relu", "topk", "batchtopk", "jumprelu"]
ARCHITECTURES: tuple[str, ...] = ("relu", "topk", "batchtopk", "jumprelu")


def rectangle(u: torch.Tensor) -> torch.Tensor:
    """The rectangle kernel K(u) = 1[-1/2 < u < 1/2] of the JumpReLU straight-through estimator."""
    return ((u > -0.5) & (u < 0.5)).to(u.dtype)


class JumpReLUFunction(torch.autograd.Function):
    """JumpReLU_θ(z) = z·H(z − θ) with the pseudo-derivative of Rajamanoharan et al. (2024).

    ∂/∂z = H(z − θ);  ∂/∂θ = −(θ/ε)·K((z − θ)/ε), summed over the batch dimensions.
    """

    @staticmethod
    def forward(ctx, pre: torch.Tensor, threshold: torch.Tensor, bandwidth: float):  # type: ignore[override]
        ctx.save_for_backward(pre, threshold)
        ctx.bandwidth = bandwidth
        return pre * (pre > threshold).to(pre.dtype)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # type: ignore[override]
        pre, threshold = ctx.saved_tensors
        eps = ctx.bandwidth
        grad_pre = grad_out * (pre > threshold).to(pre.dtype)
        local = -(threshold / eps) * rectangle((pre - threshold) / eps)
        grad_threshold = (grad_out * local).reshape(-1, pre.shape[-1]).sum(0)
        return grad_pre, grad_threshold, None


class StepFunction(torch.autograd.Function):
    """The Heaviside step H(z − θ) (the L0 count) with ∂/∂θ = −(1/ε)·K((z − θ)/ε), ∂/∂z = 0."""

    @staticmethod
    def forward(ctx, pre: torch.Tensor, threshold: torch.Tensor, bandwidth: float):  # type: ignore[override]
        ctx.save_for_backward(pre, threshold)
        ctx.bandwidth = bandwidth
        return (pre > threshold).to(pre.dtype)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # type: ignore[override]
        pre, threshold = ctx.saved_tensors
        eps = ctx.bandwidth
        local = -(1.0 / eps) * rectangle((pre - threshold) / eps)
        grad_threshold = (grad_out * local).reshape(-1, pre.shape[-1]).sum(0)
        return torch.zeros_like(pre), grad_threshold, None


def topk_activation(pre: torch.Tensor, k: int) -> torch.Tensor:
    """ReLU(TopK_k(pre)) along the last axis: at most k non-zeros per row (ties broken by index)."""
    values, idx = pre.topk(k, dim=-1, sorted=False)
    return torch.zeros_like(pre).scatter(-1, idx, values.relu())


def batch_topk(pre: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k·B largest ReLU'd entries of a [B, d_sae] batch in total (rows may differ)."""
    flat = pre.relu().reshape(-1)
    n_keep = min(k * pre.reshape(-1, pre.shape[-1]).shape[0], flat.numel())
    values, idx = flat.topk(n_keep, sorted=False)
    return torch.zeros_like(flat).scatter(0, idx, values).reshape(pre.shape)


class SparseAutoencoder(nn.Module):
    """A sparse autoencoder in the SAELens layout (see the module docstring).

    Parameters: ``d_in`` (model width), ``d_sae`` (dictionary size), ``architecture``,
    ``k`` (active latents per input for TopK/BatchTopK), ``bandwidth`` (JumpReLU's ε),
    ``initial_threshold`` (JumpReLU's θ at initialisation), ``apply_b_dec_to_input``.
    Initialisation: decoder rows uniform on the unit sphere, encoder = decoder transposed
    (Conerly et al.; Gao et al.), biases zero. Pass a ``generator`` for reproducibility.
    """

    def __init__(
        self,
        d_in: int,
        d_sae: int,
        architecture: Architecture = "topk",
        *,
        k: int | None = None,
        bandwidth: float = 0.05,
        initial_threshold: float = 0.05,
        apply_b_dec_to_input: bool = True,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        if architecture not in ARCHITECTURES:
            raise InputError(
                f"The 'architecture' of an SAE must be one of {', '.join(ARCHITECTURES)}. "
                f"Got {architecture!r}."
            )
        if d_in < 1 or d_sae < 1:
            raise InputError(f"An SAE needs d_in >= 1 and d_sae >= 1. Got {d_in}, {d_sae}.")
        if architecture in ("topk", "batchtopk") and (k is None or not 1 <= k <= d_sae):
            raise InputError(
                f"The 'k' parameter of a {architecture} SAE must be in [1, d_sae={d_sae}]. Got {k}."
            )
        if bandwidth <= 0 or initial_threshold <= 0:
            raise InputError(
                "JumpReLU's 'bandwidth' and 'initial_threshold' must be > 0. "
                f"Got {bandwidth}, {initial_threshold}."
            )
        self.d_in, self.d_sae, self.architecture = d_in, d_sae, architecture
        self.k = k
        self.bandwidth = bandwidth
        self.apply_b_dec_to_input = apply_b_dec_to_input
        w = torch.randn(d_sae, d_in, generator=generator, dtype=dtype)
        w = w / w.norm(dim=1, keepdim=True)
        self.W_dec = nn.Parameter(w.clone())
        self.W_enc = nn.Parameter(w.t().clone())
        self.b_enc = nn.Parameter(torch.zeros(d_sae, dtype=dtype))
        self.b_dec = nn.Parameter(torch.zeros(d_in, dtype=dtype))
        if architecture == "jumprelu":
            self.jump_threshold = nn.Parameter(torch.full((d_sae,), initial_threshold, dtype=dtype))
        # BatchTopK's inference threshold θ (a running mean, not a learned parameter)
        self.register_buffer("batch_threshold", torch.zeros((), dtype=dtype))
        self.register_buffer("batch_threshold_count", torch.zeros((), dtype=torch.long))

    # -- the maps ----------------------------------------------------------------
    @property
    def threshold(self) -> torch.Tensor:
        """Per-latent thresholds θ (JumpReLU: learned; BatchTopK: the running scalar θ)."""
        if self.architecture == "jumprelu":
            return self.jump_threshold
        if self.architecture == "batchtopk":
            return self.batch_threshold.expand(self.d_sae)
        return torch.zeros(self.d_sae, dtype=self.W_enc.dtype, device=self.W_enc.device)

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input(x)
        centred = x - self.b_dec if self.apply_b_dec_to_input else x
        return centred @ self.W_enc + self.b_enc

    def activate(self, pre: torch.Tensor) -> torch.Tensor:
        """The architecture's sparsifying activation applied to pre-activations."""
        arch = self.architecture
        if arch == "relu":
            return pre.relu()
        if arch == "topk":
            return topk_activation(pre, int(self.k))  # type: ignore[arg-type]
        if arch == "batchtopk":
            if self.training:
                return batch_topk(pre, int(self.k))  # type: ignore[arg-type]
            return pre * (pre > self.batch_threshold).to(pre.dtype)
        return JumpReLUFunction.apply(pre, self.threshold, self.bandwidth)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Latents z = E(x), shape [..., d_sae]."""
        return self.activate(self.pre_activations(x))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Reconstruction D(z) = z @ W_dec + b_dec, shape [..., d_in]."""
        if z.shape[-1] != self.d_sae:
            raise InputError(f"Latents must have last dimension d_sae={self.d_sae}. Got {z.shape}.")
        return z @ self.W_dec + self.b_dec

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))

    # -- decoder norms and BatchTopK's threshold --------------------------------------
    def decoder_norms(self) -> torch.Tensor:
        return self.W_dec.detach().norm(dim=1)

    @torch.no_grad()
    def normalize_decoder(self) -> None:
        """Rescale every decoder row to unit norm (dead all-zero rows are left alone)."""
        norms = self.W_dec.norm(dim=1, keepdim=True)
        self.W_dec.div_(torch.where(norms > 0, norms, torch.ones_like(norms)))

    @torch.no_grad()
    def remove_parallel_decoder_grad(self) -> None:
        """Project out the component of each decoder row's gradient along the row itself.

        With unit-norm rows this keeps the Adam step tangent to the sphere (Bricken et al.).
        """
        if self.W_dec.grad is None:
            return
        w = self.W_dec / self.W_dec.norm(dim=1, keepdim=True).clamp_min(1e-12)
        parallel = (self.W_dec.grad * w).sum(1, keepdim=True)
        self.W_dec.grad.sub_(parallel * w)

    @torch.no_grad()
    def clamp_threshold(self, minimum: float = 1e-6) -> None:
        """Keep JumpReLU thresholds positive after an optimiser step."""
        if self.architecture == "jumprelu":
            self.jump_threshold.clamp_(min=minimum)

    @torch.no_grad()
    def update_batch_threshold(self, z: torch.Tensor) -> None:
        """Fold the smallest positive latent of a training batch into BatchTopK's running mean θ."""
        positive = z[z > 0]
        if positive.numel() == 0:
            return
        n = int(self.batch_threshold_count) + 1
        self.batch_threshold.add_((positive.min() - self.batch_threshold) / n)
        self.batch_threshold_count.fill_(n)

    def _check_input(self, x: torch.Tensor) -> None:
        if not isinstance(x, torch.Tensor) or x.shape[-1] != self.d_in:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise InputError(f"SAE inputs must be tensors [..., d_in={self.d_in}]. Got {shape}.")

    def extra_repr(self) -> str:
        k = f", k={self.k}" if self.k is not None else ""
        return f"d_in={self.d_in}, d_sae={self.d_sae}, architecture={self.architecture!r}{k}"
