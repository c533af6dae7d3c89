"""trustlab.vision on malformed input (issue 38): InputError in one line naming the parameter,
or the canonical result -- and properties that fail if the generator or the image conversions are
wrong: every representation of an image has the same pixels and hash, the same seed gives the
same picture, prefixes of image sets do not depend on their length, a scene's objects are drawn
in their colour where the scene says they are."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.vision import (
    COLOURS,
    SHAPES,
    ImageSet,
    Scene,
    Shape,
    as_array,
    as_image,
    available_fonts,
    classification_set,
    data_url,
    image_sha256,
    is_image_like,
    load_font,
    neutral_image,
    neutral_images,
    png_bytes,
    random_scene,
    render_scene,
    render_text,
    render_word_grid,
    scene_frames,
    split_words,
    text_frames,
)

from ..malformed import (
    INT,
    OBJECT,
    RNG,
    Case,
    Kind,
    Mutation,
    malformed_input_tests,
)

FEW = settings(max_examples=10, deadline=None, derandomize=True)
SOME = settings(max_examples=40, deadline=None, derandomize=True)
SCENE = Scene(24, 24, (Shape("circle", "red", 6.0, 6.0, 8.0), Shape("square", "blue", 17.0, 17.0, 8.0)))
PIXELS = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)


def _arr(img):
    return np.asarray(img)


IMAGE = Kind("image", (
    Mutation("float array", lambda a, r: np.asarray(a, dtype=np.float64)),
    Mutation("bool array", lambda a, r: np.asarray(a) > 3),
    Mutation("4-D array", lambda a, r: np.asarray(a)[None]),
    Mutation("2 channels", lambda a, r: np.asarray(a)[..., :2]),
    Mutation("empty", lambda a, r: np.asarray(a)[:0]),
    Mutation("None", lambda a, r: None),
    Mutation("list", lambda a, r: np.asarray(a).tolist()),
    Mutation("junk bytes", lambda a, r: b"not an image"),
    Mutation("missing path", lambda a, r: "/nonexistent/x.png"),
    Mutation("bad data URL", lambda a, r: "data:image/png;base64,!!!"),
    Mutation("PNG bytes", lambda a, r: png_bytes(a), same=True),
    Mutation("data URL", lambda a, r: data_url(a), same=True),
    Mutation("PIL image", lambda a, r: as_image(a), same=True),
    Mutation("RGBA opaque", lambda a, r: np.concatenate(
        [np.asarray(a), np.full((*np.asarray(a).shape[:2], 1), 255, np.uint8)], -1), same=True),
))
# an int seed is salted per generator, so a Generator of the same seed is another (valid) stream
SEED = Kind("seed", (*RNG.without("Generator of the seed").mutations,
                     Mutation("None", lambda v, r: None), Mutation("bool", lambda v, r: True)))
SIZE = Kind("size", (
    Mutation("zero", lambda v, r: 0), Mutation("negative", lambda v, r: -3),
    Mutation("float", lambda v, r: 16.5), Mutation("string", lambda v, r: "16"),
    Mutation("triple", lambda v, r: (16, 16, 3)), Mutation("None", lambda v, r: None),
    Mutation("huge", lambda v, r: 10**6), Mutation("bool", lambda v, r: True),
    Mutation("numpy int", lambda v, r: np.int64(v), same=True),
    Mutation("square pair", lambda v, r: (v, v), same=True),
))
WORDS = Kind("words", (
    Mutation("one string", lambda w, r: " ".join(w)),
    Mutation("None", lambda w, r: None),
    Mutation("a number in it", lambda w, r: [*w[:-1], 3]),
    Mutation("a word with a space", lambda w, r: ["two words", *w[1:]]),
    Mutation("an empty word", lambda w, r: ["", *w[1:]]),
    Mutation("a newline", lambda w, r: ["a\nb", *w[1:]]),
    Mutation("tuple", lambda w, r: tuple(w), same=True),
))
NOISE = Kind("noise", (
    Mutation("negative", lambda v, r: -1.0), Mutation("nan", lambda v, r: math.nan),
    Mutation("inf", lambda v, r: math.inf), Mutation("reversed pair", lambda v, r: (5.0, 1.0)),
    Mutation("string", lambda v, r: "0"), Mutation("None", lambda v, r: None),
    Mutation("too large", lambda v, r: 500.0), Mutation("triple", lambda v, r: (0.0, 1.0, 2.0)),
    Mutation("pair", lambda v, r: (v, v), same=True),
    Mutation("numpy float", lambda v, r: np.float64(v), same=True),
))


def _shape_scene(**change):
    base = {"kind": "circle", "colour": "red", "x": 6.0, "y": 6.0, "size": 8.0}
    return Scene(24, 24, (Shape(**{**base, **change}),))


SCENES = Kind("scene", (
    *OBJECT.mutations,
    Mutation("NaN centre", lambda s, r: _shape_scene(x=math.nan)),
    Mutation("negative size", lambda s, r: _shape_scene(size=-4.0)),
    Mutation("infinite size", lambda s, r: _shape_scene(kind="square", size=math.inf)),
    Mutation("string centre", lambda s, r: _shape_scene(y="3")),
    Mutation("unknown kind", lambda s, r: _shape_scene(kind="star")),
    Mutation("unknown colour", lambda s, r: _shape_scene(colour="mauve")),
    Mutation("objects None", lambda s, r: Scene(24, 24, None)),
    Mutation("objects strings", lambda s, r: Scene(24, 24, ("circle",))),
    Mutation("float width", lambda s, r: Scene(24.5, 24, s.objects)),
))

CASES = [
    Case("as_array", as_array, {"value": PIXELS}, {"value": IMAGE}),
    Case("image_sha256", image_sha256, {"value": PIXELS}, {"value": IMAGE}),
    Case("png_bytes", lambda value: as_array(png_bytes(value)), {"value": PIXELS},
         {"value": IMAGE}),
    Case("data_url", lambda value: as_array(data_url(value)), {"value": PIXELS},
         {"value": IMAGE}),
    Case("render_scene", lambda scene, noise, seed: _arr(render_scene(scene, noise=noise,
                                                                      seed=seed)),
         {"scene": SCENE, "noise": 2.0, "seed": 3}, {"scene": SCENES, "noise": NOISE,
                                                     "seed": SEED}),
    Case("scene_frames", lambda scene, n_frames: [_arr(f) for f in scene_frames(scene, n_frames)],
         {"scene": SCENE, "n_frames": 2}, {"scene": SCENES, "n_frames": INT(0, 10**6)}),
    Case("random_scene", lambda seed, size, n_objects: random_scene(seed, size=size,
                                                                    n_objects=n_objects),
         {"seed": 1, "size": 32, "n_objects": 2},
         {"seed": SEED, "size": SIZE, "n_objects": INT(-1, 2.5)}),
    Case("neutral_image", lambda seed, size, noise: _arr(neutral_image(seed, size=size,
                                                                       noise=noise)),
         {"seed": 2, "size": 8, "noise": 1.0}, {"seed": SEED, "size": SIZE, "noise": NOISE}),
    Case("neutral_images", lambda n: [_arr(i) for i in neutral_images(n, 0, size=4)], {"n": 2},
         {"n": INT(0, -1)}),
    Case("render_text", lambda text, font_size: _arr(render_text(text, font_size=font_size)),
         {"text": "hi", "font_size": 12},
         {"text": Kind("text", (Mutation("empty", lambda v, r: ""), Mutation("None", lambda v, r: None),
                                Mutation("two lines", lambda v, r: "a\nb"),
                                Mutation("list", lambda v, r: [v]))),
          "font_size": INT(3, 1000)}),
    Case("render_word_grid", lambda words: _arr(render_word_grid(words, grid=(2, 2), cell=(16, 32))),
         {"words": ["a", "b", "c"]}, {"words": WORDS}),
    Case("split_words", split_words, {"words": ["a", "b", "c"], "n_parts": 2},
         {"words": WORDS.without("a word with a space", "an empty word", "a newline"),
          "n_parts": INT(0, 4)}),
    Case("text_frames", lambda words, n_frames: [_arr(f) for f in text_frames(
        words, n_frames, grid=(1, 2), cell=(16, 32))], {"words": ["a", "b", "c"], "n_frames": 2},
         {"words": WORDS, "n_frames": INT(0, 4)}),
    Case("load_font", lambda font, size: load_font(font, size).getbbox("x"),
         {"font": "sans", "size": 12},
         {"font": Kind("font", (Mutation("unknown", lambda v, r: "comic"),
                                Mutation("missing file", lambda v, r: "/nonexistent/f.ttf"),
                                Mutation("None", lambda v, r: None),
                                Mutation("number", lambda v, r: 3))),
          "size": INT(3, 1000)}),
    Case("classification_set", lambda task, n, noise: classification_set(task, n, size=16,
                                                                         noise=noise),
         {"task": "shape", "n": 2, "noise": 0.0},
         {"task": Kind("task", (Mutation("unknown", lambda v, r: "texture"),
                                Mutation("None", lambda v, r: None),
                                Mutation("upper", lambda v, r: "SHAPE"))),
          "n": INT(0, -2), "noise": NOISE}),
]

test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


# ---------------------------------------------------------------------------- properties

arrays = st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(0, 2**16)).map(
    lambda t: np.random.default_rng(t[2]).integers(0, 256, (t[0], t[1], 3), dtype=np.uint8))


@SOME
@given(arrays)
def test_every_representation_has_the_same_pixels_and_hash(pixels):
    forms = [pixels, as_image(pixels), png_bytes(pixels), bytearray(png_bytes(pixels)),
             data_url(pixels)]
    assert all(is_image_like(f) for f in forms)
    digest = image_sha256(pixels)
    for f in forms:
        assert np.array_equal(as_array(f), pixels) and image_sha256(f) == digest
        assert png_bytes(f) == png_bytes(pixels)  # canonical: same pixels, same bytes
    grey = pixels[..., 0]
    assert np.array_equal(as_array(grey), np.repeat(grey[..., None], 3, -1))
    if pixels.size > 3:
        changed = pixels.copy()
        changed.flat[0] ^= 1
        assert image_sha256(changed) != digest


@given(st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=5),
                 st.lists(st.integers(), max_size=3),
                 st.sampled_from([np.zeros((2, 2), np.float32), np.zeros((2, 2, 2), np.uint8)])))
@SOME
def test_is_image_like_is_false_for_what_as_image_rejects_without_reading(value):
    if not is_image_like(value) and (not isinstance(value, str) or value.startswith("data:")):
        with pytest.raises(InputError):
            as_image(value)


@FEW
@given(st.integers(0, 2**16), st.sampled_from(["free", "grid"]))
def test_scenes_are_deterministic_and_draw_each_object_in_its_colour(seed, layout):
    kw = {"size": 48, "n_objects": (1, 3), "object_size": (10.0, 12.0), "layout": layout,
          "grid": (2, 2) if layout == "grid" else None}
    scene = random_scene(seed, **kw)
    assert scene == random_scene(seed, **kw) and 1 <= len(scene.objects) <= 3
    assert scene.count() == len(scene.objects)
    assert sum(scene.count(kind=k) for k in SHAPES) == len(scene.objects)
    assert sum(scene.count(colour=c) for c in COLOURS) == len(scene.objects)
    img = as_array(render_scene(scene, seed=seed))
    assert np.array_equal(img, as_array(render_scene(scene, seed=seed)))
    for o in scene.objects:  # the centre pixel has the object's colour
        assert np.array_equal(img[int(o.y), int(o.x)], COLOURS[o.colour]), o
        assert scene.position(o) in ("top left", "top right", "bottom left", "bottom right")
    caption = scene.caption()
    assert caption.count(" and ") == (len(scene.objects) > 1)
    assert all(f"{o.colour} {o.kind}" in caption for o in scene.objects)


@FEW
@given(st.integers(1, 4), st.integers(0, 2**16))
def test_scene_frames_keep_objects_on_the_canvas(n_frames, seed):
    frames = scene_frames(SCENE, n_frames, step=(1.0, 4.0), seed=seed)
    assert len(frames) == n_frames and all(f.size == (24, 24) for f in frames)
    again = scene_frames(SCENE, n_frames, step=(1.0, 4.0), seed=seed)
    assert all(np.array_equal(as_array(a), as_array(b)) for a, b in zip(frames, again, strict=True))


@SOME
@given(st.lists(st.text(alphabet="abc", min_size=1, max_size=3), max_size=12), st.integers(1, 6))
def test_split_words_keeps_order_and_balances_parts(words, n):
    if n > max(1, len(words)):
        with pytest.raises(InputError, match="parts"):
            split_words(words, n)
        return
    parts = split_words(words, n)
    assert len(parts) == n and [w for p in parts for w in p] == words
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


@FEW
@given(st.integers(1, 4), st.integers(0, 2**16))
def test_image_sets_extend_their_prefixes(k, seed):
    images = neutral_images(k + 1, seed, size=4)
    assert [image_sha256(i) for i in neutral_images(k, seed, size=4)] == \
        [image_sha256(i) for i in images[:k]]
    one = as_array(images[0])
    assert (one == one[0, 0]).all()  # a neutral image is one colour without noise
    small = classification_set("position", k, seed=seed, size=16)
    big = classification_set("position", k + 1, seed=seed, size=16)
    assert isinstance(big, ImageSet) and len(big) == k + 1 and big.classes == small.classes
    assert np.array_equal(big.images[:k], small.images) and np.array_equal(big.labels[:k],
                                                                           small.labels)
    assert big.labels.min() >= 0 and big.labels.max() < len(big.classes)


def test_fonts_load_and_text_fits_the_canvas():
    fonts = available_fonts()
    assert "default" in fonts and fonts["default"] is None
    for name, path in fonts.items():
        assert path is None or path.is_file()
        assert load_font(name, 12).getbbox("x")[2] > 0
    img = render_text("hello", size=(40, 12), jitter=2, seed=1)
    assert img.size == (40, 12)
    ink = as_array(img).min(-1) < 128
    assert ink.any() and not ink.all()
    grid = render_word_grid(["ab", "cd"], grid=(1, 2), cell=(16, 32), noise=0.0, seed=4)
    assert grid.size == (64, 16)
    assert np.array_equal(as_array(grid), as_array(render_word_grid(
        ["ab", "cd"], grid=(1, 2), cell=(16, 32), noise=0.0, seed=4)))
