"""Per-example gradients on chosen parameter slices, and their projection on a reference.

The gradient of one example is that of its own response loss (mean cross-entropy over its
response and end-of-turn tokens, the training loss with a batch of one), with respect to the
parameters whose names match ``params`` (fnmatch patterns; default: all trainable ones),
flattened and concatenated in ``model.named_parameters()`` order (:func:`gradient_layout`).

Two exact implementations:

* ``"loop"``: one forward/backward per example (no padding);
* ``"vmap"``: ``torch.func.vmap(grad(...))`` over a right-padded chunk of examples. Right padding
  needs no attention mask with causal attention: a real token never attends to a later pad, and
  pad positions carry no loss, so each example's gradient is exact.

``method="auto"`` picks the one measured faster on CPU here (``benchmarks/finetune.py``; see
docs/finetune.md). Memory is bounded: examples are processed ``batch_size`` at a time; with a
``reference`` (``[d]`` or ``[k, d]``) only the ``[n]`` / ``[n, k]`` projections (dot products, or
cosines with ``normalize=True``) are kept, never the ``[n, d]`` matrix; without one, the full
matrix is returned only when it fits in ``max_bytes``. ``reduce`` maps each chunk's ``[b, d]``
gradients to any ``[b, ...]`` summary (per-slice cosines, a random projection, ...), so callers
compute their own statistics with the same bounded memory.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch

from trustlab.core.errors import InputError
from trustlab.core.runtime import torch_runtime
from trustlab.finetune.loop import EncodedExample, _unwrap, encode_data

__all__ = ["gradient_layout", "mean_gradient", "per_example_gradients"]

#: Measured on the development machine (benchmarks/finetune.py, chat-s, MLP slices): see docs.
AUTO_METHOD: Literal["loop", "vmap"] = "vmap"


def _selected(model: Any, params: Sequence[str] | None) -> list[tuple[str, torch.nn.Parameter]]:
    if params is not None and (isinstance(params, str) or not params):
        raise InputError(
            "The 'params' parameter of per_example_gradients is a list of fnmatch patterns over "
            f"parameter names. Got {params!r}."
        )
    named = list(model.named_parameters())
    chosen = [
        (name, p)
        for name, p in named
        if (params is None and p.requires_grad)
        or (params is not None and any(fnmatch.fnmatchcase(name, pat) for pat in params))
    ]
    if not chosen:
        raise InputError(
            f"The 'params' parameter of per_example_gradients matches no parameter: {params}. "
            f"Names look like {[n for n, _ in named[:3]]}."
        )
    return chosen


def gradient_layout(model: Any, params: Sequence[str] | None = None) -> list[tuple[str, tuple]]:
    """(name, shape) of each parameter in the flattened gradient, in order."""
    hf_model = model.model if hasattr(model, "adapter") else model
    if not isinstance(hf_model, torch.nn.Module):
        raise InputError(f"The 'model' parameter of gradient_layout must be a torch model or a "
                         f"LanguageModel. Got {type(model).__name__}.")
    return [(name, tuple(p.shape)) for name, p in _selected(hf_model, params)]


def _pad_right(chunk: list[EncodedExample], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(e.ids) for e in chunk)
    ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
    labels = torch.full((len(chunk), width), -100, dtype=torch.long)
    for row, e in enumerate(chunk):
        ids[row, : len(e.ids)] = torch.tensor(e.ids)
        labels[row, e.n_prompt : len(e.ids)] = torch.tensor(e.ids[e.n_prompt :])
    return ids, labels


def _response_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over positions whose label is not -100 ([T] or [B, T])."""
    logits, labels = logits[..., :-1, :], labels[..., 1:]
    mask = labels != -100
    logp = torch.log_softmax(logits.float(), dim=-1)
    picked = torch.gather(logp, -1, labels.clamp_min(0).unsqueeze(-1)).squeeze(-1)
    return -(picked * mask).sum(-1) / mask.sum(-1).clamp_min(1)


def _loop_chunk(model, chosen, chunk: list[EncodedExample]) -> torch.Tensor:
    tensors = [p for _, p in chosen]
    rows = []
    for e in chunk:
        ids = torch.tensor([e.ids])
        labels = torch.full_like(ids, -100)
        labels[0, e.n_prompt :] = ids[0, e.n_prompt :]
        with torch.enable_grad():
            loss = _response_loss(model(input_ids=ids, use_cache=False).logits, labels)[0]
            grads = torch.autograd.grad(loss, tensors, allow_unused=True)
        rows.append(
            torch.cat(
                [
                    (g if g is not None else torch.zeros_like(p)).reshape(-1)
                    for g, p in zip(grads, tensors, strict=True)
                ]
            )
        )
    return torch.stack(rows)


def _vmap_chunk(model, chosen, chunk: list[EncodedExample], pad_id: int) -> torch.Tensor:
    from torch.func import functional_call, grad, vmap

    names = [name for name, _ in chosen]
    selected = {name: p.detach() for name, p in chosen}

    def loss_of(weights: dict[str, torch.Tensor], ids: torch.Tensor, labels: torch.Tensor):
        out = functional_call(model, weights, args=(), kwargs={"input_ids": ids[None], "use_cache": False}, strict=False)  # fmt: skip
        return _response_loss(out.logits[0], labels)

    ids, labels = _pad_right(chunk, pad_id)
    with torch.enable_grad():
        grads = vmap(grad(loss_of), in_dims=(None, 0, 0))(selected, ids, labels)
    return torch.cat([grads[name].reshape(len(chunk), -1) for name in names], dim=1)


def per_example_gradients(
    model: Any,
    data: Sequence[Any],
    *,
    tokenizer: Any = None,
    params: Sequence[str] | None = None,
    reference: torch.Tensor | None = None,
    normalize: bool = False,
    batch_size: int = 16,
    method: Literal["auto", "loop", "vmap"] = "auto",
    max_length: int | None = None,
    max_bytes: int = 1 << 30,
    threads: int = 1,
    reduce: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Per-example response-loss gradients ``[n, d]``, or their projections on ``reference``.

    ``reference``: ``[d]`` -> returns ``[n]``; ``[k, d]`` -> ``[n, k]`` (dot products; cosines
    with ``normalize``). ``d`` is the size of the chosen slice (:func:`gradient_layout`).
    ``reduce``: instead of a reference, a function of each chunk's float32 ``[b, d]`` gradients
    returning a ``[b, ...]`` tensor; the results are concatenated (``[n, ...]``).
    The model's weights are not changed and no ``.grad`` is left behind. ``threads``: torch
    threads while computing (restored after; 1 is fastest for small models on a shared machine).
    """
    hf_model, tok = _unwrap(model, tokenizer)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(
            f"The 'batch_size' parameter of per_example_gradients must be an int >= 1. "
            f"Got {batch_size!r}."
        )
    if method not in ("auto", "loop", "vmap"):
        raise InputError(f"The 'method' parameter takes 'auto', 'loop' or 'vmap'. Got {method!r}.")
    chosen = _selected(hf_model, params)
    d = sum(p.numel() for _, p in chosen)
    encoded = encode_data(tok, data, max_length)
    if not encoded:
        raise InputError("The 'data' parameter of per_example_gradients is empty.")
    ref = _check_reference(reference, d)
    if reduce is not None and (ref is not None or not callable(reduce)):
        raise InputError(
            "The 'reduce' parameter of per_example_gradients is a function of a [b, d] chunk "
            f"and excludes 'reference'. Got {reduce!r} with reference={reference is not None}."
        )
    if ref is None and reduce is None and len(encoded) * d * 4 > max_bytes:
        raise InputError(
            f"{len(encoded)} per-example gradients of {d} values need "
            f"{len(encoded) * d * 4 / 2**20:.0f} MiB (> max_bytes). Pass a 'reference' to keep "
            "only projections, choose fewer 'params', or raise 'max_bytes'."
        )
    how = AUTO_METHOD if method == "auto" else method
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    was_training = hf_model.training
    hf_model.eval()  # no dropout: the gradient of the function the model computes
    out = []
    try:
        with torch_runtime(threads):
            for start in range(0, len(encoded), batch_size):
                chunk = encoded[start : start + batch_size]
                if how == "vmap":
                    grads = _vmap_chunk(hf_model, chosen, chunk, pad_id)
                else:
                    grads = _loop_chunk(hf_model, chosen, chunk)
                # detached: with 'params' a strict subset of the trainable parameters, vmap's
                # gradients still carry an autograd graph to the others (reduce got tensors
                # that require grad, and .numpy() on its result failed)
                grads = grads.detach()
                if reduce is not None:
                    out.append(_reduced(reduce, grads.float(), len(chunk)))
                else:
                    out.append(grads if ref is None else _project(grads, ref, normalize))
    finally:
        hf_model.train(was_training)
    result = torch.cat(out)
    if ref is not None and reference is not None and reference.dim() == 1:
        return result[:, 0]
    return result


def _reduced(reduce: Callable, grads: torch.Tensor, b: int) -> torch.Tensor:
    value = reduce(grads)
    if not isinstance(value, torch.Tensor) or value.dim() < 1 or value.shape[0] != b:
        raise InputError(
            f"The 'reduce' function must return a tensor with one row per example ({b}). Got "
            f"{type(value).__name__}{tuple(getattr(value, 'shape', ()))}."
        )
    return value.detach()


def _check_reference(reference: torch.Tensor | None, d: int) -> torch.Tensor | None:
    if reference is None:
        return None
    if not isinstance(reference, torch.Tensor) or reference.dim() not in (1, 2):
        raise InputError(
            f"The 'reference' parameter must be a [d] or [k, d] tensor (d = {d}). Got "
            f"{type(reference).__name__}{tuple(getattr(reference, 'shape', ()))}."
        )
    ref = reference.detach().float().reshape(-1, reference.shape[-1])
    if ref.shape[1] != d:
        raise InputError(
            f"The 'reference' parameter has {ref.shape[1]} values per row; the chosen params have {d}."
        )
    if not torch.isfinite(ref).all():
        raise InputError("The 'reference' parameter contains NaN or inf.")
    return ref


def _project(grads: torch.Tensor, ref: torch.Tensor, normalize: bool) -> torch.Tensor:
    dots = grads.float() @ ref.T
    if normalize:
        dots = dots / (grads.float().norm(dim=1, keepdim=True) * ref.norm(dim=1)).clamp_min(1e-30)
    return dots


def mean_gradient(
    model: Any,
    data: Sequence[Any],
    *,
    tokenizer: Any = None,
    params: Sequence[str] | None = None,
    batch_size: int = 16,
    method: Literal["auto", "loop", "vmap"] = "auto",
) -> torch.Tensor:
    """The mean of the per-example gradients ``[d]`` (e.g. a harmful-compliance reference)."""
    total = None
    count = 0
    hf_model, tok = _unwrap(model, tokenizer)
    for start in range(0, len(data), 256):
        part = per_example_gradients(
            hf_model, data[start : start + 256], tokenizer=tok, params=params,
            batch_size=batch_size, method=method,
        )  # fmt: skip
        total = part.sum(0) if total is None else total + part.sum(0)
        count += part.shape[0]
    if total is None:
        raise InputError("The 'data' parameter of mean_gradient is empty.")
    return total / count
