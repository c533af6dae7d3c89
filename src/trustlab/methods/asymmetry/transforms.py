"""Rule-based, exactly invertible, semantic-preserving text transforms (the paper's probes).

Every transform is a pair ``encode``/``decode`` with ``decode(encode(x)) == x`` for every ``x``
in its *domain*. A transform declares its level (``"character"``: it rewrites characters, so a
closed word-level vocabulary sees unknown words; ``"word"``: it maps whole words to words of a
vocabulary or reorders them, so every word of an encoded text is a word of the input's
vocabulary) and its domain (``domain``, one line). Text outside the domain is rejected with an
:class:`~trustlab.core.errors.InputError` naming the first offending character or word, never
encoded into something that would not decode back.

Registry (``TRANSFORMS``; build one with :func:`make_transform`; :func:`compose` chains two):

==================== ========= ======================================================
name                 level     domain
==================== ========= ======================================================
caesar (k)           character any text (ASCII letters shift by k, the rest unchanged)
rot13                character any text (caesar with k = 13)
atbash               character any text (ASCII a-z <-> z-a, A-Z <-> Z-A)
vigenere (key)       character any text (ASCII letters shift by the key's letters)
substitution (key)   character any text (a keyed permutation of ASCII letters)
char_reverse         character any text
leetspeak            character any text (an involution: a<->4, e<->3, ..., A<->@, ...)
homoglyph            character any text (an involution: Latin <-> Cyrillic look-alikes)
zero_width           character any text (U+200B after every character but the last)
base64/base32/hex    character text that UTF-8 can encode (no lone surrogates)
morse                character ASCII letters, digits, Morse punctuation and space
nato                 character ASCII letters, digits, space and . , ? ! ' " : -
braille              character printable ASCII and newline (8-dot computer braille)
word_substitution    word      any text (a keyed permutation of a vocabulary's words)
word_reverse         word      any text (whitespace-delimited words in reverse order)
word_permutation     word      any text (words reordered by a keyed permutation)
==================== ========= ======================================================

Implementation: stdlib first — ``str.maketrans``/``str.translate`` for every fixed or keyed
character map, ``base64``/``bytes.hex`` for the byte encodings, ``re`` for word splitting,
``random.Random`` seeded from a SHA-256 of the key for keyed permutations (stable across Python
versions and processes, unlike ``hash``). Hand-written, because the stdlib has no such codec:
Vigenère (a position-dependent shift), Morse, NATO and Braille tables (``codecs`` ships only
ROT13, which is used by neither side because ``caesar`` covers every k with one code path).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import random
import re
import string
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from trustlab.core.errors import InputError

__all__ = [
    "TRANSFORMS",
    "Composed",
    "Transform",
    "compose",
    "make_transform",
]

Level = Literal["character", "word"]

_LOWER = string.ascii_lowercase
_UPPER = string.ascii_uppercase


def _char(c: str) -> str:
    """A character as users can read it in a one-line message (escapes for invisible ones)."""
    return repr(c) if (c.isprintable() and not c.isspace()) or c == " " else ascii(c)


def _key_rng(key: str | int, salt: str) -> random.Random:
    digest = hashlib.sha256(f"{salt}\x00{key}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class Transform:
    """An exactly invertible text transform (subclasses set ``name``, ``level``, ``domain``).

    ``encode`` and ``decode`` take one string; ``encode`` rejects text outside ``domain`` and
    ``decode`` rejects text no encoding could have produced, both with a one-line
    :class:`InputError`. ``encode_many``/``decode_many`` map lists.
    """

    name: str = ""
    level: Level = "character"
    domain: str = "any text"
    #: decoding a prefix of an encoding gives a prefix of the plain text (character maps), so
    #: the evaluation loop may stop a reply early (``trustlab.lm.evaluate``'s ``prefix_safe``)
    prefix_safe: bool = False

    # -- subclasses implement these two on text already checked
    def _encode(self, text: str) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def _decode(self, text: str) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def _reject(self, text: str) -> str | None:
        """Why ``text`` is outside the domain (one clause), or None when it is inside."""
        return None

    def _reject_encoded(self, text: str) -> str | None:
        """Why ``text`` cannot be decoded, or None."""
        return None

    # -- public API
    def _check_str(self, text: Any, step: str) -> str:
        if not isinstance(text, str):
            raise InputError(
                f"The 'text' parameter of {self.label}.{step} must be a str. "
                f"Got {type(text).__name__}."
            )
        return text

    @property
    def label(self) -> str:
        """The name with its parameters, e.g. ``caesar(k=3)``."""
        params = self.params()
        if not params:
            return self.name
        return f"{self.name}(" + ", ".join(f"{k}={v!r}" for k, v in params.items()) + ")"

    def params(self) -> dict[str, Any]:
        """The parameters that, with ``name``, rebuild this transform via make_transform."""
        return {}

    def rejects(self, text: str) -> str | None:
        """Why ``encode(text)`` would be refused (one clause), or None when it is accepted."""
        return self._reject(self._check_str(text, "rejects"))

    def encode(self, text: str) -> str:
        text = self._check_str(text, "encode")
        reason = self._reject(text)
        if reason is not None:
            raise InputError(
                f"The 'text' parameter of {self.label}.encode must be in its domain "
                f"({self.domain}). Got text that {reason}."
            )
        return self._encode(text)

    def decode(self, text: str) -> str:
        text = self._check_str(text, "decode")
        reason = self._reject_encoded(text)
        if reason is not None:
            raise InputError(
                f"The 'text' parameter of {self.label}.decode must be an encoding by "
                f"{self.label}. Got text that {reason}."
            )
        return self._decode(text)

    def decode_reply(self, text: str) -> str:
        """Best-effort decoding of a model's reply, never raising.

        A model writing in an encoding makes mistakes; the reply is decoded as far as it is a
        valid encoding (code words it cannot read are kept as they are) so a judge sees what
        the model meant where it can be read. ``decode`` stays strict.
        """
        text = self._check_str(text, "decode_reply")
        if self._reject_encoded(text) is None:
            return self._decode(text)
        return self._decode_lenient(text)

    def _decode_lenient(self, text: str) -> str:
        return text

    def encode_many(self, texts: Iterable[str]) -> list[str]:
        return [self.encode(t) for t in texts]

    def decode_many(self, texts: Iterable[str]) -> list[str]:
        return [self.decode(t) for t in texts]

    def __repr__(self) -> str:
        return f"<Transform {self.label} ({self.level})>"


def _first_outside(text: str, allowed: set[str] | frozenset[str]) -> str | None:
    for i, c in enumerate(text):
        if c not in allowed:
            return f"contains {_char(c)} at position {i}"
    return None


# ------------------------------------------------------------------ character maps (translate)


class _TableTransform(Transform):
    """A bijective character map applied with ``str.translate`` (characters outside it stay)."""

    prefix_safe = True

    def __init__(self, mapping: dict[str, str]) -> None:
        if sorted(mapping) != sorted(mapping.values()):  # a permutation of its own support
            raise ValueError("a table transform needs a permutation")
        self._enc = str.maketrans(mapping)
        self._dec = str.maketrans({v: k for k, v in mapping.items()})

    def _encode(self, text: str) -> str:
        return text.translate(self._enc)

    def _decode(self, text: str) -> str:
        return text.translate(self._dec)


def _shift(alphabet: str, k: int) -> str:
    k %= len(alphabet)
    return alphabet[k:] + alphabet[:k]


class Caesar(_TableTransform):
    """Shift every ASCII letter by ``k`` places (case kept); everything else unchanged."""

    name = "caesar"

    def __init__(self, k: int = 3) -> None:
        self.k = k
        super().__init__(dict(zip(_LOWER + _UPPER, _shift(_LOWER, k) + _shift(_UPPER, k), strict=True)))

    def params(self) -> dict[str, Any]:
        return {"k": self.k}


class Rot13(Caesar):
    """Caesar with k = 13 (its own inverse)."""

    name = "rot13"

    def __init__(self) -> None:
        super().__init__(13)

    def params(self) -> dict[str, Any]:
        return {}


class Atbash(_TableTransform):
    """a <-> z, b <-> y, ... in both cases (an involution)."""

    name = "atbash"

    def __init__(self) -> None:
        super().__init__(dict(zip(_LOWER + _UPPER, _LOWER[::-1] + _UPPER[::-1], strict=True)))


class Substitution(_TableTransform):
    """A keyed monoalphabetic substitution: one permutation of a-z, applied to both cases."""

    name = "substitution"

    def __init__(self, key: str | int = 0) -> None:
        self.key = key
        perm = list(_LOWER)
        _key_rng(key, "substitution").shuffle(perm)
        cipher = "".join(perm)
        super().__init__(dict(zip(_LOWER + _UPPER, cipher + cipher.upper(), strict=True)))

    def params(self) -> dict[str, Any]:
        return {"key": self.key}


#: Leetspeak as pair swaps, so it is an involution on every text (classic leetspeak maps
#: ``e`` and ``3`` both to ``3`` and cannot be undone).
LEET_PAIRS = (("a", "4"), ("e", "3"), ("i", "1"), ("o", "0"), ("s", "5"), ("t", "7"),
              ("A", "@"), ("E", "€"), ("I", "|"), ("O", "Ø"), ("S", "$"), ("T", "+"))


class Leetspeak(_TableTransform):
    """Invertible leetspeak: each letter of :data:`LEET_PAIRS` swaps with its look-alike."""

    name = "leetspeak"

    def __init__(self) -> None:
        mapping = {a: b for a, b in LEET_PAIRS} | {b: a for a, b in LEET_PAIRS}
        super().__init__(mapping)


#: Latin letters and their Cyrillic look-alikes (Unicode confusables), swapped both ways.
HOMOGLYPH_PAIRS = (
    ("a", "\u0430"), ("c", "\u0441"), ("e", "\u0435"), ("i", "\u0456"), ("j", "\u0458"),
    ("o", "\u043e"), ("p", "\u0440"), ("s", "\u0455"), ("x", "\u0445"), ("y", "\u0443"),
    ("A", "\u0410"), ("B", "\u0412"), ("C", "\u0421"), ("E", "\u0415"), ("H", "\u041d"),
    ("I", "\u0406"), ("J", "\u0408"), ("K", "\u041a"), ("M", "\u041c"), ("O", "\u041e"),
    ("P", "\u0420"), ("S", "\u0405"), ("T", "\u0422"), ("X", "\u0425"), ("Y", "\u04ae"),
)


class Homoglyph(_TableTransform):
    """Latin letters swapped with Cyrillic look-alikes (an involution, so Cyrillic input is safe)."""

    name = "homoglyph"

    def __init__(self) -> None:
        mapping = {a: b for a, b in HOMOGLYPH_PAIRS} | {b: a for a, b in HOMOGLYPH_PAIRS}
        super().__init__(mapping)


# ------------------------------------------------------------------ other character transforms


class Vigenere(Transform):
    """Vigenère: the i-th ASCII letter shifts by the i-th letter of ``key`` (cycled; a = 0).

    Only letters advance the key, so spaces and punctuation keep their place (the classic rule).
    """

    name = "vigenere"
    prefix_safe = True

    def __init__(self, key: str = "lemon") -> None:
        self.key = key
        if not isinstance(key, str) or not key or not all(c in _LOWER + _UPPER for c in key):
            raise InputError(
                f"The 'key' parameter of vigenere must be a non-empty string of ASCII letters. "
                f"Got {key!r}."
            )
        self._shifts = [ord(c.lower()) - ord("a") for c in key]

    def params(self) -> dict[str, Any]:
        return {"key": self.key}

    def _run(self, text: str, sign: int) -> str:
        out, i, n = [], 0, len(self._shifts)
        for c in text:
            if "a" <= c <= "z" or "A" <= c <= "Z":
                base = ord("a") if c >= "a" else ord("A")
                out.append(chr(base + (ord(c) - base + sign * self._shifts[i % n]) % 26))
                i += 1
            else:
                out.append(c)
        return "".join(out)

    def _encode(self, text: str) -> str:
        return self._run(text, 1)

    def _decode(self, text: str) -> str:
        return self._run(text, -1)


class CharReverse(Transform):
    """The characters (code points) in reverse order."""

    name = "char_reverse"

    def _encode(self, text: str) -> str:
        return text[::-1]

    def _decode(self, text: str) -> str:
        return text[::-1]


ZERO_WIDTH_SPACE = "\u200b"


class ZeroWidth(Transform):
    """A zero-width space (U+200B) after every character but the last.

    Decoding keeps the even positions, so text that already holds U+200B round-trips too.
    """

    name = "zero_width"

    def _encode(self, text: str) -> str:
        return ZERO_WIDTH_SPACE.join(text)

    def _reject_encoded(self, text: str) -> str | None:
        if text and len(text) % 2 == 0:
            return "has an even length (an encoding has odd length)"
        for i in range(1, len(text), 2):
            if text[i] != ZERO_WIDTH_SPACE:
                return f"has {_char(text[i])} at odd position {i} where U+200B belongs"
        return None

    def _decode(self, text: str) -> str:
        return text[::2]

    def _decode_lenient(self, text: str) -> str:
        return text.replace(ZERO_WIDTH_SPACE, "")


class _BytesTransform(Transform):
    """UTF-8 bytes written in an ASCII encoding (stdlib ``base64`` / ``bytes.hex``)."""

    domain = "text that UTF-8 can encode (no lone surrogates)"
    _enc: Callable[[bytes], bytes | str]
    _dec: Callable[[str], bytes]

    def _reject(self, text: str) -> str | None:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"contains a lone surrogate at position {exc.start}"
        return None

    def _encode(self, text: str) -> str:
        out = type(self)._enc(text.encode("utf-8"))
        return out.decode("ascii") if isinstance(out, bytes) else out

    def _reject_encoded(self, text: str) -> str | None:
        try:
            raw = type(self)._dec(text)
        except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
            return f"is not valid {self.name} ({' '.join(str(exc).split())})"
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return "decodes to bytes that are not UTF-8"
        return None

    def _decode(self, text: str) -> str:
        return type(self)._dec(text).decode("utf-8")

    def _decode_lenient(self, text: str) -> str:
        squeezed = "".join(text.split())
        try:
            return type(self)._dec(squeezed).decode("utf-8", errors="replace")
        except (binascii.Error, ValueError, UnicodeEncodeError):
            return text


def _b64decode(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _b32decode(text: str) -> bytes:
    if not re.fullmatch(r"[A-Z2-7=]*", text):
        raise ValueError("characters outside the Base32 alphabet")
    return base64.b32decode(text.encode("ascii"))


def _hexdecode(text: str) -> bytes:
    if not re.fullmatch(r"(?:[0-9a-f]{2})*", text):
        raise ValueError("not an even number of lower-case hex digits")
    return bytes.fromhex(text)


class Base64(_BytesTransform):
    name = "base64"
    _enc = staticmethod(base64.b64encode)
    _dec = staticmethod(_b64decode)


class Base32(_BytesTransform):
    name = "base32"
    _enc = staticmethod(base64.b32encode)
    _dec = staticmethod(_b32decode)


class Hex(_BytesTransform):
    name = "hex"
    _enc = staticmethod(bytes.hex)
    _dec = staticmethod(_hexdecode)


class _CodeTableTransform(Transform):
    """Each character becomes a code word; code words are joined by ``sep``."""

    sep = " "
    _table: dict[str, str]
    _inverse: dict[str, str]

    def _reject(self, text: str) -> str | None:
        return _first_outside(text, self._table.keys())

    def _encode(self, text: str) -> str:
        return self.sep.join(self._table[c] for c in text)

    def _reject_encoded(self, text: str) -> str | None:
        if not text:
            return None
        for i, word in enumerate(text.split(self.sep)):
            if word not in self._inverse:
                shown = word if len(word) <= 20 else word[:17] + "..."
                return f"has the unknown code word {shown!r} (word {i})"
        return None

    def _decode(self, text: str) -> str:
        return "".join(self._inverse[w] for w in text.split(self.sep)) if text else ""

    def _decode_lenient(self, text: str) -> str:
        out = []
        for word in text.split():
            out.append(self._inverse.get(word, f" {word} "))
        return "".join(out)


#: International Morse (ITU-R M.1677-1) letters, digits and punctuation.
MORSE = {
    "a": ".-", "b": "-...", "c": "-.-.", "d": "-..", "e": ".", "f": "..-.", "g": "--.",
    "h": "....", "i": "..", "j": ".---", "k": "-.-", "l": ".-..", "m": "--", "n": "-.",
    "o": "---", "p": ".--.", "q": "--.-", "r": ".-.", "s": "...", "t": "-", "u": "..-",
    "v": "...-", "w": ".--", "x": "-..-", "y": "-.--", "z": "--..",
    "0": "-----", "1": ".----", "2": "..---", "3": "...--", "4": "....-", "5": ".....",
    "6": "-....", "7": "--...", "8": "---..", "9": "----.",
    ".": ".-.-.-", ",": "--..--", "?": "..--..", "'": ".----.", "!": "-.-.--", "/": "-..-.",
    "(": "-.--.", ")": "-.--.-", "&": ".-...", ":": "---...", ";": "-.-.-.", "=": "-...-",
    "+": ".-.-.", "-": "-....-", "_": "..--.-", '"': ".-..-.", "$": "...-..-", "@": ".--.-.",
}
#: Morse has no case: an upper-case letter is its code prefixed with this mark (our extension,
#: so that decoding restores the text exactly).
MORSE_CAPITAL = "^"


class Morse(_CodeTableTransform):
    """International Morse; letters separated by a space, a space written ``/``, capitals ``^``."""

    name = "morse"
    domain = "ASCII letters, digits, Morse punctuation .,?'!/()&:;=+-_\"$@ and space"

    def __init__(self) -> None:
        table = dict(MORSE)
        table |= {c.upper(): MORSE_CAPITAL + code for c, code in MORSE.items() if c.isalpha()}
        table[" "] = "/"
        self._table = table
        self._inverse = {v: k for k, v in table.items()}


#: ICAO/NATO spelling alphabet; a capital letter is its code word in capitals.
NATO = {
    "a": "alfa", "b": "bravo", "c": "charlie", "d": "delta", "e": "echo", "f": "foxtrot",
    "g": "golf", "h": "hotel", "i": "india", "j": "juliett", "k": "kilo", "l": "lima",
    "m": "mike", "n": "november", "o": "oscar", "p": "papa", "q": "quebec", "r": "romeo",
    "s": "sierra", "t": "tango", "u": "uniform", "v": "victor", "w": "whiskey", "x": "xray",
    "y": "yankee", "z": "zulu",
    "0": "zero", "1": "one", "2": "two", "3": "three", "4": "four", "5": "five", "6": "six",
    "7": "seven", "8": "eight", "9": "niner",
    " ": "/", ".": "stop", ",": "comma", "?": "query", "!": "exclaim", "'": "apostrophe",
    '"': "quote", ":": "colon", "-": "dash",
}


class Nato(_CodeTableTransform):
    """NATO spelling: ``Hi`` -> ``HOTEL india``; code words separated by one space."""

    name = "nato"
    domain = "ASCII letters, digits, space and . , ? ! ' \" : -"

    def __init__(self) -> None:
        table = dict(NATO)
        table |= {c.upper(): word.upper() for c, word in NATO.items() if c.isalpha()}
        self._table = table
        self._inverse = {v: k for k, v in table.items()}


#: North American Braille ASCII: the character of each 6-dot pattern (bit i = dot i + 1).
BRAILLE_ASCII = " A1B'K2L@CIF/MSP\"E3H9O6R^DJG>NTQ,*5<-U8V.%[$+X!&;:4\\0Z7(_?W]#Y)="
_DOT7 = 0x40


class Braille(_CodeTableTransform):
    """8-dot computer braille (Unicode braille patterns), one cell per character, no separator.

    The 6-dot cell is the Braille ASCII cell of the character; capital letters add dot 7, and
    the five characters Braille ASCII lacks (`` ` { | } ~``) are the cells of ``@ [ \\ ] ^``
    with dot 7, as in North American 8-dot computer braille. A newline stays a newline.
    """

    name = "braille"
    domain = "printable ASCII and newline"
    sep = ""

    def __init__(self) -> None:
        cell = {c: i for i, c in enumerate(BRAILLE_ASCII)}
        table: dict[str, str] = {}
        for code in range(0x20, 0x7F):
            c = chr(code)
            if c in _UPPER:
                bits = cell[c] | _DOT7
            elif c in _LOWER:
                bits = cell[c.upper()]
            elif c in "`{|}~":
                bits = cell[chr(code - 0x20)] | _DOT7
            else:
                bits = cell[c]
            table[c] = chr(0x2800 + bits)
        table["\n"] = "\n"
        assert len(set(table.values())) == len(table)
        self._table = table
        self._inverse = {v: k for k, v in table.items()}

    def _reject_encoded(self, text: str) -> str | None:
        return _first_outside(text, self._inverse.keys())

    def _decode(self, text: str) -> str:
        return "".join(self._inverse[c] for c in text)

    def _decode_lenient(self, text: str) -> str:
        return "".join(self._inverse.get(c, c) for c in text)


# ------------------------------------------------------------------ word-level transforms

_SPLIT_WS = re.compile(r"(\S+)")
_WORD = re.compile(r"[^\W\d_]+")


def _split_words(text: str) -> tuple[list[str], list[str]]:
    """Whitespace-delimited words and the separators around them (``len(seps) == len(words)+1``)."""
    parts = _SPLIT_WS.split(text)
    return parts[1::2], parts[0::2]


def _join_words(words: Sequence[str], seps: Sequence[str]) -> str:
    out = [seps[0]]
    for w, s in zip(words, seps[1:], strict=True):
        out += [w, s]
    return "".join(out)


class WordReverse(Transform):
    """Whitespace-delimited words in reverse order; the whitespace runs stay where they were.

    Punctuation attached to a word travels with it (``"a b." -> "b. a"``), so re-splitting the
    output finds the same words: the map is an involution on every text.
    """

    name = "word_reverse"
    level = "word"

    def _encode(self, text: str) -> str:
        words, seps = _split_words(text)
        return _join_words(words[::-1], seps)

    _decode = _encode


class WordPermutation(Transform):
    """Whitespace-delimited words reordered by a keyed permutation of their positions.

    The permutation depends on the key and on the number of words (which encoding keeps).
    """

    name = "word_permutation"
    level = "word"

    def __init__(self, key: str | int = 0) -> None:
        self.key = key

    def params(self) -> dict[str, Any]:
        return {"key": self.key}

    def _perm(self, n: int) -> list[int]:
        order = list(range(n))
        _key_rng(self.key, f"word_permutation:{n}").shuffle(order)
        return order

    def _encode(self, text: str) -> str:
        words, seps = _split_words(text)
        order = self._perm(len(words))
        return _join_words([words[j] for j in order], seps)

    def _decode(self, text: str) -> str:
        words, seps = _split_words(text)
        order = self._perm(len(words))
        out = [""] * len(words)
        for i, j in enumerate(order):
            out[j] = words[i]
        return _join_words(out, seps)


class WordSubstitution(Transform):
    """A keyed permutation of a vocabulary's words (letters only; case-sensitive).

    A word is a maximal run of letters (``[^\\W\\d_]+``): digits, punctuation and spacing are
    kept, so a word-level tokenizer splits the output exactly where it split the input. Words
    outside ``vocabulary`` are left as they are, so the map is a bijection on every text and
    every encoded word of the vocabulary is again a word of the vocabulary.

    ``vocabulary`` is either words (one permutation over all of them) or disjoint groups of
    words (lists), each permuted within itself: a closed tokenizer that knows some words only
    after a space and others only after punctuation needs each form kept in its group
    (:func:`~trustlab.methods.asymmetry.scope.vocabulary_substitution` builds those groups).
    """

    name = "word_substitution"
    level = "word"

    def __init__(self, vocabulary: Iterable[Any] = (), key: str | int = 0) -> None:
        if isinstance(vocabulary, str):
            raise InputError(
                "The 'vocabulary' parameter of word_substitution must be an iterable of words, "
                f"not a str. Got {vocabulary[:40]!r}."
            )
        items = list(vocabulary)
        grouped = bool(items) and all(
            isinstance(g, list | tuple | set | frozenset) for g in items
        )
        groups = [list(g) for g in items] if grouped else [items]
        seen: set[str] = set()
        self._enc: dict[str, str] = {}
        for g_idx, group in enumerate(groups):
            words = []
            for w in group:
                if not isinstance(w, str) or not _WORD.fullmatch(w):
                    raise InputError(
                        "The 'vocabulary' parameter of word_substitution must hold words of "
                        f"letters only (no digits, punctuation or spaces). Got {w!r}."
                    )
                if w in seen and w not in words:
                    raise InputError(
                        "The 'vocabulary' parameter of word_substitution must have disjoint "
                        f"groups. Got {w!r} in two groups."
                    )
                if w not in words:
                    words.append(w)
                seen.add(w)
            words.sort()
            cipher = list(words)
            _key_rng(key, f"word_substitution:{g_idx}" if grouped else "word_substitution").shuffle(
                cipher
            )
            self._enc.update(zip(words, cipher, strict=True))
        if len(seen) < 2:
            raise InputError(
                "The 'vocabulary' parameter of word_substitution must hold at least 2 distinct "
                f"words. Got {len(seen)}."
            )
        self.vocabulary = tuple(sorted(seen))
        self.groups = tuple(tuple(sorted(set(g))) for g in groups)
        self.key = key
        self._dec = {v: k for k, v in self._enc.items()}

    def params(self) -> dict[str, Any]:
        return {"vocabulary": f"<{len(self.vocabulary)} words>", "key": self.key}

    @property
    def mapping(self) -> dict[str, str]:
        """plain word -> encoded word."""
        return dict(self._enc)

    def _encode(self, text: str) -> str:
        return _WORD.sub(lambda m: self._enc.get(m.group(0), m.group(0)), text)

    def _decode(self, text: str) -> str:
        return _WORD.sub(lambda m: self._dec.get(m.group(0), m.group(0)), text)


# ------------------------------------------------------------------ composition


@dataclass(frozen=True, repr=False)
class Composed(Transform):
    """``second`` applied after ``first``; decoding undoes ``second`` first.

    Its level is ``"word"`` only when both parts are word-level. Its domain is the texts in
    ``first``'s domain whose encoding is in ``second``'s domain (checked by encoding).
    """

    first: Transform
    second: Transform

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.first.name}+{self.second.name}"

    @property
    def label(self) -> str:
        return f"{self.first.label}+{self.second.label}"

    @property
    def level(self) -> Level:  # type: ignore[override]
        return "word" if self.first.level == self.second.level == "word" else "character"

    @property
    def domain(self) -> str:  # type: ignore[override]
        return f"{self.first.name}'s domain, encoded into {self.second.name}'s"

    @property
    def prefix_safe(self) -> bool:  # type: ignore[override]
        return self.first.prefix_safe and self.second.prefix_safe

    def _reject(self, text: str) -> str | None:
        reason = self.first._reject(text)
        if reason is not None:
            return reason
        inner = self.first._encode(text)
        reason = self.second._reject(inner)
        return None if reason is None else f"{self.first.name}-encodes to text that {reason}"

    def _encode(self, text: str) -> str:
        return self.second._encode(self.first._encode(text))

    def _reject_encoded(self, text: str) -> str | None:
        reason = self.second._reject_encoded(text)
        if reason is not None:
            return reason
        return self.first._reject_encoded(self.second._decode(text))

    def _decode(self, text: str) -> str:
        return self.first._decode(self.second._decode(text))

    def decode_reply(self, text: str) -> str:
        return self.first.decode_reply(self.second.decode_reply(text))


def check_transform(value: Any, name: str, where: str) -> Transform:
    """``value`` if it is a :class:`Transform`, else a one-line InputError naming ``name``."""
    if not isinstance(value, Transform):
        raise InputError(
            f"The '{name}' parameter of {where} must be a Transform (make_transform). "
            f"Got {type(value).__name__}."
        )
    return value


def compose(first: Transform, second: Transform) -> Composed:
    """The transform that applies ``first`` and then ``second``."""
    return Composed(check_transform(first, "first", "compose"),
                    check_transform(second, "second", "compose"))  # fmt: skip


# ------------------------------------------------------------------ registry

TRANSFORMS: dict[str, type[Transform]] = {
    cls.name: cls
    for cls in (
        Caesar, Rot13, Atbash, Vigenere, Substitution, CharReverse, Leetspeak, Homoglyph,
        ZeroWidth, Base64, Base32, Hex, Morse, Nato, Braille,
        WordSubstitution, WordReverse, WordPermutation,
    )
}


def make_transform(name: str, **params: Any) -> Transform:
    """The transform registered as ``name`` (see ``TRANSFORMS``), built with ``params``.

    ``make_transform("caesar", k=5)``, ``make_transform("word_substitution",
    vocabulary=words, key=1)``; ``"a+b"`` composes two parameter-free (or defaulted) transforms.
    """
    if not isinstance(name, str):
        raise InputError(f"The 'name' parameter of make_transform must be a str. Got {name!r}.")
    if "+" in name:
        first, _, second = name.partition("+")
        if "+" in second:
            raise InputError(
                f"The 'name' parameter of make_transform composes at most two transforms "
                f"('a+b'). Got {name!r}; chain compose() for more."
            )
        if params:
            raise InputError(
                "The 'params' of make_transform cannot be given for a composition "
                f"({name!r}); build both parts and call compose(first, second)."
            )
        return compose(make_transform(first), make_transform(second))
    if name not in TRANSFORMS:
        raise InputError(
            f"The 'name' parameter of make_transform must be one of {sorted(TRANSFORMS)} "
            f"(or two joined by '+'). Got {name!r}."
        )
    try:
        return TRANSFORMS[name](**params)
    except TypeError as exc:
        raise InputError(f"The parameters of make_transform({name!r}) are invalid: {exc}.") from None
