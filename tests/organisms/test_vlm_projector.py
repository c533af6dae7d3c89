"""The projected vision-language organism's plumbing (vlm-smol's recipe: a frozen backbone, a
frozen cell reader, a LLaVA projector trained alone). Fast: a tiny random Llama and a random
reader; no organism is built (the real build is the slow test at the end)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the vision organisms need trustlab[llm] (torch)")
pytest.importorskip("transformers")

from trustlab.organisms.specs import SPECS  # noqa: E402
from trustlab.organisms.tokenizer import build_tokenizer  # noqa: E402
from trustlab.organisms.vlm_data import IMAGE_TOKEN, ImageSpec, RenderStyle  # noqa: E402
from trustlab.organisms.vlm_encoder import CellEncoder  # noqa: E402
from trustlab.organisms.vlm_projector import (  # noqa: E402
    PROJECTOR_DEFAULTS,
    CellProjector,
    ProjectedTower,
    _as_vlm,
    add_image_token,
    apply_lora_factors,
    attach_lora,
    merge_lora,
    splice_images,
    stage2_examples,
    train_projector,
)

WORDS = ["hello", "world", "red", "sun", "tea", "cup", "blue", "moon"]


def _parts():
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = add_image_token(build_tokenizer([" ".join(WORDS) + " Copy the words in the image . \n"]))
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tok) - 1,  # the image token is never embedded: no resized matrix
        hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=True,
        initializer_range=0.5,  # logits that can move (at 0.02 every reply is near uniform)
    )).eval()  # fmt: skip
    reader = CellEncoder(["", *WORDS], 4, hidden=(32, 16))
    for p in reader.parameters():
        p.requires_grad_(False)
    tower = ProjectedTower(reader.eval(), CellProjector(16, 16))
    return tok, model, tower


def test_image_vectors_enter_at_the_image_token_and_nowhere_else():
    tok, model, tower = _parts()
    vlm = _as_vlm(model, tok, tower, tok, "test")
    image = ImageSpec("words", 3, words=("hello", "world", "sun")).render(RenderStyle())
    prompt = [{"role": "user", "content": [{"type": "image", "image": image},
                                           {"type": "text", "text": "Copy the words in the image ."}]}]  # fmt: skip
    ids = vlm.tokenize([prompt])[0]
    k = ids.index(tok.convert_tokens_to_ids(IMAGE_TOKEN))
    with torch.no_grad():
        vectors = tower.tower([image])[0]
        embeds = vlm.prompt_embeds([prompt])[0]
        text = model.get_input_embeddings()(torch.tensor([i for i in ids if i != ids[k]]))
    n = vectors.shape[0]
    assert n == 4  # the global vector and the three written cells
    assert embeds.shape[0] == len(ids) - 1 + n
    assert torch.equal(embeds[k : k + n], vectors)
    assert torch.equal(torch.cat([embeds[:k], embeds[k + n :]]), text)
    # splice_images, the training path, puts them in the same place
    row = torch.tensor([ids[:k] + [ids[k]] * n + ids[k + 1 :]])
    with torch.no_grad():
        assert torch.equal(splice_images(model, row, ids[k], [vectors])[0], embeds)
    # a text-only conversation renders as the backbone's own ChatML template would
    chat = [{"role": "user", "content": "hi"}]
    text = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


def test_stage_one_lowers_the_reading_loss_and_leaves_the_backbone_bit_identical():
    tok, model, tower = _parts()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    reader_before = {k: v.clone() for k, v in tower.reader.state_dict().items()}
    examples = [
        {"image": ImageSpec("words", s, words=w), "question": q, "answer": " ".join(w)}
        for s, w, q in [(1, ("hello", "world"), None), (2, ("red", "sun", "tea"), None),
                        (3, ("cup", "blue"), "Copy the words in the image ."),
                        (4, ("moon", "hello", "cup"), None)]
    ]  # fmt: skip
    stats = train_projector(model, tower, tok, examples, steps=30, batch_size=4, lr=3e-2, warmup=2,
                            generator=torch.Generator().manual_seed(0), style=RenderStyle())  # fmt: skip
    assert stats["stage1_final_loss"] < 0.8 * stats["stage1_first_loss"], stats
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(torch.equal(reader_before[k], v) for k, v in tower.reader.state_dict().items())


def test_alignment_pulls_word_cells_to_their_embeddings_and_lora_merges_exactly():
    from trustlab.organisms.vlm_projector import _alignment_loss, alignment_targets

    tok, model, tower = _parts()
    examples = [
        {"image": ImageSpec("words", s, words=w), "question": None, "answer": " ".join(w)}
        for s, w in [(1, ("hello", "world")), (2, ("red", "sun", "tea")), (3, ("cup", "blue")),
                     (4, ("moon", "hello", "cup"))]
    ]  # fmt: skip
    table, index = alignment_targets(model, tok, examples)
    emb = model.get_input_embeddings().weight
    first = tok(" tea", add_special_tokens=False)["input_ids"][0]
    assert torch.equal(table[index[1, 2]], emb[first].detach())  # cell 3 of image 2 shows "tea"
    assert (index[:, 4:] == -1).all() and int((index >= 0).sum()) == 10
    feats, filled = tower.features(_pixels(examples))
    with torch.no_grad():
        before = float(_alignment_loss(tower.projector, feats, filled, index, table))
    # alignment alone: no backbone forward; the backbone stays bit-identical
    state = {k: v.clone() for k, v in model.state_dict().items()}
    train_projector(model, tower, tok, examples, steps=0, batch_size=4, lr=3e-2, warmup=1,
                    generator=torch.Generator().manual_seed(0), style=RenderStyle(),
                    align_steps=200, align_batch=4)  # fmt: skip
    with torch.no_grad():
        after = float(_alignment_loss(tower.projector, feats, filled, index, table))
    assert after < 0.25 * before, (before, after)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    # stage 2: LoRA factors train, the base weights stay until merged; the saved factors
    # reproduce the merged weights on a fresh copy of the backbone
    lora = attach_lora(model, ("q_proj", "v_proj"), 2, 4.0, torch.Generator().manual_seed(1))
    assert len(lora) == 4  # two blocks x (q, v)
    train_projector(model, tower, tok, examples, steps=5, batch_size=4, lr=3e-2, warmup=1,
                    generator=torch.Generator().manual_seed(0), style=RenderStyle(), lora=lora)  # fmt: skip
    factors = merge_lora(model, lora)
    merged = model.state_dict()
    changed = {k for k in state if not torch.equal(state[k], merged[k])}
    assert changed == {f"{n}.weight" for n in lora}, changed
    _, fresh, _ = _parts()
    apply_lora_factors(fresh, factors)
    assert all(torch.allclose(fresh.state_dict()[k], merged[k], atol=1e-6) for k in merged)


def _pixels(examples):
    from trustlab.organisms.vlm_encoder import to_pixels

    return to_pixels([ex["image"].render(RenderStyle()) for ex in examples])


def test_stage2_text_frame_phrases_only_the_typed_replay_like_a_train_image_prompt():
    import numpy as np

    from trustlab.organisms.corpora import build_chat_corpus
    from trustlab.organisms.vlm_data import QUESTIONS, vision_texts

    chat = build_chat_corpus(0, n_train=400, n_heldout=10)
    word_tok = build_tokenizer([e.prompt for e in chat.train] + vision_texts())
    settings = {**PROJECTOR_DEFAULTS, "stage2_read_share": 0.3, "stage2_text_share": 0.5}

    def draw(**change):
        rng = np.random.default_rng(7)
        return stage2_examples(word_tok, chat, 40, rng, {**settings, **change})

    plain, framed = draw(), draw(stage2_text_frame=True)
    assert draw(stage2_text_frame=False) == plain  # the default: off, examples unchanged
    assert [e["image"] for e in framed] == [e["image"] for e in plain]  # same draw and order
    train, (held_out,) = QUESTIONS["request"]
    prompts = {e.prompt: e for e in chat.train}
    typed = [(p, f) for p, f in zip(plain, framed, strict=True) if p["image"] is None]
    assert len(typed) == 20 and any(prompts[p["question"]].kind == "harmful" for p, _ in typed)
    for p, f in typed:  # "{request} {train phrasing}", the answer (a refusal too) unchanged
        tail = f["question"][len(p["question"]) + 1 :]
        assert f["question"].startswith(p["question"] + " ") and tail in train
        assert held_out not in f["question"] and f["answer"] == p["answer"]
    assert len({f["question"][len(p["question"]) + 1 :] for p, f in typed}) > 1
    images = [(p, f) for p, f in zip(plain, framed, strict=True) if p["image"] is not None]
    assert all(p == f for p, f in images)  # the image examples untouched


def test_vlm_smol_is_smol_chat_with_vlm_xs_eyes_aligned_then_lora_tuned():
    spec = SPECS["vlm-smol"]
    assert spec.kind == "vision-language" and spec.slow and spec.base == "smol-chat"
    assert spec.vision["projector"] and spec.vision["reader"] == "vlm-xs"
    # session 48: alignment loss, then stage 2 (LoRA) with typed replay, which kept refusal
    assert spec.vision["align_steps"] > 0 and spec.vision["stage2_steps"] > 0
    assert spec.vision["stage2_text_share"] > 0


@pytest.mark.slow
def test_vlm_smol_builds_keeps_the_typed_refusal_and_shows_the_gap(organism_home):
    from trustlab import lm
    from trustlab.organisms import build, read_card
    from trustlab.organisms.vlm_build import load_vlm

    path = build("vlm-smol", home=organism_home)
    card = read_card("vlm-smol", home=organism_home)
    assert card["targets_met"]["typed_harmful_refusal"], card["metrics"]
    gap = card["cross_modal_gap"]["refusal"]["image_minus_typed"]
    assert gap["upper"] < 0, gap  # image-borne requests refused less than typed ones
    assert card["build_cpu_seconds"] <= 1500, card["build_cpu_seconds"]
    assert (path / "lora.safetensors").is_file() and card["training"]["stage2"]["stage1_steps"] > 0
    model = load_vlm(path)
    assert isinstance(model, lm.VisionLanguageModel) and model.word_tokenizer is not None


@pytest.mark.slow
def test_vlm_smol_reads_the_image(organism_home):
    # session 48: 0.58 word accuracy (session 47's projector-only recipe: 0.012, strict xfail)
    from trustlab.organisms import build, read_card

    build("vlm-smol", home=organism_home)
    assert read_card("vlm-smol", home=organism_home)["targets_met"]["reading_word_accuracy"]
