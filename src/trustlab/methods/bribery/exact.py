"""Exact minimum bribery for the NP-hard rules (Borda, mean win rate) and pairwise majority.

Bribing dataset ``d`` changes only column ``d``, so its effect on every pairwise comparison with the
target is fixed in advance and effects add up over datasets:

* the target gains ``G_o`` half-wins on ``d`` and every model ``j`` that was above (tied with) it
  loses 2 (1) half-wins: ``L[j, o]``. Borda and mean win rate are sums of such terms, so "target is
  the unique winner" is one linear constraint per competitor and the minimum bribe is a 0/1 ILP;
* pairwise majority: the margin of target vs ``j`` grows by ``L[j, o]``; Copeland scores are
  threshold functions of these margins, modelled with two binaries per competitor (``z_j``: target
  beats ``j``, ``u_j``: target beats or ties ``j``).

Coefficients are exact integers (mean win rate is scaled by ``2·lcm(n_d - 1)·m_t·m_j``), so the
strict inequality "above" is ``>= rhs + 1`` and HiGHS's feasibility tolerance cannot accept a set
that does not win. Every returned set is re-checked by recomputing the rule from the bribed table.
The certificate is HiGHS's status, the LP-relaxation lower bound and the MIP dual bound.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from trustlab.core.errors import InputError, SolverError
from trustlab.core.validation import as_float_array, check_scalar
from trustlab.methods.bribery.rules import (
    TIE_RTOL,
    _as_scores,
    check_margins,
    check_rule,
    check_target,
    mean_scores,
    pairwise_margins,
    target_margins,
    wins2,
)

__all__ = ["ExactSolution", "Options", "build_options", "solve_exact"]

EXACT_RULES = ("mean", "mwr", "borda", "copeland", "condorcet")


@dataclass(frozen=True)
class Options:
    """Bribe options of one target: option ``o`` sets its score on ``dataset[o]`` to ``value[o]``
    at ``cost[o]``; at most one option per dataset is taken."""

    dataset: np.ndarray
    value: np.ndarray
    cost: np.ndarray

    def __post_init__(self) -> None:
        where = "Options"
        d = as_float_array(self.dataset, "dataset", where, ndim=1, allow_empty=True)
        v = as_float_array(self.value, "value", where, ndim=1, allow_empty=True)
        c = as_float_array(self.cost, "cost", where, ndim=1, allow_empty=True)
        if not (d.shape == v.shape == c.shape):
            raise InputError(
                f"The 'dataset', 'value' and 'cost' of {where} must have one length. "
                f"Got {d.size}, {v.size}, {c.size}."
            )
        if d.size and (np.any(d != np.round(d)) or d.min() < 0):
            raise InputError(f"The 'dataset' of {where} must hold dataset indices >= 0.")
        if np.any(c < 0):
            raise InputError(f"The 'cost' of {where} must be >= 0.")
        object.__setattr__(self, "dataset", d.astype(np.int64))
        object.__setattr__(self, "value", v)
        object.__setattr__(self, "cost", c)


@dataclass(frozen=True)
class ExactSolution:
    chosen: tuple[int, ...]  # option indices
    cost: float | None  # None when no feasible set was found
    lower_bound: float
    lp_bound: float
    status: str  # "optimal", "infeasible", "time_limit", ...
    optimal: bool
    mip_gap: float
    solve_time: float


def build_options(w: np.ndarray, v: np.ndarray, cost: np.ndarray | None = None) -> Options:
    """Unit-cost top bribes: one option per dataset where the bribed value ``w`` beats ``v``."""
    where = "build_options"
    w = as_float_array(w, "w", where, ndim=1, allow_empty=True, allow_nonfinite=True)
    v = as_float_array(v, "v", where, ndim=1, allow_empty=True, allow_nonfinite=True)
    if w.shape != v.shape or np.isinf(w).any() or np.isinf(v).any():
        raise InputError(
            f"The 'w' and 'v' parameters of {where} must be one finite-or-NaN value per dataset, "
            f"of one length. Got {w.size} and {v.size}."
        )
    if cost is not None:
        cost = as_float_array(cost, "cost", where, ndim=1)
        if cost.shape != w.shape or np.any(cost < 0):
            raise InputError(
                f"The 'cost' parameter of {where} must be {w.size} numbers >= 0 (one per dataset)."
            )
    with np.errstate(invalid="ignore"):
        ok = ~np.isnan(w) & ~np.isnan(v) & (w > v)
    d = np.flatnonzero(ok)
    c = np.ones(d.size) if cost is None else np.asarray(cost, float)[d]
    return Options(d, w[d], c)


def _cmp2(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (1 + np.sign(a - b)).astype(np.int64)


def _effects(s: np.ndarray, t: int, opts: Options) -> np.ndarray:
    """L[j, o]: change of the pairwise comparison (in half-wins) target-vs-j caused by option o;
    equals the half-wins model j loses on that dataset. Zero for j = t and for missing j."""
    n = s.shape[0]
    L = np.zeros((n, opts.dataset.size), dtype=np.int64)
    for o, (d, w) in enumerate(zip(opts.dataset, opts.value, strict=True)):
        col = s[:, d]
        pres = ~np.isnan(col)
        pres[t] = False
        v = s[t, d]
        L[pres, o] = _cmp2(np.full(pres.sum(), w), col[pres]) - _cmp2(np.full(pres.sum(), v), col[pres])
    return L


def _additive_system(
    s: np.ndarray, t: int, rule: str, opts: Options
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows A·y >= b (one per competitor that matters) and the competitor indices.

    Rows whose rhs is <= 0 are dropped: all coefficients are >= 0, so they always hold."""
    n, m = s.shape
    L = _effects(s, t, opts)
    G = L.sum(axis=0)
    if rule == "borda":
        w2, _ = wins2(s)
        B = w2.sum(axis=1)
        A = G[None, :] + L
        b = B - B[t] + 1
    elif rule == "condorcet":
        A = L
        b = 1 - target_margins(s, t)
    elif rule == "mwr":
        w2, counts = wins2(s)
        present = ~np.isnan(s)
        valid = present & (counts >= 2)[None, :]
        mcols = valid.sum(axis=1).astype(np.int64)
        dens = sorted({int(c) - 1 for c in counts if c >= 2})
        lcm = math.lcm(*dens) if dens else 1
        f = np.array([lcm // (int(c) - 1) if c >= 2 else 0 for c in counts], dtype=object)
        scale_ok = lcm * 2 * n * m * max(1, int(mcols.max())) ** 2 < 2**52
        if not scale_ok:
            return _mwr_float_system(s, t, opts, L, G, w2, counts, valid, mcols)
        f = f.astype(np.int64)
        R = (np.where(valid, w2, 0) * f[None, :]).sum(axis=1)
        fo = f[opts.dataset]
        A = (mcols[:, None] * G[None, :] + mcols[t] * L) * fo[None, :]
        b = mcols[t] * R - mcols * R[t] + 1
        b = np.where(mcols > 0, b, 0)  # a model with no comparable dataset never blocks
    else:
        raise InputError(f"Rule '{rule}' has no additive formulation.")
    keep = np.flatnonzero((b > 0) & (np.arange(n) != t))
    return A[keep].astype(float), b[keep].astype(float), keep


def _mwr_float_system(s, t, opts, L, G, w2, counts, valid, mcols):
    """Fallback when exact integer scaling would overflow: MWR units with a small strict margin."""
    n = s.shape[0]
    den = np.where(counts >= 2, 2.0 * (counts - 1), np.inf)
    mwr = np.where(mcols > 0, (np.where(valid, w2, 0) / den[None, :]).sum(1) / np.maximum(mcols, 1), 0)
    dd = den[opts.dataset]
    with np.errstate(divide="ignore", invalid="ignore"):
        A = G[None, :] / dd[None, :] / max(mcols[t], 1) + L / dd[None, :] / np.maximum(mcols, 1)[:, None]
    b = mwr - mwr[t] + 1e-7
    b = np.where(mcols > 0, b, 0)
    keep = np.flatnonzero((b > 0) & (np.arange(n) != t))
    return A[keep], b[keep], keep


def _mean_system(s: np.ndarray, t: int, opts: Options) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    agg = mean_scores(s)
    others = np.delete(agg, t)
    others = others[~np.isnan(others)]
    cnt = int((~np.isnan(s[t])).sum())
    if others.size == 0:
        return np.zeros((0, opts.dataset.size)), np.zeros(0), np.zeros(0, int)
    thr = others.max()
    thr = thr + TIE_RTOL * max(1.0, abs(thr))
    gain = (opts.value - s[t, opts.dataset]) / cnt
    need = thr - agg[t]
    if need < 0:
        return np.zeros((0, opts.dataset.size)), np.zeros(0), np.zeros(0, int)
    # one covering row a·y >= need with a >= 0: capping a at need keeps the same 0/1 solutions;
    # dividing by need puts every coefficient in [0, 1] with rhs 1 (floats: verified afterwards)
    need = need * (1 + 1e-12) + 1e-300
    return np.minimum(gain / need, 1.0)[None, :], np.array([1.0]), np.array([0])


def _copeland_system(
    s: np.ndarray, t: int, opts: Options, margins: np.ndarray | None
) -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray, int, int, int]:
    """Constraints over [y (P) | z (K) | u (K) | S]; returns (A, lo, hi, K, P, S_const).

    Competitors already beaten (margin >= 1) or unbeatable even with every option are constants,
    not variables; winner rows that hold for any bribe are dropped."""
    n = s.shape[0]
    M = (pairwise_margins(s) if margins is None else margins).astype(np.int64)
    L = _effects(s, t, opts)
    comp = np.flatnonzero(np.arange(n) != t)
    P = opts.dataset.size
    Mt = M[t, comp]
    Lc = L[comp]
    reach = Mt + _max_gain(Lc, opts)
    c2 = 2 * (M > 0).sum(axis=1) + (M == 0).sum(axis=1) - 1
    c2_vs_t = np.where(M[comp, t] > 0, 2, np.where(M[comp, t] == 0, 1, 0))
    base = c2[comp] - c2_vs_t  # competitor's doubled Copeland score without the pair with t
    z_fixed = np.where(Mt >= 1, 1, np.where(reach < 1, 0, -1))  # -1: variable
    u_fixed = np.where(Mt >= 0, 1, np.where(reach < 0, 0, -1))
    zv, uv = np.flatnonzero(z_fixed < 0), np.flatnonzero(u_fixed < 0)
    K = zv.size + uv.size
    zi = {int(k): P + i for i, k in enumerate(zv)}
    ui = {int(k): P + zv.size + i for i, k in enumerate(uv)}
    iS = P + K
    S_const = int((z_fixed == 1).sum() + (u_fixed == 1).sum())
    S_min = S_const  # S >= constants (all variable indicators at 0)
    rows, cols, vals, lo, hi = [], [], [], [], []
    r = 0

    def add_row(cidx, cval, lb, ub):
        nonlocal r
        rows.extend([r] * len(cidx))
        cols.extend(cidx)
        vals.extend(cval)
        lo.append(lb)
        hi.append(ub)
        r += 1

    for k in zv:
        nz = np.flatnonzero(Lc[k])
        add_row([*nz.tolist(), zi[int(k)]], [*Lc[k, nz].tolist(), -(1 - Mt[k])], 0, np.inf)
    for k in uv:
        nz = np.flatnonzero(Lc[k])
        add_row([*nz.tolist(), ui[int(k)]], [*Lc[k, nz].tolist(), float(Mt[k])], 0, np.inf)
    for k in zv:
        if int(k) in ui:
            add_row([zi[int(k)], ui[int(k)]], [1, -1], -np.inf, 0)
    for k in range(comp.size):
        # S + z_k + u_k >= base_k + 3
        const = int(z_fixed[k] == 1) + int(u_fixed[k] == 1)
        need = base[k] + 3 - const
        idx, val = [iS], [1.0]
        if int(k) in zi:
            idx.append(zi[int(k)])
            val.append(1.0)
        if int(k) in ui:
            idx.append(ui[int(k)])
            val.append(1.0)
        if S_min >= need:
            continue
        add_row(idx, val, need, np.inf)
    add_row([iS, *range(P, P + K)], [1] + [-1] * K, S_const, S_const)
    A = sparse.csr_matrix((vals, (rows, cols)), shape=(r, P + K + 1), dtype=float)
    return A, np.array(lo, float), np.array(hi, float), K, P, S_const


def _max_gain(Lc: np.ndarray, opts: Options) -> np.ndarray:
    """Largest total effect per row when at most one option per dataset is taken."""
    total = np.zeros(Lc.shape[0], dtype=np.int64)
    for d in np.unique(opts.dataset):
        total += Lc[:, opts.dataset == d].max(axis=1)
    return total


def _status_name(res) -> str:
    return {0: "optimal", 1: "time_limit", 2: "infeasible", 3: "unbounded"}.get(res.status, "error")


def solve_exact(
    scores: np.ndarray,
    target: int,
    rule: str,
    opts: Options,
    *,
    time_limit: float = 10.0,
    margins: np.ndarray | None = None,
) -> ExactSolution:
    """Minimum-cost set of options making ``target`` the unique winner under ``rule`` (0/1 ILP,
    HiGHS through ``scipy.optimize.milp``). At most one option per dataset."""
    where = "solve_exact"
    check_rule(rule, EXACT_RULES)
    time_limit = check_scalar(time_limit, "time_limit", where, lo=0.0, closed="neither")
    s = _as_scores(scores, where)
    target = check_target(target, s.shape[0], where)
    if not isinstance(opts, Options):
        raise InputError(
            f"The 'opts' parameter of {where} must be Options (see build_options). "
            f"Got {type(opts).__name__}."
        )
    if opts.dataset.size and opts.dataset.max() >= s.shape[1]:
        raise InputError(f"The options of {where} name a dataset past the table's {s.shape[1]}.")
    if margins is not None:
        margins = check_margins(margins, s.shape[0], where)
    P = opts.dataset.size
    t0 = time.perf_counter()
    if rule == "copeland":
        A, lo, hi, K, _, S_const = _copeland_system(s, target, opts, margins)
        nvar = P + K + 1
        cost = np.concatenate([opts.cost, np.zeros(K + 1)])
        ub = np.concatenate([np.ones(P + K), [S_const + K]])
    else:
        if rule == "mean":
            Ad, b, _ = _mean_system(s, target, opts)
        else:
            Ad, b, _ = _additive_system(s, target, rule, opts)
        if b.size == 0:
            return ExactSolution((), 0.0, 0.0, 0.0, "optimal", True, 0.0, time.perf_counter() - t0)
        one_per_dataset = np.unique(opts.dataset).size == P
        if P == 0 or (one_per_dataset and np.any(Ad.sum(axis=1) < b - 1e-9 * np.maximum(1, np.abs(b)))):
            return ExactSolution(
                (), None, np.inf, np.inf, "infeasible", True, 0.0, time.perf_counter() - t0
            )
        A, lo, hi = sparse.csr_matrix(Ad), b, np.full(b.size, np.inf)
        nvar = P
        cost = opts.cost.astype(float)
        ub = np.ones(P)
    # at most one option per dataset (only binds for shift bribery)
    ds, inv = np.unique(opts.dataset, return_inverse=True)
    if ds.size < P:
        E = sparse.csr_matrix((np.ones(P), (inv, np.arange(P))), shape=(ds.size, nvar))
        A = sparse.vstack([A, E]).tocsr()
        lo = np.concatenate([lo, np.full(ds.size, -np.inf)])
        hi = np.concatenate([hi, np.ones(ds.size)])
    cons = LinearConstraint(A, lo, hi)
    bounds = Bounds(np.zeros(nvar), ub)
    integrality = np.ones(nvar)
    lp = milp(cost, constraints=cons, bounds=bounds, integrality=np.zeros(nvar),
              options={"time_limit": max(time_limit, 1e-3)})
    if lp.status == 2:
        return ExactSolution((), None, np.inf, np.inf, "infeasible", True, 0.0, time.perf_counter() - t0)
    lp_bound = float(lp.fun) if lp.x is not None else 0.0
    remaining = max(time_limit - (time.perf_counter() - t0), 1e-3)
    res = milp(cost, constraints=cons, bounds=bounds, integrality=integrality,
               options={"time_limit": remaining, "disp": False})
    elapsed = time.perf_counter() - t0
    status = _status_name(res)
    if status == "error":
        raise SolverError(f"HiGHS failed on target {target} under '{rule}': {res.message}")
    if status == "infeasible":
        return ExactSolution((), None, np.inf, np.inf, "infeasible", True, 0.0, elapsed)
    integral_costs = bool(np.allclose(opts.cost, np.round(opts.cost)))
    dual = getattr(res, "mip_dual_bound", None)
    lb = max(lp_bound, float(dual) if dual is not None and np.isfinite(dual) else 0.0)
    if integral_costs:
        lb = float(math.ceil(lb - 1e-6))
    if res.x is None:
        return ExactSolution((), None, lb, lp_bound, status, False, np.inf, elapsed)
    chosen = tuple(int(i) for i in np.flatnonzero(np.round(res.x[:P]) > 0.5))
    value = float(opts.cost[list(chosen)].sum())
    optimal = status == "optimal" or value <= lb + 1e-9
    gap = 0.0 if optimal else (value - lb) / max(value, 1e-12)
    return ExactSolution(chosen, value, min(lb, value), lp_bound, status, optimal, gap, elapsed)
