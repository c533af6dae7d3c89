"""The tool-call decision: a metric at the first output token(s), and the behaviour itself.

The decision is read where it is made, at the first reply token. Its metric is defined by the
model's actual formats, tokenised after the prompt (:func:`trustlab.lm.continuation_ids`): the
call opener (``<tool_call>``, six tokens under the organisms' word-level tokenizer:
``▁ < tool _ call >``) against the prose opener (``Sure`` for the organisms).

* ``logit_diff`` — ``logit[call_0] − logit[prose_0]`` at the last prompt position, the first
  tokens of the two formats. It equals the log-probability difference of those two tokens
  (the softmax normaliser cancels) and is what direct logit attribution and patching explain.
* ``logprob_diff`` — ``log P(call opener) − log P(prose opener)`` by teacher forcing over all
  of each opener's tokens, the decision between the two whole formats.
* ``calls`` — the behaviour: the greedy reply starts with the call opener (decoded for as many
  tokens as the opener has; a row stops as soon as it leaves the opener).

Every function acts under whatever :mod:`trustlab.lm` intervention is active, so the causal
tests reuse them unchanged. The two formats must differ at their first token (a shared prefix
would put the decision later than the first output token).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab.core.errors import InputError
from trustlab.lm import LanguageModel, Prompt, binomial_rate, continuation_ids, target_logprob
from trustlab.lm.activations import Progress, batches
from trustlab.lm.decoding import generate_rows
from trustlab.methods.toolcall.pairs import check_pairs

__all__ = ["DecisionFormat", "FlipCheck", "ToolDecision", "check_flips"]


@dataclass(frozen=True)
class DecisionFormat:
    """The reply formats that define the decision: ``call`` (the tool-call opener) and
    ``prose`` (the first word of a prose answer). Defaults: the tool organisms' formats."""

    call: str = "<tool_call>"
    prose: str = "Sure"

    def __post_init__(self) -> None:
        for name in ("call", "prose"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"The '{name}' format must be a non-empty string. Got {value!r}.")


class ToolDecision:
    """The decision metric and the tool-call behaviour of one model (see the module doc).

    ``batch_size`` bounds the rows of one forward pass. The openers' token ids are found by
    tokenising each format after a prompt; prompts whose rendering ends the same way share
    them (checked, not assumed).
    """

    def __init__(
        self,
        model: LanguageModel,
        fmt: DecisionFormat | None = None,
        *,
        batch_size: int = 64,
    ) -> None:
        if not isinstance(model, LanguageModel):
            raise InputError(
                f"ToolDecision needs a trustlab.lm.LanguageModel. Got {type(model).__name__}."
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"'batch_size' must be an integer >= 1. Got {batch_size!r}.")
        self.model = model
        self.fmt = fmt or DecisionFormat()
        if not isinstance(self.fmt, DecisionFormat):
            raise InputError(f"'fmt' must be a DecisionFormat. Got {type(fmt).__name__}.")
        self.batch_size = batch_size
        self._ids: dict[str, tuple[list[int], list[int]]] = {}

    # ------------------------------------------------------------------ opener tokens
    def opener_ids(self, prompt: Prompt) -> tuple[list[int], list[int]]:
        """``(call ids, prose ids)`` as they tokenise right after ``prompt``."""
        rendered = prompt if isinstance(prompt, str) else self.model.format_chat(prompt)
        key = rendered[-64:]
        if key not in self._ids:
            call = continuation_ids(self.model, prompt, self.fmt.call)
            prose = continuation_ids(self.model, prompt, self.fmt.prose)
            if call[0] == prose[0]:
                tok = self.model.tokenizer.convert_ids_to_tokens([call[0]])[0]
                raise InputError(
                    f"The call format {self.fmt.call!r} and the prose format {self.fmt.prose!r} "
                    f"start with the same token {tok!r}; give formats that differ at the first "
                    "output token."
                )
            self._ids[key] = (call, prose)
        return self._ids[key]

    def first_tokens(self, prompts: Sequence[Prompt]) -> tuple[list[int], list[int]]:
        """The first call token and the first prose token of each prompt."""
        ids = [self.opener_ids(p) for p in prompts]
        return [c[0] for c, _ in ids], [p[0] for _, p in ids]

    # ------------------------------------------------------------------ metrics
    def logit_diff(
        self, prompts: Sequence[Prompt], *, progress: Progress | None = None
    ) -> np.ndarray:
        """``logit[call_0] − logit[prose_0]`` at each prompt's last position [N] (float64)."""
        prompts = _check_prompts(prompts)
        call0, prose0 = self.first_tokens(prompts)
        c = torch.tensor(call0)
        p = torch.tensor(prose0)
        out = np.empty(len(prompts))
        with torch.no_grad():
            for chunk, batch in batches(
                self.model, prompts, self.batch_size, progress=progress, description="decision"
            ):
                logits = self.model.forward(batch, last_only=True)[:, -1, :].double().cpu()
                idx = torch.as_tensor(chunk)
                rows = torch.arange(len(chunk))
                out[chunk] = (logits[rows, c[idx]] - logits[rows, p[idx]]).numpy()
        return out

    def logprob_diff(self, prompts: Sequence[Prompt]) -> np.ndarray:
        """``log P(call opener) − log P(prose opener)`` over all opener tokens [N]."""
        prompts = _check_prompts(prompts)
        ids = [self.opener_ids(p) for p in prompts]
        out = np.empty(len(prompts))
        with torch.no_grad():
            for start in range(0, len(prompts), self.batch_size):
                part = list(prompts[start : start + self.batch_size])
                calls = [c for c, _ in ids[start : start + self.batch_size]]
                prose = [q for _, q in ids[start : start + self.batch_size]]
                lc = target_logprob(self.model, part, calls).double().cpu().numpy()
                lp = target_logprob(self.model, part, prose).double().cpu().numpy()
                out[start : start + len(part)] = lc - lp
        return out

    # ------------------------------------------------------------------ behaviour
    def replies(self, prompts: Sequence[Prompt], *, max_new_tokens: int | None = None) -> list[str]:
        """Greedy replies, long enough to show the call opener (or ``max_new_tokens``)."""
        prompts = _check_prompts(prompts)
        n_tokens = max(len(self.opener_ids(p)[0]) for p in prompts)
        opener = self.fmt.call.strip()
        settled = None
        if max_new_tokens is None:
            # a row is settled once its reply has left the call opener
            def settled(_n: int, text: str) -> bool:
                return not opener.startswith(text.strip()[: len(opener)])

        return generate_rows(
            self.model,
            list(prompts),
            max_new_tokens=max_new_tokens or n_tokens,
            settled=settled,
            batch_size=max(self.batch_size, 1),
        )

    def calls(self, prompts: Sequence[Prompt]) -> np.ndarray:
        """Whether each greedy reply starts with the call opener [N] (bool)."""
        opener = self.fmt.call.strip()
        return np.array([r.lstrip().startswith(opener) for r in self.replies(prompts)])


def _check_prompts(prompts: Any) -> list[Prompt]:
    if isinstance(prompts, str) or not isinstance(prompts, Sequence) or len(prompts) == 0:
        raise InputError(
            f"'prompts' must be a non-empty list of prompts. Got {type(prompts).__name__}."
        )
    for i, p in enumerate(prompts):
        ok = (isinstance(p, str) and bool(p.strip())) or (
            isinstance(p, Sequence)
            and not isinstance(p, str)
            and len(p) > 0
            and all(
                isinstance(m, dict)
                and isinstance(m.get("role"), str)
                and isinstance(m.get("content"), str)
                for m in p
            )
        )
        if not ok:
            raise InputError(
                f"'prompts' item {i} must be a non-empty string or a list of role/content "
                f"messages. Got {p!r:.60}."
            )
    return list(prompts)


@dataclass(frozen=True)
class FlipCheck:
    """Whether each pair flips the decision: the execution variant calls the tool and the
    analysis variant does not. ``execution_calls``/``analysis_calls`` [N] bool;
    ``execution_logit``/``analysis_logit`` [N] the first-token decision logit differences."""

    execution_calls: np.ndarray
    analysis_calls: np.ndarray
    execution_logit: np.ndarray
    analysis_logit: np.ndarray

    @property
    def flips(self) -> np.ndarray:
        return self.execution_calls & ~self.analysis_calls

    def counts(self) -> dict[str, int]:
        """flip (exec calls, analysis does not), both_call, neither_calls, reversed."""
        e, a = self.execution_calls, self.analysis_calls
        return {
            "pairs": int(e.size),
            "flip": int((e & ~a).sum()),
            "both_call": int((e & a).sum()),
            "neither_calls": int((~e & ~a).sum()),
            "reversed": int((~e & a).sum()),
        }

    def flip_rate(self, alpha: float = 0.05) -> Any:
        """The share of pairs that flip, with its Clopper–Pearson interval."""
        return binomial_rate(self.flips.tolist(), alpha)


def check_flips(decision: ToolDecision, pairs: Sequence[Any]) -> FlipCheck:
    """Run both variants of every pair and record whether each pair flips the decision."""
    if not isinstance(decision, ToolDecision):
        raise InputError(f"'decision' must be a ToolDecision. Got {type(decision).__name__}.")
    pairs = check_pairs(pairs, "pairs", "check_flips")
    ex = [p.execution for p in pairs]
    an = [p.analysis for p in pairs]
    return FlipCheck(
        decision.calls(ex), decision.calls(an), decision.logit_diff(ex), decision.logit_diff(an)
    )
