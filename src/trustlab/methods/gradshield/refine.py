"""The self-trained reference: FIHS against a direction re-estimated from the data's own
top-scoring examples (``GradShield(refine=k)``; docs/methods/gradshield.md, *Fidelity*).

The probe reference ``r`` (compliance minus refusal on the defender's probes) is small and
covers only the defender's behaviours; the data being filtered may carry its own direction.
Each round takes the examples above the current conformal cut (on the trusted calibration
half, re-scored with the current direction) as the data's harmful component and sets the
direction to the mean of their unit gradients minus the trusted slice half's mean unit
gradient (optionally plus the unit probe reference). The calibration half never enters the
direction, so the final cut is still a conformal quantile of calibration scores — but the
direction depends on the data, so a benign example of the data is not exchangeable with the
calibration half any more (those that were above the first cut pulled the direction towards
themselves): the benign-removal level is measured, not guaranteed.

Session 47 (docs *Fidelity*, rule 5) added two things, both measured on development draws only:

* ``top_fraction``: the self-set always holds the top ``top_fraction`` of the data by the
  current score, not only the examples above the cut. With a thin harmful tail (1-2 % of the
  data) fewer than ``min_examples`` examples may clear the first cut — the round then stopped —
  or the few that do are mostly benign high scorers, whose mean direction misses the harmful
  ones; a fixed top share keeps the round running and lets a small cluster just under the cut
  into the set.
* :func:`two_sided_removal`: the same rule on both sides of the probe reference. On some
  draws of the reference sets FIHS reads benign-looking harmful data as strongly
  *refusal*-ward (the first-order proxy weighs how a response opens; which way it reads
  depends on the rows kept), so the data's lower tail gets its own conformal cut and its own
  self-trained round against the reversed reference.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.errors import InputError

__all__ = ["self_trained_scores", "two_sided_removal"]


def self_trained_scores(
    grads: Any,
    calibration: Any,
    benign: Any,
    direction: Any,
    *,
    rounds: int = 1,
    keep_reference: bool = False,
    alpha: float = 0.01,
    min_examples: int = 5,
    top_fraction: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, float]:
    """FIHS with a reference re-estimated from the data's own top-scoring examples.

    ``grads`` ``[n, k]``: the data's kept-slice gradients (:meth:`FIHS.kept_gradients`);
    ``calibration``/``benign``: those of the trusted calibration and slice halves;
    ``direction`` ``[k]``: the probe reference (``FIHS.direction_``). Each round takes the
    examples above the current conformal cut (``alpha`` on the calibration scores) as the
    data's harmful component and sets the direction to the mean of their unit gradients minus
    the slice half's mean unit gradient (``keep_reference``: plus the unit probe reference);
    a round with fewer than ``min_examples`` above the cut stops. ``top_fraction`` > 0: the
    round's set also holds the top ``ceil(top_fraction · n)`` examples by the current score
    (at least ``min_examples``), so it runs whatever the cut leaves. Returns the data's
    scores, the calibration scores and the cut, all for the last direction."""
    import torch

    from trustlab.methods.gradshield.thresholds import ConformalThreshold

    def unit(x: torch.Tensor) -> torch.Tensor:
        return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-30)

    from trustlab.core.validation import check_scalar
    from trustlab.methods.gradshield.slices import as_tensor

    where = "self_trained_scores"
    rounds = check_scalar(rounds, "rounds", where, kind=int, lo=0)
    min_examples = check_scalar(min_examples, "min_examples", where, kind=int, lo=1)
    top_fraction = check_scalar(top_fraction, "top_fraction", where, lo=0.0, hi=1.0)
    g, c, b = (unit(as_tensor(x, name, where, 2).double()) for x, name in
               ((grads, "grads"), (calibration, "calibration"), (benign, "benign")))  # fmt: skip
    r0 = unit(as_tensor(direction, "direction", where, 1).double())
    if not g.shape[1] == c.shape[1] == b.shape[1] == r0.shape[0]:
        raise InputError(
            f"{where} needs one value count for grads, calibration, benign and direction. Got "
            f"{g.shape[1]}, {c.shape[1]}, {b.shape[1]} and {r0.shape[0]}."
        )
    r = r0

    def scored(r: torch.Tensor) -> tuple[np.ndarray, np.ndarray, float]:
        s, cal = (g @ unit(r)).numpy(), (c @ unit(r)).numpy()
        return s, cal, float(ConformalThreshold(alpha).fit(s, cal).threshold_)

    s, cal, cut = scored(r)
    for _ in range(rounds):
        top = torch.from_numpy(s > cut)
        if top_fraction > 0:
            k = min(len(s), max(min_examples, int(np.ceil(top_fraction * len(s)))))
            top[torch.from_numpy(np.argsort(-s, kind="stable")[:k].copy())] = True
        if int(top.sum()) < min_examples:
            break
        r = unit(g[top].mean(0) - b.mean(0))
        if keep_reference:
            r = r0 + r
        s, cal, cut = scored(r)
    return s, cal, cut


def two_sided_removal(
    grads: Any,
    calibration: Any,
    benign: Any,
    direction: Any,
    *,
    rounds: int = 1,
    alpha: float = 0.01,
    top_fraction: float = 0.0,
    sides: str = "both",
    union: bool = True,
    lower_gate: float = 0.01,
) -> dict[str, Any]:
    """The self-trained decision on one or both sides of the probe reference.

    Upper side: :func:`self_trained_scores` against ``direction`` with ``top_fraction``;
    with ``union`` the plain conformal cut's removals are added. Lower side (``sides="both"``):
    the same against ``-direction`` (the refusal-ward tail), with the cut-based set only
    (``top_fraction`` 0), and its self-trained round runs only when the data's lower tail is
    heavier than the calibration half predicts: more examples below the plain lower cut than
    ``n / (n_calibration + 1)`` explains at one-sided binomial level ``lower_gate`` (on a
    benign set the refusal-ward tail is benign, and a round fitted to it inflates the benign
    removal: chat-xs, development). Returns ``removed`` ``[n]`` (bool), the upper side's refined
    ``scores``, ``calibration_scores`` and ``threshold`` (what the report draws), the plain
    scores and cut, and per side how many it removed."""
    from scipy.stats import binom

    from trustlab.core.validation import check_choice
    from trustlab.methods.gradshield.fihs import fihs_from_gradients
    from trustlab.methods.gradshield.slices import as_tensor
    from trustlab.methods.gradshield.thresholds import ConformalThreshold

    check_choice(sides, "sides", ("upper", "both"), "two_sided_removal")
    r = as_tensor(direction, "direction", "two_sided_removal", 1)
    plain = fihs_from_gradients(grads, r)
    plain_cal = fihs_from_gradients(calibration, r)
    out: dict[str, Any] = {"fihs_plain": plain}
    removed = np.zeros(plain.shape[0], dtype=bool)
    for side, sign, top in (("upper", 1.0, top_fraction), ("lower", -1.0, 0.0)):
        if side == "lower" and sides == "upper":
            break
        plain_cut = float(ConformalThreshold(alpha).fit(sign * plain, sign * plain_cal).threshold_)
        side_rounds = rounds
        if side == "lower":
            below = int((sign * plain > plain_cut).sum())
            p = float(binom.sf(below - 1, plain.shape[0], 1.0 / (plain_cal.shape[0] + 1)))
            out["lower_tail_p"] = p
            side_rounds = rounds if p < lower_gate else 0
        s, cal, cut = self_trained_scores(grads, calibration, benign, sign * r,
                                          rounds=side_rounds, alpha=alpha, top_fraction=top)  # fmt: skip
        mask = s > cut
        if union or not side_rounds:
            mask = mask | (sign * plain > plain_cut)
        removed |= mask
        out[f"removed_{side}"] = int(mask.sum())
        if side == "upper":
            out.update(scores=s, calibration_scores=cal, threshold=cut, plain_threshold=plain_cut)
        else:
            out["lower_plain_threshold"] = -plain_cut
    out["removed"] = removed
    return out
