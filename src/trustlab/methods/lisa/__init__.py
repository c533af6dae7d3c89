"""LiSA: Lifelong Safety Adaptation of a fixed guardrail from sparse, noisy user reports.

A fixed base guardrail (MiniLM + logistic regression, or an LLM judge) plus a structured
memory fed only by user reports: policy abstractions that generalise a report to unseen
cases of its kind, conflict-aware local rules where reports disagree, and evidence-aware
gating by a Beta-posterior lower bound against the base's own reliability.
"""

from trustlab.embed import (
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    default_cache_path,
)
from trustlab.methods.lisa.base import (
    DEFAULT_POLICY,
    EmbeddingGuardrail,
    Guardrail,
    LLMJudgeGuardrail,
    parse_block_probability,
)
from trustlab.methods.lisa.baselines import (
    BaseOnly,
    ExemplarMemory,
    InsightMemory,
    ReflectionMemory,
)
from trustlab.methods.lisa.cases import ALLOW, BLOCK, Case, Decision, FiredEntry
from trustlab.methods.lisa.guardrail import AdaptiveGuardrail, Lisa, MemoBase
from trustlab.methods.lisa.memory import DEFAULT_ABSTRACTION, MemoryEntry, PolicyMemory, ValueIndex
from trustlab.methods.lisa.simulator import (
    StreamResult,
    classification_metrics,
    learning_curve,
    run_stream,
)
from trustlab.methods.lisa.suites import SUITES, Suite, build_suite, generic_seed_set

__all__ = [
    "ALLOW",
    "BLOCK",
    "DEFAULT_ABSTRACTION",
    "DEFAULT_POLICY",
    "SUITES",
    "AdaptiveGuardrail",
    "BaseOnly",
    "Case",
    "Decision",
    "Embedder",
    "EmbeddingGuardrail",
    "ExemplarMemory",
    "FiredEntry",
    "Guardrail",
    "HashingEmbedder",
    "InsightMemory",
    "LLMJudgeGuardrail",
    "Lisa",
    "MemoBase",
    "MemoryEntry",
    "MiniLMEmbedder",
    "PolicyMemory",
    "ReflectionMemory",
    "StreamResult",
    "Suite",
    "ValueIndex",
    "build_suite",
    "classification_metrics",
    "default_cache_path",
    "generic_seed_set",
    "learning_curve",
    "parse_block_probability",
    "run_stream",
]
