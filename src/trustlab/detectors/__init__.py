"""Text-detector substrate: harmful-content detectors behind one interface.

    from trustlab.detectors import EmbeddingDetector, TfidfDetector, HateSonarDetector
    det = EmbeddingDetector().fit(texts, labels)      # MiniLM + logistic regression
    p = det.score(["some text", "another"])           # float64 [n], P(positive) in [0, 1]

Every detector has ``name`` and ``score(texts) -> P(positive)``; trainable ones add
``fit(texts, labels)`` and ``clone()`` (an unfitted copy with the same settings, sharing the
embedder and its cache). Wrap any scikit-learn estimator (``SklearnDetector``), a plain function
(``CallableDetector``), a Hugging Face sequence classifier saved on disk
(``HFClassifierDetector``) or the off-the-shelf HateSonar ONNX model (``HateSonarDetector``).
``QueryCounter`` counts the texts a detector scores (attack budgets). Red-teaming methods
(arao) and defences that need a text classifier use this module.
"""

from trustlab.detectors.text import (
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
