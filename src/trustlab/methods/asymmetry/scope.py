"""Which model can read which transform: refuse a pairing that could only measure [UNK].

The grown organisms (chat-xs ... chat-l, tool-*, vlm-*) have a closed word-level vocabulary of
about 690 tokens: a character-level encoding (Caesar, Base64, Morse, ...) turns their words into
``[UNK]``, so their replies to it measure vocabulary, not alignment. On them only word-level
transforms are in scope, and a word substitution only when it maps every vocabulary token to a
vocabulary token (the same word form: after a space, or glued to punctuation). Pretrained
models (smol-chat, gemma-chat, ``hf:`` folders, ``openai:`` servers) read any text through a
subword or byte-level tokenizer, so every transform is in scope there (whether the model can
*operate* on it is what the experiment's gate measures).

:func:`check_scope` returns ``Scope(ok, reason)`` (a named tuple; ``reason`` is one line).
:func:`vocabulary_substitution` builds the word substitution a closed vocabulary can read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from trustlab.core.errors import InputError
from trustlab.methods.asymmetry.transforms import (
    Composed,
    Transform,
    WordSubstitution,
    check_transform,
)

__all__ = [
    "Scope",
    "check_scope",
    "closed_vocabulary",
    "in_scope_pairs",
    "vocabulary_substitution",
]

_SPACE = "\u2581"  # Metaspace's word prefix in the organisms' tokenizer
_LETTERS = re.compile(r"[^\W\d_]+")
_OPEN_SCHEMES = ("hf:", "openai:")


class Scope(NamedTuple):
    """Whether a (model, transform) pairing is in scope, and why (one line)."""

    ok: bool
    reason: str


def _vocab_of_tokenizer(tokenizer: Any) -> dict[str, int] | None:
    """The token -> id map of a word-level tokenizer, or None for subword/byte tokenizers."""
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    to_str = getattr(backend, "to_str", None)
    if not callable(to_str):
        return None
    model = json.loads(to_str()).get("model", {})
    return dict(model["vocab"]) if model.get("type") == "WordLevel" else None


def _organism_name(spec: str) -> str | None:
    """The organism a spec names (``organism:x``, ``x``, ``finetuned:r@organism:x``), or None."""
    from trustlab.organisms.specs import SPECS

    base = spec.rpartition("@")[2] if spec.startswith("finetuned:") else spec
    name = base.removeprefix("organism:")
    return name if name in SPECS else None


def closed_vocabulary(model: Any, *, home: str | Path | None = None) -> dict[str, int] | None:
    """The token vocabulary of a closed word-level model, or None when the model is open.

    ``model``: a spec string (``organism:chat-s``, ``chat-s``, ``finetuned:...@organism:chat-s``,
    ``hf:...``, ``openai:...``), a ``trustlab.lm.LanguageModel`` or a tokenizer. A grown organism
    that is not built yet is known to be closed, but its vocabulary cannot be read: then the
    result is an empty dict.
    """
    if isinstance(model, str):
        if model.startswith("hf:"):  # a local folder: read its tokenizer when it has one
            path = Path(model.removeprefix("hf:")) / "tokenizer.json"
            if not path.is_file():
                return None
            data = json.loads(path.read_text(encoding="utf-8")).get("model", {})
            return dict(data["vocab"]) if data.get("type") == "WordLevel" else None
        if model.startswith(_OPEN_SCHEMES):
            return None
        name = _organism_name(model)
        if name is None:
            raise InputError(
                "The 'model' parameter of check_scope must be a model spec (organism:<name>, "
                f"finetuned:<recipe>@<base>, hf:<path>, openai:<url>#<model>). Got {model!r:.80}."
            )
        from trustlab.organisms.registry import organism_dir
        from trustlab.organisms.specs import SPECS

        if SPECS[name].kind == "pretrained" or SPECS[name].kind == "vision":
            return None
        path = organism_dir(name, home) / "tokenizer.json"
        if not path.is_file():
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))["model"]
        return dict(data["vocab"]) if data.get("type") == "WordLevel" else None
    tokenizer = getattr(model, "tokenizer", model)
    if not callable(getattr(getattr(tokenizer, "backend_tokenizer", tokenizer), "to_str", None)):
        raise InputError(
            "The 'model' parameter of check_scope must be a model spec string, a "
            "trustlab.lm.LanguageModel or a Hugging Face fast tokenizer. "
            f"Got {type(model).__name__}."
        )
    return _vocab_of_tokenizer(tokenizer)


def _parts(transform: Transform) -> list[Transform]:
    if isinstance(transform, Composed):
        return _parts(transform.first) + _parts(transform.second)
    return [transform]


def _form_breaks(sub: WordSubstitution, vocab: dict[str, int]) -> list[str]:
    """Words whose encoding changes whether a token form exists in ``vocab``."""
    bad = []
    for word, code in sub.mapping.items():
        for form in ("{}", _SPACE + "{}"):
            if (form.format(word) in vocab) != (form.format(code) in vocab):
                bad.append(word)
                break
    return bad


def check_scope(model: Any, transform: Transform, *, home: str | Path | None = None) -> Scope:
    """Whether ``model`` can read ``transform``'s encodings at all, with a one-line reason.

    Closed word-level models (the grown organisms): character-level transforms are out of
    scope; a word substitution is in scope only when every vocabulary token encodes to a
    vocabulary token of the same form. Open models (pretrained organisms, ``hf:``,
    ``openai:``): every transform is in scope.
    """
    check_transform(transform, "transform", "check_scope")
    vocab = closed_vocabulary(model, home=home)
    label = model if isinstance(model, str) else type(model).__name__
    if vocab is None:
        return Scope(True, f"{label} reads any text (subword or byte-level tokenizer).")
    if transform.level == "character":
        return Scope(
            False,
            f"{label} has a closed word-level vocabulary: the character-level transform "
            f"{transform.label} turns its words into [UNK]; run it on smol-chat, hf: or "
            "openai: models.",
        )
    for part in _parts(transform):
        if isinstance(part, WordSubstitution):
            if not vocab:
                return Scope(
                    False,
                    f"{label} is not built, so {part.label} cannot be checked against its "
                    "vocabulary; build it first.",
                )
            bad = _form_breaks(part, vocab)
            if bad:
                return Scope(
                    False,
                    f"{part.label} maps {len(bad)} word(s) to forms {label}'s vocabulary "
                    f"lacks (e.g. {bad[0]!r}); build it with vocabulary_substitution.",
                )
    return Scope(True, f"{transform.label} maps {label}'s vocabulary words to its own words.")


def vocabulary_substitution(vocab: Any, key: str | int = 0) -> WordSubstitution:
    """A keyed word substitution over a closed vocabulary that keeps every token in it.

    ``vocab``: a model spec, LanguageModel, tokenizer, or a token -> id mapping. Words are the
    letter-only tokens; they are grouped by the forms the vocabulary holds (after a space
    only, glued only, or both) and permuted within their group, so an encoded text has an
    ``[UNK]`` exactly where the plain text had one.
    """
    if not isinstance(vocab, dict):
        vocab = closed_vocabulary(vocab)
        if not vocab:
            raise InputError(
                "The 'vocab' parameter of vocabulary_substitution must name a built model with "
                "a closed word-level vocabulary (a grown organism). Got an open or unbuilt model."
            )
    words = {t.removeprefix(_SPACE) for t in vocab if _LETTERS.fullmatch(t.removeprefix(_SPACE))}
    groups: dict[tuple[bool, bool], list[str]] = {}
    for w in sorted(words):
        groups.setdefault((w in vocab, _SPACE + w in vocab), []).append(w)
    return WordSubstitution([g for _, g in sorted(groups.items()) if len(g) > 1] or [], key=key)


def in_scope_pairs(
    models: Iterable[Any], transforms: Iterable[Transform]
) -> list[tuple[Any, Transform, Scope]]:
    """Every (model, transform) pairing with its :class:`Scope` (the experiment's filter)."""
    return [(m, t, check_scope(m, t)) for m in models for t in transforms]
