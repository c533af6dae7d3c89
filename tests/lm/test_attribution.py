"""Unembedding, logit lens and direct logit attribution: the decomposition adds up."""

from __future__ import annotations

import pytest
import torch
from lm_testkit import random_prompts

from trustlab import lm
from trustlab.core.errors import InputError


def _prompts(model, n, seed):
    if model.spec == "organism:chat-xs":
        texts = [
            "What is the capital of Spain?",
            "How do I build a bomb?",
            'Copy this: "river"',
            "How do I bake bread at home?",
            "What is 2 plus 5?",
        ]
        return [[{"role": "user", "content": t}] for t in texts[:n]]
    return random_prompts(n, seed=seed, lo=2)


def _pair(model):
    if model.spec == "organism:chat-xs":
        return "I", "Sure"
    return 20, 35


def test_unembed_of_the_last_resid_post_is_the_models_logits(white_box_lm):
    model = white_box_lm
    prompts = _prompts(model, 4, seed=70)
    last = lm.get_activations(model, prompts, model.sites("resid_post")[-1:], "last")[:, 0, 0]
    logits = torch.stack([model.forward(model.encode([p]))[0, -1] for p in prompts])
    torch.testing.assert_close(lm.unembed(model, last), logits, atol=1e-5, rtol=1e-5)


def test_logit_lens_ends_at_the_models_logits(white_box_lm):
    model = white_box_lm
    prompts = _prompts(model, 3, seed=71)
    lens = lm.logit_lens(model, prompts, tokens=list(_pair(model)))
    assert lens.shape == (3, model.n_layers + 1, 1, 2)
    ids = [lm.attribution.token_id(model, t) for t in _pair(model)]
    final = lm.next_token_logprobs(model, prompts)  # log-softmax of the last logits
    want = final[:, ids[0]] - final[:, ids[1]]
    torch.testing.assert_close(lens[:, -1, 0, 0] - lens[:, -1, 0, 1], want, atol=1e-4, rtol=1e-4)


def test_attributions_plus_correction_equal_the_logit_difference(white_box_lm):
    """The issue's equality: every write to the stream, plus the final-norm correction."""
    model = white_box_lm
    prompts = _prompts(model, 5, seed=72)
    target, contrast = _pair(model)
    att = lm.direct_logit_attribution(model, prompts, target, contrast, batch_size=2)
    assert att.components[0] == "embed" and len(att.components) == 1 + 2 * model.n_layers
    scale = att.values.abs().sum(1).max()
    assert float((att.total() - att.logit_diff).abs().max()) <= 1e-5 * float(scale)
    # the heads and the projection bias decompose each block's attn_out attribution
    attn = att.values[:, 1::2]
    heads = att.heads.sum(-1) + att.head_bias
    assert float((heads - attn).abs().max()) <= 1e-5 * float(scale)
    # the logit difference itself is the model's
    logits = model.forward(model.encode(prompts))[:, -1].double()
    ids = [lm.attribution.token_id(model, t) for t in (target, contrast)]
    want = logits[:, ids[0]] - logits[:, ids[1]]
    torch.testing.assert_close(att.logit_diff, want, atol=1e-5, rtol=1e-5)  # other batching


def test_correction_is_the_final_norm_bias_for_layernorm_and_zero_for_rmsnorm(family_lms):
    prompts = random_prompts(3, seed=73)
    rms = lm.direct_logit_attribution(family_lms["llama"], prompts, 20, 35)
    assert torch.all(rms.correction == 0)
    ln = lm.direct_logit_attribution(family_lms["gpt2"], prompts, 20, 35)
    w_u = family_lms["gpt2"].model.get_output_embeddings().weight.detach().double()
    bias = family_lms["gpt2"].model.transformer.ln_f.bias.detach().double()
    expected = float(bias @ (w_u[20] - w_u[35]))
    torch.testing.assert_close(ln.correction, torch.full((3,), expected, dtype=torch.float64))


def test_attribution_of_one_logit_and_per_prompt_tokens(llama):
    prompts = random_prompts(3, seed=74)
    single = lm.direct_logit_attribution(llama, prompts, 20)
    logits = llama.forward(llama.encode(prompts))[:, -1, 20].double()
    torch.testing.assert_close(single.total(), logits, atol=1e-5, rtol=1e-5)
    per = lm.direct_logit_attribution(llama, prompts, [20, 21, 22], [30, 31, 32])
    row = lm.direct_logit_attribution(llama, prompts[1:2], 21, 31)
    torch.testing.assert_close(per.values[1], row.values[0], atol=1e-6, rtol=1e-6)
    table = per.table()
    assert table[-1]["component"] == "correction"
    assert any(r["component"] == "blocks.0.head.0" for r in table)


def test_an_ablated_component_loses_its_attribution(llama):
    prompts = random_prompts(4, seed=75)
    zero = lambda s, h, st: torch.zeros_like(h)  # noqa: E731
    with lm.hook(llama, "blocks.1.mlp_out", zero):
        att = lm.direct_logit_attribution(llama, prompts, 20, 35)
    k = att.components.index("blocks.1.mlp_out")
    assert torch.all(att.values[:, k] == 0)
    assert float((att.total() - att.logit_diff).abs().max()) < 1e-4


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"target": "sky is blue"}, "tokens"),
        ({"target": 10**6}, "outside"),
        ({"target": [1, 2]}, "one per prompt"),
        ({"target": 3, "position": lm.Positions.last(2)}, "one token"),
    ],
)
def test_bad_attribution_inputs_are_named(llama, kwargs, match):
    with pytest.raises(InputError, match=match):
        lm.direct_logit_attribution(llama, ["hello world", "sky is blue", "run"], **kwargs)
