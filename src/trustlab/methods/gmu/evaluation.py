"""Downstream scores of a (fine-tuned) language model without decoding: teacher-forced
per-example correctness of the response and the held-out loss.

An example counts as correct when the model's argmax at every response position (response
tokens and end-of-turn, as :func:`trustlab.finetune.encode_data` encodes them) is the reference
token: greedy decoding would then produce exactly the reference, so this equals exact match of
a greedy reply for these examples, at the cost of one forward pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from trustlab.core.errors import InputError
from trustlab.finetune import encode_data

__all__ = ["response_scores"]


def response_scores(
    model: Any, examples: Sequence[Any], *, tokenizer: Any = None, batch: int = 32
) -> tuple[torch.Tensor, float]:
    """``(correct [n] bool, mean response loss)`` of ``model`` on ``examples`` (organism
    Examples or (prompt, response) pairs). A non-finite loss is returned as ``inf``."""
    if hasattr(model, "model") and hasattr(model, "tokenizer") and hasattr(model, "adapter"):
        model, tokenizer = model.model, tokenizer or model.tokenizer
    if not isinstance(model, torch.nn.Module) or not hasattr(model, "config"):
        raise InputError(
            f"The 'model' parameter of response_scores must be a causal LM. Got "
            f"{type(model).__name__}."
        )
    if tokenizer is None:
        raise InputError("response_scores needs the 'tokenizer' when 'model' is a bare model.")
    encoded = encode_data(tokenizer, examples)
    if not encoded:
        raise InputError("The 'examples' parameter of response_scores is empty.")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    was = model.training
    model.eval()
    correct, total, count = [], 0.0, 0
    with torch.no_grad():
        for start in range(0, len(encoded), batch):
            chunk = encoded[start : start + batch]
            width = max(len(e.ids) for e in chunk)
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            mask = torch.zeros_like(ids)
            target = torch.zeros((len(chunk), width), dtype=torch.bool)
            for row, e in enumerate(chunk):
                ids[row, : len(e.ids)] = torch.tensor(e.ids)
                mask[row, : len(e.ids)] = 1
                target[row, e.n_prompt : len(e.ids)] = True
            logits = model(input_ids=ids, attention_mask=mask).logits.double()
            pred, gold, tmask = logits[:, :-1], ids[:, 1:], target[:, 1:]
            hits = (pred.argmax(-1) == gold) | ~tmask
            correct.append(hits.all(dim=1))
            logp = torch.log_softmax(pred, -1).gather(-1, gold[..., None])[..., 0]
            total += float(-(logp * tmask).sum())
            count += int(tmask.sum())
    model.train(was)
    loss = total / count
    return torch.cat(correct), loss if math.isfinite(loss) else math.inf
