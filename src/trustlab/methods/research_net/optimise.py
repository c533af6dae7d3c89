"""Gradient ascent on all edge weights and budget splits, GNN-style.

``NetworkOptimiser`` maximises the model's total knowledge ``sum_i K_i`` over every agent's
budget split with Adam, a learning-rate schedule and restarts (random ones plus warm starts
from given configurations, e.g. the best fixed topology). It returns the best configuration
seen, so it never returns one worse than any starting point (warm starts are also scored
exactly, so a fixed configuration that the softmax can only approximate is kept as is). That
guarantee makes "the optimum beats the warm start" hold by construction; the random ("cold")
restarts, which never see a given configuration, are what to compare against fixed topologies
(``cold_objectives_``, ``findings.optimisation_beats_fixed``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

import numpy as np
import torch

from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.runtime import torch_runtime
from trustlab.core.validation import check_choice, check_scalar
from trustlab.methods.research_net.budget import (
    DTYPE,
    Budget,
    Support,
    project_budget,
    softmax_budget,
)
from trustlab.methods.research_net.model import ResearchModel, gini

__all__ = ["NetworkOptimiser", "OptimiserSettings", "Restart"]

_LOG_FLOOR = 1e-9  # softmax logits of a warm start: log(max(share, floor))


@dataclass(frozen=True)
class Restart:
    """One restart: where it started, its learning curve, its best value and best budget.

    ``start`` is ``"random-k"`` for the k-th random ("cold") restart and ``"warm:<name>"`` for a
    warm start from a given configuration.
    """

    start: str
    initial_objective: float
    best_objective: float
    curve: list[dict[str, float]]
    budget: Budget = field(repr=False, compare=False)

    @property
    def is_cold(self) -> bool:
        """Started from a random split, not from a given configuration."""
        return self.start.startswith("random-")


@dataclass(frozen=True)
class OptimiserSettings:
    """Every knob of :class:`NetworkOptimiser` (validated on construction).

    ``parametrisation``: ``"softmax"`` (row-wise softmax of free logits) or ``"simplex"``
    (projected gradient ascent: Adam on the gradient projected onto each row's tangent space,
    then an exact Euclidean projection onto each agent's simplex after every step);
    ``n_steps``: Adam steps per restart; ``lr``: initial learning rate (logits for softmax,
    shares for simplex); ``schedule``: ``"cosine"`` or ``"constant"`` over a restart;
    ``n_restarts``: random ("cold") restarts, logits or shares perturbed around the uniform split
    by ``init_scale`` (warm starts given to ``fit`` come on top); ``record_every``: steps between
    entries of the learning curves; ``seed``: seed of the random restarts; ``threads``: torch
    threads while fitting (``core.runtime.torch_runtime``; ``None`` keeps the current count; the
    tensors are small, and on a shared, loaded machine one thread is often 100x faster than two).
    """

    parametrisation: Literal["softmax", "simplex"] = "softmax"
    n_steps: int = 300
    lr: float = 0.1
    schedule: Literal["cosine", "constant"] = "cosine"
    n_restarts: int = 2
    init_scale: float = 0.5
    record_every: int = 10
    seed: int = 0
    threads: int | None = 1

    def __post_init__(self) -> None:
        where = "NetworkOptimiser"
        check_choice(self.parametrisation, "parametrisation", ("softmax", "simplex"), where)
        check_choice(self.schedule, "schedule", ("cosine", "constant"), where)
        checked = {
            "n_steps": check_scalar(self.n_steps, "n_steps", where, kind=int, lo=1),
            "lr": check_scalar(self.lr, "lr", where, lo=0.0, closed="neither"),
            "n_restarts": check_scalar(self.n_restarts, "n_restarts", where, kind=int, lo=0),
            "init_scale": check_scalar(self.init_scale, "init_scale", where, lo=0.0),
            "record_every": check_scalar(self.record_every, "record_every", where, kind=int,
                                         lo=1),
            "seed": check_scalar(self.seed, "seed", where, kind=int, lo=0),
        }
        if self.threads is not None:
            checked["threads"] = check_scalar(self.threads, "threads", where, kind=int, lo=1)
        for name, value in checked.items():
            object.__setattr__(self, name, value)


class NetworkOptimiser:
    """Maximise total knowledge over budget splits by gradient ascent.

    ``NetworkOptimiser(model, settings)`` or ``NetworkOptimiser(model, n_steps=100, ...)``:
    keyword options override fields of ``settings`` (:class:`OptimiserSettings`, which documents
    them). All restarts of one fit ascend together as one batch (rows are independent: the
    objective is a sum over rows and Adam works per coordinate), except with the sparse
    iterative diffusion solver, which takes one budget at a time.
    """

    def __init__(
        self,
        model: ResearchModel,
        settings: OptimiserSettings | None = None,
        **options: Any,
    ) -> None:
        self.model = model
        self.settings = settings
        self.options = options

    # -- lifecycle -----------------------------------------------------------------
    def fit(
        self, support: Support, warm_starts: Mapping[str, Budget] | None = None
    ) -> NetworkOptimiser:
        """Optimise on ``support``; ``warm_starts`` maps names to starting budgets.

        The returned configuration (``budget_``) is the best seen by any restart, and the warm
        starts are also scored exactly, so ``objective_`` is never below a warm start's value:
        that holds by construction. Whether optimisation *finds* better networks is a question
        for the cold restarts (``cold_objectives_``).
        """
        where = "NetworkOptimiser.fit"
        self.settings_ = self._resolve_settings()
        if not isinstance(self.model, ResearchModel):
            raise InputError(
                f"The 'model' of NetworkOptimiser must be a ResearchModel. "
                f"Got {type(self.model).__name__}."
            )
        if not isinstance(support, Support):
            raise InputError(
                f"The 'support' parameter of {where} must be a Support. "
                f"Got {type(support).__name__}."
            )
        if warm_starts is not None and not isinstance(warm_starts, Mapping):
            raise InputError(
                f"The 'warm_starts' parameter of {where} must map names to Budgets. "
                f"Got {type(warm_starts).__name__}."
            )
        warm = dict(warm_starts or {})
        for name, b in warm.items():
            if not isinstance(b, Budget):
                raise InputError(
                    f"The warm start '{name}' of {where} must be a Budget. Got {type(b).__name__}."
                )
            if b.r.ndim != 1:
                raise InputError(f"The warm start '{name}' of {where} must be one (unbatched) budget.")
            if b.support.n != support.n or b.support.n_edges != support.n_edges or not (
                torch.equal(b.support.src, support.src) and torch.equal(b.support.dst, support.dst)
            ):
                raise InputError(f"The warm start '{name}' must be given on the same support.")
            b.check_feasible(f"{where} (warm start '{name}')")
        if self.settings_.n_restarts == 0 and not warm:
            raise InputError(
                f"{where} has nothing to start from: n_restarts=0 and no warm_starts. "
                "Ask for n_restarts >= 1 or give a warm start."
            )
        with torch_runtime(self.settings_.threads):
            return self._fit(support, warm)

    def _resolve_settings(self) -> OptimiserSettings:
        base = self.settings if self.settings is not None else OptimiserSettings()
        if not isinstance(base, OptimiserSettings):
            raise InputError(
                "The 'settings' parameter of NetworkOptimiser must be an OptimiserSettings. "
                f"Got {type(base).__name__}."
            )
        valid = {f.name for f in fields(OptimiserSettings)}
        unknown = sorted(set(self.options) - valid)
        if unknown:
            raise InputError(
                f"NetworkOptimiser has no option {unknown[0]!r}. Valid options: "
                f"{', '.join(sorted(valid))}."
            )
        return replace(base, **self.options) if self.options else base

    def _fit(self, support: Support, warm_starts: dict[str, Budget]) -> NetworkOptimiser:
        rng = np.random.default_rng(self.settings_.seed)
        names: list[str] = []
        params: list[tuple[torch.Tensor, torch.Tensor]] = []
        for k in range(self.settings_.n_restarts):
            names.append(f"random-{k}")
            params.append(self._random_params(support, rng))
        for name, b in warm_starts.items():
            names.append(f"warm:{name}")
            params.append(self._params_from_budget(b))
        p_self = torch.stack([p for p, _ in params])
        p_edge = torch.stack([p for _, p in params])
        if self.model.batches(support.n):
            self.restarts_: list[Restart] = self._ascend(support, names, p_self, p_edge)
        else:  # the sparse iterative diffusion solver takes one budget at a time
            self.restarts_ = [
                r for i, name in enumerate(names)
                for r in self._ascend(support, [name], p_self[i], p_edge[i])
            ]

        best = max(self.restarts_, key=lambda r: r.best_objective)
        best_value, best_budget, best_start = best.best_objective, best.budget, best.start
        for name, b in warm_starts.items():  # score the exact fixed configurations too
            value = float(self.model.total_knowledge(b))
            if value > best_value:
                best_value, best_budget, best_start = value, b.detach(), f"exact:{name}"
        self.budget_: Budget = best_budget
        self.objective_: float = float(best_value)
        self.best_start_: str = best_start
        self.knowledge_: torch.Tensor = self.model.knowledge(self.budget_).detach()
        return self

    @property
    def curve_(self) -> list[dict[str, float]]:
        """Learning curve of the restart that produced the returned configuration."""
        self._fitted()
        name = self.best_start_.removeprefix("exact:")
        for restart in self.restarts_:
            if restart.start in (name, f"warm:{name}"):
                return restart.curve
        return []

    @property
    def cold_objectives_(self) -> np.ndarray:
        """Best total knowledge of every random restart (none of them saw a warm start)."""
        self._fitted()
        return np.array([r.best_objective for r in self.restarts_ if r.is_cold])

    @property
    def best_cold_(self) -> Restart:
        """The random restart with the highest total knowledge."""
        self._fitted()
        cold = [r for r in self.restarts_ if r.is_cold]
        if not cold:
            raise InputError("This NetworkOptimiser ran no random restarts (n_restarts=0).")
        return max(cold, key=lambda r: r.best_objective)

    # -- internals -------------------------------------------------------------------
    def _fitted(self) -> None:
        if not hasattr(self, "budget_"):
            raise NotFittedError("This NetworkOptimiser is not fitted yet; call fit(support) first.")

    def _random_params(
        self, support: Support, rng: np.random.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        noise_self = rng.normal(0.0, self.settings_.init_scale, support.n)
        noise_edge = rng.normal(0.0, self.settings_.init_scale, support.n_edges)
        if self.settings_.parametrisation == "softmax":
            return torch.as_tensor(noise_self, dtype=DTYPE), torch.as_tensor(noise_edge, dtype=DTYPE)
        degree = np.bincount(support.src.numpy(), minlength=support.n) + 1.0
        base = 1.0 / degree
        x_self = base * np.exp(noise_self)
        x_edge = base[support.src.numpy()] * np.exp(noise_edge)
        b = project_budget(torch.as_tensor(x_self), torch.as_tensor(x_edge), support)
        return b.r, b.w

    def _params_from_budget(self, b: Budget) -> tuple[torch.Tensor, torch.Tensor]:
        r, w = b.r.detach().to(DTYPE), b.w.detach().to(DTYPE)
        if self.settings_.parametrisation == "softmax":
            return torch.log(r.clamp(min=_LOG_FLOOR)), torch.log(w.clamp(min=_LOG_FLOOR))
        return r.clone(), w.clone()

    def _budget(self, support: Support, p_self: torch.Tensor, p_edge: torch.Tensor) -> Budget:
        if self.settings_.parametrisation == "softmax":
            return softmax_budget(p_self, p_edge, support)
        return Budget(support, p_self, p_edge)

    def _ascend(
        self, support: Support, names: list[str], p_self: torch.Tensor, p_edge: torch.Tensor
    ) -> list[Restart]:
        """Adam on one restart (``(n,)``/``(E,)`` parameters) or a batch of them (``(B, n)``/
        ``(B, E)``, one row per name); every row keeps its own best iterate."""
        p_self = p_self.clone().requires_grad_(True)
        p_edge = p_edge.clone().requires_grad_(True)
        opt = torch.optim.Adam([p_self, p_edge], lr=self.settings_.lr)
        sched = (
            torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=self.settings_.n_steps, eta_min=self.settings_.lr / 50)
            if self.settings_.schedule == "cosine"
            else None
        )
        n = support.n
        curves: list[list[dict[str, float]]] = [[] for _ in names]
        initial = best = best_r = best_w = None
        for step in range(self.settings_.n_steps + 1):
            budget = self._budget(support, p_self, p_edge)
            k = self.model.knowledge(budget)
            values = k.sum(-1)
            v, r, w = values.detach(), budget.r.detach(), budget.w.detach()
            if best is None:
                initial, best, best_r, best_w = v.clone(), v.clone(), r.clone(), w.clone()
            else:
                better = v > best
                best = torch.where(better, v, best)
                best_r = torch.where(better[..., None], r, best_r)
                best_w = torch.where(better[..., None], w, best_w)
            if step % self.settings_.record_every == 0 or step == self.settings_.n_steps:
                lr = float(opt.param_groups[0]["lr"])
                rows = zip(v.reshape(-1).tolist(), k.detach().reshape(-1, n),
                           r.reshape(-1, n).mean(-1).tolist(), strict=True)
                for curve, (value, k_row, mean_r) in zip(curves, rows, strict=True):
                    curve.append({"step": step, "objective": value, "gini": gini(k_row),
                                  "mean_r": mean_r, "lr": lr})
            if step == self.settings_.n_steps:
                break
            opt.zero_grad(set_to_none=True)
            (-values.sum() / n).backward()
            if self.settings_.parametrisation == "simplex":
                _tangent_gradient(p_self, p_edge, support)
            opt.step()
            if sched is not None:
                sched.step()
            if self.settings_.parametrisation == "simplex":
                with torch.no_grad():
                    proj = project_budget(p_self, p_edge, support)
                    p_self.copy_(proj.r)
                    p_edge.copy_(proj.w)
        rows = zip(initial.reshape(-1).tolist(), best.reshape(-1).tolist(),  # type: ignore[union-attr]
                   best_r.reshape(-1, n), best_w.reshape(-1, support.n_edges),  # type: ignore[union-attr]
                   strict=True)
        return [
            Restart(name, v0, vb, curve, Budget(support, rb.clone(), wb.clone()))
            for name, curve, (v0, vb, rb, wb) in zip(names, curves, rows, strict=True)
        ]


def _tangent_gradient(p_self: torch.Tensor, p_edge: torch.Tensor, support: Support) -> None:
    """Remove each row's mean from the gradient (its component along the all-ones direction,
    which the projection would undo anyway), so Adam's per-coordinate scaling sees the
    relative merit of research vs each link rather than a common sign."""
    with torch.no_grad():
        g_self, g_edge = p_self.grad, p_edge.grad
        count = torch.ones(support.n, dtype=g_self.dtype).index_add(
            0, support.src, torch.ones(support.n_edges, dtype=g_self.dtype)
        )
        mean = g_self.index_add(-1, support.src, g_edge) / count
        g_self -= mean
        g_edge -= mean[..., support.src]
