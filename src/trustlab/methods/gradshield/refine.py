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
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.errors import InputError

__all__ = ["self_trained_scores"]


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
) -> tuple[np.ndarray, np.ndarray, float]:
    """FIHS with a reference re-estimated from the data's own top-scoring examples.

    ``grads`` ``[n, k]``: the data's kept-slice gradients (:meth:`FIHS.kept_gradients`);
    ``calibration``/``benign``: those of the trusted calibration and slice halves;
    ``direction`` ``[k]``: the probe reference (``FIHS.direction_``). Each round takes the
    examples above the current conformal cut (``alpha`` on the calibration scores) as the
    data's harmful component and sets the direction to the mean of their unit gradients minus
    the slice half's mean unit gradient (``keep_reference``: plus the unit probe reference);
    a round with fewer than ``min_examples`` above the cut stops. Returns the data's scores,
    the calibration scores and the cut, all for the last direction."""
    import torch

    from trustlab.methods.gradshield.thresholds import ConformalThreshold

    def unit(x: torch.Tensor) -> torch.Tensor:
        return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-30)

    from trustlab.core.validation import check_scalar
    from trustlab.methods.gradshield.slices import as_tensor

    where = "self_trained_scores"
    rounds = check_scalar(rounds, "rounds", where, kind=int, lo=0)
    min_examples = check_scalar(min_examples, "min_examples", where, kind=int, lo=1)
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
        if int(top.sum()) < min_examples:
            break
        r = unit(g[top].mean(0) - b.mean(0))
        if keep_reference:
            r = r0 + r
        s, cal, cut = scored(r)
    return s, cal, cut
