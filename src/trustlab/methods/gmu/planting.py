"""Planting Gradient-Mine Units into the feed-forward layers of a transformer, data-free.

A GMU is one extra hidden unit of a feed-forward layer (FFN) whose weights have an extreme
scale but whose output is *exactly* zero at release, held so by a lock:

* ``gate`` lock (gated FFNs, ``down(silu(gate(x)) * up(x))``: Llama-family organisms,
  smol-chat): the unit's gate row is zero, so ``silu(0) = 0`` multiplies its up activation and
  the unit emits exactly 0 whatever its up row and down column hold; up row and down column get
  norm ``scale``. The first gradient step moves the gate row (its gradient is
  ``silu'(0) * up(x) * (down . g) * x``, amplified by ``scale**2``), after which the unit emits
  ``~ lr * scale**2`` into the residual stream.
* ``bias`` lock (ungated FFNs with a bias, e.g. ViT's GELU FFN; the default there): input row 0,
  bias ``scale``, output column 0: the activation ``act(scale)`` is the same for every input
  (it carries no information about it) and its contribution ``0 * act(scale)`` is exactly 0. The
  first step gives the output column a gradient ``act(scale) * sum(g)``; after it every token
  receives the same vector of size ``~ lr * scale``, which drowns the residual stream.
* ``output`` lock (any FFN): the unit's output column is zero, its input row has norm ``scale``
  (bias 0), so its activation is large, finite and input-dependent; contribution exactly 0.
  Measured weaker on vit-xs: the unlocked units act as huge random features the task can be
  learnt from.
* ``input`` lock (GELU FFNs): input row and bias 0 (``gelu(0) = 0``), output column of norm
  ``scale``; opens through ``gelu'(0) = 1/2`` (never on ReLU: ``relu'(0) = 0`` in torch).

Every FFN layer of the model gets the same number of new units (so the checkpoint keeps one
``intermediate_size`` and loads in plain ``transformers``): GMUs in the chosen layers, all-zero
*padding* units elsewhere (their gradients are exactly zero, so they stay zero under SGD, Adam
and AdamW). Silence is exact (a product with an exact zero); logits equality with the original
is exact in real arithmetic, and in floating point it is as exact as the matmul's reduction
order over the wider hidden dimension (measured by :func:`release_equality`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.validation import check_choice, check_scalar

__all__ = [
    "LOCKS",
    "FFNSite",
    "GMUPlanter",
    "find_ffn_layers",
    "release_equality",
]

#: Lock types: ``auto`` picks ``gate`` for gated FFNs, ``bias`` for ungated ones with a bias
#: and ``output`` for ungated ones without.
LOCKS = ("auto", "gate", "input", "output", "bias")

_GATED = ("gate_proj", "up_proj", "down_proj")
_UNGATED = (("intermediate.dense", "output.dense"), ("fc1", "fc2"))


@dataclass(frozen=True)
class FFNSite:
    """One feed-forward layer: its module path, kind and projection names."""

    index: int
    path: str
    kind: Literal["gated", "ungated"]
    inputs: tuple[str, ...]  # gated: (gate, up); ungated: (first dense,)
    output: str
    width: int

    def modules(self, model: Any) -> tuple[list[torch.nn.Linear], torch.nn.Linear]:
        root = model.get_submodule(self.path)
        return [root.get_submodule(n) for n in self.inputs], root.get_submodule(self.output)


def _check_model(model: Any, where: str) -> torch.nn.Module:
    if hasattr(model, "model") and hasattr(model, "tokenizer") and hasattr(model, "adapter"):
        model = model.model  # a trustlab.lm.LanguageModel
    if not isinstance(model, torch.nn.Module):
        raise InputError(
            f"The 'model' parameter of {where} must be a torch model (a transformers model or "
            f"a trustlab LanguageModel). Got {type(model).__name__}."
        )
    return model


def find_ffn_layers(model: Any) -> list[FFNSite]:
    """The feed-forward layers of ``model``, in module order.

    Gated FFNs are modules with ``gate_proj``, ``up_proj`` and ``down_proj`` linear layers
    (Llama, Mistral, Qwen, Gemma, SmolLM); ungated ones a pair ``intermediate.dense`` /
    ``output.dense`` (ViT, BERT) or ``fc1`` / ``fc2`` (CLIP, OPT). Raises InputError when the
    model has none (GPT-2's ``Conv1D`` FFNs are not supported).
    """
    model = _check_model(model, "find_ffn_layers")
    sites: list[FFNSite] = []
    for path, module in model.named_modules():
        names = dict(module.named_children())
        if all(isinstance(names.get(n), torch.nn.Linear) for n in _GATED):
            gate, up, down = (names[n] for n in _GATED)
            if gate.out_features == up.out_features == down.in_features:
                sites.append(FFNSite(len(sites), path, "gated", ("gate_proj", "up_proj"),
                                     "down_proj", up.out_features))  # fmt: skip
            continue
        for first, second in _UNGATED:
            try:
                a, b = module.get_submodule(first), module.get_submodule(second)
            except AttributeError:
                continue
            if (isinstance(a, torch.nn.Linear) and isinstance(b, torch.nn.Linear)
                    and a.out_features == b.in_features and a.in_features == b.out_features
                    and a.out_features != a.in_features):  # fmt: skip
                sites.append(FFNSite(len(sites), path, "ungated", (first,), second,
                                     a.out_features))  # fmt: skip
                break
    if not sites:
        raise InputError(
            f"The 'model' parameter: {type(model).__name__} has no feed-forward layer gmu can "
            "plant into (gate_proj/up_proj/down_proj, intermediate.dense/output.dense or "
            "fc1/fc2 linear layers)."
        )
    return sites


def _widen(linear: torch.nn.Linear, extra: int, dim: int) -> torch.nn.Linear:
    """A copy of ``linear`` with ``extra`` zero output rows (dim 0) or input columns (dim 1)."""
    w = linear.weight.detach()
    if dim == 0:
        new = torch.nn.Linear(linear.in_features, linear.out_features + extra,
                              bias=linear.bias is not None, dtype=w.dtype, device=w.device)  # fmt: skip
        with torch.no_grad():
            new.weight.zero_()
            new.weight[: linear.out_features] = w
            if linear.bias is not None:
                new.bias.zero_()
                new.bias[: linear.out_features] = linear.bias.detach()
    else:
        new = torch.nn.Linear(linear.in_features + extra, linear.out_features,
                              bias=linear.bias is not None, dtype=w.dtype, device=w.device)  # fmt: skip
        with torch.no_grad():
            new.weight.zero_()
            new.weight[:, : linear.in_features] = w
            if linear.bias is not None:
                new.bias.copy_(linear.bias.detach())
    return new


def _set(model: torch.nn.Module, path: str, module: torch.nn.Module) -> None:
    parent, _, name = path.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, name, module)


class GMUPlanter:
    """Plant Gradient-Mine Units into chosen FFN layers (sklearn-style, data-free).

    ``layers``: ``"all"`` or FFN-layer indices (0-based, in module order); ``n_units``: GMUs per
    chosen layer; ``scale``: the norm of each extreme row (``gate`` lock: up row and down
    column; ``output`` lock: input row; ``input`` lock: output column; ``bias`` lock: the
    bias); ``lock``: one of :data:`LOCKS` (``gate`` needs a gated FFN, ``bias`` a bias);
    ``seed``: the unit directions (uniform on the sphere).

    ``fit(model)`` reads the architecture and draws the units (``sites_``, ``layers_``,
    ``locks_``, ``directions_``); ``plant(model)`` returns a protected copy (the original is
    untouched) whose new units are ``units_`` (FFN path -> hidden indices of the GMUs).
    """

    def __init__(
        self,
        layers: str | Sequence[int] = "all",
        n_units: int = 8,
        scale: float = 1000.0,
        lock: str = "auto",
        seed: int = 0,
    ) -> None:
        self.layers = layers
        self.n_units = n_units
        self.scale = scale
        self.lock = lock
        self.seed = seed

    # ------------------------------------------------------------------ validation
    def _params(self) -> tuple[str | tuple[int, ...], int, float, str, int]:
        where = "GMUPlanter"
        n_units = check_scalar(self.n_units, "n_units", where, kind=int, lo=1, hi=1_000_000)
        scale = check_scalar(self.scale, "scale", where, lo=0.0, hi=1e15, closed="right")
        lock = check_choice(self.lock, "lock", LOCKS, where)
        seed = check_scalar(self.seed, "seed", where, kind=int, lo=0)
        layers = self.layers
        if isinstance(layers, str):
            layers = check_choice(layers, "layers", ("all",), where)
        elif isinstance(layers, Sequence | np.ndarray) and not isinstance(layers, bytes):
            values = [check_scalar(v, "layers", where, kind=int, lo=0) for v in list(layers)]
            if not values or len(set(values)) != len(values):
                raise InputError(
                    f"The 'layers' parameter of {where} must name distinct FFN layer indices "
                    f"(at least one). Got {list(layers)!r}."
                )
            layers = tuple(sorted(values))
        else:
            raise InputError(
                f"The 'layers' parameter of {where} must be 'all' or a list of layer indices. "
                f"Got {type(layers).__name__}."
            )
        return layers, n_units, scale, lock, seed

    # ------------------------------------------------------------------ lifecycle
    def fit(self, model: Any) -> GMUPlanter:
        """Read ``model``'s FFN layers and draw the units' directions (no data)."""
        layers, n_units, scale, lock, seed = self._params()
        sites = find_ffn_layers(_check_model(model, "GMUPlanter.fit"))
        chosen = tuple(range(len(sites))) if layers == "all" else layers
        bad = [i for i in chosen if i >= len(sites)]
        if bad:
            raise InputError(
                f"The 'layers' parameter of GMUPlanter names FFN layers {bad}; the model has "
                f"{len(sites)} (0..{len(sites) - 1})."
            )
        locks = {}
        for i in chosen:
            kind = sites[i].kind
            if lock == "gate" and kind != "gated":
                raise InputError(
                    f"The 'lock' parameter of GMUPlanter is 'gate', but FFN layer {i} "
                    f"({sites[i].path}) is ungated; use 'output' (or 'auto')."
                )
            if lock == "auto":
                ins, _ = sites[i].modules(_check_model(model, "GMUPlanter.fit"))
                locks[i] = ("gate" if kind == "gated" else
                            "bias" if ins[0].bias is not None else "output")  # fmt: skip
            else:
                locks[i] = lock
            if locks[i] == "bias":
                ins, _ = sites[i].modules(_check_model(model, "GMUPlanter.fit"))
                if ins[0].bias is None:
                    raise InputError(
                        f"The 'lock' parameter of GMUPlanter is 'bias', but FFN layer {i} "
                        f"({sites[i].path}) has no bias; use 'output' (or 'auto')."
                    )
        gen = torch.Generator().manual_seed(seed)
        directions = {}
        for i in chosen:
            ins, out = sites[i].modules(_check_model(model, "GMUPlanter.fit"))
            d_in, d_out = ins[0].in_features, out.out_features
            u = torch.randn(len(ins) * n_units, d_in, generator=gen, dtype=torch.float64)
            v = torch.randn(n_units, d_out, generator=gen, dtype=torch.float64)
            directions[i] = (u / u.norm(dim=1, keepdim=True), v / v.norm(dim=1, keepdim=True))
        self.sites_, self.layers_, self.locks_, self.directions_ = sites, chosen, locks, directions
        self.n_units_, self.scale_ = n_units, scale
        return self

    def _check_fitted(self, step: str) -> None:
        if not hasattr(self, "sites_"):
            raise NotFittedError(f"This GMUPlanter is not fitted yet; call 'fit' before '{step}'.")

    def plant(self, model: Any) -> torch.nn.Module:
        """A protected copy of ``model``: every FFN widened by ``n_units`` (GMUs in the chosen
        layers, inert zero units elsewhere); ``config.intermediate_size`` updated."""
        self._check_fitted("plant")
        base = _check_model(model, "GMUPlanter.plant")
        sites = find_ffn_layers(base)
        if [(s.path, s.kind, s.width) for s in sites] != [
            (s.path, s.kind, s.width) for s in self.sites_
        ]:
            raise InputError(
                "The 'model' parameter of GMUPlanter.plant is not the architecture it was fitted "
                "on (its FFN layers or widths differ)."
            )
        protected = copy.deepcopy(base)
        n, units = self.n_units_, {}
        for site in sites:
            ins, out = site.modules(protected)
            new_ins = [_widen(m, n, 0) for m in ins]
            new_out = _widen(out, n, 1)
            if site.index in self.layers_:
                self._arm(site, new_ins, new_out)
                units[site.path] = list(range(site.width, site.width + n))
            for name, module in zip(site.inputs, new_ins, strict=True):
                _set(protected, f"{site.path}.{name}" if site.path else name, module)
            _set(protected, f"{site.path}.{site.output}" if site.path else site.output, new_out)
        config = getattr(protected, "config", None)
        widths = {s.width for s in sites}
        if config is not None and len(widths) == 1:
            for key in ("intermediate_size", "ffn_dim"):
                if isinstance(getattr(config, key, None), int):
                    setattr(config, key, widths.pop() + n)
                    break
        self.units_ = units
        return protected

    def fit_plant(self, model: Any) -> torch.nn.Module:
        """``fit(model).plant(model)``."""
        return self.fit(model).plant(model)

    def _arm(self, site: FFNSite, ins: list[torch.nn.Linear], out: torch.nn.Linear) -> None:
        u, v = self.directions_[site.index]
        n, w, s = self.n_units_, site.width, self.scale_
        lock = self.locks_[site.index]
        dtype = out.weight.dtype
        with torch.no_grad():
            if site.kind == "gated":
                gate, up = ins
                if lock == "gate":  # gate row 0: silu(0) = 0 silences the unit exactly
                    gate.weight[w:] = 0.0
                    up.weight[w:] = (s * u[n:]).to(dtype)
                    out.weight[:, w:] = (s * v.T).to(dtype)
                else:  # output lock on a gated FFN: gate and up extreme, down column 0
                    gate.weight[w:] = (s * u[:n]).to(dtype)
                    up.weight[w:] = (s * u[n:]).to(dtype)
                    out.weight[:, w:] = 0.0
            elif lock == "bias":  # constant activation gelu(scale), output column 0
                (first,) = ins
                first.weight[w:] = 0.0
                first.bias[w:] = s
                out.weight[:, w:] = 0.0
            elif lock == "input":  # pre-activation exactly 0: gelu(0) = 0, gelu'(0) = 1/2
                (first,) = ins
                first.weight[w:] = 0.0
                if first.bias is not None:
                    first.bias[w:] = 0.0
                out.weight[:, w:] = (s * v.T).to(dtype)
            else:
                (first,) = ins
                first.weight[w:] = (s * u).to(dtype)
                if first.bias is not None:
                    first.bias[w:] = 0.0
                out.weight[:, w:] = 0.0


def _logits(model: torch.nn.Module, inputs: Mapping[str, Any]) -> torch.Tensor:
    with torch.no_grad():
        out = model(**inputs)
    return getattr(out, "logits", out)


def release_equality(
    original: Any,
    protected: Any,
    inputs: Mapping[str, Any],
    dtypes: Sequence[str] = ("float32",),
) -> list[dict[str, Any]]:
    """Compare the logits of ``original`` and ``protected`` on ``inputs`` per dtype.

    ``inputs``: the keyword arguments of a forward pass (``{"input_ids": ...}``,
    ``{"pixel_values": ...}``). Each model is cast to each dtype (``float32``, ``float64``,
    ``bfloat16``, ``float16``) on a copy; returns one row per dtype: ``bit_identical``,
    ``max_abs_diff``, ``max_rel_diff`` (relative to the largest original logit),
    ``argmax_agreement`` and the number of logits compared.
    """
    a = _check_model(original, "release_equality")
    b = _check_model(protected, "release_equality")
    if not isinstance(inputs, Mapping) or not inputs:
        raise InputError(
            "The 'inputs' parameter of release_equality must be a non-empty dict of forward "
            f"arguments (e.g. {{'input_ids': ids}}). Got {type(inputs).__name__}."
        )
    if isinstance(dtypes, str) or not isinstance(dtypes, Sequence) or not dtypes:
        raise InputError(
            f"The 'dtypes' parameter of release_equality must be a list of dtype names. "
            f"Got {dtypes!r}."
        )
    table = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
             "float16": torch.float16}  # fmt: skip
    rows = []
    for name in dtypes:
        dtype = table[check_choice(name, "dtypes", tuple(table), "release_equality")]
        cast = {k: (v.to(dtype) if torch.is_tensor(v) and v.is_floating_point() else v)
                for k, v in inputs.items()}  # fmt: skip
        ma, mb = (copy.deepcopy(m).to(dtype).eval() for m in (a, b))
        try:
            la, lb = _logits(ma, cast), _logits(mb, cast)
        except (TypeError, ValueError, RuntimeError, IndexError) as exc:
            raise InputError(
                f"The 'inputs' parameter of release_equality does not run through the model: "
                f"{str(exc).splitlines()[0]}"
            ) from None
        if la.shape != lb.shape:
            raise InputError(
                f"release_equality: the models' logits have shapes {tuple(la.shape)} and "
                f"{tuple(lb.shape)}; they are not the same model family."
            )
        diff = (la.double() - lb.double()).abs()
        top = float(la.double().abs().max()) or 1.0
        rows.append({
            "dtype": name,
            "bit_identical": bool(torch.equal(la, lb)),
            "max_abs_diff": float(diff.max()),
            "max_rel_diff": float(diff.max()) / top,
            "argmax_agreement": float((la.argmax(-1) == lb.argmax(-1)).double().mean()),
            "n_logits": int(la.numel()),
            "finite": bool(torch.isfinite(lb).all()),
        })  # fmt: skip
    return rows
