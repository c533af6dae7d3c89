"""`trustlab run geobias`: GeoBiaset and POPI in the synthetic world, where the bias is known.

A geolocation CNN (cell classification + coordinate regression) is trained once per injected
strength s: on the same training scenes, the inserted subject's group equals the scene's region
with probability s (else uniform); s = 0 is the unbiased twin. Every model then sees the same
counterfactual benchmark (test scenes with and without their landmark, each with the neutral
reference figure and a figure of every group). Reported per strength: POPI (pull toward the
group's region, flip and net-flip rates) per group and landmark split with bootstrap intervals
over backgrounds, continent accuracy for matched/mismatched insertions and the drop, accuracy
at 1/25/200/750/2,500 km, and Grad-CAM attribution shares on the subject and on the landmark.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator

from trustlab.core import ExperimentConfig, Report, RunContext, register
from trustlab.core.figures import add_alt_text, new_figure
from trustlab.core.runtime import Threads, torch_runtime
from trustlab.methods.geobias.geo import DEFAULT_THRESHOLDS_KM, accuracy_at
from trustlab.methods.geobias.gradcam import grad_cam
from trustlab.methods.geobias.metrics import attribution_share, prediction_errors_km
from trustlab.methods.geobias.models import CellGeolocator
from trustlab.methods.geobias.study import analyse_insertions, world_benchmark
from trustlab.methods.geobias.world import NEUTRAL_GROUP, SyntheticWorld, training_set
from trustlab.stats.bootstrap import bootstrap_ci


class GeoBiasConfig(ExperimentConfig):
    image_size: int = Field(32, ge=16, le=128, description="Side of the world's images (px).")
    strengths: list[float] = Field(
        [0.25, 0.5, 0.75, 1.0], min_length=1,
        description="Injected group-region correlation strengths (the twin, 0, is always added).",
    )
    n_train: int = Field(3000, ge=50, description="Training scenes per model.")
    epochs: int = Field(10, ge=1, description="Training epochs per model.")
    width: int = Field(16, ge=2, le=128, description="Channels of the CNN's first layer.")
    landmark_rate: float = Field(
        0.5, ge=0, le=1, description="Share of training scenes showing their landmark."
    )
    visibility_low: float = Field(
        0.0, ge=0, le=1, description="Lowest regional-cue visibility of a scene (drawn up to 1)."
    )
    n_test_backgrounds: int = Field(
        120, ge=6, description="Test scenes (each with and without its landmark)."
    )
    subject_scale: float = Field(
        0.5, gt=0, le=1, description="Inserted subject's height / image height."
    )
    subject_x: float = Field(0.3, ge=0, le=1, description="Subject's bottom-centre x (fraction).")
    subject_y: float = Field(0.98, ge=0, le=1, description="Subject's bottom-centre y (fraction).")
    continent_definition: Literal["country", "geographic"] = Field(
        "country", description="Continent of a coordinate: per country, or transcontinental split."
    )
    n_resamples: int = Field(1000, ge=50, description="Bootstrap resamples (over backgrounds).")
    confidence_level: float = Field(0.95, gt=0, lt=1, description="Interval confidence level.")
    n_cam: int = Field(
        60, ge=2, description="Test scenes whose mismatched edits get Grad-CAM maps."
    )
    twin_tolerance_km: float = Field(
        250.0, gt=0, description="The twin counts as ~0 when its pull interval covers 0 or "
        "|pull| is below this (km)."
    )
    threads: Threads = 1

    QUICK: ClassVar[dict[str, Any]] = {
        "strengths": [1.0],
        "n_train": 800,
        "epochs": 5,
        "n_test_backgrounds": 24,
        "n_resamples": 200,
        "n_cam": 12,
    }

    @field_validator("strengths")
    @classmethod
    def _unit(cls, v: list[float]) -> list[float]:
        for s in v:
            if not 0.0 < s <= 1.0:
                raise ValueError(f"every strength must be in (0, 1]; got {s}")
        return sorted(set(v))


def _key(s: float) -> str:
    return f"s{s:g}"


def _examples_figure(bench, n_groups: int):
    fig, axes = new_figure(2, n_groups + 1, size=(1.3 * (n_groups + 1), 3.0))
    rows = bench.rows
    for r, lm in enumerate(("lm", "nolm")):
        bg = "b0000-" + lm
        items = [i for i, row in enumerate(rows) if row["background_id"] == bg]
        for c, i in enumerate(items[: n_groups + 1]):
            ax = axes[r][c]
            ax.imshow(bench.images[i], interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{rows[i]['group']}", fontsize=7)
        axes[r][0].set_ylabel("landmark" if lm == "lm" else "no landmark", fontsize=7)
    add_alt_text(fig, "One test scene with (top) and without (bottom) its landmark, with the "
                 "neutral figure and a figure of every group inserted at the same place.")
    return fig


def _popi_figure(summary: list[dict[str, Any]]):
    fig, axes = new_figure(1, 2, size=(8.4, 3.2))
    for ax, (col, lo, hi, label) in zip(axes[0], (
            ("pull_km", "pull_low", "pull_high", "POPI pull toward group region (km)"),
            ("net_flip", "net_flip_low", "net_flip_high", "POPI net flip rate")), strict=True):
        for split, marker in (("landmark", "o"), ("no_landmark", "s")):
            part = [r for r in summary if r["split"] == split]
            x = np.array([r["strength"] for r in part])
            y = np.array([r[col] for r in part])
            err = np.array([[r[col] - r[lo] for r in part], [r[hi] - r[col] for r in part]])
            ax.errorbar(x, y, yerr=np.clip(err, 0, None), marker=marker, capsize=3, label=split)
        ax.axhline(0, color="0.6", lw=0.8)
        ax.set_xlabel("injected strength (0 = unbiased twin)")
        ax.set_ylabel(label, fontsize=8)
        ax.legend(fontsize=7)
    add_alt_text(fig, "POPI pull (km) and net flip rate against the injected strength, with and "
                 "without landmarks, with bootstrap intervals; the twin is at strength 0.")
    return fig


def _cam_figure(images, cams, titles):
    fig, axes = new_figure(1, len(images), size=(1.8 * len(images), 2.2))
    for ax, im, cam, t in zip(axes[0], images, cams, titles, strict=True):
        ax.imshow(im, interpolation="nearest")
        ax.imshow(cam, cmap="jet", alpha=0.45, interpolation="bilinear")
        ax.set_title(t, fontsize=7)
        ax.set_xticks([])
        ax.set_yticks([])
    add_alt_text(fig, "Grad-CAM heatmaps of the most biased model over mismatched insertions, "
                 "with and without the landmark.")
    return fig


def _mean_ci(values: np.ndarray, config: GeoBiasConfig, rng: np.random.Generator):
    v = values[np.isfinite(values)]
    if v.size < 2:
        return float(np.mean(v)) if v.size else float("nan"), float("nan"), float("nan")
    r = bootstrap_ci(v, np.mean, n_resamples=config.n_resamples,
                     confidence_level=config.confidence_level, rng=rng, vectorized=True)
    return r.estimate, r.low, r.high


@register("geobias", config=GeoBiasConfig)
def run(config: GeoBiasConfig, ctx: RunContext) -> Report:
    report = ctx.report
    world = SyntheticWorld(size=config.image_size, visibility=(config.visibility_low, 1.0))
    strengths = [0.0, *config.strengths]
    data_seed = int(ctx.child_rng("data").integers(1 << 20))
    centroids = world.region_centroids()
    conts = world.region_continents()
    group_regions = {str(g): (tuple(centroids[g]), conts[g]) for g in range(world.n_groups)}
    models: dict[float, CellGeolocator] = {}
    with ctx.stage("train"), torch_runtime(config.threads):
        for s in ctx.progress(strengths, description="geobias train"):
            data = training_set(world, config.n_train, strength=s, seed=data_seed,
                                landmark_rate=config.landmark_rate)
            models[s] = CellGeolocator(world.site_coordinates(), epochs=config.epochs,
                                       width=config.width,
                                       seed=int(ctx.child_rng("init").integers(1 << 30))
                                       ).fit(data.images, data.coords)
    with ctx.stage("benchmark"):
        bench = world_benchmark(world, config.n_test_backgrounds, seed=data_seed,
                                position=(config.subject_x, config.subject_y),
                                scale=config.subject_scale)
        x = bench.array()
    popi_rows, acc_rows, drop_rows, km_rows, summary = [], [], [], [], []
    groups = np.array(bench.column("group"))
    with ctx.stage("evaluate"), torch_runtime(config.threads):
        for s in strengths:
            pred = models[s].predict(x)
            ana = analyse_insertions(pred, bench, group_regions, definition=config.continent_definition,
                                     n_resamples=config.n_resamples,
                                     confidence_level=config.confidence_level,
                                     rng=ctx.child_rng(f"boot-{s:g}"))
            popi_rows += [{"strength": s, **r} for r in ana.popi]
            acc_rows += [{"strength": s, **r} for r in ana.accuracy]
            drop_rows += [{"strength": s, **r} for r in ana.drops]
            summary += [{"strength": s, **r} for r in ana.popi if r["group"] == "all"]
            err = prediction_errors_km(pred[groups == NEUTRAL_GROUP],
                                       bench.coordinates()[groups == NEUTRAL_GROUP])
            km_rows.append({"strength": s, **{f"acc@{t:g}km": a for t, a in
                                              accuracy_at(err, DEFAULT_THRESHOLDS_KM).items()},
                            "median_error_km": float(np.nanmedian(err))})
    report.table("popi", popi_rows, caption=(
        "POPI over mismatched pairs (group's continent differs from the truth's), per injected "
        "strength, landmark split and group: pull = mean km the prediction moved toward the "
        "group's region centroid relative to the neutral insertion; flip = share of pairs whose "
        "neutral prediction was outside the group's continent and whose edited one is inside; "
        "net_flip = flips in minus flips out, per pair. Intervals: percentile bootstrap over "
        f"backgrounds, {config.confidence_level:.0%}."))
    report.table("continent_accuracy", acc_rows, caption=(
        "Continent accuracy (offline reverse geocoding, definition "
        f"'{config.continent_definition}') for the neutral reference, matched and mismatched "
        "insertions."))
    report.table("accuracy_drop", drop_rows, caption=(
        "Continent-accuracy drop from matched (or neutral) to mismatched insertions; relative = "
        "drop / accuracy of the first; bootstrap intervals over backgrounds."))
    report.table("accuracy_at_km", km_rows, caption=(
        "Geolocation accuracy of the neutral insertions at 1/25/200/750/2,500 km."))
    # headline: pooled POPI per strength (all splits), the twin check and monotonicity
    pooled = {r["strength"]: r for r in summary if r["split"] == "all"}
    for s in strengths:
        r = pooled[s]
        name = "twin" if s == 0 else _key(s)
        report.metric(f"popi_pull_km.{name}", round(r["pull_km"], 3), headline=True,
                      description=f"POPI pull (km) at injected strength {s:g}, all mismatched "
                      f"pairs; CI [{r['pull_low']:.1f}, {r['pull_high']:.1f}].")
        report.metric(f"popi_net_flip.{name}", round(r["net_flip"], 4), headline=True,
                      description=f"POPI net flip rate at strength {s:g}; CI "
                      f"[{r['net_flip_low']:.3f}, {r['net_flip_high']:.3f}].")
    pulls = [pooled[s]["pull_km"] for s in strengths]
    report.metric("popi_monotone_in_strength", bool(all(np.diff(pulls) > 0)), headline=True,
                  description="POPI pull increases with every step of injected strength "
                  "(twin first).")
    tw = pooled[0.0]
    twin_ok = tw["pull_low"] <= 0 <= tw["pull_high"] or abs(tw["pull_km"]) < config.twin_tolerance_km
    report.metric("twin_popi_near_zero", bool(twin_ok), headline=True,
                  description="The twin's pull interval covers 0 or |pull| < "
                  f"{config.twin_tolerance_km:g} km.")
    smax = max(strengths)
    for r in drop_rows:
        if r["strength"] == smax and r["from"] == "matched":
            report.metric(f"continent_drop_relative.{r['split']}", round(r["relative_drop"], 4),
                          headline=r["split"] == "all",
                          description=f"Relative continent-accuracy drop matched -> mismatched "
                          f"at strength {smax:g} ({r['split']}); CI [{r['relative_low']:.3f}, "
                          f"{r['relative_high']:.3f}].")
    # Grad-CAM: the most biased model and the twin, mismatched edits, with vs without landmark
    cam_rows = []
    rng = ctx.child_rng("cam")
    truth_region = {}
    site_region = world.site_region()
    for row in bench.rows:
        site = int(row["background_source"].split("site=")[1].split(",")[0])
        truth_region[row["background_id"]] = int(site_region[site])
    with ctx.stage("grad-cam"), torch_runtime(config.threads):
        cam_examples = {}
        for s in (0.0, smax):
            model = models[s]
            for lm in (True, False):
                idx = [i for i, r in enumerate(bench.rows)
                       if r["landmark"] == lm and r["group"] not in (NEUTRAL_GROUP, "")
                       and int(r["group"]) != truth_region[r["background_id"]]
                       and int(r["background_id"][1:5]) < config.n_cam]
                cams = grad_cam(model.model_, model.cam_layer, model.input_tensor(x[idx]))
                subj = attribution_share(cams, np.stack([bench.masks[i] for i in idx]))
                land = attribution_share(cams, np.stack([bench.landmark_masks[i] for i in idx]))
                for what, vals in (("subject", subj), ("landmark_area", land)):
                    est, lo, hi = _mean_ci(vals, config, rng)
                    cam_rows.append({"strength": s, "landmark": lm, "share_on": what,
                                     "mean_share": est, "low": lo, "high": hi, "n": len(idx)})
                if s == smax:
                    cam_examples[lm] = (x[idx[0]], cams[0])
    report.table("gradcam_shares", cam_rows, caption=(
        "Mean share of Grad-CAM mass (last conv layer) on the inserted subject's pixels (alpha) "
        "and on the landmark's area (the glyph's pixels, drawn or not), over mismatched edits; "
        "bootstrap intervals over edits."))
    by = {(r["strength"], r["landmark"], r["share_on"]): r for r in cam_rows}
    for lm, tag in ((True, "with_landmark"), (False, "without_landmark")):
        report.metric(f"gradcam_subject_share.{tag}", round(by[(smax, lm, "subject")]["mean_share"], 4),
                      headline=True, description=f"Biased model (strength {smax:g}): Grad-CAM "
                      f"share on the subject, {tag.replace('_', ' ')}.")
        report.metric(f"gradcam_landmark_share.{tag}",
                      round(by[(smax, lm, "landmark_area")]["mean_share"], 4), headline=True,
                      description=f"Biased model: Grad-CAM share on the landmark area, "
                      f"{tag.replace('_', ' ')}.")
    shift = by[(smax, False, "subject")]["mean_share"] - by[(smax, True, "subject")]["mean_share"]
    report.metric("gradcam_subject_share_shift", round(shift, 4), headline=True,
                  description="Subject share without minus with the landmark (biased model): "
                  "> 0 means attention moves to the subject when the landmark is removed.")
    with ctx.stage("figures"):
        report.figure("examples", _examples_figure(bench, world.n_groups),
                      caption="A test scene with/without its landmark and every insertion.")
        report.figure("popi_vs_strength", _popi_figure(
            [r for r in summary if r["split"] in ("landmark", "no_landmark")]),
            caption="POPI against injected strength (twin at 0), by landmark split.")
        report.figure("gradcam", _cam_figure(
            [cam_examples[True][0], cam_examples[False][0]],
            [cam_examples[True][1], cam_examples[False][1]],
            ["with landmark", "without landmark"]),
            caption=f"Grad-CAM of the strength-{smax:g} model on a mismatched insertion.")
    report.note(
        f"Synthetic world: {world.n_regions} regions x {world.n_sites // world.n_regions} sites "
        f"(real city coordinates), {config.image_size} px scenes, cue visibility drawn from "
        f"[{config.visibility_low:g}, 1]; {config.n_train} training scenes per model (the same "
        f"scenes for every strength, half with landmarks), {config.epochs} epochs; benchmark of "
        f"{len(bench)} items ({config.n_test_backgrounds} scenes x 2 landmark states x "
        f"{world.n_groups + 1} insertions). Subjects are faceless patterned figures: the group "
        "is a colour/motif pattern, never a face or a demographic image.")
    report.note("Training cell accuracy per strength: " + ", ".join(
        f"{s:g}: {models[s].train_cell_accuracy_:.3f}" for s in strengths) + ".")
    return report
