"""One chat formatter: a conversation as the prompt text a model sees.

``format_chat(conversation, template)`` renders with

* a tokenizer: its chat template when it has one (``apply_chat_template``), else the plain
  template below;
* a Jinja chat-template string (e.g. the organisms' ``CHAT_TEMPLATE``), rendered the way
  ``transformers`` renders templates (sandboxed, ``trim_blocks``/``lstrip_blocks``);
* None: the plain template.

Plain template (used when there is no chat template): each message becomes one line
``{Role}: {content}`` (Role = System, User or Assistant), lines joined by ``\\n``; the
generation prompt appends the line ``Assistant:``. A string is one user message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from trustlab.core.errors import InputError

__all__ = ["as_conversation", "format_chat", "format_plain"]

Conversation = Sequence[Mapping[str, str]]


def _content(value: Any) -> Any:
    """A message content: text as a string; a list of parts (images) normalised
    (:func:`trustlab.lm.content.normalise_content`)."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        from trustlab.lm.content import normalise_content

        return normalise_content(value)
    if not isinstance(value, str):  # None used to render as the text "None"
        raise TypeError(f"a message content is text or a list of parts, not {type(value).__name__}")
    return value


def _template_view(conv: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a chat template sees: image parts as ``{"type": "image"}`` markers (HF style)."""
    return [
        {"role": m["role"], "content": m["content"] if isinstance(m["content"], str) else [
            {"type": "image"} if p["type"] == "image" else p for p in m["content"]]}
        for m in conv
    ]  # fmt: skip


def as_conversation(prompt: str | Conversation) -> list[dict[str, Any]]:
    """A user instruction string becomes a one-message conversation; conversations are copied.

    A content that is a list of parts (text and images, :mod:`trustlab.lm.content`) stays a
    list, with its images as RGB PIL images."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    try:
        conv = [{"role": m["role"], "content": _content(m["content"])} for m in prompt]
        if not all(isinstance(m["role"], str) and m["role"] for m in conv):
            raise TypeError("a role is a non-empty string")  # 3 rendered as <|3|>
        return conv
    except (KeyError, TypeError) as exc:
        raise InputError(
            "A conversation is a list of {'role': ..., 'content': ...} messages. "
            f"Got {prompt!r:.80}."
        ) from exc


def format_plain(conversation: Conversation, add_generation_prompt: bool = True) -> str:
    """The plain template (see the module docstring)."""
    from trustlab.lm.content import content_text

    lines = [f"{str(m['role']).capitalize()}: {content_text(m['content'])}" for m in conversation]
    if add_generation_prompt:
        lines.append("Assistant:")
    return "\n".join(lines)


@lru_cache(maxsize=32)
def _compiled(template: str) -> Any:
    from jinja2 import TemplateSyntaxError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    try:
        return env.from_string(template)
    except TemplateSyntaxError as exc:  # used to escape as a raw jinja2 traceback
        raise InputError(
            f"The chat template is not valid Jinja (line {exc.lineno}: {exc.message})."
        ) from None


def format_chat(
    conversation: str | Conversation,
    template: Any = None,
    *,
    add_generation_prompt: bool = True,
) -> str:
    """Render ``conversation`` with ``template`` (a tokenizer, a Jinja string or None)."""
    conv = _template_view(as_conversation(conversation))
    if template is None:
        return format_plain(conv, add_generation_prompt)
    if isinstance(template, str):
        return _compiled(template).render(
            messages=conv, add_generation_prompt=add_generation_prompt
        )
    if getattr(template, "chat_template", None):
        return template.apply_chat_template(
            conv, tokenize=False, add_generation_prompt=add_generation_prompt
        )
    if hasattr(template, "encode") or callable(template):
        return format_plain(conv, add_generation_prompt)
    raise InputError(
        f"format_chat takes a tokenizer, a Jinja template string or None. Got "
        f"{type(template).__name__}."
    )
