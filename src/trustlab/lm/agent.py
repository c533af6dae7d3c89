"""An agent/tool loop over any :class:`~trustlab.lm.chat.ChatModel`, in a text tool protocol.

The model calls a tool by writing ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
(the form the tool organisms are trained on, Hermes/Qwen style; parsed by
:func:`~trustlab.lm.judges.parse_tool_call`). The loop runs the tool and feeds its result back
as a message ``<tool_response>{"name": ..., "content": ...}</tool_response>`` (by default in a
``user`` turn, which every chat template renders), until the model answers without a tool
call, a tool ends the episode, or ``max_steps`` model turns have been taken.

    from trustlab import lm

    def add(args, ctx):
        return str(args["a"] + args["b"])

    tools = [lm.Tool("add", "add two numbers", {"a": "number", "b": "number"}, add)]
    system = lm.tools_system_prompt(tools)
    episodes = lm.run_agent(chat, [[{"role": "system", "content": system},
                                    {"role": "user", "content": "What is 2 + 3?"}]], tools)
    episodes[0].final, episodes[0].calls, episodes[0].stop

Episodes advance **together**: each step sends every unfinished conversation to the model in
one ``generate`` call (one batch for local models), so N episodes cost about as many model
calls as the longest one. A tool gets ``(arguments, context)``: ``context`` is the episode's
own object (``contexts[i]``), e.g. a private working directory. Tool errors never end the
loop: an unknown tool, arguments that miss a required key or have the wrong type, a malformed
``<tool_call>`` and an exception inside the tool each become an ``error`` observation the model
sees (and ``AgentCall.ok`` is False), as an agent framework would report them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from trustlab.core.errors import InputError
from trustlab.lm.judges import parse_tool_call

__all__ = [
    "OBSERVATION_FORMAT",
    "AgentCall",
    "Episode",
    "Tool",
    "ToolResult",
    "format_observation",
    "format_tool_call",
    "run_agent",
    "tools_system_prompt",
]

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "any": (object,),
}
_CALL_OPEN = re.compile(r"<tool_call>", re.IGNORECASE)


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns when it wants more than a string: the observation ``content`` (any
    JSON value), whether the call succeeded, and whether the episode ends here (``stop``)."""

    content: Any
    ok: bool = True
    stop: bool = False


@dataclass(frozen=True)
class Tool:
    """A tool the model may call.

    ``parameters`` maps each argument name to a type (``string``, ``number``, ``integer``,
    ``boolean``, ``object``, ``array``, ``any``), or is a JSON-schema object
    (``{"type": "object", "properties": {...}, "required": [...]}``); in the short form every
    argument is required. ``fn(arguments, context)`` returns a string, any JSON value or a
    :class:`ToolResult`.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    fn: Callable[[dict[str, Any], Any], Any]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.fullmatch(
            r"[A-Za-z_][A-Za-z0-9_\-]*", self.name
        ):
            raise InputError(f"A tool name is an identifier. Got {self.name!r}.")
        if not callable(self.fn):
            raise InputError(f"Tool {self.name!r} needs a callable fn.")
        if not isinstance(self.description, str):  # None used to be shown to the model as null
            raise InputError(f"Tool {self.name!r} needs a text description. Got {self.description!r:.40}.")
        if not isinstance(self.parameters, Mapping):  # a list used to raise a raw ValueError
            raise InputError(
                f"Tool {self.name!r}: 'parameters' maps argument names to types (or is a JSON "
                f"schema object). Got {type(self.parameters).__name__}."
            )
        self.schema()  # checks the parameter types

    def schema(self) -> dict[str, Any]:
        """The parameters as a JSON-schema object."""
        params = dict(self.parameters)
        if params.get("type") == "object" and "properties" in params:
            props = dict(params["properties"])
            required = list(params.get("required", []))
        else:
            props = {k: {"type": v} if isinstance(v, str) else dict(v) for k, v in params.items()}
            required = list(props)
        for key, spec in props.items():
            kind = spec.get("type", "any")
            if kind not in _TYPES:
                raise InputError(
                    f"Tool {self.name!r}: argument {key!r} has type {kind!r}; known types: "
                    f"{', '.join(_TYPES)}."
                )
        unknown = [r for r in required if r not in props]
        if unknown:
            raise InputError(f"Tool {self.name!r} requires undeclared arguments {unknown}.")
        return {"type": "object", "properties": props, "required": required}

    def describe(self) -> dict[str, Any]:
        schema = self.schema()
        short = {k: v.get("type", "any") for k, v in schema["properties"].items()}
        return {"name": self.name, "description": self.description, "parameters": short}

    def check(self, arguments: Any) -> str | None:
        """Why ``arguments`` do not fit the schema, or None when they do."""
        if not isinstance(arguments, dict):
            return f"arguments must be an object, got {type(arguments).__name__}"
        schema = self.schema()
        missing = [k for k in schema["required"] if k not in arguments]
        if missing:
            return f"missing argument(s) {', '.join(missing)}"
        for key, value in arguments.items():
            spec = schema["properties"].get(key)
            if spec is None:
                return f"unknown argument {key!r}"
            kind = spec.get("type", "any")
            ok = isinstance(value, _TYPES[kind]) and not (
                kind in ("number", "integer") and isinstance(value, bool)
            )
            if not ok:
                return f"argument {key!r} must be of type {kind}"
        return None


@dataclass(frozen=True)
class AgentCall:
    """One tool call of an episode: which tool, with what, and what came back."""

    step: int
    name: str | None
    arguments: Any
    ok: bool
    observation: Any


@dataclass
class Episode:
    """One conversation run to its end. ``messages`` is the full transcript (the input
    conversation, then every assistant turn and observation); ``final`` is the last assistant
    reply that called no tool (None when the episode ended otherwise); ``stop`` says why it
    ended: ``final`` (the model answered), ``tool`` (a tool ended it) or ``max_steps``."""

    messages: list[dict[str, str]]
    calls: list[AgentCall] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)  # every assistant turn, in order
    final: str | None = None
    stop: Literal["final", "tool", "max_steps"] | None = None

    @property
    def steps(self) -> int:
        """Model turns taken."""
        return len(self.replies)


def tools_system_prompt(tools: Sequence[Tool], preamble: str = "You are an agent.") -> str:
    """A system prompt that lists ``tools`` (name, description, parameters) as JSON and says
    how to call them."""
    tools = _tool_map(tools)
    listing = json.dumps([t.describe() for t in tools.values()], separators=(", ", ": "))
    return (
        f"{preamble} You can call tools. Tools: {listing}. "
        'To call one, answer with <tool_call>{"name": ..., "arguments": {...}}</tool_call>.'
    )


def _tool_map(tools: Sequence[Tool] | Mapping[str, Tool]) -> dict[str, Tool]:
    items = list(tools.values()) if isinstance(tools, Mapping) else list(tools)
    if not items or not all(isinstance(t, Tool) for t in items):
        raise InputError("'tools' must be a non-empty list of lm.Tool.")
    names = [t.name for t in items]
    if len(set(names)) != len(names):
        raise InputError(f"Tool names must be distinct. Got {names}.")
    return {t.name: t for t in items}


OBSERVATION_FORMAT = "<tool_response>{}</tool_response>"


def format_observation(
    name: str | None, content: Any, ok: bool = True, fmt: str = OBSERVATION_FORMAT
) -> str:
    """The text of one observation, exactly as :func:`run_agent` writes it (training data for a
    tool-calling model can use it to match the loop)."""
    if name is not None and not isinstance(name, str):
        raise InputError(f"format_observation: 'name' must be a str or None. Got {name!r:.60}.")
    if not isinstance(fmt, str) or "{}" not in fmt:
        raise InputError(f"format_observation: 'fmt' must contain {{}} where the payload goes. "
                         f"Got {fmt!r:.60}.")  # fmt: skip
    payload = {"name": name, "content" if ok else "error": content}
    return fmt.format(json.dumps(payload, ensure_ascii=False, default=str))


def format_tool_call(name: str, arguments: Mapping[str, Any]) -> str:
    """``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` as a model would write it
    (:func:`~trustlab.lm.judges.parse_tool_call` reads it back)."""
    if not isinstance(name, str) or not name:
        raise InputError(f"format_tool_call: 'name' must be a non-empty str. Got {name!r:.60}.")
    if not isinstance(arguments, Mapping):
        raise InputError(f"format_tool_call: 'arguments' must be a mapping. Got "
                         f"{type(arguments).__name__}.")  # fmt: skip
    try:
        payload = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InputError(f"format_tool_call: 'arguments' must be JSON-serialisable ({exc}).") \
            from None  # fmt: skip
    return f"<tool_call>{payload}</tool_call>"


def _call_tool(tool: Tool, arguments: dict[str, Any], context: Any) -> tuple[Any, bool, bool]:
    problem = tool.check(arguments)
    if problem is not None:
        return f"invalid arguments for {tool.name}: {problem}", False, False
    try:
        out = tool.fn(arguments, context)
    except Exception as exc:  # a tool's failure is an observation, never a crash of the loop
        return f"{tool.name} failed: {type(exc).__name__}: {exc}"[:2000], False, False
    if isinstance(out, ToolResult):
        return out.content, bool(out.ok), bool(out.stop)
    return out, True, False


def run_agent(
    model: Any,
    conversations: Sequence[Sequence[Mapping[str, str]]],
    tools: Sequence[Tool] | Mapping[str, Tool],
    *,
    max_steps: int = 8,
    contexts: Sequence[Any] | None = None,
    max_new_tokens: int = 128,
    temperature: float = 0.0,
    seed: int = 0,
    observation_role: str = "user",
    observation_format: str = OBSERVATION_FORMAT,
    progress: Callable[..., Any] | None = None,
) -> list[Episode]:
    """Run one agent episode per conversation (see the module docstring).

    ``max_steps`` bounds the model turns of an episode. ``observation_role`` is the role of the
    messages that carry tool results (``user``: every template renders it; ``tool`` for
    templates with a tool role); ``observation_format`` wraps the JSON payload.
    """
    if not hasattr(model, "generate"):
        raise InputError(
            f"run_agent needs a ChatModel (with .generate). Got {type(model).__name__}."
        )
    if isinstance(conversations, str | Mapping) or not isinstance(conversations, Sequence):
        raise InputError("'conversations' must be a list of conversations (lists of messages).")
    tool_map = _tool_map(tools)
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise InputError(f"'max_steps' must be a whole number >= 1. Got {max_steps!r}.")
    if not isinstance(observation_role, str) or not observation_role:
        raise InputError(f"'observation_role' must be a role name. Got {observation_role!r:.40}.")
    if not isinstance(observation_format, str) or "{}" not in observation_format:
        raise InputError("'observation_format' must contain {} where the payload goes.")
    if contexts is not None and len(contexts) != len(conversations):
        raise InputError(
            f"'contexts' must hold one entry per conversation ({len(conversations)}). "
            f"Got {len(contexts)}."
        )
    episodes = []
    for i, conv in enumerate(conversations):
        if isinstance(conv, str):
            conv = [{"role": "user", "content": conv}]
        if not all(isinstance(m, Mapping) and "role" in m and "content" in m for m in conv):
            raise InputError(
                f"Conversation {i} must be a string or a list of {{role, content}} messages."
            )
        msgs = [{"role": str(m["role"]), "content": str(m["content"])} for m in conv]
        if not msgs:
            raise InputError(f"Conversation {i} is empty.")
        episodes.append(Episode(messages=msgs))
    steps = range(max_steps)
    for step in progress(steps, description="agent steps") if progress is not None else steps:
        active = [(i, e) for i, e in enumerate(episodes) if e.stop is None]
        if not active:
            break
        replies = model.generate(
            [e.messages for _, e in active], max_new_tokens=max_new_tokens,
            temperature=temperature, seed=seed + step,
        )  # fmt: skip
        if not isinstance(replies, list) or len(replies) != len(active):
            raise InputError(
                f"{getattr(model, 'name', type(model).__name__)} returned a wrong number of "
                f"replies ({len(replies) if isinstance(replies, list) else '?'}) for "
                f"{len(active)} conversations."
            )
        for (index, episode), reply in zip(active, replies, strict=True):
            reply = str(reply)
            episode.replies.append(reply)
            episode.messages.append({"role": "assistant", "content": reply})
            payload = parse_tool_call(reply)
            if payload is None and not _CALL_OPEN.search(reply):
                episode.final, episode.stop = reply, "final"
                continue
            if payload is None:
                name, args = None, None
                content, ok, stop = "malformed tool call: expected <tool_call>{json with name "\
                    "and arguments}</tool_call>", False, False  # fmt: skip
            else:
                name, args = payload.get("name"), payload.get("arguments")
                tool = tool_map.get(name) if isinstance(name, str) else None
                if tool is None:
                    content, ok, stop = (
                        f"unknown tool {name!r}; tools: {', '.join(tool_map)}",
                        False,
                        False,
                    )
                else:
                    ctx = contexts[index] if contexts is not None else None
                    content, ok, stop = _call_tool(tool, args, ctx)
            episode.calls.append(AgentCall(episode.steps, name, args, ok, content))
            episode.messages.append(
                {"role": observation_role,
                 "content": format_observation(name, content, ok, observation_format)}
            )  # fmt: skip
            if stop:
                episode.stop = "tool"
    for episode in episodes:
        if episode.stop is None:
            episode.stop = "max_steps"
    return episodes
