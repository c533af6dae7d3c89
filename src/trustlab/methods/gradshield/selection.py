"""Choosing GradShield's settings on a validation split, before the evaluation split is seen.

The validation split differs from the evaluation split in everything that could leak: the
attacker/defender behaviour split (``behaviour_seed``), the data seeds of the mixes and the
reference sets. For each candidate (parameter-slice share, aggregation, refusal contrast,
threshold rule) the filter runs on explicit and implicit validation mixes at every harmful
fraction, and the rule chosen in advance picks the default:

1. the highest **worst-case explicit recall** over every (model, seed, fraction > 0) mix —
   harmful examples left behind are what breaks refusal (the attack curve jumps between 5 and
   10 examples per 1,000);
2. then the lowest **worst-case benign removal** over every mix, the 0 % ones included;
3. then the lowest mean benign removal; then the grid order.

No fine-tuning is needed: the labels of validation mixes are known. ``python -m
trustlab.methods.gradshield.selection`` runs the study and prints the table in the docs.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.methods.gradshield.fihs import FIHS
from trustlab.methods.gradshield.mixes import build_mix, filter_metrics
from trustlab.methods.gradshield.references import organism_references
from trustlab.methods.gradshield.shield import GradShield

__all__ = ["VALIDATION_FRACTIONS", "Candidate", "choose", "validation_rows"]

VALIDATION_FRACTIONS = (0.0, 0.01, 0.02, 0.05, 0.10, 0.20)
SLICE_FRACTIONS = (0.003, 0.01, 0.03, 0.1, 1.0)
RULES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("conformal", {"alpha": 0.01}),
    ("conformal", {"alpha": 0.05}),
    ("mixture", {}),
    ("otsu", {}),
    ("search", {"alpha": 0.05}),
)


@dataclass(frozen=True)
class Candidate:
    slice_fraction: float
    aggregate: str
    use_refusal: bool
    rule: str
    rule_options: tuple[tuple[str, Any], ...]

    @property
    def label(self) -> str:
        opts = ",".join(f"{k}={v}" for k, v in self.rule_options)
        return (
            f"slices={self.slice_fraction} {self.aggregate} "
            f"{'contrast' if self.use_refusal else 'comply'} {self.rule}{f'({opts})' if opts else ''}"
        )


def validation_rows(
    models: Sequence[str] = ("organism:chat-xs", "organism:chat-s"),
    seeds: Sequence[int] = (1, 2),
    *,
    behaviour_seed: int = 1,
    n: int = 1000,
    slice_fractions: Sequence[float] = SLICE_FRACTIONS,
    aggregates: Sequence[str] = ("concat", "mean"),
    refusal: Sequence[bool] = (True, False),
    rules: Sequence[tuple[str, dict[str, Any]]] = RULES,
    progress: Callable[[str], None] | None = None,
    score_cache: str | None = None,
) -> list[dict[str, Any]]:
    """One row per (candidate, model, seed, kind, fraction) with the filter's metrics.

    ``score_cache``: a folder keeping each candidate's scores (``.npz``), so other threshold
    rules can be compared later without recomputing gradients."""
    import trustlab.lm as lm

    rows = []
    for spec in models:
        model = lm.load(spec)
        for seed in seeds:
            refs = organism_references(seed=1000 + seed, behaviour_seed=behaviour_seed)
            mixes = {
                (kind, f): build_mix(kind, f, n, seed=1000 + seed, behaviour_seed=behaviour_seed)
                for kind in ("explicit", "implicit")
                for f in VALIDATION_FRACTIONS
                if not (kind == "implicit" and f == 0.0)
            }
            pool: dict[Any, int] = {}
            for m in mixes.values():
                for e in m.examples:
                    pool.setdefault(e, len(pool))
            examples = list(pool)
            for frac, agg, use_ref in itertools.product(slice_fractions, aggregates, refusal):
                if progress is not None:
                    progress(f"{spec} seed {seed} slices {frac} {agg} refusal={use_ref}")
                shield = GradShield(
                    FIHS(slice_fraction=frac, aggregate=agg, use_refusal=use_ref)  # type: ignore[arg-type]
                )
                name = f"{spec.replace(':', '_')}-b{behaviour_seed}-s{seed}-n{n}-{frac}-{agg}-{use_ref}"
                cached = Path(score_cache) / f"{name}.npz" if score_cache else None
                if cached is not None and cached.is_file():
                    saved = np.load(cached)
                    scores, shield.calibration_scores_ = saved["scores"], saved["calibration"]
                else:
                    shield.fit(model, refs)
                    scores = shield.score(model, examples)
                    if cached is not None:
                        cached.parent.mkdir(parents=True, exist_ok=True)
                        np.savez(cached, scores=scores, calibration=shield.calibration_scores_)
                for rule, options in rules:
                    shield.threshold, shield.threshold_options = rule, options
                    cand = Candidate(frac, agg, use_ref, rule, tuple(sorted(options.items())))
                    for (kind, f), m in mixes.items():
                        s = scores[[pool[e] for e in m.examples]]
                        metrics = filter_metrics(np.array(m.harmful), shield.decide(s).removed)
                        rows.append({
                            "candidate": cand.label, "slice_fraction": frac, "aggregate": agg,
                            "use_refusal": use_ref, "rule": rule, "rule_options": options,
                            "model": spec, "seed": seed, "kind": kind, "fraction": f,
                            **metrics.to_dict(),
                        })  # fmt: skip
    return rows


def choose(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Candidates ranked by the pre-registered rule (best first), with their summaries."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["candidate"], []).append(r)
    summary = []
    for order, (label, part) in enumerate(by.items()):
        exp = [r for r in part if r["kind"] == "explicit" and r["n_harmful"] > 0]
        imp = [r for r in part if r["kind"] == "implicit"]
        summary.append({
            "candidate": label,
            "worst_explicit_recall": min(r["recall"] for r in exp),
            "max_explicit_left": max(r["harmful_left"] for r in exp),
            "worst_benign_removed": max(r["benign_removed"] for r in part),
            "mean_benign_removed": float(np.mean([r["benign_removed"] for r in part])),
            "mean_implicit_recall": float(np.mean([r["recall"] for r in imp])) if imp else None,
            "order": order,
            **{k: part[0][k] for k in ("slice_fraction", "aggregate", "use_refusal", "rule",
                                        "rule_options")},
        })  # fmt: skip
    summary.sort(
        key=lambda s: (
            -s["worst_explicit_recall"], s["worst_benign_removed"], s["mean_benign_removed"],
            s["order"],
        )
    )  # fmt: skip
    return summary


def _main() -> None:  # pragma: no cover - the docs' validation table
    import argparse

    parser = argparse.ArgumentParser(description="GradShield's validation study.")
    parser.add_argument("--models", default="organism:chat-xs,organism:chat-s")
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--out", required=True, help="JSON file for every row")
    parser.add_argument("--score-cache", default=None, help="folder for the candidates' scores")
    args = parser.parse_args()
    rows = validation_rows(
        args.models.split(","), [int(s) for s in args.seeds.split(",")],
        progress=lambda msg: print(msg, flush=True), score_cache=args.score_cache,
    )  # fmt: skip
    ranked = choose(rows)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump({"rows": rows, "ranked": ranked}, fh, indent=1, default=str)
    for s in ranked[:15]:
        print(
            f"{s['candidate']:55s} worst recall {s['worst_explicit_recall']:.3f} "
            f"(max left {s['max_explicit_left']}) worst benign removed "
            f"{s['worst_benign_removed']:.3f} mean {s['mean_benign_removed']:.4f} "
            f"implicit recall {s['mean_implicit_recall']:.3f}"
        )


if __name__ == "__main__":  # pragma: no cover
    _main()
