"""Activation patching: copy a component's activation from a source prompt into a target prompt.

    result = patch_activations(lm, sources, targets,
                               ["blocks.2.resid_pre", "blocks.1.attn_out", "blocks.1.head.3"],
                               metric=("<", "Sure"))              # logit difference
    result.effect()        # [n_components, n_pairs]: 0 = no change, 1 = the source's metric

A component is a site (``embed``, ``blocks.{i}.resid_pre|resid_post|attn_out|mlp_out|
mlp_hidden|head_z|head_out``) or one head, ``blocks.{i}.head.{h}`` (its output before the
output projection, ``head_z[..., h, :]``; since the projection is linear this is the same as
patching the head's contribution). Pairs are batched: one source pass reads every component,
then each target pass patches several components at once, one copy of the target batch per
component. Positions are counted over each prompt's real tokens, so source position ``p`` is
written into target position ``p`` (``"last"``: last into last); ``"all"`` needs pairs of equal
token counts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from trustlab.core.errors import InputError
from trustlab.lm.activations import Inputs, Progress
from trustlab.lm.attribution import _token_ids
from trustlab.lm.hooks import StepState, hook
from trustlab.lm.model import Batch, LanguageModel
from trustlab.lm.objectives import as_batch
from trustlab.lm.positions import PositionLike, as_positions

__all__ = ["Metric", "PatchResult", "head_component", "logit_diff_metric", "patch_activations"]

Metric = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``metric(logits [B, vocab] at each target's last position, pair_index [B]) -> [B]``."""

_HEAD_RE = re.compile(r"^blocks\.(\d+)\.head\.(\d+)$")


def head_component(layer: int, head: int) -> str:
    """The component name of one head, e.g. ``head_component(3, 1) == "blocks.3.head.1"``."""
    for name, value in (("layer", layer), ("head", head)):
        if isinstance(value, bool) or not hasattr(value, "__index__") or int(value) < 0:
            # -1 used to name "blocks.-1.head.0", a component no model has
            raise InputError(f"The '{name}' of a head component is an integer >= 0. Got {value!r}.")
    return f"blocks.{int(layer)}.head.{int(head)}"


def logit_diff_metric(
    lm: LanguageModel, target: Any, contrast: Any = None, n: int | None = None
) -> Metric:
    """``logit[target] - logit[contrast]`` (just ``logit[target]`` without a contrast).

    Tokens are ids or one-token strings; with ``n`` (the number of pairs) they may also be
    one per pair.
    """
    per_pair = n is not None
    t = _token_ids(lm, target, n if per_pair else 1, "target")
    c = None if contrast is None else _token_ids(lm, contrast, n if per_pair else 1, "contrast")

    def pick(ids: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
        return ids[index] if per_pair else ids.expand(size)

    def metric(logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        rows = torch.arange(logits.shape[0], device=logits.device)
        out = logits[rows, pick(t, index, len(rows)).to(logits.device)].float()
        if c is not None:
            out = out - logits[rows, pick(c, index, len(rows)).to(logits.device)].float()
        return out

    return metric


@dataclass(frozen=True)
class PatchResult:
    """``clean`` [N]: metric on each target; ``source`` [N]: on each source; ``patched``
    [K, N]: on each target with component ``k`` patched in from its source (float32, CPU)."""

    components: list[str]
    clean: torch.Tensor
    source: torch.Tensor
    patched: torch.Tensor

    def effect(self) -> torch.Tensor:
        """``(patched - clean) / (source - clean)`` [K, N]: 0 = the patch changes nothing,
        1 = it moves the target all the way to the source's metric (NaN where the pair's
        source and clean metrics are equal)."""
        gap = self.source - self.clean
        gap = torch.where(gap == 0, torch.full_like(gap, float("nan")), gap)
        return (self.patched - self.clean) / gap

    def mean_effect(self) -> torch.Tensor:
        """``mean(patched - clean) / mean(source - clean)`` per component [K] (robust to pairs
        whose own gap is tiny)."""
        gap = float((self.source - self.clean).mean())
        if gap == 0:
            return torch.full((len(self.components),), float("nan"))
        return (self.patched - self.clean).mean(1) / gap


@dataclass(frozen=True)
class _Component:
    name: str
    site: str
    head: int | None


def _parse(lm: LanguageModel, name: str) -> _Component:
    if not isinstance(name, str):
        raise InputError(f"A component is a site name or 'blocks.{{i}}.head.{{h}}'. Got {name!r}.")
    match = _HEAD_RE.match(name)
    if match is None:
        lm.adapter.module(name)  # validates the site (and that the family has it)
        return _Component(name, name, None)
    layer, head = int(match.group(1)), int(match.group(2))
    site = f"blocks.{layer}.head_z"
    lm.adapter.module(site)
    n_heads = lm.adapter.n_heads or 0
    if head >= n_heads:
        raise InputError(f"Component {name!r} names head {head}; block {layer} has {n_heads}.")
    return _Component(name, site, head)


def _columns(batch: Batch, targets: torch.Tensor) -> torch.Tensor:
    """Batch columns [B, P] of real-token indices ``targets`` [B, P] (left or right padding)."""
    real_index = batch.attention_mask.long().cumsum(1) - 1  # [B, T]
    hits = (
        real_index.unsqueeze(-1) == targets.unsqueeze(1)
    ) & batch.attention_mask.bool().unsqueeze(-1)
    return hits.to(torch.int8).argmax(1)


def _targets(
    lm: LanguageModel, src: Batch, tgt: Batch, pos: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    if pos.kind == "all":
        if not torch.equal(src.prompt_len.cpu(), tgt.prompt_len.cpu()):
            raise InputError(
                "positions='all' needs every source to have as many tokens as its target; "
                "use fixed-count positions (e.g. 'last', Positions.last(k)) otherwise."
            )
        width = int(src.prompt_len.max())
        idx = torch.arange(width, device=src.prompt_len.device).expand(src.size, -1)
        if bool((src.prompt_len != width).any()):
            raise InputError("positions='all' needs pairs of one common token count in a batch.")
        return idx, idx
    if not pos.is_fixed_count:
        raise InputError(f"Patching takes fixed-count positions or 'all'. Got {pos.describe()}.")
    n_post = lm.n_post_instruction_or_none
    return pos.prompt_targets(src.prompt_len, n_post), pos.prompt_targets(tgt.prompt_len, n_post)


def patch_activations(
    lm: LanguageModel,
    sources: Inputs,
    targets: Inputs,
    components: Sequence[str],
    metric: Metric | tuple[Any, Any],
    *,
    positions: PositionLike = "last",
    batch_size: int = 32,
    progress: Progress | None = None,
) -> PatchResult:
    """Patch each component from ``sources[i]`` into ``targets[i]`` and measure ``metric``.

    ``metric``: ``(target_token, contrast_token)`` (the logit difference at each target's last
    position; a token, a one-token string, or one per pair) or a :data:`Metric` callable.
    ``batch_size`` bounds the rows of one forward pass (pairs × components patched at once).
    Active interventions apply to every pass.
    """
    src_all = as_batch(lm, sources, "sources")
    tgt_all = as_batch(lm, targets, "targets")
    n = src_all.size
    if tgt_all.size != n:
        raise InputError(f"'sources' and 'targets' must pair up. Got {n} and {tgt_all.size}.")
    if isinstance(components, str) or not isinstance(components, Sequence) or not components:
        raise InputError("'components' must be a non-empty list of component names.")
    parsed = [_parse(lm, c) for c in components]
    if len({c.name for c in parsed}) != len(parsed):
        raise InputError(f"'components' has duplicates: {list(components)}.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"'batch_size' must be an integer >= 1. Got {batch_size!r}.")
    if isinstance(metric, tuple):
        if len(metric) != 2:
            raise InputError("A metric tuple is (target_token, contrast_token).")
        fn = logit_diff_metric(lm, metric[0], metric[1], n=n)
    elif callable(metric):
        fn = metric
    else:
        raise InputError(
            f"'metric' must be a callable or a (target, contrast) tuple. Got {metric!r:.60}."
        )
    pos = as_positions(positions)
    sites = sorted({c.site for c in parsed})
    n_pairs = min(n, batch_size)
    per_pass = max(1, batch_size // n_pairs)
    chunks = [list(range(s, min(n, s + n_pairs))) for s in range(0, n, n_pairs)]
    steps: Any = chunks
    if progress is not None:
        steps = progress(chunks, description="patching", total=len(chunks))
    clean = torch.empty(n)
    source = torch.empty(n)
    patched = torch.empty((len(parsed), n))
    with torch.no_grad():
        for chunk in steps:
            index = torch.as_tensor(chunk)
            src, tgt = src_all.rows(chunk), tgt_all.rows(chunk)
            src_idx, tgt_idx = _targets(lm, src, tgt, pos)
            src_cols = _columns(src, src_idx)
            saved: dict[str, torch.Tensor] = {}

            def keep(
                site: str, h: torch.Tensor, step: StepState, _cols=src_cols, _saved=saved
            ) -> None:
                rows = torch.arange(h.shape[0], device=h.device).unsqueeze(1)
                _saved[site] = h[rows, _cols].clone()

            with hook(lm, sites, keep):
                source[index] = _metric(fn, lm.forward(src, last_only=True), index)
            clean[index] = _metric(fn, lm.forward(tgt, last_only=True), index)
            for start in range(0, len(parsed), per_pass):
                group = parsed[start : start + per_pass]
                rep = tgt.rows(list(range(len(chunk))) * len(group))
                tgt_cols = _columns(rep, tgt_idx.repeat(len(group), 1))
                logits = _patched_pass(lm, rep, group, saved, tgt_cols, len(chunk))
                out = _metric(fn, logits, index.repeat(len(group)))
                patched[start : start + len(group), index] = out.view(len(group), len(chunk))
    return PatchResult(
        components=[c.name for c in parsed], clean=clean, source=source, patched=patched
    )


def _metric(fn: Metric, logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    out = fn(logits[:, -1, :], index)
    if not isinstance(out, torch.Tensor) or out.shape != (logits.shape[0],):
        raise InputError(
            f"'metric' must return one value per row ({logits.shape[0]}). Got "
            f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}."
        )
    return out.detach().float().cpu()


def _patched_pass(
    lm: LanguageModel,
    batch: Batch,
    group: list[_Component],
    saved: dict[str, torch.Tensor],
    cols: torch.Tensor,
    n: int,
) -> torch.Tensor:
    """One forward of ``len(group)`` stacked copies of the target chunk, copy ``k`` patched
    at component ``group[k]``."""
    by_site: dict[str, list[tuple[int, int | None]]] = {}
    for k, comp in enumerate(group):
        by_site.setdefault(comp.site, []).append((k, comp.head))

    def patch(site: str, h: torch.Tensor, step: StepState) -> torch.Tensor:
        if step.offset > 0:
            return h
        out = h.clone()
        src = saved[site].to(h.dtype)  # [n, P, ...]
        for k, head in by_site[site]:
            rows = torch.arange(k * n, (k + 1) * n, device=h.device).unsqueeze(1)
            c = cols[k * n : (k + 1) * n]
            if head is None:
                out[rows, c] = src
            else:
                out[rows, c, head] = src[:, :, head]
        return out

    with hook(lm, list(by_site), patch):
        return lm.forward(batch, last_only=True)
