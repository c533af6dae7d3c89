"""Images into the lm stack: how fast images are drawn, and what an image costs in a forward pass.

1. Generation (trustlab.vision): images/s for scenes (64 x 64), word grids (the organisms' 384 x
   64 request images) and rendered text, against neutral colour fields drawn in the same run
   (the cheapest image: the ratio is the cost of drawing content).
2. Forward passes: images/s of an image+text forward (image vectors spliced into the language
   model's input, tower included) against a text-only forward of the *same length* (the same
   number of positions per row, the same batch), median of alternated pairs and the median
   per-pair ratio, on a randomly initialised LLaVA (CLIP tower + Llama, 16 vectors per image)
   and, when it is built in $TRUSTLAB_HOME, the vlm-xs organism. The tower's own share is timed
   separately.

    python benchmarks/multimodal.py [--quick] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable

import torch

from trustlab import lm
from trustlab.core.runtime import torch_runtime
from trustlab.vision import (
    neutral_image,
    random_scene,
    render_scene,
    render_text,
    render_word_grid,
)

WORDS = ["how", "do", "I", "bake", "bread", "at", "home", "with", "a", "small", "oven", "and", "some", "flour"]


def timed(fn: Callable[[], object], repeats: int) -> list[float]:
    fn()  # warm-up
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def paired(base: Callable[[], object], case: Callable[[], object], repeats: int) -> tuple:
    """Median times of ``base`` and ``case`` run alternately, the median per-pair ratio, and
    the ratio's spread (min, max)."""
    base(), case()  # warm-up
    tb, tc, ratios = [], [], []
    for _ in range(repeats):
        start = time.perf_counter()
        base()
        mid = time.perf_counter()
        case()
        end = time.perf_counter()
        tb.append(mid - start)
        tc.append(end - mid)
        ratios.append((end - mid) / (mid - start))
    return statistics.median(tb), statistics.median(tc), statistics.median(ratios), min(ratios), max(ratios)


def generation(n: int, repeats: int) -> None:
    print(f"== generation: {n} images per run, {repeats} runs (median images/s, [min, max])")
    cases = {
        "neutral 64x64 (baseline)": lambda i: neutral_image(i, size=64),
        "scene 64x64": lambda i: render_scene(random_scene(i, size=64), noise=3.0, seed=i),
        "word grid 384x64": lambda i: render_word_grid(WORDS, grid=(4, 6), cell=(16, 64), seed=i),
        "rendered text 128x32": lambda i: render_text("bake bread", size=(128, 32), seed=i),
    }
    base = None
    for name, draw in cases.items():
        times = timed(lambda draw=draw: [draw(i) for i in range(n)], repeats)
        rates = sorted(n / t for t in times)
        med = statistics.median(rates)
        base = base or med
        print(f"  {name:26s} {med:9.0f} img/s  [{rates[0]:.0f}, {rates[-1]:.0f}]  "
              f"({base / med:5.1f}x the baseline's time per image)")  # fmt: skip


def tiny_llava(folder: str) -> lm.VisionLanguageModel:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

    template = (
        "{% for m in messages %}<|{{ m['role'] }}|> {% if m['content'] is string %}"
        "{{ m['content'] }}{% else %}{% for p in m['content'] %}{% if p['type'] == 'image' %}"
        "<image> {% else %}{{ p['text'] }} {% endif %}{% endfor %}{% endif %} {% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    specials = ["<pad>", "<unk>", "<bos>", "<eos>", "<|user|>", "<|assistant|>", "<image>"]
    vocab = {t: i for i, t in enumerate([*specials, *[f"w{i}" for i in range(500)], *WORDS])}
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>", unk_token="<unk>",
                                  bos_token="<bos>", eos_token="<eos>",
                                  additional_special_tokens=specials[4:])  # fmt: skip
    tok.chat_template = template
    text = LlamaConfig(vocab_size=len(vocab), hidden_size=256, intermediate_size=1024,
                       num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8,
                       max_position_embeddings=512, pad_token_id=0, bos_token_id=2,
                       eos_token_id=3)  # fmt: skip
    vision = CLIPVisionConfig(hidden_size=128, intermediate_size=512, num_hidden_layers=4,
                              num_attention_heads=4, image_size=64, patch_size=16)  # fmt: skip
    config = LlavaConfig(vision_config=vision, text_config=text, image_seq_length=16,
                         image_token_index=vocab["<image>"], vision_feature_layer=-1,
                         vision_feature_select_strategy="default")  # fmt: skip
    torch.manual_seed(0)
    LlavaForConditionalGeneration(config).eval().save_pretrained(folder)
    images = CLIPImageProcessor(size={"shortest_edge": 64}, crop_size={"height": 64, "width": 64})
    LlavaProcessor(image_processor=images, tokenizer=tok, chat_template=template, patch_size=16,
                   vision_feature_select_strategy="default",
                   num_additional_image_tokens=1).save_pretrained(folder)  # fmt: skip
    return lm.load(f"hf:{folder}")  # type: ignore[return-value]


def forward(name: str, vlm: lm.VisionLanguageModel, images: list, question: str, repeats: int) -> None:
    prompts = [[lm.user_message(question, images=[img])] for img in images]
    batch = vlm.encode(prompts)
    width = batch.width
    # the text-only twin: rows of plain tokens, each as long as its image row (same batch shape)
    vocab = [i for i in range(len(vlm.tokenizer)) if i not in set(vlm.tokenizer.all_special_ids)]
    g = torch.Generator().manual_seed(0)
    lengths = batch.attention_mask.sum(1).tolist()
    rows = [[vocab[int(j)] for j in torch.randint(len(vocab), (int(n),), generator=g)] for n in lengths]
    text_batch = vlm.pad(rows, "left")
    assert text_batch.width == width

    def text() -> object:
        return vlm.forward(text_batch)

    def image() -> object:  # tokenise, run the tower, splice, forward
        return vlm.forward(vlm.encode(prompts))

    def tower() -> object:
        return vlm.image_embeds(images)

    with torch.no_grad():
        tb, tc, ratio, lo, hi = paired(text, image, repeats)
        tt = statistics.median(timed(tower, repeats))
    n = len(images)
    print(f"  {name}: batch {n} x {width} positions ({int(batch.free_mask[0].sum())} image vectors in row 0)")
    print(f"    text-only forward  {n / tb:8.1f} prompts/s  ({tb * 1e3:7.1f} ms)")
    print(f"    image+text forward {n / tc:8.1f} images/s   ({tc * 1e3:7.1f} ms)  = {ratio:.2f}x the "
          f"text-only time [{lo:.2f}, {hi:.2f}]; the tower alone {tt * 1e3:.1f} ms")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer images and repeats")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args()
    n, repeats, batch = (40, 5, 8) if args.quick else (200, 7, 32)
    with torch_runtime(args.threads):
        generation(n, repeats)
        print(f"== forward passes ({args.threads} thread(s); median of {repeats} alternated pairs)")
        with tempfile.TemporaryDirectory() as folder:
            llava = tiny_llava(folder)
            scenes = [render_scene(random_scene(i, size=64)) for i in range(batch)]
            forward("random LLaVA (CLIP 4x128 + Llama 4x256)", llava, scenes,
                    "what colour is the circle", repeats)  # fmt: skip
        from trustlab.organisms import is_built

        if is_built("vlm-xs"):
            from trustlab.organisms.vlm_metrics import request_renderer

            vlm = lm.load("organism:vlm-xs")
            draw = request_renderer(vlm.tokenizer)
            grids = [draw(" ".join(WORDS[: 6 + i % 8])) for i in range(batch)]
            forward("vlm-xs (cell encoder + chat-xs)", vlm, grids, "Please respond to the image.",
                    repeats)  # fmt: skip
        else:
            print("  vlm-xs is not built in $TRUSTLAB_HOME: skipped (trustlab organisms build vlm-xs)")


if __name__ == "__main__":
    main()
