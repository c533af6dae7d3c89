"""Images for the multimodal methods: a deterministic synthetic generator and image conversions.

No photo set or vision model can be downloaded here, so trustlab generates its images: scenes of
coloured shapes (counts, positions, captions), rendered text in the fonts matplotlib ships (one
word per cell for the vision-language organisms, or free lines with sizes, rotations and noise),
frame sequences (a video as N frames), neutral random-colour fields (re-centering) and small
classification sets (the ViT organism). Same seed, same bytes. Only numpy and Pillow are needed.

    from trustlab.vision import random_scene, render_scene, render_word_grid, neutral_images
    img = render_scene(random_scene(seed=0, n_objects=3), noise=4.0, seed=0)

See ``docs/vision.md``.
"""

from trustlab.vision.fonts import FONT_FILES, available_fonts, load_font
from trustlab.vision.generator import (
    CLASSIFICATION_TASKS,
    COLOURS,
    SHAPES,
    ImageSet,
    Scene,
    Shape,
    classification_set,
    neutral_image,
    neutral_images,
    random_scene,
    render_scene,
    render_text,
    render_word_grid,
    scene_frames,
    split_words,
    text_frames,
)
from trustlab.vision.images import (
    as_array,
    as_image,
    data_url,
    image_sha256,
    is_image_like,
    png_bytes,
)

__all__ = [
    "CLASSIFICATION_TASKS",
    "COLOURS",
    "FONT_FILES",
    "SHAPES",
    "ImageSet",
    "Scene",
    "Shape",
    "as_array",
    "as_image",
    "available_fonts",
    "classification_set",
    "data_url",
    "image_sha256",
    "is_image_like",
    "load_font",
    "neutral_image",
    "neutral_images",
    "png_bytes",
    "random_scene",
    "render_scene",
    "render_text",
    "render_word_grid",
    "scene_frames",
    "split_words",
    "text_frames",
]
