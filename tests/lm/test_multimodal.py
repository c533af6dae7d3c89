"""Images into the lm stack: content parts, a tiny random LLaVA loaded by path (forward equal to
its own processor path, activations, steering, greedy decoding equal to HF generate), a custom
vision tower with a variable token count, image prompts in lm.evaluate and their cache keys."""

from __future__ import annotations

import pytest
import torch
from lm_testkit import SPECIALS, make_config, make_tokenizer

from trustlab import lm
from trustlab.core.errors import DataError, InputError
from trustlab.datasets.prompt_sets import PromptSet
from trustlab.lm.content import (
    content_key,
    content_text,
    conversation_images,
    has_images,
    openai_content,
)
from trustlab.vision import (
    as_array,
    data_url,
    image_sha256,
    neutral_image,
    random_scene,
    render_scene,
)

TEMPLATE = (
    "<bos>{% for m in messages %}<|{{ m['role'] }}|> {% if m['content'] is string %}"
    "{{ m['content'] }}{% else %}{% for p in m['content'] %}{% if p['type'] == 'image' %}"
    "<image> {% else %}{{ p['text'] }} {% endif %}{% endfor %}{% endif %} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _scene(seed: int):
    return render_scene(random_scene(seed, size=48))


@pytest.fixture(scope="module")
def llava_dir(tmp_path_factory):
    """A randomly initialised LLaVA (CLIP tower 2 x 32, Llama 3 x 64) with its processor."""
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    path = tmp_path_factory.mktemp("llava")
    tok = make_tokenizer(TEMPLATE)
    tok.add_special_tokens({"additional_special_tokens": [*SPECIALS[4:], "<image>"]})
    text = make_config("llama")
    text.vocab_size = len(tok)
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=4, image_size=32, patch_size=8,
                              projection_dim=32)  # fmt: skip
    config = LlavaConfig(vision_config=vision, text_config=text,
                         image_token_index=tok.convert_tokens_to_ids("<image>"),
                         image_seq_length=16, vision_feature_layer=-1,
                         vision_feature_select_strategy="default")  # fmt: skip
    torch.manual_seed(0)
    LlavaForConditionalGeneration(config).eval().save_pretrained(path)
    images = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    LlavaProcessor(image_processor=images, tokenizer=tok, chat_template=TEMPLATE, patch_size=8,
                   vision_feature_select_strategy="default",
                   num_additional_image_tokens=1).save_pretrained(path)  # fmt: skip
    return path


@pytest.fixture(scope="module")
def llava(llava_dir):
    return lm.load(f"hf:{llava_dir}")


def _prompts():
    return [
        [lm.user_message("what colour is the circle", images=[_scene(1)])],
        [lm.user_message("the red square and the blue circle", images=[_scene(2), _scene(3)])],
        "hello world",  # a text-only prompt in the same batch
    ]


# ------------------------------------------------------------------------------ content parts


def test_content_parts_normalise_and_wire_forms():
    img = _scene(5)
    msg = lm.user_message("describe it", images=img)
    assert [p["type"] for p in msg["content"]] == ["image", "text"]
    assert lm.user_message("just text") == {"role": "user", "content": "just text"}
    url = data_url(img)
    parts = lm.normalise_content([
        {"type": "image_url", "image_url": {"url": url}},
        {"type": "image", "image": as_array(img)},
        {"type": "text", "text": "hi"},
    ])  # fmt: skip
    assert [image_sha256(p["image"]) for p in parts[:2]] == [image_sha256(img)] * 2
    wire = openai_content(parts)
    assert wire[0]["type"] == "image_url" and wire[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert image_sha256(wire[0]["image_url"]["url"]) == image_sha256(img)  # lossless
    assert content_text(parts) == "<image> <image> hi"
    assert content_key(parts)[0] == {"type": "image", "sha256": image_sha256(img)}
    assert has_images([[msg]]) and not has_images(["text", [{"role": "user", "content": "x"}]])
    assert len(conversation_images([msg, msg])) == 2
    for bad in (
        [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}],  # no downloads
        [{"type": "audio", "audio": b""}],
        [{"type": "text"}],
        [],
    ):
        with pytest.raises(InputError):
            lm.normalise_content(bad)
    with pytest.raises(InputError):
        lm.user_message()


def test_text_only_model_refuses_image_prompts(llama):
    with pytest.raises(InputError, match="text-only"):
        lm.get_activations(llama, _prompts()[:1], llama.sites("resid_pre"), "last")
    with pytest.raises(InputError, match="text-only"):
        lm.HFChatModel(llama).generate(_prompts()[:1], max_new_tokens=2)


# ------------------------------------------------------------------------------ LLaVA by path


def test_llava_loads_and_its_forward_equals_the_processor_path(llava, llava_dir):
    from transformers import AutoProcessor

    assert isinstance(llava, lm.VisionLanguageModel) and llava.n_layers == 3
    assert llava.sites("resid_pre")[0] == "blocks.0.resid_pre"
    processor = AutoProcessor.from_pretrained(llava_dir)
    for conv in _prompts()[:2]:
        text = lm.format_chat(conv, llava.tokenizer)
        inputs = processor(images=conversation_images(conv), text=text, return_tensors="pt",
                           add_special_tokens=False)  # fmt: skip
        with torch.no_grad():
            ref = llava.model(**inputs).logits
        batch = llava.encode([conv])
        assert int(batch.free_mask.sum()) == 16 * len(conversation_images(conv))
        ours = llava.forward(batch)
        assert ours.shape == ref.shape
        torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)


def test_llava_activations_are_padding_invariant_and_see_the_image(llava):
    prompts = _prompts()
    sites = llava.sites("resid_post")
    acts = lm.get_activations(llava, prompts, sites, "last", batch_size=3)
    assert acts.shape == (3, 3, 1, 64)
    for i, p in enumerate(prompts):
        alone = lm.get_activations(llava, [p], sites, "last", batch_size=1)
        torch.testing.assert_close(acts[i], alone[0], atol=1e-4, rtol=1e-4)
    other = [[lm.user_message("what colour is the circle", images=[_scene(9)])]]
    changed = lm.get_activations(llava, other, sites, "last")
    assert (changed[0] - acts[0]).abs().max() > 1e-3  # the image reaches the last position


def test_llava_steering_and_ablation_act_on_its_language_model(llava):
    prompts = _prompts()[:2]
    site = "blocks.1.resid_pre"
    base = lm.get_activations(llava, prompts, [site], "last")
    r = lm.normalize(torch.randn(64, generator=torch.Generator().manual_seed(0)))
    with lm.add_vector(llava, r * 8.0, site):
        moved = lm.get_activations(llava, prompts, [site], "last")
    torch.testing.assert_close(moved - base, (r * 8.0).expand_as(base), atol=1e-4, rtol=1e-4)
    with lm.ablate_direction(llava, r):
        ablated = lm.get_activations(llava, prompts, llava.sites("resid_post"), "last")
    assert ablated.matmul(r).abs().max() < 1e-4
    chat = lm.HFChatModel(llava)
    plain = chat.generate(prompts, max_new_tokens=6)
    steered = chat.with_interventions(lm.AddVector(r * 50.0, llava.sites("resid_pre"))).generate(
        prompts, max_new_tokens=6
    )
    assert plain != steered


def test_llava_greedy_replies_equal_hf_generate(llava, llava_dir):
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(llava_dir)
    prompts = _prompts()[:2]
    ours = lm.HFChatModel(llava, batch_size=2).generate(prompts, max_new_tokens=6)
    for conv, reply in zip(prompts, ours, strict=True):
        text = lm.format_chat(conv, llava.tokenizer)
        inputs = processor(images=conversation_images(conv), text=text, return_tensors="pt",
                           add_special_tokens=False)  # fmt: skip
        with torch.no_grad():
            out = llava.model.generate(**inputs, max_new_tokens=6, do_sample=False,
                                       eos_token_id=llava.eos_token_ids)  # fmt: skip
        new = out[0, inputs["input_ids"].shape[1] :]
        assert reply == llava.tokenizer.decode(new, skip_special_tokens=True).strip()


# ------------------------------------------------------------------------------ custom towers


class _MeanTower(torch.nn.Module):
    """A tower with a variable token count: one vector per 16 pixel rows of the image."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(3, d_model)
        torch.nn.init.normal_(self.proj.weight, std=0.5, generator=torch.Generator().manual_seed(1))

    def forward(self, images):
        out = []
        for img in images:
            x = torch.tensor(as_array(img), dtype=torch.float32) / 255.0  # [H, W, 3]
            rows = x.reshape(-1, 16, x.shape[1], 3).mean((1, 2))  # [H / 16, 3]
            out.append(self.proj(rows))
        return out


def test_custom_tower_variable_lengths_and_fingerprint(llava):
    tower = _MeanTower(64)
    vlm = lm.VisionLanguageModel(llava.model,
                                 llava.tokenizer, tower, image_token="<image>")  # fmt: skip
    small, tall = neutral_image(1, size=32), neutral_image(2, size=(32, 64))
    prompts = [[lm.user_message("a", images=[small])], [lm.user_message("a", images=[tall])]]
    one = len(vlm.tokenizer(lm.format_chat(prompts[0], vlm.tokenizer), add_special_tokens=False)["input_ids"])
    assert vlm.prompt_lengths(prompts) == [one - 1 + 2, one - 1 + 4]
    batch = vlm.encode(prompts)
    assert batch.free_mask.sum(1).tolist() == [2, 4]
    acts = lm.get_activations(vlm, prompts, vlm.sites("resid_post"), "last")
    for i, p in enumerate(prompts):
        torch.testing.assert_close(acts[i], lm.get_activations(vlm, [p], vlm.sites("resid_post"), "last")[0],
                                   atol=1e-4, rtol=1e-4)  # fmt: skip
    before = lm.model_fingerprint(lm.HFChatModel(vlm))
    with torch.no_grad():
        tower.proj.bias.add_(0.1)
    assert lm.model_fingerprint(lm.HFChatModel(vlm)) != before  # the tower's weights count

    def broken(images):
        return [torch.zeros(2, 5) for _ in images]

    bad = lm.VisionLanguageModel(llava.model, llava.tokenizer, broken, image_token="<image>")
    with pytest.raises(DataError, match="n_tokens"):
        bad.encode(prompts)
    with pytest.raises(InputError, match="image token"):
        lm.VisionLanguageModel(llava.model, llava.tokenizer, broken, image_token="<nope>")
    mismatch = [[{"role": "user", "content": [{"type": "image", "image": small},
                                             {"type": "text", "text": "<image>"}]}]]  # fmt: skip
    with pytest.raises(InputError, match="image token"):
        vlm.encode(mismatch)


# ------------------------------------------------------------------------------ evaluation loop


def test_evaluate_takes_image_prompts_and_keys_the_cache_on_pixels(llava, tmp_path):
    def convs(seeds):
        return [[lm.user_message("what colour is the circle", images=[_scene(s)])] for s in seeds]

    ps = PromptSet("images", tuple(convs([1, 2, 3])), meta=tuple({"harmful": True} for _ in range(3)))
    assert ps.instruction(0) == "<image> what colour is the circle"
    judge = lm.RefusalJudge()
    decoding = lm.Decoding(max_new_tokens=4)
    first = lm.evaluate({"llava": llava}, [ps], [judge], decoding=decoding, cache_dir=tmp_path)
    assert first.stats["generated"] == 3
    again = lm.evaluate({"llava": llava}, [ps], [judge], decoding=decoding, cache_dir=tmp_path)
    assert again.stats["cached"] == 3 and again.stats["generated"] == 0
    other = PromptSet("images", tuple(convs([1, 2, 4])), meta=ps.meta)
    third = lm.evaluate({"llava": llava}, [other], [judge], decoding=decoding, cache_dir=tmp_path)
    assert third.stats["cached"] == 2 and third.stats["generated"] == 1  # a new image, a new key
    direct = lm.HFChatModel(llava).generate(list(ps.prompts), max_new_tokens=4)
    assert [it["reply_sha256"] for it in first.items] == [
        __import__("hashlib").sha256(r.encode()).hexdigest() for r in direct
    ]
