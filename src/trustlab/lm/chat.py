"""Chat backends behind one protocol: ``ChatModel.generate(conversations, ...) -> list[str]``.

    HFChatModel        a local LanguageModel (batched, greedy or sampled, interventions allowed)
    OpenAIChatModel    any OpenAI-compatible server (vLLM, TGI, Ollama, ...), with timeouts,
                       retries with backoff, a concurrency limit and an on-disk response cache
    ScriptedChatModel  a test double that answers from a script and records its calls

``chat_model(spec)`` builds one from a spec string: ``hf:/path``, ``organism:<name>`` or
``openai:http://host:port/v1#model-name``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from trustlab.core.errors import (
    BackendError,
    DataError,
    InputError,
    MissingDependencyError,
)
from trustlab.core.io import write_json_atomic
from trustlab.core.validation import check_scalar
from trustlab.lm.interventions import Intervention, intervene
from trustlab.lm.model import LanguageModel, Prompt, as_conversation

__all__ = [
    "ChatBackendError",
    "ChatModel",
    "HFChatModel",
    "OpenAIChatModel",
    "ScriptedChatModel",
    "chat_model",
    "parse_openai_spec",
]

log = logging.getLogger(__name__)


class ChatBackendError(BackendError):
    """A chat server could not be reached or kept failing after the allowed retries."""


@runtime_checkable
class ChatModel(Protocol):
    """Anything that turns conversations into replies."""

    name: str

    def generate(
        self,
        conversations: Sequence[Prompt],
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> list[str]: ...


def _check_common(
    conversations: Sequence[Prompt], max_new_tokens: int, temperature: float, seed: int = 0
):
    if not isinstance(conversations, Sequence):  # None and ints used to raise raw TypeErrors
        raise InputError(
            f"generate takes a list of conversations (or instructions). Got "
            f"{type(conversations).__name__}."
        )
    if isinstance(conversations, str) or (
        len(conversations) > 0 and isinstance(conversations[0], Mapping)
    ):
        raise InputError("generate takes a list of conversations (or instructions), not one.")
    # 2.5 tokens used to mean 2, "abc" and None raised raw errors, an infinite temperature passed
    check_scalar(max_new_tokens, "max_new_tokens", "generate", kind=int, lo=1)
    check_scalar(temperature, "temperature", "generate", lo=0.0)
    check_scalar(seed, "seed", "generate", kind=int)
    return [as_conversation(c) for c in conversations]


class HFChatModel:
    """Chat with a local :class:`LanguageModel` through the KV-cached decoder
    (:func:`trustlab.lm.decoding.generate_rows`).

    ``temperature=0`` is greedy (the same replies as ``transformers``' greedy ``generate``,
    tested); otherwise plain sampling (no top-k/top-p) from a private generator seeded by
    ``seed``, so the global torch RNG is left untouched. Replies for one batch composition are
    reproducible; ``interventions`` are active during every generation. ``generate`` also takes
    a stop rule (``settled``) and per-row ``steering`` (see the decoder).
    """

    def __init__(
        self,
        lm: LanguageModel,
        *,
        batch_size: int = 16,
        interventions: Sequence[Intervention] = (),
        name: str | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"batch_size must be a whole number >= 1. Got {batch_size!r}.")
        if not isinstance(lm, LanguageModel):  # None used to raise a raw AttributeError
            raise InputError(
                f"HFChatModel wraps an lm.LanguageModel (lm.load(...)). Got {type(lm).__name__}."
            )
        self.lm = lm
        self.batch_size = batch_size
        self.interventions = tuple(interventions)
        self.name = name or lm.spec or lm.adapter.model_type

    def with_interventions(self, *interventions: Intervention) -> HFChatModel:
        """A copy of this backend with extra interventions applied during generation."""
        return HFChatModel(
            self.lm,
            batch_size=self.batch_size,
            interventions=(*self.interventions, *interventions),
            name=self.name,
        )

    def generate(
        self,
        conversations: Sequence[Prompt],
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        seed: int = 0,
        *,
        settled: Callable[[int, str], bool] | None = None,
        steering: Any = None,
        progress: Callable[..., Any] | None = None,
    ) -> list[str]:
        convs = _check_common(conversations, max_new_tokens, temperature, seed)
        from trustlab.lm.decoding import generate_rows

        with intervene(self.lm, *self.interventions):
            return generate_rows(
                self.lm,
                convs,
                max_new_tokens=int(max_new_tokens),
                temperature=float(temperature),
                seed=int(seed),
                settled=settled,
                steering=steering,
                batch_size=self.batch_size,
                progress=progress,
            )


class ScriptedChatModel:
    """A test double: replies come from ``script`` and every call is recorded in ``calls``.

    ``script`` is a callable ``conversation -> reply``, a mapping from the last user message
    to a reply (``default`` answers the rest; without it a miss is an error), or a list of
    replies given out in order.
    """

    def __init__(
        self,
        script: Callable[[list[dict[str, str]]], str] | Mapping[str, str] | Sequence[str],
        *,
        default: str | None = None,
        name: str = "scripted",
    ) -> None:
        self.script = script
        self.default = default
        self.name = name
        self.calls: list[dict[str, Any]] = []
        self._next = 0

    def _reply(self, conv: list[dict[str, str]]) -> str:
        if callable(self.script):
            return str(self.script(conv))
        if isinstance(self.script, Mapping):
            from trustlab.lm.content import content_text

            last = content_text(next((m["content"] for m in reversed(conv) if m["role"] == "user"), ""))
            if last in self.script:
                return self.script[last]
            if self.default is None:
                raise InputError(f"ScriptedChatModel has no reply for {last!r:.60} and no default.")
            return self.default
        if self._next >= len(self.script):
            raise InputError(f"ScriptedChatModel ran out of its {len(self.script)} replies.")
        reply = self.script[self._next]
        self._next += 1
        return reply

    def generate(
        self,
        conversations: Sequence[Prompt],
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> list[str]:
        convs = _check_common(conversations, max_new_tokens, temperature, seed)
        self.calls.append(
            {
                "conversations": convs,
                "max_new_tokens": max_new_tokens,
                "temperature": temperature,
                "seed": seed,
            }
        )
        return [self._reply(c) for c in convs]


_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class OpenAIChatModel:
    """Client of an OpenAI-compatible ``/chat/completions`` endpoint.

    Each reply is cached on disk under ``cache_dir`` (when given), keyed by the SHA-256 of the
    endpoint URL and the full request body (model, messages, max_tokens, temperature, seed;
    image parts are sent, and keyed, as base64 PNG data URLs);
    a rerun is free and gives the same answers. Only complete, well-formed replies are cached,
    each written atomically. Transient failures (timeouts, connection errors, HTTP 408/429/5xx)
    are retried ``max_retries`` times with exponential backoff; a malformed body raises
    :class:`DataError` at once. At most ``max_concurrency`` requests are in flight.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_concurrency: int = 4,
        api_key: str | None = None,
    ) -> None:
        where = "OpenAIChatModel"
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise InputError(f"The 'base_url' parameter of {where} must be an http(s) URL. "
                             f"Got {base_url!r:.60}.")  # fmt: skip
        if not isinstance(model, str) or not model:
            raise InputError(f"The 'model' parameter of {where} must be a model name. Got {model!r:.60}.")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        # a NaN timeout used to pass; max_retries=-1 "failed after 0 attempts" without trying
        self.timeout = check_scalar(timeout, "timeout", where, lo=0.0, closed="neither")
        self.max_retries = check_scalar(max_retries, "max_retries", where, kind=int, lo=0)
        self.backoff = check_scalar(backoff, "backoff", where, lo=0.0)
        self.max_concurrency = check_scalar(max_concurrency, "max_concurrency", where, kind=int,
                                            lo=1)  # fmt: skip
        self.api_key = api_key
        self.name = f"openai:{self.base_url}#{model}"
        self.n_requests = 0  # HTTP requests actually sent (cache hits send none)

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def request_body(
        self, conversation: list[dict[str, str]], max_new_tokens: int, temperature: float, seed: int
    ) -> dict[str, Any]:
        from trustlab.lm.content import openai_content

        return {
            "model": self.model,
            # image parts go as base64 PNG data URLs (what vLLM and OpenAI accept)
            "messages": [{"role": m["role"], "content": openai_content(m["content"])}
                         for m in conversation],
            "max_tokens": int(max_new_tokens),
            "temperature": float(temperature),
            "seed": int(seed),
        }

    def cache_path(self, body: Mapping[str, Any]) -> Path | None:
        if self.cache_dir is None:
            return None
        key = hashlib.sha256(
            json.dumps({"url": self.url, "body": body}, sort_keys=True).encode()
        ).hexdigest()
        return self.cache_dir / key[:2] / f"{key}.json"

    def generate(
        self,
        conversations: Sequence[Prompt],
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> list[str]:
        convs = _check_common(conversations, max_new_tokens, temperature, seed)
        try:
            import httpx
        except ImportError as exc:
            raise MissingDependencyError.for_package(
                "httpx", "serve", "The OpenAI backend"
            ) from exc
        bodies = [self.request_body(c, max_new_tokens, temperature, seed) for c in convs]
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        with httpx.Client(timeout=self.timeout, headers=headers) as client:
            if len(bodies) <= 1 or self.max_concurrency <= 1:
                return [self._one(client, b) for b in bodies]
            with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(bodies))) as pool:
                return list(pool.map(lambda b: self._one(client, b), bodies))

    def _one(self, client: Any, body: dict[str, Any]) -> str:
        path = self.cache_path(body)
        if path is not None and path.exists():
            try:
                return str(json.loads(path.read_text(encoding="utf-8"))["reply"])
            except (OSError, ValueError, KeyError):
                log.warning("ignoring unreadable cache entry %s", path)
        reply = self._post(client, body)
        if path is not None:
            write_json_atomic(path, {"request": {"url": self.url, "body": body}, "reply": reply})
        return reply

    def _post(self, client: Any, body: dict[str, Any]) -> str:
        import httpx

        last = ""
        for attempt in range(int(self.max_retries) + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                self.n_requests += 1
                response = client.post(self.url, json=body)
            except httpx.TimeoutException:
                last = f"timed out after {self.timeout} s"
                continue
            except httpx.TransportError as exc:
                last = f"connection failed ({type(exc).__name__}: {exc})"
                continue
            if response.status_code in _RETRY_STATUS:
                last = f"HTTP {response.status_code}"
                continue
            if response.status_code >= 400:
                raise ChatBackendError(
                    f"{self.url} answered HTTP {response.status_code}: {response.text[:200]}"
                )
            return self._parse(response)
        raise ChatBackendError(
            f"{self.url} failed after {int(self.max_retries) + 1} attempts; last: {last}."
        )

    def _parse(self, response: Any) -> str:
        try:
            payload = response.json()
            content = payload["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise DataError(
                f"{self.url} returned a malformed chat completion (expected "
                f"choices[0].message.content): {response.text[:120]!r}"
            ) from exc
        if not isinstance(content, str):
            raise DataError(f"{self.url} returned non-text content: {content!r:.120}")
        return content


def parse_openai_spec(spec: str) -> tuple[str, str]:
    """``openai:http://host:port/v1#model`` -> (base URL, model name)."""
    rest = spec.partition(":")[2] if spec.startswith("openai:") else spec
    url, _, model = rest.partition("#")
    if not url.startswith(("http://", "https://")) or not model:
        raise InputError(
            f"An OpenAI-compatible spec is 'openai:http://host:port/v1#model-name'. Got {spec!r}."
        )
    return url, model


def chat_model(spec: str, **kwargs: Any) -> ChatModel:
    """A :class:`ChatModel` from ``hf:``, ``organism:`` or ``openai:`` spec strings.

    Keyword arguments go to the backend (``OpenAIChatModel`` options such as ``cache_dir``;
    for local models, ``dtype``/``device`` to :func:`load` and the rest to ``HFChatModel``).
    """
    if not isinstance(spec, str):
        raise InputError(f"A chat-model spec is a string. Got {type(spec).__name__}.")
    if spec.startswith("openai:"):
        url, model = parse_openai_spec(spec)
        return OpenAIChatModel(url, model, **kwargs)
    from trustlab.lm.loading import load

    load_kwargs = {k: kwargs.pop(k) for k in ("dtype", "device") if k in kwargs}
    return HFChatModel(load(spec, **load_kwargs), **kwargs)
