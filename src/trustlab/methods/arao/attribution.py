"""Failure attribution: which axes, in which direction, cause the detector's misses.

* :func:`attribute` — for every successful attack, remove each moved axis in turn (same seed,
  so the other axes' phrases stay identical) and rescore: the axis *restores detection* when
  the detector flags the ablated rewrite again. Per (axis, direction): how often it was moved
  in a success, how often removing it restored detection (Clopper–Pearson interval), and the
  mean logit the removal gave back. Pairs: removing two axes together, and *synergy* — the
  pair restores detection while neither axis alone does (an interaction of two axes).
* :func:`axis_sweep` — every single-axis strategy (axis × level) on every flagged item: the
  attack-success heat-map, independent of any planner.
* :func:`failing_axes` — the (axis, direction) pairs a repair should target.
* :class:`PlantedAxisDetector` — a detector with a planted weakness along one axis (its score
  is multiplied by ``factor`` whenever a phrase of that axis and direction is in the text): the
  ground truth that attribution is tested on.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from trustlab.core.errors import InputError
from trustlab.detectors import check_texts
from trustlab.methods.arao.attack import AttackResult, logit
from trustlab.methods.arao.axes import StrategySpace
from trustlab.methods.arao.rewriters import rewrite_seed

__all__ = [
    "Attribution",
    "AxisSweep",
    "PlantedAxisDetector",
    "attribute",
    "axis_sweep",
    "failing_axes",
]


def _label(space: StrategySpace, axis: int, sign: int) -> str:
    return f"{space.axes[axis].name}{'+' if sign > 0 else '-'}"


@dataclass
class Attribution:
    """``axes``: one row per (axis, direction) moved in some success; ``pairs``: one row per
    pair moved together; ``n_success``: successes ablated (strategy attacks only)."""

    axes: list[dict[str, Any]]
    pairs: list[dict[str, Any]]
    n_success: int
    n_multi_axis: int

    def restoration(self, axis: str, sign: int) -> float:
        for row in self.axes:
            if row["axis"] == axis and row["sign"] == (1 if sign > 0 else -1):
                return float(row["restore_rate"])
        return float("nan")

    def mass(self, space: StrategySpace) -> dict[tuple[int, int], float]:
        """Attributed mass per (axis index, sign): the logit that removing the direction gave
        back, summed over the successes it was moved in (``n_moved`` x ``mean_logit_restored``),
        floored at 0 -- how much of the detector's misses the direction explains."""
        return {(space.index(r["axis"]), int(r["sign"])): max(0.0, r["n_moved"] * r["mean_logit_restored"])
                for r in self.axes}  # fmt: skip


def attribute(
    result: AttackResult,
    texts: Sequence[str],
    detector: Any,
    rewriter: Any,
    *,
    pairs: bool = True,
    alpha: float = 0.05,
) -> Attribution:
    """Ablate each moved axis (and each pair) of every successful strategy attack."""
    from trustlab.stats import clopper_pearson

    items = check_texts(texts, "texts", "attribute")
    if not isinstance(result, AttackResult):
        raise InputError("The 'result' parameter of attribute must be an AttackResult.")
    if len(items) != len(result.items):
        raise InputError(
            f"attribute needs the texts the attack ran on ({len(result.items)}). Got {len(items)}."
        )
    space: StrategySpace = rewriter.space
    thr = result.threshold
    jobs: list[tuple[int, tuple[int, ...], frozenset[int]]] = []  # (item, ablated strategy, removed)
    succ = [r for r in result.items if r.detected and r.success and r.best_strategy is not None
            and any(r.best_strategy)]  # fmt: skip
    for r in succ:
        active = [i for i, v in enumerate(r.best_strategy) if v]
        for i in active:
            jobs.append((r.index, tuple(0 if j == i else v for j, v in enumerate(r.best_strategy)), frozenset([i])))
        if pairs:
            for a, b in itertools.combinations(active, 2):
                jobs.append((r.index, tuple(0 if j in (a, b) else v for j, v in enumerate(r.best_strategy)), frozenset([a, b])))
    by_item = {r.index: r for r in succ}
    scores: dict[tuple[int, frozenset[int]], float] = {}
    if jobs:
        rewrites = rewriter.rewrite([items[j[0]] for j in jobs], [j[1] for j in jobs],
                                    [by_item[j[0]].best_seed for j in jobs])  # fmt: skip
        texts_ok = [t if t is not None else items[j[0]] for t, j in zip(rewrites, jobs, strict=True)]
        sc = np.asarray(detector.score(texts_ok), dtype=np.float64)
        for j, s in zip(jobs, sc, strict=True):
            scores[(j[0], j[2])] = float(s)
    axis_rows: dict[tuple[int, int], dict[str, Any]] = {}
    pair_rows: dict[tuple[tuple[int, int], tuple[int, int]], dict[str, Any]] = {}
    for r in succ:
        s = r.best_strategy
        active = [i for i, v in enumerate(s) if v]
        restored = {}
        for i in active:
            key = (i, 1 if s[i] > 0 else -1)
            row = axis_rows.setdefault(key, {"n_moved": 0, "n_restored": 0, "n_moved_multi": 0,
                                             "n_restored_multi": 0, "gain": []})  # fmt: skip
            sc = scores[(r.index, frozenset([i]))]
            restored[i] = sc >= thr
            row["n_moved"] += 1
            row["n_restored"] += int(restored[i])
            row["gain"].append(float(logit(sc) - logit(r.best_score)))
            if len(active) > 1:
                row["n_moved_multi"] += 1
                row["n_restored_multi"] += int(restored[i])
        if pairs:
            for a, b in itertools.combinations(active, 2):
                ka, kb = (a, 1 if s[a] > 0 else -1), (b, 1 if s[b] > 0 else -1)
                key2 = (min(ka, kb), max(ka, kb))
                prow = pair_rows.setdefault(key2, {"n_together": 0, "n_pair_restored": 0, "n_synergy": 0})
                both = scores[(r.index, frozenset([a, b]))] >= thr
                prow["n_together"] += 1
                prow["n_pair_restored"] += int(both)
                prow["n_synergy"] += int(both and not restored[a] and not restored[b])
    axes_out = []
    for (i, sign), row in sorted(axis_rows.items(), key=lambda kv: (-kv[1]["n_restored"], kv[0])):
        lo, hi = clopper_pearson(row["n_restored"], row["n_moved"], alpha)
        multi = row["n_moved_multi"]
        axes_out.append({
            "axis": space.axes[i].name, "sign": sign, "direction": _label(space, i, sign),
            "n_moved": row["n_moved"], "n_restored": row["n_restored"],
            "restore_rate": row["n_restored"] / row["n_moved"],
            "restore_low": float(lo), "restore_high": float(hi),
            "n_moved_multi": multi, "n_restored_multi": row["n_restored_multi"],
            "restore_rate_multi": row["n_restored_multi"] / multi if multi else float("nan"),
            "mean_logit_restored": float(np.mean(row["gain"])),
        })  # fmt: skip
    pairs_out = []
    for (ka, kb), prow in sorted(pair_rows.items(), key=lambda kv: (-kv[1]["n_synergy"], kv[0])):
        pairs_out.append({
            "pair": f"{_label(space, *ka)} & {_label(space, *kb)}",
            "n_together": prow["n_together"], "n_pair_restored": prow["n_pair_restored"],
            "n_synergy": prow["n_synergy"],
            "synergy_rate": prow["n_synergy"] / prow["n_together"],
        })  # fmt: skip
    n_multi = sum(1 for r in succ if sum(1 for v in r.best_strategy if v) > 1)
    return Attribution(axes_out, pairs_out, len(succ), n_multi)


def failing_axes(
    attribution: Attribution,
    space: StrategySpace,
    *,
    min_rate: float = 0.5,
    min_count: int = 2,
    top: int | None = None,
) -> list[tuple[int, int]]:
    """(axis index, sign) whose removal restored detection in ≥ ``min_rate`` of at least
    ``min_count`` successes, most restorations first (``top`` keeps the first few)."""
    if not isinstance(attribution, Attribution):
        raise InputError("The 'attribution' parameter of failing_axes must be an Attribution.")
    from trustlab.core.validation import check_scalar

    if not isinstance(space, StrategySpace):
        raise InputError("The 'space' parameter of failing_axes must be a StrategySpace.")
    min_rate = check_scalar(min_rate, "min_rate", "failing_axes", lo=0.0, hi=1.0)
    min_count = check_scalar(min_count, "min_count", "failing_axes", kind=int, lo=1)
    if top is not None:
        top = check_scalar(top, "top", "failing_axes", kind=int, lo=1)
    out = [(space.index(r["axis"]), int(r["sign"])) for r in attribution.axes
           if r["n_moved"] >= min_count and r["restore_rate"] >= min_rate]  # fmt: skip
    return out[:top] if top else out


@dataclass
class AxisSweep:
    """``success[a, l]``: share of the flagged items that the single-axis strategy (axis a,
    level ``levels[l]``) turns into a miss (rejected rewrites count as failures);
    ``delta[a, l]``: mean change of the detector's logit over accepted rewrites;
    ``accepted[a, l]``: share of rewrites that kept the claim."""

    axes: list[str]
    levels: list[int]
    success: NDArray[np.float64]
    delta: NDArray[np.float64]
    accepted: NDArray[np.float64]
    n_items: int

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"axis": a, "level": lv, "success_rate": float(self.success[i, j]),
             "mean_logit_change": float(self.delta[i, j]), "accepted_rate": float(self.accepted[i, j]),
             "n_items": self.n_items}
            for i, a in enumerate(self.axes) for j, lv in enumerate(self.levels)
        ]  # fmt: skip


def axis_sweep(
    texts: Sequence[str],
    detector: Any,
    rewriter: Any,
    claim: Any,
    *,
    threshold: float,
    seed: int = 0,
) -> AxisSweep:
    """Every single-axis strategy on every text (all texts should be flagged originals)."""
    from trustlab.core.validation import check_scalar

    items = check_texts(texts, "texts", "axis_sweep")
    threshold = check_scalar(threshold, "threshold", "axis_sweep")
    seed = check_scalar(seed, "seed", "axis_sweep", kind=int, lo=0)
    space: StrategySpace = rewriter.space
    singles = space.enumerate_singles()
    levels = [v for v in range(-space.max_level, space.max_level + 1) if v]
    orig = logit(detector.score(items))
    jobs = [(i, s) for s in singles for i in range(len(items))]
    rewrites = rewriter.rewrite([items[i] for i, _ in jobs], [s for _, s in jobs],
                                [rewrite_seed(items[i], s, seed) for i, s in jobs])  # fmt: skip
    ok = [k for k, t in enumerate(rewrites) if t is not None and t.strip()]
    verdict = claim.check([items[jobs[k][0]] for k in ok], [rewrites[k] for k in ok]) if ok else None
    acc = [ok[m] for m in range(len(ok)) if verdict is not None and verdict.accepted[m]]
    sc = np.asarray(detector.score([rewrites[k] for k in acc]), dtype=np.float64) if acc else np.zeros(0)
    score_of = dict(zip(acc, sc, strict=True))
    K, L, n = space.dim, len(levels), len(items)
    success = np.zeros((K, L))
    delta = np.full((K, L), np.nan)
    accepted = np.zeros((K, L))
    for si, s in enumerate(singles):
        a = next(i for i, v in enumerate(s) if v)
        lvl = levels.index(s[a])
        ks = range(si * n, (si + 1) * n)
        got = [(k, score_of[k]) for k in ks if k in score_of]
        accepted[a, lvl] = len(got) / n
        success[a, lvl] = sum(1 for _, v in got if v < threshold) / n
        if got:
            delta[a, lvl] = float(np.mean([logit(v) - orig[jobs[k][0]] for k, v in got]))
    return AxisSweep(space.names, levels, success, delta, accepted, n)


class PlantedAxisDetector:
    """``base`` with a planted weakness: whenever the text contains a phrase that the
    template rewriter adds for ``(axis, sign)``, the score is multiplied by ``factor``."""

    def __init__(self, base: Any, rewriter: Any, axis: str, sign: int = 1, *, factor: float = 0.05) -> None:
        if not hasattr(base, "score"):
            raise InputError("The 'base' parameter of PlantedAxisDetector must have score(texts).")
        if not hasattr(rewriter, "markers"):
            raise InputError("The 'rewriter' parameter of PlantedAxisDetector must be a TemplateRewriter.")
        rewriter.space.index(axis)
        from trustlab.core.validation import check_scalar

        factor = check_scalar(factor, "factor", "PlantedAxisDetector", lo=0.0, hi=1.0, closed="left")
        self.base = base
        self.axis = axis
        self.sign = 1 if sign > 0 else -1
        self.factor = float(factor)
        self.markers = [m for m in rewriter.markers(axis, self.sign) if m]
        if not self.markers:
            raise InputError(f"The axis {axis}{'+' if self.sign > 0 else '-'} adds no phrase to plant on.")
        self.name = f"planted({getattr(base, 'name', 'detector')}, {axis}{'+' if self.sign > 0 else '-'})"

    def score(self, texts: Sequence[str]) -> NDArray[np.float64]:
        items = check_texts(texts, "texts", "PlantedAxisDetector.score", allow_empty=True)
        base = np.asarray(self.base.score(items), dtype=np.float64)
        hit = np.array([any(m in t for m in self.markers) for t in items], dtype=bool)
        return np.where(hit, base * self.factor, base)
