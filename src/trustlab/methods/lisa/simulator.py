"""Deployment simulator: a prequential stream with sparse, noisy user reports.

Every case of the stream is first decided, then (maybe) reported, so accuracy is always on
cases the guardrail had not been told about. A user reports a mistake with probability
``report_rate``. With probability ``flip_rate`` a report is *label-flipped*: it is about a
recent case the guardrail got right (drawn from the last ``noise_window`` correct ones), and
says the opposite of the truth, so noisy reports push towards errors and the share of wrong
labels among reports is ``flip_rate``. The random draws (which mistakes get reported, which
reports flip, which case a flipped report names) come from one seeded stream shared by every
method, so all methods get the same feedback process.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from trustlab.core.errors import InputError
from trustlab.core.validation import check_consistent_length, check_labels, check_scalar
from trustlab.methods.lisa.cases import BLOCK, Case
from trustlab.methods.lisa.guardrail import AdaptiveGuardrail

__all__ = ["StreamResult", "classification_metrics", "learning_curve", "run_stream"]


@dataclass(frozen=True)
class StreamResult:
    method: str
    predictions: np.ndarray
    labels: np.ndarray
    reports_before: np.ndarray  # reports folded in before each step
    n_flipped: int
    memory_size: int
    latencies_s: np.ndarray

    @property
    def n_reports(self) -> int:
        return int(self.reports_before[-1]) if len(self.reports_before) else 0


def classification_metrics(pred: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Accuracy, F1 (block is positive), false-allow (leak) and false-block rates.

    ``pred`` and ``truth`` hold labels 0 (allow) / 1 (block) for the same non-empty cases. F1
    is 1 when there is nothing to find and nothing was flagged; a rate over an empty class
    (no block among the truth, say) is 0."""
    where = "classification_metrics"
    pred = check_labels(pred, "pred", where, n_classes=2)
    truth = check_labels(truth, "truth", where, n_classes=2)
    check_consistent_length(where, pred=pred, truth=truth)
    tp = int(((pred == 1) & (truth == 1)).sum())
    fp = int(((pred == 1) & (truth == 0)).sum())
    fn = int(((pred == 0) & (truth == 1)).sum())
    pos, neg = int((truth == 1).sum()), int((truth == 0).sum())
    return {
        "accuracy": float((pred == truth).mean()),
        "f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0,
        "false_allow": fn / pos if pos else 0.0,
        "false_block": fp / neg if neg else 0.0,
    }


def run_stream(
    guardrail: AdaptiveGuardrail,
    cases: Sequence[Case],
    labels: np.ndarray,
    order: np.ndarray,
    *,
    report_rate: float,
    flip_rate: float,
    seed: int,
    noise_window: int = 50,
) -> StreamResult:
    """Run one guardrail over ``cases[order]`` with the shared report process of ``seed``."""
    where = "run_stream"
    for method in ("check", "report", "memory_size"):
        if not callable(getattr(guardrail, method, None)):
            raise InputError(f"The 'guardrail' of {where} must have check, report and "
                             f"memory_size (an AdaptiveGuardrail). Got {type(guardrail).__name__}.")
    if isinstance(cases, str) or not isinstance(cases, Sequence) or not cases \
            or not all(isinstance(c, Case) for c in cases):
        raise InputError(f"The 'cases' parameter of {where} must be a non-empty list of Cases.")
    labels = check_labels(labels, "labels", where, n_classes=2, n_samples=len(cases))
    order = check_labels(order, "order", where, n_classes=len(cases))
    report_rate = check_scalar(report_rate, "report_rate", where, lo=0.0, hi=1.0)
    flip_rate = check_scalar(flip_rate, "flip_rate", where, lo=0.0, hi=1.0, closed="left")
    seed = check_scalar(seed, "seed", where, kind=int, lo=0)
    noise_window = check_scalar(noise_window, "noise_window", where, kind=int, lo=1)
    rng = np.random.default_rng(seed)
    draws = rng.random((len(order), 3))
    preds = np.zeros(len(order), dtype=int)
    before = np.zeros(len(order), dtype=int)
    lat = np.zeros(len(order))
    recent_correct: list[int] = []
    n_reports = n_flipped = 0
    for t, i in enumerate(order):
        case = cases[i]
        start = time.perf_counter()
        decision = guardrail.check(case)
        lat[t] = time.perf_counter() - start
        preds[t] = BLOCK if decision.block else 0
        before[t] = n_reports
        truth = int(labels[i])
        if preds[t] == truth:
            recent_correct.append(int(i))
            if len(recent_correct) > noise_window:
                recent_correct.pop(0)
            continue
        u_report, u_flip, u_pick = draws[t]
        if u_report >= report_rate:
            continue
        if u_flip < flip_rate and recent_correct:
            j = recent_correct[int(u_pick * len(recent_correct))]
            guardrail.report(cases[j], 1 - int(labels[j]))
            n_flipped += 1
        else:
            guardrail.report(case, truth)
        n_reports += 1
    return StreamResult(
        guardrail.name,
        preds,
        np.asarray(labels)[order],
        before,
        n_flipped,
        guardrail.memory_size(),
        lat,
    )


def learning_curve(result: StreamResult, n_windows: int) -> list[dict[str, float]]:
    """Metrics per consecutive window of the stream, with the reports received so far."""
    if not isinstance(result, StreamResult):
        raise InputError("The 'result' parameter of learning_curve must be a StreamResult. "
                         f"Got {type(result).__name__}.")
    n_windows = check_scalar(n_windows, "n_windows", "learning_curve", kind=int, lo=1,
                             hi=max(1, len(result.labels)))
    rows = []
    for w, idx in enumerate(np.array_split(np.arange(len(result.labels)), n_windows)):
        if len(idx) == 0:
            continue
        m = classification_metrics(result.predictions[idx], result.labels[idx])
        rows.append({"window": w, "reports": int(result.reports_before[idx[-1]]), **m})
    return rows
