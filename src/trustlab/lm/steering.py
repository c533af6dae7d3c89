"""Steering tools shared by the refusal-steering methods: the refusal direction with its layer,
matched-norm placebo controls, a harm-recognition gate, and per-row (input-dependent) additions.

* :class:`RefusalDirection` — difference in means of harmful minus harmless instructions at every
  ``resid_pre`` and post-instruction position; the layer is chosen by a behavioural criterion
  (Arditi et al., 2024): the candidate whose ablation at every layer most lowers the refusal score
  of validation harmful prompts, the last 20% of layers skipped.
* :func:`placebo_directions` — isotropic Gaussian unit directions, optionally made orthogonal to
  the direction they control for; scale them to the norm of the vector they are matched to.
* :class:`HarmGate` — projection on a harm-recognition direction thresholded at the ``1 - q``
  quantile of benign calibration prompts (conditional activation steering, Lee et al. 2024).
* :func:`row_additions` — add ``deltas[b]`` to row ``b`` of the batch at one site (at every real
  token, or at chosen positions); :class:`RowSteering` describes such an edit for the decoder and
  the evaluation loop: one vector, optionally gated per prompt.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import torch

from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.validation import check_scalar
from trustlab.lm._checks import as_float_tensor, prompt_list
from trustlab.lm.activations import get_activations
from trustlab.lm.directions import ablation_metric, diff_in_means, select_direction
from trustlab.lm.hooks import hook
from trustlab.lm.judges import refusal_score
from trustlab.lm.model import LanguageModel, Prompt
from trustlab.lm.positions import PositionLike, as_positions

__all__ = [
    "HarmGate",
    "RefusalDirection",
    "RowSteering",
    "layer_candidates",
    "layer_cosines",
    "placebo_directions",
    "row_additions",
]


def _check_positive_int(value: object, name: str, where: str) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value != int(value)
    ):
        raise InputError(
            f"The '{name}' parameter of {where} must be a whole number. Got {value!r}."
        )
    if int(value) < 1:
        raise InputError(f"The '{name}' parameter of {where} must be >= 1. Got {value!r}.")
    return int(value)


def placebo_directions(
    n: int, d_model: int, generator: torch.Generator, *, exclude: torch.Tensor | None = None
) -> torch.Tensor:
    """``n`` random unit directions [n, d_model] (isotropic Gaussian, normalised).

    With ``exclude`` (a direction), each placebo is first made orthogonal to it, so a placebo
    never carries part of the effect it is a control for. Multiply by the norm of the steering
    vector to get matched-norm placebos.
    """
    n = _check_positive_int(n, "n", "placebo_directions")
    d_model = _check_positive_int(d_model, "d_model", "placebo_directions")
    if not isinstance(generator, torch.Generator):
        raise InputError(
            "The 'generator' parameter of placebo_directions must be a torch.Generator. "
            f"Got {type(generator).__name__}."
        )
    if exclude is not None and d_model < 2:
        raise InputError("placebo_directions with 'exclude' needs d_model >= 2.")
    g = torch.randn((n, d_model), generator=generator, dtype=torch.float64)
    if exclude is not None:
        e = torch.as_tensor(exclude, dtype=torch.float64).reshape(-1)
        if e.shape[0] != d_model or not bool(torch.isfinite(e).all()) or float(e.norm()) == 0:
            raise InputError(
                f"The 'exclude' parameter of placebo_directions must be a finite non-zero vector "
                f"of length {d_model}. Got shape {tuple(e.shape)}."
            )
        e = e / e.norm()
        g = g - (g @ e).unsqueeze(-1) * e
    return (g / g.norm(dim=-1, keepdim=True)).float()


@contextlib.contextmanager
def row_additions(
    lm: LanguageModel,
    site: str,
    deltas: torch.Tensor | Callable[[], torch.Tensor],
    *,
    positions: PositionLike = "all",
) -> Iterator[None]:
    """Add ``deltas[b]`` [B, D] to row ``b`` of every batch at ``site`` (at real tokens only,
    and only at ``positions``: ``"all"`` by default, ``"prompt"``, ``"generated"``, ``"last"``...).

    The batch in flight must have exactly ``B`` rows (the caller builds it). ``deltas`` may be a
    callable returning the current tensor (the decoder shrinks it as rows finish). Autograd
    flows into ``deltas``.
    """
    pos = as_positions(positions)
    if not callable(deltas):  # a wrong width or NaN used to fail (or spread) inside the forward
        deltas = _check_deltas(lm, deltas)

    def fn(_site: str, h: torch.Tensor, step) -> torch.Tensor:
        d = deltas() if callable(deltas) else deltas
        if h.shape[0] != d.shape[0]:
            raise InputError(
                f"row_additions got a batch of {h.shape[0]} rows for {d.shape[0]} deltas."
            )
        mask = step.valid if pos.kind == "all" else step.edit_mask(pos)
        return h + mask.unsqueeze(-1).to(h.dtype) * d.to(h.dtype).unsqueeze(1)

    with hook(lm, site, fn):
        yield


def _check_deltas(lm: LanguageModel, deltas: object) -> torch.Tensor:
    d = as_float_tensor(deltas, "deltas", "row_additions")
    if d.dim() != 2 or d.shape[1] != lm.d_model:
        raise InputError(
            f"The 'deltas' parameter of row_additions must be [batch, d_model={lm.d_model}]. "
            f"Got {tuple(d.shape)}."
        )
    return d


def layer_candidates(
    lm: LanguageModel,
    prompts_a: Sequence[Prompt],
    prompts_b: Sequence[Prompt],
    *,
    batch_size: int = 32,
) -> torch.Tensor:
    """Difference-in-means candidates [n_layers, n_post_instruction, D] at every ``resid_pre``."""
    # a string used to be read as a list of one-character prompts
    prompts_a = prompt_list(prompts_a, "prompts_a", "layer_candidates")
    prompts_b = prompt_list(prompts_b, "prompts_b", "layer_candidates")
    sites = lm.sites("resid_pre")
    a = get_activations(lm, list(prompts_a), sites, "post_instruction", batch_size=batch_size)
    b = get_activations(lm, list(prompts_b), sites, "post_instruction", batch_size=batch_size)
    return diff_in_means(a, b)


def layer_cosines(a: torch.Tensor, b: torch.Tensor, position: int) -> torch.Tensor:
    """Cosine per layer [n_layers] between two candidate tensors at one position (NaN at 0)."""
    a, b = as_float_tensor(a, "a", "layer_cosines"), as_float_tensor(b, "b", "layer_cosines")
    if a.dim() != 3 or a.shape != b.shape:
        raise InputError(
            f"layer_cosines needs two [L, P, D] tensors of one shape. Got {tuple(a.shape)} and "
            f"{tuple(b.shape)}."
        )
    position = check_scalar(position, "position", "layer_cosines", kind=int)  # 1.5, "a": raw errors
    if not -a.shape[1] <= position < a.shape[1]:
        raise InputError(f"position must index {a.shape[1]} positions. Got {position}.")
    x, y = a[:, position].double(), b[:, position].double()
    den = x.norm(dim=-1) * y.norm(dim=-1)
    cos = (x * y).sum(-1) / den
    return torch.where(den > 0, cos, torch.full_like(cos, float("nan"))).float()


@dataclass
class RefusalDirection:
    """Fit the refusal direction of one model and choose its layer.

    Parameters: ``max_layer_fraction`` (layers at or beyond this share of depth are skipped),
    ``batch_size``. ``fit(lm, harmful, harmless, validation_harmful)`` sets ``candidates_``
    [L, P, D], ``layer_``, ``position_``, ``direction_`` (unit), ``raw_`` (the unnormalised
    difference in means, its norm is the injection unit), ``scores_`` [L, P] (mean refusal
    log-odds with the candidate ablated; lower is better) and ``site_`` (``blocks.{l}.resid_pre``).
    """

    max_layer_fraction: float = 0.8
    batch_size: int = 32

    def fit(
        self,
        lm: LanguageModel,
        harmful: Sequence[Prompt],
        harmless: Sequence[Prompt],
        validation_harmful: Sequence[Prompt],
    ) -> RefusalDirection:
        validation_harmful = prompt_list(validation_harmful, "validation_harmful",
                                         "RefusalDirection.fit")  # fmt: skip
        self.candidates_ = layer_candidates(lm, harmful, harmless, batch_size=self.batch_size)
        metric = ablation_metric(lm, list(validation_harmful), refusal_score)
        choice = select_direction(
            self.candidates_, metric, max_layer_fraction=self.max_layer_fraction
        )
        self.layer_ = choice.layer
        self.position_ = choice.position
        self.direction_ = choice.direction
        self.raw_ = choice.raw
        self.scores_ = choice.scores
        self.site_ = f"blocks.{choice.layer}.resid_pre"
        return self

    def _check(self) -> None:
        if not hasattr(self, "direction_"):
            raise NotFittedError("Call RefusalDirection.fit(...) before using the direction.")

    def cosine_with(self, other: torch.Tensor) -> torch.Tensor:
        """Per-layer cosine [L] between the refusal candidates and ``other`` [L, P, D]."""
        self._check()
        return layer_cosines(self.candidates_, other, self.position_)


@dataclass
class HarmGate:
    """The conditional-steering gate: project on the harm-recognition direction, threshold.

    Parameters: ``benign_rate`` (``q``: share of benign calibration prompts let through).
    ``fit(lm, candidates, harmful_calibration, benign_calibration)`` takes harm-recognition
    candidates [L, P, D] (differences in means at ``resid_pre``), sets for each (layer,
    position) the threshold ``tau`` = the ``1 - q`` quantile of the benign projections, and
    keeps the one that lets through the largest share of harmful calibration prompts
    (``recall_``); it sets ``site_``, ``position_``, ``direction_`` (unit), ``threshold_``.
    ``gate(lm, prompts)`` -> bool [N].
    """

    benign_rate: float = 0.05
    batch_size: int = 32

    def _acts(self, lm: LanguageModel, prompts: Sequence[Prompt], sites: list[str]) -> torch.Tensor:
        return get_activations(
            lm, list(prompts), sites, "post_instruction", batch_size=self.batch_size
        ).double()

    def fit(
        self,
        lm: LanguageModel,
        candidates: torch.Tensor,
        harmful_calibration: Sequence[Prompt],
        benign_calibration: Sequence[Prompt],
    ) -> HarmGate:
        q = self.benign_rate
        if isinstance(q, bool) or not isinstance(q, int | float) or not 0.0 < float(q) < 1.0:
            raise InputError(f"benign_rate must be in (0, 1). Got {q!r}.")
        harmful_calibration = prompt_list(harmful_calibration, "harmful_calibration", "HarmGate.fit")
        benign_calibration = prompt_list(benign_calibration, "benign_calibration", "HarmGate.fit")
        cand = torch.as_tensor(candidates, dtype=torch.float64)
        sites = lm.sites("resid_pre")
        if cand.dim() != 3 or cand.shape[0] != len(sites) or cand.shape[2] != lm.d_model:
            raise InputError(
                f"candidates must be [{len(sites)}, P, {lm.d_model}]. Got {tuple(cand.shape)}."
            )
        if not bool(torch.isfinite(cand).all()):
            raise InputError("HarmGate candidates hold non-finite values.")
        units = cand / cand.norm(dim=-1, keepdim=True).clamp_min(1e-30)
        ben = torch.einsum("nlpd,lpd->nlp", self._acts(lm, benign_calibration, sites), units)
        har = torch.einsum("nlpd,lpd->nlp", self._acts(lm, harmful_calibration, sites), units)
        tau = torch.quantile(ben, 1.0 - float(q), dim=0, interpolation="higher")
        recall = (har > tau).double().mean(0)
        recall[cand.norm(dim=-1) == 0] = -1.0
        best = int(recall.argmax())
        layer, pos = divmod(best, cand.shape[1])
        self.layer_, self.position_ = layer, pos
        self.site_ = sites[layer]
        self.direction_ = units[layer, pos].float()
        self.threshold_ = float(tau[layer, pos])
        self.recall_ = float(recall[layer, pos])
        self.recall_by_site_ = recall.float()
        return self

    def scores(self, lm: LanguageModel, prompts: Sequence[Prompt]) -> torch.Tensor:
        if not hasattr(self, "direction_"):
            raise NotFittedError("Call HarmGate.fit(...) before scoring prompts.")
        acts = self._acts(lm, prompts, [self.site_])[:, 0, self.position_]
        return (acts @ self.direction_.double()).float()

    def gate(self, lm: LanguageModel, prompts: Sequence[Prompt]) -> torch.Tensor:
        return self.scores(lm, prompts) > self.threshold_


Gate = HarmGate | Callable[[LanguageModel, Sequence[Prompt]], torch.Tensor]


@dataclass(frozen=True)
class RowSteering:
    """Add ``vector`` [D] at ``site`` (at ``positions``), per prompt: to every prompt, or only to
    the prompts a ``gate`` lets through (a fitted :class:`HarmGate` or any callable
    ``gate(lm, prompts) -> bool [N]``), the gate read on the unsteered prompt.

    The decoder (:func:`trustlab.lm.decoding.generate_rows`) and the evaluation loop apply it
    row by row, so one batch can mix steered and unsteered prompts.
    """

    site: str
    vector: torch.Tensor
    gate: Gate | None = None
    positions: PositionLike = "all"
    name: str = field(default="steer")

    def deltas(self, lm: LanguageModel, prompts: Sequence[Prompt]) -> torch.Tensor:
        """[N, D] per-prompt additions (zero rows where the gate is closed)."""
        lm.adapter.module(self.site)  # a clear error for an unknown site
        v = torch.as_tensor(self.vector, dtype=torch.float32).reshape(-1)
        if v.shape[0] != lm.d_model or not bool(torch.isfinite(v).all()):
            raise InputError(
                f"RowSteering needs a finite vector of length d_model={lm.d_model}. "
                f"Got shape {tuple(torch.as_tensor(self.vector).shape)}."
            )
        rows = v.unsqueeze(0).expand(len(prompts), -1)
        if self.gate is None:
            return rows.clone()
        fn = self.gate.gate if isinstance(self.gate, HarmGate) else self.gate
        flags = torch.as_tensor(fn(lm, prompts)).reshape(-1)
        if flags.dtype != torch.bool and not bool(((flags == 0) | (flags == 1)).all()):
            # a gate of scores (0.3) used to open every non-zero row
            raise InputError(
                f"The gate of a RowSteering must return True/False flags. Got values such as "
                f"{flags[(flags != 0) & (flags != 1)][0].item()!r}."
            )
        open_ = flags.bool()
        if open_.shape[0] != len(prompts):
            raise InputError(
                f"The gate of a RowSteering returned {open_.shape[0]} flags for {len(prompts)} "
                "prompts."
            )
        return rows * open_.unsqueeze(-1).float()

    def fingerprint(self) -> str:
        import hashlib

        h = hashlib.sha256()
        h.update(f"{self.site}|{self.positions}|{self.name}".encode())
        h.update(torch.as_tensor(self.vector, dtype=torch.float32).contiguous().numpy().tobytes())
        if isinstance(self.gate, HarmGate) and hasattr(self.gate, "direction_"):
            h.update(f"{self.gate.site_}|{self.gate.position_}|{self.gate.threshold_!r}".encode())
            h.update(self.gate.direction_.contiguous().numpy().tobytes())
        elif self.gate is not None:
            h.update(f"gate:{getattr(self.gate, '__qualname__', repr(self.gate))}".encode())
        return h.hexdigest()
