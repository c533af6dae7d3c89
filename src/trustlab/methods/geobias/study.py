"""The GeoBiaset analysis of one model's predictions on a counterfactual benchmark.

:func:`world_benchmark` builds the synthetic world's benchmark: every test background twice (with
and without its landmark; the same pixels elsewhere), each with the neutral reference figure and
with a figure of every group at one controlled position and scale. :func:`analyse_insertions`
turns a model's predictions on any benchmark (the world's or a user's) into POPI per group and
landmark split, continent accuracy per insertion kind, and the matched/mismatched drops.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from trustlab.core.errors import InputError
from trustlab.core.validation import check_choice, check_scalar
from trustlab.methods.geobias.builder import Background, Benchmark, CounterfactualBuilder, Subject
from trustlab.methods.geobias.geo import as_coordinates, continent_of
from trustlab.methods.geobias.metrics import accuracy_drop, as_predictions, popi
from trustlab.methods.geobias.world import NEUTRAL_GROUP, SyntheticWorld
from trustlab.stats.bootstrap import check_random_state

__all__ = ["InsertionAnalysis", "analyse_insertions", "world_benchmark"]


def world_benchmark(
    world: SyntheticWorld,
    n_backgrounds: int,
    *,
    seed: int = 0,
    position: tuple[float, float] = (0.3, 0.98),
    scale: float = 0.5,
) -> Benchmark:
    """``n_backgrounds`` test scenes (sites in turn), each with and without its landmark, times
    (neutral + every group) insertions at ``position``/``scale``. Groups are labelled
    ``"0".."G-1"`` (group g belongs with region g) and ``"neutral"``; scene seeds start at
    ``10**6 * (seed + 1)``, apart from :func:`training_set`'s."""
    where = "world_benchmark"
    if not isinstance(world, SyntheticWorld):
        raise InputError(f"The 'world' parameter of {where} must be a SyntheticWorld.")
    n_backgrounds = check_scalar(n_backgrounds, "n_backgrounds", where, kind=int, lo=1)
    seed = check_scalar(seed, "seed", where, kind=int, lo=0)
    bgs = []
    for i in range(n_backgrounds):
        site = i % world.n_sites
        for lm in (True, False):
            sc = world.scene(site, 10**6 * (seed + 1) + i, landmark=lm)
            bgs.append(Background(sc.image, sc.lat, sc.lon, id=f"b{i:04d}-{'lm' if lm else 'nolm'}",
                                  landmark=lm, landmark_mask=sc.landmark_mask,
                                  source=f"world:site={site},seed={10**6 * (seed + 1) + i}"))
    h = max(16, world.size)
    subs = [Subject(world.subject(NEUTRAL_GROUP, 0, height=h), NEUTRAL_GROUP, id="neutral",
                    source="world:neutral")]
    subs += [Subject(world.subject(g, 0, height=h), str(g), id=f"group{g}", source=f"world:group={g}")
             for g in range(world.n_groups)]
    return CounterfactualBuilder(positions=(tuple(position),), scales=(scale,)).build(bgs, subs)


@dataclass(frozen=True)
class InsertionAnalysis:
    """``popi``: one row per (landmark split, group) over mismatched pairs, plus ``group="all"``;
    ``accuracy``: continent accuracy per (split, insertion kind); ``drops``: matched vs
    mismatched and reference vs mismatched, per split; ``continents``: each item's predicted
    continent."""

    popi: list[dict[str, Any]]
    accuracy: list[dict[str, Any]]
    drops: list[dict[str, Any]]
    continents: list[str]


def _pair_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (row["background_id"], row["x"], row["y"], row["scale"])


def analyse_insertions(
    predictions: ArrayLike,
    benchmark: Benchmark,
    group_regions: Mapping[str, tuple[tuple[float, float], str]],
    *,
    reference_group: str = NEUTRAL_GROUP,
    definition: str = "country",
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    rng: np.random.Generator | int | None = 0,
) -> InsertionAnalysis:
    """POPI, continent accuracy and drops of ``predictions`` (``(n, 2)``, NaN rows missing) on
    ``benchmark``. ``group_regions`` maps each group label to ((lat, lon) of its region's
    centroid, its continent code); ``reference_group`` is the insertion every edit is compared
    with (the same background, position and scale). A pair is *mismatched* when the group's
    continent differs from the truth's; POPI is computed over mismatched pairs."""
    where = "analyse_insertions"
    if not isinstance(benchmark, Benchmark):
        raise InputError(f"The 'benchmark' parameter of {where} must be a Benchmark.")
    pred = as_predictions(predictions, "predictions", where)
    if len(pred) != len(benchmark):
        raise InputError(f"The 'predictions' parameter of {where} must have one row per item "
                         f"({len(benchmark)}). Got {len(pred)}.")
    if not isinstance(group_regions, Mapping) or not group_regions:
        raise InputError(f"The 'group_regions' parameter of {where} must map group labels to "
                         "((lat, lon), continent).")
    targets = {}
    for g, spec in group_regions.items():
        try:
            (lat, lon), cont = spec
        except (TypeError, ValueError):
            raise InputError(f"The 'group_regions' parameter of {where} must map {g!r} to "
                             f"((lat, lon), continent). Got {spec!r}.") from None
        targets[str(g)] = (as_coordinates([lat, lon], "group_regions", where)[0], str(cont))
    check_choice(definition, "definition", ("country", "geographic"), where)
    gen = check_random_state(rng, "rng", where)
    rows = benchmark.rows
    groups = np.array([str(r["group"]) for r in rows])
    if reference_group not in set(groups):
        raise InputError(f"The 'reference_group' parameter of {where} names no group of the "
                         f"benchmark. Got {reference_group!r}.")
    unknown = sorted(set(groups) - set(targets) - {reference_group, ""})
    if unknown:
        raise InputError(f"The 'group_regions' parameter of {where} lacks the groups {unknown}.")
    truth_cont = np.array(continent_of(benchmark.coordinates(), definition=definition))
    pred_cont = np.array(continent_of(pred, definition=definition))
    correct = pred_cont == truth_cont
    lm = np.array([r["landmark"] for r in rows], dtype=object)
    bg = np.array([r["background_id"] for r in rows])
    ref_index = {_pair_key(r): i for i, r in enumerate(rows) if r["group"] == reference_group}
    splits = {"all": np.ones(len(rows), bool), "landmark": lm == True,  # noqa: E712
              "no_landmark": lm == False}  # noqa: E712
    edit = np.array([g not in (reference_group, "") for g in groups])
    ref_of = np.array([ref_index.get(_pair_key(r), -1) for r in rows])
    if (edit & (ref_of < 0)).any():
        raise InputError(f"{where}: some edits have no '{reference_group}' insertion at the same "
                         "background, position and scale.")
    group_cont = np.array([targets[g][1] if g in targets else "" for g in groups])
    matched = edit & (group_cont == truth_cont)
    mismatched = edit & (group_cont != truth_cont)
    popi_rows, acc_rows, drop_rows = [], [], []
    for split, in_split in splits.items():
        if not in_split.any():
            continue
        for g in [*sorted(targets), "all"]:
            sel = mismatched & in_split & ((groups == g) if g != "all" else True)
            if not sel.any():
                continue
            idx = np.flatnonzero(sel)
            tgt = np.array([targets[groups[i]][0] for i in idx])
            res = popi(pred[ref_of[idx]], pred[idx], tgt,
                       pred_cont[ref_of[idx]] == group_cont[idx], pred_cont[idx] == group_cont[idx],
                       clusters=bg[idx], n_resamples=n_resamples,
                       confidence_level=confidence_level, rng=gen)
            popi_rows.append({"split": split, "group": g, "n_pairs": res.n,
                              "pull_km": res.pull_km, "pull_low": res.pull_low,
                              "pull_high": res.pull_high, "flip_rate": res.flip_rate,
                              "flip_low": res.flip_low, "flip_high": res.flip_high,
                              "flip_out_rate": res.flip_out_rate, "net_flip": res.net_flip,
                              "net_flip_low": res.net_flip_low, "net_flip_high": res.net_flip_high,
                              "n_missing": res.n_missing})
        for kind, sel in (("reference", (groups == reference_group) & in_split),
                          ("matched", matched & in_split), ("mismatched", mismatched & in_split)):
            if sel.any():
                acc_rows.append({"split": split, "insertion": kind, "n": int(sel.sum()),
                                 "continent_accuracy": float(correct[sel].mean()),
                                 "missing": int(np.isnan(pred[sel, 0]).sum())})
        for base, sel_a in (("matched", matched & in_split),
                            ("reference", (groups == reference_group) & in_split)):
            sel_b = mismatched & in_split
            if sel_a.any() and sel_b.any():
                d = accuracy_drop(correct[sel_a], correct[sel_b], clusters_reference=bg[sel_a],
                                  clusters_edited=bg[sel_b], n_resamples=n_resamples,
                                  confidence_level=confidence_level, rng=gen)
                drop_rows.append({"split": split, "from": base, "to": "mismatched",
                                  "acc_from": d.acc_reference, "acc_to": d.acc_edited,
                                  "drop": d.drop, "drop_low": d.drop_low, "drop_high": d.drop_high,
                                  "relative_drop": d.relative, "relative_low": d.relative_low,
                                  "relative_high": d.relative_high})
    return InsertionAnalysis(popi_rows, acc_rows, drop_rows, [str(c) for c in pred_cont])
