"""Text detectors: ``score(texts) -> P(positive)`` for any classifier of harmful content.

The one interface (:class:`TextDetector`) is what an attack queries and a defence retrains:
``name`` and ``score(texts)`` returning float64 probabilities of the positive class (harmful,
toxic, misinformation, ...) in ``[0, 1]``. Decision thresholds are the caller's (an attack
calibrates one on benign texts); detectors only score.

* :class:`EmbeddingDetector` — a sentence embedder (MiniLM by default, any
  :class:`~trustlab.embed.Embedder`) and scikit-learn's ``LogisticRegression``;
* :class:`TfidfDetector` — word uni/bigram TF-IDF and logistic regression (the lexical baseline);
* :class:`SklearnDetector` — any scikit-learn estimator (a text ``Pipeline``, or a classifier over
  an embedder's vectors); :class:`CallableDetector` — any function of a list of texts;
* :class:`HFClassifierDetector` — a Hugging Face sequence classifier saved on disk;
* :class:`HateSonarDetector` — the off-the-shelf HateSonar model (Davidson et al., 2017; the
  ``hatesonar`` PyPI wheel ships it as ONNX: TF-IDF of lower-cased word unigrams and a
  three-class linear model; positive = hate speech or offensive language).

:class:`QueryCounter` wraps a detector and counts the texts it is asked to score.
"""

from __future__ import annotations

import numbers
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from trustlab.core.errors import (
    DataError,
    InputError,
    MissingDependencyError,
    NotFittedError,
)
from trustlab.core.validation import check_labels, check_scalar

__all__ = [
    "CallableDetector",
    "EmbeddingDetector",
    "HFClassifierDetector",
    "HateSonarDetector",
    "QueryCounter",
    "SklearnDetector",
    "TextDetector",
    "TfidfDetector",
    "check_texts",
    "load_detector",
]


@runtime_checkable
class TextDetector(Protocol):
    """Anything with a ``name`` and ``score(texts) -> float64 [n]`` in ``[0, 1]``."""

    name: str

    def score(self, texts: Sequence[str]) -> NDArray[np.float64]: ...


def check_texts(
    texts: Any, name: str = "texts", where: str = "", *, allow_empty: bool = False
) -> list[str]:
    """A list of strings (a tuple, Series or array of strings is the same list).

    One string, ``None``, a mapping, a non-string item, or (unless ``allow_empty``) no text at
    all is an :class:`InputError` naming the parameter.
    """
    at = f"The '{name}' parameter" + (f" of {where}" if where else "")
    if isinstance(texts, str | bytes):
        raise InputError(f"{at} must be a list of strings, not one string.")
    if texts is None or isinstance(texts, dict) or not hasattr(texts, "__iter__"):
        raise InputError(f"{at} must be a list of strings. Got {type(texts).__name__}.")
    if hasattr(texts, "__next__"):
        raise InputError(f"{at} must be a list of strings, not an iterator.")
    if isinstance(texts, np.ndarray) and texts.ndim != 1:
        raise InputError(f"{at} must be 1-D (one text per item). Got shape {texts.shape}.")
    items = list(texts.tolist() if isinstance(texts, np.ndarray) else texts)
    bad = next((t for t in items if not isinstance(t, str)), None)
    if bad is not None or any(not isinstance(t, str) for t in items):
        raise InputError(f"{at} must hold strings. Got a {type(bad).__name__}.")
    if not items and not allow_empty:
        raise InputError(f"{at} must hold at least one text.")
    return items


def _binary_labels(labels: Any, n: int, where: str) -> NDArray[np.int64]:
    y = check_labels(labels, "labels", where, n_classes=2, n_samples=n)
    if len(np.unique(y)) < 2:
        raise InputError(
            f"The 'labels' parameter of {where} must hold both classes (0 and 1). Got only {y[0]}."
        )
    return y


def _check_scores(p: Any, n: int, where: str) -> NDArray[np.float64]:
    try:
        arr = np.asarray(p, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{where} returned scores that are not numbers: {exc}.") from exc
    if arr.shape[0] != n:
        raise DataError(f"{where} returned {arr.shape[0]} scores for {n} texts.")
    if not np.all(np.isfinite(arr)) or arr.min(initial=0.0) < 0 or arr.max(initial=0.0) > 1:
        raise DataError(f"{where} returned scores outside [0, 1] (or NaN).")
    return arr


_DEFAULT_EMBEDDER: Any = None
_LOCK = threading.Lock()


def default_embedder() -> Any:
    """One MiniLM embedder per process, cached on disk (``trustlab.embed.default_cache_path``)."""
    global _DEFAULT_EMBEDDER
    with _LOCK:
        if _DEFAULT_EMBEDDER is None:
            from trustlab.embed import MiniLMEmbedder, default_cache_path

            _DEFAULT_EMBEDDER = MiniLMEmbedder(default_cache_path())
        return _DEFAULT_EMBEDDER


def _check_C(C: Any, where: str) -> float:
    if isinstance(C, bool) or not isinstance(C, numbers.Real) or not np.isfinite(C) or C <= 0:
        raise InputError(f"The 'C' parameter of {where} must be a number > 0. Got {C!r}.")
    return float(C)


class _Fittable:
    name = "detector"

    def _require(self) -> Any:
        model = getattr(self, "model_", None)
        if model is None:
            raise NotFittedError(
                f"This {type(self).__name__} is not fitted yet: call fit(texts, labels) first."
            )
        return model


class EmbeddingDetector(_Fittable):
    """Sentence embeddings + logistic regression (``class_weight='balanced'`` by default).

    ``embedder``: any :class:`~trustlab.embed.Embedder`; ``None`` is the process's MiniLM
    embedder with its on-disk cache (so repeated texts are embedded once).
    """

    def __init__(
        self,
        embedder: Any = None,
        *,
        C: float = 1.0,
        class_weight: str | None = "balanced",
        max_iter: int = 2000,
        name: str | None = None,
    ) -> None:
        self.embedder = embedder
        self.C = C
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.name = name or "embedding-lr"

    def _emb(self) -> Any:
        if self.embedder is None:
            return default_embedder()
        if isinstance(self.embedder, str | bytes) or not hasattr(self.embedder, "encode"):
            raise InputError(
                "The 'embedder' parameter of EmbeddingDetector must have encode(texts). Got "
                f"{type(self.embedder).__name__}."
            )
        return self.embedder

    def clone(self) -> EmbeddingDetector:
        """An unfitted copy with the same settings (the embedder, and its cache, is shared)."""
        return EmbeddingDetector(
            self.embedder, C=self.C, class_weight=self.class_weight, max_iter=self.max_iter,
            name=self.name,
        )  # fmt: skip

    def fit(self, texts: Sequence[str], labels: Any) -> EmbeddingDetector:
        from sklearn.linear_model import LogisticRegression

        where = "EmbeddingDetector.fit"
        items = check_texts(texts, "texts", where)
        y = _binary_labels(labels, len(items), where)
        C = _check_C(self.C, "EmbeddingDetector")
        X = self._emb().encode(items)
        self.model_ = LogisticRegression(
            C=C, class_weight=self.class_weight, max_iter=self.max_iter
        ).fit(X, y)
        return self

    def score(self, texts: Sequence[str]) -> NDArray[np.float64]:
        model = self._require()
        items = check_texts(texts, "texts", "EmbeddingDetector.score", allow_empty=True)
        if not items:
            return np.zeros(0)
        return model.predict_proba(self._emb().encode(items))[:, 1].astype(np.float64)


class TfidfDetector(_Fittable):
    """Word n-gram TF-IDF (sublinear tf) + logistic regression: the lexical baseline."""

    def __init__(
        self,
        *,
        ngram_max: int = 2,
        min_df: int = 1,
        C: float = 10.0,
        class_weight: str | None = "balanced",
        name: str | None = None,
    ) -> None:
        self.ngram_max = ngram_max
        self.min_df = min_df
        self.C = C
        self.class_weight = class_weight
        self.name = name or "tfidf-lr"

    def clone(self) -> TfidfDetector:
        return TfidfDetector(
            ngram_max=self.ngram_max, min_df=self.min_df, C=self.C,
            class_weight=self.class_weight, name=self.name,
        )  # fmt: skip

    def fit(self, texts: Sequence[str], labels: Any) -> TfidfDetector:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline

        where = "TfidfDetector.fit"
        items = check_texts(texts, "texts", where)
        y = _binary_labels(labels, len(items), where)
        for key in ("ngram_max", "min_df"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise InputError(
                    f"The '{key}' parameter of TfidfDetector must be an integer >= 1. Got {v!r}."
                )
        C = _check_C(self.C, "TfidfDetector")
        self.model_ = make_pipeline(
            TfidfVectorizer(
                ngram_range=(1, int(self.ngram_max)), min_df=int(self.min_df), sublinear_tf=True
            ),
            LogisticRegression(C=C, class_weight=self.class_weight, max_iter=2000),
        ).fit(items, y)
        return self

    def score(self, texts: Sequence[str]) -> NDArray[np.float64]:
        model = self._require()
        items = check_texts(texts, "texts", "TfidfDetector.score", allow_empty=True)
        if not items:
            return np.zeros(0)
        return model.predict_proba(items)[:, 1].astype(np.float64)


def _positive_column(estimator: Any, positive_class: Any) -> int:
    classes = list(getattr(estimator, "classes_", [0, 1]))
    if positive_class not in classes:
        raise InputError(
            f"The 'positive_class' parameter of SklearnDetector must be one of the estimator's "
            f"classes {classes}. Got {positive_class!r}."
        )
    return classes.index(positive_class)


class SklearnDetector(_Fittable):
    """Any scikit-learn classifier as a detector.

    Without ``embedder`` the estimator receives the raw texts (e.g. a ``Pipeline`` that
    vectorises them); with one, it receives the embedder's vectors. Scores come from
    ``predict_proba`` (the column of ``positive_class``), else ``decision_function`` through the
    logistic function (monotone, so rankings and ROC-AUC are unchanged; 0.5 is the estimator's
    own decision boundary). A fitted estimator works as is; ``fit`` fits a clone of it.
    """

    def __init__(
        self,
        estimator: Any,
        *,
        embedder: Any = None,
        positive_class: Any = 1,
        name: str = "sklearn",
    ) -> None:
        self.estimator = estimator
        self.embedder = embedder
        self.positive_class = positive_class
        self.name = name
        if _is_fitted(estimator):
            self.model_ = estimator

    def _features(self, items: list[str]) -> Any:
        return items if self.embedder is None else self.embedder.encode(items)

    def clone(self) -> SklearnDetector:
        from sklearn.base import clone

        return SklearnDetector(
            clone(self.estimator), embedder=self.embedder, positive_class=self.positive_class,
            name=self.name,
        )  # fmt: skip

    def fit(self, texts: Sequence[str], labels: Any) -> SklearnDetector:
        from sklearn.base import clone

        where = "SklearnDetector.fit"
        items = check_texts(texts, "texts", where)
        y = _binary_labels(labels, len(items), where)
        self.model_ = clone(self.estimator).fit(self._features(items), y)
        return self

    def score(self, texts: Sequence[str]) -> NDArray[np.float64]:
        if not hasattr(self.estimator, "predict_proba") and not hasattr(
            self.estimator, "decision_function"
        ):
            raise InputError(
                "The 'estimator' parameter of SklearnDetector needs predict_proba or "
                f"decision_function. Got {type(self.estimator).__name__}."
            )
        model = self._require()
        items = check_texts(texts, "texts", "SklearnDetector.score", allow_empty=True)
        if not items:
            return np.zeros(0)
        X = self._features(items)
        if hasattr(model, "predict_proba"):
            col = _positive_column(model, self.positive_class)
            p = model.predict_proba(X)[:, col]
        else:
            d = np.asarray(model.decision_function(X), dtype=np.float64)
            if d.ndim == 2:
                d = d[:, _positive_column(model, self.positive_class)]
            p = 1.0 / (1.0 + np.exp(-d))
        return _check_scores(p, len(items), f"{self.name} (SklearnDetector)")


def _is_fitted(estimator: Any) -> bool:
    try:
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(estimator)
        return True
    except Exception:
        return False


class CallableDetector:
    """A function ``fn(list_of_texts) -> scores in [0, 1]`` as a detector (outputs checked)."""

    def __init__(self, fn: Callable[[list[str]], Any], name: str = "callable") -> None:
        if not callable(fn):
            raise InputError(
                f"The 'fn' parameter of CallableDetector must be callable. Got {type(fn).__name__}."
            )
        self.fn = fn
        self.name = name

    def score(self, texts: Sequence[str]) -> NDArray[np.float64]:
        items = check_texts(texts, "texts", "CallableDetector.score", allow_empty=True)
        if not items:
            return np.zeros(0)
        return _check_scores(self.fn(items), len(items), f"the detector function {self.name!r}")


_HATESONAR_CLASSES = ("hate_speech", "offensive_language", "neither")


class HateSonarDetector:
    """HateSonar (Davidson et al., ICWSM 2017) through onnxruntime: P(hate or offensive).

    ``model_file``: the ONNX file (default: the one inside the ``hatesonar`` wheel, no network).
    ``positive``: the classes whose probabilities add up to the score (default: hate speech and
    offensive language; ``("hate_speech",)`` scores hate alone).

    The wheel's graph lower-cases text with a ``StringNormalizer`` whose locale defaults to
    ``en_US.UTF-8``; onnxruntime refuses to start where that locale is not installed. Then the
    graph is loaded with the node's locale set to ``C.UTF-8`` instead (``locale_patched_`` is
    True): the tokenizer that follows keeps only ``[a-zA-Z0-9_]`` runs, whose lower-casing is
    the same in both locales.
    """

    def __init__(
        self,
        model_file: str | Path | None = None,
        *,
        positive: tuple[str, ...] = ("hate_speech", "offensive_language"),
        batch_size: int = 256,
    ) -> None:
        self.model_file = model_file
        self.positive = positive
        self.batch_size = check_scalar(batch_size, "batch_size", "HateSonarDetector", kind=int,
                                       lo=1)
        self.name = "hatesonar"
        self._session: Any = None
        self.locale_patched_ = False

    @staticmethod
    def default_model_file() -> Path:
        import importlib.util

        spec = importlib.util.find_spec("hatesonar")
        if spec is None or not spec.submodule_search_locations:
            raise MissingDependencyError.for_package("hatesonar", "redteam", "HateSonarDetector")
        return Path(next(iter(spec.submodule_search_locations))) / "model" / "model.onnx"

    def _load(self) -> Any:
        if self._session is not None:
            return self._session
        bad = [c for c in self.positive if c not in _HATESONAR_CLASSES]
        if not self.positive or bad or isinstance(self.positive, str):
            raise InputError(
                "The 'positive' parameter of HateSonarDetector must be a non-empty tuple of "
                f"{', '.join(_HATESONAR_CLASSES)}. Got {self.positive!r}."
            )
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise MissingDependencyError.for_package(
                "onnxruntime", "verify", "HateSonarDetector"
            ) from exc
        path = Path(self.model_file) if self.model_file is not None else self.default_model_file()
        if not path.is_file():
            raise DataError(f"The HateSonar model file '{path}' does not exist.")
        opts = ort.SessionOptions()
        opts.log_severity_level = 4  # the locale failure below is handled, not shown
        try:
            self._session = ort.InferenceSession(
                str(path), opts, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            if "locale" not in str(exc).lower():
                raise DataError(f"Cannot load the HateSonar model '{path}': {exc}") from exc
            self._session = ort.InferenceSession(
                _with_c_locale(path), opts, providers=["CPUExecutionProvider"]
            )
            self.locale_patched_ = True
        return self._session

    def score(self, texts: Sequence[str]) -> NDArray[np.float64]:
        items = check_texts(texts, "texts", "HateSonarDetector.score", allow_empty=True)
        if not items:
            return np.zeros(0)
        sess = self._load()
        index = {c: i for i, c in enumerate(_HATESONAR_CLASSES)}
        out = []
        step = self.batch_size
        for start in range(0, len(items), step):
            chunk = np.array(items[start : start + step], dtype=object)
            _labels, probs = sess.run(None, {"text": chunk})
            for row in probs:
                out.append(sum(float(row[index[c]]) for c in self.positive))
        return np.clip(np.asarray(out, dtype=np.float64), 0.0, 1.0)


def _with_c_locale(path: Path) -> bytes:
    try:
        import onnx
    except ImportError as exc:
        raise MissingDependencyError.for_package("onnx", "verify", "HateSonarDetector") from exc
    model = onnx.load(str(path))
    for node in model.graph.node:
        if node.op_type == "StringNormalizer":
            for attr in list(node.attribute):
                if attr.name == "locale":
                    node.attribute.remove(attr)
            node.attribute.append(onnx.helper.make_attribute("locale", "C.UTF-8"))
    return model.SerializeToString()


class HFClassifierDetector:
    """A Hugging Face sequence classifier saved on disk (``save_pretrained`` folder, offline).

    ``positive``: the index or the ``id2label`` name of the positive class; default: index 1
    for a two-class head, otherwise required. Scores are softmax probabilities (sigmoid for a
    ``multi_label_classification`` head).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        positive: int | str | None = None,
        batch_size: int = 32,
        max_length: int = 256,
    ) -> None:
        where = "HFClassifierDetector"
        if not (positive is None or isinstance(positive, str)):  # a label name is checked on load
            positive = check_scalar(positive, "positive", where, kind=int, lo=0)
        self.path = path
        self.positive = positive
        self.batch_size = check_scalar(batch_size, "batch_size", where, kind=int, lo=1)
        self.max_length = check_scalar(max_length, "max_length", where, kind=int, lo=1)
        self.name = f"hf:{Path(str(path)).name}"
        self._model: Any = None
        self._tokenizer: Any = None
        self._column = 0

    def _load(self) -> None:
        if self._model is not None:
            return
        p = Path(str(self.path)).expanduser()
        if not p.is_dir():
            raise InputError(
                f"The 'path' parameter of HFClassifierDetector must be a save_pretrained folder. "
                f"'{p}' is not a directory."
            )
        try:
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError as exc:
            raise MissingDependencyError.for_package(
                "transformers", "llm", "HFClassifierDetector"
            ) from exc
        try:
            tok = AutoTokenizer.from_pretrained(p, local_files_only=True)
            model = AutoModelForSequenceClassification.from_pretrained(p, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise DataError(f"Cannot load a sequence classifier from '{p}': {exc}") from exc
        labels = {int(k): str(v) for k, v in (model.config.id2label or {}).items()}
        n = int(model.config.num_labels)
        pos = self.positive
        if pos is None:
            if n != 2:
                raise InputError(
                    f"The classifier in '{p}' has {n} labels ({', '.join(labels.values())}); "
                    "pass positive= (an index or a label name)."
                )
            pos = 1
        if isinstance(pos, str):
            names = {v: k for k, v in labels.items()}
            if pos not in names:
                raise InputError(
                    f"The 'positive' parameter of HFClassifierDetector must be a label of the "
                    f"model ({', '.join(labels.values())}). Got {pos!r}."
                )
            pos = names[pos]
        if isinstance(pos, bool) or not isinstance(pos, numbers.Integral) or not 0 <= pos < n:
            raise InputError(
                f"The 'positive' parameter of HFClassifierDetector must be an index in [0, {n}). "
                f"Got {pos!r}."
            )
        self._column = int(pos)
        self._tokenizer, self._model = tok, model.eval()

    def score(self, texts: Sequence[str]) -> NDArray[np.float64]:
        import torch

        items = check_texts(texts, "texts", "HFClassifierDetector.score", allow_empty=True)
        if not items:
            return np.zeros(0)
        self._load()
        multi = getattr(self._model.config, "problem_type", None) == "multi_label_classification"
        out = []
        with torch.inference_mode():
            for start in range(0, len(items), self.batch_size):
                batch = self._tokenizer(
                    items[start : start + self.batch_size], padding=True, truncation=True,
                    max_length=self.max_length, return_tensors="pt",
                )  # fmt: skip
                logits = self._model(**batch).logits.float()
                p = torch.sigmoid(logits) if multi else torch.softmax(logits, dim=-1)
                out.append(p[:, self._column].numpy())
        return np.concatenate(out).astype(np.float64)


class QueryCounter:
    """Wraps a detector; ``queries`` counts every text it scores (an attack's budget)."""

    def __init__(self, detector: TextDetector) -> None:
        if not hasattr(detector, "score"):
            raise InputError(
                "The 'detector' parameter of QueryCounter must have score(texts). Got "
                f"{type(detector).__name__}."
            )
        self.detector = detector
        self.name = getattr(detector, "name", type(detector).__name__)
        self.queries = 0

    def score(self, texts: Sequence[str]) -> NDArray[np.float64]:
        items = check_texts(texts, "texts", "QueryCounter.score", allow_empty=True)
        self.queries += len(items)
        return self.detector.score(items)


def load_detector(spec: str, **options: Any) -> Any:
    """A detector from a spec string.

    ``minilm-lr`` (MiniLM + logistic regression, unfitted), ``hashing-lr`` (the hashing
    embedder + logistic regression, unfitted), ``tfidf-lr`` (unfitted), ``hatesonar`` (ready),
    ``hatesonar:/path/model.onnx``, ``hf:/path/to/classifier`` (ready; ``positive=`` option).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"A detector spec must be a non-empty string. Got {spec!r}.")
    s = spec.strip()
    if s == "minilm-lr":
        return EmbeddingDetector(name="minilm-lr", **options)
    if s == "hashing-lr":
        from trustlab.embed import HashingEmbedder

        return EmbeddingDetector(HashingEmbedder(), name="hashing-lr", **options)
    if s == "tfidf-lr":
        return TfidfDetector(**options)
    if s == "hatesonar":
        return HateSonarDetector(**options)
    if s.startswith("hatesonar:"):
        return HateSonarDetector(s.removeprefix("hatesonar:"), **options)
    if s.startswith("hf:"):
        return HFClassifierDetector(s.removeprefix("hf:"), **options)
    raise InputError(
        f"Unknown detector {s!r}: use minilm-lr, hashing-lr, tfidf-lr, hatesonar, "
        "hatesonar:/path/model.onnx or hf:/path/to/classifier."
    )
