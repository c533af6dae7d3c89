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
from trustlab.datasets.vnnlib import VnnlibRegion

__all__ = [
    "Counterexample",
    "FalsificationResult",
    "falsify",
    "margin_np",
    "margin_torch",
    "sample_box",
]

_EMPTY_CLAUSE = -1e30  # a clause without output atoms is always satisfied


def margin_torch(region: VnnlibRegion, y: torch.Tensor) -> torch.Tensor:
    """``min_k max_a (A_k y - b_k)_a`` for a batch ``y`` (n, n_outputs); <= 0 means unsafe."""
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
    per_clause = []
    for poly in region.polytopes:
        if len(poly.b) == 0:
            per_clause.append(np.full(len(y), _EMPTY_CLAUSE))
        else:
            per_clause.append((y @ poly.A.T - poly.b).max(axis=1))
    return np.min(np.stack(per_clause, axis=1), axis=1)


def sample_box(region: VnnlibRegion, n: int, rng: np.random.Generator) -> NDArray[np.float32]:
    """``n`` inputs uniform on the region's box (float32, as the networks take them)."""
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
    stage: str  # "random", "adam" or "none"


def _confirm(
    region: VnnlibRegion,
    xs: NDArray[np.float32],
    oracle: Callable[[NDArray[np.float32]], NDArray[np.floating]],
) -> Counterexample | None:
    xs = np.clip(xs, *_inner_float32(region.lower, region.upper))
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
    max_rounds: int = 4,
    time_limit: float = 10.0,
) -> FalsificationResult:
    """Search the region for a counterexample: uniform samples, then Adam restarts.

    ``net`` is the differentiable (torch) network, ``oracle`` the original one (onnxruntime):
    a candidate counts only if ``oracle`` confirms it. Adam optimises ``z`` with
    ``x = lo + (hi - lo) * sigmoid(z)`` so every iterate stays in the box, minimising the summed
    margins of ``n_starts`` independent starts; up to ``max_rounds`` rounds of fresh starts run
    while time is left.
    """
    if n_random < 0 or n_starts < 0 or n_steps < 0:
        raise InputError("The sample, start and step counts of falsify must be >= 0.")
    start = time.perf_counter()
    lo = torch.as_tensor(region.lower, dtype=torch.float32)
    width = torch.as_tensor(region.upper - region.lower, dtype=torch.float32)
    best = np.inf
    n_eval = 0
    seeds_x = np.zeros((0, len(region.lower)), np.float32)
    if n_random:
        x = sample_box(region, n_random, rng)
        with torch.no_grad():
            m = margin_torch(region, net(torch.as_tensor(x))).numpy()
        n_eval += n_random
        best = float(m.min())
        order = np.argsort(m)
        if m[order[0]] <= 0:
            cex = _confirm(region, x[order[:64]], oracle)
            if cex is not None:
                return FalsificationResult(cex, cex.margin, n_eval, time.perf_counter() - start,
                                           "random")
        seeds_x = x[order[: max(1, n_starts // 4)]]
    gen = torch.Generator().manual_seed(int(rng.integers(0, 2**62)))
    for round_ in range(max_rounds if n_starts and n_steps else 0):
        if time.perf_counter() - start > time_limit:
            break
        u = torch.rand(n_starts, len(region.lower), generator=gen) * 0.98 + 0.01
        if round_ == 0 and len(seeds_x):
            k = min(len(seeds_x), n_starts)
            safe_w = torch.where(width > 0, width, torch.ones_like(width))
            u0 = ((torch.as_tensor(seeds_x[:k]) - lo) / safe_w).clamp(0.01, 0.99)
            u[:k] = u0
        z = torch.logit(u).requires_grad_(True)
        opt = torch.optim.Adam([z], lr=lr)
        # geometric decay to lr / 50: large steps to explore, small ones to settle on a vertex
        sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=(0.02) ** (1 / max(n_steps, 1)))
        for step in range(n_steps):
            x = lo + width * torch.sigmoid(z)
            m = margin_torch(region, net(x))
            n_eval += n_starts
            opt.zero_grad()
            m.sum().backward()
            opt.step()
            sched.step()
            if step % 10 == 9 or step == n_steps - 1:
                m_det = m.detach()
                best = min(best, float(m_det.min()))
                hits = torch.nonzero(m_det <= 0).flatten()
                if len(hits):
                    cand = x.detach()[hits[torch.argsort(m_det[hits])][:64]].numpy()
                    cex = _confirm(region, cand, oracle)
                    if cex is not None:
                        return FalsificationResult(cex, cex.margin, n_eval,
                                                   time.perf_counter() - start, "adam")
                if time.perf_counter() - start > time_limit:
                    break
    return FalsificationResult(None, best, n_eval, time.perf_counter() - start, "none")
