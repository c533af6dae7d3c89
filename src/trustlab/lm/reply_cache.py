"""An on-disk cache of replies, for every backend the evaluation loop drives.

One SQLite file (``replies.sqlite`` under the cache folder) maps a key to a reply. The key is
the SHA-256 of a canonical JSON record: the model's fingerprint (its weights, tokenizer and
chat template for local models; URL and model name for servers), the conversation as sent, the
decoding settings (max_new_tokens, temperature, seed), the active interventions and the stop
rule (an early-stopped reply is only reused under the same rule). Writes are transactions, so
an entry is written whole or not at all, and concurrent runs (processes or threads) share the
file safely (WAL journal, a busy timeout). An unreadable cache costs speed, never a result.

``model_fingerprint(backend)`` is what makes reuse safe: change one weight, the chat template,
or an intervention vector and every key changes (tested).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.errors import InputError

__all__ = ["ReplyCache", "fingerprint_of", "model_fingerprint"]

log = logging.getLogger(__name__)


def _update(h: Any, obj: Any, depth: int = 0) -> None:
    """Feed a canonical description of ``obj`` into the hash ``h``."""
    import torch

    if depth > 8:
        h.update(b"<deep>")
        return
    if obj is None or isinstance(obj, bool | int | float | str):
        h.update(json.dumps(obj).encode())
    elif isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"tensor{tuple(t.shape)}{t.dtype}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(obj, np.ndarray):
        h.update(f"ndarray{obj.shape}{obj.dtype}".encode())
        h.update(np.ascontiguousarray(obj).tobytes())
    elif hasattr(obj, "fingerprint") and callable(obj.fingerprint):
        h.update(f"{type(obj).__qualname__}:{obj.fingerprint()}".encode())
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        h.update(type(obj).__qualname__.encode())
        for f in dataclasses.fields(obj):
            h.update(f.name.encode())
            _update(h, getattr(obj, f.name), depth + 1)
    elif isinstance(obj, Mapping):
        for k in sorted(obj, key=str):
            h.update(str(k).encode())
            _update(h, obj[k], depth + 1)
    elif isinstance(obj, list | tuple):
        h.update(f"seq{len(obj)}".encode())
        for x in obj:
            _update(h, x, depth + 1)
    elif callable(obj):
        h.update(
            f"callable:{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}".encode()
        )
    else:
        h.update(f"{type(obj).__qualname__}:{obj!r}".encode())


def fingerprint_of(obj: Any) -> str:
    """A SHA-256 hex digest describing ``obj`` (tensors by value, dataclasses by field)."""
    h = hashlib.sha256()
    _update(h, obj)
    return h.hexdigest()


def _lm_fingerprint(lm: Any) -> str:
    """Weights, config, tokenizer vocabulary size and chat template of a LanguageModel."""
    h = hashlib.sha256()
    h.update(type(lm.model).__qualname__.encode())
    config = getattr(lm.model, "config", None)
    if config is not None and hasattr(config, "to_json_string"):
        h.update(config.to_json_string(use_diff=False).encode())
    tok = lm.tokenizer
    h.update(str(getattr(tok, "chat_template", None)).encode())
    h.update(str(len(tok)).encode())
    h.update(json.dumps(lm.eos_token_ids).encode())
    for name, tensor in lm.model.state_dict().items():
        h.update(name.encode())
        _update(h, tensor)
    extra = getattr(lm, "vision_state_dict", None)  # a vision tower outside lm.model
    for name, tensor in (extra() if callable(extra) else {}).items():
        h.update(f"vision.{name}".encode())
        _update(h, tensor)
    return h.hexdigest()


def model_fingerprint(backend: Any) -> str | None:
    """What identifies a chat backend's replies: for :class:`HFChatModel` its weights, config,
    tokenizer and template plus its interventions; for an OpenAI-compatible server its URL and
    model name; otherwise the backend's own ``fingerprint()`` when it has one. None: the
    backend's replies are not cached (e.g. a :class:`ScriptedChatModel`)."""
    from trustlab.lm.chat import HFChatModel, OpenAIChatModel

    if isinstance(backend, HFChatModel):
        base = _lm_fingerprint(backend.lm)
        if backend.interventions:
            base = fingerprint_of([base, list(backend.interventions)])
        return f"hf:{base}"
    if isinstance(backend, OpenAIChatModel):
        return f"openai:{backend.url}#{backend.model}"
    fp = getattr(backend, "fingerprint", None)
    if callable(fp):
        value = fp()
        return None if value is None else str(value)
    return None


class ReplyCache:
    """Replies keyed by :meth:`key`; ``path`` is a folder (the file is ``replies.sqlite``)."""

    FILE = "replies.sqlite"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, str | os.PathLike):
            raise InputError(f"A reply cache needs a folder path. Got {type(path).__name__}.")
        self.folder = Path(path).expanduser()
        if self.folder.exists() and not self.folder.is_dir():
            raise InputError(f"The reply cache path '{self.folder}' is a file, not a folder.")
        self.file = self.folder / self.FILE
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(record: Mapping[str, Any]) -> str:
        return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()

    def _connect(self) -> sqlite3.Connection:
        self.folder.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(self.file, timeout=60)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE IF NOT EXISTS replies (k TEXT PRIMARY KEY, reply TEXT NOT NULL)")
        return con

    def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        """The cached replies among ``keys`` (missing keys are absent from the result)."""
        found: dict[str, str] = {}
        if not keys:
            return found
        with self._lock:
            try:
                con = self._connect()
            except (sqlite3.Error, OSError) as exc:
                log.warning("reply cache %s unreadable (%s); generating instead", self.file, exc)
                self.misses += len(keys)
                return found
            try:
                uniq = list(dict.fromkeys(keys))
                for start in range(0, len(uniq), 500):
                    part = uniq[start : start + 500]
                    marks = ",".join("?" * len(part))
                    rows = con.execute(
                        f"SELECT k, reply FROM replies WHERE k IN ({marks})", part
                    ).fetchall()
                    found.update({k: r for k, r in rows})
            except sqlite3.Error as exc:
                log.warning("reply cache %s unreadable (%s); generating instead", self.file, exc)
            finally:
                con.close()
        self.hits += sum(1 for k in keys if k in found)
        self.misses += sum(1 for k in keys if k not in found)
        return found

    def put_many(self, items: Iterable[tuple[str, str]]) -> None:
        """Store (key, reply) pairs in one transaction (all or nothing)."""
        rows = [(k, str(r)) for k, r in items]
        if not rows:
            return
        with self._lock:
            try:
                con = self._connect()
                try:
                    with con:
                        con.executemany("INSERT OR REPLACE INTO replies VALUES (?, ?)", rows)
                finally:
                    con.close()
            except (sqlite3.Error, OSError) as exc:  # a read-only cache only costs speed
                log.warning("could not write the reply cache %s (%s)", self.file, exc)

    def __len__(self) -> int:
        try:
            con = self._connect()
        except (sqlite3.Error, OSError):
            return 0
        try:
            return int(con.execute("SELECT COUNT(*) FROM replies").fetchone()[0])
        finally:
            con.close()
