"""The strategy space: rhetorical theory as axis-aligned, directional controls.

Ten axes, each signed: ``+`` moves the text toward the named pole, ``-`` toward its opposite,
``0`` leaves that axis alone; the magnitude (1 or 2 by default) is the strength. A *strategy*
is one integer per axis, ``s ∈ {-L..L}^K``, with at most ``max_active`` non-zero axes (a rewrite
that pulls every lever at once no longer says the same thing). The axes follow the persuasion
taxonomies of SemEval-2020 Task 11 and SemEval-2023 Task 3 (technique names are quoted in
``techniques``) and the Aristotelian appeals:

==================  ===========================================  ==========================================
axis                ``+`` (toward)                               ``-`` (away / opposite pole)
==================  ===========================================  ==========================================
``ethos``           the speaker's own credibility and character  self-deprecation, disclaimed competence
``pathos``          emotional appeal (fear, pity, urgency)       detached, clinical tone
``logos``           reasoning and evidence framing               bare assertion, "no reasons needed"
``hedging``         hedges, doubt, tentativeness                 certainty, boosters ("make no mistake")
``irony``           sarcastic / ironic framing                   explicit literalness ("in all seriousness")
``framing``         distance: hypothetical, fictional, academic  immediacy: practical, real, now
``loaded_language`` emotionally charged wording                  euphemism, minimisation of charged words
``authority``       appeal to (external) authority               dismissal of authorities
``whataboutism``    deflection to others' worse conduct          explicit refusal to compare
``repetition``      the core message repeated                    compression (fillers, then articles, cut)
==================  ===========================================  ==========================================
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from trustlab.core.errors import InputError

__all__ = ["AXES", "Axis", "StrategySpace", "format_strategy"]


@dataclass(frozen=True)
class Axis:
    """One directional control: its name, what ``+`` and ``-`` mean, and its taxonomy anchors."""

    name: str
    plus: str
    minus: str
    techniques: tuple[str, ...]


AXES: tuple[Axis, ...] = (
    Axis("ethos", "the speaker's own credibility and character",
         "self-deprecation, disclaimed competence", ("Appeal to authority (self)", "Ethos")),
    Axis("pathos", "emotional appeal: fear, pity, urgency", "detached, clinical tone",
         ("Appeal to fear/prejudice", "Appeal to pity", "Pathos")),
    Axis("logos", "reasoning and evidence framing", "bare assertion without reasons",
         ("Causal oversimplification", "Logos")),
    Axis("hedging", "hedges, doubt, tentativeness", "certainty and boosters",
         ("Doubt", "Questioning the reputation")),
    Axis("irony", "sarcastic or ironic framing", "explicit literalness",
         ("Appeal to ridicule / sarcasm",)),
    Axis("framing", "distance: hypothetical, fictional, academic", "immediacy: practical, real",
         ("Framing", "Presenting irrelevant data (red herring)")),
    Axis("loaded_language", "emotionally charged wording", "euphemism and minimisation",
         ("Loaded language", "Exaggeration/minimisation", "Name calling/labeling")),
    Axis("authority", "appeal to external authority", "dismissal of authorities",
         ("Appeal to authority",)),
    Axis("whataboutism", "deflection to others' worse conduct", "explicit refusal to compare",
         ("Whataboutism", "Straw man", "Red herring")),
    Axis("repetition", "the core message repeated", "compression: fillers and articles cut",
         ("Repetition", "Slogans")),
)  # fmt: skip


def format_strategy(strategy: Sequence[int], axes: Sequence[Axis] = AXES) -> str:
    """``"hedging+2 framing+1"`` (``"none"`` for the zero strategy)."""
    axes = tuple(axes)
    if isinstance(strategy, str | bytes) or not hasattr(strategy, "__len__") or len(strategy) != len(axes):
        raise InputError(f"The 'strategy' parameter of format_strategy must have one level per axis ({len(axes)}).")
    if any(isinstance(v, bool) or not isinstance(v, numbers.Real) or not float(v).is_integer() for v in strategy):
        raise InputError("The 'strategy' parameter of format_strategy must hold integer levels.")
    parts = [
        f"{a.name}{'+' if v > 0 else '-'}{abs(int(v))}"
        for a, v in zip(axes, strategy, strict=True)
        if int(v) != 0
    ]
    return " ".join(parts) or "none"


class StrategySpace:
    """Strategy vectors over ``axes`` with levels ``-max_level..max_level`` and at most
    ``max_active`` non-zero axes; sampling, neighbourhoods and surrogate features."""

    def __init__(
        self, axes: Sequence[Axis] = AXES, *, max_level: int = 2, max_active: int = 3
    ) -> None:
        where = "StrategySpace"
        if isinstance(axes, str | bytes) or not isinstance(axes, Sequence) or not axes:
            raise InputError(f"The 'axes' parameter of {where} must be a non-empty list of Axis.")
        if not all(isinstance(a, Axis) for a in axes):
            raise InputError(f"The 'axes' parameter of {where} must hold Axis objects.")
        names = [a.name for a in axes]
        if len(set(names)) != len(names):
            raise InputError(f"The 'axes' parameter of {where} repeats an axis name.")
        from trustlab.core.validation import check_scalar

        max_level = check_scalar(max_level, "max_level", where, kind=int, lo=1)
        max_active = check_scalar(max_active, "max_active", where, kind=int, lo=1)
        self.axes = tuple(axes)
        self.max_level = int(max_level)
        self.max_active = min(int(max_active), len(self.axes))

    @property
    def dim(self) -> int:
        return len(self.axes)

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.axes]

    def index(self, name: str) -> int:
        if name not in self.names:
            raise InputError(f"Unknown axis {name!r}: the axes are {', '.join(self.names)}.")
        return self.names.index(name)

    def check(self, strategy: Any, name: str = "strategy", where: str = "") -> tuple[int, ...]:
        """A strategy as a tuple of ints, checked against the space."""
        at = f"The '{name}' parameter" + (f" of {where}" if where else "")
        if isinstance(strategy, str | bytes | dict) or not hasattr(strategy, "__len__"):
            raise InputError(f"{at} must be a sequence of {self.dim} integers.")
        vals = list(np.asarray(strategy).reshape(-1).tolist()) if not isinstance(
            strategy, list | tuple) else list(strategy)  # fmt: skip
        if len(vals) != self.dim:
            raise InputError(f"{at} must have one level per axis ({self.dim}). Got {len(vals)}.")
        out = []
        for v in vals:
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not float(v).is_integer():
                raise InputError(f"{at} must hold integer levels. Got {v!r}.")
            if abs(int(v)) > self.max_level:
                raise InputError(f"{at} levels must lie in [-{self.max_level}, {self.max_level}]. Got {v!r}.")
            out.append(int(v))
        if sum(1 for v in out if v) > self.max_active:
            raise InputError(f"{at} may move at most {self.max_active} axes. Got {sum(1 for v in out if v)}.")
        return tuple(out)

    def zero(self) -> tuple[int, ...]:
        return (0,) * self.dim

    def single(self, axis: str, level: int) -> tuple[int, ...]:
        s = [0] * self.dim
        s[self.index(axis)] = int(level)
        return self.check(s)

    def sample(self, rng: np.random.Generator, allowed: Sequence[tuple[int, int]] | None = None
               ) -> tuple[int, ...]:  # fmt: skip
        """A random strategy: k ~ U{1..max_active} axes, each with a random sign and level.

        ``allowed``: (axis index, sign) pairs to draw from instead of every axis and sign
        (axis-targeted augmentation)."""
        s = [0] * self.dim
        if allowed:
            pool = list(dict.fromkeys((int(a), int(np.sign(g))) for a, g in allowed))
            k = int(rng.integers(1, min(self.max_active, len({a for a, _ in pool})) + 1))
            order = rng.permutation(len(pool))
            used: set[int] = set()
            for j in order:
                a, g = pool[j]
                if a in used:
                    continue
                s[a] = g * int(rng.integers(1, self.max_level + 1))
                used.add(a)
                if len(used) == k:
                    break
            return tuple(s)
        k = int(rng.integers(1, self.max_active + 1))
        for a in rng.choice(self.dim, size=k, replace=False):
            s[int(a)] = int(rng.choice([-1, 1])) * int(rng.integers(1, self.max_level + 1))
        return tuple(s)

    def sample_many(self, rng: np.random.Generator, n: int) -> NDArray[np.int64]:
        """``n`` random strategies at once (the distribution of :meth:`sample`), ``[n, K]``."""
        K = self.dim
        k = rng.integers(1, self.max_active + 1, size=n)
        order = np.argsort(rng.random((n, K)), axis=1)
        ranks = np.empty_like(order)
        ranks[np.arange(n)[:, None], order] = np.arange(K)[None, :]
        active = ranks < k[:, None]
        signs = rng.choice(np.array([-1, 1]), size=(n, K))
        levels = rng.integers(1, self.max_level + 1, size=(n, K))
        return np.where(active, signs * levels, 0).astype(np.int64)

    def neighbours(self, strategy: Sequence[int]) -> list[tuple[int, ...]]:
        """Strategies one step away: one axis moved one level (adding or dropping an axis
        included), within the level and ``max_active`` limits."""
        s = list(self.check(strategy))
        active = sum(1 for v in s if v)
        out = []
        for i, v in enumerate(s):
            for d in (-1, 1):
                w = v + d
                if abs(w) > self.max_level or (v == 0 and active >= self.max_active):
                    continue
                t = s.copy()
                t[i] = w
                out.append(tuple(t))
        return out

    def features(self, strategies: Sequence[Sequence[int]]) -> NDArray[np.float64]:
        """Surrogate features ``[max(s, 0), max(-s, 0)]`` per axis: 2K columns, level units."""
        S = np.asarray(strategies, dtype=np.float64).reshape(-1, self.dim)
        return np.concatenate([np.maximum(S, 0.0), np.maximum(-S, 0.0)], axis=1)

    def feature_names(self) -> list[str]:
        return [f"{n}+" for n in self.names] + [f"{n}-" for n in self.names]

    def enumerate_singles(self) -> list[tuple[int, ...]]:
        """Every single-axis strategy (axis × non-zero level), in axis then level order."""
        levels = [v for v in range(-self.max_level, self.max_level + 1) if v]
        return [self.single(a.name, v) for a, v in itertools.product(self.axes, levels)]
