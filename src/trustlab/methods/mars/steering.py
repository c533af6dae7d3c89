"""MARS: textual refusal directions steering a multimodal model, re-centred, gated, adaptive.

Geometry (docs/methods/mars.md, "The geometry"). Every quantity is read on the language
backbone's residual stream at ``blocks.{l}.resid_pre``, at the **last prompt position** (the
position whose output is the first generated token), for every layer ``l``:

* ``mu_u[l]``, ``mu_s[l]``: the centroids of typed harmful and typed harmless requests (text
  only: no image, no multimodal safety data, enters the fit);
* ``D[l] = ||mu_u[l] - mu_s[l]||`` and the unit textual refusal direction
  ``r[l] = (mu_u[l] - mu_s[l]) / D[l]`` (Arditi et al.'s difference in means);
* the modality offset ``o[l] = nu[l] - mu_s[l]``, ``nu[l]`` the centroid of *neutral* image
  prompts (content-free random-colour fields with a benign instruction). Re-centring subtracts
  ``o[l]`` from the activation of every prompt that carries an image, which maps the centroid of
  content-free image inputs onto the safe text centroid;
* an input's position ``t(x) = ((h(x) - o - mu_s) . r) / D``: 0 at the safe centroid, 1 at the
  unsafe one (``o = 0`` for typed prompts or without re-centring);
* the edit ``delta(x) = alpha(x) r`` added once at the last prompt position in the prefill, with
  ``alpha(x) = rho D w(t) [t > tau]``: the gate ``t > tau`` (``tau = 1/2``: nearer the unsafe
  centroid than the safe one along ``r``) leaves safe-side inputs untouched, the weight
  ``w(t) = clip(t, 0, 1)`` scales the strength by the input's position between the centroids,
  and the trust region ``||delta|| <= rho D`` bounds every edit (``rho``, the trust radius in
  units of the centroid distance, is chosen with the layer on a text validation split).

Layer and radius (:meth:`MARS.select`): for every candidate layer and every radius of a grid,
add ``rho D r`` at the last position of held-out *harmless typed* prompts and read the model's
first-token refusal probability; a layer's radius is the smallest one that makes at least
``target_refusal`` of them open with a refusal token, and the layer chosen is the one that needs
the smallest radius (ties: the larger mean refusal probability), among layers whose direction
separates held-out harmful from harmless typed prompts (ROC-AUC >= ``min_auc``).

Ablations are the same fitted object with one switch changed (:func:`ablations`): no
re-centring, a fixed strength, no gate, the worst layer of the criterion, and plain textual
steering (no re-centring, no gate, fixed strength: the "preliminary finding" baseline).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.validation import as_float_array, check_choice, check_scalar
from trustlab.lm.activations import batches, get_activations
from trustlab.lm.content import has_images
from trustlab.lm.judges import refusal_token_ids
from trustlab.lm.model import LanguageModel, Prompt
from trustlab.lm.steering import RowSteering, row_additions

__all__ = [
    "ABLATIONS",
    "MARS",
    "MarsSteering",
    "ablations",
    "neutral_prompts",
    "prompt_has_images",
    "refusal_probability",
]

#: The ablation names of :func:`ablations`, in report order.
ABLATIONS = ("no-recentering", "fixed-strength", "ungated", "wrong-layer", "textual")

DEFAULT_RADII = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)


def _check_lm(lm: Any, where: str) -> LanguageModel:
    if not isinstance(lm, LanguageModel):
        raise InputError(
            f"The 'lm' parameter of {where} must be a trustlab.lm.LanguageModel (lm.load(spec)). "
            f"Got {type(lm).__name__}."
        )
    return lm


def _check_prompts(prompts: Any, name: str, where: str, *, images: str = "any") -> list[Prompt]:
    """A non-empty list of prompts (strings or conversations); ``images``: 'none' (typed only),
    'all' (every prompt carries an image) or 'any'."""
    if isinstance(prompts, str | bytes) or not isinstance(prompts, Sequence) or not prompts:
        raise InputError(
            f"The '{name}' parameter of {where} must be a non-empty list of prompts (strings or "
            f"conversations). Got {type(prompts).__name__}"
            + (" (empty)." if isinstance(prompts, Sequence) and not prompts else ".")
        )
    out = list(prompts)
    for i, p in enumerate(out):
        ok = (isinstance(p, str) and bool(p.strip())) or (
            isinstance(p, Sequence)
            and not isinstance(p, bytes)
            and len(p) > 0
            and all(isinstance(m, dict) and "role" in m and "content" in m for m in p)
        )
        if not ok:
            raise InputError(
                f"The '{name}' parameter of {where} must hold strings or conversations "
                f"([{{'role': ..., 'content': ...}}, ...]). Item {i} is {type(p).__name__}."
            )
    flags = [prompt_has_images(p) for p in out]
    if images == "none" and any(flags):
        raise InputError(
            f"The '{name}' parameter of {where} must be typed (text-only) prompts: MARS fits on "
            f"the language backbone from text only. Item {flags.index(True)} carries an image."
        )
    if images == "all" and not all(flags):
        raise InputError(
            f"The '{name}' parameter of {where} must be image prompts (a neutral image and an "
            f"instruction). Item {flags.index(False)} carries no image."
        )
    return out


def prompt_has_images(prompt: Prompt) -> bool:
    """Whether one prompt (a string or a conversation) carries an image part."""
    if isinstance(prompt, str):
        return False
    if (
        isinstance(prompt, bytes)
        or not isinstance(prompt, Sequence)
        or not all(isinstance(m, dict) and "content" in m for m in prompt)
    ):
        raise InputError(
            "The 'prompt' parameter of prompt_has_images must be a string or a conversation "
            f"([{{'role': ..., 'content': ...}}, ...]). Got {type(prompt).__name__}."
        )
    return has_images([prompt])


def _without_images(prompts: list[Prompt]) -> list[Prompt]:
    """The neutral prompts with their image parts removed (their instructions, typed)."""
    out = []
    for i, prompt in enumerate(prompts):
        conv = []
        for m in prompt:
            content = m["content"]
            if not isinstance(content, str):
                content = " ".join(part["text"] for part in content if part.get("type") == "text")
            conv.append({**m, "content": content})
        if not any(m["content"].strip() for m in conv):
            raise InputError(
                f"The 'neutral' parameter of MARS.fit: prompt {i} holds no text, and "
                "anchor='paired' compares each neutral prompt with its text typed."
            )
        out.append(conv)
    return out


def neutral_prompts(
    instructions: Sequence[str], n: int, *, seed: int = 0, size: Any = 64
) -> list[Prompt]:
    """``n`` content-free image prompts for re-centring: random single-colour fields
    (:func:`trustlab.vision.neutral_images`) each with one of ``instructions`` in turn, the
    image first (as the vision-language organisms and LLaVA templates place it)."""
    from trustlab.vision import neutral_images

    where = "neutral_prompts"
    n = check_scalar(n, "n", where, kind=int, lo=1)
    seed = check_scalar(seed, "seed", where, kind=int, lo=0)
    if isinstance(instructions, str) or not isinstance(instructions, Sequence) or not instructions:
        raise InputError(
            f"The 'instructions' parameter of {where} must be a non-empty list of strings. Got "
            f"{type(instructions).__name__}."
        )
    if not all(isinstance(s, str) and s.strip() for s in instructions):
        raise InputError(f"The 'instructions' parameter of {where} must hold non-empty strings.")
    images = neutral_images(n, seed=seed, size=size)
    return [
        [{"role": "user", "content": [{"type": "image", "image": img},
                                      {"type": "text", "text": instructions[i % len(instructions)]}]}]
        for i, img in enumerate(images)
    ]  # fmt: skip


def refusal_probability(
    lm: LanguageModel,
    prompts: Sequence[Prompt],
    *,
    site: str | None = None,
    deltas: Any = None,
    batch_size: int = 32,
) -> torch.Tensor:
    """P(the first reply token is a refusal token) [N] (float64), optionally with ``deltas[n]``
    [N, D] added at ``site`` at prompt ``n``'s last position (rows follow their prompts through
    the length-sorted batches). The refusal tokens are :func:`trustlab.lm.judges.refusal_token_ids`
    (the first tokens of "I", "Sorry", "As")."""
    where = "refusal_probability"
    lm = _check_lm(lm, where)
    prompts = _check_prompts(prompts, "prompts", where)
    batch_size = check_scalar(batch_size, "batch_size", where, kind=int, lo=1)
    if (site is None) != (deltas is None):
        raise InputError(f"{where} needs both 'site' and 'deltas', or neither.")
    d = None
    if deltas is not None:
        lm.adapter.module(site)  # a one-line error for an unknown site
        d = torch.as_tensor(as_float_array(deltas, "deltas", where, ndim=2), dtype=torch.float32)
        if d.shape != (len(prompts), lm.d_model):
            raise InputError(
                f"The 'deltas' parameter of {where} must be a finite [{len(prompts)}, "
                f"{lm.d_model}] tensor. Got {tuple(d.shape)}."
            )
    ids = refusal_token_ids(lm)
    out = torch.empty(len(prompts), dtype=torch.float64)
    with torch.no_grad():
        for chunk, batch in batches(lm, prompts, batch_size, description="refusal probability"):
            if d is None:
                logits = lm.forward(batch, last_only=True)[:, -1]
            else:
                with row_additions(lm, site, d[chunk].to(lm.device), positions="last"):
                    logits = lm.forward(batch, last_only=True)[:, -1]
            logp = torch.log_softmax(logits.double(), -1)
            out[chunk] = torch.logsumexp(logp[:, ids], -1).exp().cpu()
    return out


def _auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """ROC-AUC of scores ``pos`` above ``neg`` (ties count one half)."""
    from sklearn.metrics import roc_auc_score

    y = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    return float(roc_auc_score(y, np.r_[pos, neg]))


@dataclass
class MARS:
    """Modality-Agnostic Refusal Steering (module docstring: the geometry).

    Parameters (stored as given; ``fit`` checks them): ``trust_radius`` (``rho``; ``None``:
    chosen with the layer by :meth:`select`), ``gate_threshold`` (``tau``), ``recenter``,
    ``gate`` (``"fixed"``: the gate opens above ``gate_threshold``; ``"calibrated"``: above the
    ``gate_quantile`` quantile of the positions of known-safe inputs -- the typed harmless
    validation prompts of :meth:`select` and the neutral image prompts of :meth:`fit`, placed as
    the inputs are: at the layer in use, re-centred when ``recenter``), ``gate_quantile``,
    ``anchor`` (where re-centring maps the neutral image prompts: ``"safe"``, onto the typed
    safe centroid; ``"paired"``, onto the same prompts typed without their images),
    ``strength`` (``"adaptive"``: ``rho D clip(t, 0, 1)``; ``"fixed"``: ``rho D``), ``gated``,
    ``layer`` (``None``: chosen by :meth:`select`), ``radii`` (the grid ``select`` searches),
    ``target_refusal``, ``min_auc``, ``max_layer_fraction`` (layers at or beyond this share of
    depth are not candidates), ``batch_size``.

    Lifecycle: ``fit(lm, harmful, harmless, neutral)`` then ``select(lm, val_harmful,
    val_harmless)`` (or give ``layer`` and ``trust_radius``), then ``positions``, ``strengths``,
    ``deltas`` or ``steering()`` (an intervention for :func:`trustlab.lm.evaluate`).
    """

    trust_radius: float | None = None
    gate_threshold: float = 0.5
    gate: str = "fixed"
    gate_quantile: float = 0.95
    recenter: bool = True
    anchor: str = "safe"
    strength: str = "adaptive"
    gated: bool = True
    layer: int | None = None
    radii: tuple[float, ...] = DEFAULT_RADII
    target_refusal: float = 0.9
    min_auc: float = 0.9
    max_layer_fraction: float = 0.8
    batch_size: int = 32
    name: str = field(default="mars")

    # ---- checks -----------------------------------------------------------------------------

    def _check_params(self, where: str) -> None:
        if self.trust_radius is not None:
            check_scalar(self.trust_radius, "trust_radius", where, lo=0.0, closed="neither")
        check_scalar(self.gate_threshold, "gate_threshold", where)
        if not isinstance(self.recenter, bool):
            raise InputError(
                f"The 'recenter' parameter of {where} must be a bool. Got {self.recenter!r}."
            )
        if not isinstance(self.gated, bool):
            raise InputError(
                f"The 'gated' parameter of {where} must be a bool. Got {self.gated!r}."
            )
        check_choice(self.strength, "strength", ("adaptive", "fixed"), where)
        check_choice(self.anchor, "anchor", ("safe", "paired"), where)
        check_choice(self.gate, "gate", ("fixed", "calibrated"), where)
        check_scalar(self.gate_quantile, "gate_quantile", where, lo=0.0, hi=1.0)
        if self.layer is not None:
            check_scalar(self.layer, "layer", where, kind=int, lo=0)
        if isinstance(self.radii, str) or not isinstance(self.radii, Sequence) or not self.radii:
            raise InputError(
                f"The 'radii' parameter of {where} must be a non-empty list of numbers."
            )
        for r in self.radii:
            check_scalar(r, "radii", where, lo=0.0, closed="neither")
        check_scalar(self.target_refusal, "target_refusal", where, lo=0.0, hi=1.0, closed="right")
        check_scalar(self.min_auc, "min_auc", where, lo=0.0, hi=1.0)
        check_scalar(self.max_layer_fraction, "max_layer_fraction", where, lo=0.0, hi=1.0,
                     closed="right")  # fmt: skip
        check_scalar(self.batch_size, "batch_size", where, kind=int, lo=1)

    def _check_fitted(self, step: str) -> None:
        if not hasattr(self, "mu_unsafe_"):
            raise NotFittedError(f"Call MARS.fit(lm, harmful, harmless, neutral) before {step}.")

    def _check_selected(self, step: str) -> None:
        self._check_fitted(step)
        if self.layer_ is None or self.trust_radius_ is None:
            raise NotFittedError(
                f"Call MARS.select(lm, val_harmful, val_harmless) (or give 'layer' and "
                f"'trust_radius') before {step}."
            )

    def _check_model(self, lm: LanguageModel, where: str) -> None:
        if lm.n_layers != self.mu_unsafe_.shape[0] or lm.d_model != self.mu_unsafe_.shape[1]:
            raise InputError(
                f"The 'lm' parameter of {where} has {lm.n_layers} layers of width {lm.d_model}; "
                f"MARS was fitted on {self.mu_unsafe_.shape[0]} of width {self.mu_unsafe_.shape[1]}."
            )

    # ---- activations ------------------------------------------------------------------------

    def _acts(self, lm: LanguageModel, prompts: list[Prompt], layers: Sequence[int] | None = None
              ) -> torch.Tensor:  # fmt: skip
        """[N, len(layers), D] float64 at the last prompt position."""
        layers = list(range(lm.n_layers)) if layers is None else list(layers)
        sites = [f"blocks.{i}.resid_pre" for i in layers]
        a = get_activations(lm, prompts, sites, "last", batch_size=self.batch_size)
        return a[:, :, 0].double()

    # ---- lifecycle --------------------------------------------------------------------------

    def fit(
        self,
        lm: LanguageModel,
        harmful: Sequence[Prompt],
        harmless: Sequence[Prompt],
        neutral: Sequence[Prompt] | None = None,
    ) -> MARS:
        """Centroids, textual refusal directions and modality offsets at every layer.

        ``harmful``/``harmless``: typed requests (an image among them is an error: MARS uses no
        multimodal safety data); ``neutral``: content-free image prompts (:func:`neutral_prompts`);
        ``None`` for a text-only model (``offset_`` is then None and re-centring an image prompt
        is an error).
        """
        where = "MARS.fit"
        lm = _check_lm(lm, where)
        self._check_params(where)
        harmful = _check_prompts(harmful, "harmful", where, images="none")
        harmless = _check_prompts(harmless, "harmless", where, images="none")
        if neutral is not None:
            neutral = _check_prompts(neutral, "neutral", where, images="all")
        if self.layer is not None and not 0 <= int(self.layer) < lm.n_layers:
            raise InputError(
                f"The 'layer' parameter of {where} must be in [0, {lm.n_layers - 1}] for this "
                f"model. Got {self.layer!r}."
            )
        h = self._acts(lm, harmful)
        s = self._acts(lm, harmless)
        self.mu_unsafe_ = h.mean(0)
        self.mu_safe_ = s.mean(0)
        diff = self.mu_unsafe_ - self.mu_safe_
        self.distance_ = diff.norm(dim=-1)  # [L]
        self.direction_ = torch.where(
            self.distance_[:, None] > 1e-9 * (1 + self.mu_safe_.norm(dim=-1, keepdim=True)),
            diff / self.distance_[:, None].clamp_min(1e-30),
            torch.zeros_like(diff),
        )
        self.calibration_: dict[str, torch.Tensor] = {}  # known-safe inputs of the gate
        if neutral is not None:
            n_acts = self._acts(lm, neutral)
            self.calibration_["neutral"] = n_acts
            self.neutral_centroid_ = n_acts.mean(0)
            if self.anchor == "paired":  # the same instructions typed: the image's own effect
                self.offset_ = self.neutral_centroid_ - self._acts(lm, _without_images(neutral)).mean(0)
            else:
                self.offset_ = self.neutral_centroid_ - self.mu_safe_
        else:
            self.neutral_centroid_ = self.offset_ = None
        self.n_layers_ = lm.n_layers
        self.layer_ = None if self.layer is None else int(self.layer)
        self.trust_radius_ = None if self.trust_radius is None else float(self.trust_radius)
        self.layer_table_: list[dict[str, Any]] = []
        return self

    def candidate_layers(self) -> list[int]:
        """Layers with a non-zero direction below ``max_layer_fraction`` of depth."""
        self._check_fitted("candidate_layers")
        limit = self.max_layer_fraction * self.n_layers_
        return [
            i for i in range(self.n_layers_)
            if i < limit and float(self.direction_[i].norm()) > 0.5
        ]  # fmt: skip

    def select(
        self,
        lm: LanguageModel,
        val_harmful: Sequence[Prompt],
        val_harmless: Sequence[Prompt],
        known_safe: Sequence[Prompt] | None = None,
    ) -> MARS:
        """Choose the layer and the trust radius on a typed validation split (module docstring).

        Sets ``layer_``, ``trust_radius_`` (unless given), ``worst_layer_`` (the candidate the
        criterion ranks last: the wrong-layer ablation) and ``layer_table_`` (one row per
        candidate: ``layer``, ``auc``, ``radius`` (None when no radius reaches the target),
        ``refusal_at_radius``, ``mean_refusal_prob``, ``eligible``).

        ``known_safe``: further inputs known to be safe, typed or with images (e.g. held-aside
        benign image-QA validation items, never the evaluation items), whose positions join the
        calibrated gate's known-safe inputs (image prompts re-centred as the inputs are). They
        carry no label but "safe" and play no part in the layer and radius criterion.
        """
        where = "MARS.select"
        self._check_fitted(where)
        lm = _check_lm(lm, where)
        self._check_model(lm, where)
        val_harmful = _check_prompts(val_harmful, "val_harmful", where, images="none")
        val_harmless = _check_prompts(val_harmless, "val_harmless", where, images="none")
        if known_safe is not None:
            known_safe = _check_prompts(known_safe, "known_safe", where)
        layers = self.candidate_layers()
        if not layers:
            raise InputError(
                f"{where}: no layer below max_layer_fraction={self.max_layer_fraction} has a "
                "non-zero refusal direction (harmful and harmless centroids coincide)."
            )
        radii = sorted(float(r) for r in self.radii)
        if self.trust_radius is not None:
            radii = [float(self.trust_radius)]
        hv = self._acts(lm, val_harmful, layers)
        sv_all = self._acts(lm, val_harmless)
        # the calibrated gate's known-safe inputs (a new dict: copies share the old one)
        cal = {k: v for k, v in getattr(self, "calibration_", {}).items() if k != "known_safe"}
        cal["harmless"] = sv_all
        self.known_safe_images_ = None
        if known_safe is not None:
            cal["known_safe"] = self._acts(lm, known_safe)
            self.known_safe_images_ = torch.tensor(
                [prompt_has_images(p) for p in known_safe], dtype=torch.bool)  # fmt: skip
        self.calibration_ = cal
        sv = sv_all[:, layers]
        rows = []
        for j, layer in enumerate(layers):
            r = self.direction_[layer]
            auc = _auc((hv[:, j] @ r).numpy(), (sv[:, j] @ r).numpy())
            chosen, rate_at, mean_at = None, 0.0, 0.0
            for rho in radii:
                vec = (rho * float(self.distance_[layer]) * r).float()
                deltas = vec.unsqueeze(0).expand(len(val_harmless), -1).contiguous()
                p = refusal_probability(lm, val_harmless, site=f"blocks.{layer}.resid_pre",
                                        deltas=deltas, batch_size=self.batch_size)  # fmt: skip
                rate_at, mean_at = float((p > 0.5).float().mean()), float(p.mean())
                if rate_at >= self.target_refusal:
                    chosen = rho
                    break
            rows.append({"layer": layer, "auc": auc, "radius": chosen,
                         "refusal_at_radius": rate_at, "mean_refusal_prob": mean_at,
                         "eligible": auc >= self.min_auc})  # fmt: skip

        def rank(row: dict[str, Any]) -> tuple:
            # smaller radius first; a layer that never reaches the target ranks after every
            # layer that does, by its refusal at the largest radius
            reached = row["radius"] is not None
            return (not row["eligible"], not reached,
                    row["radius"] if reached else -row["refusal_at_radius"],
                    -row["mean_refusal_prob"], row["layer"])  # fmt: skip

        ordered = sorted(rows, key=rank)
        self.layer_table_ = rows
        best, worst = ordered[0], ordered[-1]
        if self.layer is None:
            self.layer_ = int(best["layer"])
        if self.trust_radius is None:
            pick = next(r for r in rows if r["layer"] == self.layer_) if self.layer_ in layers \
                else best  # fmt: skip
            self.trust_radius_ = float(pick["radius"] if pick["radius"] is not None else radii[-1])
        self.worst_layer_ = int(worst["layer"]) if len(ordered) > 1 else int(best["layer"])
        return self

    # ---- per input --------------------------------------------------------------------------

    def _layer(self) -> int:
        assert self.layer_ is not None
        return int(self.layer_)

    @property
    def gate_threshold_(self) -> float:
        """The gate's threshold ``tau`` in use: ``gate_threshold`` (``gate="fixed"``), or the
        ``gate_quantile`` quantile of the known-safe inputs' positions at the layer in use
        (``gate="calibrated"``: typed harmless validation prompts, the neutral image prompts and
        ``select``'s ``known_safe``; image prompts re-centred when ``recenter``).

        At ``gate_quantile=1.0`` the threshold is the largest known-safe position, so for each
        kind of known-safe input with ``n`` exchangeable draws a fresh input of that kind is
        steered with probability at most ``1 / (n + 1)`` (the conformal finite-sample bound;
        a statement over calibration draws, not about any one input)."""
        self._check_selected("gate_threshold_")
        if self.gate == "fixed":
            return float(self.gate_threshold)
        cal = getattr(self, "calibration_", {})
        if "harmless" not in cal:
            raise NotFittedError(
                "The calibrated gate needs MARS.select(lm, val_harmful, val_harmless): its "
                "threshold is a quantile of the typed harmless validation prompts' positions."
            )
        layer = self._layer()
        d = float(self.distance_[layer])
        h = [cal["harmless"][:, layer]]
        if "neutral" in cal:
            n = cal["neutral"][:, layer]
            h.append(n - self.offset_[layer] if self.recenter else n)
        if "known_safe" in cal:
            k = cal["known_safe"][:, layer]
            if self.recenter and bool(self.known_safe_images_.any()):
                if self.offset_ is None:
                    raise NotFittedError(
                        "MARS was fitted without neutral image prompts, so it cannot re-centre "
                        "the image prompts among known_safe: fit with neutral prompts or "
                        "with_settings(recenter=False)."
                    )
                k = k - self.known_safe_images_[:, None].double() * self.offset_[layer]
            h.append(k)
        t = (torch.cat(h) - self.mu_safe_[layer]) @ self.direction_[layer] / d
        return float(torch.quantile(t, float(self.gate_quantile)))

    def positions(self, lm: LanguageModel, prompts: Sequence[Prompt]) -> torch.Tensor:
        """``t(x)`` [N] (float64): 0 at the safe centroid, 1 at the unsafe one, along ``r``;
        image prompts re-centred when ``recenter``."""
        where = "MARS.positions"
        self._check_selected(where)
        lm = _check_lm(lm, where)
        self._check_model(lm, where)
        prompts = _check_prompts(prompts, "prompts", where)
        self._check_offset(prompts)
        layer = self._layer()
        h = self._acts(lm, prompts, [layer])[:, 0]
        return self._positions_from(h, prompts)

    def last_activations(self, lm: LanguageModel, prompts: Sequence[Prompt]) -> torch.Tensor:
        """The residual stream [N, n_layers, D] (float64) at every ``resid_pre`` at the last
        prompt position: read once, then place the inputs for several settings with
        :meth:`positions_from_activations`."""
        where = "MARS.last_activations"
        self._check_fitted(where)
        lm = _check_lm(lm, where)
        self._check_model(lm, where)
        return self._acts(lm, _check_prompts(prompts, "prompts", where))

    def positions_from_activations(
        self, activations: Any, prompts: Sequence[Prompt]
    ) -> torch.Tensor:
        """:meth:`positions` from :meth:`last_activations` of the same ``prompts`` (the
        prompts say which inputs carry images, i.e. which are re-centred)."""
        where = "MARS.positions_from_activations"
        self._check_selected(where)
        prompts = _check_prompts(prompts, "prompts", where)
        a = torch.as_tensor(as_float_array(activations, "activations", where, ndim=3))
        if a.shape != (len(prompts), self.n_layers_, self.mu_unsafe_.shape[1]):
            raise InputError(
                f"The 'activations' parameter of {where} must be [{len(prompts)}, "
                f"{self.n_layers_}, {self.mu_unsafe_.shape[1]}] (last_activations of the "
                f"prompts). Got {tuple(a.shape)}."
            )
        self._check_offset(prompts)
        return self._positions_from(a[:, self._layer()], prompts)

    def _positions_from(self, h: torch.Tensor, prompts: list[Prompt]) -> torch.Tensor:
        layer = self._layer()
        img = [prompt_has_images(p) for p in prompts]
        if self.recenter and any(img):
            self._check_offset(prompts)
            flags = torch.tensor(img, dtype=torch.float64)
            h = h - flags[:, None] * self.offset_[layer]
        d = float(self.distance_[layer])
        return ((h - self.mu_safe_[layer]) @ self.direction_[layer]) / d

    def _check_offset(self, prompts: list[Prompt]) -> None:
        if self.recenter and self.offset_ is None and any(prompt_has_images(p) for p in prompts):
            raise NotFittedError(
                "MARS was fitted without neutral image prompts, so it cannot re-centre image "
                "prompts: fit(lm, harmful, harmless, neutral=neutral_prompts(...)) or "
                "with_settings(recenter=False)."
            )

    def strengths_from_positions(self, t: torch.Tensor) -> torch.Tensor:
        """``alpha`` [N] (the edit's norm) from positions ``t`` [N]."""
        self._check_selected("MARS.strengths_from_positions")
        t = torch.as_tensor(as_float_array(t, "t", "MARS.strengths_from_positions", ndim=1))
        unit = self.trust_radius_ * float(self.distance_[self._layer()])
        w = t.clamp(0.0, 1.0) if self.strength == "adaptive" else torch.ones_like(t)
        if self.gated:
            w = w * (t > self.gate_threshold_).double()
        return unit * w

    def strengths(self, lm: LanguageModel, prompts: Sequence[Prompt]) -> torch.Tensor:
        """``alpha(x)`` [N]: 0 for safe-side inputs when gated, at most ``rho D``."""
        return self.strengths_from_positions(self.positions(lm, prompts))

    def deltas(self, lm: LanguageModel, prompts: Sequence[Prompt]) -> torch.Tensor:
        """The per-input edits [N, D] (float32) added at the last prompt position."""
        alpha = self.strengths(lm, prompts)
        return (alpha[:, None] * self.direction_[self._layer()][None, :]).float()

    @property
    def site_(self) -> str:
        self._check_selected("site_")
        return f"blocks.{self._layer()}.resid_pre"

    def steering(self, name: str | None = None) -> MarsSteering:
        """A :class:`MarsSteering` for :func:`trustlab.lm.evaluate` (and the decoder): the
        per-input edits at the last prompt position, applied in the prefill."""
        self._check_selected("MARS.steering")
        return MarsSteering(
            site=self.site_, vector=self.direction_[self._layer()].float(),
            positions="last", name=name or self.name, mars=self,
        )  # fmt: skip

    def with_settings(self, **changes: Any) -> MARS:
        """A copy sharing the fitted state with some settings changed (``recenter``,
        ``strength``, ``gated``, ``gate_threshold``, ``layer``, ``trust_radius``, ``name``).

        A changed ``layer`` keeps the trust radius chosen for the selected layer (so only the
        layer differs); a changed ``trust_radius`` replaces the chosen one."""
        self._check_fitted("MARS.with_settings")
        allowed = {"recenter", "strength", "gated", "gate_threshold", "gate", "gate_quantile",
                   "layer", "trust_radius", "name"}  # fmt: skip
        unknown = set(changes) - allowed
        if unknown:
            raise InputError(
                f"MARS.with_settings got unknown setting(s) {sorted(unknown)}; allowed: "
                f"{sorted(allowed)}."
            )
        new = copy.copy(self)
        for k, v in changes.items():
            object.__setattr__(new, k, v)
        new._check_params("MARS.with_settings")
        if "layer" in changes:
            if (
                changes["layer"] is None
                or not 0
                <= check_scalar(changes["layer"], "layer", "MARS.with_settings", kind=int)
                < self.n_layers_
            ):
                raise InputError(
                    f"The 'layer' parameter of MARS.with_settings must be in "
                    f"[0, {self.n_layers_ - 1}]. Got {changes['layer']!r}."
                )
            new.layer_ = int(changes["layer"])
        if "trust_radius" in changes:
            new.trust_radius_ = None if changes["trust_radius"] is None else float(
                changes["trust_radius"])  # fmt: skip
        return new

    def fingerprint(self) -> str:
        """A digest of the settings and fitted state (reply caches key on it)."""
        h = hashlib.sha256()
        for f in dataclasses.fields(self):
            h.update(f"{f.name}={getattr(self, f.name)!r};".encode())
        h.update(f"layer_={getattr(self, 'layer_', None)};rho={getattr(self, 'trust_radius_', None)}"
                 .encode())  # fmt: skip
        for attr in ("mu_unsafe_", "mu_safe_", "offset_"):
            if getattr(self, attr, None) is not None:
                h.update(getattr(self, attr).contiguous().numpy().tobytes())
        for key, acts in sorted(getattr(self, "calibration_", {}).items()):
            h.update(key.encode() + acts.contiguous().numpy().tobytes())
        if getattr(self, "known_safe_images_", None) is not None:
            h.update(self.known_safe_images_.numpy().tobytes())
        return h.hexdigest()

    def summary(self) -> dict[str, Any]:
        """The fitted geometry at the chosen layer, as plain numbers."""
        self._check_selected("MARS.summary")
        layer = self._layer()
        r = self.direction_[layer]
        return {
            "layer": layer, "site": self.site_, "trust_radius": self.trust_radius_,
            "centroid_distance": float(self.distance_[layer]),
            "offset_norm": None if self.offset_ is None else float(self.offset_[layer].norm()),
            "offset_along_direction": None if self.offset_ is None
            else float(self.offset_[layer] @ r / self.distance_[layer]),
            "gate_threshold": self.gate_threshold_, "gate": self.gate,
            "recenter": self.recenter, "anchor": self.anchor,
            "strength": self.strength, "gated": self.gated,
        }  # fmt: skip


@dataclass(frozen=True)
class MarsSteering(RowSteering):
    """A :class:`~trustlab.lm.steering.RowSteering` whose per-prompt rows are MARS's edits
    (``mars.deltas``): zero rows for the prompts the gate keeps closed, ``alpha(x) r`` for the
    others, at the last prompt position (prefill only)."""

    mars: MARS | None = None

    def deltas(self, lm: LanguageModel, prompts: Sequence[Prompt]) -> torch.Tensor:
        if self.mars is None:
            raise NotFittedError("MarsSteering needs a fitted MARS (use MARS.steering()).")
        return self.mars.deltas(lm, prompts)

    def fingerprint(self) -> str:
        base = self.mars.fingerprint() if self.mars is not None else "none"
        return hashlib.sha256(f"mars|{self.site}|{self.positions}|{base}".encode()).hexdigest()


def ablations(mars: MARS, *, recentering_gate: str = "recalibrated") -> dict[str, MARS]:
    """The five ablations of a selected MARS (names in :data:`ABLATIONS`).

    ``recentering_gate``: the gate of ``no-recentering`` when MARS's gate is calibrated.
    ``"recalibrated"``: recalibrated on the known-safe inputs' raw (not re-centred) positions --
    with image prompts among them (the neutral colour fields, ``known_safe`` images) the
    threshold then moves with a constant image offset, which re-centres the gate through the
    back door. ``"shared"``: MARS's own threshold (the arm differs from MARS by re-centring
    alone: one switch)."""
    if not isinstance(mars, MARS):
        raise InputError(
            f"The 'mars' parameter of ablations must be a MARS. Got {type(mars).__name__}."
        )
    check_choice(recentering_gate, "recentering_gate", ("recalibrated", "shared"), "ablations")
    mars._check_selected("ablations")
    no_recentering = mars.with_settings(recenter=False, name="no-recentering")
    if recentering_gate == "shared" and mars.gated:
        no_recentering = no_recentering.with_settings(gate="fixed",
                                                      gate_threshold=mars.gate_threshold_)
    return {
        "no-recentering": no_recentering,
        "fixed-strength": mars.with_settings(strength="fixed", name="fixed-strength"),
        "ungated": mars.with_settings(gated=False, name="ungated"),
        "wrong-layer": mars.with_settings(layer=mars.worst_layer_, name="wrong-layer")
        if hasattr(mars, "worst_layer_") else mars.with_settings(
            layer=(mars._layer() + 1) % mars.n_layers_, name="wrong-layer"),
        "textual": mars.with_settings(recenter=False, gated=False, strength="fixed",
                                      name="textual"),
    }  # fmt: skip
