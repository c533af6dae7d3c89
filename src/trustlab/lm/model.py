"""A loaded causal LM: model, tokenizer, adapter, chat formatting and padding-aware encoding."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import torch

from trustlab.core.errors import InputError
from trustlab.lm.adapters import SITE_KINDS, BoundAdapter, SiteKind, bind_adapter, site_name
from trustlab.lm.formatting import as_conversation, format_plain

__all__ = [
    "PLAIN_TEMPLATE_DOC",
    "Batch",
    "Conversation",
    "LanguageModel",
    "Prompt",
    "Segment",
    "SoftAt",
    "as_conversation",
    "format_plain",
]

Conversation = Sequence[Mapping[str, str]]
Prompt = str | Conversation

PLAIN_TEMPLATE_DOC = """\
Plain chat template (used when the tokenizer has none): each message becomes one line
'{Role}: {content}' (Role = System, User or Assistant), lines joined by '\\n'; the generation
prompt appends the line 'Assistant:'. The tokenizer's own special tokens (e.g. BOS) are added."""

_SENTINEL = "trustlabinstructionsentinel"


@dataclass(frozen=True)
class Batch:
    """Padded token ids of a batch, with the mask and attention-aware position ids.

    A batch may carry ``inputs_embeds`` [B, T, D] instead of relying on its token ids: then the
    model reads those vectors (free vectors where ``free_mask`` is True, token embeddings
    elsewhere) and ``input_ids`` holds the pad id at free positions. Build one with
    :meth:`LanguageModel.encode` (``soft=``) or :meth:`LanguageModel.embed_batch`.
    """

    input_ids: torch.Tensor  # [B, T]
    attention_mask: torch.Tensor  # [B, T] (long, 1 = real token)
    position_ids: torch.Tensor  # [B, T] real-token index (0 at pads)
    prompt_len: torch.Tensor  # [B] number of real tokens
    inputs_embeds: torch.Tensor | None = None  # [B, T, D]: what the model reads, when given
    free_mask: torch.Tensor | None = None  # [B, T] bool: free vectors (not token embeddings)

    @property
    def size(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def width(self) -> int:
        return int(self.input_ids.shape[1])

    def rows(self, index: Sequence[int] | torch.Tensor) -> Batch:
        """The sub-batch of rows ``index``, without the columns that are padding in every row."""
        idx = torch.as_tensor(index, dtype=torch.long, device=self.input_ids.device)
        mask = self.attention_mask[idx]
        used = mask.bool().any(0).nonzero().flatten()
        lo, hi = (int(used[0]), int(used[-1]) + 1) if used.numel() else (0, self.width)
        cols = slice(lo, hi)
        return Batch(
            input_ids=self.input_ids[idx, cols],
            attention_mask=mask[:, cols],
            position_ids=self.position_ids[idx, cols],
            prompt_len=self.prompt_len[idx],
            inputs_embeds=None if self.inputs_embeds is None else self.inputs_embeds[idx, cols],
            free_mask=None if self.free_mask is None else self.free_mask[idx, cols],
        )


SoftAt = Literal["start", "instruction_end", "end"]
Segment = torch.Tensor | Sequence[int]
"""One piece of a row for :meth:`LanguageModel.embed_batch`: free vectors (a float tensor
[n, d_model]) or token ids (a list of ints or an integer tensor)."""


class LanguageModel:
    """A Hugging Face causal LM with its tokenizer and the adapter that names its sites.

    Build it with :func:`trustlab.lm.load` (``hf:/path``, ``organism:<name>``) or wrap an
    already-loaded pair: ``LanguageModel(model, tokenizer)``. The model is put in eval mode.
    """

    def __init__(self, model: Any, tokenizer: Any, *, spec: str = "") -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.spec = spec
        self.adapter: BoundAdapter = bind_adapter(model)

    def __repr__(self) -> str:
        return (
            f"LanguageModel({self.spec or self.adapter.model_type!r}, n_layers={self.n_layers}, "
            f"d_model={self.d_model}, device={self.device}, dtype={self.dtype})"
        )

    # ------------------------------------------------------------------ shape facts
    @property
    def n_layers(self) -> int:
        return self.adapter.n_layers

    @cached_property
    def d_model(self) -> int:
        return int(self.model.get_input_embeddings().weight.shape[1])

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @cached_property
    def vocab_size(self) -> int:
        return int(self.model.get_output_embeddings().weight.shape[0])

    @cached_property
    def pad_token_id(self) -> int:
        for tid in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id):
            if tid is not None:
                return int(tid)
        return 0

    @cached_property
    def eos_token_ids(self) -> list[int]:
        ids: list[int] = []
        gen_eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        for tid in (self.tokenizer.eos_token_id, gen_eos):
            for t in tid if isinstance(tid, list | tuple) else [tid]:
                if t is not None and int(t) not in ids:
                    ids.append(int(t))
        return ids

    # ------------------------------------------------------------------ sites
    def sites(self, kind: SiteKind, layers: Sequence[int] | None = None) -> list[str]:
        """Canonical names of ``kind`` at ``layers`` (all blocks by default)."""
        if kind not in SITE_KINDS:
            raise InputError(f"The site kind must be one of {SITE_KINDS}. Got {kind!r}.")
        chosen = range(self.n_layers) if layers is None else layers
        names = [site_name(i, kind) for i in chosen]
        for name in names:
            self.adapter.parse(name)
        return names

    def ablation_sites(self) -> list[str]:
        """Sites where writing into the stream happens: ablating there empties the whole stream.

        ``embed`` plus every block's ``attn_out`` and ``mlp_out`` when the family's adapter
        knows them; otherwise ``embed`` plus every ``resid_post`` (exact at block boundaries).
        """
        if self.adapter.attn_out is not None and self.adapter.mlp_out is not None:
            writes = [
                s
                for i in range(self.n_layers)
                for s in (site_name(i, "attn_out"), site_name(i, "mlp_out"))
            ]
        else:
            writes = self.sites("resid_post")
        return ["embed", *writes]

    # ------------------------------------------------------------------ chat
    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def format_chat(self, prompt: Prompt, add_generation_prompt: bool = True) -> str:
        """Render a conversation (or one user instruction) as the model's prompt text.

        Uses the tokenizer's chat template when it has one, else the plain template
        (``PLAIN_TEMPLATE_DOC``).
        """
        from trustlab.lm.formatting import format_chat

        return format_chat(prompt, self.tokenizer, add_generation_prompt=add_generation_prompt)

    @cached_property
    def n_post_instruction_tokens(self) -> int:
        """How many tokens the template puts after the user's instruction (generation prompt incl.)."""
        text = self.format_chat(_SENTINEL)
        end = text.rfind(_SENTINEL)
        if end < 0:
            raise InputError("The chat template drops the user's message; cannot find its end.")
        end += len(_SENTINEL)
        add_special = not self.has_chat_template
        try:
            enc = self.tokenizer(text, add_special_tokens=add_special, return_offsets_mapping=True)
            return sum(1 for start, _ in enc["offset_mapping"] if start >= end)
        except (NotImplementedError, TypeError, ValueError):  # slow tokenizer: no offsets
            return len(self.tokenizer(text[end:], add_special_tokens=False)["input_ids"])

    @property
    def n_post_instruction_or_none(self) -> int | None:
        """:attr:`n_post_instruction_tokens`, or None when the chat format cannot tell."""
        try:
            return self.n_post_instruction_tokens
        except Exception:  # no usable template: post_instruction positions will say so
            return None

    def check_vectors(self, x: Any, name: str) -> torch.Tensor:
        """``x`` as a float tensor ``[..., d_model]``, else an InputError naming ``name``."""
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise InputError(
                f"'{name}' must be a float tensor [..., d_model]. Got {type(x).__name__}."
            )
        if x.dim() == 0 or x.shape[-1] != self.d_model:
            raise InputError(
                f"'{name}' must end with d_model={self.d_model}. Got shape {tuple(x.shape)}."
            )
        return x

    # ------------------------------------------------------------------ encoding
    def tokenize(self, prompts: Sequence[Prompt]) -> list[list[int]]:
        """Token ids per prompt: strings as raw text, conversations through the chat format.

        Raw text gets the tokenizer's special tokens (e.g. BOS); chat-template text does not
        (templates write their own); plain-template text does.
        """
        if isinstance(prompts, str):
            raise InputError("Pass a list of prompts, not a single string.")
        out: list[list[int]] = []
        for p in prompts:
            if isinstance(p, str):
                text, special = p, True
            else:
                text, special = self.format_chat(p), not self.has_chat_template
            ids = self.tokenizer(text, add_special_tokens=special)["input_ids"]
            if len(ids) == 0:
                raise InputError(f"Prompt {p!r:.60} encodes to zero tokens.")
            out.append(list(ids))
        return out

    def pad(
        self, token_ids: Sequence[Sequence[int]], padding_side: Literal["left", "right"] = "left"
    ) -> Batch:
        """Pad token-id lists into a :class:`Batch` (left padding by default, as for generation)."""
        if padding_side not in ("left", "right"):
            raise InputError(f"padding_side must be 'left' or 'right'. Got {padding_side!r}.")
        lengths = [len(t) for t in token_ids]
        width = max(lengths)
        ids = torch.full((len(token_ids), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(token_ids), width), dtype=torch.long)
        for row, (toks, n) in enumerate(zip(token_ids, lengths, strict=True)):
            cols = slice(width - n, width) if padding_side == "left" else slice(0, n)
            ids[row, cols] = torch.as_tensor(list(toks), dtype=torch.long)
            mask[row, cols] = 1
        position_ids = (mask.cumsum(1) - 1).clamp_min(0)
        device = self.device
        return Batch(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            position_ids=position_ids.to(device),
            prompt_len=torch.as_tensor(lengths, dtype=torch.long, device=device),
        )

    def encode(
        self,
        prompts: Sequence[Prompt],
        padding_side: Literal["left", "right"] = "left",
        *,
        soft: torch.Tensor | None = None,
        soft_at: SoftAt = "start",
    ) -> Batch:
        """Tokenize and pad ``prompts``; with ``soft``, splice free vectors into every prompt.

        ``soft`` is [n_soft, d_model] (the same vectors in every prompt) or
        [n_prompts, n_soft, d_model]; gradients flow into it. ``soft_at``: ``"start"`` (a
        prefix before every token, BOS included), ``"instruction_end"`` (right after the
        user's instruction, before the tokens the chat template puts after it, i.e. a GCG-style
        suffix; for raw-string prompts, the end) or ``"end"``. The batch then carries
        ``inputs_embeds`` and ``free_mask``.
        """
        ids = self.tokenize(prompts)
        if soft is None:
            return self.pad(ids, padding_side)
        vectors = self._check_free(soft, "soft", len(ids))
        if soft_at not in ("start", "instruction_end", "end"):
            raise InputError(
                f"soft_at must be 'start', 'instruction_end' or 'end'. Got {soft_at!r}."
            )
        rows: list[list[Segment]] = []
        for i, (prompt, toks) in enumerate(zip(prompts, ids, strict=True)):
            free = vectors[i] if vectors.dim() == 3 else vectors
            if soft_at == "start":
                rows.append([free, toks])
            elif soft_at == "end" or isinstance(prompt, str):
                rows.append([toks, free])
            else:
                cut = len(toks) - self.n_post_instruction_tokens
                rows.append([toks[:cut], free, toks[cut:]])
        return self.embed_batch(rows, padding_side)

    # ------------------------------------------------------------------ embeddings
    @cached_property
    def n_embeddings(self) -> int:
        """Rows of the input embedding matrix (the valid token ids are 0..n_embeddings-1)."""
        return int(self.model.get_input_embeddings().weight.shape[0])

    def _check_ids(self, ids: Any, name: str) -> torch.Tensor:
        if isinstance(ids, torch.Tensor):
            tensor = ids
        else:
            try:
                tensor = torch.as_tensor(ids)
            except (TypeError, ValueError, RuntimeError) as exc:
                raise InputError(
                    f"'{name}' must be token ids (ints, a rectangular list or an integer "
                    f"tensor). Got {type(ids).__name__}: {exc}."
                ) from None
        if tensor.dtype == torch.bool or tensor.is_floating_point() or tensor.is_complex():
            raise InputError(f"'{name}' must hold integer token ids. Got dtype {tensor.dtype}.")
        if tensor.numel() and (int(tensor.min()) < 0 or int(tensor.max()) >= self.n_embeddings):
            raise InputError(
                f"'{name}' holds ids outside 0..{self.n_embeddings - 1} (the model's "
                f"vocabulary). Got min {int(tensor.min())}, max {int(tensor.max())}."
            )
        return tensor.long().to(self.device)

    def _check_free(self, vectors: Any, name: str, n_rows: int | None = None) -> torch.Tensor:
        if not isinstance(vectors, torch.Tensor) or not vectors.is_floating_point():
            raise InputError(
                f"'{name}' must be a float tensor of vectors [..., d_model={self.d_model}]. "
                f"Got {type(vectors).__name__}"
                + (f" of dtype {vectors.dtype}." if isinstance(vectors, torch.Tensor) else ".")
            )
        shapes = "[n, d_model]" + (" or [n_prompts, n, d_model]" if n_rows is not None else "")
        bad_rank = vectors.dim() not in ((2, 3) if n_rows is not None else (2,))
        if bad_rank or vectors.shape[-1] != self.d_model:
            raise InputError(
                f"'{name}' must have shape {shapes} with d_model={self.d_model}. "
                f"Got {tuple(vectors.shape)}."
            )
        if n_rows is not None and vectors.dim() == 3 and vectors.shape[0] != n_rows:
            raise InputError(
                f"'{name}' has {vectors.shape[0]} rows of vectors for {n_rows} prompts."
            )
        if not bool(torch.isfinite(vectors.detach()).all()):
            raise InputError(f"'{name}' has non-finite entries.")
        return vectors.to(device=self.device, dtype=self.dtype)

    def embed(self, ids: Any, *, grad: bool = False) -> torch.Tensor:
        """Input embeddings ``[..., d_model]`` of token ids ``[...]``: what the model computes
        from ids before block 0 (its own embedding module, so any scale a family applies there
        is included), hence ``forward(embed(ids)) == forward(ids)`` bit for bit.

        ``grad=False`` (default) detaches the result from the embedding weights.
        """
        tensor = self._check_ids(ids, "ids")
        with torch.set_grad_enabled(grad):
            return self.model.get_input_embeddings()(tensor)

    @cached_property
    def embed_scale(self) -> float:
        """The factor the embedding module multiplies its rows by (Gemma: sqrt(d_model))."""
        module = self.model.get_input_embeddings()
        scale = getattr(module, "embed_scale", None)
        return 1.0 if scale is None else float(torch.as_tensor(scale).float())

    def embedding_matrix(self) -> torch.Tensor:
        """``W_E`` [n_embeddings, d_model] with the embedding scale applied (no grad):
        ``embed(ids) == embedding_matrix()[ids]`` up to the rounding of the scale product."""
        weight = self.model.get_input_embeddings().weight.detach()
        return weight if self.embed_scale == 1.0 else weight * self.embed_scale

    def embed_batch(
        self,
        rows: Sequence[Sequence[Segment]],
        padding_side: Literal["left", "right"] = "left",
    ) -> Batch:
        """A :class:`Batch` carrying ``inputs_embeds`` from rows of segments.

        Each row is a list of segments: free vectors (a float tensor [n, d_model], e.g. a soft
        prompt or image-prefix vectors; gradients flow into them) or token ids (embedded with
        :meth:`embed`). Pads get the pad token's embedding, as in the token-id path, so a row of
        token ids only gives exactly the logits of the same ids through :meth:`pad`.
        """
        if isinstance(rows, torch.Tensor) or not isinstance(rows, Sequence) or not rows:
            raise InputError("'rows' must be a non-empty list of rows (lists of segments).")
        if padding_side not in ("left", "right"):
            raise InputError(f"padding_side must be 'left' or 'right'. Got {padding_side!r}.")
        pieces: list[tuple[torch.Tensor, list[int], list[bool]]] = []
        for r, row in enumerate(rows):
            if isinstance(row, torch.Tensor | str) or not isinstance(row, Sequence):
                raise InputError(f"Row {r} of 'rows' must be a list of segments.")
            embs, ids, free = [], [], []
            for seg in row:
                if isinstance(seg, torch.Tensor) and seg.is_floating_point():
                    vec = self._check_free(seg, f"rows[{r}]")
                    embs.append(vec)
                    ids += [self.pad_token_id] * int(vec.shape[0])
                    free += [True] * int(vec.shape[0])
                else:
                    toks = self._check_ids(seg, f"rows[{r}]").reshape(-1)
                    embs.append(self.embed(toks))
                    ids += toks.tolist()
                    free += [False] * int(toks.numel())
            if not ids:
                raise InputError(f"Row {r} of 'rows' is empty.")
            pieces.append((torch.cat(embs, 0), ids, free))
        batch = self.pad([p[1] for p in pieces], padding_side)
        width = batch.width
        pad_vec = self.embed(torch.tensor([self.pad_token_id])).reshape(-1)
        out_rows, free_rows = [], []
        for emb, ids, free in pieces:
            fill = pad_vec.expand(width - len(ids), -1)
            parts = (fill, emb) if padding_side == "left" else (emb, fill)
            out_rows.append(torch.cat(parts, 0))
            pad = [False] * (width - len(ids))
            free_rows.append(pad + free if padding_side == "left" else free + pad)
        return Batch(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=batch.position_ids,
            prompt_len=batch.prompt_len,
            inputs_embeds=torch.stack(out_rows, 0),
            free_mask=torch.tensor(free_rows, dtype=torch.bool, device=self.device),
        )

    def with_embeds(self, batch: Batch) -> Batch:
        """``batch`` carrying ``inputs_embeds`` (the token embeddings when it had none)."""
        if batch.inputs_embeds is not None:
            return batch
        return Batch(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=batch.position_ids,
            prompt_len=batch.prompt_len,
            inputs_embeds=self.embed(batch.input_ids),
            free_mask=torch.zeros_like(batch.input_ids, dtype=torch.bool),
        )

    # ------------------------------------------------------------------ running the model
    def model_inputs(self, batch: Batch) -> dict[str, torch.Tensor]:
        """The keyword arguments that run ``self.model`` on ``batch``: token ids, or the batch's
        ``inputs_embeds`` when it carries them, with the mask and position ids. Decoders
        (prefill of a KV-cached loop, HF ``generate``) call the model with these."""
        if not isinstance(batch, Batch):
            raise InputError(f"Expected a trustlab.lm Batch. Got {type(batch).__name__}.")
        key = "input_ids" if batch.inputs_embeds is None else "inputs_embeds"
        value = batch.input_ids if batch.inputs_embeds is None else batch.inputs_embeds
        return {
            key: value,
            "attention_mask": batch.attention_mask,
            "position_ids": batch.position_ids,
        }

    @contextlib.contextmanager
    def frozen_parameters(self) -> Iterator[None]:
        """Exclude the model's parameters from autograd graphs built inside (restored after):
        gradients then flow only to inputs, soft vectors and intervention vectors."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        for p in params:
            p.requires_grad_(False)
        try:
            yield
        finally:
            for p in params:
                p.requires_grad_(True)

    def forward(
        self,
        batch: Batch,
        *,
        last_only: bool = False,
        grad: bool = False,
        param_grads: bool = False,
    ) -> torch.Tensor:
        """Logits ``[B, T, vocab]`` of one padded batch (no cache); active hooks apply.

        A batch carrying ``inputs_embeds`` runs on them (see :meth:`encode`). ``last_only=True``
        computes logits for the last column only (``[B, 1, vocab]``), which under left padding
        is every prompt's last token. ``grad=True`` keeps the autograd graph for the inputs'
        embeddings and intervention vectors (interventions are differentiable); the weights
        join it only with ``param_grads=True``.
        """
        kwargs: dict[str, Any] = self.model_inputs(batch)
        if last_only and self._accepts_logits_to_keep:
            kwargs["logits_to_keep"] = 1
        frozen = self.frozen_parameters() if grad and not param_grads else contextlib.nullcontext()
        with torch.set_grad_enabled(grad), frozen:
            out = self.model(use_cache=False, **kwargs)
        logits = out.logits
        return logits[:, -1:, :] if last_only else logits

    @cached_property
    def _accepts_logits_to_keep(self) -> bool:
        return "logits_to_keep" in inspect.signature(self.model.forward).parameters

    def embeds_rows(self, batch: Batch) -> list[torch.Tensor]:
        """Each row's real positions as ``[T_i, d_model]`` vectors (its ``inputs_embeds``, or the
        token embeddings): what :func:`trustlab.lm.decoding.generate_rows` takes as
        ``inputs_embeds`` to generate from a soft prompt or an image prefix."""
        full = self.with_embeds(batch)
        assert full.inputs_embeds is not None
        real = full.attention_mask.bool()
        return [full.inputs_embeds[b][real[b]] for b in range(full.size)]
