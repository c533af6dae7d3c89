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

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from trustlab.core.errors import InputError
from trustlab.core.validation import as_float_array, check_choice, check_scalar

__all__ = [
    "ARCHITECTURES",
    "Architecture",
    "JumpReLUFunction",
    "SparseAutoencoder",
    "StepFunction",
    "as_activations",
    "batch_topk",
    "rectangle",
    "topk_activation",
]

Architecture = Literal["relu", "topk", "batchtopk", "jumprelu"]
ARCHITECTURES: tuple[str, ...] = ("relu", "topk", "batchtopk", "jumprelu")


def as_activations(
    x: Any,
    name: str,
    where: str,
    *,
    ndim: int | None = 2,
    width: int | None = None,
    dtype: torch.dtype | None = None,
    allow_empty: bool = False,
) -> torch.Tensor:
    """``x`` as a finite floating tensor: the one conversion rule of this package.

    torch tensors are kept (their autograd graph too; integer tensors become float32); numpy
    arrays and nested lists of numbers become float32 tensors; strings, mappings, iterators and
    booleans are refused. ``ndim`` (None: any, >= 1) and ``width`` (the last dimension) are
    checked; ``dtype`` casts (e.g. float64 inputs to a float32 SAE). NaN/inf are refused: one
    NaN in an SAE's inputs makes every weight NaN.
    """
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.bool or x.is_complex():
            raise InputError(f"The '{name}' parameter of {where} must be real numbers. "
                             f"Got a tensor of dtype {x.dtype}.")
        t = x if x.is_floating_point() else x.to(torch.float32)
    elif isinstance(x, str | bytes | Mapping) or x is None:
        raise InputError(f"The '{name}' parameter of {where} must be a tensor or an array. "
                         f"Got {type(x).__name__}.")
    else:
        arr = as_float_array(x, name, where, allow_empty=True, allow_nonfinite=True)
        t = torch.as_tensor(np.ascontiguousarray(arr), dtype=torch.float32)  # C order, as tensors
    if ndim is not None and t.dim() != ndim:
        raise InputError(f"The '{name}' parameter of {where} must be {ndim}-D. "
                         f"Got shape {tuple(t.shape)}.")
    if t.dim() == 0:
        raise InputError(f"The '{name}' parameter of {where} must have at least one dimension.")
    if width is not None and t.shape[-1] != width:
        raise InputError(f"The '{name}' parameter of {where} must have last dimension {width}. "
                         f"Got shape {tuple(t.shape)}.")
    if not allow_empty and t.numel() == 0:
        raise InputError(f"The '{name}' parameter of {where} must not be empty. "
                         f"Got shape {tuple(t.shape)}.")
    if not bool(torch.isfinite(t.detach()).all()):
        bad = int((~torch.isfinite(t.detach())).sum())
        raise InputError(f"The '{name}' parameter of {where} must be finite. "
                         f"Got {bad} NaN or infinite value(s).")
    return t if dtype is None else t.to(dtype)


def rectangle(u: torch.Tensor) -> torch.Tensor:
    """The rectangle kernel K(u) = 1[-1/2 < u < 1/2] of the JumpReLU straight-through estimator."""
    u = as_activations(u, "u", "rectangle", ndim=None, allow_empty=True)
    return ((u > -0.5) & (u < 0.5)).to(u.dtype)


class JumpReLUFunction(torch.autograd.Function):
    """JumpReLU_θ(z) = z·H(z − θ) with the pseudo-derivative of Rajamanoharan et al. (2024).

    ∂/∂z = H(z − θ);  ∂/∂θ = −(θ/ε)·K((z − θ)/ε), summed over the batch dimensions.
    """

    @staticmethod
    def forward(ctx, pre: torch.Tensor, threshold: torch.Tensor, bandwidth: float):  # type: ignore[override]
        pre, threshold, bandwidth = _step_inputs(pre, threshold, bandwidth, "JumpReLUFunction")
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
        pre, threshold, bandwidth = _step_inputs(pre, threshold, bandwidth, "StepFunction")
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


def _step_inputs(
    pre: Any, threshold: Any, bandwidth: Any, where: str
) -> tuple[torch.Tensor, torch.Tensor, float]:
    pre = as_activations(pre, "pre", where, ndim=None)
    threshold = as_activations(threshold, "threshold", where, ndim=1, width=pre.shape[-1],
                               dtype=pre.dtype)
    return pre, threshold, check_scalar(bandwidth, "bandwidth", where, lo=0.0, closed="neither")


def topk_activation(pre: torch.Tensor, k: int) -> torch.Tensor:
    """ReLU(TopK_k(pre)) along the last axis: at most k non-zeros per row (ties broken by index)."""
    pre = as_activations(pre, "pre", "topk_activation", ndim=None)
    return _topk(pre, check_scalar(k, "k", "topk_activation", kind=int, lo=1, hi=pre.shape[-1]))


def _topk(pre: torch.Tensor, k: int) -> torch.Tensor:
    """``topk_activation`` without the checks (internal: AuxK masks with -inf)."""
    values, idx = pre.topk(k, dim=-1, sorted=False)
    return torch.zeros_like(pre).scatter(-1, idx, values.relu())


def batch_topk(pre: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k·B largest ReLU'd entries of a [B, d_sae] batch in total (rows may differ)."""
    pre = as_activations(pre, "pre", "batch_topk", ndim=None)
    return _batch_topk(pre, check_scalar(k, "k", "batch_topk", kind=int, lo=1, hi=pre.shape[-1]))


def _batch_topk(pre: torch.Tensor, k: int) -> torch.Tensor:
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
        where = "SparseAutoencoder"
        check_choice(architecture, "architecture", ARCHITECTURES, where)
        d_in = check_scalar(d_in, "d_in", where, kind=int, lo=1)
        d_sae = check_scalar(d_sae, "d_sae", where, kind=int, lo=1)
        if architecture in ("topk", "batchtopk"):
            if k is None:
                raise InputError(f"The 'k' parameter of a {architecture} SAE must be given "
                                 f"(an integer in [1, d_sae={d_sae}]).")
            k = check_scalar(k, "k", f"a {architecture} SAE", kind=int, lo=1, hi=d_sae)
        bandwidth = check_scalar(bandwidth, "bandwidth", where, lo=0.0, closed="neither")
        initial_threshold = check_scalar(initial_threshold, "initial_threshold", where, lo=0.0,
                                         closed="neither")
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise InputError(f"The 'dtype' parameter of {where} must be a floating torch dtype. "
                             f"Got {dtype!r}.")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise InputError(f"The 'generator' parameter of {where} must be a torch.Generator. "
                             f"Got {type(generator).__name__}.")
        self.d_in, self.d_sae, self.architecture = d_in, d_sae, architecture
        self.k = k
        self.bandwidth = bandwidth
        self.apply_b_dec_to_input = apply_b_dec_to_input
        try:
            w = torch.randn(d_sae, d_in, generator=generator, dtype=dtype)
        except (RuntimeError, MemoryError):
            gib = 3 * d_sae * d_in * torch.finfo(dtype).bits / 8 / 2**30
            raise InputError(f"An SAE with d_in={d_in} and d_sae={d_sae} needs about {gib:.3g} "
                             "GiB for its two weight matrices; it could not be allocated.") from None
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
        """``(x - b_dec) @ W_enc + b_enc`` (inputs are cast to the SAE's dtype)."""
        x = as_activations(x, "x", "SparseAutoencoder.encode", ndim=None, width=self.d_in,
                           dtype=self.W_enc.dtype)
        centred = x - self.b_dec if self.apply_b_dec_to_input else x
        return centred @ self.W_enc + self.b_enc

    def activate(self, pre: torch.Tensor) -> torch.Tensor:
        """The architecture's sparsifying activation applied to pre-activations."""
        arch = self.architecture
        if arch == "relu":
            return pre.relu()
        if arch == "topk":
            return _topk(pre, int(self.k))  # type: ignore[arg-type]
        if arch == "batchtopk":
            if self.training:
                return _batch_topk(pre, int(self.k))  # type: ignore[arg-type]
            return pre * (pre > self.batch_threshold).to(pre.dtype)
        return JumpReLUFunction.apply(pre, self.threshold, self.bandwidth)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Latents z = E(x), shape [..., d_sae]."""
        return self.activate(self.pre_activations(x))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Reconstruction D(z) = z @ W_dec + b_dec, shape [..., d_in]."""
        z = as_activations(z, "z", "SparseAutoencoder.decode", ndim=None, width=self.d_sae,
                           dtype=self.W_dec.dtype)
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

    def extra_repr(self) -> str:
        k = f", k={self.k}" if self.k is not None else ""
        return f"d_in={self.d_in}, d_sae={self.d_sae}, architecture={self.architecture!r}{k}"
