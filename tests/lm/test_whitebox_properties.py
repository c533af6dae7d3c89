"""Property tests (issue 38's contract) for the white-box functions: any input gives a correct
result or an InputError naming the problem — never a raw exception or a NaN-filled result."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lm_testkit import VOCAB

from trustlab import lm
from trustlab.core.errors import InputError

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

_token = st.integers(min_value=-3, max_value=VOCAB + 3)
_ids = st.one_of(
    st.lists(_token, min_size=0, max_size=6),
    st.lists(st.lists(_token, min_size=1, max_size=4), min_size=1, max_size=3),
    st.lists(st.floats(allow_nan=True), min_size=1, max_size=3),
    st.text(max_size=5),
)
_special = st.sampled_from([0.0, float("nan"), float("inf"), -float("inf"), 1e30])


def _vectors(d_model: int):
    """Tensors of assorted shapes (sometimes the wrong width), sometimes with a bad value."""
    shape = st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple)
    width = st.sampled_from([d_model, d_model, d_model + 1, 1])
    return st.tuples(shape, width, st.booleans(), _special, st.integers(0, 2**16)).map(
        _make_vectors
    )


def _make_vectors(args) -> torch.Tensor:
    shape, width, poison, value, seed = args
    x = torch.randn((*shape, width), generator=torch.Generator().manual_seed(seed))
    if poison:
        x.view(-1)[0] = value
    return x


def _finite(t: torch.Tensor) -> bool:
    return bool(torch.isfinite(t).all())


@SETTINGS
@given(ids=_ids)
def test_embed_accepts_valid_ids_or_names_the_parameter(llama, ids):
    try:
        out = llama.embed(ids)
    except InputError as exc:
        assert "ids" in str(exc)
        return
    assert out.shape[-1] == llama.d_model and _finite(out)
    flat = torch.as_tensor(ids).reshape(-1)
    assert flat.numel() == 0 or (int(flat.min()) >= 0 and int(flat.max()) < llama.n_embeddings)


@SETTINGS
@given(data=st.data(), soft_at=st.sampled_from(["start", "instruction_end", "end", "mid"]))
def test_encode_with_soft_vectors_is_valid_or_named(llama, data, soft_at):
    soft = data.draw(_vectors(llama.d_model))
    prompts = ["hello world", [{"role": "user", "content": "sky is blue"}]]
    try:
        batch = llama.encode(prompts, soft=soft, soft_at=soft_at)
    except InputError as exc:
        assert "soft" in str(exc)
        return
    n_free = soft.shape[-2]
    assert batch.free_mask.sum(1).tolist() == [n_free, n_free]
    assert _finite(llama.forward(batch))


@SETTINGS
@given(
    target=st.one_of(
        st.text(alphabet="abhelosky wr", max_size=12),
        st.lists(st.sampled_from(["sky", "hello", "", "is blue"]), min_size=0, max_size=3),
        st.integers(),
    )
)
def test_target_logprob_is_finite_or_named(llama, target):
    try:
        lp = lm.target_logprob(llama, ["hello world", "sky is"], target)
    except InputError as exc:
        assert "target" in str(exc)
        return
    assert lp.shape == (2,) and _finite(lp) and bool((lp <= 0).all())


@SETTINGS
@given(data=st.data(), metric=st.sampled_from(["cosine", "l2", "dot"]))
def test_project_to_tokens_is_valid_or_named(llama, data, metric):
    vectors = data.draw(_vectors(llama.d_model))
    try:
        proj = lm.project_to_tokens(llama, vectors, metric=metric)
    except InputError as exc:
        assert "vectors" in str(exc) or "metric" in str(exc)
        return
    assert proj.token_ids.shape == vectors.shape[:-1]
    assert _finite(proj.cosine) and bool((proj.cosine.abs() <= 1 + 1e-5).all())
    assert not set(proj.token_ids.reshape(-1).tolist()) & set(llama.tokenizer.all_special_ids)


@SETTINGS
@given(data=st.data())
def test_unembed_is_valid_or_named(llama, data):
    resid = data.draw(_vectors(llama.d_model))
    try:
        logits = lm.unembed(llama, resid)
    except InputError as exc:
        assert "resid" in str(exc)
        return
    assert logits.shape == (*resid.shape[:-1], llama.vocab_size)
    if _finite(resid) and float(resid.abs().max()) < 1e6:
        assert _finite(logits)


@SETTINGS
@given(
    target=st.one_of(_token, st.sampled_from(["sky", "is blue", ""]), st.lists(_token, max_size=3)),
    contrast=st.one_of(st.none(), _token),
)
def test_attribution_is_exact_or_named(llama, target, contrast):
    prompts = ["hello world", "sky is blue", "run"]
    try:
        att = lm.direct_logit_attribution(llama, prompts, target, contrast)
    except InputError as exc:
        assert "target" in str(exc) or "contrast" in str(exc)
        return
    assert _finite(att.values) and _finite(att.heads)
    err = float((att.total() - att.logit_diff).abs().max())
    assert err <= 1e-4 * max(1.0, float(att.values.abs().sum(1).max()))


_components = st.lists(
    st.sampled_from(
        [
            "embed",
            "blocks.0.attn_out",
            "blocks.2.head.3",
            "blocks.1.head.4",
            "blocks.3.mlp_out",
            "blocks.1.mlp_hidden",
            "blocks.0.head_out",
            "blocks.x",
            "blocks.1.resid_post",
        ]
    ),
    min_size=0,
    max_size=4,
)


@SETTINGS
@given(
    components=_components,
    positions=st.sampled_from(["last", "all", [0], [5], [0, -1]]),
    batch_size=st.integers(-1, 5),
)
def test_patching_is_valid_or_named(llama, components, positions, batch_size):
    src, tgt = ["hello world sky", "run the code"], ["sky is blue", "fix my bug"]
    try:
        res = lm.patch_activations(
            llama, src, tgt, components, (20, 35), positions=positions, batch_size=batch_size
        )
    except InputError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert res.patched.shape == (len(components), 2) and _finite(res.patched)
    assert not math.isnan(float(res.clean.sum()))


@pytest.mark.parametrize("bad", [None, "text", 3.5, [[0.5, 1.5]]])
def test_token_gradients_reject_non_token_prompts(llama, bad):
    with pytest.raises(InputError):
        lm.token_gradients(llama, bad, "sky")
