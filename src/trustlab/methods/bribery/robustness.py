"""Instance-level robustness: the fewest datasets a developer must train on (bribe) so that the
target becomes the unique winner of the leaderboard.

* ``mean``   — others never move, so the target needs ``mean_t + Σ gains > max_j mean_j``: taking the
  largest gains first is optimal (exchange argument). Vectorised over all targets.
* ``median`` — others never move; with ``n_t`` scores, threshold ``T = max_j median_j``: the target
  wins iff either ``⌊n_t/2⌋+1`` of its scores exceed ``T``, or (``n_t = 2r`` even) for some value
  ``q ≤ T`` at least ``r+1`` scores are ``≥ q`` and ``r`` scores exceed ``2T − q``. Each case is
  a count, solved greedily; the minimum over the (≤ 2m) candidate values ``q`` is exact.
  Vectorised over all targets.
* ``mwr``, ``borda`` (NP-hard), ``copeland``/``condorcet`` (pairwise majority) — exact 0/1 ILP
  (:mod:`.exact`) with a certificate, per target.

Infeasible targets (cannot win even bribing every dataset) get ``k = None`` / ``inf`` and a reason.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.errors import InputError
from trustlab.core.validation import as_float_array, check_scalar
from trustlab.methods.bribery.bribe import BribeModel, apply_bribe, shift_options
from trustlab.methods.bribery.exact import EXACT_RULES, Options, build_options, solve_exact
from trustlab.methods.bribery.rules import (
    RULES,
    TIE_RTOL,
    _as_scores,
    _is_unique_winner,
    aggregate,
    check_margins,
    check_rule,
    check_target,
    mean_scores,
    median_scores,
    pairwise_margins,
    target_margins,
)

__all__ = [
    "ALL_RULES",
    "BribeResult",
    "RobustnessProfile",
    "brute_force_robustness",
    "brute_force_shift_bribery",
    "greedy_robustness",
    "is_winner",
    "mean_robustness_all",
    "median_robustness_all",
    "min_cost_shift_bribery",
    "robustness",
    "robustness_all",
]

ALL_RULES: tuple[str, ...] = (*RULES, "condorcet")
POLYNOMIAL_RULES = ("mean", "median")


@dataclass(frozen=True)
class BribeResult:
    """Minimum bribe of one target under one rule.

    ``k``: minimum number of datasets (total cost for shift bribery); None when the target cannot
    win (see ``reason``) or when the solver stopped without a feasible set. ``optimal``: ``k`` is
    certified minimal. ``lower_bound``/``upper_bound`` bracket the optimum (``inf`` if infeasible).
    ``verified``: the bribed table was re-aggregated and the target is the unique winner.
    """

    target: int
    target_name: str
    rule: str
    n_datasets: int
    k: float | None
    datasets: tuple[str, ...]
    feasible: bool
    optimal: bool
    lower_bound: float
    upper_bound: float
    method: str
    status: str = "optimal"
    reason: str = ""
    verified: bool = False
    solve_time: float = 0.0
    shifts: tuple[tuple[str, int], ...] = ()
    dataset_indices: tuple[int, ...] = ()

    @property
    def share(self) -> float:
        """``k`` as a share of the leaderboard's datasets (inf if infeasible, NaN if unknown)."""
        if not self.feasible:
            return float("inf")
        return float("nan") if self.k is None else self.k / self.n_datasets


@dataclass(frozen=True)
class RobustnessProfile:
    """Robustness of many targets under one rule; ``k`` is inf for infeasible targets and NaN for
    targets not solved; ``sets[i]`` lists dataset indices of an optimal bribe."""

    rule: str
    models: tuple[str, ...]
    datasets: tuple[str, ...]
    targets: np.ndarray
    k: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    optimal: np.ndarray
    sets: tuple[tuple[int, ...], ...]
    solve_time: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def n_datasets(self) -> int:
        return len(self.datasets)

    def median(self) -> float:
        """Median robustness over the targets (infeasible counts as +inf)."""
        k = self.k[~np.isnan(self.k)]
        return float(np.median(k)) if k.size else float("nan")

    def dataset_usage(self) -> np.ndarray:
        """How many targets' optimal bribes use each dataset."""
        use = np.zeros(self.n_datasets, dtype=int)
        for s in self.sets:
            use[list(s)] += 1
        return use


# ------------------------------------------------------------------- shared helpers
def _scores_and_names(scores, where: str = "robustness") -> tuple[np.ndarray, tuple[str, ...], tuple[str, ...]]:
    s = _as_scores(scores, where)
    if s.shape[0] < 2 or s.shape[1] < 1:
        raise InputError(
            f"The 'scores' parameter of {where} must have at least 2 models and 1 dataset. "
            f"Got {s.shape}."
        )
    models = tuple(getattr(scores, "models", [f"m{i}" for i in range(s.shape[0])]))
    datasets = tuple(getattr(scores, "datasets", [f"d{j}" for j in range(s.shape[1])]))
    return s, models, datasets


def _target_index(scores, target: int | str, where: str = "robustness") -> int:
    if hasattr(scores, "model_index") and isinstance(target, str):
        return scores.model_index(target)
    n = len(getattr(scores, "models", ())) or np.shape(getattr(scores, "scores", scores))[0]
    return check_target(target, n, where, getattr(scores, "models", None))


def _check_time_limit(time_limit: float, where: str) -> float:
    return check_scalar(time_limit, "time_limit", where, lo=0.0, closed="neither")


def _check_model(model: BribeModel | None, where: str) -> BribeModel:
    if model is None:
        return BribeModel()
    if not isinstance(model, BribeModel):
        raise InputError(
            f"The 'model' parameter of {where} must be a BribeModel. Got {type(model).__name__}."
        )
    return model


def is_winner(
    scores: np.ndarray, target: int, rule: str, *, margins: np.ndarray | None = None
) -> bool:
    """True when ``target`` is the unique winner of ``scores`` under ``rule`` (``condorcet``: it
    beats every other model in pairwise majority).

    ``margins``: optional pairwise margins of a table that differs from ``scores`` only in the
    target's row (e.g. before a bribe); makes the Copeland check O(n·m) instead of O(n²·m)."""
    check_rule(rule, ALL_RULES)
    scores, _, _ = _scores_and_names(scores, "is_winner")
    target = check_target(target, scores.shape[0], "is_winner")
    if margins is not None:
        margins = check_margins(margins, scores.shape[0], "is_winner")
    return _is_winner(scores, target, rule, margins)


def _is_winner(
    scores: np.ndarray, target: int, rule: str, margins: np.ndarray | None = None
) -> bool:
    if rule == "condorcet":
        row = np.delete(target_margins(scores, target), target)
        return bool(np.all(row > 0))
    if rule == "copeland" and margins is not None:
        row = target_margins(scores, target)
        c2 = 2 * (margins > 0).sum(axis=1) + (margins == 0).sum(axis=1) - 1
        old = margins[:, target].astype(np.int64)
        new = -row
        c2 = c2 - (1 + np.sign(old)) + (1 + np.sign(new))
        c2[target] = int((2 * (row > 0) + (row == 0)).sum()) - 1
        return _is_unique_winner(c2.astype(float), target)
    return _is_unique_winner(aggregate(scores, rule), target)


def _thresholds(agg: np.ndarray) -> np.ndarray:
    """For every model, the aggregate it must strictly exceed: the best other one (+ tolerance)."""
    a = np.where(np.isnan(agg), -np.inf, agg)
    order = np.argsort(-a, kind="stable")
    top1, top2 = a[order[0]], (a[order[1]] if a.size > 1 else -np.inf)
    thr = np.full(a.shape, top1)
    thr[order[0]] = top2
    finite = np.isfinite(thr)
    out = thr.copy()
    out[finite] = thr[finite] + TIE_RTOL * np.maximum(1.0, np.abs(thr[finite]))
    return out


# ------------------------------------------------------------------- closed forms
def mean_robustness_all(
    scores, model: BribeModel | None = None
) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Robustness of every model under the arithmetic mean (greedy by largest gain, optimal)."""
    s, _, _ = _scores_and_names(scores, "mean_robustness_all")
    model = _check_model(model, "mean_robustness_all")
    agg = mean_scores(s)
    thr = _thresholds(agg)
    W = model.bribed_matrix(s)
    cnt = (~np.isnan(s)).sum(axis=1)
    with np.errstate(invalid="ignore"):
        gain = np.where(~np.isnan(W) & (s < W), (W - s) / np.maximum(cnt, 1)[:, None], 0.0)
    order = np.argsort(-gain, axis=1, kind="stable")
    cum = np.cumsum(np.take_along_axis(gain, order, axis=1), axis=1)
    reach = agg[:, None] + np.concatenate([np.zeros((s.shape[0], 1)), cum], axis=1)
    ok = reach > thr[:, None]
    k = np.where(ok.any(axis=1), ok.argmax(axis=1), np.inf).astype(float)
    k[np.isnan(agg)] = np.inf
    sets = [tuple(sorted(order[i, : int(k[i])].tolist())) if np.isfinite(k[i]) else () for i in range(s.shape[0])]
    return k, sets


def median_robustness_all(scores, model: BribeModel | None = None) -> np.ndarray:
    """Robustness of every model under the median (exact count, see module docstring)."""
    s, _, _ = _scores_and_names(scores, "median_robustness_all")
    model = _check_model(model, "median_robustness_all")
    agg = median_scores(s)
    T = _thresholds(agg)
    W = model.bribed_matrix(s)
    present = ~np.isnan(s)
    V = np.where(present, s, np.nan)
    with np.errstate(invalid="ignore"):
        B = present & (W > V)
    Wb = np.where(B, W, V)
    n_t = present.sum(axis=1)
    big = np.inf
    with np.errstate(invalid="ignore"):
        # case 1: floor(n_t/2)+1 scores above T
        need1 = n_t // 2 + 1
        above = (T[:, None] < V).sum(axis=1)
        cand = (B & (T[:, None] >= V) & (Wb > T[:, None])).sum(axis=1)
        c1 = np.maximum(0, need1 - above)
        k = np.where(cand >= c1, c1, big).astype(float)
        # case 2 (even n_t): candidate q among the target's values and bribed values, q <= T
        r = n_t // 2
        Q = np.concatenate([V, np.where(B, W, np.nan)], axis=1)  # (n, 2m)
        qv = Q[:, :, None]
        Pq = 2 * T[:, None, None] - qv
        Vx, Wx, Bx = V[:, None, :], Wb[:, None, :], B[:, None, :]
        x = (Vx > Pq).sum(axis=2)
        H = Bx & (Vx <= Pq) & (Wx > Pq)
        h = H.sum(axis=2)
        h_low = (H & (Vx < qv)).sum(axis=2)
        need_hi = np.maximum(0, r[:, None] - x)
        b_low = np.minimum(need_hi, h_low)
        geq = (Vx >= qv).sum(axis=2) + b_low
        need_extra = np.maximum(0, r[:, None] + 1 - geq)
        extra_avail = (Bx & (Vx < qv) & (Wx >= qv)).sum(axis=2) - b_low
        valid = (
            ~np.isnan(Q)
            & (T[:, None] >= Q)
            & (h >= need_hi)
            & (extra_avail >= need_extra)
            & ((n_t % 2 == 0) & (n_t > 0))[:, None]
        )
        c2 = np.where(valid, need_hi + need_extra, big).min(axis=1)
    k = np.minimum(k, c2)
    k[n_t == 0] = np.inf
    return k


def _median_set(v: np.ndarray, w: np.ndarray, T: float) -> tuple[int, ...] | None:
    """One optimal median bribe for a single target (indices into its datasets)."""
    present = ~np.isnan(v)
    idx = np.flatnonzero(present)
    v, w = v[idx], w[idx]
    with np.errstate(invalid="ignore"):
        b = ~np.isnan(w) & (w > v)
    w = np.where(b, w, v)
    n_t = idx.size
    best: tuple[int, ...] | None = None
    need1 = n_t // 2 + 1
    cand = np.flatnonzero(b & (v <= T) & (w > T))
    c1 = max(0, need1 - int((v > T).sum()))
    if cand.size >= c1:
        best = tuple(cand[:c1].tolist())
    if n_t % 2 == 0 and n_t > 0:
        r = n_t // 2
        for q in np.unique(np.concatenate([v, w[b]])):
            if q > T:
                continue
            P = 2 * T - q
            H = b & (v <= P) & (w > P)
            need_hi = max(0, r - int((v > P).sum()))
            if H.sum() < need_hi:
                continue
            low = np.flatnonzero(H & (v < q))
            mid = np.flatnonzero(H & (v >= q))
            chosen = list(low[:need_hi]) + list(mid[: need_hi - min(need_hi, low.size)])
            count = int((v >= q).sum()) + min(need_hi, low.size)
            need_extra = max(0, r + 1 - count)
            extra = [i for i in np.flatnonzero(b & (v < q) & (w >= q)) if i not in set(chosen)]
            if len(extra) < need_extra:
                continue
            chosen += extra[:need_extra]
            if best is None or len(chosen) < len(best):
                best = tuple(chosen)
    return None if best is None else tuple(sorted(int(idx[i]) for i in best))


# ------------------------------------------------------------------- single target
def robustness(
    scores,
    target: int | str,
    rule: str,
    *,
    model: BribeModel | None = None,
    time_limit: float = 10.0,
    margins: np.ndarray | None = None,
) -> BribeResult:
    """Minimum number of datasets to bribe so that ``target`` becomes the unique winner.

    ``scores``: a Leaderboard or an array (models × datasets). ``rule``: one of ``ALL_RULES``.
    ``time_limit``: seconds for the ILP rules; if it runs out the best set found is returned with
    ``optimal=False`` and its bounds.
    """
    check_rule(rule, ALL_RULES)
    s, models, datasets = _scores_and_names(scores)
    t = _target_index(scores, target)
    model = _check_model(model, "robustness")
    time_limit = _check_time_limit(time_limit, "robustness")
    if margins is not None:
        margins = check_margins(margins, s.shape[0], "robustness")
    return _robustness(s, models, datasets, t, rule, model, time_limit, margins)


def _robustness(
    s: np.ndarray,
    models: tuple[str, ...],
    datasets: tuple[str, ...],
    t: int,
    rule: str,
    model: BribeModel,
    time_limit: float,
    margins: np.ndarray | None,
) -> BribeResult:
    m = s.shape[1]
    t0 = time.perf_counter()
    common = {"target": t, "target_name": models[t], "rule": rule, "n_datasets": m}
    if np.isnan(s[t]).all():
        return BribeResult(**common, k=None, datasets=(), feasible=False, optimal=True,
                           lower_bound=np.inf, upper_bound=np.inf, method="check",
                           status="infeasible", reason="the target has no scores")
    if rule in ("mean", "median", "mwr") and np.isnan(aggregate(s, rule)[t]):
        return BribeResult(**common, k=None, datasets=(), feasible=False, optimal=True,
                           lower_bound=np.inf, upper_bound=np.inf, method="check",
                           status="infeasible",
                           reason="the target has no dataset shared with another model")
    if rule == "copeland" and margins is None:
        margins = pairwise_margins(s)
    if _is_winner(s, t, rule, margins=margins):
        return BribeResult(**common, k=0, datasets=(), feasible=True, optimal=True, lower_bound=0,
                           upper_bound=0, method="check", verified=True, status="optimal",
                           reason="already the unique winner")
    w = model.bribed_values(s, t)
    if rule in POLYNOMIAL_RULES:
        if rule == "mean":
            ks, sets = mean_robustness_all(s, model)
            chosen = sets[t] if np.isfinite(ks[t]) else None
        else:
            T = _thresholds(median_scores(s))[t]
            chosen = _median_set(s[t], w, T)
        method, status, optimal, lb = "closed-form", "optimal", True, None
    else:
        opts = build_options(w, s[t])
        sol = solve_exact(s, t, rule, opts, time_limit=time_limit, margins=margins)
        chosen = None if sol.cost is None else tuple(sorted(int(opts.dataset[o]) for o in sol.chosen))
        method, status, optimal, lb = "ilp", sol.status, sol.optimal, sol.lower_bound
    elapsed = time.perf_counter() - t0
    if chosen is None:
        infeasible = status in ("optimal", "infeasible")
        reason = (
            _infeasible_reason(s, t, rule, model, models)
            if infeasible
            else f"solver stopped ({status}) without a feasible bribe"
        )
        return BribeResult(**common, k=None, datasets=(), feasible=not infeasible,
                           optimal=infeasible, lower_bound=np.inf if infeasible else (lb or 0.0),
                           upper_bound=np.inf if infeasible else float(m), method=method,
                           status="infeasible" if infeasible else status, reason=reason,
                           solve_time=elapsed)
    verified = _is_winner(apply_bribe(s, t, chosen, model), t, rule, margins=margins)
    k = len(chosen)
    return BribeResult(**common, k=k, datasets=tuple(datasets[d] for d in chosen), feasible=True,
                       optimal=optimal and verified, lower_bound=float(k if lb is None else lb),
                       upper_bound=float(k), method=method, status=status, verified=verified,
                       solve_time=elapsed, dataset_indices=tuple(chosen))


def _infeasible_reason(
    s: np.ndarray, t: int, rule: str, model: BribeModel, models: Sequence[str]
) -> str:
    """Why the target cannot win even with every bribe: for pairwise majority, name who blocks."""
    bribable = np.flatnonzero(model.bribable(s, t))
    text = (
        f"cannot become the unique winner under '{rule}' even by bribing all {bribable.size} "
        "bribable datasets"
    )
    if rule not in ("condorcet", "copeland"):
        return text
    row = target_margins(apply_bribe(s, t, bribable, model), t)
    row[t] = 1
    blockers = np.flatnonzero(row <= 0)
    if not blockers.size:
        return text
    shared = (~np.isnan(s[t]))[None, :] & ~np.isnan(s[blockers])
    parts = []
    for j, n_shared in zip(blockers[:3], shared.sum(axis=1)[:3], strict=True):
        why = "they share no dataset" if n_shared == 0 else f"they share {n_shared} dataset(s)"
        parts.append(f"'{models[j]}' ({why})")
    more = f" and {blockers.size - 3} more" if blockers.size > 3 else ""
    return text + f"; it still does not beat {', '.join(parts)}{more} in pairwise majority"


# ------------------------------------------------------------------- all targets
def robustness_all(
    scores,
    rule: str,
    *,
    model: BribeModel | None = None,
    targets: Iterable[int] | None = None,
    time_limit: float = 10.0,
    progress: Callable[[Iterable[int]], Iterable[int]] | None = None,
    backend: Any = None,
    store: Any = None,
) -> RobustnessProfile:
    """Robustness of many targets (default: all). Mean and median are vectorised; the ILP rules
    solve one program per target (``progress`` wraps that loop, e.g. a progress bar).

    With a ``backend`` (``trustlab.core.units.make_backend``: 'local' or 'ray') or a ``store``
    (a ``UnitStore`` or folder) each ILP target is a work unit: run as a Ray task with the ray
    backend, recorded in the store as it finishes, skipped when already recorded (resume). The
    programs are the same, so the profile is the same as the plain loop's (times aside).
    """
    where = "robustness_all"
    check_rule(rule, ALL_RULES)
    s, models, datasets = _scores_and_names(scores, where)
    model = _check_model(model, where)
    time_limit = _check_time_limit(time_limit, where)
    if progress is not None and not callable(progress):
        raise InputError(f"The 'progress' parameter of {where} must be callable or None.")
    n = s.shape[0]
    if targets is None:
        tg = np.arange(n)
    else:
        if isinstance(targets, str) or not isinstance(targets, Iterable):
            raise InputError(
                f"The 'targets' parameter of {where} must be model indices. Got {targets!r}."
            )
        tg = np.array([check_target(t, n, where) for t in targets], dtype=int)
        if np.unique(tg).size != tg.size:
            raise InputError(f"The 'targets' parameter of {where} repeats a model.")
    if rule in POLYNOMIAL_RULES:
        t0 = time.perf_counter()
        if rule == "mean":
            k_all, sets_all = mean_robustness_all(s, model)
        else:
            k_all = median_robustness_all(s, model)
            T = _thresholds(median_scores(s))
            W = model.bribed_matrix(s)
            sets_all = [
                (_median_set(s[i], W[i], T[i]) or ()) if np.isfinite(k_all[i]) else ()
                for i in range(n)
            ]
        k = k_all[tg]
        per = (time.perf_counter() - t0) / max(len(tg), 1)
        return RobustnessProfile(rule, models, datasets, tg, k, k.copy(), k.copy(),
                                 np.ones(len(tg), bool), tuple(sets_all[i] for i in tg),
                                 np.full(len(tg), per))
    margins = pairwise_margins(s) if rule in ("copeland",) else None
    k = np.full(len(tg), np.nan)
    lo, hi = np.zeros(len(tg)), np.full(len(tg), np.inf)
    opt = np.zeros(len(tg), bool)
    times = np.zeros(len(tg))
    sets: list[tuple[int, ...]] = []
    if backend is not None or store is not None:
        solved = _robustness_units(s, models, datasets, tg, rule, model, time_limit, margins,
                                   progress, backend, store)
    else:
        it = progress(range(len(tg))) if progress else range(len(tg))
        solved = (_robustness(s, models, datasets, int(tg[i]), rule, model, time_limit, margins)
                  for i in it)
    for i, r in enumerate(solved):
        k[i] = np.inf if not r.feasible else (np.nan if r.k is None else r.k)
        lo[i], hi[i], opt[i], times[i] = r.lower_bound, r.upper_bound, r.optimal, r.solve_time
        sets.append(r.dataset_indices)
    return RobustnessProfile(rule, models, datasets, tg, k, lo, hi, opt, tuple(sets), times)


def _target_unit(unit: Any) -> BribeResult:
    """One ILP target (a work unit: a Ray task or a local call)."""
    return _robustness(*unit.payload)


def _robustness_units(s, models, datasets, tg, rule, model, time_limit, margins, progress,
                      backend, store) -> list[BribeResult]:
    from trustlab.core.units import LocalBackend, RayBackend, Sweep, WorkUnit, run_sweep

    if not isinstance(backend, LocalBackend | RayBackend | None):
        raise InputError("The 'backend' parameter of robustness_all must be a backend from "
                         f"trustlab.core.units.make_backend or None. Got {backend!r}.")
    units = tuple(WorkUnit(f"{rule}-{models[t]}-{int(t)}", (s, models, datasets, int(t), rule,
                                                            model, time_limit, margins))
                  for t in tg)
    wrap = (lambda stream, **_: progress(stream)) if progress else None
    sweep = Sweep(f"bribery-{rule}", _target_unit, units)
    res = run_sweep(sweep, backend=backend, store=store, progress=wrap).raise_failed()
    return list(res.results.values())


# ------------------------------------------------------------------- brute force (the judge)
def brute_force_robustness(
    scores,
    target: int,
    rule: str,
    model: BribeModel | None = None,
    max_datasets: int = 16,
) -> BribeResult:
    """Enumerate bribe sets by size; the first that makes ``target`` win is optimal."""
    where = "brute_force_robustness"
    check_rule(rule, ALL_RULES)
    s, models, datasets = _scores_and_names(scores, where)
    model = _check_model(model, where)
    t = _target_index(scores, target, where)
    max_datasets = check_scalar(max_datasets, "max_datasets", where, kind=int, lo=0)
    m = s.shape[1]
    bribable = np.flatnonzero(model.bribable(s, t))
    if bribable.size > max_datasets:
        raise InputError(
            f"Brute force over {bribable.size} bribable datasets is too large (max_datasets="
            f"{max_datasets})."
        )
    common = {"target": t, "target_name": models[t], "rule": rule, "n_datasets": m}
    t0 = time.perf_counter()
    for k in range(bribable.size + 1):
        for combo in itertools.combinations(bribable.tolist(), k):
            if _is_winner(apply_bribe(s, t, combo, model), t, rule):
                return BribeResult(**common, k=k, datasets=tuple(datasets[d] for d in combo),
                                   feasible=True, optimal=True, lower_bound=k, upper_bound=k,
                                   method="brute-force", verified=True, dataset_indices=combo,
                                   solve_time=time.perf_counter() - t0)
    return BribeResult(**common, k=None, datasets=(), feasible=False, optimal=True,
                       lower_bound=np.inf, upper_bound=np.inf, method="brute-force",
                       status="infeasible", reason="no subset of datasets makes it win",
                       solve_time=time.perf_counter() - t0)


def greedy_robustness(
    scores, target: int | str, rule: str, model: BribeModel | None = None
) -> BribeResult:
    """A heuristic upper bound: bribe, one at a time, the dataset where the target is below
    the most models, until it wins.

    This is the obvious baseline a practitioner would try; it is not optimal for the rules
    whose winner depends on pairwise comparisons (mean win rate, Borda, pairwise majority),
    which is why :func:`robustness` solves those exactly. ``k`` is never below the optimum.
    """
    check_rule(rule, ALL_RULES)
    s, models, datasets = _scores_and_names(scores, "greedy_robustness")
    t = _target_index(scores, target, "greedy_robustness")
    model = _check_model(model, "greedy_robustness")
    common = {"target": t, "target_name": models[t], "rule": rule, "n_datasets": s.shape[1]}
    t0 = time.perf_counter()
    left = set(np.flatnonzero(model.bribable(s, t)).tolist())
    chosen: list[int] = []
    cur = s
    while not _is_winner(cur, t, rule):
        if not left:
            return BribeResult(**common, k=None, datasets=(), feasible=False, optimal=False,
                               lower_bound=0.0, upper_bound=np.inf, method="greedy",
                               status="no win found",
                               reason="greedy bribed every bribable dataset without winning",
                               solve_time=time.perf_counter() - t0)
        d = max(left, key=lambda j: (int(np.sum(cur[:, j] > cur[t, j])), -j))
        left.remove(d)
        chosen.append(d)
        cur = apply_bribe(s, t, chosen, model)
    k = len(chosen)
    idx = tuple(sorted(chosen))
    return BribeResult(**common, k=k, datasets=tuple(datasets[d] for d in idx), feasible=True,
                       optimal=k == 0, lower_bound=0.0, upper_bound=float(k), method="greedy",
                       status="heuristic", verified=True, solve_time=time.perf_counter() - t0,
                       dataset_indices=idx)


# ------------------------------------------------------------------- shift bribery
def _shift_costs(cost, opts_per_d: Sequence[np.ndarray], where: str) -> list[np.ndarray]:
    m = len(opts_per_d)
    arr = None
    if not callable(cost):
        arr = as_float_array(cost, "cost", where, ndim=(1, 2))
        longest = max((lv.size for lv in opts_per_d), default=0)
        if arr.shape[0] != m or (arr.ndim == 2 and arr.shape[1] < longest):
            raise InputError(
                f"The 'cost' parameter of {where} must be one price per dataset ({m},) or a "
                f"table ({m}, >= {longest}) of the cost of each shift. Got shape {arr.shape}."
            )
    out = []
    for d, levels in enumerate(opts_per_d):
        ks = np.arange(1, levels.size + 1)
        if arr is None:
            try:
                c = np.array([float(cost(d, int(k))) for k in ks])
            except (TypeError, ValueError) as exc:
                raise InputError(
                    f"The 'cost' callable of {where} must return a number for (dataset, shift). "
                    f"Got an error: {exc}"
                ) from None
        else:
            c = arr[d] * ks if arr.ndim == 1 else arr[d, : ks.size]
        if np.any(c < 0) or np.any(~np.isfinite(c)):
            raise InputError(f"The shift costs of {where} must be finite and >= 0 (dataset {d}).")
        out.append(c)
    return out


def min_cost_shift_bribery(
    scores,
    target: int | str,
    rule: str,
    cost=None,
    *,
    margin: float = 1e-6,
    time_limit: float = 10.0,
) -> BribeResult:
    """General shift bribery: shift the target ``k_d`` positions up on dataset ``d`` at cost
    ``cost(d, k)`` (callable), ``cost[d] * k`` (per-dataset unit prices) or ``cost[d, k-1]``
    (table); default: one unit per position. Exact ILP for mean, mwr, borda, copeland,
    condorcet (effects are additive); median is not supported here (use brute force)."""
    where = "min_cost_shift_bribery"
    check_rule(rule, EXACT_RULES)
    s, models, datasets = _scores_and_names(scores, where)
    t = _target_index(scores, target, where)
    time_limit = _check_time_limit(time_limit, where)
    levels = shift_options(s, t, margin)
    costs = _shift_costs(np.ones(s.shape[1]) if cost is None else cost, levels, where)
    d_idx = np.concatenate([np.full(lv.size, d) for d, lv in enumerate(levels)]).astype(int)
    k_idx = np.concatenate([np.arange(1, lv.size + 1) for lv in levels]).astype(int)
    opts = Options(d_idx, np.concatenate(levels), np.concatenate(costs))
    common = {"target": t, "target_name": models[t], "rule": rule, "n_datasets": s.shape[1]}
    if _is_winner(s, t, rule):
        return BribeResult(**common, k=0.0, datasets=(), feasible=True, optimal=True,
                           lower_bound=0.0, upper_bound=0.0, method="check", verified=True)
    sol = solve_exact(s, t, rule, opts, time_limit=time_limit)
    if sol.cost is None:
        infeasible = sol.status == "infeasible"
        return BribeResult(**common, k=None, datasets=(), feasible=not infeasible,
                           optimal=infeasible, lower_bound=sol.lower_bound, upper_bound=np.inf,
                           method="ilp", status=sol.status,
                           reason="cannot win even at the top of every dataset" if infeasible
                           else "solver stopped without a feasible shift")
    shifts = {int(d_idx[o]): int(k_idx[o]) for o in sol.chosen}
    new = s.copy()
    for o in sol.chosen:
        new[t, d_idx[o]] = opts.value[o]
    verified = _is_winner(new, t, rule)
    return BribeResult(**common, k=sol.cost, datasets=tuple(datasets[d] for d in sorted(shifts)),
                       feasible=True, optimal=sol.optimal and verified, lower_bound=sol.lower_bound,
                       upper_bound=sol.cost, method="ilp", status=sol.status, verified=verified,
                       solve_time=sol.solve_time,
                       shifts=tuple((datasets[d], k) for d, k in sorted(shifts.items())))


def brute_force_shift_bribery(scores, target: int, rule: str, cost=None, *,
                              margin: float = 1e-6) -> float | None:
    """Minimum shift-bribery cost by enumerating every shift vector (tiny instances only)."""
    where = "brute_force_shift_bribery"
    check_rule(rule, EXACT_RULES)
    s, _, _ = _scores_and_names(scores, where)
    target = _target_index(scores, target, where)
    levels = shift_options(s, target, margin)
    costs = _shift_costs(np.ones(s.shape[1]) if cost is None else cost, levels, where)
    best = None
    for ks in itertools.product(*[range(lv.size + 1) for lv in levels]):
        c = sum(costs[d][k - 1] for d, k in enumerate(ks) if k > 0)
        if best is not None and c >= best:
            continue
        new = s.copy()
        for d, k in enumerate(ks):
            if k > 0:
                new[target, d] = levels[d][k - 1]
        if _is_winner(new, target, rule):
            best = c
    return best
