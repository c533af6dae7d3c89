"""Benchmark: geobias images/s for building counterfactuals and for evaluating a model on them,
each as a ratio to a baseline measured in the same run (threads pinned to 1, one warm-up,
>= 5 repeats; median and min-max spread of CPU-time throughput).

    python benchmarks/geobias.py [--quick] [--repeats 5]

Building: ``CounterfactualBuilder.build`` (resize, float blend, alpha mask, SHA-256 of every
input and output, manifest rows) against the bare Pillow path for the same composites (resize,
paste into a transparent layer, ``Image.alpha_composite``) -- the price of the mask, hashes and
manifest. Evaluation: ``CellGeolocator.predict`` (cell argmax + regressed offset) and the whole
analysis (predict + offline continent lookup + ``analyse_insertions``' POPI, accuracies, drops
with 200 bootstrap resamples) against the bare torch forward pass of the same network.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _rate(fn, n_images: int, repeats: int) -> tuple[float, float, float]:
    fn()  # warm-up
    rates = []
    for _ in range(repeats):
        c0 = time.process_time()
        fn()
        rates.append(n_images / max(time.process_time() - c0, 1e-9))
    r = np.array(rates)
    return float(np.median(r)), float(r.min()), float(r.max())


def main() -> None:
    import torch
    from PIL import Image

    from trustlab.methods.geobias import (
        CellGeolocator,
        SyntheticWorld,
        analyse_insertions,
        training_set,
        world_benchmark,
    )

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller benchmark set")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    n_bg = 12 if args.quick else 48
    world = SyntheticWorld(size=64)
    bench = world_benchmark(world, n_bg, seed=0)  # also the input set of the build timings
    n_items = len(bench)
    print(f"{n_items} composites of {world.size}x{world.size} ({n_bg} scenes x 2 landmark "
          f"states x {world.n_groups + 1} subjects); CPU-time throughput, 1 thread, "
          f"{args.repeats} repeats after a warm-up")

    from trustlab.methods.geobias import Background, CounterfactualBuilder, Subject

    scenes = []
    for i in range(n_bg):
        for lm in (True, False):
            sc = world.scene(i % world.n_sites, 10**6 + i, landmark=lm)
            scenes.append(Background(sc.image, sc.lat, sc.lon, id=f"b{i}-{lm}"))
    subs = [Subject(world.subject(g, 0, height=64), str(g), id=f"s{g}")
            for g in range(world.n_groups)]
    subs.append(Subject(world.subject("neutral", 0, height=64), "neutral", id="neutral"))
    builder = CounterfactualBuilder(positions=((0.3, 0.98),), scales=(0.5,))
    H = world.size
    th = round(0.5 * H)

    def pillow_only() -> None:
        for b in scenes:
            base = Image.fromarray(b.pixels).convert("RGBA")
            for s in subs:
                tw = max(1, round(s.pixels.shape[1] * th / s.pixels.shape[0]))
                small = Image.fromarray(s.pixels, "RGBA").resize((tw, th),
                                                                 Image.Resampling.BILINEAR)
                layer = Image.new("RGBA", (H, H), (0, 0, 0, 0))
                layer.paste(small, (round(0.3 * H - tw / 2), round(0.98 * H) - th))
                np.asarray(Image.alpha_composite(base, layer).convert("RGB"))

    n_build = len(scenes) * len(subs)
    build = _rate(lambda: builder.build(scenes, subs), n_build, args.repeats)
    base_build = _rate(pillow_only, n_build, args.repeats)
    print("\nbuilding composites (images/s, median [min, max])")
    print(f"  Pillow alpha_composite only : {base_build[0]:9.0f} [{base_build[1]:.0f}, {base_build[2]:.0f}]")
    print(f"  CounterfactualBuilder.build : {build[0]:9.0f} [{build[1]:.0f}, {build[2]:.0f}]")
    print(f"  ratio builder / Pillow      : {build[0] / base_build[0]:9.2f}x")

    data = training_set(world, 200 if args.quick else 600, strength=1.0, seed=0)
    model = CellGeolocator(world.site_coordinates(), epochs=1, seed=0).fit(data.images, data.coords)
    x = bench.array()
    xt = model.input_tensor(x)
    cents, conts = world.region_centroids(), world.region_continents()
    groups = {str(g): (tuple(cents[g]), conts[g]) for g in range(world.n_groups)}

    def forward() -> None:
        with torch.no_grad():
            model.model_(xt)

    def analysis() -> None:
        analyse_insertions(model.predict(x), bench, groups, n_resamples=200, rng=0)

    fwd = _rate(forward, n_items, args.repeats)
    pred = _rate(lambda: model.predict(x), n_items, args.repeats)
    full = _rate(analysis, n_items, args.repeats)
    print("\nevaluation (images/s, median [min, max])")
    print(f"  torch forward only (baseline)        : {fwd[0]:9.0f} [{fwd[1]:.0f}, {fwd[2]:.0f}]")
    print(f"  CellGeolocator.predict               : {pred[0]:9.0f} [{pred[1]:.0f}, {pred[2]:.0f}]")
    print(f"  predict + continents + POPI/drops    : {full[0]:9.0f} [{full[1]:.0f}, {full[2]:.0f}]")
    print(f"  ratio predict / forward              : {pred[0] / fwd[0]:9.2f}x")
    print(f"  ratio full analysis / forward        : {full[0] / fwd[0]:9.2f}x")


if __name__ == "__main__":
    main()
