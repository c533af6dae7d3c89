"""The abstract's four findings as tests that can fail, each with a stated margin.

Each function takes what the experiment measured in one (formulation, n) cell and returns a
:class:`Finding`: whether it holds, the numbers it was decided on and a sentence with them.

(i) **Optimisation beats fixed configurations.** Judged on the *cold* restarts only (random
    initial splits; a warm start from the best fixed topology would make "optimised >= best
    fixed" hold by construction). Per restart the relative gain ``v_r / F - 1`` over the best
    fixed configuration ``F``; the finding holds when the lower end of the bootstrap interval of
    the mean gain is above ``margin`` (default 2 %). The share of restarts whose gain is above
    the margin is reported beside it.
(ii) **Short paths, low clustering.** Against density-matched random graphs: weighted path
    length no longer than the nulls' and weighted clustering lower by more than
    ``clustering_margin`` (default 0.01).
(iii) **Researchers and learners.** The own-research shares split into two groups: Sarle's
    bimodality coefficient above 5/9 and group means at least 0.5 apart (``Roles.is_split``).
(iv) **Learners know more, inequality rises.** Learners' mean knowledge at least
    ``knowledge_ratio`` (default 1.1) times the researchers', and the Gini of knowledge over the
    optimisation rises by at least ``gini_rise`` (default 0.02).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from trustlab.core.errors import InputError
from trustlab.methods.research_net.analysis import NetworkStats, Roles
from trustlab.stats import bootstrap_ci

__all__ = [
    "Finding",
    "learners_know_more",
    "optimisation_beats_fixed",
    "researcher_learner_split",
    "short_paths_low_clustering",
]


@dataclass(frozen=True)
class Finding:
    """One finding in one cell: ``holds``, the ``numbers`` it was decided on, a sentence."""

    finding: str
    holds: bool
    measured: str
    numbers: dict[str, float] = field(default_factory=dict)


def optimisation_beats_fixed(
    cold_objectives: ArrayLike,
    best_fixed: float,
    *,
    margin: float = 0.02,
    confidence_level: float = 0.95,
    n_resamples: int = 2000,
    rng: np.random.Generator | int | None = None,
) -> Finding:
    """Finding (i) from the total knowledge of cold restarts and of the best fixed topology.

    Holds when the bootstrap interval's lower end of the restarts' mean relative gain
    ``mean_r(v_r / F - 1)`` is above ``margin``. With one restart the interval is the point.
    """
    values = np.asarray(cold_objectives, dtype=float)
    if values.ndim != 1 or values.size == 0 or not np.all(np.isfinite(values)):
        raise InputError(
            "The 'cold_objectives' parameter of optimisation_beats_fixed must be a non-empty "
            f"1-d array of finite values. Got shape {values.shape}."
        )
    if not np.isfinite(best_fixed) or best_fixed <= 0:
        raise InputError(
            f"The 'best_fixed' parameter of optimisation_beats_fixed must be > 0. Got {best_fixed}."
        )
    if not np.isfinite(margin) or margin < 0:
        raise InputError(
            f"The 'margin' parameter of optimisation_beats_fixed must be >= 0. Got {margin}."
        )
    gains = values / best_fixed - 1.0
    if gains.size > 1:
        ci = bootstrap_ci(gains, np.mean, n_resamples=n_resamples,
                          confidence_level=confidence_level, rng=rng, vectorized=True)
        low, high = ci.low, ci.high
    else:
        low = high = float(gains[0])
    mean = float(gains.mean())
    share = float(np.mean(gains > margin))
    pct = round(100 * confidence_level)
    return Finding(
        "i optimisation beats fixed configurations",
        bool(low > margin),
        f"{gains.size} cold restarts: mean gain over the best fixed topology {100 * mean:+.1f} % "
        f"({pct} % bootstrap interval {100 * low:+.1f} to {100 * high:+.1f} %), "
        f"{share:.0%} of restarts above the {100 * margin:g} % margin; best restart "
        f"x{values.max() / best_fixed:.3f}",
        {"gain_mean": mean, "gain_low": float(low), "gain_high": float(high),
         "share_above_margin": share, "best_ratio": float(values.max() / best_fixed)},
    )


def short_paths_low_clustering(
    observed: NetworkStats, null: NetworkStats, *, clustering_margin: float = 0.01
) -> Finding:
    """Finding (ii): weighted path length <= the nulls', weighted clustering lower by more than
    ``clustering_margin``."""
    shorter = observed.path_weighted <= null.path_weighted * (1 + 1e-9)
    lower = observed.clustering_weighted < null.clustering_weighted - clustering_margin
    return Finding(
        "ii short paths, low clustering vs null",
        bool(shorter and lower),
        f"weighted path {observed.path_weighted:.3f} vs null {null.path_weighted:.3f}; weighted "
        f"clustering {observed.clustering_weighted:.4f} vs null {null.clustering_weighted:.4f} "
        f"(margin {clustering_margin:g})",
        {"path": observed.path_weighted, "path_null": null.path_weighted,
         "clustering": observed.clustering_weighted, "clustering_null": null.clustering_weighted},
    )


def _mean(x: np.ndarray, idx: np.ndarray) -> float:
    return float(x[idx].mean()) if idx.size else float("nan")


def researcher_learner_split(roles: Roles, r: ArrayLike) -> Finding:
    """Finding (iii): two groups of own-research shares (``Roles.is_split``)."""
    v = np.asarray(r, dtype=float)
    return Finding(
        "iii researcher / learner split",
        roles.is_split,
        f"{roles.researchers.size} researchers (mean r {_mean(v, roles.researchers):.3f}), "
        f"{roles.learners.size} learners (mean r {_mean(v, roles.learners):.3f}); bimodality "
        f"coefficient {roles.bimodality:.3f} (> 0.556 bimodal), gap {roles.gap:.2f} (>= 0.5)",
        {"researchers": float(roles.researchers.size), "learners": float(roles.learners.size),
         "bimodality": roles.bimodality, "gap": roles.gap},
    )


def learners_know_more(
    knowledge: ArrayLike,
    roles: Roles,
    gini_curve: ArrayLike,
    *,
    knowledge_ratio: float = 1.1,
    gini_rise: float = 0.02,
) -> Finding:
    """Finding (iv): learners' mean knowledge >= ``knowledge_ratio`` x researchers', and the
    Gini of knowledge over the optimisation (first to last recorded step) rises by at least
    ``gini_rise``."""
    k = np.asarray(knowledge, dtype=float)
    g = np.asarray(gini_curve, dtype=float)
    if g.ndim != 1 or g.size < 2:
        raise InputError(
            "The 'gini_curve' parameter of learners_know_more must hold at least 2 values. "
            f"Got shape {g.shape}."
        )
    k_res, k_learn = _mean(k, roles.researchers), _mean(k, roles.learners)
    more = bool(k_learn >= knowledge_ratio * k_res)  # False when either group is empty (nan)
    rises = bool(g[-1] - g[0] >= gini_rise)
    return Finding(
        "iv learners know more, inequality rises",
        more and rises,
        f"K learners {k_learn:.3f} vs researchers {k_res:.3f} (needs x{knowledge_ratio:g}); "
        f"Gini over optimisation {g[0]:.3f} -> {g[-1]:.3f} (needs +{gini_rise:g})",
        {"k_learners": k_learn, "k_researchers": k_res, "gini_start": float(g[0]),
         "gini_end": float(g[-1])},
    )
