"""The decoder every local generation goes through: KV-cached, batched, with early stopping.

``generate_rows(lm, prompts, ...)`` prefills a batch once and then decodes one token per step
over the KV cache. Three things make it faster than ``transformers``' ``generate`` for the
evaluation workloads here, without changing a greedy reply:

* **stop rules** (``settled``): a row stops as soon as the verdict its caller will draw from the
  reply can no longer change (a refusal phrase has appeared; the reply already departs from the
  exact answer). The returned text is then that prefix; it is judged exactly as the full reply
  would be (tested).
* **finished rows leave the batch**: after EOS or a stop rule, a row's KV cache, mask and
  steering vector are dropped, so later steps cost only the rows still decoding.
* **per-row steering**: ``steering=(site, deltas [N, D])`` adds one vector per prompt (zero for
  ungated prompts) at every real token of the prompt and of the reply, inside the same batch.

Sampling (``temperature > 0``) draws from ``softmax(logits / temperature)`` (no top-k/top-p)
with a private ``torch.Generator`` seeded by ``seed``: replies are reproducible for a fixed
batch composition and seed, and the global RNG is untouched.

Generation can start from embeddings instead of token ids (``inputs_embeds``: one [T_i, D]
tensor per prompt, e.g. text embeddings spliced with image features, or a soft prompt); the
generated tokens are then fed as ids.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar
from trustlab.lm._checks import as_float_tensor, check_count, prompt_list
from trustlab.lm.model import LanguageModel, Prompt
from trustlab.lm.positions import PositionLike

__all__ = [
    "Settled",
    "Steering",
    "exact_match_settled",
    "generate_rows",
    "greedy_rows",
    "refusal_settled",
]

Settled = Callable[[int, str], bool]
"""``settled(n, text)``: given prompt ``n`` and its reply so far, whether the caller's verdict
can no longer change (the row may stop there)."""


@dataclass(frozen=True)
class Steering:
    """Per-row additions for :func:`generate_rows`: ``deltas[n]`` [N, D] added to prompt ``n``'s
    row at ``site`` and ``positions`` (default: every real token of prompt and reply)."""

    site: str
    deltas: torch.Tensor
    positions: PositionLike = "all"


def _check_decoding(max_new_tokens: Any, temperature: Any) -> tuple[int, float]:
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int | float)
        or max_new_tokens != int(max_new_tokens)
        or int(max_new_tokens) < 1
    ):
        raise InputError(f"max_new_tokens must be a whole number >= 1. Got {max_new_tokens!r}.")
    try:
        t = float(temperature)
    except (TypeError, ValueError) as exc:
        raise InputError(f"temperature must be a number >= 0. Got {temperature!r}.") from exc
    if not t >= 0.0 or t == float("inf"):
        raise InputError(f"temperature must be a finite number >= 0. Got {temperature!r}.")
    return int(max_new_tokens), t


def _cache_key(lm: LanguageModel) -> str:
    # transformers >= 5 names the KV cache `cache` (earlier: `past_key_values`)
    params = inspect.signature(lm.model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _decode_text(lm: LanguageModel, ids: list[int]) -> str:
    return lm.tokenizer.decode(ids, skip_special_tokens=True).strip()


def _select_runtime_rows(lm: LanguageModel, keep: torch.Tensor) -> None:
    """Keep the hook runtime's per-row facts (prompt lengths) aligned with a shrunk batch.

    The runtime infers prompt lengths at the prefill and carries them across incremental steps
    while the batch size stays; when rows leave the batch the carried state is sliced here, so
    position-aware interventions ("prompt", "generated") keep acting on the right tokens.
    """
    from trustlab.lm.hooks import runtime_of

    runtime = runtime_of(lm, create=False)
    state = getattr(runtime, "state", None)
    if state is None:
        return
    idx = keep.to(state.attention_mask.device)
    runtime.state = dataclasses.replace(
        state,
        attention_mask=state.attention_mask[idx],
        prompt_len=state.prompt_len[idx],
        _cache={},
        _columns={},
    )


def _pad_embeds(
    lm: LanguageModel, embeds: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(int(e.shape[0]) for e in embeds)
    d = lm.d_model
    out = torch.zeros((len(embeds), width, d), dtype=lm.dtype, device=lm.device)
    mask = torch.zeros((len(embeds), width), dtype=torch.long, device=lm.device)
    for i, e in enumerate(embeds):
        n = int(e.shape[0])
        out[i, width - n :] = e.to(device=lm.device, dtype=lm.dtype)
        mask[i, width - n :] = 1
    pos = (mask.cumsum(1) - 1).clamp_min(0)
    return out, mask, pos


def _decode_chunk(
    lm: LanguageModel,
    ids: Sequence[Sequence[int]] | None,
    embeds: Sequence[torch.Tensor] | None,
    index: list[int],
    steering: Steering | None,
    deltas: torch.Tensor | None,
    max_new_tokens: int,
    temperature: float,
    generator: torch.Generator | None,
    settled: Settled | None,
    compact: bool,
) -> list[list[int]]:
    """Decode one batch; ``index[r]`` is the caller's prompt number of chunk row ``r``."""
    from trustlab.lm.steering import row_additions

    n_rows = len(index)
    new: list[list[int]] = [[] for _ in range(n_rows)]
    eos = set(lm.eos_token_ids)
    if embeds is not None:
        first_embeds, mask, pos = _pad_embeds(lm, embeds)
        first: dict[str, Any] = {"inputs_embeds": first_embeds}
    else:
        batch = lm.pad(ids, "left")  # type: ignore[arg-type]
        mask, pos = batch.attention_mask, batch.position_ids
        first = {"input_ids": batch.input_ids}
    kwargs = {"logits_to_keep": 1} if lm._accepts_logits_to_keep else {}
    key = _cache_key(lm)
    rows = list(range(n_rows))  # batch row -> chunk row
    active = [True] * n_rows  # batch rows still decoding
    holder = {"d": deltas}
    ctx = (
        row_additions(lm, steering.site, lambda: holder["d"], positions=steering.positions)
        if steering is not None
        else contextlib.nullcontext()
    )
    with ctx:
        out = lm.model(**first, attention_mask=mask, position_ids=pos, use_cache=True, **kwargs)
        for step in range(max_new_tokens):
            cache = getattr(out, key, None) or getattr(out, "past_key_values", None)
            logits = out.logits[:, -1, :].float()
            if temperature > 0.0:
                probs = torch.softmax(logits / temperature, -1).cpu()
                nxt = torch.multinomial(probs, 1, generator=generator).flatten().to(logits.device)
            else:
                nxt = logits.argmax(-1)
            for b, tok in enumerate(nxt.tolist()):
                if not active[b]:
                    continue
                r = rows[b]
                if tok in eos:
                    active[b] = False
                    continue
                new[r].append(int(tok))
                if settled is not None and settled(index[r], _decode_text(lm, new[r])):
                    active[b] = False
            n_active = sum(active)
            if n_active == 0 or step == max_new_tokens - 1:
                break
            if compact and n_active < len(rows) and hasattr(cache, "batch_select_indices"):
                keep_list = [b for b in range(len(rows)) if active[b]]
                keep = torch.as_tensor(keep_list, dtype=torch.long, device=mask.device)
                cache.batch_select_indices(keep)
                mask, pos, nxt = mask[keep], pos[keep], nxt[keep]
                rows = [rows[b] for b in keep_list]
                active = [True] * len(rows)
                if holder["d"] is not None:
                    holder["d"] = holder["d"][keep.to(holder["d"].device)]
                _select_runtime_rows(lm, keep)
            # without compaction, finished rows keep feeding tokens that are never recorded
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
            pos = pos[:, -1:] + 1
            out = lm.model(
                input_ids=nxt.unsqueeze(1),
                attention_mask=mask,
                position_ids=pos,
                **{key: cache},
                use_cache=True,
                **kwargs,
            )
    return new


def _decode_chunk_rerun(
    lm: LanguageModel,
    ids: Sequence[Sequence[int]],
    index: list[int],
    steering: Steering | None,
    deltas: torch.Tensor | None,
    max_new_tokens: int,
    settled: Settled | None,
) -> list[list[int]]:
    """Reference path without a KV cache: rerun the padded batch of the rows still decoding
    at every step (greedy only). Same computation as the cached path up to float rounding."""
    from trustlab.lm.steering import row_additions

    seqs = [list(s) for s in ids]
    new: list[list[int]] = [[] for _ in seqs]
    eos = set(lm.eos_token_ids)
    active = list(range(len(seqs)))
    for _ in range(max_new_tokens):
        batch = lm.pad([seqs[i] for i in active], "left")
        if steering is not None and deltas is not None:
            ctx = row_additions(lm, steering.site, deltas[active], positions=steering.positions)
        else:
            ctx = contextlib.nullcontext()
        with ctx:
            nxt = lm.forward(batch, last_only=True)[:, -1, :].argmax(-1).tolist()
        still = []
        for i, tok in zip(active, nxt, strict=True):
            seqs[i].append(int(tok))
            if tok in eos:
                continue
            new[i].append(int(tok))
            if settled is not None and settled(index[i], _decode_text(lm, new[i])):
                continue
            still.append(i)
        active = still
        if not active:
            break
    return new


def _kv_rows_budget(lm: LanguageModel, width: int) -> int:
    """Rows per chunk so one chunk's KV cache stays near 2^28 floats."""
    kv_per_row = 2 * lm.n_layers * width * lm.d_model
    return max(1, (1 << 28) // max(1, kv_per_row))


def generate_rows(
    lm: LanguageModel,
    prompts: Sequence[Prompt] | None,
    *,
    max_new_tokens: int = 64,
    temperature: float = 0.0,
    seed: int = 0,
    settled: Settled | None = None,
    steering: Steering | None = None,
    inputs_embeds: Sequence[torch.Tensor] | None = None,
    batch_size: int = 64,
    cache: bool = True,
    compact: bool = True,
    progress: Callable[..., Any] | None = None,
) -> list[str]:
    """One reply per prompt (see the module docstring).

    ``prompts``: instruction strings or conversations (rendered with the model's chat format;
    raw strings are tokenised as they are); conversations may hold images when ``lm`` is a
    :class:`~trustlab.lm.multimodal.VisionLanguageModel` (each batch is then decoded from its
    embeddings, images expanded). ``inputs_embeds``: instead of ``prompts``, one
    [T_i, d_model] tensor per prompt. ``settled``: stop rule (:data:`Settled`). ``steering``:
    per-row additions (:class:`Steering`, ``deltas`` [N, D]). Prompts are sorted by length into
    batches of at most ``batch_size`` rows (results come back in input order). ``cache=False``
    reruns the whole sequence at every step (greedy only; a reference for tests).
    ``progress``: e.g. ``RunContext.progress``, called over the batches.
    """
    max_new_tokens, temperature = _check_decoding(max_new_tokens, temperature)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a whole number >= 1. Got {batch_size!r}.")
    seed = check_scalar(seed, "seed", "generate_rows", kind=int)  # "x" used to raise ValueError
    if inputs_embeds is not None:
        if prompts is not None:
            raise InputError("Pass prompts or inputs_embeds, not both.")
        embeds = list(inputs_embeds)
        for i, e in enumerate(embeds):
            if not isinstance(e, torch.Tensor) or e.dim() != 2 or e.shape[1] != lm.d_model:
                raise InputError(
                    f"inputs_embeds[{i}] must be a [T, {lm.d_model}] tensor. Got "
                    f"{tuple(e.shape) if isinstance(e, torch.Tensor) else type(e).__name__}."
                )
            if e.shape[0] == 0:
                raise InputError(f"inputs_embeds[{i}] is empty (zero positions).")
        lengths = [int(e.shape[0]) for e in embeds]
        ids, image_prompts = None, None
        if not cache:
            raise InputError("inputs_embeds needs the KV-cached decoder (cache=True).")
    else:
        if prompts is None:
            raise InputError("generate_rows needs prompts (or inputs_embeds).")
        if isinstance(prompts, str):
            raise InputError("Pass a list of prompts, not a single string.")
        from trustlab.lm.multimodal import check_image_prompts

        embeds = None
        if check_image_prompts(lm, prompts, "generate_rows"):
            # images: each chunk's prompts become embeddings (images expanded) when decoded
            image_prompts = list(prompts)
            ids, lengths = None, lm.prompt_lengths(image_prompts)  # type: ignore[attr-defined]
            if not cache:
                raise InputError("Image prompts need the KV-cached decoder (cache=True).")
        else:
            image_prompts = None
            ids = lm.tokenize(list(prompts))
            lengths = [len(t) for t in ids]
    n = len(lengths)
    if n == 0:
        return []
    deltas = None
    if steering is not None:
        deltas = torch.as_tensor(steering.deltas, dtype=torch.float32)
        if deltas.shape != (n, lm.d_model):
            raise InputError(
                f"Steering deltas must be [{n}, {lm.d_model}] (one row per prompt). Got "
                f"{tuple(deltas.shape)}."
            )
        if not bool(torch.isfinite(deltas).all()):
            raise InputError("Steering deltas hold non-finite values.")
        lm.adapter.module(steering.site)
        deltas = deltas.to(lm.device)
    if not cache and temperature > 0.0:
        raise InputError("cache=False is the greedy reference path; use temperature=0.")
    order = sorted(range(n), key=lambda i: lengths[i])
    per_chunk = min(batch_size, _kv_rows_budget(lm, max(lengths) + max_new_tokens))
    chunks = [order[s : s + per_chunk] for s in range(0, n, per_chunk)]
    generator = None
    if temperature > 0.0:
        generator = torch.Generator().manual_seed(int(seed))
    tokens: list[list[int]] = [[] for _ in range(n)]
    iterator = progress(chunks, description="generate") if progress is not None else chunks
    with torch.no_grad():
        for chunk in iterator:
            d = deltas[chunk] if deltas is not None else None
            if cache:
                if image_prompts is not None:
                    chunk_embeds = lm.prompt_embeds([image_prompts[i] for i in chunk])  # type: ignore[attr-defined]
                else:
                    chunk_embeds = [embeds[i] for i in chunk] if embeds is not None else None
                got = _decode_chunk(
                    lm,
                    [ids[i] for i in chunk] if ids is not None else None,
                    chunk_embeds,
                    list(chunk),
                    steering,
                    d,
                    max_new_tokens,
                    temperature,
                    generator,
                    settled,
                    compact,
                )
            else:
                got = _decode_chunk_rerun(
                    lm, [ids[i] for i in chunk], list(chunk), steering, d, max_new_tokens, settled
                )
            for i, t in zip(chunk, got, strict=True):
                tokens[i] = t
    return [_decode_text(lm, t) for t in tokens]


def greedy_rows(
    lm: LanguageModel,
    prompts: Sequence[Prompt],
    site: str,
    deltas: torch.Tensor,
    gates: torch.Tensor | None = None,
    *,
    max_new_tokens: int = 8,
    max_rows: int = 2048,
    settled: Settled | None = None,
    cache: bool = True,
) -> list[list[str]]:
    """Greedy replies [K][N]: reply ``n`` under delta ``k`` [K, D] added at ``site`` (when
    ``gates[k, n]``), at every real token of the prompt and of the reply so far.

    The K x N rows are decoded together in batches of up to ``max_rows`` by
    :func:`generate_rows`; ``settled(n, text)`` gets the prompt number ``n`` (not the row).
    """
    prompts = prompt_list(prompts, "prompts", "greedy_rows", allow_empty=True)
    d = as_float_tensor(deltas, "deltas", "greedy_rows").to(torch.float32)
    if d.dim() != 2 or d.shape[1] != lm.d_model:
        raise InputError(f"deltas must be [K, {lm.d_model}]. Got {tuple(d.shape)}.")
    k, n = int(d.shape[0]), len(prompts)
    max_rows = check_count(max_rows, "max_rows", "greedy_rows")  # 0 and NaN used to pass / crash
    if gates is None:
        gates = torch.ones((k, n), dtype=torch.bool)
    gates = torch.as_tensor(gates)
    if tuple(gates.shape) != (k, n):
        raise InputError(f"gates must be [{k}, {n}]. Got {tuple(gates.shape)}.")
    if gates.dtype != torch.bool and not bool(((gates == 0) | (gates == 1)).all()):
        # a gate of 0.5 used to scale the delta by 0.5 and 2.0 to double it
        raise InputError("gates must be True/False (or 0/1) per (delta, prompt).")
    if n == 0 or k == 0:
        return [[] for _ in range(k)]
    rows_d = (d.unsqueeze(1) * gates.float().unsqueeze(-1)).reshape(k * n, -1)
    convs = [p for _ in range(k) for p in prompts]
    stop = None if settled is None else (lambda r, text: settled(r % n, text))
    texts = generate_rows(
        lm,
        convs,
        max_new_tokens=max_new_tokens,
        settled=stop,
        steering=Steering(site, rows_d),
        batch_size=max_rows,
        cache=cache,
    )
    return [texts[j * n : (j + 1) * n] for j in range(k)]


def _squash(text: str) -> str:
    return "".join(text.split())


def exact_match_settled(answers: Sequence[str]) -> Settled:
    """``settled`` for exact match: the reply so far, whitespace removed, is no longer a prefix
    of the answer (whitespace removed), so it cannot end up equal to it. A reply holding an
    undecodable partial character (U+FFFD) is never settled."""
    if isinstance(answers, str | bytes) or not isinstance(answers, Sequence):
        # "abc" used to be read as the answers "a", "b", "c"
        raise InputError(f"exact_match_settled takes a list of answers. Got {type(answers).__name__}.")
    squashed = [_squash(str(a)) for a in answers]

    def fn(n: int, text: str) -> bool:
        return "\ufffd" not in text and not squashed[n].startswith(_squash(text))

    return fn


def refusal_settled(is_refusal: Callable[[str], bool]) -> Settled:
    """``settled`` for phrase-based refusal judging: a refusal phrase has already appeared."""
    return lambda _n, text: is_refusal(text)
