"""Sound bound propagation for ReLU MLPs on an input box: IBP and CROWN (written here).

Both bound ``C y`` for a specification matrix ``C`` (one row per output atom), which is much
tighter than bounding ``y`` and combining. CROWN (Zhang et al. 2018) back-substitutes linear
relaxations of every ReLU through the whole network, computing each layer's pre-activation
bounds with CROWN itself (the adaptive lower slope: 1 when ``u >= -l``, else 0).
A spec region is proved safe ("unsat") when every polytope has an atom whose lower bound is
``> b``. auto_LiRPA is not used: its PyPI release is too old for current torch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from trustlab.datasets.onnx_nets import ReluMLP
from trustlab.datasets.vnnlib import VnnlibRegion

__all__ = [
    "BaBResult",
    "BoundResult",
    "crown_bounds",
    "ibp_bounds",
    "output_upper_bound",
    "prove_region",
    "prove_region_bab",
]


def ibp_bounds(
    mlp: ReluMLP, lower: NDArray[np.float64], upper: NDArray[np.float64]
) -> list[tuple[NDArray[np.float64], NDArray[np.float64]]]:
    """Interval bounds of every layer's pre-activation (the last entry bounds the output)."""
    lo, hi = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
    out = []
    for i, (w, b) in enumerate(zip(mlp.weights, mlp.biases, strict=True)):
        c, r = (hi + lo) / 2, (hi - lo) / 2
        mid, rad = w @ c + b, np.abs(w) @ r
        out.append((mid - rad, mid + rad))
        if i < len(mlp.weights) - 1:
            lo, hi = np.maximum(mid - rad, 0), np.maximum(mid + rad, 0)
    return out


def _relax(lo: NDArray[np.float64], hi: NDArray[np.float64]):
    """ReLU relaxation: lower slope a_l (intercept 0); upper slope a_u and intercept c_u."""
    active = lo >= 0
    inactive = hi <= 0
    unstable = ~(active | inactive)
    denom = np.where(unstable, hi - lo, 1.0)
    a_u = np.where(active, 1.0, np.where(unstable, hi / denom, 0.0))
    c_u = np.where(unstable, -lo * hi / denom, 0.0)
    a_l = np.where(active, 1.0, np.where(unstable, (hi >= -lo).astype(float), 0.0))
    return a_l, a_u, c_u


def _backsub(
    mlp: ReluMLP,
    C: NDArray[np.float64],
    d: NDArray[np.float64],
    layer: int,
    pre: list[tuple[NDArray[np.float64], NDArray[np.float64]]],
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Lower bound of ``C z_layer + d`` over the box, ``z_layer`` the layer's pre-activation."""
    A = C @ mlp.weights[layer]
    const = C @ mlp.biases[layer] + d
    for k in range(layer - 1, -1, -1):
        a_l, a_u, c_u = _relax(*pre[k])
        pos, neg = np.maximum(A, 0), np.minimum(A, 0)
        const = const + neg @ c_u
        A = pos * a_l + neg * a_u
        const = const + A @ mlp.biases[k]
        A = A @ mlp.weights[k]
    c, r = (upper + lower) / 2, (upper - lower) / 2
    return const + A @ c - np.abs(A) @ r


def crown_bounds(
    mlp: ReluMLP,
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
    C: NDArray[np.float64],
    *,
    deadline: float | None = None,
) -> tuple[NDArray[np.float64] | None, list[tuple[NDArray[np.float64], NDArray[np.float64]]]]:
    """Lower bounds of ``C y`` by CROWN, or ``None`` when ``deadline`` (perf_counter) passes."""
    lower, upper = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
    pre: list[tuple[NDArray[np.float64], NDArray[np.float64]]] = []
    n_layers = len(mlp.weights)
    for layer in range(n_layers - 1):
        width = mlp.weights[layer].shape[0]
        eye = np.eye(width)
        lo = _backsub(mlp, eye, np.zeros(width), layer, pre, lower, upper)
        hi = -_backsub(mlp, -eye, np.zeros(width), layer, pre, lower, upper)
        pre.append((lo, hi))
        if deadline is not None and time.perf_counter() > deadline:
            return None, pre
    out = _backsub(mlp, C, np.zeros(len(C)), n_layers - 1, pre, lower, upper)
    return out, pre


@dataclass(frozen=True)
class BoundResult:
    verdict: str  # "unsat" (proved safe), "unknown" (abstain), "timeout"
    seconds: float


def prove_region(
    mlp: ReluMLP, region: VnnlibRegion, method: str = "crown", timeout: float = 60.0
) -> BoundResult:
    """Try to prove the region safe: every polytope has an atom with lower bound ``> b``."""
    start = time.perf_counter()
    rows = [(p.A, p.b) for p in region.polytopes]
    if any(len(b) == 0 for _, b in rows):
        return BoundResult("unknown", time.perf_counter() - start)
    C = np.concatenate([A for A, _ in rows])
    rhs = np.concatenate([b for _, b in rows])
    if method == "ibp":
        lo, hi = ibp_bounds(mlp, region.lower, region.upper)[-1]
        lb = np.maximum(C, 0) @ lo + np.minimum(C, 0) @ hi
    else:
        lb, _ = crown_bounds(mlp, region.lower, region.upper, C, deadline=start + timeout)
        if lb is None:
            return BoundResult("timeout", time.perf_counter() - start)
    violated = lb > rhs
    proved, k = True, 0
    for A, _ in rows:
        proved &= bool(violated[k : k + len(A)].any())
        k += len(A)
    return BoundResult("unsat" if proved else "unknown", time.perf_counter() - start)


def _spec_rows(region: VnnlibRegion) -> tuple[NDArray[np.float64], NDArray[np.float64], list[int]]:
    C = np.concatenate([p.A for p in region.polytopes])
    rhs = np.concatenate([p.b for p in region.polytopes])
    return C, rhs, [len(p.b) for p in region.polytopes]


def _all_refuted(excess: NDArray[np.float64], sizes: list[int]) -> bool:
    """Every polytope has an atom whose lower bound exceeds its right-hand side."""
    k = 0
    for n in sizes:
        if not bool((excess[k : k + n] > 0).any()):
            return False
        k += n
    return True


@dataclass(frozen=True)
class BaBResult:
    verdict: str  # "unsat" (proved), "sat" (a box centre violates), "timeout"
    seconds: float
    boxes: int  # CROWN calls made


def prove_region_bab(
    mlp: ReluMLP, region: VnnlibRegion, timeout: float = 10.0, max_boxes: int = 100_000
) -> BaBResult:
    """Sound and complete-in-the-limit: CROWN with input-box splitting (branch and bound).

    A box is closed when CROWN refutes every polytope on it; otherwise its widest side is
    halved (widest relative to the region's box, ties to the lowest index). Boxes are processed
    worst-first (smallest best-atom excess). A box centre that violates the property in float64
    ends the search with ``sat``; the time or box budget ends it with ``timeout``.
    """
    import heapq

    start = time.perf_counter()
    C, rhs, sizes = _spec_rows(region)
    if any(n == 0 for n in sizes):
        return BaBResult("unknown", time.perf_counter() - start, 0)
    scale = np.where(region.upper > region.lower, region.upper - region.lower, 1.0)
    lo0, hi0 = np.asarray(region.lower, np.float64), np.asarray(region.upper, np.float64)
    heap: list[tuple[float, int, NDArray[np.float64], NDArray[np.float64]]] = [
        (-np.inf, 0, lo0, hi0)
    ]
    count, boxes = 1, 0
    while heap:
        if time.perf_counter() - start > timeout or boxes >= max_boxes:
            return BaBResult("timeout", time.perf_counter() - start, boxes)
        _, _, lo, hi = heapq.heappop(heap)
        lb, _ = crown_bounds(mlp, lo, hi, C, deadline=start + timeout)
        boxes += 1
        if lb is None:
            return BaBResult("timeout", time.perf_counter() - start, boxes)
        excess = lb - rhs
        if _all_refuted(excess, sizes):
            continue
        centre = (lo + hi) / 2
        y = mlp(centre[None])[0]
        if region.output_violated(y[None])[0]:
            return BaBResult("sat", time.perf_counter() - start, boxes)
        j = int(np.argmax((hi - lo) / scale))
        mid = (lo[j] + hi[j]) / 2
        left_hi, right_lo = hi.copy(), lo.copy()
        left_hi[j], right_lo[j] = mid, mid
        # priority: the polytopes' best-atom excess, the least refuted first
        k, worst = 0, np.inf
        for n in sizes:
            worst = min(worst, float(excess[k : k + n].max()))
            k += n
        for child in ((lo, left_hi), (right_lo, hi)):
            heapq.heappush(heap, (worst, count, *child))
            count += 1
    return BaBResult("unsat", time.perf_counter() - start, boxes)


def output_upper_bound(
    mlp: ReluMLP, lower: NDArray[np.float64], upper: NDArray[np.float64], c: NDArray[np.float64],
    method: str = "crown",
) -> float:
    """A sound upper bound of ``c @ y`` over the box (IBP or CROWN)."""
    c = np.asarray(c, np.float64)
    if method == "ibp":
        lo, hi = ibp_bounds(mlp, lower, upper)[-1]
        return float(np.maximum(c, 0) @ hi + np.minimum(c, 0) @ lo)
    lb, _ = crown_bounds(mlp, lower, upper, -c[None])
    assert lb is not None
    return float(-lb[0])
