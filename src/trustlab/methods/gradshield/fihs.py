"""FIHS: the Finetuning Implicit Harmfulness Score of one fine-tuning example.

Definition (the one this package implements; docs/methods/gradshield.md explains the choices).
Let ``L_x(θ)`` be an example's response loss (mean cross-entropy over its response and
end-of-turn tokens: the training loss at batch size one) and ``g_x = ∇L_x`` restricted to a set
``M`` of safety-critical parameter slices. The proxy harmfulness of the model is the log-odds
of complying rather than refusing on a small probe set of harmful requests,

    S(θ) = mean_q [ log p_θ(compliance_q | q) − log p_θ(refusal_q | q) ]    (per-token means)

so ``r = ∇_M(−S) = ḡ_comply − ḡ_refuse`` (mean response-loss gradients of the compliance and
refusal probes). One SGD step on ``x`` with learning rate η changes ``S`` by
``η ⟨g_x, r⟩ + O(η²)``: the example's first-order contribution to harmfulness. FIHS is its
normalised form,

    FIHS(x) = ⟨g_x, r⟩ / (‖g_x‖ ‖r‖)   ∈ [−1, 1],

invariant to the scale of the loss, the learning rate and the probe count, and free of the
gradient-norm effects that make raw inner products rank examples by length and surprise
(LESS's reason for cosines). ``aggregate="mean"`` averages per-slice cosines instead
(GradSafe's form).

The slices ``M`` are rows of weight matrices (:class:`ParameterSlices`) chosen on the probe
sets: with ``r_A`` built from one half of the probes, slice ``j`` scores
``mean_{probes B} cos(g_j, r_A,j) − mean_{trusted benign} cos(g_j, r_A,j)`` (how consistently a
held-out harmful-compliance gradient points along the reference there, beyond a benign one),
and the top ``slice_fraction`` of slices are kept (``slice_rule="benign"``, the default).
``slice_rule="refusal"`` contrasts the held-out compliance probes with the held-out refusal
probes instead (the slices where compliance and refusal differ most), and ``"both"`` keeps the
slices by the smaller of the two margins (compliance must stand out against benign data *and*
against refusal there).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch

from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.validation import check_choice, check_scalar
from trustlab.methods.gradshield.slices import ParameterSlices, as_tensor

#: Most bytes one chunk of float32 per-example gradients may take: ``batch_size`` is lowered to
#: fit (SmolLM2-135M's full gradient is 540 MB, so 32 of them at once were killed for memory).
CHUNK_BYTES = 2**30


def chunk_size(model: Any, params: Sequence[str] | None, batch_size: int) -> int:
    """``batch_size`` lowered so that a chunk of per-example gradients over ``params`` (fnmatch
    patterns or names; None: every trainable parameter) stays within :data:`CHUNK_BYTES`.
    Scores do not depend on it (each example is differentiated on its own)."""
    import math

    from trustlab.finetune import gradient_layout

    d = sum(math.prod(shape) for _, shape in gradient_layout(model, params))
    return max(1, min(int(batch_size), CHUNK_BYTES // max(1, 4 * d)))

__all__ = ["FIHS", "check_model", "fihs_from_gradients"]

Aggregate = Literal["concat", "mean"]
SliceRule = Literal["benign", "refusal", "both"]
SLICE_RULES = ("benign", "refusal", "both")


def fihs_from_gradients(
    grads: Any,
    direction: Any,
    slices: ParameterSlices | None = None,
    aggregate: Aggregate = "concat",
) -> np.ndarray:
    """FIHS ``[b]`` of gradients ``[b, d]`` against a reference direction ``[d]`` (tensors or
    array-likes).

    ``concat``: one cosine over all ``d`` values; ``mean``: the mean of per-slice cosines
    (``slices`` required). A zero gradient scores 0.
    """
    where = "fihs_from_gradients"
    check_choice(aggregate, "aggregate", ("concat", "mean"), where)
    g = as_tensor(grads, "grads", where, 2)
    r = as_tensor(direction, "direction", where, 1)
    if g.shape[1] != r.shape[0]:
        raise InputError(
            f"The 'grads' of {where} have {g.shape[1]} values per row; 'direction' has "
            f"{r.shape[0]}."
        )
    if aggregate == "mean" and not isinstance(slices, ParameterSlices):
        raise InputError(f"The 'slices' parameter of {where} must be ParameterSlices for 'mean'.")
    return _fihs(g, r, slices, aggregate).double().numpy()


def _fihs(
    g: torch.Tensor, r: torch.Tensor, slices: ParameterSlices | None, aggregate: str
) -> torch.Tensor:
    if aggregate == "mean":
        return slices.cosines(g, r).mean(1)  # type: ignore[union-attr]
    g, r = g.double(), r.double()
    denom = g.norm(dim=1) * r.norm()
    return torch.where(denom > 0, (g @ r) / denom.clamp_min(1e-300), torch.zeros_like(denom))


def check_model(model: Any, where: str) -> None:
    """A ``trustlab.lm.LanguageModel`` or a torch module (with a tokenizer given separately)."""
    if not (hasattr(model, "adapter") and hasattr(model, "tokenizer")) and not isinstance(
        model, torch.nn.Module
    ):
        raise InputError(
            f"The 'model' parameter of {where} must be a trustlab.lm.LanguageModel (lm.load) or "
            f"a torch causal LM. Got {type(model).__name__}."
        )


class _Sums:
    """A ``reduce`` for per_example_gradients that accumulates gradient sums by group."""

    def __init__(self, groups: Sequence[int], n_groups: int) -> None:
        self.groups = list(groups)
        self.sums: list[torch.Tensor | None] = [None] * n_groups
        self.counts = [0] * n_groups
        self.seen = 0

    def __call__(self, grads: torch.Tensor) -> torch.Tensor:
        b = grads.shape[0]
        for row in range(b):
            k = self.groups[self.seen + row]
            g = grads[row].double()
            self.sums[k] = g if self.sums[k] is None else self.sums[k] + g
            self.counts[k] += 1
        self.seen += b
        return torch.zeros(b, 1)

    def mean(self, k: int) -> torch.Tensor:
        if self.sums[k] is None:
            raise InputError("A probe group is empty.")
        return self.sums[k] / self.counts[k]


class FIHS:
    """Finetuning Implicit Harmfulness Score on safety-critical parameter slices.

    ``params``: fnmatch patterns of the parameters considered (None: every trainable one);
    ``slice_fraction``: share of slices kept as safety-critical (1.0: all of ``params``);
    ``aggregate``: ``concat`` (one cosine over the kept slices) or ``mean`` (mean per-slice
    cosine); ``use_refusal``: subtract the refusal probes' gradient from the reference (the
    log-odds proxy); ``slice_rule``: what the held-out compliance probes are contrasted with
    when slices are chosen — ``benign`` (the trusted benign half), ``refusal`` (the held-out
    refusal probes; needs ``use_refusal``) or ``both`` (the smaller margin); ``batch_size``/``method``/``threads``/``max_length``: per-example gradient
    settings (:func:`trustlab.finetune.per_example_gradients`).

    Lifecycle: :meth:`fit` on the model and the probe sets, then :meth:`score` examples for the
    same model. Learned state: ``slices_`` (all candidate slices), ``separation_`` ``[S]``,
    ``selected_`` (kept slice ids), ``direction_`` (reference on the kept values),
    ``score_params_`` (the parameters scoring differentiates).
    """

    def __init__(
        self,
        *,
        params: Sequence[str] | None = None,
        slice_fraction: float = 0.01,
        aggregate: Aggregate = "concat",
        use_refusal: bool = True,
        slice_rule: SliceRule = "benign",
        batch_size: int = 32,
        method: Literal["auto", "loop", "vmap"] = "auto",
        threads: int = 1,
        max_length: int | None = None,
    ) -> None:
        self.params = params
        self.slice_fraction = slice_fraction
        self.aggregate = aggregate
        self.use_refusal = use_refusal
        self.slice_rule = slice_rule
        self.batch_size = batch_size
        self.method = method
        self.threads = threads
        self.max_length = max_length

    # -- checks -----------------------------------------------------------------------------
    def _check_settings(self) -> None:
        where = "FIHS"
        check_scalar(self.slice_fraction, "slice_fraction", where, lo=0.0, hi=1.0, closed="right")
        check_choice(self.aggregate, "aggregate", ("concat", "mean"), where)
        if not isinstance(self.use_refusal, bool):
            raise InputError(f"The 'use_refusal' parameter of FIHS must be a bool. Got {self.use_refusal!r}.")  # fmt: skip
        check_choice(self.slice_rule, "slice_rule", SLICE_RULES, where)
        if self.slice_rule != "benign" and not self.use_refusal:
            raise InputError(
                f"FIHS(slice_rule={self.slice_rule!r}) contrasts with the refusal probes: it "
                "needs use_refusal=True."
            )
        check_scalar(self.batch_size, "batch_size", where, kind=int, lo=1)
        check_scalar(self.threads, "threads", where, kind=int, lo=1)
        check_choice(self.method, "method", ("auto", "loop", "vmap"), where)
        if self.max_length is not None:
            check_scalar(self.max_length, "max_length", where, kind=int, lo=2)

    @staticmethod
    def _check_data(data: Any, name: str, min_n: int) -> list[Any]:
        if isinstance(data, str | bytes) or not isinstance(data, Sequence):
            raise InputError(
                f"The '{name}' parameter of FIHS is a list of Examples or (prompt, response) "
                f"pairs. Got {type(data).__name__}."
            )
        if len(data) < min_n:
            raise InputError(
                f"The '{name}' parameter of FIHS needs at least {min_n} examples. Got {len(data)}."
            )
        return list(data)

    def _grads(self, model: Any, data: list[Any], tokenizer: Any, params: Any, reduce: Any):
        from trustlab.finetune import per_example_gradients

        out = per_example_gradients(
            model, data, tokenizer=tokenizer, params=params,
            batch_size=chunk_size(model, params, self.batch_size),
            method=self.method, max_length=self.max_length, threads=self.threads, reduce=reduce,
        )  # fmt: skip
        if out.shape[0] != len(data):
            raise InputError(
                f"{len(data) - out.shape[0]} examples lost their whole response to 'max_length' "
                f"({self.max_length}); raise it or drop them."
            )
        return out

    # -- fit --------------------------------------------------------------------------------
    def fit(
        self,
        model: Any,
        harmful: Sequence[Any],
        refusal: Sequence[Any] | None = None,
        benign: Sequence[Any] | None = None,
        *,
        tokenizer: Any = None,
    ) -> FIHS:
        """Build the reference direction and choose the slices.

        ``harmful``: harmful requests answered with compliance (the probes, >= 4);
        ``refusal``: harmful requests answered with a refusal (>= 2; required when
        ``use_refusal``); ``benign``: a trusted benign sample (>= 2; required when
        ``slice_fraction`` < 1), the contrast the slices are chosen against.
        """
        from trustlab.finetune import gradient_layout

        self._check_settings()
        check_model(model, "FIHS.fit")
        harmful = self._check_data(harmful, "harmful", 4)
        if self.use_refusal:
            if refusal is None:
                raise InputError("FIHS(use_refusal=True).fit needs the 'refusal' probes.")
            refusal = self._check_data(refusal, "refusal", 2)
        else:
            refusal = []
        select = self.slice_fraction < 1.0
        if select:
            if benign is None:
                raise InputError(
                    "FIHS.fit needs the trusted 'benign' sample to choose slices "
                    "(or slice_fraction=1.0)."
                )
            benign = self._check_data(benign, "benign", 2)
        layout = gradient_layout(model, self.params)
        bad = [name for name, shape in layout if len(shape) > 2]
        if bad:
            raise InputError(f"FIHS slices 1-D and 2-D parameters only; {bad[0]} is not one.")
        slices = ParameterSlices(tuple((n, tuple(s)) for n, s in layout))
        # pass 1: probe means, in halves (A: even positions, B: odd positions)
        probes = harmful + list(refusal)
        groups = [i % 2 for i in range(len(harmful))] + [2 + i % 2 for i in range(len(refusal))]
        sums = _Sums(groups, 4)
        self._grads(model, probes, tokenizer, self.params, sums)
        comply = (sums.sums[0] + sums.sums[1]) / len(harmful)
        direction = comply.clone()
        direction_a = sums.mean(0)
        if self.use_refusal:
            direction = direction - (sums.sums[2] + sums.sums[3]) / len(refusal)
            direction_a = direction_a - sums.mean(2)
        direction, direction_a = direction.float(), direction_a.float()
        if not torch.isfinite(direction).all() or float(direction.norm()) == 0.0:
            raise InputError("The probes give a zero or non-finite reference gradient.")
        # pass 2: per-slice consistency of held-out harmful probes vs the benign sample
        if select:
            held = [harmful[i] for i in range(1, len(harmful), 2)]
            held_refusal = (
                [refusal[i] for i in range(1, len(refusal), 2)]
                if self.slice_rule != "benign" else []
            )  # fmt: skip
            cos = self._grads(
                model, held + held_refusal + list(benign), tokenizer, self.params,
                lambda g: slices.cosines(g, direction_a),
            ).numpy()  # fmt: skip
            a, b = len(held), len(held) + len(held_refusal)
            versus_benign = cos[:a].mean(0) - cos[b:].mean(0)
            if self.slice_rule == "benign":
                separation = versus_benign
            else:
                versus_refusal = cos[:a].mean(0) - cos[a:b].mean(0)
                separation = (
                    versus_refusal if self.slice_rule == "refusal"
                    else np.minimum(versus_benign, versus_refusal)
                )  # fmt: skip
            k = max(1, int(np.ceil(self.slice_fraction * slices.n_slices)))
            selected = np.sort(np.argsort(-separation, kind="stable")[:k])
        else:
            separation = np.zeros(slices.n_slices)
            selected = np.arange(slices.n_slices)
        self.slices_ = slices
        self.separation_ = separation
        self.selected_ = selected
        self._setup_scoring(model, direction)
        return self

    def _setup_scoring(self, model: Any, direction: torch.Tensor) -> None:
        """Restrict scoring to the parameters that own a kept slice (less to differentiate)."""
        owners = self.slices_.owners()
        names = {owners[j] for j in self.selected_}
        sub = ParameterSlices(tuple((n, s) for n, s in self.slices_.layout if n in names))
        index_of = {name: j for j, name in enumerate(sub.names())}
        all_names = self.slices_.names()
        sub_selected = np.array([index_of[all_names[j]] for j in self.selected_])
        self.score_params_ = tuple(n for n, _ in sub.layout)
        self._sub = sub
        self._sub_index = sub.indices(sub_selected)
        self._kept = ParameterSlices(
            tuple(
                (name, (int(count), shape[-1]) if len(shape) == 2 else shape)
                for (name, shape), count in self._kept_rows(sub, sub_selected)
            )
        )
        self.direction_ = direction[self.slices_.indices(self.selected_)].clone()
        self.fingerprint_ = _fingerprint(model, self.score_params_)

    @staticmethod
    def _kept_rows(sub: ParameterSlices, selected: np.ndarray):
        owners = np.array(sub.owners())
        for name, shape in sub.layout:
            count = int(np.sum(owners[selected] == name))
            if count:
                yield (name, shape), count

    def _check_fitted(self, step: str) -> None:
        if not hasattr(self, "direction_"):
            raise NotFittedError(f"This FIHS is not fitted yet; call 'fit' before '{step}'.")

    # -- scoring ----------------------------------------------------------------------------
    def _check_scoring(self, model: Any, data: Sequence[Any], step: str) -> list[Any]:
        """Fitted, a model, valid data, and the model FIHS was fitted on; returns the data."""
        self._check_fitted(step)
        check_model(model, f"FIHS.{step}")
        data = self._check_data(data, "data", 1)
        if _fingerprint(model, self.score_params_) != self.fingerprint_:
            raise InputError(
                "FIHS scores examples for the model it was fitted on; this model's weights differ."
            )
        return data

    def score_details(
        self, model: Any, data: Sequence[Any], *, tokenizer: Any = None
    ) -> dict[str, np.ndarray]:
        """``fihs`` ``[n]``, the raw inner product ``dot`` = ⟨g_x, r⟩ on the kept slices (the
        first-order harmfulness change per unit learning rate) and ``grad_norm`` ‖g_x‖ there."""
        data = self._check_scoring(model, data, "score")
        index, direction, kept, aggregate = (
            self._sub_index,
            self.direction_,
            self._kept,
            self.aggregate,
        )

        def reduce(g: torch.Tensor) -> torch.Tensor:
            sel = g[:, index]
            fihs = _fihs(sel, direction, kept, aggregate)
            return torch.stack(
                [fihs.double(), sel.double() @ direction.double(), sel.double().norm(dim=1)], 1
            )

        out = self._grads(model, data, tokenizer, list(self.score_params_), reduce).numpy()
        return {"fihs": out[:, 0], "dot": out[:, 1], "grad_norm": out[:, 2]}

    def kept_gradients(
        self, model: Any, data: Sequence[Any], *, tokenizer: Any = None
    ) -> torch.Tensor:
        """Per-example response-loss gradients on the kept slices ``[n, n_values_]`` (float32;
        ``n_values_`` is 1 % of the rows' values: about 6,000 per example on chat-s), in the order of
        :attr:`direction_` — what a refined reference is re-estimated from."""
        data = self._check_scoring(model, data, "kept_gradients")
        index = self._sub_index
        return self._grads(
            model, data, tokenizer, list(self.score_params_), lambda g: g[:, index].float()
        )

    def score(self, model: Any, data: Sequence[Any], *, tokenizer: Any = None) -> np.ndarray:
        """FIHS of each example ``[n]`` (higher: training on it pushes towards compliance)."""
        return self.score_details(model, data, tokenizer=tokenizer)["fihs"]

    @property
    def n_values_(self) -> int:
        self._check_fitted("n_values_")
        return int(self.direction_.numel())

    def critical_parameters(self) -> dict[str, int]:
        """Kept slices per parameter (where the safety-critical rows are)."""
        self._check_fitted("critical_parameters")
        owners = self.slices_.owners()
        out: dict[str, int] = {}
        for j in self.selected_:
            out[owners[j]] = out.get(owners[j], 0) + 1
        return out


def _fingerprint(model: Any, names: Sequence[str]) -> str:
    hf = model.model if hasattr(model, "adapter") else model
    params = dict(hf.named_parameters())
    digest = hashlib.sha256()
    for name in names:
        tensor = params[name].detach().float().contiguous().cpu()
        digest.update(name.encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()
