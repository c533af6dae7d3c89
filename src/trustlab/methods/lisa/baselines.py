"""Baselines with LiSA's interface, fed the same reports.

* :class:`BaseOnly` - the fixed base guardrail, reports ignored.
* :class:`ExemplarMemory` - the nearest reported case (cosine of embeddings) overrides the
  base when its similarity is at least ``threshold``; no gating, no abstraction.
* :class:`InsightMemory` - ExpeL-style insights: a report creates an insight over the case's
  context, exact values of (recipient, transmission principle) for flows and (tool,
  instruction) for tool actions, or up/down-votes the one it falls in; an
  insight fires when its empirical accuracy ``up / (up + down)`` is at least
  ``min_accuracy`` (no posterior, no local rules, no base comparison); an insight whose
  votes drop below zero importance is deleted as in ExpeL. With ``lisa_keys=True``
  (``insight_lisa_keys`` in the experiment) the insight key is LiSA's abstraction over LiSA's
  derived attributes (subject-relative recipient, argument patterns), exact values, so the
  comparison isolates LiSA's gate, value clustering and local rules.
* :class:`ReflectionMemory` - Reflexion-style: each report becomes a short lesson in the
  LLM judge's system prompt (most recent ``max_lessons``); needs an LLM backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar
from trustlab.embed import Embedder
from trustlab.methods.lisa.base import Guardrail, LLMJudgeGuardrail
from trustlab.methods.lisa.cases import (
    BLOCK,
    Case,
    Decision,
    FiredEntry,
    as_case,
    as_label,
    label_to_str,
)
from trustlab.methods.lisa.guardrail import MemoBase
from trustlab.methods.lisa.memory import DEFAULT_ABSTRACTION, abstraction_names, case_attributes

#: Insight keys: exact values of the case's context (flows) or tool and instruction (actions).
INSIGHT_ABSTRACTION: dict[str, tuple[str, ...]] = {
    "flow": ("recipient", "transmission_principle"),
    "action": ("tool", "instruction"),
}

__all__ = ["BaseOnly", "ExemplarMemory", "InsightMemory", "ReflectionMemory"]


def _memo(base: Guardrail) -> MemoBase:
    return base if isinstance(base, MemoBase) else MemoBase(base)


class BaseOnly:
    """The base guardrail alone (reports are accepted and ignored)."""

    def __init__(self, base: Guardrail, *, name: str = "base") -> None:
        self.base = _memo(base)
        self.name = name

    def check(self, case: Case) -> Decision:
        s = self.base.score_one(as_case(case, "case", f"{self.name}.check"))
        return Decision(s >= 0.5, s, "base", s)

    def report(self, case: Case, label: int | str) -> None:
        """Accepted (and checked like every method's reports) but ignored."""
        as_case(case, "case", f"{self.name}.report")
        as_label(label, "label", f"{self.name}.report")

    def memory_size(self) -> int:
        return 0


class ExemplarMemory:
    """Nearest reported case overrides the base when cosine similarity >= ``threshold``."""

    def __init__(
        self, base: Guardrail, embedder: Embedder, *, threshold: float = 0.9, name: str = "exemplar"
    ) -> None:
        self.base = _memo(base)
        if not isinstance(embedder, Embedder):
            raise InputError("The 'embedder' of ExemplarMemory must be an Embedder. "
                             f"Got {type(embedder).__name__}.")
        self.embedder = embedder
        self.threshold = check_scalar(threshold, "threshold", "ExemplarMemory", lo=-1.0, hi=1.0)
        self.name = name
        self._vectors = np.zeros((0, 0), dtype=np.float32)
        self._labels: list[int] = []

    def check(self, case: Case) -> Decision:
        case = as_case(case, "case", "ExemplarMemory.check")
        s = self.base.score_one(case)
        if self._labels:
            v = self.embedder.encode([case.text()])[0]
            sims = self._vectors @ v
            i = int(np.argmax(sims))
            if sims[i] >= self.threshold:
                lab = self._labels[i]
                fired = (FiredEntry(f"E{i + 1}", lab, float(sims[i]), float("nan"), "override"),)
                return Decision(lab == BLOCK, float(lab), "memory", s, fired)
        return Decision(s >= 0.5, s, "base", s)

    def report(self, case: Case, label: int | str) -> None:
        case = as_case(case, "case", "ExemplarMemory.report")
        label = as_label(label, "label", "ExemplarMemory.report")
        v = self.embedder.encode([case.text()])
        self._vectors = v if not self._labels else np.vstack([self._vectors, v])
        self._labels.append(label)

    def memory_size(self) -> int:
        return len(self._labels)


@dataclass
class _Insight:
    insight_id: str
    label: int
    up: int = 1
    down: int = 0
    importance: int = 2


class InsightMemory:
    """ExpeL-style insights with up/down votes, gated by empirical accuracy only."""

    def __init__(
        self,
        base: Guardrail,
        *,
        min_accuracy: float = 0.5,
        abstraction: dict[str, tuple[str, ...]] | None = None,
        lisa_keys: bool = False,
        name: str = "insight",
    ) -> None:
        self.base = _memo(base)
        self.min_accuracy = check_scalar(min_accuracy, "min_accuracy", "InsightMemory", lo=0.0,
                                         hi=1.0)
        self.lisa_keys = lisa_keys
        self.abstraction = abstraction or (DEFAULT_ABSTRACTION if lisa_keys else INSIGHT_ABSTRACTION)
        self.name = name
        self._insights: dict[tuple[str, ...], _Insight] = {}
        self._n = 0

    def _key(self, case: Case) -> tuple[str, ...]:
        if not self.lisa_keys:
            attrs = case.attributes()
            return (case.kind, *(attrs.get(a, "") for a in self.abstraction[case.kind]))
        attrs = case_attributes(case)  # LiSA's derived attributes, exact values, no clustering
        names = abstraction_names(case.kind, attrs, self.abstraction)
        return (case.kind, *(f"{k}={attrs.get(k, '')}" for k in names))

    def check(self, case: Case) -> Decision:
        case = as_case(case, "case", "InsightMemory.check")
        s = self.base.score_one(case)
        ins = self._insights.get(self._key(case))
        if ins is not None:
            acc = ins.up / (ins.up + ins.down)
            if acc >= self.min_accuracy and (ins.label == BLOCK) != (s >= 0.5):
                fired = (FiredEntry(ins.insight_id, ins.label, acc, float("nan"), "override"),)
                score = acc if ins.label == BLOCK else 1.0 - acc
                return Decision(ins.label == BLOCK, score, "memory", s, fired)
        return Decision(s >= 0.5, s, "base", s)

    def report(self, case: Case, label: int | str) -> None:
        case = as_case(case, "case", "InsightMemory.report")
        lab = as_label(label, "label", "InsightMemory.report")
        key = self._key(case)
        ins = self._insights.get(key)
        if ins is None:
            self._n += 1
            self._insights[key] = _Insight(f"I{self._n}", lab)
            return
        if lab == ins.label:
            ins.up += 1
            ins.importance += 1
        else:
            ins.down += 1
            ins.importance -= 1
            if ins.importance <= 0:  # ExpeL removes an insight whose importance reaches zero
                del self._insights[key]
                self._n += 1
                self._insights[key] = _Insight(f"I{self._n}", lab)

    def memory_size(self) -> int:
        return len(self._insights)


class ReflectionMemory:
    """Reflexion-style lessons in the LLM judge's prompt (the judge itself stays fixed).

    A lesson is written by the same chat model from the reported case when ``reflect`` is
    true, else it is the template "Cases like '<case>' should be <label>ed."
    """

    def __init__(
        self,
        judge: LLMJudgeGuardrail,
        *,
        max_lessons: int = 20,
        reflect: bool = False,
        name: str = "reflection",
    ) -> None:
        if not isinstance(judge, LLMJudgeGuardrail):
            raise InputError("The 'judge' of ReflectionMemory must be an LLMJudgeGuardrail. "
                             f"Got {type(judge).__name__}.")
        self.judge = judge
        self.max_lessons = check_scalar(max_lessons, "max_lessons", "ReflectionMemory", kind=int,
                                        lo=1)
        self.reflect = reflect
        self.name = name
        self.lessons_: list[str] = []

    def check(self, case: Case) -> Decision:
        case = as_case(case, "case", "ReflectionMemory.check")
        s = float(self.judge.score([case], self.lessons_[-self.max_lessons :])[0])
        return Decision(s >= 0.5, s, "memory" if self.lessons_ else "base", s)

    def check_many(self, cases: Sequence[Case]) -> list[Decision]:
        scores = self.judge.score(cases, self.lessons_[-self.max_lessons :])
        return [Decision(bool(s >= 0.5), float(s), "base", float(s)) for s in scores]

    def report(self, case: Case, label: int | str) -> None:
        case = as_case(case, "case", "ReflectionMemory.report")
        verdict = label_to_str(as_label(label, "label", "ReflectionMemory.report"))
        lesson = f"Cases like '{case.text()}' should be {verdict}ed."
        if self.reflect:
            prompt: list[dict[str, Any]] = [
                {
                    "role": "user",
                    "content": (
                        f"A guardrail got this case wrong; the correct decision is {verdict.upper()}."
                        f"\nCase: {case.text()}\nWrite one short general rule for similar cases."
                    ),
                }
            ]
            reply = self.judge.chat.generate([prompt], max_new_tokens=48, temperature=0.0, seed=0)
            lesson = reply[0].strip() or lesson
        self.lessons_.append(lesson)

    def memory_size(self) -> int:
        return min(len(self.lessons_), self.max_lessons)
