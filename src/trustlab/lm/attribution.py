"""Unembedding, the logit lens, and direct logit attribution (DLA).

    logits = unembed(lm, resid)                                   # final norm + unembedding
    lens = logit_lens(lm, prompts, tokens=[i_sure, i_i])          # [N, L+1, P, 2]
    att = direct_logit_attribution(lm, prompts, "I", "Sure")      # every write to the stream
    att.table()                                                   # (component, mean, share)

**What DLA computes.** The logit difference ``l[t] - l[c]`` at one position is
``u · N(x) (+ unembedding bias)`` with ``u = W_U[t] - W_U[c]`` and ``N`` the final norm of the
last residual stream ``x = embed + sum_i (attn_out_i + mlp_out_i)``. With the norm's
per-token scale frozen at its value on ``x`` (the usual convention, e.g. TransformerLens's
cached final-LN scale), ``N`` is linear: ``N(x) = sum_c g ⊙ center(c) · s(x) + b``, so each
component ``c`` gets the attribution ``u · (g ⊙ center(c)) s(x)``; ``center`` subtracts the
mean for LayerNorm and is the identity for RMSNorm. Heads split their block's ``attn_out``
the same way: ``attn_out = sum_h z_h W_O[h] + b_O`` for pre-norm families; for post-norm
families (Gemma 2/3, OLMo 2) the post-attention norm is split with its own scale frozen.

**The correction.** What is not a component's linear share is reported separately as
``correction``: the final norm's bias (LayerNorm), the unembedding bias, and logit
soft-capping (Gemma 2). ``sum(attributions) + correction == the model's logit difference``
up to float rounding (tested on every family of the test kit and on chat-xs); it is not
forced to hold: the attributions are computed from the captured components, the logit
difference from the model's own forward pass.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trustlab.core.errors import InputError
from trustlab.lm.activations import Inputs, Progress, batches, capture
from trustlab.lm.adapters import site_name
from trustlab.lm.hooks import head_terms
from trustlab.lm.model import LanguageModel
from trustlab.lm.positions import PositionLike, as_positions

__all__ = [
    "LogitAttribution",
    "NormSplit",
    "direct_logit_attribution",
    "logit_lens",
    "split_norm",
    "token_id",
    "unembed",
]


# ---------------------------------------------------------------------------------- norms
@dataclass(frozen=True)
class NormSplit:
    """A norm ``N(x) = g ⊙ center(x) · s(x) + b`` with its scale ``s(x)`` frozen: linear.

    ``scale`` [..., 1] is ``s(x)`` per token, ``gain`` [D] is ``g``, ``bias`` [D] or None,
    ``center`` whether the mean is subtracted (LayerNorm). All float64.
    """

    scale: torch.Tensor
    gain: torch.Tensor
    bias: torch.Tensor | None
    center: bool

    def share(self, v: torch.Tensor) -> torch.Tensor:
        """The linear share of component ``v``: [..., D] like the normed tensor, or with extra
        axes before D (e.g. [B, n_components, D] for a scale of [B, 1])."""
        v = v.double()
        if self.center:
            v = v - v.mean(-1, keepdim=True)
        scale = self.scale
        extra = v.dim() - scale.dim()
        if extra > 0:
            scale = scale.reshape(*scale.shape[:-1], *([1] * extra), 1)
        return v * self.gain * scale

    def cpu(self) -> NormSplit:
        return NormSplit(
            self.scale.cpu(),
            self.gain.cpu() if isinstance(self.gain, torch.Tensor) else self.gain,
            None if self.bias is None else self.bias.cpu(),
            self.center,
        )


def split_norm(norm: nn.Module, x: torch.Tensor, *, rtol: float = 1e-4) -> NormSplit:
    """Split ``norm`` (LayerNorm, or an RMSNorm with gain ``w`` or Gemma's ``1 + w``) at ``x``.

    The split is checked against the module's own output on ``x``; a norm it does not
    reproduce (to ``rtol`` of the output's scale) is an error, never a silent approximation.
    """
    with torch.no_grad():
        out = norm(x).double()
    xd = x.double()
    weight = getattr(norm, "weight", None)
    bias = getattr(norm, "bias", None)
    eps = next(
        (
            float(getattr(norm, k))
            for k in ("variance_epsilon", "eps", "epsilon")
            if hasattr(norm, k)
        ),
        None,
    )
    if weight is None or eps is None:
        raise InputError(
            f"Cannot split the norm {type(norm).__name__}: it has no weight/eps attributes."
        )
    w = weight.detach().double()
    b = None if bias is None else bias.detach().double()
    tried: list[NormSplit] = []
    centered = xd - xd.mean(-1, keepdim=True)
    layer_scale = torch.rsqrt(centered.square().mean(-1, keepdim=True) + eps)
    rms_scale = torch.rsqrt(xd.square().mean(-1, keepdim=True) + eps)
    if isinstance(norm, nn.LayerNorm) or b is not None:
        tried.append(NormSplit(layer_scale, w, b, True))
    tried += [NormSplit(rms_scale, w, b, False), NormSplit(rms_scale, 1.0 + w, b, False)]
    size = out.abs().max().clamp_min(1e-12)
    for cand in tried:
        rebuilt = cand.share(xd) + (cand.bias if cand.bias is not None else 0.0)
        if float((rebuilt - out).abs().max()) <= rtol * float(size):
            return cand
    raise InputError(
        f"The norm {type(norm).__name__} is neither a LayerNorm nor an RMSNorm with gain w or "
        "1 + w; logit attribution cannot split it."
    )


def _final_norm(lm: LanguageModel) -> nn.Module:
    norm = lm.adapter.final_norm
    if norm is None:
        raise InputError(
            f"No final norm is known for model type {lm.adapter.model_type!r}; add its path to "
            "the family's row in trustlab.lm.adapters.ADAPTERS (final_norm)."
        )
    return norm


def _softcap(lm: LanguageModel) -> float | None:
    config = lm.model.config
    cap = getattr(config, "final_logit_softcapping", None)
    if cap is None and getattr(config, "text_config", None) is not None:
        cap = getattr(config.text_config, "final_logit_softcapping", None)
    return None if cap is None else float(cap)


# ---------------------------------------------------------------------------------- unembed
def unembed(lm: LanguageModel, resid: torch.Tensor, *, apply_norm: bool = True) -> torch.Tensor:
    """Logits ``[..., vocab]`` of residual-stream vectors ``[..., d_model]``: the final norm
    (unless ``apply_norm=False``), the unembedding, and the family's logit soft-capping —
    the model's own head, so ``unembed(lm, last resid_post) == forward logits``."""
    h = lm.check_vectors(resid, "resid").to(device=lm.device, dtype=lm.dtype)
    with torch.no_grad():
        if apply_norm:
            h = _final_norm(lm)(h)
        logits = lm.model.get_output_embeddings()(h)
        cap = _softcap(lm)
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
    return logits


def token_id(lm: LanguageModel, token: int | str, name: str = "token") -> int:
    """A token id from an int or a string that encodes to exactly one token."""
    if isinstance(token, bool):
        raise InputError(f"'{name}' must be a token id or a one-token string. Got {token!r}.")
    if isinstance(token, int):
        if not 0 <= token < lm.vocab_size:
            raise InputError(f"'{name}' {token} is outside the vocabulary 0..{lm.vocab_size - 1}.")
        return token
    if isinstance(token, str):
        ids = lm.tokenizer(token, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise InputError(
                f"'{name}' {token!r} encodes to {len(ids)} tokens {ids}; give one token id."
            )
        unk = getattr(lm.tokenizer, "unk_token_id", None)
        if unk is not None and int(ids[0]) == unk and token != lm.tokenizer.unk_token:
            # a word outside the vocabulary used to be read as the unknown token
            raise InputError(f"'{name}' {token!r} is not in the vocabulary (it encodes to the "
                             "unknown token).")  # fmt: skip
        return int(ids[0])
    raise InputError(
        f"'{name}' must be a token id or a one-token string. Got {type(token).__name__}."
    )


def _token_ids(lm: LanguageModel, tokens: Any, n: int, name: str) -> torch.Tensor:
    """[n] ids from one token (int/str) or one per prompt."""
    if isinstance(tokens, int | str):
        return torch.full((n,), token_id(lm, tokens, name), dtype=torch.long)
    if isinstance(tokens, torch.Tensor):
        tokens = tokens.tolist()
    if not isinstance(tokens, Sequence) or len(tokens) != n:
        raise InputError(f"'{name}' must be one token or one per prompt ({n}). Got {tokens!r:.80}.")
    return torch.tensor([token_id(lm, t, name) for t in tokens], dtype=torch.long)


def logit_lens(
    lm: LanguageModel,
    prompts: Inputs,
    positions: PositionLike = "last",
    *,
    sites: Sequence[str] | None = None,
    tokens: Sequence[int | str] | None = None,
    batch_size: int = 16,
    progress: Progress | None = None,
) -> torch.Tensor:
    """Logits of the residual stream read through the final norm and unembedding at every
    layer: ``[n_prompts, n_sites, n_positions, vocab]`` (float32, CPU), or only the columns of
    ``tokens``. Default sites: every block's ``resid_pre`` and the last ``resid_post`` (whose
    lens equals the model's logits)."""
    from trustlab.lm.activations import get_activations

    names = (
        list(sites) if sites is not None else [*lm.sites("resid_pre"), lm.sites("resid_post")[-1]]
    )
    if tokens is not None and (isinstance(tokens, str | int) or not isinstance(tokens, Sequence)):
        # "sky" used to be read as the tokens "s", "k", "y"
        raise InputError(f"'tokens' must be a list of token ids or one-token strings. Got {tokens!r:.40}.")
    cols = None if tokens is None else torch.tensor([token_id(lm, t, "tokens") for t in tokens])
    acts = get_activations(
        lm, prompts, names, positions, batch_size=batch_size, progress=progress
    )  # [N, S, P, D]
    out = []
    for start in range(0, acts.shape[0], batch_size):
        logits = unembed(lm, acts[start : start + batch_size]).float().cpu()
        out.append(logits if cols is None else logits[..., cols])
    return torch.cat(out, 0)


# ---------------------------------------------------------------------------------- DLA
@dataclass(frozen=True)
class LogitAttribution:
    """Direct logit attribution of one logit difference per prompt (see the module doc).

    ``components``: ``embed``, then ``blocks.{i}.attn_out`` and ``blocks.{i}.mlp_out`` per block;
    ``values`` [N, n_components]; ``heads`` [N, n_layers, n_heads] (each head's share of its
    block's ``attn_out``) and ``head_bias`` [N, n_layers] (the output projection's bias share),
    None where the family has no per-head sites; ``correction`` [N] (final-norm bias,
    unembedding bias, soft-capping); ``logit_diff`` [N] (the model's own, from its forward
    pass). All float64 on CPU.
    """

    components: list[str]
    values: torch.Tensor
    heads: torch.Tensor | None
    head_bias: torch.Tensor | None
    correction: torch.Tensor
    logit_diff: torch.Tensor

    def total(self) -> torch.Tensor:
        """``sum(values) + correction`` [N]: equals :attr:`logit_diff` up to rounding."""
        return self.values.sum(1) + self.correction

    def head_names(self) -> list[str]:
        if self.heads is None:
            return []
        return [
            f"blocks.{i}.head.{h}"
            for i in range(self.heads.shape[1])
            for h in range(self.heads.shape[2])
        ]

    def table(self, *, heads: bool = True) -> list[dict[str, Any]]:
        """One row per component (heads included): mean attribution over prompts, its
        standard deviation, and its share of the mean logit difference."""
        names, cols = (
            list(self.components),
            [self.values[:, i] for i in range(self.values.shape[1])],
        )
        if heads and self.heads is not None:
            names += self.head_names()
            cols += list(self.heads.reshape(self.heads.shape[0], -1).unbind(1))
        names.append("correction")
        cols.append(self.correction)
        mean_diff = float(self.logit_diff.mean())
        rows = []
        for name, col in zip(names, cols, strict=True):
            mean = float(col.mean())
            rows.append(
                {
                    "component": name,
                    "mean": mean,
                    "std": float(col.std()) if col.numel() > 1 else 0.0,
                    "share": mean / mean_diff if mean_diff != 0 else float("nan"),
                }
            )
        return rows


def direct_logit_attribution(
    lm: LanguageModel,
    prompts: Inputs,
    target: Any,
    contrast: Any = None,
    *,
    position: PositionLike = "last",
    heads: bool = True,
    batch_size: int = 16,
    progress: Progress | None = None,
) -> LogitAttribution:
    """Attribute ``logit[target] - logit[contrast]`` at ``position`` to every write into the
    residual stream (``embed``, each ``attn_out`` and ``mlp_out``) and to every head.

    ``target``/``contrast``: a token id or one-token string, or one per prompt; without a
    contrast the target's logit itself is attributed. ``position``: one position per prompt
    (default the last; the next-token prediction). Active interventions apply.
    """
    pos = as_positions(position)
    if not pos.is_fixed_count or pos.count(lm.n_post_instruction_or_none) != 1:
        raise InputError(f"'position' must select one token per prompt. Got {pos.describe()}.")
    from trustlab.lm.activations import _n_inputs

    n = _n_inputs(prompts, "direct_logit_attribution")
    t_ids = _token_ids(lm, target, n, "target")
    c_ids = None if contrast is None else _token_ids(lm, contrast, n, "contrast")
    use_heads = bool(heads) and lm.adapter.has_heads
    resid_sites = ["embed"]
    for i in range(lm.n_layers):
        resid_sites += [site_name(i, "attn_out"), site_name(i, "mlp_out")]
    resid_sites.append(site_name(lm.n_layers - 1, "resid_post"))
    head_sites = [site_name(i, "head_z") for i in range(lm.n_layers)] if use_heads else []
    w_u = lm.model.get_output_embeddings().weight.detach()
    b_u = getattr(lm.model.get_output_embeddings(), "bias", None)
    final = _final_norm(lm)
    cap = _softcap(lm)
    values = torch.empty((n, len(resid_sites) - 1), dtype=torch.float64)
    head_vals = torch.empty((n, lm.n_layers, lm.adapter.n_heads or 0), dtype=torch.float64)
    head_bias = torch.zeros((n, lm.n_layers), dtype=torch.float64)
    correction = torch.empty(n, dtype=torch.float64)
    logit_diff = torch.empty(n, dtype=torch.float64)
    with torch.no_grad():
        for chunk, batch in batches(
            lm, prompts, batch_size, progress=progress, description="attribution"
        ):
            idx = torch.as_tensor(chunk)
            with contextlib.ExitStack() as stack:
                cap_r = stack.enter_context(
                    capture(lm, resid_sites, pos, dtype=lm.dtype, to_cpu=True)
                )
                cap_h = (
                    stack.enter_context(capture(lm, head_sites, pos, dtype=lm.dtype, to_cpu=True))
                    if use_heads
                    else None
                )
                last = pos.kind == "last" and bool(batch.attention_mask[:, -1].all())
                logits = lm.forward(batch, last_only=last)
            cols = (
                torch.full((batch.size,), logits.shape[1] - 1) if last else _columns(batch, pos, lm)
            )
            rows = torch.arange(batch.size, device=logits.device)
            actual = logits[rows, cols].double().cpu()  # [B, V]
            acts = cap_r.stacked()[:, :, 0]  # [B, S, D]
            x = acts[:, -1]
            split = split_norm(final, x.to(lm.device)).cpu()
            t_rows = t_ids[idx]
            c_rows = None if c_ids is None else c_ids[idx]
            w_t = w_u[t_rows].double().cpu()
            w_c = None if c_rows is None else w_u[c_rows].double().cpu()
            u = w_t - w_c if w_c is not None else w_t  # [B, D]
            comps = acts[:, :-1]  # embed, attn_0, mlp_0, ...
            values[idx] = (split.share(comps) * u.unsqueeze(1)).sum(-1)
            # the correction: final-norm bias, unembedding bias, soft-capping
            corr = torch.zeros(batch.size, dtype=torch.float64)
            if split.bias is not None:
                corr += (u * split.bias).sum(-1)
            normed = split.share(x) + (split.bias if split.bias is not None else 0.0)
            pre_t = (normed * w_t).sum(-1)
            pre_c = (normed * w_c).sum(-1) if w_c is not None else None
            if b_u is not None:
                bias = b_u.detach().double().cpu()
                pre_t = pre_t + bias[t_rows]
                corr += bias[t_rows]
                if pre_c is not None and c_rows is not None:
                    pre_c = pre_c + bias[c_rows]
                    corr -= bias[c_rows]
            if cap is not None:
                corr += _capped(pre_t, cap) - pre_t
                if pre_c is not None:
                    corr -= _capped(pre_c, cap) - pre_c
            correction[idx] = corr
            logit_diff[idx] = _diff(actual, t_ids[idx], c_ids, idx)
            if cap_h is not None:
                z = cap_h.stacked()[:, :, 0].flatten(-2)  # [B, L, H*dh]
                for layer in range(lm.n_layers):
                    hv, bv = _head_shares(lm, layer, z[:, layer], acts[:, 1 + 2 * layer], split, u)
                    head_vals[idx, layer] = hv
                    head_bias[idx, layer] = bv
    names = resid_sites[:-1]
    return LogitAttribution(
        components=names,
        values=values,
        heads=head_vals if use_heads else None,
        head_bias=head_bias if use_heads else None,
        correction=correction,
        logit_diff=logit_diff,
    )


def _capped(logit: torch.Tensor, cap: float) -> torch.Tensor:
    return torch.tanh(logit / cap) * cap


def _diff(
    logits: torch.Tensor, t: torch.Tensor, c: torch.Tensor | None, idx: torch.Tensor
) -> torch.Tensor:
    rows = torch.arange(logits.shape[0])
    out = logits[rows, t]
    return out - logits[rows, c[idx]] if c is not None else out


def _head_shares(
    lm: LanguageModel,
    layer: int,
    z: torch.Tensor,
    attn_out: torch.Tensor,
    final: NormSplit,
    u: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each head's and the projection bias's attribution [B, H], [B] in block ``layer``."""
    matrix, bias = lm.adapter.out_proj(layer)
    assert lm.adapter.n_heads is not None
    terms = head_terms(z.double(), matrix.detach().double().cpu(), lm.adapter.n_heads)  # [B, H, D]
    zero = torch.zeros(lm.d_model, dtype=torch.float64)
    b = (zero if bias is None else bias.detach().double().cpu()).expand(terms.shape[0], -1)
    if lm.adapter.attn_post_norm:  # attn_out = post_norm(sum_h terms + b): split it too
        module, _ = lm.adapter.module(site_name(layer, "attn_out"))
        post = split_norm(module, (terms.sum(1) + b).to(device=lm.device, dtype=lm.dtype)).cpu()
        terms = post.share(terms)
        b = post.share(b) + (post.bias if post.bias is not None else zero)
    rebuilt = terms.sum(1) + b
    err = float((rebuilt - attn_out.double()).abs().max())
    if err > 1e-3 * float(attn_out.double().abs().max().clamp_min(1e-6)):
        raise InputError(
            f"The heads of block {layer} do not add up to its attn_out (max error {err:.3g}); "
            "per-head attribution is not supported for this family."
        )
    head_vals = (final.share(terms) * u.unsqueeze(1)).sum(-1)
    bias_vals = (final.share(b) * u).sum(-1)
    return head_vals, bias_vals


def _columns(batch: Any, pos: Any, lm: LanguageModel) -> torch.Tensor:
    """The batch column of the one selected position of each row (left or right padding)."""
    targets = pos.prompt_targets(batch.prompt_len, lm.n_post_instruction_or_none)[
        :, 0
    ]  # real-token index
    real_index = batch.attention_mask.long().cumsum(1) - 1
    hits = (real_index == targets.unsqueeze(1)) & batch.attention_mask.bool()
    return hits.to(torch.int8).argmax(1)
