"""GradShield: score every fine-tuning example by its FIHS and remove those above an adaptive
threshold, before fine-tuning.

    from trustlab.methods.gradshield import GradShield, organism_references
    shield = GradShield().fit(model, organism_references())
    result = shield.filter(model, data)          # FilterResult: scores, removed, threshold
    clean = result.kept(data)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.validation import check_choice, check_scalar
from trustlab.methods.gradshield.fihs import FIHS, fihs_from_gradients
from trustlab.methods.gradshield.references import ReferenceSets
from trustlab.methods.gradshield.thresholds import make_threshold

__all__ = ["FilterResult", "GradShield"]


@dataclass(frozen=True)
class FilterResult:
    """What a filter decided: one score per example (NaN where it has none; ±inf is refused),
    which examples it removed, the threshold it used and the seconds it took."""

    name: str
    scores: np.ndarray
    removed: np.ndarray
    threshold: float = float("nan")
    seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from trustlab.core.validation import as_float_array

        where = "FilterResult"
        scores = as_float_array(self.scores, "scores", where, ndim=1, allow_nonfinite=True)
        removed = _mask(self.removed, "removed", where)
        if scores.shape != removed.shape:
            raise InputError(
                f"A FilterResult needs one score per removal flag. Got {scores.size} scores and "
                f"{removed.size} flags."
            )
        if np.isinf(scores).any():
            raise InputError(
                "The 'scores' parameter of FilterResult must be finite or NaN (no score). Got "
                f"{int(np.isinf(scores).sum())} infinite values."
            )
        object.__setattr__(self, "scores", scores)
        object.__setattr__(self, "removed", removed)

    @property
    def n_removed(self) -> int:
        return int(self.removed.sum())

    def kept(self, data: Sequence[Any]) -> list[Any]:
        """The examples of ``data`` the filter keeps, in order."""
        if len(data) != self.removed.size:
            raise InputError(
                f"The filter decided on {self.removed.size} examples; 'data' has {len(data)}."
            )
        return [item for item, out in zip(data, self.removed, strict=True) if not out]


def _clone(fihs: FIHS) -> FIHS:
    """An unfitted FIHS with the same settings."""
    return FIHS(
        params=fihs.params, slice_fraction=fihs.slice_fraction, aggregate=fihs.aggregate,
        use_refusal=fihs.use_refusal, slice_rule=fihs.slice_rule, batch_size=fihs.batch_size, method=fihs.method,
        threads=fihs.threads, max_length=fihs.max_length,
    )  # fmt: skip


def _mask(value: Any, name: str, where: str) -> np.ndarray:
    """A 1-D boolean mask (0/1 numbers accepted)."""
    from trustlab.core.validation import as_float_array

    arr = as_float_array(value, name, where, ndim=1, allow_bool=True, allow_empty=True)
    if not np.isin(arr, (0.0, 1.0)).all():
        raise InputError(f"The '{name}' parameter of {where} must hold booleans (0/1 only).")
    return arr.astype(bool)


class GradShield:
    """FIHS scoring plus an adaptive threshold.

    ``fihs``: a configured :class:`FIHS` (default settings when None); ``threshold``: a rule
    name (``conformal``, ``mixture``, ``otsu``, ``search``, ``fixed``) with
    ``threshold_options`` (e.g. ``{"alpha": 0.01}``). Rules that need calibration scores get
    the FIHS of the trusted benign calibration half of the reference sets.

    ``depth`` (0: off): also score against the *deep* reference — compliance after the first
    ``1..depth`` tokens of a refusal (:func:`~trustlab.methods.gradshield.references.deep_probes`)
    — with a second FIHS of the same settings, and remove by the larger of the two scores,
    each standardised (median and MAD) on the trusted benign half that chose the slices, so
    the calibration half still calibrates the threshold. Scoring then costs two per-example
    gradients per example. Learned state: ``fihs_`` (plain), ``deep_`` (None when
    ``depth`` = 0), ``standardise_`` ((median, scale) per component).

    ``refine``: rounds of the self-trained reference
    (:func:`~trustlab.methods.gradshield.refine.self_trained_scores`) — the data's own
    examples above the conformal cut re-estimate the direction, per filtered set. ``None``
    (default) means 1 where it applies — the ``conformal`` rule, ``depth`` = 0 and
    ``FIHS(aggregate="concat")`` (the default settings) — and 0 otherwise; 0 is the plain
    score. With ``refine`` > 0, :meth:`filter` differentiates each example once and keeps its
    kept-slice gradient (:meth:`decide_gradients` takes precomputed ones) and :meth:`decide`
    is refused. ``refine_mode``: ``union`` (default) removes what the plain cut *or* the
    refined cut removes — the refined direction alone lost explicit examples on development
    mixes; ``replace`` removes by the refined cut only. ``refine_top`` (opt-in, session 47;
    default 0): with e.g. 0.03 the self-trained set always holds the data's top 3 % by FIHS,
    so a thin harmful tail still gets a round; ``refine_sides`` (opt-in ``both``, session 47;
    default ``upper``): the refusal-ward tail (the reversed reference) gets the same cut and
    round — on some reference draws FIHS reads benign-looking harmful data as refusal-ward
    (docs *Fidelity*). Both stay opt-in: their pre-registered held-out run (rule 5) showed no
    gain and a higher benign removal. Learned state: ``refine_`` (the
    resolved number of rounds), and with ``refine_`` > 0 also ``calibration_grads_`` and
    ``slice_grads_``.
    """

    def __init__(
        self,
        fihs: FIHS | None = None,
        *,
        threshold: str = "conformal",
        threshold_options: dict[str, Any] | None = None,
        depth: int = 0,
        refine: int | None = None,
        refine_mode: str = "union",
        refine_top: float = 0.0,
        refine_sides: str = "upper",
    ) -> None:
        self.fihs = fihs
        self.threshold = threshold
        self.threshold_options = threshold_options
        self.depth = depth
        self.refine = refine
        self.refine_mode = refine_mode
        self.refine_top = refine_top
        self.refine_sides = refine_sides

    def fit(self, model: Any, references: ReferenceSets, *, tokenizer: Any = None) -> GradShield:
        """Fit FIHS on the probes and the benign slice half; score the calibration half."""
        if not isinstance(references, ReferenceSets):
            raise InputError(
                "The 'references' parameter of GradShield.fit must be a ReferenceSets "
                f"(organism_references(), public_references()). Got {type(references).__name__}."
            )
        make_threshold(self.threshold, **(self.threshold_options or {}))  # checks the name early
        depth = check_scalar(self.depth, "depth", "GradShield", kind=int, lo=0)
        check_choice(self.refine_mode, "refine_mode", ("union", "replace"), "GradShield")
        check_choice(self.refine_sides, "refine_sides", ("upper", "both"), "GradShield")
        check_scalar(self.refine_top, "refine_top", "GradShield", lo=0.0, hi=1.0)
        fihs = self.fihs if self.fihs is not None else FIHS()
        if self.refine is None:  # the default: refine where it applies
            refine = int(self.threshold == "conformal" and not depth and fihs.aggregate == "concat")
        else:
            refine = check_scalar(self.refine, "refine", "GradShield", kind=int, lo=0)
        if refine and (depth or self.threshold != "conformal"):
            raise InputError(
                "GradShield(refine=...) works on the plain score with the 'conformal' rule: "
                f"got depth={depth}, threshold={self.threshold!r} (refine=0 turns it off)."
            )
        start = time.perf_counter()
        if refine and fihs.aggregate != "concat":
            raise InputError("GradShield(refine=...) needs FIHS(aggregate='concat').")
        benign = list(references.benign_slices)
        fihs.fit(
            model, list(references.harmful), list(references.refusal), benign,
            tokenizer=tokenizer,
        )  # fmt: skip
        self.fihs_ = fihs
        self.refine_ = refine
        self.deep_: FIHS | None = None
        self.standardise_: list[tuple[float, float]] = []
        if depth:
            from trustlab.methods.gradshield.references import deep_probes

            tok = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
            deep = deep_probes(references.harmful, references.refusal, depth, tokenizer=tok)
            self.deep_ = _clone(fihs).fit(
                model, list(deep), list(references.refusal), benign, tokenizer=tokenizer
            )
            for component in (self.fihs_, self.deep_):
                ref = component.score(model, benign, tokenizer=tokenizer)
                med = float(np.median(ref))
                scale = 1.4826 * float(np.median(np.abs(ref - med)))
                self.standardise_.append((med, scale if scale > 0 else float(np.std(ref)) or 1.0))
        if refine:
            self.calibration_grads_ = fihs.kept_gradients(
                model, list(references.benign_calibration), tokenizer=tokenizer
            )
            self.slice_grads_ = fihs.kept_gradients(model, benign, tokenizer=tokenizer)
            self.calibration_scores_ = fihs_from_gradients(self.calibration_grads_, fihs.direction_)
        else:
            self.calibration_scores_ = self._scores(
                model, list(references.benign_calibration), tokenizer
            )["fihs"]
        self.fit_seconds_ = time.perf_counter() - start
        return self

    def _scores(self, model: Any, data: Sequence[Any], tokenizer: Any) -> dict[str, Any]:
        """FIHS details of ``data``; with ``depth``, ``fihs`` is the larger standardised
        component and ``fihs_plain``/``fihs_deep`` the raw cosines."""
        details = self.fihs_.score_details(model, data, tokenizer=tokenizer)
        if self.deep_ is None:
            return details
        deep = self.deep_.score_details(model, data, tokenizer=tokenizer)["fihs"]
        (m0, s0), (m1, s1) = self.standardise_
        combined = np.maximum((details["fihs"] - m0) / s0, (deep - m1) / s1)
        return {**details, "fihs": combined, "fihs_plain": details["fihs"], "fihs_deep": deep}

    def score(self, model: Any, data: Sequence[Any], *, tokenizer: Any = None) -> np.ndarray:
        """The score the threshold reads, per example: FIHS (or, with ``depth``, the larger
        standardised component)."""
        if not hasattr(self, "fihs_"):
            raise NotFittedError("This GradShield is not fitted yet; call 'fit' before 'score'.")
        return np.asarray(self._scores(model, data, tokenizer)["fihs"], dtype=np.float64)

    def filter(self, model: Any, data: Sequence[Any], *, tokenizer: Any = None) -> FilterResult:
        """Score ``data`` and decide which examples to remove."""
        if not hasattr(self, "fihs_"):
            raise NotFittedError("This GradShield is not fitted yet; call 'fit' before 'filter'.")
        start = time.perf_counter()
        if self.refine_:
            grads = self.fihs_.kept_gradients(model, data, tokenizer=tokenizer)
            return self.decide_gradients(grads, seconds=time.perf_counter() - start)
        details = self._scores(model, data, tokenizer)
        scored = time.perf_counter() - start
        return self.decide(details["fihs"], seconds=scored, details=details)

    def decide_gradients(self, grads: Any, *, seconds: float = 0.0) -> FilterResult:
        """``refine`` > 0: the self-trained decision on precomputed kept-slice gradients of
        one filtered set (``fihs_.kept_gradients``). ``info['fihs_plain']`` keeps the plain
        FIHS; ``scores`` are the refined ones the cut reads, ``info['calibration_scores']`` the
        trusted calibration half's scores against the same refined direction."""
        from trustlab.methods.gradshield.refine import two_sided_removal

        if not hasattr(self, "slice_grads_"):
            raise NotFittedError(
                "decide_gradients needs a GradShield fitted with refine > 0; call 'fit' first."
            )
        alpha = (self.threshold_options or {}).get("alpha", 0.01)
        out = two_sided_removal(
            grads, self.calibration_grads_, self.slice_grads_, self.fihs_.direction_,
            rounds=self.refine_, alpha=alpha, top_fraction=self.refine_top,
            sides=self.refine_sides, union=self.refine_mode == "union",
        )  # fmt: skip
        scores, cut, removed = out["scores"], out["threshold"], out["removed"]
        info: dict[str, Any] = {
            "rule": f"conformal, refine={self.refine_} ({self.refine_mode}, "
                    f"sides={self.refine_sides}, top={self.refine_top:g})",
            "fihs_plain": out["fihs_plain"], "calibration_scores": out["calibration_scores"],
            **{k: out[k] for k in ("removed_upper", "removed_lower", "lower_plain_threshold")
               if k in out},
        }  # fmt: skip
        if self.refine_mode == "union":
            info["plain_threshold"] = float(out["plain_threshold"])
        return FilterResult("gradshield", scores, removed, float(cut), seconds, info)

    def decide(
        self, scores: np.ndarray, *, seconds: float = 0.0, details: dict[str, Any] | None = None
    ) -> FilterResult:
        """The threshold rule on precomputed FIHS ``scores`` (e.g. to compare rules)."""
        if not hasattr(self, "calibration_scores_"):
            raise NotFittedError("This GradShield is not fitted yet; call 'fit' before 'decide'.")
        if getattr(self, "refine_", 0):
            raise InputError(
                "GradShield(refine=...) decides per filtered set from kept-slice gradients: use "
                "'filter' or 'decide_gradients', not 'decide' (GradShield(refine=0) for the plain "
                "score)."
            )
        rule = make_threshold(self.threshold, **(self.threshold_options or {}))
        scores = np.asarray(scores, dtype=np.float64)
        removed = rule.fit_remove(scores, self.calibration_scores_)
        info = {"rule": self.threshold, **({} if details is None else details)}
        return FilterResult(
            "gradshield",
            scores,
            removed,
            float(rule.threshold_),
            seconds,
            info,  # type: ignore[attr-defined]
        )
