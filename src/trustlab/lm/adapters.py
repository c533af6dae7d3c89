"""Where each activation site lives inside a Hugging Face causal LM: one table per model family.

Canonical site names (the only names trustlab uses, for every architecture):

    embed                   the residual stream as it enters block 0 (token embeddings, plus
                            positional embeddings and any embedding scale the family applies)
    blocks.{i}.resid_pre    the residual stream entering block i (== embed for i = 0)
    blocks.{i}.resid_post   the residual stream leaving block i (before the final norm)
    blocks.{i}.attn_out     the attention term block i adds to the residual stream
    blocks.{i}.mlp_out      the MLP term block i adds to the residual stream

and, inside a block (families whose row names their output projections):

    blocks.{i}.head_z       each head's output before the attention output projection,
                            [..., n_heads, d_head] (the projection's input, split by head)
    blocks.{i}.head_out     each head's term in the output projection's result,
                            [..., n_heads, d_model]: z_h @ W_O[h]; summed over heads, plus the
                            projection's bias, it is the projection's output
    blocks.{i}.mlp_hidden   the MLP hidden activation [..., d_mlp] (the down projection's input)

``attn_out``/``mlp_out`` are the tensors actually *added* to the stream, so for families with
post-norms (Gemma 2/3, OLMo 2) they are the outputs of those norms and for Phi-3 the outputs of
its residual dropouts. For every family, ``resid_post = resid_pre + attn_out + mlp_out``
(checked in tests), which is what makes directional ablation at ``attn_out``/``mlp_out`` exact.
For pre-norm families ``sum_h head_out + b_O = attn_out``; for post-norm families attn_out is the
post-norm of that sum (:mod:`trustlab.lm.attribution` splits it with the norm's scale frozen).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from trustlab.core.errors import InputError

__all__ = [
    "ADAPTERS",
    "BLOCK_KINDS",
    "HEAD_KINDS",
    "SITE_KINDS",
    "SITE_ORDER",
    "BoundAdapter",
    "FamilyAdapter",
    "SiteKind",
    "bind_adapter",
    "site_name",
]

SiteKind = Literal[
    "resid_pre", "resid_post", "attn_out", "mlp_out", "head_z", "head_out", "mlp_hidden"
]
#: Sites on the residual stream (each activation is [..., d_model]).
BLOCK_KINDS: tuple[SiteKind, ...] = ("resid_pre", "resid_post", "attn_out", "mlp_out")
#: Sites inside a block: per head, and the MLP hidden activation.
HEAD_KINDS: tuple[SiteKind, ...] = ("head_z", "head_out", "mlp_hidden")
SITE_KINDS: tuple[SiteKind, ...] = (*BLOCK_KINDS, *HEAD_KINDS)
_SITE_RE = re.compile(r"^blocks\.(\d+)\.(" + "|".join(SITE_KINDS) + r")$")
#: Order of the sites inside one block, as the forward pass reaches them.
SITE_ORDER = {
    "embed": -1,
    "resid_pre": 0,
    "head_z": 1,
    "head_out": 2,
    "attn_out": 3,
    "mlp_hidden": 4,
    "mlp_out": 5,
    "resid_post": 6,
}


def site_name(layer: int, kind: SiteKind) -> str:
    """Canonical name of a block site, e.g. ``site_name(3, "resid_pre") == "blocks.3.resid_pre"``."""
    if kind not in SITE_KINDS:
        raise InputError(f"The site kind must be one of {SITE_KINDS}. Got {kind!r}.")
    if isinstance(layer, bool) or not hasattr(layer, "__index__") or int(layer) < 0:
        # -1 used to name the site "blocks.-1.resid_post", which no model has
        raise InputError(f"The layer of a site is an integer >= 0. Got {layer!r}.")
    return f"blocks.{int(layer)}.{kind}"


@dataclass(frozen=True)
class FamilyAdapter:
    """Module paths of one model family, relative to the loaded ``AutoModelForCausalLM``.

    ``layers`` lists candidate dotted paths to the ``nn.ModuleList`` of decoder blocks (the
    first that exists wins); ``attn_out``/``mlp_out`` are paths inside one block to the module
    whose output is the term added to the residual stream. ``o_proj`` (the attention output
    projection, a ``Linear`` or GPT-2 ``Conv1D`` whose input is the heads concatenated) and
    ``mlp_down`` (the MLP down projection, whose input is the hidden activation) give the
    per-head and MLP-hidden sites; ``final_norm`` lists candidate paths (from the model root)
    to the norm before the unembedding; ``attn_post_norm`` says that ``attn_out`` is a norm
    applied to the ``o_proj`` output (Gemma 2/3, OLMo 2) rather than that output itself.
    """

    layers: tuple[str, ...]
    attn_out: str
    mlp_out: str
    o_proj: str | None = None
    mlp_down: str | None = None
    final_norm: tuple[str, ...] = ()
    attn_post_norm: bool = False


_LLAMA_LIKE = FamilyAdapter(
    layers=("model.layers",),
    attn_out="self_attn",
    mlp_out="mlp",
    o_proj="self_attn.o_proj",
    mlp_down="mlp.down_proj",
    final_norm=("model.norm",),
)
_POST_NORM = FamilyAdapter(
    layers=("model.layers", "model.language_model.layers"),
    attn_out="post_attention_layernorm",
    mlp_out="post_feedforward_layernorm",
    o_proj="self_attn.o_proj",
    mlp_down="mlp.down_proj",
    final_norm=("model.norm", "model.language_model.norm"),
    attn_post_norm=True,
)

# One row per model family (``config.model_type``).
ADAPTERS: dict[str, FamilyAdapter] = {
    "llama": _LLAMA_LIKE,
    "mistral": _LLAMA_LIKE,
    "qwen2": _LLAMA_LIKE,
    "qwen3": _LLAMA_LIKE,
    "gemma": _LLAMA_LIKE,
    "olmo": _LLAMA_LIKE,
    "smollm3": _LLAMA_LIKE,
    "gemma2": _POST_NORM,
    "gemma3": _POST_NORM,
    "gemma3_text": _POST_NORM,
    "olmo2": FamilyAdapter(
        layers=("model.layers",),
        attn_out="post_attention_layernorm",
        mlp_out="post_feedforward_layernorm",
        o_proj="self_attn.o_proj",
        mlp_down="mlp.down_proj",
        final_norm=("model.norm",),
        attn_post_norm=True,
    ),
    "phi3": FamilyAdapter(
        layers=("model.layers",),
        attn_out="resid_attn_dropout",
        mlp_out="resid_mlp_dropout",
        o_proj="self_attn.o_proj",
        mlp_down="mlp.down_proj",
        final_norm=("model.norm",),
    ),
    "gpt2": FamilyAdapter(
        layers=("transformer.h",),
        attn_out="attn",
        mlp_out="mlp",
        o_proj="attn.c_proj",
        mlp_down="mlp.c_proj",
        final_norm=("transformer.ln_f",),
    ),
    "gpt_neox": FamilyAdapter(
        layers=("gpt_neox.layers",),
        attn_out="post_attention_dropout",
        mlp_out="post_mlp_dropout",
        o_proj="attention.dense",
        mlp_down="mlp.dense_4h_to_h",
        final_norm=("gpt_neox.final_layer_norm",),
    ),
}
# Looked for, in order, when a family is not in the table (the unembedding helpers need it).
_GENERIC_FINAL_NORMS = (
    "model.norm",
    "model.language_model.norm",
    "transformer.ln_f",
    "gpt_neox.final_layer_norm",
    "model.final_layernorm",
)

# Looked for, in order, when a family is not in the table: residual sites still work.
_GENERIC_LAYER_PATHS = (
    "model.layers",
    "model.language_model.layers",
    "transformer.h",
    "gpt_neox.layers",
    "transformer.layers",
    "model.decoder.layers",
    "transformer.blocks",
)


def _get(root: nn.Module, path: str) -> nn.Module | None:
    obj: object = root
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if isinstance(obj, nn.Module) else None


@dataclass(frozen=True)
class BoundAdapter:
    """The adapter of one loaded model: its blocks and the module behind each site."""

    model_type: str
    layers: nn.ModuleList
    layers_path: str
    attn_out: str | None
    mlp_out: str | None
    o_proj: str | None = None
    mlp_down: str | None = None
    final_norm: nn.Module | None = None
    attn_post_norm: bool = False
    n_heads: int | None = None

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def has_heads(self) -> bool:
        """Whether the per-head sites (``head_z``, ``head_out``) exist for this model."""
        return self.o_proj is not None and self.n_heads is not None

    def parse(self, site: str) -> tuple[int, str]:
        """Split a canonical site name into (layer, kind); ``embed`` is (0, "embed")."""
        if site == "embed":
            return 0, "embed"
        match = _SITE_RE.match(site) if isinstance(site, str) else None
        if match is None:
            raise InputError(
                "Activation sites are 'embed' or 'blocks.{i}.{"
                + "|".join(SITE_KINDS)
                + f"}}'. Got {site!r}."
            )
        layer = int(match.group(1))
        if layer >= self.n_layers:
            raise InputError(
                f"Site {site!r} names block {layer}, but this {self.model_type} model has "
                f"{self.n_layers} blocks (0..{self.n_layers - 1})."
            )
        return layer, match.group(2)

    def _submodule(self, site: str, layer: int, path: str | None) -> nn.Module:
        sub = _get(self.layers[layer], path) if path is not None else None
        if sub is None:
            where = (
                f"looked for {path!r} in the block"
                if path is not None
                else "the family's row in trustlab.lm.adapters.ADAPTERS does not name it"
            )
            raise InputError(
                f"Site {site!r} is not available for model type {self.model_type!r} ({where}). "
                "Use the resid_pre/resid_post sites."
            )
        return sub

    def module(self, site: str) -> tuple[nn.Module, Literal["pre", "post"]]:
        """The module to hook for ``site`` and whether its input ("pre") or output ("post").

        ``head_z`` and ``mlp_hidden`` are the inputs of the output / down projections;
        ``head_out`` is computed from the output projection's input (see :meth:`out_proj`).
        """
        layer, kind = self.parse(site)
        block = self.layers[layer]
        if kind in ("embed", "resid_pre"):
            return block, "pre"
        if kind == "resid_post":
            return block, "post"
        if kind in ("head_z", "head_out"):
            if self.n_heads is None:
                raise InputError(
                    f"Site {site!r} needs the number of attention heads, which the config of "
                    f"this {self.model_type!r} model does not give."
                )
            return self._submodule(site, layer, self.o_proj), "pre"
        if kind == "mlp_hidden":
            return self._submodule(site, layer, self.mlp_down), "pre"
        path = self.attn_out if kind == "attn_out" else self.mlp_out
        return self._submodule(site, layer, path), "post"

    def out_proj(self, layer: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The attention output projection of block ``layer`` as ``(W [H*d_head, d_model], b)``:
        its output is ``z @ W + b`` for the concatenated heads ``z``."""
        module = self._submodule(f"blocks.{layer}.head_out", layer, self.o_proj)
        weight = module.weight
        # nn.Linear stores [out, in]; GPT-2's Conv1D stores [in, out] (and has ``nf`` = out)
        matrix = weight if hasattr(module, "nf") else weight.t()
        return matrix, getattr(module, "bias", None)

    def head_dim(self, layer: int) -> int:
        matrix, _ = self.out_proj(layer)
        assert self.n_heads is not None
        return int(matrix.shape[0]) // self.n_heads


def _n_heads(config: object) -> int | None:
    for key in ("num_attention_heads", "n_head", "num_heads"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    text = getattr(config, "text_config", None)
    return _n_heads(text) if text is not None and text is not config else None


# Where an image-text model (LLaVA-style) keeps its language model, relative to the root.
_LANGUAGE_MODEL_PREFIXES = ("model.language_model.", "language_model.model.", "language_model.")


def _language_model_family(config: object) -> FamilyAdapter | None:
    """An image-text model's adapter: its text model's family row, paths moved under the
    language model (``config.text_config.model_type`` names the family)."""
    family = ADAPTERS.get(str(getattr(getattr(config, "text_config", None), "model_type", "")))
    if family is None:
        return None

    def moved(paths: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(pre + p.removeprefix("model.") for pre in _LANGUAGE_MODEL_PREFIXES
                     for p in paths if p.startswith("model."))  # fmt: skip

    return dataclasses.replace(family, layers=moved(family.layers), final_norm=moved(family.final_norm))


def bind_adapter(model: nn.Module) -> BoundAdapter:
    """Find the decoder blocks and site modules of ``model`` from the family table."""
    config = getattr(model, "config", None)
    model_type = str(getattr(config, "model_type", type(model).__name__))
    family = ADAPTERS.get(model_type) or _language_model_family(config)
    paths = family.layers if family is not None else _GENERIC_LAYER_PATHS
    norm_paths = family.final_norm if family is not None else _GENERIC_FINAL_NORMS
    final_norm = next((m for m in (_get(model, p) for p in norm_paths) if m is not None), None)
    for path in paths:
        layers = _get(model, path)
        if isinstance(layers, nn.ModuleList) and len(layers) > 0:
            if family is not None:
                return BoundAdapter(
                    model_type,
                    layers,
                    path,
                    family.attn_out,
                    family.mlp_out,
                    o_proj=family.o_proj,
                    mlp_down=family.mlp_down,
                    final_norm=final_norm,
                    attn_post_norm=family.attn_post_norm,
                    n_heads=_n_heads(config),
                )
            # Unknown family: which module's output is *added* to the stream is not known
            # (post-norms, dropouts), so only the residual sites are offered.
            return BoundAdapter(model_type, layers, path, None, None, final_norm=final_norm)
    known = ", ".join(sorted(ADAPTERS))
    raise InputError(
        f"Unsupported architecture {type(model).__name__} (model_type {model_type!r}): no decoder "
        f"blocks found at {', '.join(paths)}. Known families: {known}; add a row to "
        "trustlab.lm.adapters.ADAPTERS."
    )
