"""Where each activation site lives inside a Hugging Face causal LM: one table per model family.

Canonical site names (the only names trustlab uses, for every architecture):

    embed                   the residual stream as it enters block 0 (token embeddings, plus
                            positional embeddings and any embedding scale the family applies)
    blocks.{i}.resid_pre    the residual stream entering block i (== embed for i = 0)
    blocks.{i}.resid_post   the residual stream leaving block i (before the final norm)
    blocks.{i}.attn_out     the attention term block i adds to the residual stream
    blocks.{i}.mlp_out      the MLP term block i adds to the residual stream

``attn_out``/``mlp_out`` are the tensors actually *added* to the stream, so for families with
post-norms (Gemma 2/3, OLMo 2) they are the outputs of those norms and for Phi-3 the outputs of
its residual dropouts. For every family, ``resid_post = resid_pre + attn_out + mlp_out``
(checked in tests), which is what makes directional ablation at ``attn_out``/``mlp_out`` exact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from torch import nn

from trustlab.core.errors import InputError

__all__ = [
    "ADAPTERS",
    "SITE_KINDS",
    "BoundAdapter",
    "FamilyAdapter",
    "SiteKind",
    "bind_adapter",
    "site_name",
]

SiteKind = Literal["resid_pre", "resid_post", "attn_out", "mlp_out"]
SITE_KINDS: tuple[SiteKind, ...] = ("resid_pre", "resid_post", "attn_out", "mlp_out")
_SITE_RE = re.compile(r"^blocks\.(\d+)\.(resid_pre|resid_post|attn_out|mlp_out)$")


def site_name(layer: int, kind: SiteKind) -> str:
    """Canonical name of a block site, e.g. ``site_name(3, "resid_pre") == "blocks.3.resid_pre"``."""
    if kind not in SITE_KINDS:
        raise InputError(f"The site kind must be one of {SITE_KINDS}. Got {kind!r}.")
    return f"blocks.{int(layer)}.{kind}"


@dataclass(frozen=True)
class FamilyAdapter:
    """Module paths of one model family, relative to the loaded ``AutoModelForCausalLM``.

    ``layers`` lists candidate dotted paths to the ``nn.ModuleList`` of decoder blocks (the
    first that exists wins); ``attn_out``/``mlp_out`` are paths inside one block to the module
    whose output is the term added to the residual stream.
    """

    layers: tuple[str, ...]
    attn_out: str
    mlp_out: str


_LLAMA_LIKE = FamilyAdapter(layers=("model.layers",), attn_out="self_attn", mlp_out="mlp")
_POST_NORM = FamilyAdapter(
    layers=("model.layers", "model.language_model.layers"),
    attn_out="post_attention_layernorm",
    mlp_out="post_feedforward_layernorm",
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
    ),
    "phi3": FamilyAdapter(
        layers=("model.layers",), attn_out="resid_attn_dropout", mlp_out="resid_mlp_dropout"
    ),
    "gpt2": FamilyAdapter(layers=("transformer.h",), attn_out="attn", mlp_out="mlp"),
    "gpt_neox": FamilyAdapter(
        layers=("gpt_neox.layers",), attn_out="post_attention_dropout", mlp_out="post_mlp_dropout"
    ),
}

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

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    def parse(self, site: str) -> tuple[int, str]:
        """Split a canonical site name into (layer, kind); ``embed`` is (0, "embed")."""
        if site == "embed":
            return 0, "embed"
        match = _SITE_RE.match(site) if isinstance(site, str) else None
        if match is None:
            raise InputError(
                "Activation sites are 'embed' or 'blocks.{i}.{resid_pre|resid_post|attn_out|"
                f"mlp_out}}'. Got {site!r}."
            )
        layer = int(match.group(1))
        if layer >= self.n_layers:
            raise InputError(
                f"Site {site!r} names block {layer}, but this {self.model_type} model has "
                f"{self.n_layers} blocks (0..{self.n_layers - 1})."
            )
        return layer, match.group(2)

    def module(self, site: str) -> tuple[nn.Module, Literal["pre", "post"]]:
        """The module to hook for ``site`` and whether its input ("pre") or output ("post")."""
        layer, kind = self.parse(site)
        block = self.layers[layer]
        if kind in ("embed", "resid_pre"):
            return block, "pre"
        if kind == "resid_post":
            return block, "post"
        path = self.attn_out if kind == "attn_out" else self.mlp_out
        sub = _get(block, path) if path is not None else None
        if sub is None:
            where = (
                f"looked for {path!r} in the block"
                if path is not None
                else "the family is not in trustlab.lm.adapters.ADAPTERS"
            )
            raise InputError(
                f"Site {site!r} is not available for model type {self.model_type!r} ({where}). "
                "Use the resid_pre/resid_post sites."
            )
        return sub, "post"


def bind_adapter(model: nn.Module) -> BoundAdapter:
    """Find the decoder blocks and site modules of ``model`` from the family table."""
    config = getattr(model, "config", None)
    model_type = str(getattr(config, "model_type", type(model).__name__))
    family = ADAPTERS.get(model_type)
    paths = family.layers if family is not None else _GENERIC_LAYER_PATHS
    for path in paths:
        layers = _get(model, path)
        if isinstance(layers, nn.ModuleList) and len(layers) > 0:
            if family is not None:
                return BoundAdapter(model_type, layers, path, family.attn_out, family.mlp_out)
            # Unknown family: which module's output is *added* to the stream is not known
            # (post-norms, dropouts), so only the residual sites are offered.
            return BoundAdapter(model_type, layers, path, None, None)
    known = ", ".join(sorted(ADAPTERS))
    raise InputError(
        f"Unsupported architecture {type(model).__name__} (model_type {model_type!r}): no decoder "
        f"blocks found at {', '.join(paths)}. Known families: {known}; add a row to "
        "trustlab.lm.adapters.ADAPTERS."
    )
