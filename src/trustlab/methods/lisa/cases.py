"""Cases (an agent action in context) and decisions (allow/block with a score).

Two kinds of case share one frozen dataclass:

* a structured contextual-integrity **flow**: ``data_type``, ``data_subject``, ``sender``,
  ``recipient``, ``transmission_principle`` plus the ``action`` text;
* a free-text **agent action**: ``action``, ``tool``, ``arguments``, ``instruction``.

Labels are ints: ``BLOCK = 1`` (the action violates the norm) and ``ALLOW = 0``.
"""

from __future__ import annotations

import json
import numbers
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
    "as_case",
    "as_label",
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

    def __post_init__(self) -> None:
        """A case is what the memory can be taught about: a flow with its five contextual-
        integrity fields, or an action with an action text or a tool (checked here, so
        ``Case(...)``, :meth:`flow`, :meth:`tool_action` and :meth:`from_dict` agree)."""
        if self.kind not in ("flow", "action"):
            raise InputError(f"The 'kind' of a Case must be 'flow' or 'action'. Got {self.kind!r}.")
        text_fields = ("action", *FLOW_FIELDS, "tool", "instruction")
        for name in text_fields:
            if not isinstance(getattr(self, name), str):
                raise InputError(f"The '{name}' field of a Case must be a string. "
                                 f"Got {type(getattr(self, name)).__name__}.")
        for name in ("arguments", "meta"):
            pairs = getattr(self, name)
            if not isinstance(pairs, tuple) or not all(
                isinstance(p, tuple) and len(p) == 2 and all(isinstance(v, str) for v in p)
                for p in pairs
            ):
                raise InputError(f"The '{name}' field of a Case must be a tuple of (str, str) "
                                 "pairs; build cases with Case.tool_action or Case.from_dict.")
        if self.kind == "flow":
            missing = [f for f in FLOW_FIELDS if not getattr(self, f).strip()]
            if missing:
                raise InputError(f"A structured case needs the field '{missing[0]}'.")
        elif not self.action.strip() and not self.tool.strip():
            raise InputError("A free-text case needs the field 'action' (or 'tool').")

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
        if arguments is not None and not isinstance(arguments, Mapping):
            raise InputError("The 'arguments' of a tool action must be a mapping of argument "
                             f"names to values. Got {type(arguments).__name__}.")
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
        known = {*FLOW_FIELDS, "action", "tool", "arguments", "instruction"}
        unknown = sorted(str(k) for k in data if k not in known)
        if unknown:
            raise InputError(f"A case has no field '{unknown[0]}'. Fields: "
                             f"{', '.join(sorted(known))}.")
        for name, value in data.items():
            if name != "arguments" and value is not None and not isinstance(value, str):
                raise InputError(f"The field '{name}' of a case must be a string. "
                                 f"Got {type(value).__name__}.")
        if any(data.get(f) for f in FLOW_FIELDS):
            return cls.flow(*(data.get(f) or "" for f in FLOW_FIELDS),
                            action=data.get("action") or "")
        args = data.get("arguments") or {}
        if not isinstance(args, Mapping):
            raise InputError("The field 'arguments' of a case must be an object.")
        return cls.tool_action(
            data.get("action") or "",
            data.get("tool") or "",
            args,
            data.get("instruction") or "",
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
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        raise InputError("A tool argument must be a string or JSON (numbers, lists, objects). "
                         f"Got {type(value).__name__}.") from None


def label_from_str(value: str) -> int:
    if not isinstance(value, str):
        raise InputError(f"A label must be 'allow' or 'block'. Got {value!r}.")
    v = value.strip().lower()
    if v == "block":
        return BLOCK
    if v == "allow":
        return ALLOW
    raise InputError(f"A label must be 'allow' or 'block'. Got {value!r}.")


def as_label(label: Any, name: str = "label", where: str = "a report") -> int:
    """The one label rule: ``"block"``/``"allow"`` (any case) or the numbers 1/0 (an int, or a
    float that is exactly 1.0/0.0). Anything else, e.g. 1.9, 0.5, None or True, is an error:
    a label is never rounded or cast into one."""
    if isinstance(label, str) and label.strip().lower() in ("allow", "block"):
        return label_from_str(label)
    if isinstance(label, str | bool) or not isinstance(label, numbers.Real) or label not in (0, 1):
        raise InputError(f"The '{name}' of {where} must be 'allow', 'block', 0 or 1. "
                         f"Got {label!r}.")
    return BLOCK if label == 1 else ALLOW


def as_case(case: Any, name: str = "case", where: str = "LiSA") -> Case:
    """A :class:`Case`, or a mapping of its fields (read by :meth:`Case.from_dict`); anything
    else (a string, a list) is an error rather than a guess at which field it fills."""
    if isinstance(case, Case):
        return case
    if isinstance(case, Mapping):
        return Case.from_dict(case)
    raise InputError(f"The '{name}' parameter of {where} must be a Case (or a mapping of its "
                     f"fields, see Case.from_dict). Got {type(case).__name__}.")


def label_to_str(label: int | str) -> str:
    return "block" if as_label(label) == BLOCK else "allow"


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
