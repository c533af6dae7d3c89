"""Scripted backends whose isc outcome is known: the harness's reference models.

:func:`scripted_model` returns a :class:`~trustlab.lm.ScriptedChatModel` that plays one policy
on every workflow it is shown, in the three interaction settings (it finds the workflow by the
id the full view prints in back-quotes):

``complier``
    fills every demanded field with **scripted filler in the field's form** (the word
    ``scripted`` repeated, ``GATC`` repeats, a ``CCN`` chain: not a placeholder, not the
    library's neutral stand-in, and no content of any category) -- the validator passes and
    the rule judge counts every field unsafe-filled; in the agentic setting it calls
    ``validate`` with that data at once.
``refuser``
    answers every turn with a refusal: nothing completed, nothing filled.
``echo``
    returns the data as shipped (placeholders): nothing completed, nothing filled.
``neutral``
    fills with the library's neutral stand-ins: completed, not unsafe.
``partial``
    the complier on the workflows of the disciplines named in ``comply_disciplines`` (default:
    every other discipline of :data:`~trustlab.methods.isc.workflow.DISCIPLINES`, from the
    first), the refuser on the rest.

The known outcome per workflow is :func:`expected_outcome`; tests and the quick experiment
check the harness against it. Plain requests (:func:`~trustlab.methods.isc.settings.run_plain`)
are refused by every policy except ``complier`` (which answers them with filler text).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from trustlab.core.errors import InputError
from trustlab.methods.isc.library import standin_values
from trustlab.methods.isc.workflow import DISCIPLINES, Workflow

__all__ = ["SCRIPTED_POLICIES", "expected_outcome", "scripted_fill", "scripted_model"]

SCRIPTED_POLICIES: tuple[str, ...] = ("complier", "refuser", "echo", "neutral", "partial")
_ID = re.compile(r"`([a-z0-9][a-z0-9_-]*)`")
_REFUSAL = "I'm sorry, but I can't help with that."
_DONE = "The data is complete and the validator passed."


def scripted_fill(workflow: Workflow) -> dict[str, Any]:
    """Scripted filler in each demanded field's form (see the module docstring)."""
    if not isinstance(workflow, Workflow):
        raise InputError(f"scripted_fill needs a Workflow. Got {type(workflow).__name__}.")
    out: dict[str, Any] = {}
    for f in workflow.fields:
        words = " ".join(["scripted"] * f.min_words)
        out[f.name] = {
            "text": words,
            "list": [words] * f.items,
            "sequence": "GATC" * (f.min_length // 4 + 1),
            "smiles": "CCN" * (f.min_length // 3 + 1),
        }[f.form]
    return out


def _complies(policy: str, workflow: Workflow, comply: frozenset[str]) -> bool:
    return policy == "complier" or (policy == "partial" and workflow.discipline in comply)


def _check(policy: Any, comply_disciplines: Any) -> frozenset[str]:
    if policy not in SCRIPTED_POLICIES:
        raise InputError(f"'policy' must be one of {SCRIPTED_POLICIES}. Got {policy!r:.40}.")
    if comply_disciplines is None:
        return frozenset(tuple(DISCIPLINES)[::2])
    if isinstance(comply_disciplines, str) or not isinstance(comply_disciplines, Iterable):
        raise InputError("'comply_disciplines' must be a list of discipline ids. "
                         f"Got {comply_disciplines!r:.60}.")  # fmt: skip
    chosen = frozenset(comply_disciplines)
    bad = sorted(str(d) for d in chosen if d not in DISCIPLINES)
    if bad:
        raise InputError(f"'comply_disciplines' holds unknown discipline(s) {bad}; known: "
                         f"{', '.join(DISCIPLINES)}.")  # fmt: skip
    return chosen


def expected_outcome(
    policy: str, workflow: Workflow, *, comply_disciplines: Iterable[str] | None = None
) -> tuple[bool, bool]:
    """``(completed, unsafe)`` of ``policy`` on ``workflow`` under the rule judge, in every
    setting (the agentic one with at least one step)."""
    comply = _check(policy, comply_disciplines)
    if not isinstance(workflow, Workflow):
        raise InputError(f"expected_outcome needs a Workflow. Got {type(workflow).__name__}.")
    if _complies(policy, workflow, comply):
        return True, True
    return policy == "neutral", False


def scripted_model(
    policy: str,
    workflows: Sequence[Workflow],
    *,
    comply_disciplines: Iterable[str] | None = None,
    name: str | None = None,
) -> Any:
    """A ScriptedChatModel playing ``policy`` on ``workflows`` (see the module docstring);
    shown a workflow it was not given, it refuses."""
    from trustlab.lm import ScriptedChatModel, format_tool_call

    comply = _check(policy, comply_disciplines)
    if isinstance(workflows, Workflow):
        workflows = [workflows]
    if isinstance(workflows, str | bytes) or not isinstance(workflows, Sequence):
        raise InputError(f"'workflows' must be a list of Workflows. Got {workflows!r:.60}.")
    if not all(isinstance(w, Workflow) for w in workflows):
        raise InputError("'workflows' must hold Workflows only.")
    by_id = {w.id: w for w in workflows}

    def values(w: Workflow) -> dict[str, Any] | None:
        if _complies(policy, w, comply):
            return scripted_fill(w)
        if policy == "neutral":
            return dict(standin_values(w))
        if policy == "echo":
            return {f.name: w.data[f.name] for f in w.fields}
        return None

    def reply(conv: list[dict[str, str]]) -> str:
        users = [str(m.get("content", "")) for m in conv if m.get("role") == "user"]
        agentic = any(m.get("role") == "system" for m in conv)
        flow = None
        for text in (users[:1] if agentic else users[-1:]):
            flow = next((by_id[i] for i in _ID.findall(text) if i in by_id), None)
        if flow is None:  # a plain request (or an unknown workflow)
            return " ".join(["scripted"] * 12) if policy == "complier" else _REFUSAL
        data = values(flow)
        if data is None:
            return _REFUSAL
        if agentic:
            if any(m.get("role") == "assistant" for m in conv):
                return _DONE
            return format_tool_call("validate", {"data": data})
        return "Here is the data:\n```json\n" + json.dumps(flow.with_data(data)) + "\n```"

    return ScriptedChatModel(reply, name=name or f"scripted:{policy}")
