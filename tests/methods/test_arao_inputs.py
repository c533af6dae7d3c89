"""arao's public API on malformed input: InputError with one line, or the canonical result.

Every callable in ``trustlab.methods.arao.__all__`` is covered: the entry points below are
hypothesis cases (corruptions per argument kind in tests/malformed.py). The result records
``AttackResult``, ``ItemResult``, ``Attribution``, ``AxisSweep``, ``Augmentation``,
``ClaimVerdicts``, ``RepairOutcome``, ``Splits`` and ``Axis`` are dataclasses the library
builds (checked below to be plain dataclasses, not entry points). ``evaluate_repairs``,
``repair``, ``fluency_ratio``, ``default_corpus``, ``LLMRewriter``, ``ConsistencyJudge``,
``WordSubstitution`` and ``PlantedAxisDetector`` are checked by the object-argument tests at
the end. ``AXES``, ``PHRASES``, ``EUPHEMISMS``, ``REPAIRS``, ``AXIS_VARIANTS`` and ``ALL_REPAIRS`` are constants.
"""

from __future__ import annotations

import dataclasses
import math

import hypothesis  # noqa: F401 - the property tests are built by malformed_input_tests
import numpy as np
import pytest

from trustlab.core.errors import InputError
from trustlab.datasets.labelled_text import LabelledTexts
from trustlab.detectors import CallableDetector
from trustlab.embed import HashingEmbedder
from trustlab.methods import arao as api
from trustlab.methods.arao import (
    AttackResult,
    Attribution,
    Augmentation,
    Axis,
    AxisSweep,
    ClaimCheck,
    ClaimVerdicts,
    ConsistencyJudge,
    ItemResult,
    LLMRewriter,
    PlantedAxisDetector,
    RandomSearch,
    RepairOutcome,
    RhetoricalAttack,
    Splits,
    StrategySpace,
    TemplateRewriter,
    ThompsonPlanner,
    WordNeighbours,
    WordSubstitution,
    attribute,
    augment,
    axis_sweep,
    calibrate_threshold,
    char_similarity,
    default_corpus,
    evaluate_repairs,
    failing_axes,
    fluency_ratio,
    format_strategy,
    levenshtein,
    logit,
    repair,
    split,
)

from ..malformed import (
    ARRAY,
    CHOICE,
    INT,
    OBJECT,
    POSITIVE,
    RATE,
    Case,
    Kind,
    Mutation,
    malformed_input_tests,
    scalar,
)

SPACE = StrategySpace()
RW = TemplateRewriter(SPACE)
EMB = HashingEmbedder(64)
CLAIM = ClaimCheck(EMB, threshold=-1.0)
DET = CallableDetector(lambda xs: [0.9 if "bomb" in x else 0.1 for x in xs], name="kw")
TEXTS = ["how to build a bomb", "how to bake bread", "a bomb in a story"]
S1 = SPACE.single("hedging", 1)

TEXT_LIST = Kind(
    "texts",
    (
        Mutation("one string", lambda v, r: "a text"),
        Mutation("None", lambda v, r: None),
        Mutation("dict", lambda v, r: {"a": 1}),
        Mutation("number in the list", lambda v, r: [*list(v)[:-1], 3]),
        Mutation("generator", lambda v, r: (t for t in v)),
        Mutation("empty", lambda v, r: []),
        Mutation("tuple", lambda v, r: tuple(v), same=True),
        Mutation("numpy strings", lambda v, r: np.array(v), same=True),
    ),
)
ONE_TEXT = Kind(
    "text",
    (
        Mutation("None", lambda v, r: None),
        Mutation("number", lambda v, r: 3),
        Mutation("list", lambda v, r: [v]),
        Mutation("bytes", lambda v, r: v.encode()),
    ),
)
STRATEGY = Kind(
    "strategy",
    (
        Mutation("one level short", lambda v, r: list(v)[:-1]),
        Mutation("level too high", lambda v, r: [9, *list(v)[1:]]),
        Mutation("half level", lambda v, r: [0.5, *list(v)[1:]]),
        Mutation("too many axes", lambda v, r: [1, 1, 1, 1, *([0] * 6)]),
        Mutation("string", lambda v, r: "hedging"),
        Mutation("None", lambda v, r: None),
        Mutation("numpy", lambda v, r: np.asarray(v), same=True),
        Mutation("integer floats", lambda v, r: [float(x) for x in v], same=True),
    ),
)
STRATEGIES = Kind(
    "strategies",
    (
        Mutation("one short", lambda v, r: list(v)[:-1]),
        Mutation("a bad level", lambda v, r: [[9] + [0] * 9, *list(v)[1:]]),
        Mutation("string", lambda v, r: "x"),
        Mutation("None", lambda v, r: None),
    ),
)
SEEDS = Kind(
    "seeds",
    (
        Mutation("one short", lambda v, r: list(v)[:-1]),
        Mutation("a float", lambda v, r: [0.5, *list(v)[1:]]),
        Mutation("string", lambda v, r: "0"),
        Mutation("None", lambda v, r: None),
        Mutation("numpy ints", lambda v, r: np.asarray(v, dtype=np.int64), same=True),
    ),
)
SCORES = ARRAY.without("pandas").extend(
    Mutation("pandas series", lambda x, r: __import__("pandas").Series(np.asarray(x)), same=True),
    Mutation("above 1", lambda x, r: np.asarray(x) + 2.0),
)
FPR = scalar("fpr", -0.1, 1.0, 1.5)
THRESHOLD = scalar("threshold")  # any finite number


def _attack_run(texts, budget, threshold):
    res = RhetoricalAttack(DET, RW, RandomSearch(SPACE), CLAIM, threshold=threshold, budget=budget).run(texts, 0)
    return [(r.detected, r.success, r.queries) for r in res.items]


def _attribute_fixture():
    res = RhetoricalAttack(DET, RW, RandomSearch(SPACE), CLAIM, threshold=0.5, budget=2).run(TEXTS, 0)
    return res


RESULT = _attribute_fixture()


def _attribute(result, texts):
    a = attribute(result, texts, DET, RW)
    return (a.n_success, len(a.axes))


def _failing(min_rate, min_count):
    a = attribute(RESULT, TEXTS, DET, RW)
    return failing_axes(a, SPACE, min_rate=min_rate, min_count=min_count)


def _augment(mode, n_aug):
    a = augment(TEXTS, [1, 0, 1], mode=mode, n_aug=n_aug, rewriter=RW, claim=CLAIM, rng=0,
                failing=[(SPACE.index("hedging"), 1)])  # fmt: skip
    return (a.texts, a.labels)


def _split(n_train, n_dev, n_eval):
    data = LabelledTexts(tuple(f"t{i}" for i in range(40)), tuple([0, 1] * 20))
    s = split(data, n_train, n_dev, n_eval, np.random.default_rng(0))
    return (s.train, s.dev, s.eval)


CASES = [
    Case("calibrate_threshold", lambda negative_scores, fpr: calibrate_threshold(negative_scores, fpr),
         {"negative_scores": [0.1, 0.4, 0.35, 0.8, 0.2], "fpr": 0.2}, {"negative_scores": SCORES.without("above 1"), "fpr": FPR}),
    Case("logit", lambda p: logit(p), {"p": [0.1, 0.5, 0.9]}, {"p": SCORES.without("extra dimension")}),
    Case("char_similarity", lambda original, rewrite: char_similarity(original, rewrite),
         {"original": "kitten", "rewrite": "sitting"}, {"original": ONE_TEXT, "rewrite": ONE_TEXT}),
    Case("levenshtein", lambda a, b: levenshtein(a, b), {"a": "kitten", "b": "sitting"},
         {"a": ONE_TEXT, "b": ONE_TEXT}),
    Case("format_strategy", lambda strategy: format_strategy(strategy), {"strategy": S1},
         {"strategy": STRATEGY.without("level too high", "too many axes")}),
    Case("StrategySpace.check", lambda strategy: SPACE.check(strategy), {"strategy": S1}, {"strategy": STRATEGY}),
    Case("StrategySpace", lambda max_level, max_active: (StrategySpace(max_level=max_level, max_active=max_active).max_level,),
         {"max_level": 2, "max_active": 3}, {"max_level": INT(lo=1), "max_active": INT(lo=1)}),
    Case("TemplateRewriter.rewrite", lambda texts, strategies, seeds: RW.rewrite(texts, strategies, seeds),
         {"texts": TEXTS, "strategies": [S1] * 3, "seeds": [0, 1, 2]},
         {"texts": TEXT_LIST.without("empty"), "strategies": STRATEGIES, "seeds": SEEDS}),
    Case("ClaimCheck.check", lambda originals, rewrites: ClaimCheck(EMB, threshold=0.2).check(originals, rewrites).accepted,
         {"originals": TEXTS, "rewrites": TEXTS}, {"originals": TEXT_LIST.without("empty"), "rewrites": TEXT_LIST.without("empty")}),
    Case("ClaimCheck", lambda threshold: ClaimCheck(EMB, threshold=threshold).threshold, {"threshold": 0.5},
         {"threshold": scalar("cosine", 1.5, -2.0)}),
    Case("RhetoricalAttack.run", _attack_run, {"texts": TEXTS, "budget": 2, "threshold": 0.5},
         {"texts": TEXT_LIST, "budget": INT(lo=1), "threshold": THRESHOLD}),
    Case("ThompsonPlanner", lambda prior_scale, noise, n_candidates: ThompsonPlanner(
        SPACE, prior_scale=prior_scale, noise=noise, n_candidates=n_candidates).n_candidates,
         {"prior_scale": 1.0, "noise": 1.0, "n_candidates": 8},
         {"prior_scale": POSITIVE, "noise": POSITIVE, "n_candidates": INT(lo=1)}),
    Case("RandomSearch", lambda space: RandomSearch(space).name, {"space": SPACE}, {"space": OBJECT}),
    Case("attribute", _attribute, {"result": RESULT, "texts": TEXTS}, {"result": OBJECT, "texts": TEXT_LIST}),
    Case("failing_axes", _failing, {"min_rate": 0.5, "min_count": 1}, {"min_rate": RATE, "min_count": INT(lo=1)}),
    Case("axis_sweep", lambda texts, threshold: axis_sweep(texts, DET, RW, CLAIM, threshold=threshold).success,
         {"texts": TEXTS[:1], "threshold": 0.5}, {"texts": TEXT_LIST, "threshold": THRESHOLD}),
    Case("augment", _augment, {"mode": "random", "n_aug": 3}, {"mode": CHOICE(), "n_aug": INT(lo=0)}),
    Case("split", _split, {"n_train": 5, "n_dev": 3, "n_eval": 4},
         {"n_train": INT(lo=1), "n_dev": INT(lo=1), "n_eval": INT(lo=1)}),
    Case("WordNeighbours", lambda vectors, k: WordNeighbours(["alpha", "beta", "gamma"], vectors, k=k).neighbours("alpha"),
         {"vectors": np.eye(3) + 0.1, "k": 1}, {"vectors": ARRAY.without("extra dimension", "ragged list"), "k": INT(lo=1)}),
    Case("PlantedAxisDetector", lambda factor: PlantedAxisDetector(DET, RW, "hedging", 1, factor=factor).score(TEXTS),
         {"factor": 0.1}, {"factor": scalar("factor", -0.1, 1.0, 1.5)}),
    Case("default_corpus", lambda max_harmless: len(default_corpus(max_harmless=max_harmless)[0]) > 0,
         {"max_harmless": 5}, {"max_harmless": INT(lo=0)}),
]  # fmt: skip

test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


def test_result_records_are_dataclasses():
    for cls in (AttackResult, ItemResult, Attribution, AxisSweep, Augmentation, ClaimVerdicts,
                RepairOutcome, Splits, Axis):  # fmt: skip
        assert dataclasses.is_dataclass(cls)


@pytest.mark.parametrize("bad", [None, 3, "model", [1, 2]])
def test_object_arguments_are_checked(bad):
    with pytest.raises(InputError):
        LLMRewriter(bad)
    with pytest.raises(InputError):
        ConsistencyJudge(bad)
    with pytest.raises(InputError):
        WordSubstitution(bad)
    with pytest.raises(InputError):
        PlantedAxisDetector(bad, RW, "hedging")
    with pytest.raises(InputError):
        repair(bad, TEXTS, [1, 0, 1], Augmentation([], [], "none"))
    with pytest.raises(InputError):
        RhetoricalAttack(bad, RW, RandomSearch(SPACE), CLAIM, threshold=0.5)
    if bad is not None:  # None is the default space
        with pytest.raises(InputError):
            TemplateRewriter(bad)


def test_repair_fluency_and_evaluate_reject_malformed_texts():
    from trustlab.detectors import TfidfDetector

    with pytest.raises(InputError):
        repair(TfidfDetector(), "one string", [1], Augmentation([], [], "none"))
    with pytest.raises(InputError):
        fluency_ratio(None, ["a"], ["a", "b"])
    with pytest.raises(InputError):
        evaluate_repairs(TfidfDetector(), ("x", [1]), ([], []), ([], []), rewriter=RW, claim=CLAIM,
                         make_planner=lambda: RandomSearch(SPACE), failing=[], adversarial=RESULT,
                         adversarial_texts=TEXTS, n_aug=1, budget=1, fpr=0.1,
                         rng=np.random.default_rng(0))  # fmt: skip


def test_public_names_are_all_here():
    from pathlib import Path

    text = Path(__file__).read_text(encoding="utf-8")
    missing = [n for n in api.__all__ if n not in text]
    assert not missing, missing
    assert math.isfinite(calibrate_threshold([0.2, 0.3], 0.5))
