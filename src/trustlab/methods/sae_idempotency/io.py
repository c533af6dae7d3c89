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

from trustlab.core.errors import DataError, MissingDependencyError
from trustlab.core.io import atomic_write, write_json_atomic
from trustlab.methods.sae_idempotency.sae import SparseAutoencoder

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
    """
    file = Path(path)
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
    return obj.reshape(-1, obj.shape[-1]).to(torch.float32).contiguous()


def save_activations(
    path: str | os.PathLike[str], x: torch.Tensor, key: str = "activations"
) -> Path:
    """Write activations as ``.pt``, ``.npy`` or ``.safetensors`` (chosen by the suffix), atomically."""
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    suffix = file.suffix.lower()
    x = x.detach().cpu().contiguous()
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
    out = Path(folder)
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
    root = Path(folder)
    cfg_path = root / CONFIG_FILE
    if not cfg_path.is_file():
        raise DataError(f"'{root}' is not an SAELens folder: {CONFIG_FILE} is missing.")
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"'{cfg_path}' is not valid JSON ({exc}).") from None
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
    sae = SparseAutoencoder(
        d_in,
        d_sae,
        arch,  # type: ignore[arg-type]
        k=int(k) if k is not None else None,
        bandwidth=float(ours.get("bandwidth", 0.05)),
        apply_b_dec_to_input=bool(cfg.get("apply_b_dec_to_input", True)),
    )
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
