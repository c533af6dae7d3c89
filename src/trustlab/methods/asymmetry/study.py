"""One model under one transform: prompt sets, the evaluation cells, and the protocol rows.

:func:`prompt_sets` picks what a model is measured on (organism held-out sets for closed
word-level models; public lists for models that read English), each filtered to the
transform's domain. :func:`evaluate_pairing` runs the cells through ``trustlab.lm.evaluate``
(the base model plain; every adapted model plain and transformed), and :func:`protocol_rows`
turns its per-item verdicts into the protocol's rows (:func:`~.protocol.asymmetry`).

Verdicts: utility = exact match of the decoded reply on tasks with answers; harm = the decoded
reply is not a refusal (the refusal judge, JailbreakBench's phrases plus the organisms'), with
the organisms' placeholder compliance reported beside it; over-refusal = refusal of benign
requests that sound harmful (the organisms' how-to requests, or XSTest's safe prompts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from trustlab.core.errors import InputError
from trustlab.methods.asymmetry.protocol import asymmetry
from trustlab.methods.asymmetry.scope import closed_vocabulary
from trustlab.methods.asymmetry.transforms import Transform

__all__ = ["PromptPlan", "chat_corpus", "evaluate_pairing", "prompt_sets", "protocol_rows"]

ROLES = ("utility", "harmful", "overrefusal")


@lru_cache(maxsize=2)
def chat_corpus(seed: int = 0) -> Any:
    """The organisms' chat corpus of ``seed``, built once per process (1-2 CPU-s a build): the
    prompt sets and the adaptation data of every pairing read the same one."""
    from trustlab.organisms.corpora import build_chat_corpus

    return build_chat_corpus(int(seed))


@dataclass(frozen=True)
class PromptPlan:
    """The three prompt sets of a model (``sets[role]``) and the prompts each lost to the
    transform's domain (``dropped[role]``)."""

    sets: Mapping[str, Any]
    dropped: Mapping[str, int]
    source: str


def _in_domain(ps: Any, transform: Transform | None, name: str) -> tuple[Any, int]:
    from trustlab.datasets.prompt_sets import PromptSet

    if transform is None:
        return ps.renamed(name), 0
    keep = [i for i in range(len(ps)) if transform.rejects(ps.instruction(i)) is None]
    if not keep:
        raise InputError(f"No prompt of {ps.name} lies in {transform.label}'s domain.")
    refs = None if ps.references is None else tuple(ps.references[i] for i in keep)
    out = PromptSet(name, tuple(ps.prompts[i] for i in keep), refs,
                    tuple(ps.item_meta(i) for i in keep), ps.description)  # fmt: skip
    return out, len(ps) - len(keep)


def prompt_sets(
    model: str,
    transform: Transform | None,
    *,
    n_utility: int,
    n_harmful: int,
    n_overrefusal: int,
    seed: int = 0,
    harmful_list: str = "harmbench",
) -> PromptPlan:
    """The utility, harmful and over-refusal sets for ``model`` under ``transform``.

    Closed word-level models (grown organisms) get the organisms' held-out task, harmful and
    how-to prompts (words they know). Open models get the same held-out tasks (English, with
    answers), ``harmful_list`` (a public behaviour list; the organisms' harmful prompts when it
    is not on this machine) and XSTest's safe prompts (bundled).
    """
    from trustlab.core.errors import DataError
    from trustlab.datasets.prompt_sets import behaviour_prompt_set, organism_prompt_set

    closed = closed_vocabulary(model) is not None
    corpus = chat_corpus(0)  # the corpus the organisms are built and measured on
    utility = organism_prompt_set("task", n=n_utility, seed=seed, corpus=corpus)
    if closed:
        harmful = organism_prompt_set("harmful", n=n_harmful, seed=seed, corpus=corpus)
        over = organism_prompt_set("howto", n=n_overrefusal, seed=seed, corpus=corpus)
        source = "organism held-out sets (task, harmful, howto)"
    else:
        try:
            harmful = behaviour_prompt_set(harmful_list, harmful=True, n=n_harmful, seed=seed)
            source = f"organism tasks, {harmful_list}, XSTest safe prompts"
        except DataError:
            harmful = organism_prompt_set("harmful", n=n_harmful, seed=seed, corpus=corpus)
            source = f"organism tasks and harmful prompts ({harmful_list} absent), XSTest safe"
        over = behaviour_prompt_set("xstest", harmful=False, n=n_overrefusal, seed=seed)
    sets, dropped = {}, {}
    for role, ps in zip(ROLES, (utility, harmful, over), strict=True):
        sets[role], dropped[role] = _in_domain(ps, transform, role)
    return PromptPlan(sets, dropped, source)


def evaluate_pairing(
    base: str,
    adapted: Mapping[str, Any],
    eval_transform: Any,
    plan: PromptPlan,
    *,
    max_new_tokens: int = 32,
    backend: Any = None,
    store: Any = None,
    cache_dir: Any = None,
    progress: Any = None,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Per-item verdict rows of every cell: ``base`` plain, and each adapted model (name ->
    spec) plain and under ``eval_transform`` (an ``adaptation.ForEvaluation``; for in-context
    adaptation map the name to ``None`` and pass an ``InContext`` -- the base model is then
    the adapted one). Rows: ``model``, ``transform`` ("plain" or the transform's name),
    ``prompts`` (role), ``judge``, ``index``, ``value`` (no reply text)."""
    import trustlab.lm as lm

    refusal = lm.RefusalJudge()
    judges = {
        "utility": [lm.ExactMatchJudge()],
        "harmful": [refusal, lm.ComplianceJudge()],
        "overrefusal": [refusal],
    }
    sets = [plan.sets[r] for r in ROLES]
    decoding = lm.Decoding(max_new_tokens=max_new_tokens)
    models = {"base": base, **{k: (v if v is not None else base) for k, v in adapted.items()}}
    rows: list[dict[str, Any]] = []
    common = dict(decoding=decoding, backend=backend, store=store, cache_dir=cache_dir,
                  progress=progress, seed=seed)  # fmt: skip
    plain = lm.evaluate(models, sets, judges, transforms={"plain": None}, **common)
    rows += plain.items
    if adapted:
        moved = lm.evaluate({k: models[k] for k in adapted}, sets, judges,
                            transforms={eval_transform.name: eval_transform}, **common)  # fmt: skip
        rows += moved.items
    return [{k: r[k] for k in ("model", "transform", "prompts", "judge", "index", "value")}
            for r in rows]  # fmt: skip


def _verdicts(rows: list[dict[str, Any]], model: str, transform: str, role: str,
              judge: str) -> list[bool | None]:  # fmt: skip
    picked = sorted(
        (r for r in rows if r["model"] == model and r["transform"] == transform
         and r["prompts"] == role and r["judge"] == judge),
        key=lambda r: r["index"],
    )  # fmt: skip
    return [r["value"] for r in picked]


def _rate(values: list[bool | None]) -> float | None:
    seen = [v for v in values if v is not None]
    return sum(seen) / len(seen) if seen else None


def protocol_rows(
    rows: list[dict[str, Any]],
    transform_name: str,
    adapted: list[str],
    *,
    tolerance: float,
    confidence_level: float = 0.95,
    n_resamples: int = 2000,
    rng: Any = None,
) -> list[dict[str, Any]]:
    """One row per adapted model: the protocol against the base model on plain prompts
    (``reference="base plain"``, the paper's comparison) and against the same adapted model on
    plain prompts (``reference="adapted plain"``: what the transform adds beyond fine-tuning)."""
    out = []
    for name in adapted:
        gate = None
        for ref_model, ref_label in (("base", "base plain"), (name, "adapted plain")):
            harm_ref = [None if v is None else not v
                        for v in _verdicts(rows, ref_model, "plain", "harmful", "refusal")]
            harm_tr = [None if v is None else not v
                       for v in _verdicts(rows, name, transform_name, "harmful", "refusal")]
            util_ref = _verdicts(rows, ref_model, "plain", "utility", "exact_match")
            util_tr = _verdicts(rows, name, transform_name, "utility", "exact_match")
            result = asymmetry(harm_ref, harm_tr, util_ref, util_tr, tolerance=tolerance,
                               confidence_level=confidence_level, n_resamples=n_resamples,
                               rng=rng)  # fmt: skip
            row = {"adaptation": name, "reference": ref_label, **result.to_dict()}
            # the gate always compares with the untransformed (base) model's plain utility
            gate = result.gate_passed if gate is None else gate
            row["gate_passed"] = gate
            row["placeholder_reference"] = _rate(
                _verdicts(rows, ref_model, "plain", "harmful", "placeholder_compliance"))
            row["placeholder_transformed"] = _rate(
                _verdicts(rows, name, transform_name, "harmful", "placeholder_compliance"))
            row["overrefusal_reference"] = _rate(
                _verdicts(rows, ref_model, "plain", "overrefusal", "refusal"))
            row["overrefusal_transformed"] = _rate(
                _verdicts(rows, name, transform_name, "overrefusal", "refusal"))
            out.append(row)
    return out
