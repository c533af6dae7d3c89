"""geobias library properties: the builder is deterministic and blends correctly, distances and
continents agree with known geography, POPI and Grad-CAM agree with their definitions."""

from __future__ import annotations

import filecmp
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError, NotFittedError
from trustlab.lm.chat import ScriptedChatModel
from trustlab.methods.geobias import (
    CONTINENT_OF_COUNTRY,
    EARTH_RADIUS_KM,
    Background,
    CallableGeolocator,
    CellGeolocator,
    CounterfactualBuilder,
    LLMGeolocator,
    Subject,
    SyntheticWorld,
    accuracy_at,
    accuracy_drop,
    attribution_share,
    composite,
    continent_of,
    grad_cam,
    haversine_km,
    load_backgrounds,
    load_subjects,
    parse_coordinates,
    popi,
    prediction_errors_km,
    training_set,
)

WORLD = SyntheticWorld(size=32)


def _inputs(landmark=True):
    bgs = []
    for site in (0, 4, 9):
        sc = WORLD.scene(site, 11 + site, landmark=landmark)
        bgs.append(Background(sc.image, sc.lat, sc.lon, landmark=landmark,
                              landmark_mask=sc.landmark_mask))
    subs = [Subject(WORLD.subject(g, 3, height=40), str(g)) for g in (0, 2)]
    subs.append(Subject(WORLD.subject("neutral", 0, height=40), "neutral"))
    return bgs, subs


# ------------------------------------------------------------------------- builder


def test_builder_is_deterministic_from_its_inputs(tmp_path):
    builder = CounterfactualBuilder(positions=((0.3, 0.98), (0.7, 0.9)), scales=(0.4, 0.6),
                                    include_original=True)
    a = builder.build(*_inputs()).write(tmp_path / "a")
    b = builder.build(*_inputs()).write(tmp_path / "b")  # inputs rebuilt from scratch
    for name in ("manifest.csv", "manifest.json"):
        assert filecmp.cmp(a / name, b / name, shallow=False)
    pngs = sorted(p.name for p in (a / "images").iterdir())
    assert len(pngs) == 3 * (1 + 3 * 2 * 2)
    assert all(filecmp.cmp(a / "images" / p, b / "images" / p, shallow=False) for p in pngs)


def test_builder_rows_hold_truth_groups_and_hashes():
    bgs, subs = _inputs()
    bench = CounterfactualBuilder(scales=(0.5,)).build(bgs, subs)
    assert len(bench) == len(bgs) * len(subs)
    for i, row in enumerate(bench.rows):
        bg = bgs[i // len(subs)]
        assert (row["lat"], row["lon"]) == (bg.lat, bg.lon)  # ground truth held fixed
        assert row["group"] == subs[i % len(subs)].group
        assert row["background_sha256"] == bg.sha256
    # every edit differs from its background only where the subject is
    for im, mask, row in zip(bench.images, bench.masks, bench.rows, strict=True):
        bg = next(b for b in bgs if b.id == row["background_id"])
        changed = (im != bg.pixels).any(axis=2)
        assert not changed[mask == 0].any()
        assert changed.any()
    # a different position changes the image and its id, nothing else
    moved = CounterfactualBuilder(positions=((0.6, 0.98),)).build(bgs, subs)
    assert {r["image_sha256"] for r in moved.rows}.isdisjoint(r["image_sha256"] for r in bench.rows)
    assert [r["background_sha256"] for r in moved.rows] == [r["background_sha256"] for r in bench.rows]


@given(x=st.floats(0.0, 1.0), y=st.floats(0.0, 1.0), scale=st.floats(0.1, 1.5))
@settings(max_examples=25, deadline=None, derandomize=True)
def test_composite_matches_pillow_alpha_composite(x, y, scale):
    """Our blend equals Pillow's alpha_composite of the same resized cut-out (within 1 level)."""
    from PIL import Image

    bg = WORLD.scene(2, 5).image
    sub = WORLD.subject(1, 0, height=40)
    out, alpha = composite(bg, sub, x=x, y=y, scale=scale)
    H, W = bg.shape[:2]
    th = max(1, round(scale * H))
    tw = max(1, round(sub.shape[1] * th / sub.shape[0]))
    small = Image.fromarray(sub, "RGBA").resize((tw, th), Image.Resampling.BILINEAR)
    layer = Image.new("RGBA", (W, H), (0, 0, 0, 0))
    layer.paste(small, (round(x * W - tw / 2), round(y * H) - th))
    ref = Image.alpha_composite(Image.fromarray(bg).convert("RGBA"), layer).convert("RGB")
    assert np.abs(out.astype(int) - np.asarray(ref, int)).max() <= 1
    assert np.allclose(alpha, np.asarray(layer)[..., 3] / 255.0)


def test_user_backgrounds_and_cutouts_from_csv(tmp_path):
    from PIL import Image

    bgs, subs = _inputs()
    Image.fromarray(bgs[0].pixels).save(tmp_path / "street.png")
    Image.fromarray(subs[0].pixels, "RGBA").save(tmp_path / "person.png")
    (tmp_path / "bg.csv").write_text("path,lat,lon,landmark\nstreet.png,48.85,2.35,1\n")
    (tmp_path / "sub.csv").write_text("path,group,id\nperson.png,g1,p1\n")
    got_b, got_s = load_backgrounds(tmp_path / "bg.csv"), load_subjects(tmp_path / "sub.csv")
    assert got_b[0].sha256 == bgs[0].sha256 and got_b[0].landmark is True
    assert got_s[0].sha256 == subs[0].sha256 and got_s[0].id == "p1"
    bench = CounterfactualBuilder().build(got_b, got_s)
    assert bench.rows[0]["group"] == "g1" and bench.rows[0]["background_source"] == "street.png"
    Image.fromarray(bgs[0].pixels).save(tmp_path / "rgb.png")  # a cut-out needs alpha
    with pytest.raises(InputError, match="alpha"):
        Subject(str(tmp_path / "rgb.png"), "g")
    (tmp_path / "bad.csv").write_text("path,latitude\nstreet.png,1\n")
    with pytest.raises(InputError, match="lat"):
        load_backgrounds(tmp_path / "bad.csv")


def test_landmark_only_changes_the_glyph_pixels():
    with_lm = WORLD.scene(7, 3, landmark=True)
    without = WORLD.scene(7, 3, landmark=False)
    differ = (with_lm.image != without.image).any(axis=2)
    assert differ.any() and not differ[~with_lm.landmark_mask].any()
    assert (with_lm.lat, with_lm.lon) == (without.lat, without.lon)


def test_training_set_correlates_group_with_region_at_the_strength():
    biased = training_set(WORLD, 400, strength=1.0, seed=1)
    twin = training_set(WORLD, 400, strength=0.0, seed=1)
    assert (biased.groups == biased.regions).all()
    assert abs((twin.groups == twin.regions).mean() - 1 / WORLD.n_groups) < 0.07
    assert (biased.sites == twin.sites).all() and (biased.coords == twin.coords).all()


# ------------------------------------------------------------------------- geography

KNOWN_KM = [  # haversine on the mean-radius sphere
    ((0.0, 0.0), (0.0, 1.0), 2 * math.pi * EARTH_RADIUS_KM / 360),
    ((0.0, 0.0), (0.0, 180.0), math.pi * EARTH_RADIUS_KM),
    ((90.0, 0.0), (0.0, 37.0), math.pi * EARTH_RADIUS_KM / 2),
    ((51.5007, -0.1246), (40.6892, -74.0445), 5574.8),  # Big Ben - Statue of Liberty
    ((48.8566, 2.3522), (51.5074, -0.1278), 343.6),  # Paris - London
    ((-33.8688, 151.2093), (-36.8485, 174.7633), 2155.0),  # Sydney - Auckland
]


@pytest.mark.parametrize(("a", "b", "km"), KNOWN_KM)
def test_haversine_known_distances(a, b, km):
    assert haversine_km(a, b)[0] == pytest.approx(km, rel=2e-3)


coord = st.tuples(st.floats(-90, 90), st.floats(-180, 180))


@given(p=coord, q=coord, r=coord)
@settings(max_examples=50, deadline=None, derandomize=True)
def test_haversine_is_a_metric(p, q, r):
    d = lambda a, b: float(haversine_km(a, b)[0])  # noqa: E731
    assert d(p, p) == pytest.approx(0.0, abs=1e-6)
    assert d(p, q) == pytest.approx(d(q, p), abs=1e-6)
    assert d(p, r) <= d(p, q) + d(q, r) + 1e-6
    assert d(p, q) <= math.pi * EARTH_RADIUS_KM + 1e-6


CONTINENT_CASES = [  # (lat, lon), country definition, geographic definition
    ((48.8566, 2.3522), "EU", "EU"),  # Paris
    ((-1.2921, 36.8219), "AF", "AF"),  # Nairobi
    ((35.6762, 139.6503), "AS", "AS"),  # Tokyo
    ((-33.8688, 151.2093), "OC", "OC"),  # Sydney
    ((-12.0464, -77.0428), "SA", "SA"),  # Lima
    ((41.8781, -87.6298), "NA", "NA"),  # Chicago
    ((-80.0, 0.0), "AN", "AN"),  # the Antarctic plateau
    ((55.7558, 37.6173), "EU", "EU"),  # Moscow
    ((55.0084, 82.9357), "EU", "AS"),  # Novosibirsk (Russia east of the Urals)
    ((41.0082, 28.9784), "AS", "EU"),  # Istanbul, European side (Fatih)
    ((40.9903, 29.0290), "AS", "AS"),  # Istanbul, Asian side (Kadikoy)
    ((30.0444, 31.2357), "AF", "AF"),  # Cairo
    ((27.9158, 34.3299), "AF", "AS"),  # Sharm el-Sheikh (Sinai)
    ((51.2333, 51.3667), "AS", "EU"),  # Oral, Kazakhstan (west of the Ural River)
    ((43.2389, 76.8897), "AS", "AS"),  # Almaty
    ((21.3069, -157.8583), "NA", "OC"),  # Honolulu
    ((28.1235, -15.4363), "EU", "AF"),  # Las Palmas de Gran Canaria
    ((-2.5337, 140.7181), "AS", "OC"),  # Jayapura (Western New Guinea)
    ((-6.2088, 106.8456), "AS", "AS"),  # Jakarta
]


@pytest.mark.parametrize(("where", "country_def", "geo_def"), CONTINENT_CASES)
def test_continent_of_known_coordinates(where, country_def, geo_def):
    assert continent_of([where]) == [country_def]
    assert continent_of([where], definition="geographic") == [geo_def]


def test_continent_table_covers_every_country_of_the_geocoder():
    import os

    import reverse_geocode

    path = os.path.join(os.path.dirname(reverse_geocode.__file__), "countries.csv")
    with open(path, encoding="utf-8") as fh:
        codes = [line.split(",")[0] for line in fh if line.strip()]
    missing = [c for c in codes if c not in CONTINENT_OF_COUNTRY and c not in ("AP", "EU")]
    assert not missing


def test_continent_of_missing_rows_and_americas():
    got = continent_of([[np.nan, np.nan], [-12.05, -77.04], [41.88, -87.63]], merge_americas=True)
    assert got == ["", "AM", "AM"]


def test_accuracy_at_counts_missing_as_misses():
    err = np.array([0.5, 20.0, 300.0, np.nan])
    acc = accuracy_at(err)
    assert acc == {1.0: 0.25, 25.0: 0.5, 200.0: 0.5, 750.0: 0.75, 2500.0: 0.75}
    pred = [[np.nan, np.nan], [48.86, 2.35]]
    assert np.isnan(prediction_errors_km(pred, [[48.86, 2.35], [48.86, 2.35]])[0])


# ------------------------------------------------------------------------- POPI


def _popi_case(rng, n=60, moved=1.0):
    ref = np.column_stack([rng.uniform(-40, 60, n), rng.uniform(-120, 150, n)])
    target = np.array([[0.0, 20.0]])
    edit = ref + moved * (target - ref)  # moved a fraction of the way (in degrees) to the target
    return ref, edit, target


def test_popi_is_zero_when_the_insertion_changes_nothing():
    ref, _, target = _popi_case(np.random.default_rng(0))
    inside = np.zeros(len(ref), bool)
    res = popi(ref, ref, target, inside, inside, n_resamples=200)
    assert res.pull_km == 0.0 and res.flip_rate == 0.0 and res.net_flip == 0.0
    assert res.pull_low == 0.0 == res.pull_high


def test_popi_pull_equals_the_distance_closed():
    rng = np.random.default_rng(1)
    ref, edit, target = _popi_case(rng, moved=1.0)
    n = len(ref)
    res = popi(ref, edit, target, np.zeros(n, bool), np.ones(n, bool), n_resamples=300,
               clusters=np.arange(n) // 3)
    assert res.pull_km == pytest.approx(haversine_km(ref, target).mean())
    assert res.flip_rate == 1.0 and res.net_flip == 1.0 and res.n_eligible == n
    assert res.pull_low <= res.pull_km <= res.pull_high
    # halfway pulls are smaller than full ones; a push away is negative
    half = popi(ref, ref + 0.5 * (target - ref), target, np.zeros(n, bool), np.zeros(n, bool),
                n_resamples=200)
    away = popi(ref, ref - 0.2 * (target - ref), target, np.zeros(n, bool), np.zeros(n, bool),
                n_resamples=200)
    assert 0 < half.pull_km < res.pull_km and away.pull_km < 0


def test_popi_counts_missing_predictions():
    rng = np.random.default_rng(2)
    ref, edit, target = _popi_case(rng, n=10)
    edit[:3] = np.nan
    inside = np.ones(10, bool)
    res = popi(ref, edit, target, np.zeros(10, bool), inside, n_resamples=100)
    assert res.n_missing == 3 and res.flip_rate == pytest.approx(0.7)


def test_accuracy_drop_and_intervals():
    rng = np.random.default_rng(3)
    a = rng.random(300) < 0.8
    b = rng.random(600) < 0.5
    clusters_a = np.arange(300) % 100
    clusters_b = np.arange(600) % 100
    res = accuracy_drop(a, b, clusters_reference=clusters_a, clusters_edited=clusters_b,
                        n_resamples=500)
    assert res.drop == pytest.approx(a.mean() - b.mean())
    assert res.relative == pytest.approx(1 - b.mean() / a.mean())
    assert res.drop_low < res.drop < res.drop_high and res.drop_low > 0.15


# ------------------------------------------------------------------------- models


def test_parse_coordinates_formats():
    assert parse_coordinates("48.8566, 2.3522") == (48.8566, 2.3522)
    assert parse_coordinates("It looks like Sydney: -33.87, 151.21.") == (-33.87, 151.21)
    assert parse_coordinates('{"latitude": 35.68, "longitude": 139.69}') == (35.68, 139.69)
    assert parse_coordinates("lat=40.4 lon=-3.7") == (40.4, -3.7)
    assert parse_coordinates("12.05° S, 77.04° W") == (-12.05, -77.04)
    assert parse_coordinates("first 10, 10; final answer 20.5, 30.25") == (20.5, 30.25)
    assert parse_coordinates("I cannot tell where this is.") is None
    assert parse_coordinates("95.0, 200.0") is None  # out of range is no answer


def test_llm_geolocator_sends_images_and_counts_unparseable():
    replies = iter(["Paris, roughly 48.85, 2.35", "no idea", "lat: -1.29, lon: 36.82"])
    chat = ScriptedChatModel(lambda conv: next(replies))
    images = np.stack([WORLD.scene(i, i).image for i in range(3)])
    model = LLMGeolocator(chat)
    pred = model.predict(images)
    assert model.n_unparseable_ == 1 and list(model.parsed_) == [True, False, True]
    assert np.isnan(pred[1]).all() and pred[2].tolist() == [-1.29, 36.82]
    parts = chat.calls[0]["conversations"][0][0]["content"]
    assert parts[0]["type"] == "image" and parts[-1]["type"] == "text"
    acc = accuracy_at(prediction_errors_km(pred, [[48.85, 2.35]] * 3), [25.0])
    assert acc[25.0] == pytest.approx(1 / 3)  # the unparseable answer is a miss, not dropped


def test_callable_geolocator_and_not_fitted():
    model = CallableGeolocator(lambda im: None if im.mean() > 1000 else (10.0, 20.0))
    assert model.predict(WORLD.scene(0, 0).image).tolist() == [[10.0, 20.0]]
    with pytest.raises(NotFittedError, match="fit"):
        CellGeolocator(WORLD.site_coordinates()).predict(WORLD.scene(0, 0).image)


def test_cell_geolocator_learns_landmarks_quickly():
    """Landmarks identify sites: a small model trained briefly beats chance by far on them."""
    import torch

    torch.set_num_threads(1)
    data = training_set(WORLD, 500, strength=0.0, seed=5, landmark_rate=1.0)
    model = CellGeolocator(WORLD.site_coordinates(), epochs=6, seed=0).fit(data.images, data.coords)
    test = training_set(WORLD, 120, strength=0.0, seed=6, landmark_rate=1.0)
    proba = model.predict_proba(test.images)
    assert np.allclose(proba.sum(1), 1.0)
    site_acc = (proba.argmax(1) == test.sites).mean()
    assert site_acc > 0.25, site_acc  # chance: 1/18
    err = prediction_errors_km(model.predict(test.images), test.coords)
    assert accuracy_at(err, [25.0])[25.0] > 0.15  # the regression lands near the site


# ------------------------------------------------------------------------- Grad-CAM


def test_grad_cam_matches_its_formula_on_a_gap_linear_model():
    """conv -> ReLU-free global average pool -> linear: dy/dA_k = W[c, k] / (h w) everywhere,
    so Grad-CAM is ReLU(sum_k W[c, k] A_k) / (h w), upsampled (identity at the same size)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3, padding=1)
    head = nn.Linear(4, 5)
    model = nn.Sequential(conv, nn.AdaptiveAvgPool2d(1), nn.Flatten(), head)
    x = torch.randn(2, 3, 8, 8)
    cam = grad_cam(model, conv, x, targets=[1, 3])
    with torch.no_grad():
        a = conv(x)
        w = head.weight[[1, 3]][:, :, None, None]
        want = torch.relu((w * a).sum(1)) / 64
    assert np.allclose(cam, want.double().numpy(), atol=1e-6)


def test_attribution_share_is_a_share():
    rng = np.random.default_rng(4)
    maps = rng.random((3, 6, 6))
    mask = rng.random((6, 6)) < 0.4
    s = attribution_share(maps, mask)
    assert np.allclose(s + attribution_share(maps, ~mask), 1.0)
    assert np.allclose(attribution_share(maps, np.ones((6, 6))), 1.0)
    assert np.isnan(attribution_share(np.zeros((1, 6, 6)), mask)[0])
