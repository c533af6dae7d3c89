"""Constraints and quality measures of a rewrite: claim preservation, character distance,
fluency.

* :class:`ClaimCheck` — the rewrite must keep the claim: cosine similarity of sentence
  embeddings (MiniLM by default) at or above ``threshold``, and, optionally, a
  :class:`ConsistencyJudge` over any chat model must answer that the rewrite makes the same
  request or claim without contradicting it. Rejections are counted by reason.
* :func:`char_similarity` — ``1 - Levenshtein / max(len)``, BODEGA's character score.
* :func:`fluency_ratio` — perplexity of the rewrite over perplexity of the original under a
  causal language model (``> 1``: less fluent than the original).
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from trustlab.core.errors import InputError
from trustlab.detectors import check_texts

__all__ = [
    "ClaimCheck",
    "ClaimVerdicts",
    "ConsistencyJudge",
    "char_similarity",
    "fluency_ratio",
    "levenshtein",
]


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions of characters)."""
    if not isinstance(a, str) or not isinstance(b, str):
        raise InputError("levenshtein compares two strings.")
    if len(a) < len(b):
        a, b = b, a
    prev = np.arange(len(b) + 1)
    bb = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32) if b else np.zeros(0, np.uint32)
    for i, ch in enumerate(a, start=1):
        cost = (bb != ord(ch)).astype(np.int64)
        cur = np.empty_like(prev)
        cur[0] = i
        sub = prev[:-1] + cost
        dele = prev[1:] + 1
        best = np.minimum(sub, dele)
        # insertions run left to right: cur[j] = min(best[j-1], cur[j-1] + 1)
        for j in range(1, len(b) + 1):
            v = best[j - 1]
            w = cur[j - 1] + 1
            cur[j] = v if v < w else w
        prev = cur
    return int(prev[-1])


def char_similarity(original: str, rewrite: str) -> float:
    """BODEGA's character score: ``1 - levenshtein / max(len(original), len(rewrite))``."""
    if not isinstance(original, str) or not isinstance(rewrite, str):
        raise InputError("char_similarity compares two strings.")
    n = max(len(original), len(rewrite))
    return 1.0 if n == 0 else 1.0 - levenshtein(original, rewrite) / n


_YES = re.compile(r"^\W*(yes|same|consistent)\b", re.IGNORECASE)
_NO = re.compile(r"^\W*(no|different|contradict\w*)\b", re.IGNORECASE)


class ConsistencyJudge:
    """Asks a chat model whether the rewrite makes the same request or claim as the original
    without contradicting it; the reply must start with yes or no (else no verdict: None)."""

    def __init__(self, chat_model: Any, *, max_new_tokens: int = 4) -> None:
        if not hasattr(chat_model, "generate"):
            raise InputError(
                "The 'chat_model' parameter of ConsistencyJudge must have generate(...). Got "
                f"{type(chat_model).__name__}."
            )
        self.chat_model = chat_model
        self.max_new_tokens = max_new_tokens

    def verdicts(self, originals: Sequence[str], rewrites: Sequence[str]) -> list[bool | None]:
        a = check_texts(originals, "originals", "ConsistencyJudge.verdicts", allow_empty=True)
        b = check_texts(rewrites, "rewrites", "ConsistencyJudge.verdicts", allow_empty=True)
        if len(a) != len(b):
            raise InputError("ConsistencyJudge.verdicts needs one rewrite per original.")
        if not a:
            return []
        convs = [
            [{"role": "user", "content": (
                f"Text A: {x}\nText B: {y}\nDoes text B make the same request or claim as text "
                "A, without contradicting it? Answer yes or no."
            )}]
            for x, y in zip(a, b, strict=True)
        ]  # fmt: skip
        replies = self.chat_model.generate(convs, max_new_tokens=self.max_new_tokens, temperature=0.0, seed=0)
        out: list[bool | None] = []
        for r in replies:
            out.append(True if _YES.match(r or "") else False if _NO.match(r or "") else None)
        return out


@dataclass(frozen=True)
class ClaimVerdicts:
    """Per rewrite: ``accepted``, the embedding ``similarity``, the judge's answer (None: no
    judge or no verdict) and the reason it was rejected (``""`` when accepted)."""

    accepted: NDArray[np.bool_]
    similarity: NDArray[np.float64]
    judge: tuple[bool | None, ...]
    reasons: tuple[str, ...]


class ClaimCheck:
    """Claim preservation: embedding similarity ≥ ``threshold`` and (optionally) the judge.

    ``embedder``: any :class:`~trustlab.embed.Embedder` (None: MiniLM with the shared cache).
    ``judge``: a :class:`ConsistencyJudge` or None; a rewrite the judge gives no verdict on is
    rejected (reason ``judge_unparseable``) when ``reject_unparseable``.
    """

    def __init__(
        self,
        embedder: Any = None,
        *,
        threshold: float = 0.75,
        judge: ConsistencyJudge | None = None,
        reject_unparseable: bool = True,
    ) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not (
            -1.0 <= float(threshold) <= 1.0
        ):
            raise InputError(
                f"The 'threshold' parameter of ClaimCheck must be a cosine in [-1, 1]. Got {threshold!r}."
            )
        if judge is not None and not hasattr(judge, "verdicts"):
            raise InputError("The 'judge' parameter of ClaimCheck must have verdicts(...).")
        self.embedder = embedder
        self.threshold = float(threshold)
        self.judge = judge
        self.reject_unparseable = reject_unparseable

    def _emb(self) -> Any:
        if self.embedder is None:
            from trustlab.detectors.text import default_embedder

            return default_embedder()
        return self.embedder

    def similarity(self, originals: Sequence[str], rewrites: Sequence[str]) -> NDArray[np.float64]:
        a = check_texts(originals, "originals", "ClaimCheck.similarity", allow_empty=True)
        b = check_texts(rewrites, "rewrites", "ClaimCheck.similarity", allow_empty=True)
        if len(a) != len(b):
            raise InputError(
                f"ClaimCheck.similarity needs one rewrite per original. Got {len(a)} and {len(b)}."
            )
        if not a:
            return np.zeros(0)
        vecs = self._emb().encode(list(dict.fromkeys(a + b)))
        index = {t: i for i, t in enumerate(dict.fromkeys(a + b))}
        ea = vecs[[index[t] for t in a]]
        eb = vecs[[index[t] for t in b]]
        return np.clip(np.sum(ea * eb, axis=1).astype(np.float64), -1.0, 1.0)

    def check(self, originals: Sequence[str], rewrites: Sequence[str]) -> ClaimVerdicts:
        sim = self.similarity(originals, rewrites)
        ok = sim >= self.threshold
        reasons = ["" if o else "similarity" for o in ok]
        judged: list[bool | None] = [None] * len(sim)
        if self.judge is not None and ok.any():
            idx = np.flatnonzero(ok)
            got = self.judge.verdicts([originals[i] for i in idx], [rewrites[i] for i in idx])
            for i, v in zip(idx, got, strict=True):
                judged[i] = v
                if v is False:
                    ok[i], reasons[i] = False, "judge_contradiction"
                elif v is None and self.reject_unparseable:
                    ok[i], reasons[i] = False, "judge_unparseable"
        return ClaimVerdicts(ok, sim, tuple(judged), tuple(reasons))


def fluency_ratio(
    model: Any, originals: Sequence[str], rewrites: Sequence[str], *, batch_size: int = 16
) -> NDArray[np.float64]:
    """Perplexity(rewrite) / perplexity(original) per pair under ``model`` (a
    :class:`~trustlab.lm.LanguageModel`), each text scored after the prompt ``"Text:"``."""
    from trustlab import lm

    a = check_texts(originals, "originals", "fluency_ratio")
    b = check_texts(rewrites, "rewrites", "fluency_ratio")
    if len(a) != len(b):
        raise InputError("fluency_ratio needs one rewrite per original.")
    texts = a + b
    per_tok = lm.sequence_logprobs(
        model, ["Text:"] * len(texts), [" " + t.strip() for t in texts], per_token=True,
        batch_size=batch_size,
    )  # fmt: skip
    nll = np.array([-float(t.float().mean()) for t in per_tok])
    return np.exp(nll[len(a):] - nll[: len(a)])
