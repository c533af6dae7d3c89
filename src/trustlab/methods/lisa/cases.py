"""Cases (an agent action in context) and decisions (allow/block with a score).

Two kinds of case share one frozen dataclass:

* a structured contextual-integrity **flow**: ``data_type``, ``data_subject``, ``sender``,
  ``recipient``, ``transmission_principle`` plus the ``action`` text;
* a free-text **agent action**: ``action``, ``tool``, ``arguments``, ``instruction``.

Labels are ints: ``BLOCK = 1`` (the action violates the norm) and ``ALLOW = 0``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trustlab.core.errors import InputError

__all__ = [
    "ALLOW",
    "BLOCK",
    "FLOW_FIELDS",
    "Case",
    "Decision",
    "FiredEntry",
    "label_from_str",
    "label_to_str",
]

BLOCK = 1
ALLOW = 0
FLOW_FIELDS = ("data_type", "data_subject", "sender", "recipient", "transmission_principle")
ACTION_FIELDS = ("tool", "instruction")


def _norm(value: str) -> str:
    return " ".join(str(value).strip().lower().split())


@dataclass(frozen=True)
class Case:
    """An agent action in context. ``kind`` is ``"flow"`` or ``"action"``.

    ``arguments`` is stored as a tuple of ``(key, value)`` pairs so cases stay hashable;
    build cases with :meth:`flow`, :meth:`tool_action` or :meth:`from_dict`.
    """

    kind: str
    action: str = ""
    data_type: str = ""
    data_subject: str = ""
    sender: str = ""
    recipient: str = ""
    transmission_principle: str = ""
    tool: str = ""
    arguments: tuple[tuple[str, str], ...] = ()
    instruction: str = ""
    meta: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    # -- construction -----------------------------------------------------------------
    @classmethod
    def flow(
        cls,
        data_type: str,
        data_subject: str,
        sender: str,
        recipient: str,
        transmission_principle: str,
        action: str = "",
        **meta: str,
    ) -> Case:
        return cls(
            "flow",
            action=action,
            data_type=data_type,
            data_subject=data_subject,
            sender=sender,
            recipient=recipient,
            transmission_principle=transmission_principle,
            meta=tuple(sorted((k, str(v)) for k, v in meta.items())),
        )

    @classmethod
    def tool_action(
        cls,
        action: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        instruction: str = "",
        **meta: str,
    ) -> Case:
        args = tuple(sorted((str(k), _arg_str(v)) for k, v in (arguments or {}).items()))
        return cls(
            "action",
            action=action,
            tool=tool,
            arguments=args,
            instruction=instruction,
            meta=tuple(sorted((k, str(v)) for k, v in meta.items())),
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Case:
        """A flow when any contextual-integrity field is present, else a tool action."""
        if not isinstance(data, Mapping):
            raise InputError(f"A case must be a mapping of fields. Got {type(data).__name__}.")
        if any(data.get(f) for f in FLOW_FIELDS):
            missing = [f for f in FLOW_FIELDS if not str(data.get(f) or "").strip()]
            if missing:
                raise InputError(f"A structured case needs the field '{missing[0]}'.")
            return cls.flow(*(str(data[f]) for f in FLOW_FIELDS), action=str(data.get("action") or ""))
        if not str(data.get("action") or "").strip() and not str(data.get("tool") or "").strip():
            raise InputError("A free-text case needs the field 'action' (or 'tool').")
        args = data.get("arguments") or {}
        if not isinstance(args, Mapping):
            raise InputError("The field 'arguments' of a case must be an object.")
        return cls.tool_action(
            str(data.get("action") or ""),
            str(data.get("tool") or ""),
            args,
            str(data.get("instruction") or ""),
        )

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "flow":
            out: dict[str, Any] = {f: getattr(self, f) for f in FLOW_FIELDS}
            out["action"] = self.action
            return out
        return {
            "action": self.action,
            "tool": self.tool,
            "arguments": dict(self.arguments),
            "instruction": self.instruction,
        }

    # -- views ------------------------------------------------------------------------
    def attributes(self) -> dict[str, str]:
        """Normalised attribute values that memory rules condition on."""
        if self.kind == "flow":
            return {f: _norm(getattr(self, f)) for f in FLOW_FIELDS}
        attrs = {"tool": _norm(self.tool), "instruction": _norm(self.instruction or self.action)}
        for key, value in self.arguments:
            attrs[f"arg.{key}"] = _norm(value)
        return attrs

    def text(self) -> str:
        """The text a text model (embedding classifier, LLM judge) reads."""
        if self.kind == "flow":
            head = (
                f"{self.sender} shares {self.data_type} about {self.data_subject} "
                f"with {self.recipient} ({self.transmission_principle})."
            )
            return f"{head} {self.action}".strip()
        args = ", ".join(f"{k}={v}" for k, v in self.arguments)
        parts = [f"Instruction: {self.instruction}" if self.instruction else "",
                 f"Tool call: {self.tool}({args})" if self.tool else "", self.action]
        return " ".join(p for p in parts if p).strip()

    def key(self) -> str:
        """A stable identity string (used for storage and caches)."""
        return json.dumps(self.to_dict(), sort_keys=True)


def _arg_str(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def label_from_str(value: str) -> int:
    v = str(value).strip().lower()
    if v == "block":
        return BLOCK
    if v == "allow":
        return ALLOW
    raise InputError(f"A label must be 'allow' or 'block'. Got {value!r}.")


def label_to_str(label: int) -> str:
    return "block" if int(label) == BLOCK else "allow"


@dataclass(frozen=True)
class FiredEntry:
    """A memory entry that matched a case, and what it did (``override``, ``agree``, ``gated``)."""

    entry_id: str
    label: int
    lower_bound: float
    base_reliability: float
    effect: str


@dataclass(frozen=True)
class Decision:
    """``block`` is the verdict, ``score`` the probability of block, ``source`` who decided."""

    block: bool
    score: float
    source: str = "base"
    base_score: float = float("nan")
    fired: tuple[FiredEntry, ...] = ()

    @property
    def label(self) -> int:
        return BLOCK if self.block else ALLOW
