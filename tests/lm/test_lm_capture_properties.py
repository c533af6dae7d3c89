"""Issue 38's property tests for lm's reading side on one tiny model (the session ``llama`` of
tests/lm/conftest.py, 3 blocks of width 64, a 82-token vocabulary): ``capture`` /
``get_activations`` / ``token_activations`` equal what a manual ``hook`` sees, ``Positions``
pick the tokens they name, a ``Batch``'s rows are the batch of those prompts, next-token and
sequence log-probabilities obey the chain rule, the logit lens's last layer is the model's own
logits, ``split_norm``'s ``NormSplit`` is linear and reproduces the norm, ``continuation_ids``
splits a tokenisation, ``TokenGradients`` / ``TokenProjection`` agree with their definitions,
``format_chat`` / ``load`` / ``register_resolver`` round-trip; malformed input gives a one-line
InputError naming the parameter."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from lm_property_kit import FEW, one_line, one_thread, prompt_lists, words  # noqa: F401
from lm_testkit import WORDS

from trustlab import lm
from trustlab.lm import (
    Batch,
    Capture,
    FamilyAdapter,
    LanguageModel,
    LogitAttribution,
    NormSplit,
    Positions,
    StepState,
    TokenActivations,
    TokenGradients,
    TokenProjection,
    capture,
    continuation_ids,
    format_chat,
    get_activations,
    hook,
    load,
    logit_lens,
    next_token_logprobs,
    next_token_probs,
    register_resolver,
    registered_schemes,
    sequence_logprobs,
    split_norm,
    token_activations,
)

PROMPTS = ["hello world", "sky is blue", "how do i fix my bug", [{"role": "user", "content": "run"}]]
KINDS = ["resid_pre", "resid_post", "attn_out", "mlp_out"]


# ----------------------------------------------------------------------- activations


@FEW
@given(prompts=prompt_lists, kind=st.sampled_from(KINDS), layer=st.integers(0, 2))
def test_capture_equals_a_manual_hook_and_get_activations(llama, prompts, kind, layer):
    site = f"blocks.{layer}.{kind}"
    seen = {}

    def keep(name, h, step):
        assert isinstance(step, StepState) and step.offset == 0
        seen["h"], seen["valid"] = h.detach().clone(), step.valid.clone()

    batch = llama.encode(prompts)  # left padding: the last column is every prompt's last token
    with torch.no_grad(), hook(llama, site, keep), capture(llama, site, "last") as cap:
        llama.forward(batch)
    assert isinstance(cap, Capture) and cap.sites == [site] and cap.positions == Positions.last()
    got = cap.stacked()
    assert got.shape == (len(prompts), 1, 1, llama.d_model)
    torch.testing.assert_close(got[:, 0, 0], seen["h"][:, -1].float())
    assert seen["valid"].sum(1).tolist() == batch.prompt_len.tolist()
    acts = get_activations(llama, prompts, site, "last", batch_size=2)
    torch.testing.assert_close(acts, got, atol=1e-5, rtol=1e-5)  # batching and order invariant


@FEW
@given(prompts=prompt_lists, idx=st.lists(st.integers(-2, 1), min_size=1, max_size=3))
def test_positions_pick_the_tokens_they_name(llama, prompts, idx):
    site = "blocks.1.resid_post"
    pos = Positions.at(idx)
    assert pos.count() == len(idx) and pos.is_fixed_count and Positions.last(2).count() == 2
    ta = token_activations(llama, prompts, site)  # every prompt token, prompt by prompt
    assert isinstance(ta, TokenActivations)
    lengths = [len(t) for t in llama.tokenize(prompts)]
    assert torch.bincount(ta.prompt_index, minlength=len(prompts)).tolist() == lengths
    assert ta.token_ids.tolist() == [t for row in llama.tokenize(prompts) for t in row]
    acts = get_activations(llama, prompts, site, pos)
    start = 0
    for n, length in enumerate(lengths):
        mine = ta.acts[start : start + length, 0]
        want = torch.stack([mine[i if i >= 0 else length + i] for i in idx])
        torch.testing.assert_close(acts[n, 0], want, atol=1e-5, rtol=1e-5)
        start += length


@FEW
@given(prompts=st.lists(words, min_size=2, max_size=4), data=st.data())
def test_batch_rows_are_the_batch_of_those_prompts(llama, prompts, data):
    idx = data.draw(st.lists(st.integers(0, len(prompts) - 1), min_size=1, max_size=3, unique=True))
    batch = llama.encode(prompts)
    assert isinstance(batch, Batch) and batch.size == len(prompts)
    sub, direct = batch.rows(idx), llama.encode([prompts[i] for i in idx])
    for field in ("input_ids", "attention_mask", "position_ids", "prompt_len"):
        assert torch.equal(getattr(sub, field), getattr(direct, field)), field


def test_sites_name_every_block_and_adapters_describe_families(llama):
    assert isinstance(llama, LanguageModel) and llama.n_layers == 3
    assert llama.sites("resid_pre") == [f"blocks.{i}.resid_pre" for i in range(3)]
    assert llama.sites("mlp_out", [1]) == ["blocks.1.mlp_out"]
    for site in llama.sites("attn_out"):
        assert llama.adapter.parse(site) == (int(site.split(".")[1]), "attn_out")
    assert all(isinstance(a, FamilyAdapter) for a in lm.ADAPTERS.values())
    assert "llama" in lm.ADAPTERS and "gpt2" in lm.ADAPTERS


@pytest.mark.parametrize(("call", "names"), [
    (lambda m: get_activations(m, ["hi"], None), ("site",)),
    (lambda m: get_activations(m, ["hi"], 3), ("site",)),
    (lambda m: get_activations(m, ["hi"], [3]), ("site",)),
    (lambda m: get_activations(m, "hello", "embed"), ("prompts", "list")),
    (lambda m: get_activations(m, ["hi"], "embed", batch_size=0), ("batch_size",)),
    (lambda m: get_activations(m, ["hi"], "blocks.9.resid_pre"), ("block 9",)),
    (lambda m: get_activations(m, ["hi"], "embed", True), ("position",)),
    (lambda m: get_activations(m, ["hi"], "embed", "generated"), ("fixed number",)),
    (lambda m: token_activations(m, "hello", "embed"), ("prompts", "list")),
    (lambda m: Positions.last(2.5), ("'k'",)),
    (lambda m: Positions.last("a"), ("'k'",)),
    (lambda m: Positions.last(0), ("'k'",)),
    (lambda m: Positions.at([1.5]), ("'indices'",)),
    (lambda m: Positions.at(["a"]), ("'indices'",)),
    (lambda m: Positions.at(None), ("indices",)),
    (lambda m: Positions.at([]), ("index",)),
    (lambda m: hook(m, "embed", None).__enter__(), ("'fn'",)),
    (lambda m: capture(m, "embed", "all").__enter__(), ("fixed number",)),
])
def test_malformed_reading_arguments_are_named(llama, call, names):
    one_line(lambda: call(llama), *names)


# ----------------------------------------------------------------------- distributions


@FEW
@given(prompts=prompt_lists, first=st.sampled_from(WORDS[:30]), second=st.sampled_from(WORDS[:30]))
def test_log_probabilities_obey_the_chain_rule(llama, prompts, first, second):
    ids = llama.tokenizer.convert_tokens_to_ids([first, second])
    logp = next_token_logprobs(llama, prompts, batch_size=2)
    torch.testing.assert_close(logp.exp().sum(-1), torch.ones(len(prompts)))
    torch.testing.assert_close(next_token_probs(llama, prompts), logp.exp())
    single = torch.stack([next_token_logprobs(llama, [p])[0] for p in prompts])
    torch.testing.assert_close(logp, single, atol=1e-5, rtol=1e-5)  # padding changes nothing
    one = sequence_logprobs(llama, prompts, [first] * len(prompts))
    torch.testing.assert_close(one, logp[:, ids[0]], atol=1e-5, rtol=1e-5)
    two = sequence_logprobs(llama, prompts, [f"{first} {second}"] * len(prompts), batch_size=1)
    after = next_token_logprobs(llama, [f"{p} {first}" for p in prompts])[:, ids[1]]
    torch.testing.assert_close(two, logp[:, ids[0]] + after, atol=1e-4, rtol=1e-4)
    per = sequence_logprobs(llama, prompts, [f"{first} {second}"] * len(prompts), per_token=True)
    torch.testing.assert_close(torch.stack([p.sum() for p in per]), two, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("call", "names"), [
    (lambda m: next_token_logprobs(m, []), ("at least one",)),
    (lambda m: next_token_logprobs(m, "hello"), ("list of prompts",)),
    (lambda m: sequence_logprobs(m, ["hi", "sky"], ["a", "b"], batch_size=0), ("batch_size",)),
    (lambda m: sequence_logprobs(m, ["hi", "sky"], ["a", "b"], batch_size=2.5), ("batch_size",)),
    (lambda m: sequence_logprobs(m, ["hi", "sky"], "ab"), ("continuations",)),
    (lambda m: sequence_logprobs(m, ["hi"], ["a", "b"]), ("continuations",)),
])
def test_malformed_probability_arguments_are_named(llama, call, names):
    one_line(lambda: call(llama), *names)


# ----------------------------------------------------------------------- lens and norms


@FEW
@given(prompts=prompt_lists, toks=st.lists(st.sampled_from(WORDS[:30]), min_size=1, max_size=3))
def test_logit_lens_last_layer_is_the_models_logits(llama, prompts, toks):
    lens = logit_lens(llama, prompts)
    assert lens.shape == (len(prompts), llama.n_layers + 1, 1, llama.vocab_size)
    torch.testing.assert_close(lens[:, -1, 0].log_softmax(-1), next_token_logprobs(llama, prompts),
                               atol=1e-4, rtol=1e-4)  # fmt: skip
    cols = logit_lens(llama, prompts, tokens=toks)
    ids = llama.tokenizer.convert_tokens_to_ids(toks)
    torch.testing.assert_close(cols, lens[..., ids])


@FEW
@given(seed=st.integers(0, 2**16), scale=st.floats(0.1, 10.0))
def test_split_norm_reproduces_the_norm_and_is_linear(llama, seed, scale):
    g = torch.Generator().manual_seed(seed)
    x = scale * torch.randn(3, llama.d_model, generator=g)
    a, b = torch.randn(2, 3, llama.d_model, generator=g).double()
    norm = llama.model.model.norm
    split = split_norm(norm, x)
    assert isinstance(split, NormSplit) and split.scale.shape == (3, 1) and not split.center
    bias = 0 if split.bias is None else split.bias
    torch.testing.assert_close(split.share(x) + bias, norm(x).double(), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(split.share(a + b), split.share(a) + split.share(b))
    torch.testing.assert_close(split.cpu().share(a), split.share(a))


def test_logit_attribution_table_summarises_its_values(llama):
    att = lm.direct_logit_attribution(llama, ["hello world", "sky is blue"], "sky", "blue")
    assert isinstance(att, LogitAttribution)
    rows = {r["component"]: r for r in att.table()}
    for i, name in enumerate(att.components):
        assert rows[name]["mean"] == pytest.approx(float(att.values[:, i].mean()))
    assert len(att.head_names()) == llama.n_layers * llama.adapter.n_heads
    shares = sum(r["share"] for r in att.table(heads=False))
    assert shares == pytest.approx(float(att.total().mean() / att.logit_diff.mean()), rel=1e-6)


@pytest.mark.parametrize(("call", "names"), [
    (lambda m: logit_lens(m, ["hi"], tokens="sky"), ("'tokens'",)),
    (lambda m: logit_lens(m, ["hi"], tokens=["zebra"]), ("'tokens'", "vocabulary")),
    (lambda m: logit_lens(m, ["hi"], tokens=[10**6]), ("'tokens'",)),
    (lambda m: split_norm(torch.nn.Linear(3, 3), torch.ones(3)), ("norm",)),
    (lambda m: lm.logit_diff_metric(m, "zebra"), ("'target'",)),
])
def test_malformed_lens_arguments_are_named(llama, call, names):
    one_line(lambda: call(llama), *names)


# ----------------------------------------------------------------------- objectives


@FEW
@given(prompt=words, text=words)
def test_continuation_ids_split_a_tokenisation(llama, prompt, text):
    ids = continuation_ids(llama, prompt, " " + text)
    assert llama.tokenize([prompt])[0] + ids == llama.tokenize([f"{prompt} {text}"])[0]
    conv = [{"role": "user", "content": prompt}]
    cids = continuation_ids(llama, conv, " " + text)
    rendered = llama.format_chat(conv) + " " + text
    full = llama.tokenizer(rendered, add_special_tokens=False)["input_ids"]
    assert llama.tokenize([conv])[0] + cids == full


@FEW
@given(prompt=words, target=st.sampled_from(["sky", "is blue", "help"]), k=st.integers(1, 4))
def test_token_gradients_agree_with_target_logprob(llama, prompt, target, k):
    grads = lm.token_gradients(llama, [prompt], target, positions=Positions.last(1))
    assert isinstance(grads, TokenGradients)
    torch.testing.assert_close(grads.logprob, lm.target_logprob(llama, [prompt], target),
                               atol=1e-4, rtol=1e-4)  # fmt: skip
    cur = int(grads.token_ids[0, 0])
    top = grads.top_candidates(k, exclude=[cur])
    assert top.shape == (1, 1, k) and cur not in top.reshape(-1).tolist()
    best = grads.values[0, 0].clone()
    best[cur] = -math.inf
    assert float(grads.values[0, 0, int(top[0, 0, 0])]) == float(best.max())
    one_line(lambda: grads.top_candidates(0), "'k'")
    one_line(lambda: grads.top_candidates(2, exclude=[10**6]), "'exclude'")


@FEW
@given(ids=st.lists(st.integers(8, 8 + len(WORDS) - 1), min_size=1, max_size=4, unique=True),
       scale=st.floats(0.5, 4.0))  # fmt: skip
def test_projection_of_token_embeddings_finds_those_tokens(llama, ids, scale):
    emb = llama.embed(torch.tensor(ids))
    proj = lm.project_to_tokens(llama, scale * emb, metric="cosine")
    assert isinstance(proj, TokenProjection)
    assert proj.token_ids.tolist() == ids
    torch.testing.assert_close(proj.semantic_distance, torch.zeros(len(ids)), atol=1e-5, rtol=0)
    torch.testing.assert_close(proj.embeds, emb)
    assert float(proj.mean_semantic_distance) == pytest.approx(0.0, abs=1e-5)


# ----------------------------------------------------------------------- formatting and loading


@FEW
@given(text=words, reply=words)
def test_format_chat_renders_templates_like_the_tokenizer(llama, text, reply):
    conv = [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
    template = llama.tokenizer.chat_template
    assert format_chat(conv, template) == format_chat(conv, llama.tokenizer)
    assert format_chat(conv, template) == llama.tokenizer.apply_chat_template(
        conv, tokenize=False, add_generation_prompt=True)  # fmt: skip
    assert format_chat(text) == f"User: {text}\nAssistant:"
    assert format_chat(conv, None, add_generation_prompt=False) == f"User: {text}\nAssistant: {reply}"


def test_load_and_resolvers_round_trip(llama, llama_dir, monkeypatch):
    from trustlab.lm import loading

    monkeypatch.setattr(loading, "_RESOLVERS", dict(loading._RESOLVERS))
    calls = []

    def resolver(name, *, dtype, device):
        calls.append((name, dtype, device))
        return llama

    register_resolver("lmthirtyeight", resolver)
    assert "lmthirtyeight" in registered_schemes() and registered_schemes()[0] == "hf"
    assert load("lmthirtyeight:tiny") is llama and calls == [("tiny", None, None)]
    again = load(llama_dir)  # a Path means hf:
    batch = llama.encode(["hello world"])
    torch.testing.assert_close(again.forward(batch), llama.forward(batch))


@pytest.mark.parametrize(("call", "names"), [
    (lambda: register_resolver(5, lambda *a, **k: None), ("scheme",)),
    (lambda: register_resolver("hf", lambda *a, **k: None), ("scheme",)),
    (lambda: register_resolver("lmthirtyeight", 5), ("'resolver'",)),
    (lambda: load(5), ("model spec",)),
    (lambda: load("nosuchscheme:x"), ("scheme",)),
    (lambda: load("hf:/nonexistent/folder"), ("No model",)),
    (lambda: format_chat(5), ("conversation",)),
    (lambda: format_chat("hi", 5), ("format_chat",)),
    (lambda: format_chat("hi", "{% for %}"), ("Jinja",)),
    (lambda: format_chat([{"role": "user", "content": None}]), ("conversation",)),
])
def test_malformed_loading_and_formatting_are_named(call, names):
    one_line(call, *names)


def test_continuation_ids_reject_what_is_not_text(llama):
    one_line(lambda: continuation_ids(llama, "hello", ""), "'text'")
    one_line(lambda: continuation_ids(llama, 5, "sky"), "'prompt'")
