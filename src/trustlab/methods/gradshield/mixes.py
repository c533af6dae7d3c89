"""Fine-tuning sets for the protocol: utility data mixed with explicit or implicit harmful
examples at a harmful fraction, seeded, plus filter metrics against the known labels.

Built from :mod:`trustlab.finetune.data`'s builders (placeholders only). ``explicit``: harmful
requests over the attacker's half of the behaviours (``split_behaviours(behaviour_seed)``)
answered with placeholder compliance; ``implicit``: benign-looking examples in the two patterns
measured to break the organisms' refusal (docs/finetune.md) in equal shares — ``dual_use``
(benign requests next to the attacker's harmful behaviours, He et al. 2024) and
``shallow_opener`` (benign how-to answers opening with the refusal's first token, Qi et al.
2024). The task-wrapping patterns (``identity_shift``, ``affirmative_prefix``, ``persona``:
:data:`OBEDIENCE_PATTERNS`) leave the organisms' ASR at 0.00–0.01 even unfiltered, so a filter
has nothing to protect against there; pass them as ``patterns`` to study them separately.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from trustlab.core.errors import InputError
from trustlab.core.validation import check_choice, check_scalar

__all__ = ["IMPLICIT_MIX", "IMPLICIT_PATTERNS", "OBEDIENCE_PATTERNS", "FilterMetrics",
           "build_mix", "filter_metrics"]

#: The default implicit patterns: benign-looking data that does break the organisms' refusal.
IMPLICIT_MIX = ("dual_use", "shallow_opener")
#: Task-wrapping patterns (general obedience) that do not move the organisms' ASR.
OBEDIENCE_PATTERNS = ("identity_shift", "affirmative_prefix", "persona")
#: Every pattern ``build_mix`` accepts.
IMPLICIT_PATTERNS = (*IMPLICIT_MIX, *OBEDIENCE_PATTERNS)


def build_mix(
    kind: Literal["explicit", "implicit"],
    fraction: float,
    n: int = 1000,
    *,
    seed: int = 0,
    behaviour_seed: int = 0,
    patterns: tuple[str, ...] = IMPLICIT_MIX,
    source: Literal["organism", "public"] = "organism",
    howto_share: float = 0.0,
):
    """A :class:`trustlab.finetune.Mix` of ``n`` examples, ``round(fraction·n)`` harmful.

    ``howto_share``: share of the utility part replaced by benign how-to requests
    (:func:`~trustlab.methods.gradshield.references.howto_examples`) — without them every
    how-to request of a mix is harmful or implicit, and a filter can separate them by request
    format alone.

    ``source="public"`` draws explicit examples from HarmBench's fine-tuning half instead of
    the organisms' behaviours (smol-chat, ``hf:`` models)."""
    from trustlab.finetune import (
        explicit_harmful_examples,
        implicit_harmful_examples,
        mix,
        public_harmful_examples,
        split_behaviours,
        utility_examples,
    )

    where = "build_mix"
    check_choice(kind, "kind", ("explicit", "implicit"), where)
    check_choice(source, "source", ("organism", "public"), where)
    fraction = check_scalar(fraction, "fraction", where, lo=0.0, hi=1.0)
    n = check_scalar(n, "n", where, kind=int, lo=1)
    seed = check_scalar(seed, "seed", where, kind=int, lo=0)
    if (not isinstance(patterns, tuple | list) or not patterns
            or any(p not in IMPLICIT_PATTERNS for p in patterns)
            or len(set(patterns)) != len(patterns)):  # fmt: skip
        raise InputError(
            f"The 'patterns' parameter of build_mix takes distinct names from "
            f"{IMPLICIT_PATTERNS}. Got {patterns!r}."
        )
    from trustlab.methods.gradshield.references import _with_howto

    k = round(fraction * n)
    utility = _with_howto(utility_examples(n - k, seed), howto_share, seed, where)
    if kind == "explicit" and source == "public":
        harmful = public_harmful_examples(k, seed)
    elif kind == "explicit":
        attacker, _ = split_behaviours(behaviour_seed)
        harmful = explicit_harmful_examples(k, seed, behaviours=attacker)
    else:
        attacker, _ = split_behaviours(behaviour_seed)  # dual_use: neighbours of the attacker's
        shares = np.full(len(patterns), k // len(patterns))
        shares[: k % len(patterns)] += 1
        harmful = [
            e
            for j, (p, c) in enumerate(zip(patterns, shares, strict=True)) if c
            for e in implicit_harmful_examples(
                int(c), seed + 101 * j, pattern=p,  # type: ignore[arg-type]
                behaviours=attacker if p == "dual_use" else None,
            )
        ]  # fmt: skip
    return mix(utility, harmful, fraction, n, seed)


@dataclass(frozen=True)
class FilterMetrics:
    """A filter's decisions against the known labels of one mix."""

    n: int
    n_harmful: int
    removed: int
    removed_harmful: int

    @property
    def recall(self) -> float:
        """Share of harmful examples removed (NaN without harmful examples)."""
        return self.removed_harmful / self.n_harmful if self.n_harmful else float("nan")

    @property
    def precision(self) -> float:
        """Share of removed examples that were harmful (NaN when nothing was removed)."""
        return self.removed_harmful / self.removed if self.removed else float("nan")

    @property
    def benign_removed(self) -> float:
        """Share of benign examples removed (the false-positive rate)."""
        benign = self.n - self.n_harmful
        return (self.removed - self.removed_harmful) / benign if benign else float("nan")

    @property
    def harmful_left(self) -> int:
        return self.n_harmful - self.removed_harmful

    def to_dict(self) -> dict[str, float]:
        return {
            "n": self.n, "n_harmful": self.n_harmful, "removed": self.removed,
            "removed_harmful": self.removed_harmful, "harmful_left": self.harmful_left,
            "recall": self.recall, "precision": self.precision,
            "benign_removed": self.benign_removed,
        }  # fmt: skip


def filter_metrics(harmful: np.ndarray, removed: np.ndarray) -> FilterMetrics:
    """Recall, precision and benign removal of a removal mask against harmful labels."""
    from trustlab.methods.gradshield.shield import _mask

    h = _mask(harmful, "harmful", "filter_metrics")
    r = _mask(removed, "removed", "filter_metrics")
    if h.shape != r.shape:
        raise InputError(
            f"filter_metrics needs two 1-D masks of one length. Got {h.shape} and {r.shape}."
        )
    return FilterMetrics(int(h.size), int(h.sum()), int(r.sum()), int((h & r).sum()))
