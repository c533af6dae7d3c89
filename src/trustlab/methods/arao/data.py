"""The default data: a harmful-request detection task over public behaviour lists.

Positive (label 1, a request a moderation filter should flag): HarmBench's standard and
copyright-free text behaviours (bundled, MIT) plus, when ``../shared/data`` is there, AdvBench
and StrongREJECT (MIT, read from the shared folder). Negative (label 0): XSTest's 250 safe
prompts that *sound* unsafe (bundled, CC BY 4.0) plus, when the shared folder is there,
Alpaca-derived harmless instructions (Arditi et al.'s ``harmless_val`` split, CC BY-NC, never
bundled). The texts are the public lists' own request strings: requests for harm, not harmful
content (no list contains instructions or answers), and trustlab ships none beyond the bundled
lists. Rewrites of them are kept in memory and written to reports only as SHA-256 hashes.

:func:`split` draws disjoint, class-stratified train / dev / eval splits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trustlab.core.errors import DataError
from trustlab.datasets.labelled_text import LabelledTexts

__all__ = ["Splits", "default_corpus", "split"]


def default_corpus(*, max_harmless: int = 600, seed: int = 0) -> tuple[LabelledTexts, list[str]]:
    """The default task and a list of notes saying which sources were found."""
    from trustlab.core.validation import check_scalar

    max_harmless = check_scalar(max_harmless, "max_harmless", "default_corpus", kind=int, lo=0)
    seed = check_scalar(seed, "seed", "default_corpus", kind=int, lo=0)
    from trustlab.datasets.behaviours import (
        load_advbench,
        load_harmbench,
        load_strongreject,
        load_xstest,
    )

    notes: list[str] = []
    pos = [b.prompt for b in load_harmbench("all", functional="standard") if b.context is None]
    groups = ["harmbench"] * len(pos)
    for name, loader in (("advbench", load_advbench), ("strongreject", load_strongreject)):
        try:
            extra = [b.prompt for b in loader()]
        except DataError:
            notes.append(f"{name} not found in the shared data folder: not used")
            continue
        pos += extra
        groups += [name] * len(extra)
    neg = [b.prompt for b in load_xstest("safe")]
    ngroups = ["xstest_safe"] * len(neg)
    try:
        from trustlab.datasets.refusal import load_refusal

        harmless = [r.instruction for r in load_refusal("harmless_val")]
        pick = np.random.default_rng(seed).permutation(len(harmless))[:max_harmless]
        neg += [harmless[i] for i in sorted(pick)]
        ngroups += ["alpaca_harmless"] * len(pick)
    except DataError:
        notes.append("the Alpaca harmless split is not in the shared data folder: negatives are XSTest-safe only")
    texts, labels, grp, seen = [], [], [], set()
    for t, y, g in [*zip(pos, [1] * len(pos), groups, strict=True), *zip(neg, [0] * len(neg), ngroups, strict=True)]:
        key = " ".join(t.lower().split())
        if key in seen:
            continue
        seen.add(key)
        texts.append(t.strip())
        labels.append(y)
        grp.append(g)
    return LabelledTexts(tuple(texts), tuple(labels), "default harmful-request task", tuple(grp)), notes


@dataclass(frozen=True)
class Splits:
    """Indices into the corpus: ``train`` (detector and repair training), ``dev`` (threshold
    calibration, attribution), ``eval`` (held out: ROC-AUC and attack success)."""

    train: tuple[int, ...]
    dev: tuple[int, ...]
    eval: tuple[int, ...]


def split(data: LabelledTexts, n_train: int, n_dev: int, n_eval: int, rng: np.random.Generator) -> Splits:
    """Per class: ``n_eval`` to eval, ``n_dev`` to dev, up to ``n_train`` to train (disjoint)."""
    from trustlab.core.errors import InputError
    from trustlab.core.validation import check_scalar

    if not isinstance(data, LabelledTexts):
        raise InputError("The 'data' parameter of split must be LabelledTexts.")
    n_train = check_scalar(n_train, "n_train", "split", kind=int, lo=1)
    n_dev = check_scalar(n_dev, "n_dev", "split", kind=int, lo=1)
    n_eval = check_scalar(n_eval, "n_eval", "split", kind=int, lo=1)
    if not isinstance(rng, np.random.Generator):
        raise InputError("The 'rng' parameter of split must be a numpy Generator.")
    y = np.asarray(data.labels)
    tr: list[int] = []
    dv: list[int] = []
    ev: list[int] = []
    for cls in (0, 1):
        idx = rng.permutation(np.flatnonzero(y == cls))
        if len(idx) < n_eval + n_dev + 2:
            raise DataError(
                f"The data hold {len(idx)} texts of class {cls}; the splits need at least "
                f"{n_eval + n_dev + 2} (n_eval + n_dev + 2)."
            )
        ev += idx[:n_eval].tolist()
        dv += idx[n_eval : n_eval + n_dev].tolist()
        tr += idx[n_eval + n_dev : n_eval + n_dev + n_train].tolist()
    return Splits(tuple(sorted(tr)), tuple(sorted(dv)), tuple(sorted(ev)))
