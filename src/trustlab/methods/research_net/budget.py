"""Compute budgets on a network: who may attend to whom, and how each agent splits its budget.

Every agent ``i`` has a budget of 1, split between its own research ``r_i`` and attention
``w_ij >= 0`` to the agents ``j`` it may learn from, with ``r_i + sum_j w_ij = 1`` exactly.
The candidate links form a ``Support`` (an edge list; ``src`` attends to ``dst``, so
knowledge flows ``dst -> src``). A complete support is the dense case; a sparse one lets the
model scale to thousands of agents.

Two parametrisations map free parameters onto the budget simplex of every agent:

- ``softmax_budget``: a row-wise softmax over ``(theta_self_i, theta_ij ...)``; every share is
  strictly positive, so exact zeros are only approached.
- ``project_budget``: the Euclidean projection of ``(x_self_i, x_ij ...)`` onto the simplex
  (Held-Wolfe-Crowder / Duchi et al.), used for projected gradient ascent; exact zeros occur.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
import torch
from numpy.typing import NDArray

from trustlab.core.errors import InputError

__all__ = [
    "Budget",
    "Support",
    "budget_from_graph",
    "project_budget",
    "softmax_budget",
]

DTYPE = torch.float64


@dataclass(frozen=True)
class Support:
    """The links agents may put attention on: ``src[e]`` attends to ``dst[e]``.

    ``n`` agents, ``src``/``dst`` int64 tensors of equal length ``E``; no self-loops, no
    duplicate links.
    """

    n: int
    src: torch.Tensor
    dst: torch.Tensor

    def __post_init__(self) -> None:
        if self.n < 1:
            raise InputError(f"A Support needs at least one agent. Got n={self.n}.")
        if self.src.shape != self.dst.shape or self.src.ndim != 1:
            raise InputError("The 'src' and 'dst' of a Support must be 1-d and of equal length.")
        if self.src.numel():
            if int(self.src.min()) < 0 or int(max(self.src.max(), self.dst.max())) >= self.n:
                raise InputError(f"Support links must join agents in [0, {self.n}).")
            if bool((self.src == self.dst).any()):
                raise InputError("A Support must not hold self-loops; own research is r_i.")
            keys = self.src * self.n + self.dst
            if keys.unique().numel() != keys.numel():
                raise InputError("A Support must not hold duplicate links.")

    @property
    def n_edges(self) -> int:
        return int(self.src.numel())

    @classmethod
    def complete(cls, n: int) -> Support:
        """Every agent may attend to every other agent (the dense case)."""
        if n < 1:
            raise InputError(f"The 'n' parameter of Support.complete must be >= 1. Got {n}.")
        idx = torch.arange(n)
        src = idx.repeat_interleave(n)
        dst = idx.repeat(n)
        keep = src != dst
        return cls(n, src[keep], dst[keep])

    @classmethod
    def from_graph(cls, graph: nx.Graph, n: int | None = None) -> Support:
        """Links of a networkx graph on nodes ``0..n-1``; an undirected edge gives both links."""
        n = graph.number_of_nodes() if n is None else n
        pairs = set()
        for u, v in graph.edges():
            if u == v:
                continue
            pairs.add((int(u), int(v)))
            if not graph.is_directed():
                pairs.add((int(v), int(u)))
        ordered = sorted(pairs)
        src = torch.tensor([p[0] for p in ordered], dtype=torch.int64)
        dst = torch.tensor([p[1] for p in ordered], dtype=torch.int64)
        return cls(n, src, dst)

    @classmethod
    def random_sparse(cls, n: int, k: int, rng: np.random.Generator) -> Support:
        """Each agent may attend to ``k`` distinct others drawn uniformly (for large ``n``)."""
        if not 1 <= k < n:
            raise InputError(f"The 'k' parameter of Support.random_sparse must be in [1, n). Got {k}.")
        # k draws without replacement from the n-1 others, vectorised via argpartition of noise
        noise = rng.random((n, n))
        np.fill_diagonal(noise, np.inf)
        dst = np.argpartition(noise, k, axis=1)[:, :k]
        dst.sort(axis=1)
        src = np.repeat(np.arange(n), k)
        return cls(n, torch.as_tensor(src), torch.as_tensor(dst.reshape(-1)))


@dataclass(frozen=True)
class Budget:
    """A budget split: own research ``r`` (``(..., n)``) and attention ``w`` (``(..., E)``)."""

    support: Support
    r: torch.Tensor
    w: torch.Tensor

    def row_sums(self) -> torch.Tensor:
        """``r_i + sum_j w_ij`` for every agent (1 up to rounding)."""
        return self.r.index_add(-1, self.support.src, self.w)

    def dense_attention(self) -> torch.Tensor:
        """The attention matrix ``W`` with ``W[i, j] = w_ij`` (``(..., n, n)``)."""
        n = self.support.n
        out = torch.zeros(*self.w.shape[:-1], n, n, dtype=self.w.dtype)
        out[..., self.support.src, self.support.dst] = self.w
        return out

    def detach(self) -> Budget:
        return Budget(self.support, self.r.detach().clone(), self.w.detach().clone())

    def to_numpy(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        return self.r.detach().numpy().copy(), self.w.detach().numpy().copy()

    def to_networkx(self, threshold: float = 0.0) -> nx.DiGraph:
        """A directed graph with an edge ``i -> j`` of weight ``w_ij`` when ``w_ij > threshold``;
        node attribute ``r`` holds the own-research share."""
        r, w = self.to_numpy()
        graph = nx.DiGraph()
        graph.add_nodes_from((i, {"r": float(r[i])}) for i in range(self.support.n))
        src, dst = self.support.src.numpy(), self.support.dst.numpy()
        keep = w > threshold
        graph.add_weighted_edges_from(
            zip(src[keep].tolist(), dst[keep].tolist(), w[keep].tolist(), strict=True)
        )
        return graph


def softmax_budget(
    theta_self: torch.Tensor, theta_edge: torch.Tensor, support: Support
) -> Budget:
    """Row-wise softmax of ``(theta_self_i, theta_ij for j in support(i))`` onto the simplex."""
    src = support.src
    with torch.no_grad():  # a shift for stability only; the softmax does not depend on it
        shift = theta_self.scatter_reduce(
            -1, src.expand(theta_edge.shape), theta_edge, reduce="amax", include_self=True
        )
    e_self = torch.exp(theta_self - shift)
    e_edge = torch.exp(theta_edge - shift[..., src])
    z = e_self.index_add(-1, src, e_edge)
    return Budget(support, e_self / z, e_edge / z[..., src])


def project_budget(
    x_self: torch.Tensor, x_edge: torch.Tensor, support: Support, *, iters: int = 80
) -> Budget:
    """Euclidean projection of every agent's row ``(x_self_i, x_ij ...)`` onto the simplex.

    The threshold ``tau_i`` with ``sum max(x - tau_i, 0) = 1`` is bracketed by bisection,
    then computed exactly from the support it identifies, so rows sum to 1 up to rounding.
    Not differentiable by design (used as the projection step of projected gradient ascent).
    """
    src = support.src
    with torch.no_grad():
        x_self = x_self.detach().to(DTYPE)
        x_edge = x_edge.detach().to(DTYPE)
        row_max = x_self.scatter_reduce(
            -1, src.expand(x_edge.shape), x_edge, reduce="amax", include_self=True
        )
        lo, hi = row_max - 1.0, row_max.clone()  # s(lo) >= 1 >= s(hi) = 0

        def mass(tau: torch.Tensor) -> torch.Tensor:
            inside = torch.clamp(x_self - tau, min=0.0)
            return inside.index_add(-1, src, torch.clamp(x_edge - tau[..., src], min=0.0))

        for _ in range(iters):
            mid = 0.5 * (lo + hi)
            above = mass(mid) > 1.0
            lo = torch.where(above, mid, lo)
            hi = torch.where(above, hi, mid)
        tau = 0.5 * (lo + hi)
        in_self = (x_self > tau).to(DTYPE)
        in_edge = (x_edge > tau[..., src]).to(DTYPE)
        count = in_self.index_add(-1, src, in_edge)
        total = (x_self * in_self).index_add(-1, src, x_edge * in_edge)
        tau = (total - 1.0) / count
        r = torch.clamp(x_self - tau, min=0.0)
        w = torch.clamp(x_edge - tau[..., src], min=0.0)
        z = r.index_add(-1, src, w)  # 1 up to rounding; divide to remove the last ulp drift
        return Budget(support, r / z, w / z[..., src])


def budget_from_graph(graph: nx.Graph, r0: float, support: Support | None = None) -> Budget:
    """A fixed configuration: every agent researches ``r0`` and splits ``1 - r0`` equally over
    its neighbours in ``graph`` (an isolated agent researches everything).

    With ``support`` given (e.g. the complete one), links outside ``graph`` get attention 0.
    """
    if not 0.0 <= r0 <= 1.0:
        raise InputError(f"The 'r0' parameter of budget_from_graph must be in [0, 1]. Got {r0}.")
    n = graph.number_of_nodes()
    support = Support.from_graph(graph, n) if support is None else support
    src, dst = support.src.numpy(), support.dst.numpy()
    undirected = not graph.is_directed()
    in_graph = np.array(
        [graph.has_edge(int(a), int(b)) or (undirected and graph.has_edge(int(b), int(a)))
         for a, b in zip(src, dst, strict=True)],
        dtype=bool,
    )
    degree = np.bincount(src[in_graph], minlength=n).astype(float)
    r = np.where(degree > 0, r0, 1.0)
    share = np.where(degree > 0, (1.0 - r0) / np.maximum(degree, 1.0), 0.0)
    w = np.where(in_graph, share[src], 0.0)
    return Budget(support, torch.as_tensor(r, dtype=DTYPE), torch.as_tensor(w, dtype=DTYPE))
