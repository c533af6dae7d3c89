"""SYNTHETIC leaderboards from a low-rank item-response model (for scale studies, not real data).

Model ``i`` has a latent ability vector ``θ_i ∈ R^rank`` (standard normal), dataset ``d`` a
discrimination vector ``a_d`` and a difficulty ``b_d``; the chance of solving an item is
``p_id = sigmoid(a_d·θ_i − b_d)`` and the reported score is the accuracy (in %) on ``n_items``
items, ``Binomial(n_items, p_id) / n_items · 100`` — finite test sets, hence realistic ties.
"""

from __future__ import annotations

import numpy as np

from trustlab.core.validation import check_scalar
from trustlab.datasets.leaderboards import Leaderboard
from trustlab.stats import check_random_state

__all__ = ["synthetic_leaderboard"]


def synthetic_leaderboard(
    n_models: int = 4507,
    n_datasets: int = 24,
    *,
    rank: int = 2,
    n_items: int = 250,
    rng: np.random.Generator | None = None,
) -> Leaderboard:
    """A clearly labelled synthetic ``n_models`` × ``n_datasets`` leaderboard (seeded by ``rng``).

    ``rank``: number of latent ability factors (1 = a single "g" factor). ``n_items``: items per
    dataset (BBH tasks have about 250).
    """
    where = "synthetic_leaderboard"
    n_models = check_scalar(n_models, "n_models", where, kind=int, lo=2)
    n_datasets = check_scalar(n_datasets, "n_datasets", where, kind=int, lo=1)
    rank = check_scalar(rank, "rank", where, kind=int, lo=1)
    n_items = check_scalar(n_items, "n_items", where, kind=int, lo=1)
    rng = check_random_state(0 if rng is None else rng, "rng", where)
    theta = rng.standard_normal((n_models, rank))
    first = np.abs(rng.normal(1.2, 0.3, size=(n_datasets, 1)))  # every task loads on general ability
    rest = rng.normal(0.0, 0.5, size=(n_datasets, rank - 1))
    a = np.concatenate([first, rest], axis=1)
    b = rng.normal(0.0, 1.0, size=n_datasets)
    p = 1.0 / (1.0 + np.exp(-(theta @ a.T - b[None, :])))
    scores = rng.binomial(n_items, p) / n_items * 100.0
    models = tuple(f"synthetic-model-{i:05d}" for i in range(n_models))
    datasets = tuple(f"synthetic-task-{d:02d}" for d in range(n_datasets))
    return Leaderboard(
        scores, models, datasets, name=f"SYNTHETIC irt rank{rank} {n_models}x{n_datasets}"
    )
