"""Plug the organisms into ``trustlab.lm.load("organism:<name>")`` through lm's resolver hook."""

from __future__ import annotations

import importlib.util
from typing import Any

__all__ = ["register_with_lm", "resolve"]


def resolve(name: str, *, dtype: Any = None, device: str | None = None) -> Any:
    """A ``trustlab.lm.LanguageModel`` of organism ``name``, built first when not cached."""
    from trustlab.lm.loading import load_hf
    from trustlab.organisms.registry import (
        _default_progress,
        build,
        is_built,
        organism_dir,
    )

    if not is_built(name):
        with _default_progress(None) as progress:
            build(name, progress=progress)
    from trustlab.organisms.specs import get_spec

    kind = get_spec(name).kind
    if kind == "vision":
        from trustlab.core.errors import InputError

        raise InputError(
            f"Organism {name!r} is an image classifier, not a language model: load it with "
            f"trustlab.organisms.load_vit({name!r})."
        )
    if kind == "vision-language":
        from trustlab.organisms.vlm_build import load_vlm

        return load_vlm(organism_dir(name), dtype=dtype, device=device, spec=f"organism:{name}")
    lm = load_hf(organism_dir(name), dtype=dtype, device=device)
    lm.spec = f"organism:{name}"
    return lm


def register_with_lm() -> bool:
    """Register :func:`resolve` for the ``organism`` scheme when torch and transformers exist."""
    if (
        importlib.util.find_spec("torch") is None
        or importlib.util.find_spec("transformers") is None
    ):
        return False
    from trustlab.lm.loading import register_resolver

    register_resolver("organism", resolve)
    return True
