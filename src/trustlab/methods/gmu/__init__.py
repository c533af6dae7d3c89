"""Gradient-Mine Units (abstract 16, ``gmu``): released weights that keep inference exact and
make unauthorised fine-tuning blow up.

Data-free planting of locked, extreme-scale hidden units into feed-forward layers
(:class:`GMUPlanter`), the release check (:func:`release_equality`), the fine-tuning attack on
protected model, unprotected twin and scratch model (:func:`attack`, :func:`compare`), and the
counter-attacks an attacker would try (:func:`suspect_units`, :func:`prune_units`,
:func:`reinit_units`, :func:`counter_attack`). See ``docs/methods/gmu.md``.
"""

from trustlab.methods.gmu.counter import prune_units, reinit_units, suspect_units, unit_norms
from trustlab.methods.gmu.evaluation import response_scores
from trustlab.methods.gmu.planting import (
    LOCKS,
    FFNSite,
    GMUPlanter,
    find_ffn_layers,
    release_equality,
)
from trustlab.methods.gmu.study import (
    COUNTER_ATTACKS,
    AttackOutcome,
    ImageTask,
    LMTask,
    attack,
    compare,
    counter_attack,
    fresh_like,
)

__all__ = [
    "COUNTER_ATTACKS",
    "LOCKS",
    "AttackOutcome",
    "FFNSite",
    "GMUPlanter",
    "ImageTask",
    "LMTask",
    "attack",
    "compare",
    "counter_attack",
    "find_ffn_layers",
    "fresh_like",
    "prune_units",
    "reinit_units",
    "release_equality",
    "response_scores",
    "suspect_units",
    "unit_norms",
]
