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
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from trustlab.core.errors import InputError
from trustlab.core.validation import as_float_array
from trustlab.datasets.onnx_nets import ReluMLP
from trustlab.datasets.vnnlib import VnnlibRegion

__all__ = [
    "BaBResult",
    "BoundResult",
    "BoxSearch",
    "crown_bounds",
    "crown_bounds_batch",
    "ibp_bounds",
    "output_upper_bound",
    "prove_region",
    "prove_region_bab",
]


def _check_spec_matrix(C, mlp: ReluMLP, where: str) -> NDArray[np.float64]:
    C = np.asarray(C, dtype=np.float64)
    if C.ndim != 2 or C.shape[1] != mlp.n_outputs or not np.all(np.isfinite(C)):
        raise InputError(f"The 'C' parameter of {where} must be a finite (m, {mlp.n_outputs}) "
                         f"matrix. Got shape {C.shape}.")
    return C


def _check_box(mlp: ReluMLP, lower, upper, where: str, batch: bool = False):
    if not isinstance(mlp, ReluMLP):
        raise InputError(f"The 'mlp' parameter of {where} must be a ReluMLP. Got "
                         f"{type(mlp).__name__}.")
    want = 2 if batch else 1
    lo = as_float_array(lower, "lower", where, ndim=want)
    hi = as_float_array(upper, "upper", where, ndim=want)
    if lo.shape != hi.shape or lo.ndim != want or lo.shape[-1] != mlp.n_inputs:
        raise InputError(f"The 'lower'/'upper' parameters of {where} must both have shape "
                         f"({'B, ' if batch else ''}{mlp.n_inputs}). Got {lo.shape} and {hi.shape}.")
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))) or np.any(lo > hi):
        raise InputError(f"The box of {where} must be finite with lower <= upper.")
    return lo, hi


def ibp_bounds(
    mlp: ReluMLP, lower: NDArray[np.float64], upper: NDArray[np.float64]
) -> list[tuple[NDArray[np.float64], NDArray[np.float64]]]:
    """Interval bounds of every layer's pre-activation (the last entry bounds the output)."""
    lo, hi = _check_box(mlp, lower, upper, "ibp_bounds")
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
    c_u = np.where(unstable, -lo * a_u, 0.0)  # = -lo*hi/(hi-lo); hi/(hi-lo) in [0,1] cannot overflow
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
    lower, upper = _check_box(mlp, lower, upper, "crown_bounds")
    C = _check_spec_matrix(C, mlp, "crown_bounds")
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


def _check_budget(timeout: float, where: str) -> None:
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0 \
            or timeout != timeout:
        raise InputError(f"The 'timeout' parameter of {where} must be a positive number of "
                         f"seconds. Got {timeout!r}.")


@dataclass(frozen=True)
class BoundResult:
    verdict: str  # "unsat" (proved safe), "unknown" (abstain), "timeout"
    seconds: float


def prove_region(
    mlp: ReluMLP, region: VnnlibRegion, method: str = "crown", timeout: float = 60.0,
    *, clock: Callable[[], float] = time.perf_counter,
) -> BoundResult:
    """Try to prove the region safe: every polytope has an atom with lower bound ``> b``."""
    if method not in ("ibp", "crown"):
        raise InputError(f"The 'method' parameter of prove_region must be 'ibp' or 'crown'. "
                         f"Got {method!r}.")
    _check_budget(timeout, "prove_region")
    start = clock()
    rows = [(p.A, p.b) for p in region.polytopes]
    if any(len(b) == 0 for _, b in rows):
        return BoundResult("unknown", clock() - start)
    C = np.concatenate([A for A, _ in rows])
    rhs = np.concatenate([b for _, b in rows])
    if method == "ibp":
        lo, hi = ibp_bounds(mlp, region.lower, region.upper)[-1]
        lb = np.maximum(C, 0) @ lo + np.minimum(C, 0) @ hi
    else:
        lb, _ = crown_bounds(mlp, region.lower, region.upper, C,
                             deadline=start + timeout if clock is time.perf_counter else None)
        if lb is None:
            return BoundResult("timeout", clock() - start)
    violated = lb > rhs
    proved, k = True, 0
    for A, _ in rows:
        proved &= bool(violated[k : k + len(A)].any())
        k += len(A)
    return BoundResult("unsat" if proved else "unknown", clock() - start)


def _spec_rows(region: VnnlibRegion) -> tuple[NDArray[np.float64], NDArray[np.float64], list[int]]:
    C = np.concatenate([p.A for p in region.polytopes])
    rhs = np.concatenate([p.b for p in region.polytopes])
    return C, rhs, [len(p.b) for p in region.polytopes]


@dataclass(frozen=True)
class BaBResult:
    verdict: str  # "unsat" (proved), "sat" (a box centre violates), "timeout"
    seconds: float
    boxes: int  # boxes bounded by CROWN
    witness: NDArray[np.float64] | None = None  # the violating box centre when "sat"


def crown_bounds_batch(
    mlp: ReluMLP, lower: NDArray[np.float64], upper: NDArray[np.float64], C: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """CROWN lower bounds of ``C y`` on a batch of boxes ``(B, n)``, with the input coefficients.

    The same bound as :func:`crown_bounds` (CROWN-computed intermediate bounds, adaptive lower
    slopes), vectorised over boxes with torch float64 so branch and bound bounds hundreds of
    boxes per call. Returns ``lb`` of shape ``(B, m)`` and the linear coefficients ``A`` of the
    input ``(B, m, n)`` (``C y >= A x + const`` on each box), which rank split dimensions.
    """
    import torch

    lower, upper = _check_box(mlp, np.atleast_2d(lower), np.atleast_2d(upper),
                              "crown_bounds_batch", batch=True)
    C = _check_spec_matrix(C, mlp, "crown_bounds_batch")
    lo = torch.as_tensor(lower, dtype=torch.float64)
    hi = torch.as_tensor(np.atleast_2d(upper), dtype=torch.float64)
    Ws = [torch.as_tensor(w, dtype=torch.float64) for w in mlp.weights]
    bs = [torch.as_tensor(b, dtype=torch.float64) for b in mlp.biases]
    centre, radius = (hi + lo) / 2, (hi - lo) / 2
    n_boxes = lo.shape[0]
    pre: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # (a_l, a_u, c_u) per layer

    def backsub(Cm: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        A = (Cm @ Ws[layer]).expand(n_boxes, -1, -1)
        const = (Cm @ bs[layer]).expand(n_boxes, -1)
        for k in range(layer - 1, -1, -1):
            a_l, a_u, c_u = pre[k]
            pos, neg = A.clamp(min=0), A.clamp(max=0)
            const = const + (neg * c_u[:, None, :]).sum(-1)
            A = pos * a_l[:, None, :] + neg * a_u[:, None, :]
            const = const + A @ bs[k]
            A = A @ Ws[k]
        lb = const + (A @ centre[..., None]).squeeze(-1) - (A.abs() @ radius[..., None]).squeeze(-1)
        return lb, A

    prev: tuple[torch.Tensor, torch.Tensor] | None = None
    for layer in range(len(Ws) - 1):
        width = Ws[layer].shape[0]
        # interval bounds from the previous layer first (exact for the first layer); CROWN is
        # needed only for neurons they leave unstable: a stable neuron's relaxation is exact
        h_lo, h_hi = (lo, hi) if prev is None else (prev[0].clamp(min=0), prev[1].clamp(min=0))
        mid = (h_lo + h_hi) / 2 @ Ws[layer].T + bs[layer]
        rad = (h_hi - h_lo) / 2 @ Ws[layer].abs().T
        l_, u_ = mid - rad, mid + rad
        rows = torch.nonzero(((l_ < 0) & (u_ > 0)).any(dim=0)).flatten()
        if layer > 0 and len(rows):
            eye = torch.eye(width, dtype=torch.float64)[rows]
            lb, _ = backsub(torch.cat([eye, -eye]), layer)
            l_, u_ = l_.clone(), u_.clone()
            # CROWN's own bounds (not intersected with the intervals: that would change the
            # adaptive lower slopes and, measured, loosen the final bound on some boxes)
            l_[:, rows] = lb[:, : len(rows)]
            u_[:, rows] = -lb[:, len(rows):]
        prev = (l_, u_)
        active, inactive = l_ >= 0, u_ <= 0
        unstable = ~(active | inactive)
        denom = torch.where(unstable, u_ - l_, torch.ones_like(l_))
        a_u = torch.where(active, 1.0, torch.where(unstable, u_ / denom, 0.0))
        c_u = torch.where(unstable, -l_ * u_ / denom, 0.0)
        a_l = torch.where(active, 1.0, torch.where(unstable, (u_ >= -l_).double(), 0.0))
        pre.append((a_l, a_u, c_u))
    lb, A = backsub(torch.as_tensor(C, dtype=torch.float64), len(Ws) - 1)
    return lb.numpy(), A.numpy()


class BoxSearch:
    """Resumable CROWN branch and bound over input boxes for one region (sound and complete in
    the limit); also the falsifier's guide to where a violation can still hide.

    A box is closed when CROWN refutes every polytope on it (each has an atom whose lower bound
    exceeds its right-hand side). Open boxes are kept worst-first by their *priority*, the
    smallest over polytopes of the best atom's lower-bound excess (below 0: a violation is not
    excluded). :meth:`step` splits the ``batch`` worst open boxes along the dimension with the
    largest CROWN coefficient times width (the "smear" heuristic), bounds the children in one
    batched CROWN call and checks their centres in float64. ``status`` becomes ``"unsat"`` when
    no box is open (a proof), ``"sat"`` when a centre violates and ``confirm`` (the re-checking
    oracle, e.g. onnxruntime) accepts it.
    """

    def __init__(self, mlp: ReluMLP, region: VnnlibRegion, *,
                 confirm: Callable[[NDArray[np.float64]], bool] | None = None) -> None:
        self.mlp, self.region, self.confirm = mlp, region, confirm
        self.C, self.rhs, self.sizes = _spec_rows(region)
        self.boxes = 0
        self.witness: NDArray[np.float64] | None = None
        self.status = "open"
        if any(n == 0 for n in self.sizes):  # an always-unsafe clause: nothing to refute
            self.lo = self.hi = np.zeros((0, len(region.lower)))
            self.prio = np.zeros(0)
            self.status = "unknown"
            return
        lo = np.asarray(region.lower, np.float64)[None]
        hi = np.asarray(region.upper, np.float64)[None]
        self.lo, self.hi, self.prio, self.smear = self._bound(lo, hi)
        self.cmargin = self._check_centres(self.lo, self.hi)
        self._close()

    def _bound(self, lo, hi):
        lb, A = crown_bounds_batch(self.mlp, lo, hi, self.C)
        excess = lb - self.rhs
        prio = np.full(len(lo), np.inf)
        k = 0
        for n in self.sizes:
            prio = np.minimum(prio, excess[:, k : k + n].max(axis=1))
            k += n
        self.boxes += len(lo)
        smear = np.abs(A).sum(axis=1) * (hi - lo)
        return lo, hi, prio, smear

    def _check_centres(self, lo, hi) -> NDArray[np.float64]:
        """Float64 margins of the box centres (a violating one ends the search as ``sat``)."""
        if len(lo) == 0:
            return np.zeros(0)
        from trustlab.methods.flowreach.falsify import margin_np

        centres = (lo + hi) / 2
        ys = self.mlp(centres)
        margins = margin_np(self.region, ys)
        if self.status != "open":
            return margins
        bad = np.flatnonzero(self.region.output_violated(ys))
        for i in bad[:8]:
            if self.confirm is None or self.confirm(centres[i]):
                self.witness, self.status = centres[i], "sat"
                break
        return margins

    def _close(self) -> None:
        keep = self.prio <= 0
        self.lo, self.hi, self.prio, self.smear, self.cmargin = (
            self.lo[keep], self.hi[keep], self.prio[keep], self.smear[keep], self.cmargin[keep])
        if self.status == "open" and len(self.lo) == 0:
            self.status = "unsat"

    @property
    def n_open(self) -> int:
        return len(self.lo)

    def worst(self, k: int, by: str = "bound") -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The ``k`` open boxes least refuted by CROWN (``by="bound"``) or with the smallest
        centre margin (``by="centre"``: where a falsifier should look)."""
        key = self.prio if by == "bound" else self.cmargin
        idx = np.argsort(key)[:k]
        return self.lo[idx], self.hi[idx]

    def step(self, batch: int = 128) -> str:
        """Split and re-bound up to ``batch`` open boxes; returns ``status``.

        Half the batch is the boxes CROWN refutes least (what a proof must close), half the
        boxes with the smallest centre margin (a dive towards violations, what a falsifier
        needs); both halves keep the search complete.
        """
        if self.status != "open":
            return self.status
        by_bound = np.argsort(self.prio)
        by_centre = np.argsort(self.cmargin)
        half = max(1, batch // 2)
        pick = np.unique(np.concatenate([by_bound[:half], by_centre[:half]]))
        rest = np.setdiff1d(np.arange(len(self.prio)), pick, assume_unique=True)
        lo, hi, smear = self.lo[pick], self.hi[pick], self.smear[pick]
        dim = np.argmax(smear, axis=1)
        rows = np.arange(len(pick))
        mid = (lo[rows, dim] + hi[rows, dim]) / 2
        left_hi, right_lo = hi.copy(), lo.copy()
        left_hi[rows, dim], right_lo[rows, dim] = mid, mid
        c_lo, c_hi = np.concatenate([lo, right_lo]), np.concatenate([left_hi, hi])
        c_lo, c_hi, c_prio, c_smear = self._bound(c_lo, c_hi)
        c_margin = self._check_centres(c_lo, c_hi)
        self.lo = np.concatenate([self.lo[rest], c_lo])
        self.hi = np.concatenate([self.hi[rest], c_hi])
        self.prio = np.concatenate([self.prio[rest], c_prio])
        self.smear = np.concatenate([self.smear[rest], c_smear])
        self.cmargin = np.concatenate([self.cmargin[rest], c_margin])
        self._close()
        return self.status


def prove_region_bab(
    mlp: ReluMLP, region: VnnlibRegion, timeout: float = 10.0, max_boxes: int = 2_000_000,
    *, batch: int = 128, confirm: Callable[[NDArray[np.float64]], bool] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> BaBResult:
    """Sound and complete-in-the-limit: CROWN with input-box splitting (branch and bound).

    Runs :class:`BoxSearch` until it proves the region (``unsat``), finds a violating box
    centre (``sat``, re-checked by ``confirm`` when given), or spends ``timeout`` seconds or
    ``max_boxes`` CROWN bounds (``timeout``).
    """
    _check_budget(timeout, "prove_region_bab")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InputError(f"The 'batch' parameter of prove_region_bab must be an integer >= 1. "
                         f"Got {batch!r}.")
    start = clock()
    search = BoxSearch(mlp, region, confirm=confirm)
    while search.status == "open":
        if clock() - start > timeout or search.boxes >= max_boxes:
            return BaBResult("timeout", clock() - start, search.boxes)
        search.step(batch)
    verdict = "unknown" if search.status == "unknown" else search.status
    return BaBResult(verdict, clock() - start, search.boxes, search.witness)


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
