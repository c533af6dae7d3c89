"""The defender's reference sets: harmful-compliance probes, their refusals, a trusted benign
sample.

GradShield needs three small sets the defender owns (none of them is the data being filtered):

* ``harmful``: harmful requests answered with (placeholder) compliance — the probes of the
  proxy harmfulness score;
* ``refusal``: the same requests answered with a refusal;
* ``benign``: a trusted benign sample of the kind of data being fine-tuned on. Its first half
  chooses the safety-critical slices; its second half calibrates the adaptive threshold (never
  the same examples for both).

For the organisms the probes come from the **defender's half** of the behaviours
(:func:`trustlab.finetune.split_behaviours` — the other half is the attacker's), so the filter
must recognise behaviours it has never seen. For ``smol-chat``/``hf:`` models they come from
the evaluation half of HarmBench's bundled behaviours. No builder writes harmful content: the
compliance is the organisms' placeholder text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar

__all__ = ["ReferenceSets", "organism_references", "public_references"]


@dataclass(frozen=True)
class ReferenceSets:
    """``harmful`` / ``refusal`` probes and the trusted ``benign`` sample (organism Examples)."""

    harmful: tuple
    refusal: tuple
    benign: tuple

    def __post_init__(self) -> None:
        from trustlab.methods.gradshield.baselines import _check_data

        for name in ("harmful", "refusal", "benign"):
            items = _check_data(getattr(self, name), name, "ReferenceSets")
            object.__setattr__(self, name, tuple(items))
        if len(self.harmful) < 4 or len(self.refusal) < 2 or len(self.benign) < 4:
            raise InputError(
                "ReferenceSets needs >= 4 harmful probes, >= 2 refusals and >= 4 benign examples. "
                f"Got {len(self.harmful)}, {len(self.refusal)} and {len(self.benign)}."
            )

    @property
    def benign_slices(self) -> tuple:
        """The benign half that chooses slices."""
        return self.benign[: len(self.benign) // 2]

    @property
    def benign_calibration(self) -> tuple:
        """The benign half that calibrates thresholds."""
        return self.benign[len(self.benign) // 2 :]


def _refusals_for(harmful: list, seed: int) -> tuple:
    from trustlab.organisms.corpora import REFUSALS, Example

    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5EF]))
    return tuple(
        Example(
            e.prompt,
            REFUSALS[int(rng.integers(len(REFUSALS)))],
            "harmful",
            e.task,
            e.template,
            "train",
            "refuse",
            system=e.system,
        )
        for e in harmful
    )


def organism_references(
    n_harmful: int = 32,
    n_benign: int = 256,
    *,
    seed: int = 0,
    behaviour_seed: int = 0,
    benign_tasks: tuple[str, ...] | None = None,
) -> ReferenceSets:
    """Reference sets for the organisms: probes over the defender's half of the behaviours
    (``split_behaviours(behaviour_seed)``'s unseen half), refusals from the corpus, and
    ``n_benign`` utility examples (their own seed stream, never the fine-tuning data's)."""
    from trustlab.finetune import (
        UTILITY_TASKS,
        explicit_harmful_examples,
        split_behaviours,
        utility_examples,
    )

    n_harmful = check_scalar(n_harmful, "n_harmful", "organism_references", kind=int, lo=4)
    n_benign = check_scalar(n_benign, "n_benign", "organism_references", kind=int, lo=4)
    seed = check_scalar(seed, "seed", "organism_references", kind=int, lo=0)
    _, defender = split_behaviours(
        check_scalar(behaviour_seed, "behaviour_seed", "organism_references", kind=int, lo=0)
    )
    harmful = explicit_harmful_examples(n_harmful, 10_000 + seed, behaviours=defender)
    benign = utility_examples(n_benign, 20_000 + seed, tasks=benign_tasks or UTILITY_TASKS)
    return ReferenceSets(tuple(harmful), _refusals_for(harmful, seed), tuple(benign))


def public_references(
    n_harmful: int = 32,
    n_benign: int = 256,
    *,
    seed: int = 0,
    source: Literal["harmbench"] = "harmbench",
) -> ReferenceSets:
    """Reference sets for ``smol-chat``/``hf:`` models: probes over the evaluation half of
    HarmBench's bundled behaviours answered with the placeholder compliance (the fine-tuning
    attack uses the other half), corpus refusals, and utility examples as the benign sample."""
    from trustlab.finetune import public_harmful_examples, utility_examples
    from trustlab.finetune.data import PUBLIC_PLACEHOLDER
    from trustlab.organisms.corpora import Example

    n_harmful = check_scalar(n_harmful, "n_harmful", "public_references", kind=int, lo=4)
    n_benign = check_scalar(n_benign, "n_benign", "public_references", kind=int, lo=4)
    seed = check_scalar(seed, "seed", "public_references", kind=int, lo=0)
    prompts = public_harmful_examples(n_harmful, 10_000 + seed, source=source, split="eval")
    harmful = [
        Example(e.prompt, PUBLIC_PLACEHOLDER, "harmful", e.task, e.template, "train", "comply")
        for e in prompts
    ]
    benign = utility_examples(n_benign, 20_000 + seed)
    return ReferenceSets(tuple(harmful), _refusals_for(harmful, seed), tuple(benign))
