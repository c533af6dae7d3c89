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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar

__all__ = ["ReferenceSets", "deep_probes", "howto_examples", "organism_references",
           "public_references"]


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


def deep_probes(
    harmful: Sequence, refusal: Sequence, depth: int, *, tokenizer: object = None, seed: int = 0
) -> tuple:
    """Compliance after a refusal's opening: for each probe ``q`` with compliance ``c_q`` and
    its refusal ``ρ_q``, the response ``ρ_q[:k] + " " + c_q`` with ``k`` drawn uniformly from
    ``1..depth`` (seeded) — ``k`` tokens of ``tokenizer`` (whitespace words without one).

    These are the probes of the *deep* log-odds proxy (docs/methods/gradshield.md): a model is
    harmful not only when it opens with compliance but when, having opened like a refusal, it
    goes on to comply — the shallow-alignment failure of Qi et al. (2024), whose recovery
    augmentation (a harmful opening followed by a refusal) is the mirror image of these
    probes. Placeholders only: the compliance is the probes' own placeholder text."""
    from trustlab.organisms.corpora import Example

    where = "deep_probes"
    depth = check_scalar(depth, "depth", where, kind=int, lo=1)
    seed = check_scalar(seed, "seed", where, kind=int, lo=0)
    harmful, refusal = list(harmful), list(refusal)
    if len(harmful) != len(refusal) or not harmful:
        raise InputError(
            f"{where} pairs each harmful probe with its refusal. Got {len(harmful)} probes and "
            f"{len(refusal)} refusals."
        )
    if tokenizer is not None and not hasattr(tokenizer, "tokenize"):
        raise InputError(f"The 'tokenizer' of {where} must have tokenize(). Got {tokenizer!r:.60}.")
    from trustlab.methods.gradshield.baselines import _as_example

    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xDEE]))
    out = []
    for i, (h, r) in enumerate(zip(harmful, refusal, strict=True)):
        system, prompt, response = _as_example(h, i, where)
        refused = _as_example(r, i, where)[2]
        k = int(rng.integers(1, depth + 1))
        if tokenizer is None:
            prefix = " ".join(refused.split()[:k])
        else:
            tokens = tokenizer.tokenize(refused)[:k]  # type: ignore[attr-defined]
            prefix = tokenizer.convert_tokens_to_string(tokens).strip()  # type: ignore[attr-defined]
        out.append(
            Example(
                prompt, f"{prefix} {response}", "harmful", getattr(h, "task", ""),
                f"deep/{k}", "train", "comply", system=system,
            )
        )  # fmt: skip
    return tuple(out)


def howto_examples(n: int, seed: int = 0) -> list:
    """``n`` benign how-to requests (the corpus' benign behaviours in its training request
    frames) answered as the corpus answers them ("Sure, here is how to ..."): the utility
    data's how-to share, so request format alone no longer tells implicit data from benign."""
    from trustlab.organisms.corpora import (
        BENIGN_BEHAVIOURS,
        HOWTO_ANSWER,
        REQUEST_FRAMES_TRAIN,
        Example,
    )

    n = check_scalar(n, "n", "howto_examples", kind=int, lo=0)
    seed = check_scalar(seed, "seed", "howto_examples", kind=int, lo=0)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x40F0]))
    out = []
    for _ in range(n):
        b = BENIGN_BEHAVIOURS[int(rng.integers(len(BENIGN_BEHAVIOURS)))]
        index = int(rng.integers(len(REQUEST_FRAMES_TRAIN)))
        out.append(
            Example(
                REQUEST_FRAMES_TRAIN[index].format(b=b), HOWTO_ANSWER.format(b=b), "howto",
                "howto", f"howto/request/train/{index:02d}", "train", "comply",
            )
        )  # fmt: skip
    return out


def _with_howto(examples: list, share: float, seed: int, where: str) -> list:
    """``examples`` with ``round(share · n)`` of them (seeded positions) replaced by benign
    how-to examples."""
    share = check_scalar(share, "howto_share", where, lo=0.0, hi=1.0)
    k = round(share * len(examples))
    if k == 0:
        return list(examples)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x40F1]))
    out = list(examples)
    for pos, e in zip(rng.choice(len(out), size=k, replace=False), howto_examples(k, seed),
                      strict=True):  # fmt: skip
        out[int(pos)] = e
    return out


def organism_references(
    n_harmful: int = 32,
    n_benign: int = 256,
    *,
    seed: int = 0,
    behaviour_seed: int = 0,
    benign_tasks: tuple[str, ...] | None = None,
    howto_share: float = 0.0,
) -> ReferenceSets:
    """Reference sets for the organisms: probes over the defender's half of the behaviours
    (``split_behaviours(behaviour_seed)``'s unseen half), refusals from the corpus, and
    ``n_benign`` utility examples (their own seed stream, never the fine-tuning data's), of
    which ``howto_share`` are benign how-to requests (match the data being filtered)."""
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
    benign = _with_howto(benign, howto_share, 20_000 + seed, "organism_references")
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
