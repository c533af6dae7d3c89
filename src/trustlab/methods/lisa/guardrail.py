"""The adaptive guardrail interface, and LiSA = a fixed base guardrail + :class:`PolicyMemory`.

Every adaptive guardrail (LiSA and the baselines) has the same surface::

    decision = g.check(case)          # Decision(block, score, source, base_score, fired)
    g.report(case, "block")           # a user report: the case and the reporter's label
    g.memory_size()                   # entries that can fire
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from trustlab.core.errors import InputError
from trustlab.embed import Embedder
from trustlab.methods.lisa.base import Guardrail, check_scores
from trustlab.methods.lisa.cases import Case, Decision, as_case, as_label
from trustlab.methods.lisa.memory import MemoryEntry, PolicyMemory

__all__ = ["AdaptiveGuardrail", "Lisa", "MemoBase"]


@runtime_checkable
class AdaptiveGuardrail(Protocol):
    name: str

    def check(self, case: Case) -> Decision: ...

    def report(self, case: Case, label: int | str) -> None: ...

    def memory_size(self) -> int: ...


class MemoBase:
    """Remembers a fixed guardrail's score per case, so many memories can share one base."""

    def __init__(self, base: Guardrail) -> None:
        if not callable(getattr(base, "score", None)):
            raise InputError("The 'base' guardrail must have score(cases) -> P(block) "
                             f"(an EmbeddingGuardrail, an LLMJudgeGuardrail). Got {type(base).__name__}.")
        self.base = base
        self.name = str(getattr(base, "name", type(base).__name__))
        self._cache: dict[Case, float] = {}

    def score(self, cases: Sequence[Case]) -> NDArray[np.float64]:
        cases = [as_case(c, "cases", "MemoBase.score") for c in _as_list(cases, "MemoBase.score")]
        missing = list(dict.fromkeys(c for c in cases if c not in self._cache))
        if missing:
            scores = check_scores(self.base.score(missing), len(missing), self.name)
            for c, s in zip(missing, scores, strict=True):
                self._cache[c] = float(s)
        return np.array([self._cache[c] for c in cases], dtype=np.float64)

    def score_one(self, case: Case) -> float:
        case = as_case(case, "case", "MemoBase.score_one")
        s = self._cache.get(case)
        if s is None:
            s = self._cache[case] = float(check_scores(self.base.score([case]), 1, self.name)[0])
        return s


def _as_list(cases: object, where: str) -> list:
    if isinstance(cases, str | bytes) or not isinstance(cases, Sequence):
        raise InputError(f"The 'cases' parameter of {where} must be a list of cases. "
                         f"Got {type(cases).__name__}.")
    return list(cases)


class Lisa:
    """LiSA: a fixed base guardrail whose decisions a :class:`PolicyMemory` may override.

    ``base`` is any fitted guardrail with ``score(cases) -> P(block)``; memory options are
    those of :class:`PolicyMemory` (``gate_alpha``, ``prior``, ``base_prior_strength``,
    ``value_similarity``, ``gating``, ``local_rules``, ``abstraction``, ``report_share``,
    ``calibrate``). ``check`` is a deployed check: when the base's decision stands it is
    counted as traffic, which calibrates the base's confidence in the gate.
    """

    def __init__(
        self, base: Guardrail, *, embedder: Embedder | None = None, name: str = "lisa", **memory: Any
    ) -> None:
        self.base = base
        self.embedder = embedder
        self.name = name
        self.memory = memory

    @property
    def memory_(self) -> PolicyMemory:
        if not hasattr(self, "_memory"):
            valid = PolicyMemory.OPTIONS
            unknown = sorted(set(self.memory) - set(valid))
            if unknown:
                raise InputError(f"LiSA has no memory option '{unknown[0]}'. Options: "
                                 f"{', '.join(valid)}.")
            memory = PolicyMemory(embedder=self.embedder, **self.memory)
            memory.check()
            self._base = self.base if isinstance(self.base, MemoBase) else MemoBase(self.base)
            self._memory = memory
        return self._memory

    def check(self, case: Case, *, observe: bool = True) -> Decision:
        """Decide ``case``. A deployed check (``observe``) is counted as traffic, which
        calibrates the base's confidence; ``observe=False`` only looks."""
        mem = self.memory_
        case = as_case(case, "case", "Lisa.check")
        decision = mem.consult(case, self._base.score_one(case))
        if observe:
            mem.observe(decision)
        return decision

    def check_many(self, cases: Sequence[Case], *, observe: bool = True) -> list[Decision]:
        mem = self.memory_
        cases = [as_case(c, "cases", "Lisa.check_many") for c in _as_list(cases, "Lisa.check_many")]
        scores = self._base.score(cases)
        out = [mem.consult(c, float(s)) for c, s in zip(cases, scores, strict=True)]
        if observe:
            for d in out:
                mem.observe(d)
        return out

    def report(self, case: Case, label: int | str) -> str:
        """Fold a user report into memory; returns the id of the entry it landed in.

        ``label`` is ``"block"``/``"allow"`` or 1/0 (see :func:`cases.as_label`)."""
        mem = self.memory_
        case = as_case(case, "case", "Lisa.report")
        label = as_label(label, "label", "Lisa.report")
        decision = self.check(case, observe=False)  # a report is not a new check
        fired = [f.entry_id for f in decision.fired if f.effect == "override"]
        return mem.fold(case, label, decision.base_score, fired)

    def memory_size(self) -> int:
        return self.memory_.size()

    def entries(self) -> list[MemoryEntry]:
        return self.memory_.entries()
