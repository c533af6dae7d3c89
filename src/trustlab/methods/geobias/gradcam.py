"""Grad-CAM (Selvaraju et al., 2017) for any torch CNN layer, written by hand.

Why not the ``grad-cam`` package: it needs torchvision and opencv, and installing it pulls a
torch build other than the pinned CPU wheel (measured with ``pip install --dry-run``); the
method is a dozen lines on forward/backward hooks.

For the target score ``y`` (by default the predicted class's logit) and the layer's activations
``A`` (``(k, h, w)``), ``weights_k = mean_{ij} dy/dA_kij`` and
``cam = ReLU(sum_k weights_k A_k)``, bilinearly upsampled to the input size. Maps are returned
unnormalised (non-negative); :func:`~trustlab.methods.geobias.metrics.attribution_share`
reads them as mass distributions. For a ViT, pass a layer whose output is reshaped to
``(n, k, h, w)`` by ``reshape`` (tokens to a grid).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from trustlab.core.errors import InputError

__all__ = ["grad_cam"]


def grad_cam(
    model: Any,
    layer: Any,
    inputs: Any,
    targets: Any = None,
    *,
    reshape: Callable[[Any], Any] | None = None,
) -> NDArray[np.float64]:
    """Grad-CAM maps ``(n, H, W)`` of ``model`` (a torch module returning ``(n, classes)``
    scores) at ``layer`` for ``inputs`` (``(n, c, H, W)`` tensor); ``targets``: one class per
    input, or None for each input's argmax."""
    import torch

    where = "grad_cam"
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"The 'model' parameter of {where} must be a torch module.")
    if not isinstance(layer, torch.nn.Module):
        raise InputError(f"The 'layer' parameter of {where} must be a torch module (a layer).")
    if not any(m is layer for m in model.modules()):
        raise InputError(f"The 'layer' parameter of {where} must be a layer of 'model'.")
    if not isinstance(inputs, torch.Tensor) or inputs.ndim != 4 or inputs.shape[0] == 0:
        raise InputError(f"The 'inputs' parameter of {where} must be an (n, c, H, W) tensor.")
    store: dict[str, Any] = {}

    def hook(_m: Any, _i: Any, out: Any) -> None:
        out = reshape(out) if reshape is not None else out
        out.retain_grad()
        store["a"] = out

    handle = layer.register_forward_hook(hook)
    try:
        with torch.enable_grad():
            x = inputs.detach().clone().requires_grad_(False)
            scores = model(x)
            if isinstance(scores, tuple | list):
                scores = scores[0]
            if scores.ndim != 2 or scores.shape[0] != x.shape[0]:
                raise InputError(f"The 'model' of {where} must return (n, classes) scores.")
            if targets is None:
                t = scores.argmax(1)
            else:
                t = torch.as_tensor(np.asarray(targets))
                if t.shape != (x.shape[0],) or t.dtype.is_floating_point or (t < 0).any() \
                        or (t >= scores.shape[1]).any():
                    raise InputError(f"The 'targets' parameter of {where} must be one class "
                                     f"index in [0, {scores.shape[1]}) per input.")
            y = scores.gather(1, t.view(-1, 1).long()).sum()
            model.zero_grad(set_to_none=True)
            y.backward()
    finally:
        handle.remove()
    a = store.get("a")
    if a is None or a.grad is None or a.ndim != 4:
        raise InputError(f"The 'layer' of {where} must output (n, k, h, w) feature maps that "
                         "the score depends on (pass reshape= for token outputs).")
    w = a.grad.mean(dim=(2, 3), keepdim=True)
    cam = torch.relu((w * a).sum(dim=1, keepdim=True)).detach()
    cam = torch.nn.functional.interpolate(cam, size=tuple(inputs.shape[2:]), mode="bilinear",
                                          align_corners=False)
    return cam[:, 0].double().numpy()
