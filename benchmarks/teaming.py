"""Fit/predict time of each teaming method on 100k points, relative to the model alone.

The baseline is what the model alone costs: temperature scaling fit on the fit split and its
predict (``softmax(log p / T)``) on 100k points, measured in the same process. Every method
is fit on ``n_fit`` labelled points and predicts on 100k points; the ratios are
``method time / baseline time`` for fit and for predict.

    python benchmarks/teaming.py [--quick]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from trustlab.methods.teaming import (
    ConfidenceDelegator,
    ConfusionMatrixCombiner,
    L2DSurrogateDelegator,
    OneVsAllDelegator,
    ProductOfExpertsCombiner,
    TemperatureScaling,
    WeightedAverageCombiner,
    delegation_features,
    make_teaming_data,
)


def _best(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller fit split, fewer methods")
    args = parser.parse_args()
    n_fit = 2000 if args.quick else 8000
    n_pred = 100_000
    repeats = 1 if args.quick else 3
    data = make_teaming_data(n_fit + n_pred, rng=0)
    fit, ev = data.subset(np.arange(n_fit)), data.subset(np.arange(n_fit, data.n))
    f_fit = delegation_features(fit.features, fit.model_probs)
    f_ev = delegation_features(ev.features, ev.model_probs)

    ts = TemperatureScaling()
    base_fit = _best(lambda: ts.fit(fit.model_probs, fit.labels), repeats)
    base_pred = _best(lambda: ts.transform(ev.model_probs), repeats)
    print(f"baseline (model alone, temperature scaling): fit {base_fit * 1e3:.1f} ms on {n_fit}, "
          f"predict {base_pred * 1e3:.1f} ms on {n_pred}")
    print(f"{'method':34s} {'fit x':>9s} {'predict x':>10s} {'fit s':>8s} {'predict s':>10s}")

    combiners = {
        "confusion_matrix": (ConfusionMatrixCombiner(),
                             (fit.model_probs, fit.human_labels, fit.labels),
                             (ev.model_probs, ev.human_labels)),
        "weighted_average": (WeightedAverageCombiner(),
                             (fit.model_probs, fit.human_probs, fit.labels),
                             (ev.model_probs, ev.human_probs)),
        "product_of_experts": (ProductOfExpertsCombiner(),
                               (fit.model_probs, fit.human_probs, fit.labels),
                               (ev.model_probs, ev.human_probs)),
    }
    for name, (est, fit_args, pred_args) in combiners.items():
        t_fit = _best(lambda est=est, a=fit_args: est.fit(*a), repeats)
        t_pred = _best(lambda est=est, a=pred_args: est.predict_proba(*a), repeats)
        print(f"{name:34s} {t_fit / base_fit:9.1f} {t_pred / base_pred:10.1f} "
              f"{t_fit:8.3f} {t_pred:10.3f}")

    capacities = ("logistic", "boosting") if args.quick else ("logistic", "boosting", "mlp")
    with threadpool_limits(limits=1):
        for cls in (ConfidenceDelegator, L2DSurrogateDelegator, OneVsAllDelegator):
            for cap in capacities:
                est = cls(cap, random_state=0)
                t_fit = _best(
                    lambda est=est: est.fit(f_fit, fit.model_probs, fit.human_labels, fit.labels), 1
                )
                t_pred = _best(
                    lambda est=est: est.predict_proba(f_ev, ev.model_probs, ev.human_probs), repeats
                )
                print(f"{cls.__name__ + ' [' + cap + ']':34s} {t_fit / base_fit:9.1f} "
                      f"{t_pred / base_pred:10.1f} {t_fit:8.3f} {t_pred:10.3f}")


if __name__ == "__main__":
    main()
