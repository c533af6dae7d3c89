"""The differentiable knowledge model of a network of researcher agents.

Agent ``i`` researches with share ``r_i`` of its budget and attends to agent ``j`` with share
``w_ij`` (``r_i + sum_j w_ij = 1``, see ``budget``). Two ingredients are shared by every
formulation:

- own discovery ``f(r) = ((r + eps)^alpha - eps^alpha) / ((1 + eps)^alpha - eps^alpha)``:
  concave, ``f(0) = 0``, ``f(1) = 1``; ``eps`` keeps ``f'(0)`` finite (``eps = 0``: ``r^alpha``);
- absorption ``phi(w) = 1 - exp(-lam * w)``: the share of a neighbour's output taken in with
  attention ``w``; concave, ``phi(w) <= min(1, lam * w)``; ``lam`` is the learning efficiency.

Three formulations of per-agent knowledge ``K_i``:

``one_hop``
    ``K_i = g(f(r_i) + sum_j phi(w_ij) f(r_j))``: agents learn the research of those they
    attend to, nothing further; ``g`` is the identity (``aggregation="linear"``) or ``log1p``.
``diffusion``
    ``K = f(r) + A b`` with ``b = (I - delta A)^{-1} f(r)`` and ``A_ij = phi(w_ij)``: agents
    learn their neighbours' research as in ``one_hop`` and also what those neighbours learned,
    discounted by ``delta`` per further hop, i.e. ``K = f + A f + delta A^2 f + ...``. ``b`` is
    the Katz-Bonacich vector of Ballester, Calvo-Armengol and Zenou (2006) with own research
    as the intercept. Row sums of ``A`` are at most ``lam``, so ``delta * lam < 1`` guarantees
    the Neumann series converges; ``delta = 0`` gives ``one_hop`` (linear). The time-unrolled
    form (``T`` rounds of message passing) converges to the closed form.
``coverage``
    A pool of ``M`` ideas. Own research with effort ``f(r_i)`` discovers idea ``m`` with
    probability ``D_im = 1 - exp(-f(r_i) h_im)`` (``h_im`` fixed affinities). In each of ``T``
    rounds agent ``i`` learns idea ``m`` from ``j`` with probability ``phi(w_ij) P_jm``, all
    independent (mean field): ``P_im <- 1 - (1 - D_im) prod_j (1 - phi(w_ij) P_jm)``.
    ``T = 1`` (the default) is exact; for ``T > 1`` the recursion is exact on trees but on
    loopy graphs counts echoes (``i -> j -> i``) as new knowledge, so treat it as an upper
    approximation.
    ``K_i = mean_m P_im`` (share of the pool ``i`` knows); the network's *uncovered*
    knowledge ``U = mean_m (1 - prod_i (1 - D_im))`` counts each discovery once, so total
    per-agent knowledge ``sum_i K_i`` and uncovered knowledge are different quantities.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from trustlab.core.errors import InputError, SolverError
from trustlab.core.validation import as_float_array, check_choice, check_scalar
from trustlab.methods.research_net.budget import DTYPE, Budget, Support, as_float_tensor

__all__ = [
    "Formulation",
    "ResearchModel",
    "gini",
    "katz_bonacich",
    "katz_bonacich_iterative",
]

Formulation = Literal["one_hop", "diffusion", "coverage"]
FORMULATIONS: tuple[str, ...] = ("one_hop", "diffusion", "coverage")
_DENSE_MAX = 1000  # diffusion's "auto" solver: dense closed form up to this many agents


def katz_bonacich(a_dense: torch.Tensor, delta: float, u: torch.Tensor) -> torch.Tensor:
    """Closed form ``(I - delta A)^{-1} u`` (batched over leading dims; differentiable).

    The Katz-Bonacich sum ``u + delta A u + ...`` it stands for needs ``delta * rho(A) < 1``
    (checked: by the row-sum bound, else by the spectral radius).
    """
    where = "katz_bonacich"
    a_dense = as_float_tensor(a_dense, "a_dense", where)
    u = as_float_tensor(u, "u", where)
    delta = check_scalar(delta, "delta", where, lo=0.0)
    if a_dense.ndim < 2 or a_dense.shape[-1] != a_dense.shape[-2] or u.shape != a_dense.shape[:-1]:
        raise InputError(
            f"{where} needs a square 'a_dense' (..., n, n) and 'u' (..., n). "
            f"Got shapes {tuple(a_dense.shape)} and {tuple(u.shape)}."
        )
    with torch.no_grad():
        bound = float(a_dense.abs().sum(-1).max()) if a_dense.numel() else 0.0
        if delta * bound >= 1.0:
            rho = float(torch.linalg.eigvals(a_dense.detach()).abs().max())
            if delta * rho >= 1.0 - 1e-12:
                raise InputError(
                    f"{where} needs delta * rho(A) < 1 (the series u + delta A u + ... must "
                    f"converge). Got delta={delta:g}, rho(A)={rho:.4g}."
                )
    return _katz_dense(a_dense, delta, u)


def _katz_dense(a_dense: torch.Tensor, delta: float, u: torch.Tensor) -> torch.Tensor:
    n = a_dense.shape[-1]
    eye = torch.eye(n, dtype=a_dense.dtype)
    return torch.linalg.solve(eye - delta * a_dense, u.unsqueeze(-1)).squeeze(-1)


class _KatzFixedPoint(torch.autograd.Function):
    """``K = u + delta * A K`` on an edge list, solved by Neumann iteration.

    Backward by the adjoint (implicit function theorem), derived by hand so that memory does
    not grow with the number of iterations: with ``lam = (I - delta A^T)^{-1} g``,
    ``dL/du = lam`` and ``dL/dA_ij = delta * lam_i * K_j``.
    """

    @staticmethod
    def forward(ctx, a, u, src, dst, delta, tol, max_iter):  # type: ignore[override]
        k = _neumann(a, u, src, dst, delta, tol, max_iter, transpose=False)
        ctx.save_for_backward(a, k, src, dst)
        ctx.delta, ctx.tol, ctx.max_iter = delta, tol, max_iter
        return k

    @staticmethod
    def backward(ctx, grad_k):  # type: ignore[override]
        a, k, src, dst = ctx.saved_tensors
        lam = _neumann(a, grad_k, src, dst, ctx.delta, ctx.tol, ctx.max_iter, transpose=True)
        grad_a = ctx.delta * lam[src] * k[dst]
        return grad_a, lam, None, None, None, None, None


def _neumann(a, u, src, dst, delta, tol, max_iter, *, transpose):
    """Iterate ``x <- u + delta * A x`` (or ``A^T``) until the update is below ``tol``."""
    x = u.clone()
    for _ in range(max_iter):
        if transpose:  # (A^T x)_j = sum_{e: dst=j} a_e x_src
            ax = torch.zeros_like(u).index_add(0, dst, a * x[src])
        else:  # (A x)_i = sum_{e: src=i} a_e x_dst
            ax = torch.zeros_like(u).index_add(0, src, a * x[dst])
        new = u + delta * ax
        size = float(new.abs().max())
        if not np.isfinite(size):
            raise SolverError(
                "The diffusion fixed point diverged; delta * rho(A) must be < 1 (lower 'delta' "
                "or 'lam')."
            )
        if float((new - x).abs().max()) <= tol * max(1.0, size):
            return new
        x = new
    raise SolverError(
        f"The diffusion fixed point did not converge in {max_iter} iterations; "
        "lower 'delta' or 'lam' (delta * lam must be < 1)."
    )


def katz_bonacich_iterative(
    a: torch.Tensor,
    support: Support,
    delta: float,
    u: torch.Tensor,
    *,
    tol: float = 1e-13,
    max_iter: int = 10_000,
) -> torch.Tensor:
    """``(I - delta A)^{-1} u`` for sparse ``A`` given on ``support`` (unbatched), with an
    adjoint backward pass; use for large networks."""
    where = "katz_bonacich_iterative"
    if not isinstance(support, Support):
        raise InputError(
            f"The 'support' parameter of {where} must be a Support. Got {type(support).__name__}."
        )
    a = as_float_tensor(a, "a", where)
    u = as_float_tensor(u, "u", where)
    delta = check_scalar(delta, "delta", where, lo=0.0)
    tol = check_scalar(tol, "tol", where, lo=0.0, closed="neither")
    max_iter = check_scalar(max_iter, "max_iter", where, kind=int, lo=1)
    if a.shape != (support.n_edges,) or u.shape != (support.n,):
        raise InputError(
            f"{where} needs 'a' of shape (E={support.n_edges},) and 'u' of shape (n={support.n},) "
            f"(one budget, unbatched). Got {tuple(a.shape)} and {tuple(u.shape)}."
        )
    return _KatzFixedPoint.apply(a, u, support.src, support.dst, float(delta), tol, max_iter)


def gini(x: torch.Tensor | np.ndarray) -> float:
    """Gini coefficient of non-negative values (0: equal; ``1 - 1/n``: one holds everything;
    0 for all zeros; no values is an error)."""
    v = np.sort(as_float_array(x, "x", "gini", ndim=1))
    if v.size and v[0] < 0:
        raise InputError(f"The 'x' parameter of gini must be >= 0. Got a value of {v[0]:.4g}.")
    n = v.size
    if n == 0 or v[-1] <= 0:
        return 0.0
    v = v / v[-1]  # scale-free; keeps the weighted sum finite for huge values
    ranks = np.arange(1, n + 1)
    return float((2.0 * np.sum(ranks * v) / (n * v.sum())) - (n + 1.0) / n)


@dataclass(frozen=True)
class ResearchModel:
    """Parameters of the knowledge model (symbols as in the module docstring).

    ``alpha``: concavity of own discovery; ``eps``: smoothing of ``f`` at 0; ``lam``: learning
    efficiency of ``phi``; ``delta``: per-hop discount of ``diffusion``; ``aggregation``: ``g``
    of ``one_hop``; ``n_ideas`` (``M``), ``idea_affinity`` (mean of ``h_im``), ``steps``
    (``T`` learning rounds) and ``idea_seed`` of ``coverage``; ``solver`` of ``diffusion``:
    ``"dense"`` closed form, ``"iterative"`` Neumann + adjoint, ``"auto"`` dense up to 1,000.
    """

    formulation: Formulation = "one_hop"
    alpha: float = 0.5
    eps: float = 1e-3
    lam: float = 4.0
    delta: float = 0.2
    aggregation: Literal["linear", "log"] = "linear"
    n_ideas: int = 32
    idea_affinity: float = 0.25
    steps: int = 1
    idea_seed: int = 0
    solver: Literal["auto", "dense", "iterative"] = "auto"

    def __post_init__(self) -> None:
        where = "ResearchModel"
        check_choice(self.formulation, "formulation", FORMULATIONS, where)
        check_choice(self.aggregation, "aggregation", ("linear", "log"), where)
        check_choice(self.solver, "solver", ("auto", "dense", "iterative"), where)
        checked = {
            "alpha": check_scalar(self.alpha, "alpha", where, lo=0.0, hi=1.0, closed="right"),
            "eps": check_scalar(self.eps, "eps", where, lo=0.0),
            "lam": check_scalar(self.lam, "lam", where, lo=0.0, closed="neither"),
            "delta": check_scalar(self.delta, "delta", where, lo=0.0),
            "n_ideas": check_scalar(self.n_ideas, "n_ideas", where, kind=int, lo=1),
            "idea_affinity": check_scalar(self.idea_affinity, "idea_affinity", where, lo=0.0,
                                          closed="neither"),
            "steps": check_scalar(self.steps, "steps", where, kind=int, lo=1),
            "idea_seed": check_scalar(self.idea_seed, "idea_seed", where, kind=int, lo=0),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        if self.formulation == "diffusion" and self.delta * self.lam >= 1.0:
            raise InputError(
                f"The diffusion model needs delta * lam in [0, 1) to converge. "
                f"Got delta={self.delta}, lam={self.lam}."
            )
        object.__setattr__(self, "_affinity_cache", {})  # not a field: not compared, not dumped

    # -- ingredients -------------------------------------------------------------
    def own_discovery(self, r: torch.Tensor) -> torch.Tensor:
        """``f(r)``, concave with ``f(0) = 0`` and ``f(1) = 1``."""
        e, a = self.eps, self.alpha
        if e == 0:
            return r.clamp(min=0.0) ** a
        return ((r.clamp(min=0.0) + e) ** a - e**a) / ((1.0 + e) ** a - e**a)

    def absorption(self, w: torch.Tensor) -> torch.Tensor:
        """``phi(w) = 1 - exp(-lam w)``."""
        return -torch.expm1(-self.lam * w)

    def affinities(self, n: int) -> torch.Tensor:
        """Fixed agent-idea affinities ``h`` (``(n, M)``, exponential with mean
        ``idea_affinity``), drawn from ``idea_seed`` so every evaluation sees the same pool."""
        n = check_scalar(n, "n", "ResearchModel.affinities", kind=int, lo=1)
        if n not in self._affinity_cache:
            rng = np.random.default_rng(np.random.SeedSequence([self.idea_seed, n]))
            h = rng.exponential(self.idea_affinity, size=(n, self.n_ideas))
            self._affinity_cache[n] = torch.as_tensor(h, dtype=DTYPE)
        return self._affinity_cache[n]

    def discovery_probabilities(self, budget: Budget) -> torch.Tensor:
        """``D_im = 1 - exp(-f(r_i) h_im)`` (``(..., n, M)``)."""
        h = self.affinities(budget.support.n)
        return -torch.expm1(-self.own_discovery(budget.r).unsqueeze(-1) * h)

    def batches(self, n: int) -> bool:
        """Whether budgets of ``n`` agents may be scored as a batch (leading dimensions) with
        the same solver as one at a time: false only for diffusion on the sparse iterative
        solver, which takes one budget at a time."""
        if self.formulation != "diffusion":
            return True
        return self.solver == "dense" or (self.solver == "auto" and n <= _DENSE_MAX)

    # -- knowledge ---------------------------------------------------------------
    def knowledge(self, budget: Budget) -> torch.Tensor:
        """Per-agent knowledge ``K`` (``(..., n)``) at the model's equilibrium / horizon."""
        _check_budget(budget, "ResearchModel.knowledge")
        if self.formulation == "one_hop":
            return self._one_hop(budget)
        if self.formulation == "diffusion":
            return self._diffusion(budget)
        return self._coverage_trajectory(budget, self.steps)[-1].mean(-1)

    def total_knowledge(self, budget: Budget) -> torch.Tensor:
        """The objective: ``sum_i K_i`` (``(...)``)."""
        return self.knowledge(budget).sum(-1)

    def uncovered(self, budget: Budget) -> torch.Tensor:
        """Distinct knowledge uncovered by the network (coverage: ``mean_m 1 - prod_i (1 - D_im)``;
        other formulations: total own research output ``sum_i f(r_i)``)."""
        _check_budget(budget, "ResearchModel.uncovered")
        if self.formulation != "coverage":
            return self.own_discovery(budget.r).sum(-1)
        d = self.discovery_probabilities(budget)
        return (-torch.expm1(torch.log1p(-d.clamp(max=1 - 1e-15)).sum(-2))).mean(-1)

    def simulate(self, budget: Budget, steps: int) -> torch.Tensor:
        """Knowledge of every agent after ``t = 0..steps`` rounds of learning, ``(steps+1, n)``.

        Round 0 is own research only. ``one_hop`` is complete after one round; ``diffusion``
        accumulates ``sum_{k<=t} (delta A)^k f(r)`` and tends to the closed form; ``coverage``
        runs its mean-field learning rounds.
        """
        steps = check_scalar(steps, "steps", "ResearchModel.simulate", kind=int, lo=0)
        _check_budget(budget, "ResearchModel.simulate")
        if budget.r.ndim != 1:
            raise InputError("simulate takes one (unbatched) budget.")
        with torch.no_grad():
            if self.formulation == "coverage":
                return self._coverage_trajectory(budget, steps).mean(-1)
            u = self.own_discovery(budget.r)
            if self.formulation == "one_hop":
                final = self._one_hop(budget)
                first = u if self.aggregation == "linear" else torch.log1p(u)
                return torch.stack([first] + [final] * steps)
            a = self.absorption(budget.w)
            src, dst = budget.support.src, budget.support.dst
            out, b = [u], u  # b: partial Katz-Bonacich sum, one hop per round

            def spread(x: torch.Tensor) -> torch.Tensor:
                return torch.zeros_like(u).index_add(0, src, a * x[dst])

            for _ in range(steps):
                out.append(u + spread(b))
                b = u + self.delta * spread(b)
            return torch.stack(out)

    def idea_trajectory(self, budget: Budget, steps: int) -> torch.Tensor:
        """Coverage only: ``P[t, i, m]``, who knows which idea after ``t`` rounds."""
        if self.formulation != "coverage":
            raise InputError("idea_trajectory is defined for the 'coverage' formulation only.")
        steps = check_scalar(steps, "steps", "ResearchModel.idea_trajectory", kind=int, lo=0)
        _check_budget(budget, "ResearchModel.idea_trajectory")
        with torch.no_grad():
            return self._coverage_trajectory(budget, steps)

    # -- formulations --------------------------------------------------------------
    def _one_hop(self, budget: Budget) -> torch.Tensor:
        src, dst = budget.support.src, budget.support.dst
        u = self.own_discovery(budget.r)
        x = u.index_add(-1, src, self.absorption(budget.w) * u[..., dst])
        return x if self.aggregation == "linear" else torch.log1p(x)

    def _diffusion(self, budget: Budget) -> torch.Tensor:
        u = self.own_discovery(budget.r)
        a = self.absorption(budget.w)
        src, dst = budget.support.src, budget.support.dst
        dense = self.batches(budget.support.n)
        if dense or u.ndim > 1:
            a_dense = torch.zeros(*a.shape[:-1], budget.support.n, budget.support.n, dtype=a.dtype)
            a_dense[..., src, dst] = a
            b = _katz_dense(a_dense, self.delta, u)  # row sums of A <= lam: delta*lam < 1
        else:
            b = katz_bonacich_iterative(a, budget.support, self.delta, u)
        return u.index_add(-1, src, a * b[..., dst])

    def _coverage_trajectory(self, budget: Budget, steps: int) -> torch.Tensor:
        src, dst = budget.support.src, budget.support.dst
        d = self.discovery_probabilities(budget)  # (..., n, M)
        log_miss_own = torch.log1p(-d.clamp(max=1 - 1e-15))
        a = self.absorption(budget.w).unsqueeze(-1)  # (..., E, 1)
        p, out = d, [d]
        for _ in range(steps):
            miss = torch.log1p(-(a * p[..., dst, :]).clamp(max=1 - 1e-15))
            p = -torch.expm1(log_miss_own.index_add(-2, src, miss))
            out.append(p)
        return torch.stack(out)


def _check_budget(budget: object, where: str) -> Budget:
    if not isinstance(budget, Budget):
        raise InputError(
            f"The 'budget' parameter of {where} must be a Budget. Got {type(budget).__name__}."
        )
    return budget.check_feasible(where)
