"""Spec margins and falsification: random sampling, then Adam on sigmoid-reparametrised inputs.

The margin of a DNF output spec ``OR_k AND_a (A_k y <= b_k)_a`` is the continuous, unclipped
``m(y) = min_k max_a (A_k y - b_k)_a``; ``m(y) <= 0`` exactly when ``y`` is unsafe. Every
candidate counterexample is re-checked on the original network (onnxruntime) before it is
reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import NDArray

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar
from trustlab.datasets.onnx_nets import ReluMLP
from trustlab.datasets.vnnlib import VnnlibRegion

__all__ = [
    "Counterexample",
    "FalsificationResult",
    "falsify",
    "margin_np",
    "margin_torch",
    "polish_lp",
    "sample_box",
]

_EMPTY_CLAUSE = -1e30  # a clause without output atoms is always satisfied


def _check_outputs(region: VnnlibRegion, shape: tuple[int, ...], where: str) -> None:
    if not isinstance(region, VnnlibRegion):
        raise InputError(f"The 'region' parameter of {where} must be a VnnlibRegion. Got "
                         f"{type(region).__name__}.")
    cols = {p.A.shape[1] for p in region.polytopes}
    if len(shape) != 2 or (cols and shape[1] not in cols):
        raise InputError(f"The 'y' parameter of {where} must have shape (n, {cols.pop() if cols else 'd'}"
                         f"). Got {tuple(shape)}.")


def margin_torch(region: VnnlibRegion, y: torch.Tensor) -> torch.Tensor:
    """``min_k max_a (A_k y - b_k)_a`` for a batch ``y`` (n, n_outputs); <= 0 means unsafe."""
    _check_outputs(region, tuple(y.shape), "margin_torch")
    per_clause = []
    for poly in region.polytopes:
        if len(poly.b) == 0:
            per_clause.append(torch.full((y.shape[0],), _EMPTY_CLAUSE, dtype=y.dtype))
            continue
        A = torch.as_tensor(poly.A, dtype=y.dtype)
        b = torch.as_tensor(poly.b, dtype=y.dtype)
        per_clause.append((y @ A.T - b).amax(dim=1))
    return torch.stack(per_clause, dim=1).amin(dim=1)


def margin_np(region: VnnlibRegion, y: NDArray[np.floating]) -> NDArray[np.float64]:
    """NumPy twin of ``margin_torch`` (float64)."""
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    _check_outputs(region, y.shape, "margin_np")
    if not np.isfinite(y).all():
        raise InputError(f"The 'y' parameter of margin_np has {int((~np.isfinite(y)).sum())} NaN "
                         "or infinite value(s): the margin of such an output is undefined.")
    per_clause = []
    for poly in region.polytopes:
        if len(poly.b) == 0:
            per_clause.append(np.full(len(y), _EMPTY_CLAUSE))
        else:
            per_clause.append((y @ poly.A.T - poly.b).max(axis=1))
    return np.min(np.stack(per_clause, axis=1), axis=1)


def sample_box(region: VnnlibRegion, n: int, rng: np.random.Generator) -> NDArray[np.float32]:
    """``n`` inputs uniform on the region's box (float32, as the networks take them)."""
    check_scalar(n, "n", "sample_box", kind=int, lo=0)
    u = rng.random((n, len(region.lower)))
    x = (region.lower + (region.upper - region.lower) * u).astype(np.float32)
    # rounding to float32 can step just outside a bound that float32 cannot represent (ACAS Xu
    # boxes); clip to the float32 values nearest the box from inside, where there are any
    lo, hi = _inner_float32(region.lower, region.upper)
    return np.clip(x, lo, hi, out=x)


def _inner_float32(lower, upper) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """Smallest float32 ``>= lower`` and largest float32 ``<= upper`` (kept as is if crossing)."""
    lo = np.asarray(lower, np.float64).astype(np.float32)
    hi = np.asarray(upper, np.float64).astype(np.float32)
    lo = np.where(lo < lower, np.nextafter(lo, np.float32(np.inf)), lo)
    hi = np.where(hi > upper, np.nextafter(hi, np.float32(-np.inf)), hi)
    cross = lo > hi
    return np.where(cross, hi, lo).astype(np.float32), hi.astype(np.float32)


@dataclass(frozen=True)
class Counterexample:
    """An input in the box whose output (from the re-checking oracle) is unsafe."""

    x: NDArray[np.float32]
    y: NDArray[np.float32]
    margin: float


@dataclass(frozen=True)
class FalsificationResult:
    counterexample: Counterexample | None
    best_margin: float
    n_evaluated: int
    seconds: float
    stage: str  # "random", "adam", "lp", "bab" or "none"
    proved: bool = False  # the CROWN box search closed every box: a sound proof (no witness)
    rounds: int = 0
    boxes: int = 0  # CROWN bounds computed by the box search


def _confirm(
    region: VnnlibRegion,
    xs: NDArray[np.floating],
    oracle: Callable[[NDArray[np.float32]], NDArray[np.floating]],
) -> Counterexample | None:
    xs = np.clip(np.asarray(xs, np.float64), region.lower, region.upper)
    xs = np.clip(xs.astype(np.float32), *_inner_float32(region.lower, region.upper))
    xs = xs[region.contains_input(xs)]
    if len(xs) == 0:
        return None
    ys = np.asarray(oracle(xs))
    m = margin_np(region, ys)
    ok = np.flatnonzero(region.output_violated(ys))
    if len(ok) == 0:
        return None
    best = ok[np.argmin(m[ok])]
    return Counterexample(xs[best].copy(), ys[best].astype(np.float32), float(m[best]))


def polish_lp(
    mlp: ReluMLP, region: VnnlibRegion, x0: NDArray[np.floating],
    lower: NDArray[np.floating] | None = None, upper: NDArray[np.floating] | None = None,
    *, max_iter: int = 30,
) -> tuple[NDArray[np.float64], float]:
    """Exact descent of the margin across linear regions of a ReLU network, from ``x0``.

    Inside the activation region of the current point the network is affine, so the best
    point of that region (within ``[lower, upper]``) is a linear program: minimise ``t`` with
    ``A_k (J x + c) - b_k <= t`` and the region's ReLU sign constraints (HiGHS). The optimum
    lies on the region's boundary; the next LP starts in the neighbouring region reached by
    stepping a hair further along the last move. Stops on a violation, when a move gains
    nothing, or after ``max_iter`` LPs. Returns the best point and its float64 margin.
    """
    from scipy import optimize

    lo = np.asarray(region.lower if lower is None else lower, np.float64)
    hi = np.asarray(region.upper if upper is None else upper, np.float64)
    x = np.clip(np.asarray(x0, np.float64), lo, hi)
    best_x, best_m = x, float(margin_np(region, mlp(x[None]))[0])
    prev = x
    n = len(x)
    for _ in range(max_iter):
        M, v = np.eye(n), np.zeros(n)
        G, H = [], []
        for W, b in zip(mlp.weights[:-1], mlp.biases[:-1], strict=True):
            pre, pb = W @ M, W @ v + b
            act = pre @ x + pb > 0
            sgn = np.where(act, -1.0, 1.0)
            G.append(sgn[:, None] * pre)
            H.append(-sgn * pb)
            M, v = act[:, None] * pre, act * pb
        J = mlp.weights[-1] @ M
        c = mlp.weights[-1] @ v + mlp.biases[-1]
        G_all, H_all = np.vstack(G), np.concatenate(H)
        step_best: tuple[float, NDArray[np.float64]] | None = None
        for poly in region.polytopes:
            if len(poly.b) == 0:
                continue
            A_ub = np.vstack([np.c_[poly.A @ J, -np.ones(len(poly.b))],
                              np.c_[G_all, np.zeros(len(G_all))]])
            b_ub = np.r_[poly.b - poly.A @ c, H_all]
            res = optimize.linprog(np.r_[np.zeros(n), 1.0], A_ub=A_ub, b_ub=b_ub,
                                   bounds=[*zip(lo, hi, strict=True), (None, None)],
                                   method="highs")
            if res.status == 0 and (step_best is None or res.x[n] < step_best[0]):
                step_best = (float(res.x[n]), res.x[:n])
        if step_best is None:
            break
        xs = np.clip(step_best[1], lo, hi)
        m = float(margin_np(region, mlp(xs[None]))[0])
        improved = m < best_m - 1e-12
        if improved:
            best_x, best_m = xs, m
        if best_m <= 0 or (not improved and np.allclose(xs, prev, atol=1e-12)):
            break
        d = xs - prev
        nd = float(np.linalg.norm(d))
        nudge = 1e-7 * (hi - lo) * (d / nd if nd > 0 else 0.0)
        prev, x = x, np.clip(xs + nudge, lo, hi)
    return best_x, best_m


def _adam(
    net: Callable[[torch.Tensor], torch.Tensor],
    region: VnnlibRegion,
    u0: torch.Tensor,
    lo: torch.Tensor,
    width: torch.Tensor,
    n_steps: int,
    lr: float,
    check: Callable[[torch.Tensor, torch.Tensor], Counterexample | None],
) -> tuple[Counterexample | None, float, NDArray[np.float32], NDArray[np.float64], int]:
    """Adam on ``x = lo + width * sigmoid(z)`` (per-start boxes ``lo``, ``width``)."""
    z = torch.logit(u0.clamp(0.01, 0.99)).requires_grad_(True)
    opt = torch.optim.Adam([z], lr=lr)
    # geometric decay to lr / 50: large steps to explore, small ones to settle on a vertex
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.02 ** (1 / max(n_steps, 1)))
    best = np.inf
    n_eval = 0
    x = lo + width * torch.sigmoid(z)
    m = torch.full((len(u0),), np.inf)
    for step in range(n_steps):
        x = lo + width * torch.sigmoid(z)
        m = margin_torch(region, net(x))
        n_eval += len(u0)
        opt.zero_grad()
        m.sum().backward()
        opt.step()
        sched.step()
        if step % 10 == 9 or step == n_steps - 1:
            m_det = m.detach()
            best = min(best, float(m_det.min()))
            cex = check(x.detach(), m_det)
            if cex is not None:
                return cex, best, x.detach().numpy(), m_det.numpy(), n_eval
    return None, best, x.detach().numpy(), m.detach().numpy().astype(np.float64), n_eval


def falsify(
    net: Callable[[torch.Tensor], torch.Tensor],
    region: VnnlibRegion,
    oracle: Callable[[NDArray[np.float32]], NDArray[np.floating]],
    rng: np.random.Generator,
    *,
    n_random: int = 10_000,
    n_starts: int = 1_000,
    n_steps: int = 150,
    lr: float = 0.05,
    max_rounds: int | None = 4,
    time_limit: float = 10.0,
    mlp: ReluMLP | None = None,
    n_polish: int = 8,
    bab_batch: int = 64,
    clock: Callable[[], float] = time.perf_counter,
) -> FalsificationResult:
    """Search the region for a counterexample until one is confirmed or the budget is spent.

    ``net`` is the differentiable (torch) network, ``oracle`` the original one (onnxruntime):
    a candidate counts only if ``oracle`` confirms it. Stages, cheapest first:

    1. ``n_random`` uniform samples;
    2. a round of ``n_starts`` Adam restarts on ``x = lo + (hi - lo) * sigmoid(z)`` (a quarter
       seeded at the best samples), ``n_steps`` steps each, minimising the summed margins;
    3. with ``mlp`` (the network as an affine/ReLU chain), exact linear-region descent
       (:func:`polish_lp`) from the ``n_polish`` best distinct points found so far;
    4. then, round after round until ``max_rounds`` (``None``: no limit) or ``time_limit``:
       a CROWN branch-and-bound step (:class:`BoxSearch`, which may also *prove* the region:
       ``proved``), Adam restarts inside the boxes CROWN refutes least, and polishing there,
       alternating with fresh Adam rounds over the whole box at a varied learning rate and
       restarts around the best margins seen.

    Instances with a large violation set end in stage 1 or 2; the later stages spend the
    budget only where the first ones failed. ``clock`` measures the budget (wall time by
    default; ``time.process_time`` makes it independent of the machine's load).
    """
    for name, v in (("n_random", n_random), ("n_starts", n_starts), ("n_steps", n_steps),
                    ("n_polish", n_polish)):
        check_scalar(v, name, "falsify", kind=int, lo=0)
    check_scalar(bab_batch, "bab_batch", "falsify", kind=int, lo=1)
    check_scalar(lr, "lr", "falsify", lo=0, closed="neither")
    check_scalar(time_limit, "time_limit", "falsify", lo=0, closed="neither")
    if max_rounds is not None and (not isinstance(max_rounds, int) or max_rounds < 0):
        raise InputError(f"The 'max_rounds' parameter of falsify must be an integer >= 0 or "
                         f"None. Got {max_rounds!r}.")
    start = clock()

    def left() -> float:
        return time_limit - (clock() - start)

    n_in = len(region.lower)
    lo = torch.as_tensor(region.lower, dtype=torch.float32)
    width = torch.as_tensor(region.upper - region.lower, dtype=torch.float32)
    safe_w = torch.where(width > 0, width, torch.ones_like(width))
    state = {"best": np.inf, "n_eval": 0, "rounds": 0}
    pool_x = np.zeros((0, n_in))
    pool_m = np.zeros(0)

    def done(cex: Counterexample | None, stage: str, proved: bool = False,
             boxes: int = 0) -> FalsificationResult:
        best = cex.margin if cex is not None else state["best"]
        return FalsificationResult(cex, best, state["n_eval"], clock() - start,
                                   stage, proved, state["rounds"], boxes)

    def check(x: torch.Tensor, m: torch.Tensor) -> Counterexample | None:
        hits = torch.nonzero(m <= 0).flatten()
        if len(hits) == 0:
            return None
        return _confirm(region, x[hits[torch.argsort(m[hits])][:64]].numpy(), oracle)

    def remember(xs: NDArray[np.floating], ms: NDArray[np.floating]) -> None:
        nonlocal pool_x, pool_m
        pool_x = np.concatenate([pool_x, np.asarray(xs, np.float64)])
        pool_m = np.concatenate([pool_m, np.asarray(ms, np.float64)])
        keep = np.argsort(pool_m)[:256]
        pool_x, pool_m = pool_x[keep], pool_m[keep]
        state["best"] = min(state["best"], float(pool_m.min()) if len(pool_m) else np.inf)

    gen = torch.Generator().manual_seed(int(rng.integers(0, 2**62)))

    # 1. uniform samples
    if n_random:
        x = sample_box(region, n_random, rng)
        with torch.no_grad():
            m = margin_torch(region, net(torch.as_tensor(x))).numpy()
        state["n_eval"] += n_random
        remember(x, m)
        order = np.argsort(m)
        if m[order[0]] <= 0:
            cex = _confirm(region, x[order[:64]], oracle)
            if cex is not None:
                return done(cex, "random")
    if not (n_starts and n_steps) or max_rounds == 0:
        return done(None, "none")

    def adam_round(u0: torch.Tensor, blo: torch.Tensor, bwidth: torch.Tensor, lr_: float,
                   steps: int) -> Counterexample | None:
        cex, best, xs, ms, n = _adam(net, region, u0, blo, bwidth, steps, lr_, check)
        state["n_eval"] += n
        state["best"] = min(state["best"], best)
        remember(xs, ms)
        return cex

    def polish(points: NDArray[np.float64], blo=None, bhi=None) -> Counterexample | None:
        if mlp is None:
            return None
        for i, p in enumerate(points):
            if left() <= 0:
                break
            xb, mb = polish_lp(mlp, region, p, None if blo is None else blo[i],
                               None if bhi is None else bhi[i])
            remember(xb[None], [mb])
            if mb <= 0:
                cex = _confirm(region, xb[None], oracle)
                if cex is not None:
                    return cex
        return None

    def distinct_best(k: int) -> NDArray[np.float64]:
        if len(pool_x) == 0:
            return pool_x
        scale = np.where(region.upper > region.lower, region.upper - region.lower, 1.0)
        picked: list[int] = []
        for i in np.argsort(pool_m):
            if all(np.abs((pool_x[i] - pool_x[j]) / scale).max() > 1e-3 for j in picked):
                picked.append(i)
            if len(picked) == k:
                break
        return pool_x[picked]

    # a CROWN bound of the whole box first: when it (or a later split) refutes the spec
    # everywhere, no falsifier can succeed and the search ends with a proof
    search = None
    if mlp is not None:
        from trustlab.methods.flowreach.bounds import BoxSearch

        def confirm(xc: NDArray[np.float64]) -> bool:
            return _confirm(region, xc[None], oracle) is not None

        search = BoxSearch(mlp, region, confirm=confirm)
        if search.status == "unsat":
            return done(None, "none", proved=True, boxes=search.boxes)

    # 2. first Adam round, a quarter of the starts at the best uniform samples
    u = torch.rand(n_starts, n_in, generator=gen) * 0.98 + 0.01
    seeds = distinct_best(max(1, n_starts // 4)) if len(pool_x) else np.zeros((0, n_in))
    if len(seeds):
        k = min(len(seeds), n_starts)
        u[:k] = ((torch.as_tensor(seeds[:k], dtype=torch.float32) - lo) / safe_w)
    state["rounds"] = 1
    cex = adam_round(u, lo, width, lr, n_steps)
    if cex is not None:
        return done(cex, "adam")
    if max_rounds == 1 or left() <= 0:
        return done(None, "none", boxes=search.boxes if search else 0)

    # 3. exact polishing of the best distinct points
    cex = polish(distinct_best(n_polish))
    if cex is not None:
        return done(cex, "lp")

    # 4. rounds until the budget is spent
    round_ = 1
    lrs = (0.02, 0.1, 0.01, 0.05)
    while left() > 0 and (max_rounds is None or round_ < max_rounds):
        round_ += 1
        state["rounds"] = round_
        if search is not None and search.status == "open":
            t_end = clock() + min(max(0.2, 0.1 * time_limit), left())
            while search.status == "open" and clock() < t_end:
                search.step(bab_batch)
            if search.status == "unsat":
                return done(None, "none", proved=True, boxes=search.boxes)
            if search.status == "sat":
                cex = _confirm(region, search.witness[None], oracle)
                if cex is not None:
                    return done(cex, "bab", boxes=search.boxes)
            # Adam inside the boxes CROWN refutes least, then polish their best points
            blo, bhi = search.worst(max(1, n_starts // 8), by="centre")
            reps = max(1, n_starts // max(len(blo), 1))
            blo_t = torch.as_tensor(np.repeat(blo, reps, axis=0), dtype=torch.float32)
            bw_t = torch.as_tensor(np.repeat(bhi - blo, reps, axis=0), dtype=torch.float32)
            u = torch.rand(len(blo_t), n_in, generator=gen) * 0.98 + 0.01
            cex = adam_round(u, blo_t, bw_t, lrs[round_ % len(lrs)], n_steps)
            if cex is not None:
                return done(cex, "bab", boxes=search.boxes)
            k = min(len(blo), n_polish)
            centres = (blo[:k] + bhi[:k]) / 2
            cex = polish(centres, blo[:k], bhi[:k])
            if cex is not None:
                return done(cex, "lp", boxes=search.boxes)
        if left() <= 0:
            break
        # fresh starts over the whole box, half of them around the best points seen
        u = torch.rand(n_starts, n_in, generator=gen) * 0.98 + 0.01
        near = distinct_best(max(1, n_starts // 2))
        if len(near):
            scale = 0.02 * 0.5 ** (round_ % 6)
            jitter = torch.randn(len(near), n_in, generator=gen) * scale
            u[: len(near)] = ((torch.as_tensor(near, dtype=torch.float32) - lo) / safe_w
                              + jitter).clamp(0.01, 0.99)
        cex = adam_round(u, lo, width, lrs[round_ % len(lrs)], n_steps)
        if cex is not None:
            return done(cex, "adam", boxes=search.boxes if search else 0)
        cex = polish(distinct_best(max(2, n_polish // 2)))
        if cex is not None:
            return done(cex, "lp", boxes=search.boxes if search else 0)
    return done(None, "none", boxes=search.boxes if search else 0)
