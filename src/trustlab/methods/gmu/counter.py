"""Counter-attacks on GMUs that touch the weights before fine-tuning: find units whose weight
norms are outliers, then prune them (zero every weight of the unit: an inert unit) or
re-initialise them (input rows drawn at the model's initialiser scale, output column zero: the
function is kept and the unit trains like any other).

The detector scores each hidden unit of each FFN layer by the log of its largest weight norm
(input row(s), |bias|, output column) and flags units whose robust z-score ``(score - median) /
(1.4826 * MAD)`` exceeds ``threshold`` within their layer. The other counter-attacks
(clipping, weight decay, lower learning rate, LoRA on attention only) are fine-tuning settings
(:class:`~trustlab.finetune.FinetuneConfig`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar
from trustlab.methods.gmu.planting import _check_model, find_ffn_layers

__all__ = ["prune_units", "reinit_units", "suspect_units", "unit_norms"]


def unit_norms(model: Any) -> dict[str, torch.Tensor]:
    """Per FFN layer (module path), each hidden unit's largest weight norm ``[width]``
    (gate row, up row / first-dense row, the first projection's |bias|, down / second-dense
    column)."""
    net = _check_model(model, "unit_norms")
    out = {}
    for site in find_ffn_layers(net):
        ins, second = site.modules(net)
        norms = [m.weight.detach().double().norm(dim=1) for m in ins]
        norms += [m.bias.detach().double().abs() for m in ins if m.bias is not None]
        norms.append(second.weight.detach().double().norm(dim=0))
        out[site.path] = torch.stack(norms).max(dim=0).values
    return out


def suspect_units(model: Any, threshold: float = 6.0) -> dict[str, list[int]]:
    """Units whose largest weight norm is an outlier in their layer (robust z > ``threshold``
    on log norms); FFN path -> sorted hidden indices (layers without suspects are left out)."""
    threshold = check_scalar(threshold, "threshold", "suspect_units", lo=0.0, closed="neither")
    out = {}
    for path, norms in unit_norms(model).items():
        logs = torch.log(norms.clamp_min(1e-30))
        med = logs.median()
        mad = (logs - med).abs().median() * 1.4826
        z = (logs - med) / max(float(mad), 1e-12)
        flagged = torch.nonzero(z > threshold).flatten().tolist()
        if flagged:
            out[path] = sorted(int(i) for i in flagged)
    return out


def _check_units(net: torch.nn.Module, units: Any, where: str) -> dict[str, list[int]]:
    if not isinstance(units, Mapping):
        raise InputError(
            f"The 'units' parameter of {where} must be a dict FFN path -> unit indices (what "
            f"suspect_units returns). Got {type(units).__name__}."
        )
    sites = {s.path: s for s in find_ffn_layers(net)}
    clean = {}
    for path, idx in units.items():
        if path not in sites:
            raise InputError(
                f"The 'units' parameter of {where} names {path!r}, which is no FFN layer of the "
                f"model ({sorted(sites)[:3]}...)."
            )
        if isinstance(idx, str | bytes) or not isinstance(idx, Sequence | torch.Tensor):
            raise InputError(f"The 'units' parameter of {where}: {path!r} must map to a list of "
                             f"unit indices. Got {type(idx).__name__}.")  # fmt: skip
        width = sites[path].modules(net)[1].in_features
        values = [check_scalar(i, "units", where, kind=int, lo=0, hi=width - 1) for i in list(idx)]
        clean[path] = sorted(set(values))
    return clean


def prune_units(model: Any, units: Mapping[str, Sequence[int]]) -> torch.nn.Module:
    """A copy of ``model`` with every weight and bias of ``units`` set to zero (inert units:
    output 0 and zero gradients forever)."""
    net = _check_model(model, "prune_units")
    clean = _check_units(net, units, "prune_units")
    out = copy.deepcopy(net)
    sites = {s.path: s for s in find_ffn_layers(out)}
    with torch.no_grad():
        for path, idx in clean.items():
            ins, second = sites[path].modules(out)
            for m in ins:
                m.weight[idx] = 0.0
                if m.bias is not None:
                    m.bias[idx] = 0.0
            second.weight[:, idx] = 0.0
    return out


def reinit_units(
    model: Any, units: Mapping[str, Sequence[int]], std: float | None = None, seed: int = 0
) -> torch.nn.Module:
    """A copy of ``model`` whose ``units`` get fresh input rows ``N(0, std)`` (``std``: the
    model's ``config.initializer_range``, else 0.02), zero bias and a zero output column: the
    function is unchanged and the units train like new ones."""
    net = _check_model(model, "reinit_units")
    clean = _check_units(net, units, "reinit_units")
    if std is None:
        std = float(getattr(getattr(net, "config", None), "initializer_range", 0.02) or 0.02)
    std = check_scalar(std, "std", "reinit_units", lo=0.0, closed="right")
    seed = check_scalar(seed, "seed", "reinit_units", kind=int, lo=0)
    gen = torch.Generator().manual_seed(seed)
    out = copy.deepcopy(net)
    sites = {s.path: s for s in find_ffn_layers(out)}
    with torch.no_grad():
        for path, idx in clean.items():
            ins, second = sites[path].modules(out)
            for m in ins:
                fresh = torch.randn(len(idx), m.in_features, generator=gen, dtype=torch.float64)
                m.weight[idx] = (std * fresh).to(m.weight.dtype)
                if m.bias is not None:
                    m.bias[idx] = 0.0
            second.weight[:, idx] = 0.0
    return out
