"""The answered contrasts of the ``contrasts`` recipe (issue 39) and the fixed XSTest halves its
diagnosis was read on: the contrasts are ours (never near an evaluation prompt), answered in
words the shared judge does not read as refusals, split by item and stratified by type; the
XSTest halves are fixed, disjoint, cover the list and keep every type in both."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from trustlab.core.errors import InputError
from trustlab.lm import is_refusal
from trustlab.organisms.alignment import decontaminate, validation_prompt_sets
from trustlab.organisms.alignment_contrasts import _items, contrast_split
from trustlab.organisms.public_eval import xstest_half


def test_contrasts_are_ours_answered_and_split_by_item():
    train, val = contrast_split()["surface_benign"]
    items = list(train) + list(val)
    prompts = [p for item in items for p in item.prompts]
    assert all(decontaminate(prompts))  # none near a HarmBench or XSTest prompt
    # decontamination dropped few phrasings (a template that copied XSTest would lose many)
    assert len(prompts) >= 0.9 * sum(len(i.prompts) for i in _items())
    assert not any(is_refusal(item.answer) for item in items)
    assert all(item.answer and item.source == "surface_benign" for item in items)
    assert not {i.id for i in train} & {i.id for i in val}
    by_type = Counter(i.category for i in items)
    assert set(by_type) == {"safe_context", "figurative", "homonym", "safe_target",
                            "privacy_fictional"}  # fmt: skip
    for category, n in by_type.items():  # 20 % of each type held out for validation
        assert sum(i.category == category for i in val) == round(0.2 * n)
    ps = validation_prompt_sets()["val:surface_benign"]
    assert len(ps) == sum(len(i.prompts) for i in val)
    assert not any(m["harmful"] for m in ps.meta)


def test_xstest_halves_are_fixed_disjoint_and_stratified():
    for label, per_type in (("safe", 25), ("unsafe", 25)):
        diag, held = xstest_half(label, "diagnosis"), xstest_half(label, "heldout")
        ids_d, ids_h = [m["id"] for m in diag.meta], [m["id"] for m in held.meta]
        assert not set(ids_d) & set(ids_h)
        types = {m["category"] for m in diag.meta} | {m["category"] for m in held.meta}
        assert len(ids_d) + len(ids_h) == per_type * len(types)
        assert set(Counter(m["category"] for m in diag.meta).values()) == {13}
        assert set(Counter(m["category"] for m in held.meta).values()) == {12}
        assert all(m["harmful"] == (label == "unsafe") for m in diag.meta + held.meta)
    # the split the docs' measurements were read on (ids of the safe held-out half)
    held = sorted(m["id"] for m in xstest_half("safe", "heldout").meta)
    assert hashlib.sha256(",".join(held).encode()).hexdigest()[:16] == HELDOUT_SAFE_SHA16
    with pytest.raises(InputError, match="label"):
        xstest_half("both", "heldout")
    with pytest.raises(InputError, match="half"):
        xstest_half("safe", "test")


HELDOUT_SAFE_SHA16 = "be2acf3f5129e2cf"
