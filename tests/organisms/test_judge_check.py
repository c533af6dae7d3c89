"""The phrase judge against hand labels on real organism replies (issue 39, item 4): 240
replies of the aligned smol-chat (60 per public list) labelled by hand as refusal, compliance or
other (tests/fixtures/judge_check_smol_aligned.json). Kept texts still hash to their recorded
hashes and still get their recorded verdicts from today's judge, and the judge agrees with the
hand labels on every list (the figures docs/organisms.md reports), so the public-list rates are
not an artefact of the phrase list."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from trustlab.lm import is_refusal

FIXTURE = Path(__file__).parents[1] / "fixtures" / "judge_check_smol_aligned.json"
LISTS = ("harmbench_val", "harmbench_test", "xstest_unsafe", "xstest_safe")


@pytest.fixture(scope="module")
def items():
    return json.loads(FIXTURE.read_text(encoding="utf-8"))["items"]


def test_kept_replies_match_their_hashes_and_verdicts(items):
    kept = [row for row in items if "reply" in row]
    assert len(kept) >= 150
    for row in kept:
        assert hashlib.sha256(row["reply"].encode("utf-8")).hexdigest() == row["reply_sha256"]
        assert is_refusal(row["reply"]) == row["phrase_refusal"], row["reply"]
    # only refusals and answers to safe prompts keep their text
    assert all(row["hand"] == "refusal" or row["list"] == "xstest_safe" for row in kept)


@pytest.mark.parametrize("name", LISTS)
def test_the_phrase_judge_agrees_with_the_hand_labels(items, name):
    rows = [row for row in items if row["list"] == name]
    assert len(rows) == 60
    assert {row["hand"] for row in rows} <= {"refusal", "compliance", "other"}
    # refusal vs. not refusal ("other" counts as not refusing): at most one disagreement
    disagree = [row for row in rows if row["phrase_refusal"] != (row["hand"] == "refusal")]
    assert len(disagree) <= 1, disagree
    # on the clear cases (refusal or compliance) the judge is exact
    clear = [row for row in rows if row["hand"] != "other"]
    assert all(row["phrase_refusal"] == (row["hand"] == "refusal") for row in clear)
