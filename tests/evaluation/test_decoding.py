"""The KV-cached decoder against references: transformers' greedy generate, the uncached rerun,
embeddings instead of ids, finished rows leaving the batch, steering and sampling."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="trustlab.lm needs the llm extra")
pytest.importorskip("transformers", reason="trustlab.lm needs the llm extra")

sys.path.insert(0, str(Path(__file__).parents[1] / "lm"))
from lm_testkit import CHAT_TEMPLATE, random_prompts, save_checkpoint  # noqa: E402

from trustlab import lm  # noqa: E402
from trustlab.core.errors import InputError  # noqa: E402


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def model(request, tmp_path_factory):
    torch.set_num_threads(1)
    template = CHAT_TEMPLATE if request.param == "llama" else None
    path = save_checkpoint(tmp_path_factory.mktemp(request.param), request.param, template)
    return lm.load(f"hf:{path}")


def _hf_generate(m, prompts, n):
    """transformers' own greedy generate, one prompt at a time (no padding at all)."""
    out = []
    with torch.no_grad():
        for ids in m.tokenize(prompts):
            x = torch.tensor([ids])
            gen = m.model.generate(input_ids=x, attention_mask=torch.ones_like(x),
                                   max_new_tokens=n, do_sample=False,
                                   pad_token_id=m.pad_token_id, eos_token_id=m.eos_token_ids)  # fmt: skip
            out.append(m.tokenizer.decode(gen[0, x.shape[1] :], skip_special_tokens=True).strip())
    return out


def test_greedy_replies_equal_transformers_generate_and_the_uncached_rerun(model):
    prompts = random_prompts(9, seed=4)
    ref = _hf_generate(model, prompts, 7)
    for batch_size in (1, 4, 64):
        assert lm.generate_rows(model, prompts, max_new_tokens=7, batch_size=batch_size) == ref
    assert lm.generate_rows(model, prompts, max_new_tokens=7, cache=False) == ref
    assert lm.generate_rows(model, prompts, max_new_tokens=7, compact=False) == ref
    convs = [[{"role": "user", "content": p}] for p in prompts]  # HFChatModel sends chats
    assert lm.HFChatModel(model).generate(prompts, max_new_tokens=7) == _hf_generate(
        model, convs, 7
    )


def test_generation_from_embeddings_equals_generation_from_ids(model):
    prompts = random_prompts(5, seed=8)
    ids = model.tokenize(prompts)
    emb = model.model.get_input_embeddings()
    with torch.no_grad():
        embeds = [emb(torch.tensor(t)) for t in ids]
    got = lm.generate_rows(model, None, inputs_embeds=embeds, max_new_tokens=6)
    assert got == lm.generate_rows(model, prompts, max_new_tokens=6)
    with pytest.raises(InputError, match="inputs_embeds"):
        lm.generate_rows(model, None, inputs_embeds=[torch.zeros(3, model.d_model + 1)])
    with pytest.raises(InputError, match="not both"):
        lm.generate_rows(model, prompts, inputs_embeds=embeds)


def test_per_row_steering_equals_a_global_addition_row_by_row(model):
    prompts = random_prompts(6, seed=11)
    site = "blocks.1.resid_pre"
    v = torch.randn(model.d_model, generator=torch.Generator().manual_seed(3)) * 6
    gates = torch.tensor([True, False, True, True, False, False])
    deltas = v.unsqueeze(0) * gates.float().unsqueeze(-1)
    got = lm.generate_rows(model, prompts, max_new_tokens=6, steering=lm.Steering(site, deltas))
    with lm.add_vector(model, v, [site]):
        steered = _hf_generate(model, prompts, 6)
    plain = _hf_generate(model, prompts, 6)
    assert got == [s if g else p for s, p, g in zip(steered, plain, gates.tolist(), strict=True)]
    with pytest.raises(InputError, match="one row per prompt"):
        lm.generate_rows(model, prompts, steering=lm.Steering(site, deltas[:2]))


def test_position_aware_interventions_survive_rows_leaving_the_batch(model):
    """An intervention on 'generated' tokens needs each row's prompt length; when finished rows
    leave the batch the decoder keeps those facts aligned (same replies as without
    compaction)."""
    prompts = random_prompts(8, seed=21)
    v = torch.randn(model.d_model, generator=torch.Generator().manual_seed(5)) * 5
    site = "blocks.0.resid_pre"
    stop = lambda n, text: n % 2 == 0 and len(text) > 0  # noqa: E731  (even rows stop early)
    with lm.add_vector(model, v, [site], positions="generated"):
        a = lm.generate_rows(model, prompts, max_new_tokens=6, settled=stop, compact=True)
        b = lm.generate_rows(model, prompts, max_new_tokens=6, settled=stop, compact=False)
    assert a == b
    row = lm.Steering(site, v.expand(len(prompts), -1).clone(), positions="generated")
    c = lm.generate_rows(model, prompts, max_new_tokens=6, settled=stop, steering=row)
    assert c == a


def test_sampling_is_seeded_and_leaves_the_global_rng_alone(model):
    prompts = random_prompts(4, seed=1)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = lm.generate_rows(model, prompts, max_new_tokens=5, temperature=1.0, seed=7)
    after = torch.rand(1)
    assert torch.equal(before, after)
    assert a == lm.generate_rows(model, prompts, max_new_tokens=5, temperature=1.0, seed=7)
    others = [lm.generate_rows(model, prompts, max_new_tokens=5, temperature=1.0, seed=s)
              for s in range(8, 12)]  # fmt: skip
    assert any(o != a for o in others)


def test_stop_rules_cut_replies_to_the_prefix_that_settles_them(model):
    prompts = random_prompts(6, seed=13)
    full = lm.generate_rows(model, prompts, max_new_tokens=8)
    cut = lm.generate_rows(model, prompts, max_new_tokens=8, settled=lambda n, t: len(t) > 0)
    for f, c in zip(full, cut, strict=True):
        assert f.startswith(c) and (len(c.split()) <= 1 or not f)


@pytest.mark.parametrize(
    "kwargs",
    [{"max_new_tokens": 0}, {"max_new_tokens": 2.5}, {"temperature": -1},
     {"temperature": float("nan")}, {"batch_size": 0}, {"temperature": 1.0, "cache": False}],
)  # fmt: skip
def test_bad_decoding_settings_are_input_errors(model, kwargs):
    with pytest.raises(InputError):
        lm.generate_rows(model, ["hello"], **kwargs)
