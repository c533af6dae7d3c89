"""Activations and SAEs on disk: ``.pt`` / ``.npy`` / ``.safetensors`` tensors, and the SAELens layout.

SAELens layout (a folder): ``sae_weights.safetensors`` with ``W_enc`` [d_in, d_sae], ``W_dec``
[d_sae, d_in], ``b_enc`` [d_sae], ``b_dec`` [d_in] and, for JumpReLU, ``threshold`` [d_sae];
and ``cfg.json`` with at least ``architecture`` (``standard`` = ReLU, ``topk``, ``jumprelu``),
``d_in``, ``d_sae``, ``apply_b_dec_to_input`` and, for TopK, ``k`` (newer SAELens) or
``activation_fn_kwargs.k`` (older). A BatchTopK SAE is saved the way SAELens exports one: as a
JumpReLU whose thresholds all equal θ (its inference rule is exactly that); trustlab records
the original architecture under ``metadata.trustlab`` so a round trip restores it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trustlab.core.errors import DataError, InputError, MissingDependencyError
from trustlab.core.io import atomic_write, write_json_atomic
from trustlab.methods.sae_idempotency.sae import SparseAutoencoder, as_activations

__all__ = [
    "load_activations",
    "load_saelens",
    "save_activations",
    "save_saelens",
]

WEIGHTS_FILE = "sae_weights.safetensors"
CONFIG_FILE = "cfg.json"


def _safetensors() -> Any:
    try:
        import safetensors.torch as st
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise MissingDependencyError.for_package(
            "safetensors", "llm", "SAE safetensors files"
        ) from exc
    return st


def load_activations(path: str | os.PathLike[str], key: str | None = None) -> torch.Tensor:
    """Read activations from ``.pt``, ``.npy`` or ``.safetensors`` as a float32 [n, d] tensor.

    A file holding several tensors (a dict in ``.pt``, several entries in ``.safetensors``) needs
    ``key``. Leading dimensions are flattened (e.g. [batch, seq, d] becomes [batch·seq, d]).
    NaN or infinite values are a DataError naming the file.
    """
    file = _path(path, "load_activations")
    if not file.is_file():
        raise DataError(f"Activation file '{file}' does not exist.")
    suffix = file.suffix.lower()
    try:
        if suffix == ".npy":
            obj: Any = torch.from_numpy(np.load(file, allow_pickle=False))
        elif suffix == ".pt":
            obj = torch.load(file, map_location="cpu", weights_only=True)
        elif suffix == ".safetensors":
            obj = _safetensors().load_file(str(file))
        else:
            raise DataError(
                f"Activation file '{file}' must end in .pt, .npy or .safetensors. Got '{suffix}'."
            )
    except DataError:
        raise
    except Exception as exc:
        raise DataError(f"Could not read activations from '{file}': {exc}.") from None
    if isinstance(obj, dict):
        if key is None and len(obj) == 1:
            key = next(iter(obj))
        if key is None or key not in obj:
            raise DataError(
                f"'{file}' holds several tensors; pass key= one of {sorted(obj)}. Got {key!r}."
            )
        obj = obj[key]
    if not isinstance(obj, torch.Tensor) or obj.dim() < 2 or not obj.is_floating_point():
        what = tuple(obj.shape) if isinstance(obj, torch.Tensor) else type(obj).__name__
        raise DataError(f"'{file}' must hold a float tensor [..., d] with >= 2 dims. Got {what}.")
    if not bool(torch.isfinite(obj).all()):
        raise DataError(f"'{file}' holds NaN or infinite activations; an SAE cannot train on them.")
    return obj.reshape(-1, obj.shape[-1]).to(torch.float32).contiguous()


def _path(path: Any, where: str) -> Path:
    if not isinstance(path, str | os.PathLike) or not str(path):
        raise InputError(f"The path given to {where} must be a str or PathLike. Got {path!r}.")
    return Path(path)


def save_activations(
    path: str | os.PathLike[str], x: torch.Tensor, key: str = "activations"
) -> Path:
    """Write activations as ``.pt``, ``.npy`` or ``.safetensors`` (chosen by the suffix), atomically."""
    file = _path(path, "save_activations")
    suffix = file.suffix.lower()
    if suffix not in (".npy", ".pt", ".safetensors"):
        raise InputError(f"Activation files end in .pt, .npy or .safetensors. Got '{suffix}'.")
    if not isinstance(key, str) or not key:
        raise InputError(f"The 'key' parameter of save_activations must be a name. Got {key!r}.")
    x = as_activations(x, "x", "save_activations", ndim=None).detach().cpu().contiguous()
    if x.dim() < 2:
        raise InputError("The 'x' parameter of save_activations must be [..., d] with >= 2 dims. "
                         f"Got shape {tuple(x.shape)}.")
    file.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".npy":
        with atomic_write(file, "wb") as fh:
            np.save(fh, x.numpy())
    elif suffix == ".pt":
        with atomic_write(file, "wb") as fh:
            torch.save(x, fh)
    elif suffix == ".safetensors":
        data = _safetensors().save({key: x})
        with atomic_write(file, "wb") as fh:
            fh.write(data)
    else:
        raise DataError(f"Activation files end in .pt, .npy or .safetensors. Got '{suffix}'.")
    return file


def save_saelens(
    sae: SparseAutoencoder,
    folder: str | os.PathLike[str],
    *,
    hook_name: str = "",
    model_name: str = "",
) -> Path:
    """Save ``sae`` in the SAELens layout (``cfg.json`` + ``sae_weights.safetensors``)."""
    if not isinstance(sae, SparseAutoencoder):
        raise InputError("The 'sae' parameter of save_saelens must be a SparseAutoencoder. "
                         f"Got {type(sae).__name__}.")
    out = _path(folder, "save_saelens")
    out.mkdir(parents=True, exist_ok=True)
    tensors = {
        "W_enc": sae.W_enc.detach(),
        "W_dec": sae.W_dec.detach(),
        "b_enc": sae.b_enc.detach(),
        "b_dec": sae.b_dec.detach(),
    }
    arch = {"relu": "standard", "topk": "topk", "batchtopk": "jumprelu", "jumprelu": "jumprelu"}[
        sae.architecture
    ]
    if sae.architecture in ("jumprelu", "batchtopk"):
        tensors["threshold"] = sae.threshold.detach()
    cfg: dict[str, Any] = {
        "architecture": arch,
        "d_in": sae.d_in,
        "d_sae": sae.d_sae,
        "dtype": str(sae.W_enc.dtype).removeprefix("torch."),
        "device": "cpu",
        "apply_b_dec_to_input": sae.apply_b_dec_to_input,
        "normalize_activations": "none",
        "hook_name": hook_name,
        "model_name": model_name,
        "metadata": {
            "trustlab": {"architecture": sae.architecture, "k": sae.k, "bandwidth": sae.bandwidth}
        },
    }
    if sae.architecture == "topk":
        cfg["k"] = sae.k
        cfg["activation_fn_str"] = "topk"
        cfg["activation_fn_kwargs"] = {"k": sae.k}
    payload = _safetensors().save({k: v.contiguous().cpu() for k, v in tensors.items()})
    with atomic_write(out / WEIGHTS_FILE, "wb") as fh:
        fh.write(payload)
    write_json_atomic(out / CONFIG_FILE, cfg)
    return out


def load_saelens(folder: str | os.PathLike[str]) -> SparseAutoencoder:
    """Load an SAE saved in the SAELens layout (ours, or one trained elsewhere) for auditing.

    The SAE is returned in eval mode in float32. Inputs must be scaled the way the SAE was
    trained (``normalize_activations`` in its cfg); the scaling is not applied here.
    """
    root = _path(folder, "load_saelens")
    cfg_path = root / CONFIG_FILE
    if not cfg_path.is_file():
        raise DataError(f"'{root}' is not an SAELens folder: {CONFIG_FILE} is missing.")
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"'{cfg_path}' is not valid JSON ({exc}).") from None
    if not isinstance(cfg, dict):
        raise DataError(f"'{cfg_path}' must hold a JSON object. Got {type(cfg).__name__}.")
    weights = root / WEIGHTS_FILE
    if not weights.is_file():
        found = sorted(root.glob("*.safetensors"))
        if len(found) != 1:
            raise DataError(f"'{root}' must hold {WEIGHTS_FILE} (or exactly one .safetensors).")
        weights = found[0]
    try:
        tensors = _safetensors().load_file(str(weights))
    except Exception as exc:
        raise DataError(f"Could not read '{weights}': {exc}.") from None
    missing = [k for k in ("W_enc", "W_dec", "b_enc", "b_dec") if k not in tensors]
    if missing:
        raise DataError(f"'{weights}' lacks the SAELens tensors {missing}.")
    w_enc, w_dec = tensors["W_enc"], tensors["W_dec"]
    if w_enc.dim() != 2 or not all(bool(torch.isfinite(t).all()) for t in tensors.values()):
        raise DataError(f"'{weights}' must hold a 2-D W_enc and finite tensors.")
    d_in, d_sae = int(w_enc.shape[0]), int(w_enc.shape[1])
    if tuple(w_dec.shape) != (d_sae, d_in):
        raise DataError(
            f"W_dec must be [d_sae, d_in] = [{d_sae}, {d_in}] to match W_enc. Got {tuple(w_dec.shape)}."
        )
    ours = (cfg.get("metadata") or {}).get("trustlab") or {}
    arch_name = str(cfg.get("architecture", "standard"))
    if cfg.get("activation_fn_str") == "topk" and arch_name == "standard":
        arch_name = "topk"
    k = cfg.get("k") or (cfg.get("activation_fn_kwargs") or {}).get("k")
    arch = ours.get("architecture") or {
        "standard": "relu",
        "relu": "relu",
        "topk": "topk",
        "jumprelu": "jumprelu",
        "batchtopk": "batchtopk",
    }.get(arch_name)
    if arch is None:
        raise DataError(
            f"SAE architecture '{arch_name}' is not supported (standard, topk, jumprelu, batchtopk)."
        )
    if arch in ("topk", "batchtopk"):
        k = ours.get("k", k)
        if k is None:
            raise DataError(f"A {arch} SAE's cfg.json must give 'k'.")
    if arch in ("jumprelu", "batchtopk") and "threshold" not in tensors:
        raise DataError(f"A {arch_name} SAE needs a 'threshold' tensor in '{weights}'.")
    try:
        sae = SparseAutoencoder(
            d_in,
            d_sae,
            arch,  # type: ignore[arg-type]
            k=k,
            bandwidth=ours.get("bandwidth", 0.05),
            apply_b_dec_to_input=bool(cfg.get("apply_b_dec_to_input", True)),
        )
    except InputError as exc:
        raise DataError(f"'{cfg_path}' describes an SAE that cannot be built: {exc}") from None
    shapes = {"b_enc": (d_sae,), "b_dec": (d_in,), "threshold": (d_sae,)}
    wrong = [k for k, shape in shapes.items() if k in tensors and tuple(tensors[k].shape) != shape
             and not (k == "threshold" and tensors[k].numel() == 1 and arch == "batchtopk")]
    if wrong:
        raise DataError(f"'{weights}' has tensors of the wrong shape for d_in={d_in}, "
                        f"d_sae={d_sae}: {wrong}.")
    with torch.no_grad():
        sae.W_enc.copy_(w_enc.to(torch.float32))
        sae.W_dec.copy_(w_dec.to(torch.float32))
        sae.b_enc.copy_(tensors["b_enc"].to(torch.float32))
        sae.b_dec.copy_(tensors["b_dec"].to(torch.float32))
        if arch == "jumprelu":
            sae.jump_threshold.copy_(tensors["threshold"].to(torch.float32))
        elif arch == "batchtopk":
            theta = tensors["threshold"].to(torch.float32)
            sae.batch_threshold.copy_(theta.reshape(-1)[0])
            sae.batch_threshold_count.fill_(1)
    return sae.eval()
