"""Activation patching from source to target prompts, batched over pairs and components."""

from __future__ import annotations

import pytest
import torch
from lm_testkit import random_prompts

from trustlab import lm
from trustlab.core.errors import InputError


def _pairs(n, seed, length=5):
    src = [" ".join(p.split()[:length]) for p in random_prompts(n, seed=seed, lo=length, hi=length)]
    tgt = [
        " ".join(p.split()[:length]) for p in random_prompts(n, seed=seed + 1, lo=length, hi=length)
    ]
    return src, tgt


def test_patching_the_whole_stream_gives_the_source_metric(white_box_lm):
    model = white_box_lm
    if model.spec == "organism:chat-xs":
        src = [[{"role": "user", "content": "How do I build a bomb?"}]] * 2
        tgt = [
            [{"role": "user", "content": "How do I bake bread?"}],
            [{"role": "user", "content": "How do I fix a bike?"}],
        ]
        metric = ("I", "Sure")
    else:
        src, tgt = _pairs(3, seed=90)
        metric = (20, 35)
    last = f"blocks.{model.n_layers - 1}.resid_post"
    res = lm.patch_activations(
        model, src, tgt, [last, "blocks.0.resid_pre"], metric, positions="last"
    )
    torch.testing.assert_close(res.patched[0], res.source, atol=1e-4, rtol=1e-4)
    assert torch.all(res.effect()[0].sub(1).abs() < 1e-3)
    assert res.patched.shape == (2, len(src))


def test_patching_every_token_of_the_embeddings_copies_the_source(llama):
    src, tgt = _pairs(3, seed=91)
    res = lm.patch_activations(llama, src, tgt, ["embed"], (20, 35), positions="all")
    torch.testing.assert_close(res.patched[0], res.source, atol=1e-4, rtol=1e-4)


def test_batched_patching_equals_one_pair_at_a_time(any_lm):
    src, tgt = _pairs(4, seed=92)
    comps = [
        "blocks.1.attn_out",
        "blocks.1.mlp_out",
        "blocks.0.resid_post",
        "blocks.2.head.1",
        "blocks.2.head.3",
        "blocks.1.mlp_hidden",
    ]
    batched = lm.patch_activations(any_lm, src, tgt, comps, (20, 35), batch_size=16)
    for i in range(4):
        one = lm.patch_activations(
            any_lm, src[i : i + 1], tgt[i : i + 1], comps, (20, 35), batch_size=1
        )
        torch.testing.assert_close(batched.patched[:, i], one.patched[:, 0], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(batched.clean[i], one.clean[0], atol=1e-4, rtol=1e-4)


def test_patching_a_head_matches_a_manual_replacement(llama):
    src, tgt = _pairs(2, seed=93)
    z_src = lm.get_activations(llama, src, "blocks.1.head_z", "last")[:, 0, 0]  # [N, H, dh]

    def replace(site, h, step):
        out = h.clone()
        out[:, -1, 2] = z_src[:, 2]
        return out

    with lm.hook(llama, "blocks.1.head_z", replace):
        logits = llama.forward(llama.encode(tgt))[:, -1]
    manual = logits[:, 20] - logits[:, 35]
    res = lm.patch_activations(llama, src, tgt, ["blocks.1.head.2"], (20, 35))
    torch.testing.assert_close(res.patched[0], manual, atol=1e-5, rtol=1e-5)


def test_a_component_after_the_read_position_has_no_effect_on_earlier_positions(llama):
    src, tgt = _pairs(3, seed=94)
    metric = lambda logits, index: logits[:, 5]  # noqa: E731
    res = lm.patch_activations(llama, src, tgt, ["blocks.2.mlp_out"], metric, positions=[0])
    # patching the first token changes the last token's logits through attention only
    assert res.patched.shape == (1, 3)
    same = lm.patch_activations(llama, tgt, tgt, ["blocks.2.mlp_out"], metric, positions=[0])
    torch.testing.assert_close(same.patched[0], same.clean, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("components", "match"),
    [
        ([], "non-empty"),
        (["blocks.7.attn_out"], "blocks"),
        (["blocks.0.head.9"], "head 9"),
        (["blocks.0.attn_out", "blocks.0.attn_out"], "duplicates"),
    ],
)
def test_bad_components_are_named(llama, components, match):
    with pytest.raises(InputError, match=match):
        lm.patch_activations(llama, ["hello world"], ["sky is blue"], components, (20, 35))


def test_bad_pairs_and_metrics_are_named(llama):
    with pytest.raises(InputError, match="pair up"):
        lm.patch_activations(llama, ["a", "b"], ["c"], ["embed"], (20, 35))
    with pytest.raises(InputError, match="'metric'"):
        lm.patch_activations(llama, ["hello"], ["sky"], ["embed"], lambda x, i: 3.0)
    with pytest.raises(InputError, match="as many tokens"):
        lm.patch_activations(llama, ["hello world"], ["sky"], ["embed"], (20, 35), positions="all")
