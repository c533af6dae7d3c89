"""geobias's public API on malformed input: InputError with one line, or the canonical result.

Every name in ``trustlab.methods.geobias.__all__`` that takes arguments is a case below (issue
38's contract); the corruptions per argument kind are in tests/malformed.py.
"""

from __future__ import annotations

import math

import hypothesis  # noqa: F401 - the property tests are built by malformed_input_tests
import numpy as np
import pytest

from trustlab.core.errors import InputError, NotFittedError
from trustlab.lm.chat import ScriptedChatModel
from trustlab.methods import geobias as api
from trustlab.methods.geobias import (
    Background,
    CallableGeolocator,
    CellGeolocator,
    CounterfactualBuilder,
    LLMGeolocator,
    Region,
    Subject,
    SyntheticWorld,
)

from ..malformed import (
    ARRAY,
    BOOL,
    CHOICE,
    INT,
    OBJECT,
    RNG,
    UNIT,
    Case,
    Kind,
    Mutation,
    malformed_input_tests,
    scalar,
)

WORLD = SyntheticWorld(size=16)
_rng = np.random.default_rng(0)
SCENE = WORLD.scene(1, 2, landmark=True)
BG_IMG = SCENE.image
SUB_IMG = WORLD.subject(2, 0, height=16)
BG = Background(BG_IMG, SCENE.lat, SCENE.lon, landmark=True, landmark_mask=SCENE.landmark_mask)
SUB = Subject(SUB_IMG, "2")
COORDS = np.column_stack([_rng.uniform(-60, 60, 7), _rng.uniform(-170, 170, 7)])
PRED = COORDS[::-1].copy()
IMAGES = np.stack([WORLD.scene(i, i).image for i in range(4)])
FLAGS = np.array([True, False, True, False, False, True, True])


def _coord_kind(name: str) -> Kind:
    return ARRAY.extend(
        Mutation("latitude 200", lambda x, r: np.asarray(x) * [0, 0] + [200.0, 0.0]),
        Mutation("longitude -400", lambda x, r: np.asarray(x) * [0, 0] + [0.0, -400.0]),
        Mutation("one column", lambda x, r: np.asarray(x)[:, :1]),
        Mutation("three columns", lambda x, r: np.column_stack([x, np.asarray(x)[:, 0]])),
        Mutation("booleans", lambda x, r: np.asarray(x) > 0),
        name=name,
    )


COORDS_K = _coord_kind("coords")
#: predictions: a (NaN, NaN) row is a missing prediction, so ARRAY's one-NaN-cell is an error
PRED_K = COORDS_K


def _images_kind() -> Kind:
    return Kind("images", (
        Mutation("None", lambda x, r: None),
        Mutation("string", lambda x, r: "images"),
        Mutation("float pixels", lambda x, r: np.asarray(x) / 255.0),
        Mutation("negative pixels", lambda x, r: np.asarray(x).astype(np.int64) - 300),
        Mutation("two channels", lambda x, r: np.asarray(x)[..., :2]),
        Mutation("empty", lambda x, r: np.asarray(x)[:0]),
        Mutation("empty list", lambda x, r: []),
        Mutation("dict", lambda x, r: {"a": 1}),
        Mutation("list of arrays", lambda x, r: list(np.asarray(x)), same=True),
        Mutation("int64 pixels", lambda x, r: np.asarray(x).astype(np.int64), same=True),
    ))


IMAGES_K = _images_kind()
RGB_K = Kind("rgb", (
    Mutation("None", lambda x, r: None),
    Mutation("float pixels", lambda x, r: np.asarray(x) / 255.0),
    Mutation("missing path", lambda x, r: "/no/such/image.png"),
    Mutation("list", lambda x, r: np.asarray(x).tolist()),
    Mutation("PIL image", lambda x, r: _pil(x), same=True),
))
RGBA_K = Kind("rgba", (
    Mutation("None", lambda x, r: None),
    Mutation("RGB only", lambda x, r: np.asarray(x)[..., :3]),
    Mutation("fully transparent", lambda x, r: np.asarray(x) * [1, 1, 1, 0]),
    Mutation("float pixels", lambda x, r: np.asarray(x) / 255.0),
    Mutation("missing path", lambda x, r: "/no/such/cutout.png"),
    Mutation("string", lambda x, r: 3),
    Mutation("PIL RGBA", lambda x, r: _pil(x), same=True),
    Mutation("int64 pixels", lambda x, r: np.asarray(x).astype(np.int64), same=True),
))
FRACTION = scalar("fraction", -0.1, 1.5)
LAT = scalar("lat", 90.5, -91.0)
LON = scalar("lon", 180.5, -181.0)
NONNEG = scalar("non-negative", -1.0)
POS = scalar("positive", 0.0, -1.0)
FLAGS_K = Kind("flags", (
    Mutation("0/1 integers", lambda x, r: np.asarray(x).astype(int), same=True),
    Mutation("list", lambda x, r: np.asarray(x).tolist(), same=True),
    Mutation("a 2 in it", lambda x, r: np.where(np.arange(len(x)) == 0, 2, np.asarray(x, int))),
    Mutation("strings", lambda x, r: np.asarray(x).astype(str)),
    Mutation("one short", lambda x, r: np.asarray(x)[:-1]),
    Mutation("None", lambda x, r: None),
    Mutation("floats", lambda x, r: np.asarray(x) + 0.5),
))
STRING = Kind("string", (
    Mutation("None", lambda v, r: None),
    Mutation("number", lambda v, r: 3),
    Mutation("empty", lambda v, r: ""),
    Mutation("list", lambda v, r: [v]),
))
TEXT = Kind("text", (Mutation("None", lambda v, r: None), Mutation("bytes", lambda v, r: b"1, 2"),
                     Mutation("number", lambda v, r: 3.0)))
GROUP = Kind("group", (
    Mutation("None", lambda v, r: None), Mutation("bool", lambda v, r: True),
    Mutation("float", lambda v, r: 1.5), Mutation("list", lambda v, r: [v]),
    Mutation("int", lambda v, r: int(v), same=True),
))
GROUP_INDEX = INT(6, 99, lo=0).extend(Mutation("unknown name", lambda v, r: "martian"))
SEED = INT(lo=0)
PAIR_RANGE = Kind("pair", (
    Mutation("None", lambda v, r: None), Mutation("reversed", lambda v, r: (v[1], v[0] - 0.1)),
    Mutation("above 1", lambda v, r: (v[0], 1.5)), Mutation("string", lambda v, r: "0,1"),
    Mutation("three", lambda v, r: (*v, 1.0)), Mutation("list", lambda v, r: list(v), same=True),
))
POSITIONS = Kind("positions", (
    Mutation("None", lambda v, r: None), Mutation("empty", lambda v, r: ()),
    Mutation("flat pair", lambda v, r: v[0]), Mutation("out of frame", lambda v, r: ((1.5, 0.5),)),
    Mutation("string", lambda v, r: "centre"), Mutation("nan", lambda v, r: ((math.nan, 0.5),)),
    Mutation("lists", lambda v, r: [list(p) for p in v], same=True),
))
SCALES = Kind("scales", (
    Mutation("None", lambda v, r: None), Mutation("empty", lambda v, r: ()),
    Mutation("zero", lambda v, r: (0.0,)), Mutation("negative", lambda v, r: (-0.5,)),
    Mutation("string", lambda v, r: "big"), Mutation("nan", lambda v, r: (math.nan,)),
    Mutation("one number", lambda v, r: v[0], same=True),
))


def _pil(x):
    from PIL import Image

    a = np.asarray(x, np.uint8)
    return Image.fromarray(a, "RGBA" if a.shape[-1] == 4 else "RGB")


def _seq_kind(name, item_type):
    return Kind(name, (
        Mutation("None", lambda v, r: None), Mutation("empty", lambda v, r: []),
        Mutation("string", lambda v, r: "x"), Mutation("wrong items", lambda v, r: [1, 2]),
        Mutation("repeated ids", lambda v, r: [v[0], v[0]]),
        Mutation("tuple", lambda v, r: tuple(v), same=True),
    ))


BGS_K = _seq_kind("backgrounds", Background)
SUBS_K = _seq_kind("subjects", Subject)


def _bench(backgrounds, subjects, positions, scales, include_original):
    b = CounterfactualBuilder(positions=positions, scales=scales,
                              include_original=include_original).build(backgrounds, subjects)
    return [r["image_sha256"] for r in b.rows], np.stack(b.masks)


BENCH = CounterfactualBuilder().build([BG], [SUB])


def _fit_predict(images, coords, epochs, batch_size, lr, width, regression_weight, seed):
    import torch

    torch.set_num_threads(1)
    m = CellGeolocator(WORLD.site_coordinates(), epochs=epochs, batch_size=batch_size, lr=lr,
                       width=width, regression_weight=regression_weight, seed=seed)
    return m.fit(images, coords).predict(images)


FITTED = CellGeolocator(WORLD.site_coordinates(), epochs=1, width=2).fit(IMAGES, COORDS[:4])


def _llm(images, prompt, max_new_tokens, temperature, seed):
    chat = ScriptedChatModel(lambda conv: "12.5, 40.25")
    return LLMGeolocator(chat, prompt=prompt, max_new_tokens=max_new_tokens,
                         temperature=temperature, seed=seed).predict(images)


def _grad_cam(targets):
    x = FITTED.input_tensor(IMAGES)
    return api.grad_cam(FITTED.model_, FITTED.cam_layer, x, targets)


CAM_MAPS = np.abs(_rng.normal(size=(3, 5, 5)))
CAM_MASK = (_rng.random((5, 5)) < 0.5)

CASES = [
    Case("as_coordinates", lambda coords: api.as_coordinates(coords), {"coords": COORDS},
         {"coords": COORDS_K}),
    Case("as_predictions", lambda predictions: api.as_predictions(predictions),
         {"predictions": PRED}, {"predictions": COORDS_K}),
    Case("haversine_km", api.haversine_km, {"a": COORDS, "b": PRED}, {"a": COORDS_K, "b": COORDS_K}),
    Case("accuracy_at", api.accuracy_at, {"errors_km": np.array([1.0, 30.0, 900.0]),
                                          "thresholds_km": [25.0, 750.0]},
         {"errors_km": ARRAY.without("nan").extend(Mutation("negative", lambda x, r: -np.asarray(x))),
          "thresholds_km": ARRAY.extend(Mutation("zero", lambda x, r: np.zeros(2)))}),
    Case("prediction_errors_km", api.prediction_errors_km, {"predictions": PRED, "truth": COORDS},
         {"predictions": COORDS_K, "truth": COORDS_K}),
    Case("continent_of", lambda coords, definition, merge_americas: api.continent_of(
        coords, definition=definition, merge_americas=merge_americas),
         {"coords": COORDS, "definition": "geographic", "merge_americas": False},
         {"coords": COORDS_K, "definition": CHOICE(), "merge_americas": BOOL}),
    Case("country_of", api.country_of, {"coords": COORDS}, {"coords": COORDS_K}),
    Case("popi", lambda reference, edited, target, reference_in_target, edited_in_target,
         n_resamples, confidence_level, rng: api.popi(
             reference, edited, target, reference_in_target, edited_in_target,
             n_resamples=n_resamples, confidence_level=confidence_level, rng=rng),
         {"reference": COORDS, "edited": PRED, "target": np.array([[10.0, 20.0]]),
          "reference_in_target": FLAGS, "edited_in_target": ~FLAGS, "n_resamples": 50,
          "confidence_level": 0.9, "rng": 3},
         {"reference": PRED_K, "edited": PRED_K, "target": COORDS_K,
          "reference_in_target": FLAGS_K, "edited_in_target": FLAGS_K,
          "n_resamples": INT(lo=2), "confidence_level": UNIT, "rng": RNG}),
    Case("accuracy_drop", lambda correct_reference, correct_edited, n_resamples,
         confidence_level, rng: api.accuracy_drop(
             correct_reference, correct_edited, n_resamples=n_resamples,
             confidence_level=confidence_level, rng=rng),
         {"correct_reference": FLAGS, "correct_edited": ~FLAGS[:5], "n_resamples": 50,
          "confidence_level": 0.9, "rng": 1},
         {"correct_reference": FLAGS_K.without("one short"),
          "correct_edited": FLAGS_K.without("one short"), "n_resamples": INT(lo=2),
          "confidence_level": UNIT, "rng": RNG}),
    Case("attribution_share", api.attribution_share, {"maps": CAM_MAPS, "masks": CAM_MASK},
         {"maps": ARRAY.without("pandas").extend(Mutation("negative", lambda x, r: -np.asarray(x))),
          "masks": Kind("masks", (Mutation("a 2 in it", lambda x, r: np.asarray(x) * 2.0),
                                  Mutation("wrong shape", lambda x, r: np.asarray(x)[:-1]),
                                  Mutation("None", lambda x, r: None),
                                  Mutation("0/1 floats", lambda x, r: np.asarray(x) * 1.0,
                                           same=True)))}),
    Case("grad_cam", _grad_cam, {"targets": [0, 1, 2, 3]},
         {"targets": Kind("targets", (Mutation("out of range", lambda v, r: [0, 1, 2, 99]),
                                      Mutation("negative", lambda v, r: [0, -1, 2, 3]),
                                      Mutation("floats", lambda v, r: [0.5, 1, 2, 3]),
                                      Mutation("one short", lambda v, r: [0, 1, 2]),
                                      Mutation("array", lambda v, r: np.array(v), same=True)))}),
    Case("composite", lambda background, subject, x, y, scale: api.composite(
        background, subject, x=x, y=y, scale=scale),
         {"background": BG_IMG, "subject": SUB_IMG, "x": 0.4, "y": 0.9, "scale": 0.5},
         {"background": RGB_K, "subject": RGBA_K, "x": FRACTION, "y": FRACTION,
          "scale": scalar("scale", 0.0, -1.0, 5.0)}),
    Case("Background", lambda image, lat, lon, id, landmark: (
        lambda b: (b.sha256, b.lat, b.lon, b.id, b.landmark))(
            Background(image, lat, lon, id=id, landmark=landmark)),
         {"image": BG_IMG, "lat": 10.0, "lon": -20.0, "id": "bg1", "landmark": True},
         {"image": RGB_K, "lat": LAT, "lon": LON, "id": STRING.without("None"),
          "landmark": BOOL.without("None")}),
    Case("Subject", lambda image, group, id: (lambda s: (s.sha256, s.group, s.id))(
        Subject(image, group, id=id)),
         {"image": SUB_IMG, "group": "3", "id": "s1"},
         {"image": RGBA_K, "group": GROUP, "id": STRING.without("None")}),
    Case("CounterfactualBuilder", _bench,
         {"backgrounds": [BG], "subjects": [SUB], "positions": ((0.3, 0.98),), "scales": (0.5,),
          "include_original": True},
         {"backgrounds": BGS_K, "subjects": SUBS_K, "positions": POSITIONS, "scales": SCALES,
          "include_original": BOOL}),
    Case("Benchmark.column", lambda name: BENCH.column(name), {"name": "group"},
         {"name": CHOICE()}),
    Case("load_backgrounds", api.load_backgrounds, {"csv_path": None}, {}),  # see below
    Case("rgba_sha256", api.rgba_sha256, {"array": SUB_IMG},
         {"array": Kind("array", (Mutation("None", lambda x, r: None),
                                  Mutation("floats", lambda x, r: np.asarray(x) * 1.0),
                                  Mutation("list", lambda x, r: np.asarray(x).tolist()),
                                  Mutation("empty", lambda x, r: np.asarray(x)[:0])))}),
    Case("as_image_batch", lambda images: api.as_image_batch(images), {"images": IMAGES},
         {"images": IMAGES_K}),
    Case("CellGeolocator", _fit_predict,
         {"images": IMAGES, "coords": COORDS[:4], "epochs": 1, "batch_size": 2, "lr": 1e-3,
          "width": 2, "regression_weight": 1.0, "seed": 0},
         {"images": IMAGES_K.without("list of arrays", "int64 pixels"),
          "coords": COORDS_K.extend(Mutation("one short", lambda x, r: np.asarray(x)[:-1])),
          "epochs": INT(lo=1), "batch_size": INT(lo=1), "lr": POS, "width": INT(lo=1),
          "regression_weight": NONNEG, "seed": SEED}),
    Case("CellGeolocator.predict", lambda images: FITTED.predict(images), {"images": IMAGES},
         {"images": IMAGES_K}),
    Case("CellGeolocator.predict_proba", lambda images: FITTED.predict_proba(images),
         {"images": IMAGES}, {"images": IMAGES_K}),
    Case("CallableGeolocator", lambda fn, images: CallableGeolocator(fn).predict(images),
         {"fn": lambda im: (1.0, 2.0), "images": IMAGES},
         {"fn": Kind("fn", (Mutation("None", lambda v, r: None), Mutation("string", lambda v, r: "f"))),
          "images": IMAGES_K}),
    Case("LLMGeolocator", _llm, {"images": IMAGES, "prompt": "Where?", "max_new_tokens": 16,
                                 "temperature": 0.0, "seed": 0},
         {"images": IMAGES_K, "prompt": STRING, "max_new_tokens": INT(lo=1),
          "temperature": NONNEG, "seed": SEED}),
    Case("parse_coordinates", api.parse_coordinates, {"text": "1.5, 2.5"}, {"text": TEXT}),
    Case("SyntheticWorld", lambda size, visibility, noise, jitter_km: SyntheticWorld(
        size=size, visibility=visibility, noise=noise, jitter_km=jitter_km).scene(0, 0).image,
         {"size": 16, "visibility": (0.2, 0.8), "noise": 2.0, "jitter_km": 5.0},
         {"size": INT(8, 1000, lo=16), "visibility": PAIR_RANGE, "noise": NONNEG,
          "jitter_km": NONNEG}),
    Case("SyntheticWorld.scene", lambda site, seed, landmark: WORLD.scene(
        site, seed, landmark=landmark).image, {"site": 3, "seed": 4, "landmark": True},
         {"site": INT(18, 99, lo=0), "seed": SEED, "landmark": BOOL}),
    Case("SyntheticWorld.subject", lambda group, seed: WORLD.subject(group, seed, height=16),
         {"group": 2, "seed": 1}, {"group": GROUP_INDEX, "seed": SEED}),
    Case("render_subject", lambda group, height, seed: api.render_subject(
        group, height=height, seed=seed), {"group": 4, "height": 24, "seed": 2},
         {"group": GROUP_INDEX, "height": INT(4, lo=8), "seed": SEED}),
    Case("training_set", lambda world, n, strength, seed, landmark_rate, scale: (
        lambda t: (t.images, t.groups))(api.training_set(
            world, n, strength=strength, seed=seed, landmark_rate=landmark_rate, scale=scale)),
         {"world": WORLD, "n": 3, "strength": 0.5, "seed": 1, "landmark_rate": 0.5,
          "scale": (0.3, 0.6)},
         {"world": OBJECT, "n": INT(lo=1), "strength": FRACTION, "seed": SEED,
          "landmark_rate": FRACTION, "scale": PAIR_RANGE}),
    Case("region_centroid", api.region_centroid, {"sites": COORDS}, {"sites": COORDS_K}),
    Case("Region", lambda name, continent, sites: Region(name, continent, sites).sites,
         {"name": "r", "continent": "EU", "sites": (("a", 1.0, 2.0),)},
         {"name": STRING, "continent": CHOICE(),
          "sites": Kind("sites", (Mutation("None", lambda v, r: None),
                                  Mutation("empty", lambda v, r: ()),
                                  Mutation("pairs", lambda v, r: (("a", 1.0),)),
                                  Mutation("lat 100", lambda v, r: (("a", 100.0, 2.0),)),
                                  Mutation("lists", lambda v, r: [list(s) for s in v], same=True)))}),
]
WB = api.world_benchmark(WORLD, 2, seed=0)
WB_PRED = np.column_stack([_rng.uniform(-50, 60, len(WB)), _rng.uniform(-120, 150, len(WB))])
_cents, _conts = WORLD.region_centroids(), WORLD.region_continents()
GROUP_REGIONS = {str(g): (tuple(_cents[g]), _conts[g]) for g in range(WORLD.n_groups)}


def _analyse(predictions, benchmark, group_regions, reference_group, definition, n_resamples,
             rng):
    res = api.analyse_insertions(predictions, benchmark, group_regions,
                                 reference_group=reference_group, definition=definition,
                                 n_resamples=n_resamples, rng=rng)
    return res.popi, res.accuracy, res.drops, res.continents


REGIONS_K = Kind("group_regions", (
    Mutation("None", lambda v, r: None), Mutation("empty", lambda v, r: {}),
    Mutation("a group missing", lambda v, r: {k: x for k, x in v.items() if k != "0"}),
    Mutation("bad spec", lambda v, r: {**v, "0": "europe"}),
    Mutation("lat 100", lambda v, r: {**v, "0": ((100.0, 0.0), "EU")}),
))

CASES += [
    Case("analyse_insertions", _analyse,
         {"predictions": WB_PRED, "benchmark": WB, "group_regions": GROUP_REGIONS,
          "reference_group": "neutral", "definition": "country", "n_resamples": 50, "rng": 0},
         {"predictions": COORDS_K.extend(Mutation("one short", lambda x, r: np.asarray(x)[:-1])),
          "benchmark": OBJECT, "group_regions": REGIONS_K,
          "reference_group": Kind("ref", (Mutation("unknown", lambda v, r: "martian"),)),
          "definition": CHOICE(), "n_resamples": INT(lo=2), "rng": RNG}),
    Case("world_benchmark", lambda world, n_backgrounds, seed, scale: [
        r["image_sha256"] for r in api.world_benchmark(world, n_backgrounds, seed=seed,
                                                       scale=scale).rows],
         {"world": WORLD, "n_backgrounds": 1, "seed": 0, "scale": 0.5},
         {"world": OBJECT, "n_backgrounds": INT(lo=1), "seed": SEED,
          "scale": scalar("scale", 0.0, -1.0, 5.0)}),
]
CASES = [c for c in CASES if c.kinds]  # load_* are tested on files below

test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


def test_every_public_callable_has_a_case():
    covered = {c.name.split(".")[0] for c in CASES}
    constants = {"CONTINENTS", "CONTINENT_OF_COUNTRY", "DEFAULT_LLM_PROMPT", "DEFAULT_REGIONS",
                 "DEFAULT_THRESHOLDS_KM", "EARTH_RADIUS_KM", "NEUTRAL_GROUP", "TRANSCONTINENTAL"}
    results = {"POPI", "AccuracyDrop", "Scene", "TrainingSet", "Benchmark", "InsertionAnalysis"}  # returned, not built
    files = {"load_backgrounds", "load_subjects"}  # tested on files below
    missing = set(api.__all__) - covered - constants - results - files
    assert not missing, f"no malformed-input case for {sorted(missing)}"


@pytest.mark.parametrize("loader", [api.load_backgrounds, api.load_subjects])
def test_loaders_on_bad_files(loader, tmp_path):
    with pytest.raises(InputError, match="csv_path"):
        loader(tmp_path / "missing.csv")
    with pytest.raises(InputError, match="csv_path"):
        loader(3)
    (tmp_path / "empty.csv").write_text("path,lat,lon,group\n")
    with pytest.raises(InputError, match="no rows"):
        loader(tmp_path / "empty.csv")
    (tmp_path / "nofile.csv").write_text("path,lat,lon,group\nnope.png,1,2,g\n")
    with pytest.raises(InputError, match="image"):
        loader(tmp_path / "nofile.csv")


def test_load_backgrounds_bad_values(tmp_path):
    from PIL import Image

    Image.fromarray(BG_IMG).save(tmp_path / "a.png")
    for body, match in [("a.png,north,2", "not a number"), ("a.png,95,2", "lat"),
                        ("a.png,1,2,maybe", "landmark")]:
        (tmp_path / "b.csv").write_text("path,lat,lon,landmark\n" + body + "\n")
        with pytest.raises(InputError, match=match):
            api.load_backgrounds(tmp_path / "b.csv")


def test_benchmark_write_and_steps_out_of_order(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="out_dir"):
        BENCH.write(tmp_path / "file")
    with pytest.raises(InputError, match="out_dir"):
        BENCH.write(None)
    with pytest.raises(NotFittedError, match="fit"):
        CellGeolocator(WORLD.site_coordinates()).predict_proba(IMAGES)
    with pytest.raises(InputError, match="cells"):
        CellGeolocator([[1.0, 2.0]]).fit(IMAGES, COORDS[:4])
    with pytest.raises(InputError, match="chat"):
        LLMGeolocator(object()).predict(IMAGES)
