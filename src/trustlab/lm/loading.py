"""Model spec strings: ``hf:/path`` (a local checkpoint folder or ``.gguf`` file) and
``organism:<name>`` (trustlab's built-in organisms, provided by ``trustlab.organisms``).

Other schemes can be added with :func:`register_resolver`; the organisms package registers
``organism`` when it is imported (``load`` imports it on first use of the scheme).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trustlab.core.errors import DataError, InputError, MissingDependencyError
from trustlab.lm.model import LanguageModel

__all__ = ["Resolver", "load", "load_hf", "register_resolver", "registered_schemes"]

log = logging.getLogger(__name__)

Resolver = Callable[..., LanguageModel]
"""``resolver(name, *, dtype, device) -> LanguageModel`` for the part of a spec after 'scheme:'."""

_RESOLVERS: dict[str, Resolver] = {}
# Schemes whose resolver lives in another trustlab package, imported on first use.
_PROVIDERS = {"organism": "trustlab.organisms", "finetuned": "trustlab.finetune"}

_DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
}


def register_resolver(scheme: str, resolver: Resolver) -> None:
    """Make ``load(f"{scheme}:<name>")`` call ``resolver(name, dtype=..., device=...)``."""
    # a non-string scheme used to raise a raw AttributeError; a non-callable resolver was kept
    if not isinstance(scheme, str) or not scheme.isidentifier() or scheme in ("hf", "openai"):
        raise InputError(f"Cannot register the model-spec scheme {scheme!r}.")
    if not callable(resolver):
        raise InputError(
            f"The 'resolver' parameter of register_resolver must be callable. Got "
            f"{type(resolver).__name__}."
        )
    _RESOLVERS[scheme] = resolver


def registered_schemes() -> list[str]:
    return ["hf", *sorted(_RESOLVERS)]


def load(
    spec: str | Path,
    *,
    dtype: Any = None,
    device: str | None = None,
    attn_implementation: str | None = None,
) -> LanguageModel:
    """Load a causal LM from a spec string.

    ``hf:/path/to/folder`` (a ``save_pretrained`` folder), ``hf:/path/model.gguf`` (through
    transformers' ``gguf_file`` loading; needs ``gguf``), or ``organism:<name>``. A
    ``pathlib.Path`` means ``hf:``. ``dtype``: None (float32), "bfloat16", "float16",
    "auto" (the checkpoint's) or a torch dtype; ``device``: e.g. "cpu" (default), "cuda".
    """
    if isinstance(spec, Path):
        return load_hf(spec, dtype=dtype, device=device, attn_implementation=attn_implementation)
    if not isinstance(spec, str) or ":" not in spec:
        raise InputError(f"A model spec is 'hf:/path/to/model' or 'organism:<name>'. Got {spec!r}.")
    scheme, _, rest = spec.partition(":")
    if scheme == "hf":
        return load_hf(rest, dtype=dtype, device=device, attn_implementation=attn_implementation)
    if scheme not in _RESOLVERS and scheme in _PROVIDERS:
        try:
            importlib.import_module(_PROVIDERS[scheme])
        except ImportError as exc:
            raise InputError(
                f"Model spec {spec!r} needs the package {_PROVIDERS[scheme]}, which is not "
                f"available ({exc})."
            ) from exc
    if scheme not in _RESOLVERS:
        raise InputError(
            f"Unknown model-spec scheme {scheme!r} in {spec!r}; known: {registered_schemes()}."
        )
    model = _RESOLVERS[scheme](rest, dtype=dtype, device=device)
    model.spec = model.spec or spec
    return model


def _torch_dtype(dtype: Any) -> Any:
    import torch

    if dtype is None:
        return torch.float32
    if dtype == "auto" or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and dtype in _DTYPES:
        return getattr(torch, _DTYPES[dtype])
    raise InputError(
        f"dtype must be one of {sorted(_DTYPES)}, 'auto' or a torch dtype. Got {dtype!r}."
    )


def load_hf(
    path: str | Path,
    *,
    dtype: Any = None,
    device: str | None = None,
    attn_implementation: str | None = None,
) -> LanguageModel:
    """Load a local Hugging Face causal LM and its tokenizer (never touches a hub).

    A folder whose config has a ``vision_config`` and a ``text_config`` (LLaVA-style) loads as
    a :class:`~trustlab.lm.multimodal.VisionLanguageModel` (``AutoModelForImageTextToText``
    plus its ``AutoProcessor``): its language model carries the sites, its prompts may hold
    images."""
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise MissingDependencyError.for_package(
            "transformers", "llm", "Loading HF models"
        ) from exc
    target = Path(path).expanduser()
    if not target.exists():
        raise InputError(f"No model at {target}: 'hf:' needs a local folder or .gguf file.")
    kwargs: dict[str, Any] = {"local_files_only": True}
    folder = target
    if target.is_file():
        if target.suffix.lower() != ".gguf":
            raise InputError(f"'hf:' takes a checkpoint folder or a .gguf file. Got {target}.")
        for package in ("gguf", "accelerate"):  # transformers' GGUF loader needs both
            if importlib.util.find_spec(package) is None:
                raise MissingDependencyError.for_package(package, "llm", "Loading GGUF checkpoints")
        folder, kwargs["gguf_file"] = target.parent, target.name
    elif not (target / "config.json").exists():
        raise InputError(f"{target} has no config.json; is it a save_pretrained folder?")
    import transformers

    # transformers >= 4.56 calls it `dtype`; older releases only know `torch_dtype`
    major_minor = tuple(int(x) for x in transformers.__version__.split(".")[:2])
    dtype_key = "dtype" if major_minor >= (4, 56) else "torch_dtype"
    model_kwargs = dict(kwargs, **{dtype_key: _torch_dtype(dtype)})
    if attn_implementation is not None:
        model_kwargs["attn_implementation"] = attn_implementation
    if "gguf_file" not in kwargs:
        from trustlab.lm.multimodal import is_image_text_checkpoint, load_image_text

        if is_image_text_checkpoint(folder):  # LLaVA-style: AutoModelForImageTextToText + processor
            return load_image_text(folder, model_kwargs=model_kwargs, device=device)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), **kwargs)
        model = AutoModelForCausalLM.from_pretrained(str(folder), **model_kwargs)
    except (OSError, ValueError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"Could not load a causal LM from {target}: {first}") from exc
    if device is not None:
        model = model.to(device)
    log.debug("loaded %s (%s)", target, type(model).__name__)
    return LanguageModel(model, tokenizer, spec=f"hf:{target}")
