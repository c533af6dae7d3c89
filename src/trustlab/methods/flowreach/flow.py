"""Conditional flow matching on network outputs, with an ODE flow between latent and outputs.

The model learns a velocity field ``v(x, t)`` on standardised outputs by regressing the
straight-line target ``x1 - x0`` at ``x_t = (1 - t) x0 + t x1`` (``x0 ~ N(0, I)`` latent,
``x1`` a standardised output): the CFM loss with the linear (rectified / OT) path and
``sigma_min = 0``. ``decode`` integrates ``dx/dt = v`` from t = 0 to 1 (latent -> output),
``encode`` from 1 to 0 (output -> latent), both with torchdiffeq's fixed-step RK4.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numpy.typing import NDArray
from torchdiffeq import odeint

from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.validation import check_scalar

__all__ = ["FlowMatching", "VelocityMLP"]


class VelocityMLP(torch.nn.Module):
    """A small MLP ``(x, t) -> v``; time enters through a few sinusoidal features."""

    def __init__(self, dim: int, hidden: int = 64, n_layers: int = 3) -> None:
        for name, v in (("dim", dim), ("hidden", hidden), ("n_layers", n_layers)):
            check_scalar(v, name, "VelocityMLP", kind=int, lo=1, hi=10**5)
        super().__init__()
        self.freqs = torch.arange(1, 4, dtype=torch.float32) * math.pi
        layers: list[torch.nn.Module] = []
        width = dim + 1 + 2 * len(self.freqs)
        for _ in range(n_layers):
            layers += [torch.nn.Linear(width, hidden), torch.nn.SiLU()]
            width = hidden
        layers.append(torch.nn.Linear(width, dim))
        self.net = torch.nn.Sequential(*layers)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        t = t.reshape(-1, 1).expand(x.shape[0], 1)
        feats = [x, t, torch.sin(t * self.freqs), torch.cos(t * self.freqs)]
        return self.net(torch.cat(feats, dim=1))

    def frozen(self) -> _FrozenVelocity:
        """The same function for inference with a scalar ``t`` (no autograd), about 3x faster.

        Splits the first layer into its ``x`` and time-feature parts and caches the time part
        per ``t`` (an ODE solver evaluates a few fixed times); the weights must not change
        afterwards.
        """
        return _FrozenVelocity(self)


class _FrozenVelocity:
    def __init__(self, mlp: VelocityMLP) -> None:
        lins = [m for m in mlp.net if isinstance(m, torch.nn.Linear)]
        first = lins[0].weight.detach()
        self.dim = first.shape[1] - 1 - 2 * len(mlp.freqs)
        self.wx = first[:, : self.dim].T.contiguous()
        self.wt = first[:, self.dim :].contiguous()
        self.b1 = lins[0].bias.detach()
        self.freqs = mlp.freqs
        self.rest = [(m.weight.detach().T.contiguous(), m.bias.detach()) for m in lins[1:]]
        self._time_bias: dict[float, torch.Tensor] = {}

    def __call__(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        key = float(t)
        bias = self._time_bias.get(key)
        if bias is None:
            tt = torch.tensor([key], dtype=torch.float32)
            feats = torch.cat([tt, torch.sin(tt * self.freqs), torch.cos(tt * self.freqs)])
            bias = self._time_bias[key] = self.wt @ feats + self.b1
        h = torch.nn.functional.silu(torch.addmm(bias, x, self.wx))
        for i, (w, b) in enumerate(self.rest):
            h = torch.addmm(b, h, w)
            if i < len(self.rest) - 1:
                h = torch.nn.functional.silu(h)
        return h


class FlowMatching:
    """A flow-matching generative model of output vectors (sklearn-style lifecycle).

    Parameters: ``hidden``/``n_layers`` size the velocity MLP; ``n_iters`` Adam steps of batch
    ``batch_size`` at learning rate ``lr`` train it; ``ode_steps`` RK4 steps integrate it.
    """

    def __init__(
        self,
        *,
        hidden: int = 64,
        n_layers: int = 3,
        n_iters: int = 400,
        batch_size: int = 256,
        lr: float = 3e-3,
        ode_steps: int = 8,
        seed: int = 0,
    ) -> None:
        self.hidden = hidden
        self.n_layers = n_layers
        self.n_iters = n_iters
        self.batch_size = batch_size
        self.lr = lr
        self.ode_steps = ode_steps
        self.seed = seed

    # -- training ------------------------------------------------------------------
    def fit(self, y: NDArray[np.floating]) -> FlowMatching:
        try:
            y = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError("The 'y' parameter of FlowMatching.fit must be a numeric (n, d) "
                             "array.") from None
        if y.ndim != 2 or len(y) < 2 or y.shape[1] < 1:
            raise InputError(f"FlowMatching.fit needs a 2-D array of >= 2 outputs. Got {y.shape}.")
        if not np.all(np.isfinite(y)):
            raise InputError("The 'y' parameter of FlowMatching.fit has NaN or infinite values.")
        for name in ("hidden", "n_layers", "n_iters", "batch_size", "ode_steps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise InputError(f"The '{name}' parameter of FlowMatching must be an integer "
                                 f">= 1. Got {v!r}.")
        if not (isinstance(self.lr, int | float) and np.isfinite(self.lr) and self.lr > 0):
            raise InputError(f"The 'lr' parameter of FlowMatching must be a positive number. "
                             f"Got {self.lr!r}.")
        self.mean_ = y.mean(axis=0)
        std = y.std(axis=0)
        self.std_ = np.where(std > 1e-9 * max(1.0, float(np.abs(y).max())), std, 1.0)
        self.dim_ = y.shape[1]
        gen = torch.Generator().manual_seed(self.seed)
        with torch.random.fork_rng(devices=[]):  # layer init uses torch's default stream
            torch.manual_seed(self.seed)
            self.velocity_ = VelocityMLP(self.dim_, self.hidden, self.n_layers)
        data = torch.as_tensor((y - self.mean_) / self.std_, dtype=torch.float32)
        try:  # the fused CPU kernel is ~20 % faster on these tiny models, same arithmetic
            opt = torch.optim.Adam(self.velocity_.parameters(), lr=self.lr, fused=True)
        except (RuntimeError, TypeError):
            opt = torch.optim.Adam(self.velocity_.parameters(), lr=self.lr)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(self.n_iters, 1))
        losses = []
        for _ in range(self.n_iters):
            idx = torch.randint(0, len(data), (min(self.batch_size, len(data)),), generator=gen)
            x1 = data[idx]
            x0 = torch.randn(x1.shape, generator=gen)
            t = torch.rand(len(x1), 1, generator=gen)
            xt = (1 - t) * x0 + t * x1
            loss = ((self.velocity_(xt, t) - (x1 - x0)) ** 2).sum(dim=1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
        self.velocity_.requires_grad_(False)
        self._frozen = self.velocity_.frozen()
        self.losses_ = np.array(losses)
        return self

    def _check(self, step: str) -> None:
        if not hasattr(self, "velocity_"):
            raise NotFittedError(f"Call FlowMatching.fit before {step}.")

    # -- flows -----------------------------------------------------------------------
    def _integrate(self, x: torch.Tensor, t0: float, t1: float) -> torch.Tensor:
        ts = torch.tensor([t0, t1], dtype=torch.float32)
        opts = {"step_size": abs(t1 - t0) / self.ode_steps}
        frozen = self._frozen
        with torch.no_grad():
            return odeint(lambda t, h: frozen(h, t), x, ts, method="rk4", options=opts)[-1]

    def decode_std(self, z: torch.Tensor) -> torch.Tensor:
        """Latent -> standardised output (torch, float32)."""
        self._check("decode_std")
        return self._integrate(z.to(torch.float32), 0.0, 1.0)

    def decode(self, z: NDArray[np.floating] | torch.Tensor) -> NDArray[np.float64]:
        """Latent points -> outputs in the original units."""
        out = self.decode_std(torch.as_tensor(np.asarray(z), dtype=torch.float32)).numpy()
        return out.astype(np.float64) * self.std_ + self.mean_

    def encode(self, y: NDArray[np.floating]) -> NDArray[np.float64]:
        """Outputs -> latent points (the inverse flow)."""
        self._check("encode")
        x = torch.as_tensor((np.asarray(y, dtype=np.float64) - self.mean_) / self.std_,
                            dtype=torch.float32)
        return self._integrate(x, 1.0, 0.0).numpy().astype(np.float64)

    def sample(self, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
        return self.decode(rng.standard_normal((n, getattr(self, "dim_", 1))))

    def neg_log_density(self, y: NDArray[np.floating]) -> NDArray[np.float64]:
        """``-log p(y)`` in standardised units, by the instantaneous change of variables.

        Integrates ``[x, logdet]`` from t = 1 to 0 with the exact divergence (one backward
        pass per output dimension; outputs are low-dimensional).
        """
        self._check("neg_log_density")
        x = torch.as_tensor((np.asarray(y, dtype=np.float64) - self.mean_) / self.std_,
                            dtype=torch.float32)
        d = x.shape[1]

        def rhs(t: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
            h, _ = state
            with torch.enable_grad():
                h = h.detach().requires_grad_(True)
                v = self.velocity_(h, t)
                div = torch.zeros(h.shape[0])
                for i in range(d):
                    div = div + torch.autograd.grad(v[:, i].sum(), h, retain_graph=True)[0][:, i]
            return v.detach(), div.detach()

        ts = torch.tensor([1.0, 0.0])
        opts = {"step_size": 1.0 / self.ode_steps}
        z, int_div = odeint(rhs, (x, torch.zeros(x.shape[0])), ts, method="rk4", options=opts)
        z, int_div = z[-1], int_div[-1]
        # log p1(x) = log p0(z) - int_0^1 div dt ; integrating 1 -> 0 gives int_div = -int_0^1
        log_p0 = -0.5 * (z**2).sum(dim=1) - 0.5 * d * math.log(2 * math.pi)
        return (-(log_p0 + int_div)).numpy().astype(np.float64)
