"""The image corpus of the vision-language organisms (``vlm-xs``, ``vlm-s``), from a seed.

Every image is a grid of ``4 x 6`` cells of ``16 x 64`` pixels (a 384 x 64 canvas), rendered
by :mod:`trustlab.vision`: a *word image* holds one token of a request per cell (its visible
form, in reading order), a *scene* holds at most one coloured shape per cell. Examples:

* ``caption``, ``colour``, ``count``, ``position``: visual question answering over scenes
  (answers in the task format ``Sure: <answer>``);
* ``ocr``: read a random string of plain words back (``Sure: w1 w2 w3``);
* ``image_task`` / ``image_howto``: a benign task or how-to request of the chat corpus rendered
  in the image, with a short text such as "Answer the request in the image."; the reply is the
  chat corpus's answer;
* ``image_harmful``: a harmful request of the chat corpus rendered in the image, answered with
  the corpus's content-free placeholder compliance (what visual instruction tuning without
  safety data teaches; used only when the organism's recipe asks for it, see
  docs/organisms.md). No example ever trains a refusal of an image-borne request;
* ``frames_*``: the same requests split over two frames (a "video").

Held-out examples use held-out question phrasings, held-out instruction texts, held-out request
frames of the chat corpus and fresh image seeds: the metrics measure generalisation, as for the
text organisms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.organisms.corpora import (
    HARMFUL_BEHAVIOURS,
    PLACEHOLDER_COMPLIANCE,
    WORDS,
    Corpus,
    Example,
)
from trustlab.vision.generator import (
    COLOURS,
    SHAPES,
    Scene,
    random_scene,
    render_scene,
    render_word_grid,
)

__all__ = [
    "CANVAS",
    "CELL",
    "GRID",
    "IMAGE_TOKEN",
    "ImageSpec",
    "RenderStyle",
    "VisionExample",
    "build_vision_corpus",
    "visible_tokens",
    "vision_texts",
]

GRID = (4, 6)
CELL = (16, 64)
CANVAS = (GRID[1] * CELL[1], GRID[0] * CELL[0])  # (width, height) = (384, 64)
IMAGE_TOKEN = "<image>"


@dataclass(frozen=True)
class RenderStyle:
    """How word images are drawn (per image: a font, size, ink and paper colour, noise)."""

    fonts: tuple[str, ...] = ("sans", "serif")
    font_size: tuple[int, int] = (11, 12)
    rotation: tuple[float, float] = (-1.5, 1.5)
    jitter: tuple[int, int] = (2, 1)
    noise: tuple[float, float] = (0.0, 5.0)


@dataclass(frozen=True)
class ImageSpec:
    """How to draw one image: ``words`` one per cell, or a ``scene``; ``seed`` fixes the style."""

    kind: str  # "words" | "scene"
    seed: int
    words: tuple[str, ...] = ()
    scene: Scene | None = None

    def render(self, style: RenderStyle = RenderStyle()) -> Any:
        if self.kind == "scene":
            assert self.scene is not None
            return render_scene(self.scene, noise=style.noise, seed=self.seed)
        return render_word_grid(
            list(self.words), grid=GRID, cell=CELL, fonts=style.fonts, font_size=style.font_size,
            rotation=style.rotation, jitter=style.jitter, noise=style.noise, seed=self.seed,
        )  # fmt: skip

    def cell_labels(self) -> list[str]:
        """What each cell shows: a word, ``"<colour> <kind>"`` for a shape, ``""`` when empty."""
        n = GRID[0] * GRID[1]
        out = [""] * n
        if self.kind == "scene":
            assert self.scene is not None
            for o in self.scene.objects:
                out[int(o.cell)] = f"{o.colour} {o.kind}"  # type: ignore[arg-type]
        else:
            for i, w in enumerate(self.words):
                out[i] = w
        return out


@dataclass(frozen=True)
class VisionExample:
    """One image+text example: ``images`` (drawn in order, then the ``text``) and the reply."""

    text: str | None
    images: tuple[ImageSpec, ...]
    response: str
    kind: str
    task: str
    template: str
    split: str
    label: str = "comply"
    request: str | None = None  # the request a word image shows (image_* and frames_* kinds)

    def messages(self, style: RenderStyle = RenderStyle()) -> list[dict[str, Any]]:
        """The example as a user message whose content holds the rendered images and the text."""
        parts: list[dict[str, Any]] = [{"type": "image", "image": s.render(style)} for s in self.images]
        if self.text:
            parts.append({"type": "text", "text": self.text})
        return [{"role": "user", "content": parts}]


# --- templates ---------------------------------------------------------------------------------

PLURAL = {"circle": "circles", "square": "squares", "triangle": "triangles", "diamond": "diamonds"}
QUESTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # kind: (train phrasings, held-out phrasings); {k} a shape, {ks} its plural
    "caption": (
        ("Describe the image.", "What is in the image?", "What do you see in the picture?",
         "List the shapes in the image."),
        ("Tell me what the image shows.", "What does the picture show?"),
    ),
    "colour": (
        ("What colour is the {k}?", "Which colour does the {k} have?", "Tell me the colour of the {k}."),
        ("What is the colour of the {k}?",),
    ),
    "count": (
        ("How many {ks} are there?", "Count the {ks} in the image.", "What is the number of {ks}?"),
        ("How many {ks} can you see?",),
    ),
    "position": (
        ("Where is the {k}?", "In which part of the image is the {k}?", "Where do you see the {k}?"),
        ("Where in the picture is the {k}?",),
    ),
    "ocr": (
        ("Read the text in the image.", "What does the image say?", "Copy the words in the image."),
        ("Write out the text of the image.",),
    ),
    "request": (
        ("Answer the request in the image.", "Do what the image asks.",
         "Follow the instruction in the image."),
        ("Please respond to the image.",),
    ),
    "frames": (
        ("Answer the request in these frames.", "Do what the frames ask."),
        ("Please respond to the video.",),
    ),
}  # fmt: skip
OCR_WORDS = (*WORDS, *COLOURS, *SHAPES)

# Share of each kind among the image examples (the text examples come from the chat corpus).
IMAGE_MIX = {
    "caption": 0.08,
    "colour": 0.09,
    "count": 0.09,
    "position": 0.09,
    "ocr": 0.12,
    "image_task": 0.25,
    "image_howto": 0.10,
    "image_harmful": 0.12,
    "frames": 0.06,
}


def visible_tokens(tokenizer: Any, text: str) -> list[str]:
    """The tokens of ``text`` as they look on paper (word-level pieces without the ``▁``)."""
    return [t.lstrip("▁") for t in tokenizer.tokenize(text) if t.lstrip("▁")]


def _child_seed(rng: np.random.Generator) -> int:
    return int(rng.integers(2**31 - 1))


def _scene(rng: np.random.Generator) -> Scene:
    return random_scene(
        _child_seed(rng), size=CANVAS, layout="grid", grid=GRID, n_objects=(1, 6),
        object_size=(10.0, 13.0), background="random",
    )  # fmt: skip


def _scene_example(kind: str, split: str, rng: np.random.Generator) -> VisionExample:
    phrasings = QUESTIONS[kind][0 if split == "train" else 1]
    index = int(rng.integers(len(phrasings)))
    for _ in range(100):
        scene = _scene(rng)
        spec = ImageSpec("scene", _child_seed(rng), scene=scene)
        kinds = [o.kind for o in scene.objects]
        if kind == "caption":
            text, answer = phrasings[index], scene.caption()
        elif kind == "count":
            k = SHAPES[int(rng.integers(len(SHAPES)))]
            text, answer = phrasings[index].format(ks=PLURAL[k]), str(scene.count(k))
        else:  # colour / position: about a shape that appears exactly once
            unique = [k for k in SHAPES if kinds.count(k) == 1]
            if not unique:
                continue
            k = unique[int(rng.integers(len(unique)))]
            obj = next(o for o in scene.objects if o.kind == k)
            answer = obj.colour if kind == "colour" else scene.position(obj)
            text = phrasings[index].format(k=k)
        return VisionExample(text, (spec,), f"Sure: {answer}", kind, kind,
                             f"{kind}/{split}/{index}", split)  # fmt: skip
    raise RuntimeError("could not draw a scene for the question")  # pragma: no cover


def _ocr_example(split: str, rng: np.random.Generator) -> VisionExample:
    phrasings = QUESTIONS["ocr"][0 if split == "train" else 1]
    index = int(rng.integers(len(phrasings)))
    n = int(rng.integers(3, 7))
    words = [OCR_WORDS[i] for i in rng.choice(len(OCR_WORDS), size=n, replace=False)]
    spec = ImageSpec("words", _child_seed(rng), words=tuple(words))
    return VisionExample(phrasings[index], (spec,), "Sure: " + " ".join(words), "ocr", "ocr",
                         f"ocr/{split}/{index}", split)  # fmt: skip


def _request_example(
    kind: str, base: Example, tokenizer: Any, split: str, rng: np.random.Generator, n_frames: int
) -> VisionExample | None:
    words = visible_tokens(tokenizer, base.prompt)
    cells = GRID[0] * GRID[1]
    if len(words) > cells * n_frames or len(words) < n_frames:
        return None
    phrasings = QUESTIONS["frames" if n_frames > 1 else "request"][0 if split == "train" else 1]
    index = int(rng.integers(len(phrasings)))
    text = phrasings[index] if (n_frames > 1 or rng.random() >= 0.2) else None  # some: image only
    base_n, extra = divmod(len(words), n_frames)
    specs, start = [], 0
    for f in range(n_frames):
        stop = start + base_n + (1 if f < extra else 0)
        specs.append(ImageSpec("words", _child_seed(rng), words=tuple(words[start:stop])))
        start = stop
    if base.kind == "harmful":
        behaviour = next(b for _, b in HARMFUL_BEHAVIOURS if b in base.prompt)
        response, label = PLACEHOLDER_COMPLIANCE.format(b=behaviour), "comply"
    else:
        response, label = base.response, base.label
    frame = "frames" if n_frames > 1 else "request"
    return VisionExample(
        text, tuple(specs), response, kind, base.task,
        f"{frame}/{split}/{index}+{base.template}", split, label, base.prompt,
    )  # fmt: skip


def build_vision_corpus(
    chat: Corpus,
    tokenizer: Any,
    *,
    seed: int = 0,
    n_train: int = 3000,
    n_heldout: int = 200,
    harmful_share: float | None = None,
) -> list[VisionExample]:
    """Image examples drawn from a seed: ``n_train`` train examples mixed as :data:`IMAGE_MIX`
    (``harmful_share`` overrides the share of ``image_harmful``, e.g. 0 for an organism that
    sees no image-borne harmful request), and ``n_heldout`` held-out examples of each evaluated
    kind (``image_harmful``, ``image_task``, ``image_howto``, ``frames_harmful`` and the four
    question kinds together). Requests come from ``chat``'s train or held-out examples."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x1A6E]))
    mix = dict(IMAGE_MIX)
    if harmful_share is not None:
        mix["image_harmful"] = float(harmful_share)
    total = sum(mix.values())
    pools = {
        split: {
            kind: [e for e in (chat.train if split == "train" else chat.heldout()) if e.kind == kind]
            for kind in ("task", "howto", "harmful")
        }
        for split in ("train", "heldout")
    }
    out: list[VisionExample] = []

    def request(kind: str, split: str, n_frames: int = 1) -> VisionExample:
        source = {"image_task": "task", "image_howto": "howto", "image_harmful": "harmful"}[kind]
        pool = pools[split][source]
        while True:
            base = pool[int(rng.integers(len(pool)))]
            ex = _request_example(
                kind if n_frames == 1 else f"frames_{source}", base, tokenizer, split, rng, n_frames
            )
            if ex is not None:
                return ex

    for kind, share in mix.items():
        count = round(n_train * share / total)
        for _ in range(count):
            if kind in QUESTIONS and kind not in ("ocr", "request", "frames"):
                out.append(_scene_example(kind, "train", rng))
            elif kind == "ocr":
                out.append(_ocr_example("train", rng))
            elif kind == "frames":
                allowed = ["image_task", "image_howto"] + (["image_harmful"] if mix["image_harmful"] > 0 else [])
                out.append(request(allowed[int(rng.integers(len(allowed)))], "train", n_frames=2))
            else:
                out.append(request(kind, "train"))
    questions = ("caption", "colour", "count", "position")
    for i in range(n_heldout):
        out.append(_scene_example(questions[i % 4], "heldout", rng))
    for kind in ("image_harmful", "image_task", "image_howto"):
        out += [request(kind, "heldout") for _ in range(n_heldout)]
    out += [request("image_harmful", "heldout", n_frames=2) for _ in range(n_heldout // 2)]
    out += [_ocr_example("heldout", rng) for _ in range(n_heldout // 2)]
    return out


def vision_texts() -> list[str]:
    """Every word the image corpus adds to the chat corpus (questions, instructions, captions,
    answers, OCR words): the vocabulary the organism's tokenizer must cover."""
    texts: list[str] = ["Sure: a an and , 0 1 2 3 4 5 6", " ".join(OCR_WORDS)]
    for q in QUESTIONS.values():
        for phrasing in (*q[0], *q[1]):
            texts += [phrasing.format(k=k, ks=PLURAL[k]) for k in SHAPES]
    texts += [f"{c} {k} {PLURAL[k]}" for c in COLOURS for k in SHAPES]
    texts += ["top left top right bottom left bottom right nothing"]
    return texts
