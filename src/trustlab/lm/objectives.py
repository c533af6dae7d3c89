"""Differentiable objectives for attacks in embedding space and discrete token search.

    lp = target_logprob(lm, soft_batch, "Sure, here is")       # [B], differentiable
    lp.sum().backward()                                         # gradients reach the soft vectors
    grads = token_gradients(lm, ids, "Sure, here is", positions=Positions.last(8))
    top = (grads.values).topk(64, dim=-1).indices               # GCG candidate substitutions
    proj = project_to_tokens(lm, soft, metric="cosine")         # back to the vocabulary

* :func:`target_logprob` — ``log P(target | prompt)`` by teacher forcing, summed over the
  target's tokens, for prompts given as soft vectors, a :class:`Batch` (token ids or
  ``inputs_embeds``), token ids, or prompt strings/conversations. Gradients flow to every float
  tensor that went into the prompt; the model's weights stay out of the graph.
* :func:`token_gradients` — the one-hot trick of GCG (Zou et al., 2023) and AutoPrompt: the
  gradient of the target log-probability with respect to a one-hot encoding of the prompt
  tokens at chosen positions, ``[B, P, vocab]``. Its entry ``(b, p, v)`` is the first-order
  change of ``log P(target)`` when token ``p`` of row ``b`` is replaced by ``v``
  (``grad_e · (W_E[v] - W_E[current])`` up to a constant per position): large is better.
* :func:`continuation_ids` — the token ids a text adds when it follows a prompt, tokenised in
  context (a reply format such as ``<tool_call>`` may tokenise differently on its own); pass
  them to :func:`target_logprob` as the target.
* :func:`project_to_tokens` — the nearest vocabulary token of each continuous vector (cosine or
  L2 over the input embedding matrix, as PEZ / hard-prompt projection does), with how far the
  projection moved each vector (cosine similarity, L2 distance, relative L2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar
from trustlab.lm.model import Batch, LanguageModel, Prompt, Segment
from trustlab.lm.positions import PositionLike, as_positions

__all__ = [
    "PromptLike",
    "TokenGradients",
    "TokenProjection",
    "as_batch",
    "continuation_ids",
    "project_to_tokens",
    "target_logprob",
    "token_gradients",
]

PromptLike = torch.Tensor | Batch | Sequence[int] | Sequence[Sequence[int]] | Sequence[Prompt]
"""A prompt batch: float vectors [T, D] / [B, T, D] (every position real), a :class:`Batch`,
token ids ([T], [B, T] or a list of lists, possibly ragged), or strings / conversations."""


def as_batch(lm: LanguageModel, prompt: PromptLike, name: str = "prompt") -> Batch:
    """A left-padded :class:`Batch` from any :data:`PromptLike`."""
    if isinstance(prompt, Batch):
        return prompt
    if isinstance(prompt, torch.Tensor):
        if prompt.is_floating_point():
            vectors = prompt.unsqueeze(0) if prompt.dim() == 2 else prompt
            if vectors.dim() != 3:
                raise InputError(
                    f"'{name}' as vectors must be [T, d_model] or [B, T, d_model]. "
                    f"Got {tuple(prompt.shape)}."
                )
            return lm.embed_batch([[v] for v in vectors])
        ids = prompt.unsqueeze(0) if prompt.dim() == 1 else prompt
        if ids.dim() != 2:
            raise InputError(
                f"'{name}' as token ids must be [T] or [B, T]. Got {tuple(prompt.shape)}."
            )
        return lm.pad([lm._check_ids(row, name).tolist() for row in ids])
    if isinstance(prompt, str) or not isinstance(prompt, Sequence) or len(prompt) == 0:
        raise InputError(
            f"'{name}' must be vectors, a Batch, token ids or a non-empty list of prompts. "
            f"Got {type(prompt).__name__}."
        )
    first = prompt[0]
    if isinstance(first, int) and not isinstance(first, bool):
        return lm.pad([lm._check_ids(list(prompt), name).tolist()])
    if (
        isinstance(first, Sequence)
        and not isinstance(first, str)
        and len(first) > 0
        and all(isinstance(t, int) and not isinstance(t, bool) for t in first)
    ):
        return lm.pad([lm._check_ids(list(row), name).tolist() for row in prompt])
    return lm.encode(list(prompt))  # strings or conversations


def continuation_ids(lm: LanguageModel, prompt: Prompt, text: str) -> list[int]:
    """The token ids ``text`` adds when it directly follows ``prompt`` (rendered as
    :meth:`LanguageModel.tokenize` renders it: conversations through the chat format).

    Tokenised in context: ``tokens(prompt + text)`` minus ``tokens(prompt)``. A text whose first
    token merges with the prompt's last one (so no clean boundary exists) is an error.
    """
    if not isinstance(text, str) or not text:
        raise InputError(f"'text' must be a non-empty string. Got {text!r:.60}.")
    if isinstance(prompt, str):
        rendered, special = prompt, True
    elif isinstance(prompt, Sequence):
        rendered, special = lm.format_chat(prompt), not lm.has_chat_template
    else:
        raise InputError(
            f"'prompt' must be a string or a conversation. Got {type(prompt).__name__}."
        )
    head = list(lm.tokenizer(rendered, add_special_tokens=special)["input_ids"])
    full = list(lm.tokenizer(rendered + text, add_special_tokens=special)["input_ids"])
    if full[: len(head)] != head or len(full) == len(head):
        raise InputError(
            f"{text!r:.40} does not tokenise as a continuation of the prompt: its first token "
            "merges with the prompt's last one. Give the text with the separator it follows."
        )
    return full[len(head) :]


def _target_ids(
    lm: LanguageModel, target: str | Sequence[str] | Sequence[int] | Sequence[Sequence[int]], n: int
) -> list[list[int]]:
    """One list of target ids per row, from text (tokenised on its own) or from token ids."""
    if isinstance(target, torch.Tensor) and _is_ids(target):
        target = target.tolist()
    if _is_ids(target):
        return [lm._check_ids(list(target), "target").tolist()] * n  # type: ignore[arg-type]
    if (
        isinstance(target, Sequence)
        and not isinstance(target, str)
        and len(target) > 0
        and all(_is_ids(t) for t in target)
    ):
        if len(target) != n:
            raise InputError(
                f"'target' must give one token list per prompt ({n}). Got {len(target)}."
            )
        return [lm._check_ids(list(t), "target").tolist() for t in target]  # type: ignore[arg-type]
    if isinstance(target, str):
        texts = [target] * n
    elif isinstance(target, Sequence) and not isinstance(target, bytes):
        texts = list(target)
    else:
        texts = []
    if len(texts) != n or not all(isinstance(t, str) for t in texts):
        raise InputError(
            f"'target' must be one string or one string per prompt ({n}). Got {target!r:.80}."
        )
    ids = [list(lm.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    empty = [t for t, i in zip(texts, ids, strict=True) if not i]
    if empty:
        raise InputError(f"Every 'target' must encode to at least one token. Got {empty[0]!r}.")
    return ids


def _is_ids(value: object) -> bool:
    """A non-empty list/tuple/1-D tensor of ints (token ids), not a list of strings."""
    if isinstance(value, torch.Tensor):
        return value.dim() == 1 and value.numel() > 0 and not value.is_floating_point()
    return (
        isinstance(value, list | tuple)
        and len(value) > 0
        and all(isinstance(t, int) and not isinstance(t, bool) for t in value)
    )


def _with_targets(lm: LanguageModel, batch: Batch, targets: list[list[int]]) -> Batch:
    """Each row's real prompt positions followed by its target tokens, left-padded.

    A token-id batch stays token ids; a batch with ``inputs_embeds`` keeps its vectors (and
    their autograd graph) and gets the target's token embeddings appended.
    """
    real = batch.attention_mask.bool()
    if batch.inputs_embeds is None:
        rows = [batch.input_ids[b][real[b]].tolist() + t for b, t in enumerate(targets)]
        return lm.pad(rows)
    segs: list[list[Segment]] = [
        [batch.inputs_embeds[b][real[b]], t] for b, t in enumerate(targets)
    ]
    out = lm.embed_batch(segs)
    assert batch.free_mask is not None and out.free_mask is not None
    free = out.free_mask.clone()  # keep the prompt's own free/token distinction
    ids = out.input_ids.clone()
    for b, t in enumerate(targets):
        n_prompt = int(real[b].sum())
        cols = slice(out.width - len(t) - n_prompt, out.width - len(t))
        free[b, cols] = batch.free_mask[b][real[b]]
        ids[b, cols] = batch.input_ids[b][real[b]]
    return Batch(
        ids,
        out.attention_mask,
        out.position_ids,
        out.prompt_len,
        out.inputs_embeds,
        free,
    )


def _needs_grad(batch: Batch) -> bool:
    return (
        batch.inputs_embeds is not None
        and batch.inputs_embeds.requires_grad
        and torch.is_grad_enabled()
    )


def target_logprob(
    lm: LanguageModel,
    prompt: PromptLike,
    target: str | Sequence[str] | Sequence[int] | Sequence[Sequence[int]],
    *,
    per_token: bool = False,
) -> torch.Tensor | list[torch.Tensor]:
    """``log P(target | prompt)`` [B] (float32), summed over the target's tokens.

    ``prompt``: soft vectors [T, D] or [B, T, D], a :class:`Batch` (e.g. from
    ``lm.encode(prompts, soft=...)``), token ids, or prompt strings / conversations (as in
    :meth:`LanguageModel.tokenize`). ``target``: one text for every row, or one per row; it is
    tokenized on its own (no special tokens) and appended right after each prompt's last real
    position. Token ids (one list for every row, or one list per row, e.g. from
    :func:`continuation_ids`) are appended as they are. When the prompt's vectors require grad (and grad mode is on), the result is
    differentiable with respect to them; the model's weights are kept out of the graph.
    Active interventions apply. ``per_token=True`` gives one tensor of token log-probs per row.
    """
    batch = as_batch(lm, prompt)
    targets = _target_ids(lm, target, batch.size)
    full = _with_targets(lm, batch, targets)
    longest = max(len(t) for t in targets)
    grad = _needs_grad(full)
    logits = _last_logits(lm, full, longest + 1, grad)  # [B, longest + 1, V]
    logp = torch.log_softmax(logits.float(), -1)
    out = []
    for b, t in enumerate(targets):
        n = len(t)
        preds = logp[b, longest - n : longest]  # the positions that predict the target tokens
        ids = torch.as_tensor(t, device=preds.device).unsqueeze(-1)
        out.append(preds.gather(-1, ids).squeeze(-1))
    if per_token:
        return out
    return torch.stack([o.sum() for o in out])


def _last_logits(lm: LanguageModel, batch: Batch, k: int, grad: bool) -> torch.Tensor:
    """Logits of the last ``k`` columns (left padding: every row's last ``k`` positions)."""
    kwargs = lm.model_inputs(batch)
    if lm._accepts_logits_to_keep:
        kwargs["logits_to_keep"] = k
    frozen = lm.frozen_parameters() if grad else torch.no_grad()
    with frozen, torch.set_grad_enabled(grad):
        logits = lm.model(use_cache=False, **kwargs).logits
    return logits[:, -k:, :]


@dataclass(frozen=True)
class TokenGradients:
    """Result of :func:`token_gradients`.

    ``values`` [B, P, n_embeddings]: d log P(target) / d one-hot at each selected position;
    ``columns`` [B, P]: where those positions sit in the (left-padded) batch;
    ``token_ids`` [B, P]: the current tokens there; ``logprob`` [B]: log P(target) now.
    """

    values: torch.Tensor
    columns: torch.Tensor
    token_ids: torch.Tensor
    logprob: torch.Tensor

    def top_candidates(self, k: int, *, exclude: Sequence[int] = ()) -> torch.Tensor:
        """The ``k`` substitutions per position with the largest first-order gain [B, P, k]."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InputError(f"'k' must be an integer >= 1. Got {k!r}.")
        scores = self.values.clone()
        if exclude:
            drop = [check_scalar(t.item() if hasattr(t, "item") else t, "exclude",
                                 "TokenGradients.top_candidates", kind=int, lo=0,
                                 hi=scores.shape[-1] - 1) for t in exclude]  # fmt: skip
            scores[..., torch.as_tensor(drop, dtype=torch.long)] = -torch.inf
        return scores.topk(min(k, scores.shape[-1]), dim=-1).indices


def token_gradients(
    lm: LanguageModel,
    prompt: PromptLike,
    target: str | Sequence[str],
    *,
    positions: PositionLike = "prompt",
) -> TokenGradients:
    """Gradients of ``log P(target | prompt)`` with respect to one-hot token encodings.

    ``prompt``: token ids or prompt strings / conversations (anything :func:`as_batch` takes
    that is made of tokens). ``positions``: which prompt tokens to differentiate, counted over
    each prompt's real tokens — a fixed-count spec (``Positions.last(k)``, indices) or
    ``"prompt"`` (every token; the rows must then have equal lengths). The one-hot rows are
    multiplied into the (scaled) embedding matrix, so the forward pass is the token-id forward
    (same log-probability).
    """
    batch = as_batch(lm, prompt)
    if batch.inputs_embeds is not None and bool(batch.free_mask.any()):  # type: ignore[union-attr]
        raise InputError("token_gradients needs a prompt made of tokens, not free vectors.")
    pos = as_positions(positions)
    lengths = batch.prompt_len
    if pos.kind == "prompt":
        if bool((lengths != lengths[0]).any()):
            raise InputError(
                "positions='prompt' needs prompts of equal token counts; give fixed-count "
                "positions (Positions.last(k) or indices) for ragged prompts."
            )
        targets_idx = torch.arange(int(lengths[0]), device=lengths.device).expand(batch.size, -1)
    elif pos.is_fixed_count:
        targets_idx = pos.prompt_targets(lengths, lm.n_post_instruction_or_none)
    else:
        raise InputError(
            f"token_gradients takes fixed-count positions or 'prompt'. Got {pos.describe()}."
        )
    columns = batch.width - lengths.view(-1, 1) + targets_idx  # left padding
    rows = torch.arange(batch.size, device=columns.device).unsqueeze(1)
    current = batch.input_ids[rows, columns]
    matrix = lm.model.get_input_embeddings().weight.detach()
    one_hot = torch.nn.functional.one_hot(current, matrix.shape[0]).to(matrix.dtype)
    one_hot.requires_grad_(True)
    # the embedding module's own scale (Gemma), applied as the module applies it
    scale = getattr(lm.model.get_input_embeddings(), "embed_scale", None)
    chosen = one_hot @ matrix
    if isinstance(scale, torch.Tensor):
        chosen = chosen * scale.to(matrix.dtype)
    embeds = lm.embed(batch.input_ids).clone()
    embeds[rows, columns] = chosen
    soft = Batch(
        batch.input_ids,
        batch.attention_mask,
        batch.position_ids,
        batch.prompt_len,
        embeds,
        torch.zeros_like(batch.input_ids, dtype=torch.bool),
    )
    with torch.enable_grad():
        logprob = target_logprob(lm, soft, target)
        assert isinstance(logprob, torch.Tensor)
        (grad,) = torch.autograd.grad(logprob.sum(), one_hot)
    return TokenGradients(
        values=grad.float(), columns=columns, token_ids=current, logprob=logprob.detach()
    )


@dataclass(frozen=True)
class TokenProjection:
    """Result of :func:`project_to_tokens` (leading shape ``[...]`` of the vectors given).

    ``token_ids`` [...]: the nearest allowed token of each vector; ``embeds`` [..., D]: those
    tokens' input embeddings (what the projected prompt feeds the model); ``cosine`` [...]:
    cosine similarity between each vector and its token's embedding; ``l2`` [...]: their
    Euclidean distance; ``relative_l2`` [...]: ``l2 / ||vector||``; ``text``: the decoded
    tokens of each row (for [P, D] or [B, P, D] input). ``semantic_distance`` [...] is
    ``1 - cosine``, the angle-based distance the projection moved each vector (0: the vector
    was a token embedding direction); :attr:`mean_semantic_distance` averages it per row.
    """

    token_ids: torch.Tensor
    embeds: torch.Tensor
    cosine: torch.Tensor
    l2: torch.Tensor
    relative_l2: torch.Tensor
    text: list[str]
    metric: str

    @property
    def semantic_distance(self) -> torch.Tensor:
        return 1.0 - self.cosine

    @property
    def mean_semantic_distance(self) -> torch.Tensor:
        return self.semantic_distance.mean(-1)


def project_to_tokens(
    lm: LanguageModel,
    vectors: torch.Tensor,
    *,
    metric: Literal["cosine", "l2"] = "cosine",
    allowed: Sequence[int] | None = None,
    exclude_special: bool = True,
    chunk: int = 256,
) -> TokenProjection:
    """Project each continuous vector ``[..., d_model]`` to its nearest vocabulary token.

    ``metric="cosine"`` picks the token embedding with the largest cosine similarity,
    ``"l2"`` the smallest Euclidean distance, both against the embeddings the model reads
    (scale included). ``allowed`` restricts the candidates to those ids; by default every
    token except the tokenizer's special tokens (``exclude_special=False`` keeps them).
    """
    if metric not in ("cosine", "l2"):
        raise InputError(f"'metric' must be 'cosine' or 'l2'. Got {metric!r}.")
    lm.check_vectors(vectors, "vectors")
    if not bool(torch.isfinite(vectors).all()):
        raise InputError("'vectors' has non-finite entries.")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise InputError(f"'chunk' must be an integer >= 1. Got {chunk!r}.")
    matrix = lm.embedding_matrix().float()
    candidates = _candidates(lm, allowed, exclude_special)
    table = matrix[candidates]  # [C, D]
    flat = vectors.detach().reshape(-1, lm.d_model).float().to(table.device)
    table_norm = table.norm(dim=-1).clamp_min(1e-12)
    best = torch.empty(flat.shape[0], dtype=torch.long)
    for start in range(0, flat.shape[0], chunk):
        part = flat[start : start + chunk]
        if metric == "cosine":
            score = (part @ table.t()) / table_norm
        else:  # argmin ||v - e||^2 = argmax 2 v.e - ||e||^2
            score = 2 * (part @ table.t()) - table_norm.square()
        best[start : start + chunk] = score.argmax(-1).cpu()
    ids = candidates[best]
    chosen = table[best.to(table.device)]
    v_norm = flat.norm(dim=-1)
    cosine = (flat * chosen).sum(-1) / (
        v_norm.clamp_min(1e-12) * chosen.norm(dim=-1).clamp_min(1e-12)
    )
    l2 = (flat - chosen).norm(dim=-1)
    lead = vectors.shape[:-1]
    ids_out = ids.reshape(lead)
    if ids_out.dim() == 0:
        text = [lm.tokenizer.decode([int(ids_out)])]
    else:
        rows = ids_out.reshape(-1, ids_out.shape[-1])
        text = [lm.tokenizer.decode(r.tolist()) for r in rows]
    return TokenProjection(
        token_ids=ids_out,
        embeds=lm.embed(ids_out.to(lm.device)),
        cosine=cosine.reshape(lead).cpu(),
        l2=l2.reshape(lead).cpu(),
        relative_l2=(l2 / v_norm.clamp_min(1e-12)).reshape(lead).cpu(),
        text=text,
        metric=metric,
    )


def _candidates(
    lm: LanguageModel, allowed: Sequence[int] | None, exclude_special: bool
) -> torch.Tensor:
    if allowed is not None:
        ids = lm._check_ids(list(allowed), "allowed").reshape(-1).unique()
        if ids.numel() == 0:
            raise InputError("'allowed' must name at least one token id.")
        return ids.cpu()
    ids = torch.arange(lm.n_embeddings)
    if exclude_special:
        special = [i for i in getattr(lm.tokenizer, "all_special_ids", []) if i < lm.n_embeddings]
        keep = torch.ones(lm.n_embeddings, dtype=torch.bool)
        keep[torch.as_tensor(special, dtype=torch.long)] = False
        ids = ids[keep]
    return ids
