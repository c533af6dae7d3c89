"""The synthetic image generator: same seed, same bytes; scenes say what they show."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from trustlab.core.errors import InputError
from trustlab.vision import (
    COLOURS,
    SHAPES,
    Scene,
    Shape,
    as_array,
    as_image,
    available_fonts,
    classification_set,
    data_url,
    image_sha256,
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

WORDS = ["How", "do", "I", "bake", "bread", "at", "home", "?"]


def _digest(images) -> str:
    h = hashlib.sha256()
    for img in images if isinstance(images, list) else [images]:
        h.update(np.asarray(img).tobytes())
    return h.hexdigest()


MAKERS = {
    "scene": lambda seed: render_scene(
        random_scene(seed, n_objects=(2, 4)), noise=(2.0, 6.0), seed=seed
    ),
    "grid_scene": lambda seed: render_scene(
        random_scene(
            seed, size=(384, 64), layout="grid", grid=(4, 6), n_objects=(2, 6), object_size=(10, 13)
        ),
        seed=seed,
    ),
    "text": lambda seed: render_text(
        "Hello there",
        font="serif",
        font_size=14,
        size=(96, 32),
        rotation=8.0,
        noise=(0.0, 5.0),
        jitter=3,
        seed=seed,
    ),
    "word_grid": lambda seed: render_word_grid(WORDS, seed=seed),
    "text_frames": lambda seed: text_frames(WORDS, 3, seed=seed),
    "scene_frames": lambda seed: scene_frames(
        random_scene(seed, n_objects=3), 4, noise=2.0, seed=seed
    ),
    "neutral": lambda seed: neutral_images(3, seed, noise=2.0),
}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_same_seed_same_bytes_and_other_seeds_differ(kind):
    make = MAKERS[kind]
    first, again, other = make(11), make(11), make(12)
    assert _digest(first) == _digest(again)
    assert _digest(first) != _digest(other)
    imgs = first if isinstance(first, list) else [first]
    assert [png_bytes(i) for i in imgs] == [
        png_bytes(i) for i in (again if isinstance(again, list) else [again])
    ]


def test_classification_sets_are_deterministic_prefix_stable_and_balanced_enough():
    a = classification_set("shape", 40, seed=3)
    b = classification_set("shape", 60, seed=3)
    assert a.images.dtype == np.uint8 and a.images.shape == (40, 32, 32, 3)
    np.testing.assert_array_equal(a.images, b.images[:40])
    np.testing.assert_array_equal(a.labels, b.labels[:40])
    assert not np.array_equal(a.images, classification_set("shape", 40, seed=4).images)
    for task in ("shape", "colour", "count", "position"):
        s = classification_set(task, 200, seed=0)
        counts = np.bincount(s.labels, minlength=len(s.classes))
        assert counts.min() > 0.5 * 200 / len(s.classes), (task, counts)


def test_shape_labels_match_what_is_drawn():
    # the dominant non-background colour of a 'colour' item is the labelled colour
    s = classification_set("colour", 30, seed=1, noise=0.0)
    palette = np.array(list(COLOURS.values()), dtype=float)
    for img, label in zip(s.images, s.labels, strict=True):
        px = img.reshape(-1, 3).astype(float)
        sat = px.max(1) - px.min(1)
        fg = px[sat > 80]
        nearest = np.argmin(((fg[:, None, :] - palette[None]) ** 2).sum(-1), 1)
        assert np.bincount(nearest, minlength=len(palette)).argmax() == label


def test_count_and_position_labels():
    from scipy import ndimage

    counts = classification_set("count", 20, seed=2, noise=0.0)
    for img, label in zip(counts.images, counts.labels, strict=True):
        px = img.astype(float)
        _, n_blobs = ndimage.label((px.max(-1) - px.min(-1)) > 80)
        assert n_blobs == label + 1
    pos = classification_set("position", 20, seed=2, noise=0.0)
    for img, label in zip(pos.images, pos.labels, strict=True):
        px = img.astype(float)
        ink = (px.max(-1) - px.min(-1)) > 80
        ys, xs = np.nonzero(ink)
        quadrant = int(ys.mean() >= 16) * 2 + int(xs.mean() >= 16)
        assert quadrant == label


def test_free_scene_objects_do_not_overlap_and_stay_inside():
    for seed in range(20):
        s = random_scene(seed, size=64, n_objects=(1, 4))
        for o in s.objects:
            assert o.kind in SHAPES and o.colour in COLOURS
            assert o.size / 2 <= o.x <= 64 - o.size / 2 and o.size / 2 <= o.y <= 64 - o.size / 2
        for i, a in enumerate(s.objects):
            for b in s.objects[i + 1 :]:
                assert math.hypot(a.x - b.x, a.y - b.y) > (a.size + b.size) / 2


def test_grid_scene_puts_one_object_per_cell_inside_it():
    s = random_scene(
        4, size=(384, 64), layout="grid", grid=(4, 6), n_objects=6, object_size=(10, 13)
    )
    cells = [o.cell for o in s.objects]
    assert len(set(cells)) == 6 and s.grid == (4, 6)
    for o in s.objects:
        row, col = divmod(o.cell, 6)
        assert col * 64 <= o.x - o.size / 2 and o.x + o.size / 2 <= (col + 1) * 64
        assert row * 16 <= o.y - o.size / 2 and o.y + o.size / 2 <= (row + 1) * 16
    assert s.ordered() == sorted(s.objects, key=lambda o: o.cell)


def test_caption_count_and_position():
    scene = Scene(
        64,
        64,
        (
            Shape("circle", "red", 10, 10, 8),
            Shape("square", "orange", 50, 50, 8),
            Shape("circle", "blue", 50, 12, 8),
        ),
    )
    assert scene.caption() == "a red circle, a blue circle and an orange square"
    assert scene.count("circle") == 2 and scene.count(colour="orange") == 1 and scene.count() == 3
    assert scene.position(scene.objects[0]) == "top left"
    assert scene.position(scene.objects[1]) == "bottom right"
    assert Scene(8, 8, ()).caption() == "nothing"


def test_rendered_scene_shows_the_objects_in_their_colours():
    scene = Scene(
        40, 20, (Shape("square", "blue", 10, 10, 10), Shape("circle", "yellow", 30, 10, 10))
    )
    arr = np.asarray(render_scene(scene))
    assert tuple(arr[10, 10]) == COLOURS["blue"] and tuple(arr[10, 30]) == COLOURS["yellow"]
    assert tuple(arr[0, 20]) == (255, 255, 255)


def test_word_grid_keeps_empty_cells_blank_and_fills_cells_in_reading_order():
    img = as_array(
        render_word_grid(
            ["stone", "river"], grid=(2, 3), cell=(16, 64), noise=0.0, rotation=0.0, seed=0
        )
    )
    assert img.shape == (32, 192, 3)
    cells = [img[r * 16 : (r + 1) * 16, c * 64 : (c + 1) * 64] for r in range(2) for c in range(3)]
    blank = [bool((c == c[0, 0]).all()) for c in cells]
    assert blank == [False, False, True, True, True, True]
    with pytest.raises(InputError, match="do not fit"):
        render_word_grid(["w"] * 7, grid=(2, 3))
    with pytest.raises(InputError, match="one word per entry"):
        render_word_grid(["two words"])


def test_text_frames_split_the_words_over_frames():
    assert split_words(list("abcdefg"), 3) == [list("abc"), list("de"), list("fg")]
    frames = text_frames(WORDS, 2, seed=0)
    assert len(frames) == 2 and all(f.size == (384, 64) for f in frames)
    with pytest.raises(InputError):
        split_words(["a"], 2)


def test_scene_frames_move_objects_and_keep_the_canvas():
    scene = random_scene(1, size=48, n_objects=2, object_size=8)
    frames = scene_frames(scene, 5, step=3.0, seed=1)
    assert len(frames) == 5 and all(f.size == (48, 48) for f in frames)
    assert len({_digest(f) for f in frames}) == 5


def test_neutral_images_are_single_colour_fields_and_prefix_stable():
    img = as_array(neutral_image(5, size=(20, 10)))
    assert img.shape == (10, 20, 3) and (img == img[0, 0]).all()
    a, b = neutral_images(3, 7), neutral_images(5, 7)
    assert [_digest(x) for x in a] == [_digest(x) for x in b[:3]]
    assert len({tuple(as_array(x)[0, 0]) for x in b}) == 5


def test_every_named_font_renders_ascii():
    fonts = available_fonts()
    assert {"sans", "serif", "mono", "default"} <= set(fonts)
    for name in fonts:
        arr = as_array(render_text("Quick brown fox 123 ?", font=name, font_size=14))
        assert (arr < 128).any(), name


def test_image_conversions_round_trip_and_hash_by_pixels(tmp_path):
    img = render_scene(random_scene(2), seed=2)
    arr = as_array(img)
    path = tmp_path / "x.png"
    path.write_bytes(png_bytes(img))
    key = image_sha256(img)
    for form in (arr, png_bytes(img), data_url(img), path, str(path)):
        assert image_sha256(form) == key
        np.testing.assert_array_equal(as_array(form), arr)
    gray = as_image(arr[..., 0])
    assert gray.mode == "RGB"
    for bad in (
        arr.astype(np.float32),
        b"not an image",
        "data:image/png;base64,@@",
        3,
        tmp_path / "no.png",
    ):
        with pytest.raises(InputError, match="'image'"):
            as_image(bad)


@pytest.mark.parametrize(
    "call",
    [
        lambda: random_scene(-1),
        lambda: random_scene(0, kinds=["hexagon"]),
        lambda: random_scene(0, layout="spiral"),
        lambda: random_scene(0, n_objects=40, size=16),
        lambda: render_text(""),
        lambda: render_text("a\nb"),
        lambda: render_text("x", font="comic"),
        lambda: render_text("x", font_size=2),
        lambda: render_word_grid(["a"], font_size=(14, 10)),
        lambda: classification_set("texture", 4),
        lambda: neutral_images(0),
        lambda: render_scene("scene"),
    ],
)
def test_bad_arguments_are_input_errors_naming_the_parameter(call):
    with pytest.raises(InputError, match="'"):
        call()
