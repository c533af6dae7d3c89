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

from trustlab.embed import Embedder
from trustlab.methods.lisa.base import Guardrail
from trustlab.methods.lisa.cases import Case, Decision, label_from_str
from trustlab.methods.lisa.memory import MemoryEntry, PolicyMemory

__all__ = ["AdaptiveGuardrail", "Lisa", "MemoBase", "as_label"]


def as_label(label: int | str) -> int:
    return label_from_str(label) if isinstance(label, str) else int(label)


@runtime_checkable
class AdaptiveGuardrail(Protocol):
    name: str

    def check(self, case: Case) -> Decision: ...

    def report(self, case: Case, label: int | str) -> None: ...

    def memory_size(self) -> int: ...


class MemoBase:
    """Remembers a fixed guardrail's score per case, so many memories can share one base."""

    def __init__(self, base: Guardrail) -> None:
        self.base = base
        self.name = base.name
        self._cache: dict[Case, float] = {}

    def score(self, cases: Sequence[Case]) -> NDArray[np.float64]:
        missing = [c for c in dict.fromkeys(cases) if c not in self._cache]
        if missing:
            for c, s in zip(missing, self.base.score(missing), strict=True):
                self._cache[c] = float(s)
        return np.array([self._cache[c] for c in cases], dtype=np.float64)

    def score_one(self, case: Case) -> float:
        s = self._cache.get(case)
        if s is None:
            s = self._cache[case] = float(self.base.score([case])[0])
        return s


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
            self._memory = PolicyMemory(embedder=self.embedder, **self.memory)
            self._base = self.base if isinstance(self.base, MemoBase) else MemoBase(self.base)
        return self._memory

    def check(self, case: Case, *, observe: bool = True) -> Decision:
        """Decide ``case``. A deployed check (``observe``) is counted as traffic, which
        calibrates the base's confidence; ``observe=False`` only looks."""
        mem = self.memory_
        decision = mem.consult(case, self._base.score_one(case))
        if observe:
            mem.observe(decision)
        return decision

    def check_many(self, cases: Sequence[Case], *, observe: bool = True) -> list[Decision]:
        mem = self.memory_
        scores = self._base.score(cases)
        out = [mem.consult(c, float(s)) for c, s in zip(cases, scores, strict=True)]
        if observe:
            for d in out:
                mem.observe(d)
        return out

    def report(self, case: Case, label: int | str) -> str:
        """Fold a user report into memory; returns the id of the entry it landed in."""
        mem = self.memory_
        decision = self.check(case, observe=False)  # a report is not a new check
        fired = [f.entry_id for f in decision.fired if f.effect == "override"]
        return mem.fold(case, as_label(label), decision.base_score, fired)

    def memory_size(self) -> int:
        return self.memory_.size()

    def entries(self) -> list[MemoryEntry]:
        return self.memory_.entries()
