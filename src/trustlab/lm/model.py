"""A loaded causal LM: model, tokenizer, adapter, chat formatting and padding-aware encoding."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import torch

from trustlab.core.errors import InputError
from trustlab.lm.adapters import SITE_KINDS, BoundAdapter, SiteKind, bind_adapter, site_name
from trustlab.lm.formatting import as_conversation, format_plain

if TYPE_CHECKING:
    from trustlab.lm.hooks import HookRuntime

__all__ = [
    "PLAIN_TEMPLATE_DOC",
    "Batch",
    "Conversation",
    "LanguageModel",
    "Prompt",
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
    """Padded token ids of a batch, with the mask and attention-aware position ids."""

    input_ids: torch.Tensor  # [B, T]
    attention_mask: torch.Tensor  # [B, T] (long, 1 = real token)
    position_ids: torch.Tensor  # [B, T] real-token index (0 at pads)
    prompt_len: torch.Tensor  # [B] number of real tokens

    @property
    def size(self) -> int:
        return int(self.input_ids.shape[0])


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
        self._runtime: HookRuntime | None = None

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
        self, prompts: Sequence[Prompt], padding_side: Literal["left", "right"] = "left"
    ) -> Batch:
        return self.pad(self.tokenize(prompts), padding_side)

    def forward(self, batch: Batch, *, last_only: bool = False, grad: bool = False) -> torch.Tensor:
        """Logits ``[B, T, vocab]`` of one padded batch (no cache); active hooks apply.

        ``last_only=True`` computes logits for the last column only (``[B, 1, vocab]``), which
        under left padding is every prompt's last token. ``grad=True`` keeps the autograd
        graph (interventions are differentiable).
        """
        kwargs: dict[str, Any] = {}
        if last_only and self._accepts_logits_to_keep:
            kwargs["logits_to_keep"] = 1
        with torch.set_grad_enabled(grad):
            out = self.model(
                input_ids=batch.input_ids,
                attention_mask=batch.attention_mask,
                position_ids=batch.position_ids,
                use_cache=False,
                **kwargs,
            )
        logits = out.logits
        return logits[:, -1:, :] if last_only else logits

    @cached_property
    def _accepts_logits_to_keep(self) -> bool:
        import inspect

        return "logits_to_keep" in inspect.signature(self.model.forward).parameters

    @property
    def runtime(self) -> HookRuntime:
        if self._runtime is None:
            from trustlab.lm.hooks import HookRuntime

            self._runtime = HookRuntime(self)
        return self._runtime
