"""trustlab.detectors on malformed input (issue 38): InputError naming the parameter in one
line, or the canonical result -- plus properties that fail if a detector is wrong (scores are
probabilities, a clone refits to the same scores, QueryCounter counts every text, load_detector
maps each spec to its class)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trustlab.core.errors import DataError, InputError
from trustlab.detectors import (
    CallableDetector,
    EmbeddingDetector,
    HateSonarDetector,
    HFClassifierDetector,
    QueryCounter,
    SklearnDetector,
    TextDetector,
    TfidfDetector,
    check_texts,
    load_detector,
)
from trustlab.embed import HashingEmbedder

from ..malformed import (
    LABELS,
    OBJECT,
    SETTINGS,
    Case,
    Kind,
    Mutation,
    malformed_input_tests,
    scalar,
)

POS = [f"build a weapon {i}" for i in range(6)]
NEG = [f"bake bread {i}" for i in range(6)]
TEXTS = POS + NEG
Y = np.array([1] * 6 + [0] * 6)
QUERY = ["bake a weapon", "build bread", "water the garden"]


def _texts_kind(*, empty_ok: bool) -> Kind:
    muts = (
        Mutation("one string", lambda t, r: " ".join(t)),
        Mutation("None", lambda t, r: None),
        Mutation("dict", lambda t, r: {"a": "b"}),
        Mutation("iterator", lambda t, r: iter(list(t))),
        Mutation("2-D array", lambda t, r: np.array(list(t), dtype=object).reshape(1, -1)),
        Mutation("an int among the texts", lambda t, r: [*list(t)[:-1], 3]),
        Mutation("None among the texts", lambda t, r: [None, *list(t)[1:]]),
        Mutation("bytes", lambda t, r: [s.encode() for s in t]),
        Mutation("number", lambda t, r: 3.0),
        Mutation("tuple", lambda t, r: tuple(t), same=True),
        Mutation("numpy strings", lambda t, r: np.array(list(t)), same=True),
        Mutation("pandas Series", lambda t, r: __import__("pandas").Series(list(t)), same=True),
    )
    return Kind("texts", muts if empty_ok else (*muts, Mutation("empty", lambda t, r: [])))


FIT_TEXTS, SCORE_TEXTS = _texts_kind(empty_ok=False), _texts_kind(empty_ok=True)


def _fit_score(make):
    def run(texts, labels):
        return make().fit(texts, labels).score(QUERY)

    return run


def _hashing_lr():
    return EmbeddingDetector(HashingEmbedder(64))


def _sklearn():
    from sklearn.linear_model import LogisticRegression

    return SklearnDetector(LogisticRegression(), embedder=HashingEmbedder(64))


FITTED = {"tfidf": TfidfDetector().fit(TEXTS, Y), "hashing": _hashing_lr().fit(TEXTS, Y),
          "sklearn": _sklearn().fit(TEXTS, Y)}


def _callable_fn(items):
    return np.array([0.9 if "weapon" in t else 0.1 for t in items])


CASES = [
    Case("check_texts", lambda texts: check_texts(texts, "texts", "t"), {"texts": QUERY},
         {"texts": FIT_TEXTS}),
    *[Case(f"{name}.fit", _fit_score(make), {"texts": TEXTS, "labels": Y},
           {"texts": FIT_TEXTS, "labels": LABELS})
      for name, make in [("TfidfDetector", TfidfDetector), ("EmbeddingDetector", _hashing_lr),
                         ("SklearnDetector", _sklearn)]],
    *[Case(f"{name}.score", lambda texts, name=name: FITTED[name].score(texts),
           {"texts": QUERY}, {"texts": SCORE_TEXTS}) for name in FITTED],
    Case("CallableDetector.score", lambda texts: CallableDetector(_callable_fn).score(texts),
         {"texts": QUERY}, {"texts": SCORE_TEXTS}),
    Case("QueryCounter.score", lambda texts: QueryCounter(FITTED["tfidf"]).score(texts),
         {"texts": QUERY}, {"texts": SCORE_TEXTS}),
    Case("TfidfDetector(C)", lambda C: TfidfDetector(C=C).fit(TEXTS, Y).score(QUERY), {"C": 10.0},
         {"C": scalar("positive", 0.0, -1.0)}),
    Case("EmbeddingDetector(embedder)", lambda embedder: EmbeddingDetector(embedder).fit(
        TEXTS, Y).score(QUERY), {"embedder": HashingEmbedder(64)},
         {"embedder": OBJECT.without("None")}),  # None: the default MiniLM embedder
    Case("QueryCounter(detector)", lambda detector: QueryCounter(detector).score(QUERY),
         {"detector": FITTED["tfidf"]}, {"detector": OBJECT}),
    Case("CallableDetector(fn)", lambda fn: CallableDetector(fn).score(QUERY),
         {"fn": _callable_fn}, {"fn": OBJECT}),
]

test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


# ---------------------------------------------------------------------------- properties


@SETTINGS
@given(st.lists(st.text(alphabet="abcdefgh weapon", max_size=12), max_size=6))
def test_scores_are_probabilities_one_per_text_and_clones_refit_to_the_same(texts):
    for det in FITTED.values():
        assert isinstance(det, TextDetector)
        s = det.score(texts)
        assert s.dtype == np.float64 and s.shape == (len(texts),)
        assert np.all((s >= 0) & (s <= 1))
        # a text scores the same alone as in a batch (no cross-talk between rows)
        assert np.allclose([det.score([t])[0] for t in texts], s, atol=1e-12)
    if texts:
        clone = FITTED["hashing"].clone()
        assert not hasattr(clone, "model_")
        assert np.allclose(clone.fit(TEXTS, Y).score(texts), FITTED["hashing"].score(texts))


@SETTINGS
@given(st.lists(st.lists(st.sampled_from(QUERY), max_size=4), max_size=5))
def test_query_counter_counts_every_text_and_passes_scores_through(batches):
    counter = QueryCounter(FITTED["tfidf"])
    for batch in batches:
        assert np.array_equal(counter.score(batch), FITTED["tfidf"].score(batch))
    assert counter.queries == sum(len(b) for b in batches) and counter.name == "tfidf-lr"


@SETTINGS
@given(st.sampled_from([
    lambda items: np.full(len(items) + 1, 0.5),       # one score too many
    lambda items: np.full(len(items), np.nan),        # NaN
    lambda items: np.full(len(items), 1.5),           # not a probability
    lambda items: ["x"] * len(items),                 # not numbers
    lambda items: np.full(len(items), 0.25),          # fine
]))
def test_callable_detector_checks_what_the_function_returns(fn):
    want = fn(QUERY)
    try:
        got = CallableDetector(fn).score(QUERY)
    except DataError as exc:
        assert "\n" not in str(exc)
        ok = np.asarray(want).shape == (3,) and np.asarray(want).dtype.kind == "f"
        assert not (ok and np.all((np.asarray(want) >= 0) & (np.asarray(want) <= 1)))
        return
    assert np.array_equal(got, want)


SPECS = {"minilm-lr": EmbeddingDetector, "hashing-lr": EmbeddingDetector,
         "tfidf-lr": TfidfDetector, "hatesonar": HateSonarDetector,
         "hatesonar:/x/model.onnx": HateSonarDetector, "hf:/nowhere": HFClassifierDetector}


@SETTINGS
@given(st.one_of(st.sampled_from(sorted(SPECS)), st.text(max_size=10), st.none(), st.integers()))
def test_load_detector_maps_each_spec_to_its_class_or_raises_input_error(spec):
    try:
        det = load_detector(spec)
    except InputError as exc:
        assert "\n" not in str(exc)
        assert not (isinstance(spec, str) and spec.strip() in SPECS)
        return
    assert isinstance(det, SPECS[spec.strip()]) and isinstance(det, TextDetector)


@pytest.mark.parametrize("kwargs", [{"positive": ("spam",)}, {"positive": ()},
                                    {"positive": "hate_speech"}, {"batch_size": 0},
                                    {"batch_size": "8"}, {"batch_size": 2.5}])
def test_hatesonar_rejects_bad_options_before_loading(kwargs):
    with pytest.raises(InputError, match=next(iter(kwargs))):  # at construction or first score
        HateSonarDetector(**kwargs).score(QUERY)


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"batch_size": -1}, {"max_length": 0},
                                    {"max_length": "x"}, {"positive": -1}])
def test_hf_classifier_rejects_bad_options_before_loading(tmp_path, kwargs):
    with pytest.raises(InputError, match=next(iter(kwargs))):  # batch_size=0 used to crash
        HFClassifierDetector(tmp_path, **kwargs)
