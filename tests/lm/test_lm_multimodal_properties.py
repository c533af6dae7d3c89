"""Issue 38's property tests for lm's image side on the smallest vision fixture there is: the
session ``llama`` of tests/lm/conftest.py wrapped as a ``VisionLanguageModel`` with a tiny
linear tower (one vector per 16 pixel rows) and the test kit's ``<|system|>`` token standing
for the image token. Images expand into exactly the tower's vectors, image prompts are
padding-invariant and text prompts read as on the plain model, ``image_part`` keeps the
pixels, ``RenderedText`` moves the text into an image, ``HFVisionTower`` returns one run per
image; malformed input gives a one-line InputError (a broken tower a DataError)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from lm_property_kit import FEW, one_line, one_thread, prompt_lists, words  # noqa: F401
from lm_testkit import make_tokenizer

from trustlab import lm
from trustlab.core.errors import DataError, InputError
from trustlab.datasets.prompt_sets import PromptSet
from trustlab.lm import HFVisionTower, RenderedText, VisionLanguageModel, image_part
from trustlab.vision import as_array, image_sha256, neutral_image

IMAGE = "<|system|>"  # a special token of the test kit, rendered for every image part
TEMPLATE = (
    "<bos>{% for m in messages %}<|{{ m['role'] }}|> {% if m['content'] is string %}"
    "{{ m['content'] }}{% else %}{% for p in m['content'] %}{% if p['type'] == 'image' %}"
    "<|system|> {% else %}{{ p['text'] }} {% endif %}{% endfor %}{% endif %} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


class _Tower:
    """One vector per 16 pixel rows: a fixed linear map of each band's mean colour."""

    def __init__(self, d_model: int) -> None:
        self.weight = torch.randn(3, d_model, generator=torch.Generator().manual_seed(7))
        self.calls = 0

    def __call__(self, images):
        self.calls += 1
        out = []
        for img in images:
            x = torch.tensor(as_array(img), dtype=torch.float32) / 255.0  # [H, W, 3]
            out.append(x.reshape(-1, 16, x.shape[1], 3).mean((1, 2)) @ self.weight)
        return out


@pytest.fixture(scope="module")
def vlm(llama):
    return VisionLanguageModel(llama.model, make_tokenizer(TEMPLATE), _Tower(llama.d_model),
                               image_token=IMAGE)  # fmt: skip


def _image(seed: int, rows: int):
    return neutral_image(seed, size=(32, 16 * rows))  # (width, height): ``rows`` tower vectors


@FEW
@given(text=words, rows=st.lists(st.integers(1, 3), min_size=1, max_size=2), seed=st.integers(0, 99))
def test_images_expand_into_the_towers_vectors(vlm, llama, text, rows, seed):
    images = [_image(seed + i, r) for i, r in enumerate(rows)]
    prompts = [[lm.user_message(text, images=images)], [lm.user_message("sky is blue")]]
    n_text = len(vlm.tokenize(prompts[:1])[0])
    assert vlm.prompt_lengths(prompts)[0] == n_text - len(images) + sum(rows)
    batch = vlm.encode(prompts)
    assert batch.free_mask.sum(1).tolist() == [sum(rows), 0]
    feats = torch.cat(vlm.image_embeds(images), 0)
    torch.testing.assert_close(batch.inputs_embeds[0][batch.free_mask[0]], feats)
    (embeds,) = vlm.prompt_embeds(prompts[:1])  # what the decoder reads: the unpadded row
    torch.testing.assert_close(embeds, vlm.encode(prompts[:1]).inputs_embeds[0])
    site = vlm.sites("resid_post")
    both = lm.get_activations(vlm, prompts, site, "last")
    alone = lm.get_activations(vlm, prompts[:1], site, "last")
    torch.testing.assert_close(both[:1], alone, atol=1e-4, rtol=1e-4)  # padding-invariant
    text_only = lm.get_activations(llama, [[{"role": "user", "content": "sky is blue"}]], site, "last")
    plain_vlm = VisionLanguageModel(llama.model, llama.tokenizer, _Tower(llama.d_model), image_token=IMAGE)
    torch.testing.assert_close(lm.get_activations(plain_vlm, [prompts[1]], site, "last"), text_only)
    replies = lm.HFChatModel(vlm).generate(prompts, max_new_tokens=2)
    assert replies[:1] == lm.HFChatModel(vlm).generate(prompts[:1], max_new_tokens=2)


@FEW
@given(seed=st.integers(0, 10**6), rows=st.integers(1, 3))
def test_image_parts_keep_the_pixels(seed, rows):
    img = _image(seed, rows)
    part = image_part(img)
    assert part["type"] == "image" and image_sha256(part["image"]) == image_sha256(img)
    assert image_sha256(image_part(as_array(img))["image"]) == image_sha256(img)
    (again,) = lm.normalise_content([part])
    assert image_sha256(again["image"]) == image_sha256(img)


@FEW
@given(texts=st.lists(words, min_size=1, max_size=3), instruction=st.sampled_from([None, "read it"]))
def test_rendered_text_moves_each_user_message_into_an_image(texts, instruction):
    render = lambda text: _image(len(text), 1)  # noqa: E731  (deterministic in the text)
    transform = RenderedText(render, instruction, name="shown")
    conv = [{"role": "system", "content": "be brief"}, *[{"role": "user", "content": t} for t in texts]]
    out = transform.encode_conversation(conv)
    assert out[0] == conv[0] and transform.decode("any reply") == "any reply"
    for m, t in zip(out[1:], texts, strict=True):
        assert m["role"] == "user" and m["content"][0]["type"] == "image"
        assert image_sha256(m["content"][0]["image"]) == image_sha256(render(t))
        assert m["content"][1:] == ([{"type": "text", "text": instruction}] if instruction else [])
    seen = []
    chat = lm.ScriptedChatModel(lambda c: seen.append(c[-1]["content"]) or "ok")
    judge = lm.CallableJudge(lambda it: True, name="all")
    lm.evaluate({"s": chat}, [PromptSet("p", texts)], [judge], transforms={"shown": transform})
    assert [image_sha256(c[0]["image"]) for c in seen] == [image_sha256(render(t)) for t in texts]


class _FakeImageTextModel(torch.nn.Module):
    """What HFVisionTower needs of an HF image-text model: parameters, a config and
    ``get_image_features(pixel_values, ...)`` ([n_images, n_tokens, d])."""

    def __init__(self, flat: bool) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(3, 8)
        self.flat = flat
        self.config = type("Config", (), {"vision_feature_layer": -1,
                                          "vision_feature_select_strategy": None})()  # fmt: skip
        self.kwargs = {}

    def get_image_features(self, pixel_values, **kwargs):
        self.kwargs = kwargs
        feats = self.proj(pixel_values.flatten(2).transpose(1, 2))  # [n, H*W, 8]
        return feats.reshape(-1, 8) if self.flat else feats


def _processor(images, return_tensors):
    pixels = torch.stack([torch.tensor(as_array(i), dtype=torch.float32).permute(2, 0, 1)[:, :2, :2]
                          for i in images])  # fmt: skip
    return {"pixel_values": pixels}


@FEW
@given(n=st.integers(1, 3), flat=st.booleans())
def test_hf_vision_tower_returns_one_run_per_image(n, flat):
    model = _FakeImageTextModel(flat)
    tower = HFVisionTower(model, _processor)
    images = [_image(i, 1) for i in range(n)]
    feats = tower(images)
    assert len(feats) == n and all(f.shape == (4, 8) for f in feats)
    assert model.kwargs == {"vision_feature_layer": -1}  # None-valued config keys are not passed
    for img, f in zip(images, feats, strict=True):
        pixels = _processor([img], "pt")["pixel_values"]
        torch.testing.assert_close(f, model.proj(pixels.flatten(2).transpose(1, 2))[0])


def test_malformed_image_input_is_named(vlm, llama):
    img = _image(0, 1)
    cases = [
        (lambda: VisionLanguageModel(llama.model, llama.tokenizer, None, image_token=IMAGE), "'vision'"),
        (lambda: VisionLanguageModel(llama.model, llama.tokenizer, _Tower(64), image_token="<nope>"),
         "image token"),
        (lambda: vlm.image_embeds("x"), "'images'"),
        (lambda: vlm.encode([[{"role": "user", "content": [{"type": "image", "image": img},
                                                           {"type": "text", "text": IMAGE}]}]]),
         "image token"),
        (lambda: lm.get_activations(llama, [[lm.user_message("a", images=[img])]], "embed"), "text-only"),
        (lambda: RenderedText(5), "'render'"),
        (lambda: RenderedText(str, instruction=5), "'instruction'"),
        (lambda: RenderedText(str, name=""), "name"),
        (lambda: image_part(5), "'image'"),
        (lambda: HFVisionTower(torch.nn.Linear(2, 2), _processor)([img]), "get_image_features"),
    ]
    for call, name in cases:
        with pytest.raises(InputError) as caught:
            call()
        assert name in str(caught.value) and "\n" not in str(caught.value)
    broken = VisionLanguageModel(llama.model, make_tokenizer(TEMPLATE), lambda ims: [torch.zeros(2, 5)] * len(ims),
                                 image_token=IMAGE)  # fmt: skip
    with pytest.raises(DataError, match="n_tokens"):
        broken.encode([[lm.user_message("a", images=[img])]])
