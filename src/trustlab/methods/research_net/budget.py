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
from trustlab.core.validation import as_float_array, check_scalar

__all__ = [
    "Budget",
    "Support",
    "budget_from_graph",
    "project_budget",
    "softmax_budget",
]

DTYPE = torch.float64

#: How far a budget row may sum from 1, or a share fall below 0, and still count as feasible.
FEASIBLE_ATOL = 1e-6


def as_float_tensor(value: object, name: str, where: str) -> torch.Tensor:
    """A finite floating tensor: tensors are kept as they are (their autograd graph too);
    numpy arrays, lists and tuples are converted to float64; anything else is an error."""
    if isinstance(value, torch.Tensor):
        if not value.is_floating_point():
            raise InputError(
                f"The '{name}' parameter of {where} must be a floating-point tensor. "
                f"Got dtype {value.dtype}."
            )
        if not bool(torch.isfinite(value.detach()).all()):
            raise InputError(f"The '{name}' parameter of {where} must be finite. Got NaN or inf.")
        return value
    arr = as_float_array(value, name, where, allow_empty=True)
    return torch.as_tensor(arr, dtype=DTYPE)


def _index_tensor(value: object, name: str, where: str) -> torch.Tensor:
    """Agent indices as a 1-d int64 tensor (integer tensors, arrays or lists; no floats/bools)."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
            raise InputError(
                f"The '{name}' parameter of {where} must hold integer agent indices. "
                f"Got dtype {value.dtype}."
            )
        out = value.to(torch.int64)
    else:
        arr = np.asarray(value) if isinstance(value, np.ndarray | list | tuple | range) else None
        if arr is None or (arr.size and arr.dtype.kind not in "iu"):
            raise InputError(
                f"The '{name}' parameter of {where} must hold integer agent indices. "
                f"Got {type(value).__name__}"
                + (f" of dtype {arr.dtype}" if arr is not None else "") + "."
            )
        out = torch.as_tensor(arr.astype(np.int64))
    if out.ndim != 1:
        raise InputError(f"The '{name}' parameter of {where} must be 1-d. Got shape {tuple(out.shape)}.")
    return out


def check_graph_nodes(graph: object, n: int | None, where: str) -> int:
    """A networkx graph whose nodes are the agent indices ``0..n-1``; returns ``n``.

    Node names such as strings, or labels from 1, are not guessed into indices: the error says
    how to relabel (``networkx.convert_node_labels_to_integers``).
    """
    if not isinstance(graph, nx.Graph):
        raise InputError(
            f"The 'graph' parameter of {where} must be a networkx graph. Got {type(graph).__name__}."
        )
    nodes = list(graph.nodes)
    size = len(nodes) if n is None else n
    bad = [v for v in nodes if isinstance(v, bool) or not isinstance(v, int | np.integer)
           or not 0 <= int(v) < size]
    if bad:
        shown = ", ".join(repr(v) for v in bad[:3])
        raise InputError(
            f"The 'graph' parameter of {where} must label its nodes with the agent indices "
            f"0..{size - 1}. Got node(s) {shown}; relabel with "
            "networkx.convert_node_labels_to_integers(graph, ordering='sorted')."
        )
    return size


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
        object.__setattr__(self, "n", check_scalar(self.n, "n", "Support", kind=int, lo=1))
        object.__setattr__(self, "src", _index_tensor(self.src, "src", "Support"))
        object.__setattr__(self, "dst", _index_tensor(self.dst, "dst", "Support"))
        if self.src.shape != self.dst.shape:
            raise InputError(
                "The 'src' and 'dst' of a Support must have equal length. "
                f"Got {self.src.numel()} and {self.dst.numel()}."
            )
        if self.src.numel():
            low = min(int(self.src.min()), int(self.dst.min()))
            high = max(int(self.src.max()), int(self.dst.max()))
            if low < 0 or high >= self.n:
                raise InputError(
                    f"Support links must join agents in [0, {self.n}). Got indices from {low} to "
                    f"{high}."
                )
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
        n = check_scalar(n, "n", "Support.complete", kind=int, lo=1)
        idx = torch.arange(n)
        src = idx.repeat_interleave(n)
        dst = idx.repeat(n)
        keep = src != dst
        return cls(n, src[keep], dst[keep])

    @classmethod
    def from_graph(cls, graph: nx.Graph, n: int | None = None) -> Support:
        """Links of a networkx graph on nodes ``0..n-1``; an undirected edge gives both links.

        ``n`` (default: the graph's number of nodes) may exceed the graph to add isolated
        agents; nodes must be the integers ``0..n-1`` (see ``check_graph_nodes``).
        """
        if n is not None:
            n = check_scalar(n, "n", "Support.from_graph", kind=int, lo=1)
        n = check_graph_nodes(graph, n, "Support.from_graph")
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
        where = "Support.random_sparse"
        n = check_scalar(n, "n", where, kind=int, lo=2)
        k = check_scalar(k, "k", where, kind=int, lo=1)
        if not isinstance(rng, np.random.Generator):
            raise InputError(
                f"The 'rng' parameter of {where} must be a numpy Generator. Got {type(rng).__name__}."
            )
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

    def __post_init__(self) -> None:
        where = "Budget"
        if not isinstance(self.support, Support):
            raise InputError(
                f"The 'support' parameter of {where} must be a Support. "
                f"Got {type(self.support).__name__}."
            )
        r = as_float_tensor(self.r, "r", where)
        w = as_float_tensor(self.w, "w", where)
        if r.ndim < 1 or r.shape[-1] != self.support.n:
            raise InputError(
                f"The 'r' parameter of {where} must have last dimension n={self.support.n} (one "
                f"share per agent). Got shape {tuple(r.shape)}."
            )
        if w.ndim < 1 or w.shape[-1] != self.support.n_edges:
            raise InputError(
                f"The 'w' parameter of {where} must have last dimension E={self.support.n_edges} "
                f"(one share per link of the support). Got shape {tuple(w.shape)}."
            )
        if r.shape[:-1] != w.shape[:-1]:
            raise InputError(
                f"The 'r' and 'w' of a {where} must share their batch dimensions. "
                f"Got shapes {tuple(r.shape)} and {tuple(w.shape)}."
            )
        object.__setattr__(self, "r", r)
        object.__setattr__(self, "w", w)

    def check_feasible(self, where: str, atol: float = FEASIBLE_ATOL) -> Budget:
        """Raise unless every share is >= 0 and every agent's row sums to 1 (within ``atol``)."""
        low = min(float(self.r.detach().min()) if self.r.numel() else 0.0,
                  float(self.w.detach().min()) if self.w.numel() else 0.0)
        if low < -atol:
            raise InputError(
                f"The budget given to {where} must have shares >= 0. Got a share of {low:.3g}."
            )
        off = (self.row_sums().detach() - 1.0).abs()
        if off.numel() and float(off.max()) > atol:
            agent = int(off.reshape(-1, self.support.n).max(0).values.argmax())
            raise InputError(
                f"The budget given to {where} must give every agent r_i + sum_j w_ij = 1 (within "
                f"{atol:g}). Got a row off by {float(off.max()):.3g} (agent {agent}); an "
                "infeasible budget is not a configuration of the model."
            )
        return self

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


def _params(
    p_self: object, p_edge: object, support: Support, where: str
) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(support, Support):
        raise InputError(
            f"The 'support' parameter of {where} must be a Support. Got {type(support).__name__}."
        )
    a = as_float_tensor(p_self, "self parameters", where)
    b = as_float_tensor(p_edge, "edge parameters", where)
    if a.ndim < 1 or a.shape[-1] != support.n or b.ndim < 1 or b.shape[-1] != support.n_edges \
            or a.shape[:-1] != b.shape[:-1]:
        raise InputError(
            f"{where} needs self parameters (..., n={support.n}) and edge parameters "
            f"(..., E={support.n_edges}) with the same batch dimensions. "
            f"Got shapes {tuple(a.shape)} and {tuple(b.shape)}."
        )
    return a, b


def softmax_budget(
    theta_self: torch.Tensor, theta_edge: torch.Tensor, support: Support
) -> Budget:
    """Row-wise softmax of ``(theta_self_i, theta_ij for j in support(i))`` onto the simplex."""
    theta_self, theta_edge = _params(theta_self, theta_edge, support, "softmax_budget")
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
    x_self, x_edge = _params(x_self, x_edge, support, "project_budget")
    iters = check_scalar(iters, "iters", "project_budget", kind=int, lo=1)
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

    With ``support`` given (e.g. the complete one), links outside ``graph`` get attention 0; the
    graph must have the support's agents as nodes and only links the support holds.
    """
    where = "budget_from_graph"
    r0 = check_scalar(r0, "r0", where, lo=0.0, hi=1.0)
    if support is None:
        support = Support.from_graph(graph)
    elif not isinstance(support, Support):
        raise InputError(
            f"The 'support' parameter of {where} must be a Support. Got {type(support).__name__}."
        )
    n = check_graph_nodes(graph, support.n, where)
    if graph.number_of_nodes() != n:
        raise InputError(
            f"The 'graph' of {where} must have one node per agent of the support ({n}). "
            f"Got {graph.number_of_nodes()} nodes."
        )
    src, dst = support.src.numpy(), support.dst.numpy()
    undirected = not graph.is_directed()
    in_graph = np.array(
        [graph.has_edge(int(a), int(b)) or (undirected and graph.has_edge(int(b), int(a)))
         for a, b in zip(src, dst, strict=True)],
        dtype=bool,
    )
    links = {(int(u), int(v)) for u, v in graph.edges() if u != v}
    if undirected:
        links |= {(v, u) for u, v in links}
    if int(in_graph.sum()) != len(links):
        raise InputError(
            f"The 'graph' of {where} has {len(links) - int(in_graph.sum())} link(s) that the "
            "support does not hold; use a support that contains the graph (e.g. Support.complete)."
        )
    degree = np.bincount(src[in_graph], minlength=n).astype(float)
    r = np.where(degree > 0, r0, 1.0)
    share = np.where(degree > 0, (1.0 - r0) / np.maximum(degree, 1.0), 0.0)
    w = np.where(in_graph, share[src], 0.0)
    return Budget(support, torch.as_tensor(r, dtype=DTYPE), torch.as_tensor(w, dtype=DTYPE))
