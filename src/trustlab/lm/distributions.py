"""Output distributions under any active intervention, and distances between categoricals.

All distances take probability vectors along the last axis (or log-probabilities with
``log=True``, more accurate for tiny probabilities) and are computed in float64:

    fisher_rao(p, q) = 2 arccos(sum_i sqrt(p_i q_i))      in [0, pi]
                     = 4 arcsin(||sqrt(p) - sqrt(q)||_2 / 2)   (the form used: exact near 0)
    kl_divergence(p, q) = sum_i p_i (log p_i - log q_i)    (0 log 0 = 0; inf if q_i = 0 < p_i)
    total_variation(p, q) = 1/2 sum_i |p_i - q_i|
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from trustlab.core.errors import InputError
from trustlab.lm._checks import check_count
from trustlab.lm.activations import Progress, batches
from trustlab.lm.model import LanguageModel, Prompt

__all__ = [
    "fisher_rao",
    "kl_divergence",
    "next_token_logprobs",
    "next_token_probs",
    "sequence_logprobs",
    "total_variation",
]


def next_token_logprobs(
    lm: LanguageModel,
    prompts: Sequence[Prompt],
    *,
    batch_size: int = 32,
    progress: Progress | None = None,
) -> torch.Tensor:
    """Log-probabilities ``[n_prompts, vocab]`` (float32, CPU) of the token after each prompt.

    Conversations are chat-formatted with the generation prompt, so this is the distribution
    of the first response token. Active interventions apply.
    """
    if len(prompts) == 0:
        raise InputError("next_token_logprobs needs at least one prompt.")
    out = torch.empty((len(prompts), lm.vocab_size), dtype=torch.float32)
    with torch.no_grad():
        for chunk, batch in batches(
            lm, prompts, batch_size, progress=progress, description="next-token"
        ):
            logits = lm.forward(batch, last_only=True)[:, -1, :]  # left padding: last = last token
            out[torch.as_tensor(chunk)] = torch.log_softmax(logits.float(), -1).cpu()
    return out


def next_token_probs(lm: LanguageModel, prompts: Sequence[Prompt], **kwargs) -> torch.Tensor:
    """Probabilities ``[n_prompts, vocab]``; see :func:`next_token_logprobs`."""
    return next_token_logprobs(lm, prompts, **kwargs).exp()


def sequence_logprobs(
    lm: LanguageModel,
    prompts: Sequence[Prompt],
    continuations: Sequence[str],
    *,
    batch_size: int = 32,
    per_token: bool = False,
    progress: Progress | None = None,
) -> torch.Tensor | list[torch.Tensor]:
    """``log P(continuation | prompt)`` summed over the continuation's tokens (teacher forcing).

    The continuation is tokenized on its own (no special tokens) and appended to the prompt's
    tokens. ``per_token=True`` returns one tensor of token log-probabilities per pair.
    """
    if len(prompts) != len(continuations) or len(prompts) == 0:
        raise InputError(
            f"sequence_logprobs needs as many continuations as prompts (>0). Got "
            f"{len(prompts)} prompts and {len(continuations)} continuations."
        )
    # batch_size 0 used to raise a raw ValueError, 2.5 a raw TypeError
    batch_size = check_count(batch_size, "batch_size", "sequence_logprobs")
    if any(not isinstance(c, str) for c in continuations) or isinstance(continuations, str):
        raise InputError("The 'continuations' parameter of sequence_logprobs must be a list of strings.")
    prompt_ids = lm.tokenize(prompts)
    cont_ids = [list(lm.tokenizer(c, add_special_tokens=False)["input_ids"]) for c in continuations]
    if any(len(c) == 0 for c in cont_ids):
        raise InputError("Every continuation must encode to at least one token.")
    results: list[torch.Tensor | None] = [None] * len(prompts)
    order = sorted(range(len(prompts)), key=lambda i: len(prompt_ids[i]) + len(cont_ids[i]))
    chunks = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    items = (
        chunks if progress is None else progress(chunks, description="log-probs", total=len(chunks))
    )
    with torch.no_grad():
        for chunk in items:
            batch = lm.pad([prompt_ids[i] + cont_ids[i] for i in chunk], "left")
            logp = torch.log_softmax(lm.forward(batch).float(), -1)
            width = batch.input_ids.shape[1]
            for row, i in enumerate(chunk):
                n_cont = len(cont_ids[i])
                targets = batch.input_ids[row, width - n_cont :]
                preds = logp[row, width - n_cont - 1 : width - 1]
                results[i] = preds.gather(-1, targets.unsqueeze(-1)).squeeze(-1).cpu()
    if per_token:
        return [r for r in results if r is not None]
    return torch.stack([r.sum() for r in results if r is not None])


def _pair(p: torch.Tensor, q: torch.Tensor, log: bool, name: str) -> tuple[torch.Tensor, ...]:
    p = torch.as_tensor(p, dtype=torch.float64)
    q = torch.as_tensor(q, dtype=torch.float64)
    if p.shape != q.shape or p.dim() == 0:
        raise InputError(
            f"{name} needs two distributions of the same shape. Got "
            f"{tuple(p.shape)} and {tuple(q.shape)}."
        )
    if log:
        if bool(torch.isnan(p).any() | torch.isnan(q).any()) or bool(
            (p > 1e-6).any() | (q > 1e-6).any()
        ):
            raise InputError(f"{name}(log=True) needs log-probabilities (<= 0, no NaN).")
        lp, lq = p, q
        p, q = lp.exp(), lq.exp()
    else:
        if bool((p < 0).any() | (q < 0).any()) or not bool(
            torch.isfinite(p).all() & torch.isfinite(q).all()
        ):
            raise InputError(f"{name} needs non-negative, finite probabilities.")
        lp, lq = torch.log(p), torch.log(q)
    for dist in (p, q):
        total = dist.sum(-1)
        if bool(((total - 1).abs() > 1e-4).any()):
            raise InputError(
                f"{name} needs distributions that sum to 1 along the last axis. "
                f"Got sums in [{float(total.min()):.6g}, {float(total.max()):.6g}]."
            )
    return p, q, lp, lq


def fisher_rao(p: torch.Tensor, q: torch.Tensor, *, log: bool = False) -> torch.Tensor:
    """Fisher–Rao distance ``2 arccos(BC(p, q))`` between categoricals (last axis), in [0, pi].

    Computed as ``4 arcsin(||sqrt p - sqrt q|| / 2)``, which equals it exactly but keeps full
    precision for nearly identical distributions (where arccos near 1 loses it).
    """
    p, q, lp, lq = _pair(p, q, log, "fisher_rao")
    sp = (0.5 * lp).exp() if log else p.sqrt()
    sq = (0.5 * lq).exp() if log else q.sqrt()
    half_chord = ((sp - sq).square().sum(-1).sqrt() / 2).clamp(0.0, 1.0 / (2**0.5))
    return 4.0 * torch.arcsin(half_chord)


def kl_divergence(p: torch.Tensor, q: torch.Tensor, *, log: bool = False) -> torch.Tensor:
    """``KL(p || q)`` in nats along the last axis (0 log 0 = 0; +inf where q = 0 < p)."""
    p, q, lp, lq = _pair(p, q, log, "kl_divergence")
    terms = torch.where(p > 0, p * (lp - lq), torch.zeros_like(p))
    return terms.sum(-1).clamp_min(0.0)


def total_variation(p: torch.Tensor, q: torch.Tensor, *, log: bool = False) -> torch.Tensor:
    """Total-variation distance ``1/2 sum |p - q|`` along the last axis, in [0, 1]."""
    p, q, _, _ = _pair(p, q, log, "total_variation")
    return 0.5 * (p - q).abs().sum(-1)
