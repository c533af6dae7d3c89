"""Minimal contrastive pairs: the same agentic prompt, one request verb apart.

An agentic prompt is a system scaffold (role, tool schema, call format) plus a user request. A
*minimal pair* keeps everything and swaps the request verb: an execution verb (``write``,
``run``, ``fix`` …) against an analysis verb (``explain``, ``compare`` …). Where the model
calls the tool for one and answers in prose for the other, the verb alone decides, which makes
the decision a single controllable variable.

Three sources of pairs:

* :func:`organism_pairs` — the tool organisms' own corpus constants (the scaffold
  ``TOOL_SYSTEM_PROMPT``, 8 request frames × 3 languages × 12 tasks × 9 × 7 verb pairs = 18,144
  candidates). Analysis pairs come from the 6 frames the organisms trained on, held-out pairs
  from the 2 frames they never saw (``TOOL_TEMPLATES_HELDOUT``).
* :func:`natural_pairs` — the same design in natural English with a Hermes-style tool scaffold
  (a JSON schema inside ``<tools>`` and calls inside ``<tool_call>``), for ``hf:`` models.
* :func:`pairs_from_prompt` — the converter: a user's long scaffolded prompt becomes one pair
  per verb of the other class, everything but the request verb kept as it is;
  :func:`read_pairs` reads ready pairs or prompts to convert from a JSONL file.

A pair stores its execution conversation and the character span of the verb in the last user
message, so any other verb (a neutral one for the scaffold analysis) can be put in its place.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.errors import DataError, InputError
from trustlab.core.validation import check_path, check_scalar
from trustlab.organisms import corpora

__all__ = [
    "ANALYSIS_VERBS",
    "EXECUTION_VERBS",
    "LANGUAGES",
    "NATURAL_SCAFFOLD",
    "NATURAL_TEMPLATES_HELDOUT",
    "NATURAL_TEMPLATES_TRAIN",
    "ContrastivePair",
    "PairSet",
    "natural_pairs",
    "organism_pairs",
    "pairs_from_prompt",
    "read_pairs",
]

#: Execution verbs (the request asks for code to be written or run): the tool corpus's list.
EXECUTION_VERBS: tuple[str, ...] = tuple(corpora.EXEC_VERBS)
#: Analysis verbs (the request asks for an explanation): the tool corpus's list.
ANALYSIS_VERBS: tuple[str, ...] = tuple(corpora.ANALYSIS_VERBS)
#: The three languages of the paper and of the tool corpus.
LANGUAGES: tuple[str, ...] = tuple(corpora.LANGUAGES)

Message = tuple[str, str]  # (role, content)


@dataclass(frozen=True)
class ContrastivePair:
    """One minimal pair: a conversation whose last user message holds the request verb.

    ``messages`` is the conversation with the execution verb at ``span`` (character offsets in
    the last user message); :attr:`execution` and :attr:`analysis` render the two variants as
    chat messages. ``language``, ``task``, ``template`` say what the request was built from
    (empty for converted user prompts); ``source`` is ``organism``, ``natural``, ``user`` or
    ``converted``; ``group`` ties together the pairs converted from one user prompt, so they
    are never split between the analysis and the held-out sets.
    """

    messages: tuple[Message, ...]
    span: tuple[int, int]
    execution_verb: str
    analysis_verb: str
    language: str = ""
    task: str = ""
    template: str = ""
    source: str = ""
    group: str = ""

    @property
    def execution(self) -> list[dict[str, str]]:
        """The execution variant as chat messages."""
        return self.variant(self.execution_verb)

    @property
    def analysis(self) -> list[dict[str, str]]:
        """The analysis variant as chat messages."""
        return self.variant(self.analysis_verb)

    @property
    def has_scaffold(self) -> bool:
        return any(role == "system" for role, _ in self.messages)

    def variant(self, verb: str) -> list[dict[str, str]]:
        """The conversation with ``verb`` in the verb's place (its capitalisation kept)."""
        if not isinstance(verb, str) or not verb.strip():
            raise InputError(f"'verb' must be a non-empty string. Got {verb!r}.")
        last = _last_user(self.messages)
        role, text = self.messages[last]
        start, end = self.span
        word = verb if not text[start:end][:1].isupper() else verb[:1].upper() + verb[1:]
        out = [{"role": r, "content": c} for r, c in self.messages]
        out[last] = {"role": role, "content": text[:start] + word + text[end:]}
        return out

    def without_scaffold(self) -> ContrastivePair:
        """The same pair with every system message removed (the request alone)."""
        kept = tuple(m for m in self.messages if m[0] != "system")
        return replace(self, messages=kept)


@dataclass(frozen=True)
class PairSet:
    """Pairs for mechanistic analysis (``analysis``: μΔ, attribution, patching, the layer
    choice) and held-out pairs for the causal tests (``heldout``), with where they came from.

    ``n_candidates`` counts the pairs the source could have produced for each split.
    """

    analysis: tuple[ContrastivePair, ...]
    heldout: tuple[ContrastivePair, ...]
    source: str
    n_candidates: Mapping[str, int]
    description: str = ""

    def __post_init__(self) -> None:
        for name in ("analysis", "heldout"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(
                isinstance(p, ContrastivePair) for p in value
            ):
                raise InputError(
                    f"The '{name}' field of PairSet must be a tuple of ContrastivePair. Got "
                    f"{type(value).__name__}."
                )
        if not self.analysis or not self.heldout:
            raise InputError(
                "A PairSet needs at least one analysis pair and one held-out pair. Got "
                f"{len(self.analysis)} and {len(self.heldout)}."
            )


def check_pairs(pairs: Any, name: str, where: str) -> list[ContrastivePair]:
    """``pairs`` as a non-empty list of :class:`ContrastivePair` (an InputError otherwise)."""
    if isinstance(pairs, str | bytes) or not isinstance(pairs, Sequence) or len(pairs) == 0:
        raise InputError(
            f"The '{name}' parameter of {where} must be a non-empty list of ContrastivePair. "
            f"Got {type(pairs).__name__}."
        )
    for p in pairs:
        if not isinstance(p, ContrastivePair):
            raise InputError(
                f"The '{name}' parameter of {where} must hold ContrastivePair objects. Got "
                f"{type(p).__name__}."
            )
    return list(pairs)


def _last_user(messages: Sequence[Message]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i][0] == "user":
            return i
    raise InputError("A pair's conversation needs a user message (the request).")


# ------------------------------------------------------------------------ organism pairs
def _template_pair(
    template: str,
    exec_verb: str,
    analysis_verb: str,
    language: str,
    task: str,
    system: str | None,
    name: str,
    source: str,
) -> ContrastivePair:
    """A pair from a request frame with ``{v}``/``{V}`` (verb), ``{L}`` (language), ``{t}``."""
    marker = "\x00VERB\x00"
    capital = "{V}" in template
    text = template.format(v=marker, V=marker, L=language, t=task)
    start = text.index(marker)
    verb = exec_verb.capitalize() if capital else exec_verb
    text = text.replace(marker, verb)
    messages: tuple[Message, ...] = ((("system", system),) if system is not None else ()) + (
        ("user", text),
    )
    return ContrastivePair(
        messages,
        (start, start + len(verb)),
        exec_verb,
        analysis_verb,
        language,
        task,
        name,
        source,
    )


def _draw(
    templates: Sequence[str],
    prefix: str,
    n: int,
    rng: np.random.Generator,
    system: str | None,
    source: str,
    languages: Sequence[str],
    tasks: Sequence[str],
) -> tuple[list[ContrastivePair], int]:
    grid = list(
        itertools.product(range(len(templates)), languages, tasks, EXECUTION_VERBS, ANALYSIS_VERBS)
    )
    if n > len(grid):
        raise InputError(
            f"Asked for {n} {prefix} pairs; the {len(templates)} frames give {len(grid)} "
            "candidates."
        )
    picks = rng.choice(len(grid), size=n, replace=False)
    out = []
    for i in picks:
        t, lang, task, ev, av = grid[int(i)]
        out.append(
            _template_pair(templates[t], ev, av, lang, task, system, f"{prefix}/{t}", source)
        )
    return out, len(grid)


def _frame_pairs(
    where: str,
    frames: tuple[Sequence[str], Sequence[str]],
    prefix: str,
    source: str,
    salt: int,
    n_analysis: Any,
    n_heldout: Any,
    seed: Any,
    system: str | None,
    description: str,
) -> PairSet:
    """Analysis pairs from ``frames[0]`` and held-out pairs from ``frames[1]``, drawn without
    replacement over frames × languages × tasks × verb pairs."""
    n_analysis = check_scalar(n_analysis, "n_analysis", where, kind=int, lo=1)
    n_heldout = check_scalar(n_heldout, "n_heldout", where, kind=int, lo=1)
    seed = check_scalar(seed, "seed", where, kind=int, lo=0)
    rng = np.random.default_rng(np.random.SeedSequence([seed, salt]))
    tasks = tuple(corpora.CODE_TASKS)
    drawn = []
    for split, templates, n in (
        ("train", frames[0], n_analysis),
        ("heldout", frames[1], n_heldout),
    ):
        drawn.append(
            _draw(templates, f"{prefix}/{split}", n, rng, system, source, LANGUAGES, tasks)
        )
    (analysis, n_a), (heldout, n_h) = drawn
    return PairSet(
        tuple(analysis),
        tuple(heldout),
        source,
        {"analysis": n_a, "heldout": n_h},
        description,
    )


def organism_pairs(
    n_analysis: int = 1200,
    n_heldout: int = 300,
    seed: int = 0,
    *,
    system: str | None = corpora.TOOL_SYSTEM_PROMPT,
) -> PairSet:
    """Pairs in the tool organisms' vocabulary, drawn without replacement.

    Analysis pairs from the 6 training frames (13,608 candidates), held-out pairs from the 2
    frames the organisms never saw (4,536 candidates). ``system`` is the scaffold (None: the
    request alone).
    """
    return _frame_pairs(
        "organism_pairs",
        (corpora.TOOL_TEMPLATES_TRAIN, corpora.TOOL_TEMPLATES_HELDOUT),
        "tool",
        "organism",
        0x7C,
        n_analysis,
        n_heldout,
        seed,
        system,
        "tool-corpus frames (analysis: the organisms' training frames; held-out: frames never "
        "seen in training) with the corpus scaffold",
    )


# ------------------------------------------------------------------------- natural pairs
_TOOL_SCHEMA = {
    "name": "run_code",
    "description": "Write and execute code in a sandbox and return its output.",
    "parameters": {
        "type": "object",
        "properties": {
            "language": {"type": "string", "description": "python, java or cpp"},
            "task": {"type": "string", "description": "what the code should do"},
        },
        "required": ["language", "task"],
    },
}

#: A Hermes/Qwen-style tool scaffold: role, the schema inside <tools>, the call format.
NATURAL_SCAFFOLD = (
    "You are a helpful coding assistant. You have access to the following tool:\n<tools>\n"
    + json.dumps(_TOOL_SCHEMA)
    + "\n</tools>\nTo call the tool, reply with a JSON object inside <tool_call></tool_call> "
    'tags, for example <tool_call>{"name": "run_code", "arguments": {"language": "python", '
    '"task": "..."}}</tool_call>. Otherwise reply in plain text.'
)

#: English request frames (the first group for analysis pairs, the second held out).
NATURAL_TEMPLATES_TRAIN: tuple[str, ...] = (
    "Can you {v} a {L} function that {t}?",
    "Please {v} the {L} code that {t}.",
    "I'd like you to {v} a {L} program that {t}.",
    "{V} a {L} script that {t}, please.",
    "Could you {v} some {L} code which {t}?",
    "Help me {v} a {L} routine that {t}.",
)
NATURAL_TEMPLATES_HELDOUT: tuple[str, ...] = (
    "Would you {v} a short {L} program that {t}?",
    "I need you to {v} the {L} snippet that {t}.",
)


def natural_pairs(
    n_analysis: int = 1200,
    n_heldout: int = 300,
    seed: int = 0,
    *,
    system: str | None = NATURAL_SCAFFOLD,
) -> PairSet:
    """English pairs with a Hermes-style scaffold (for ``hf:`` models): 6 analysis frames,
    2 held-out frames, the corpus's languages, tasks and verbs."""
    return _frame_pairs(
        "natural_pairs",
        (NATURAL_TEMPLATES_TRAIN, NATURAL_TEMPLATES_HELDOUT),
        "natural",
        "natural",
        0x7D,
        n_analysis,
        n_heldout,
        seed,
        system,
        "English frames with a Hermes-style <tools>/<tool_call> scaffold (held-out frames "
        "disjoint from the analysis frames)",
    )


# ------------------------------------------------------------------------------ converter
def _as_messages(prompt: Any, name: str) -> tuple[Message, ...]:
    if isinstance(prompt, str):
        if not prompt.strip():
            raise InputError(f"'{name}' is an empty prompt.")
        return (("user", prompt),)
    if isinstance(prompt, Sequence) and prompt:
        out = []
        for i, m in enumerate(prompt):
            if (
                not isinstance(m, Mapping)
                or not isinstance(m.get("role"), str)
                or not isinstance(m.get("content"), str)
            ):
                raise InputError(
                    f"'{name}' message {i} must be a mapping with string 'role' and 'content'. "
                    f"Got {m!r:.60}."
                )
            out.append((m["role"], m["content"]))
        _last_user(out)
        return tuple(out)
    raise InputError(
        f"'{name}' must be a prompt string or a conversation (a list of role/content "
        f"messages). Got {type(prompt).__name__}."
    )


def _find_verb(text: str, verbs: Iterable[str]) -> tuple[int, int, str] | None:
    """The first whole-word, case-insensitive occurrence of any of ``verbs`` in ``text``."""
    best: tuple[int, int, str] | None = None
    for verb in verbs:
        m = re.search(rf"(?<![\w-]){re.escape(verb)}(?![\w-])", text, flags=re.IGNORECASE)
        if m is not None and (best is None or m.start() < best[0]):
            best = (m.start(), m.end(), verb.lower())
    return best


def _check_verbs(verbs: Any, name: str) -> tuple[str, ...]:
    if isinstance(verbs, str) or not isinstance(verbs, Sequence) or not verbs:
        raise InputError(f"'{name}' must be a non-empty list of verbs. Got {verbs!r:.60}.")
    out = []
    for v in verbs:
        if not isinstance(v, str) or not re.fullmatch(r"[A-Za-z][A-Za-z'-]*", v):
            raise InputError(f"'{name}' must hold single words. Got {v!r}.")
        out.append(v.lower())
    return tuple(dict.fromkeys(out))


def pairs_from_prompt(
    prompt: Any,
    *,
    verb: str | None = None,
    execution_verbs: Sequence[str] = EXECUTION_VERBS,
    analysis_verbs: Sequence[str] = ANALYSIS_VERBS,
    group: str = "",
) -> list[ContrastivePair]:
    """Convert one scaffolded prompt into minimal pairs (one per verb of the other class).

    ``prompt``: a conversation (system scaffold, tool schema, few-shot turns, the request as
    the last user message) or a request string. The request verb is ``verb`` when given, else
    the first execution or analysis verb in the last user message (whole word, any case).
    Everything else — scaffold, schema, history, the rest of the request — is kept as it is.
    """
    messages = _as_messages(prompt, "prompt")
    ex = _check_verbs(execution_verbs, "execution_verbs")
    an = _check_verbs(analysis_verbs, "analysis_verbs")
    if set(ex) & set(an):
        raise InputError(f"A verb cannot be both kinds. Got {sorted(set(ex) & set(an))}.")
    text = messages[_last_user(messages)][1]
    if verb is not None:
        if not isinstance(verb, str) or verb.lower() not in set(ex) | set(an):
            raise InputError(
                f"'verb' must be one of the execution or analysis verbs. Got {verb!r}."
            )
        found = _find_verb(text, [verb])
        if found is None:
            raise InputError(f"The request does not contain the verb {verb!r}: {text!r:.80}.")
    else:
        found = _find_verb(text, (*ex, *an))
        if found is None:
            raise InputError(
                "The request holds none of the execution or analysis verbs (give 'verb', or "
                f"extend the verb lists): {text!r:.80}."
            )
    start, end, word = found
    if word in ex:
        return [
            ContrastivePair(messages, (start, end), word, a, source="converted", group=group)
            for a in an
        ]
    out = []
    for e in ex:
        pair = ContrastivePair(messages, (start, end), e, word, source="converted", group=group)
        # store the execution variant, so `span` covers the execution verb
        moved = pair.variant(e)
        msgs = tuple((m["role"], m["content"]) for m in moved)
        out.append(replace(pair, messages=msgs, span=(start, start + len(e))))
    return out


def _pair_from_two(execution: Any, analysis: Any, line: int, group: str) -> ContrastivePair:
    """A ready pair: two prompts that differ in exactly one word of the last user message."""
    a = _as_messages(execution, f"line {line} 'execution'")
    b = _as_messages(analysis, f"line {line} 'analysis'")
    ia, ib = _last_user(a), _last_user(b)
    if a[:ia] != b[:ib] or len(a) != len(b) or a[ia + 1 :] != b[ib + 1 :]:
        raise DataError(f"line {line}: the two prompts differ outside the last user message.")
    ta, tb = a[ia][1], b[ib][1]
    wa = [m for m in re.finditer(r"\S+", ta)]
    wb = [m for m in re.finditer(r"\S+", tb)]
    diff = [i for i, (x, y) in enumerate(zip(wa, wb, strict=False)) if x.group() != y.group()]
    if len(wa) != len(wb) or len(diff) != 1:
        raise DataError(
            f"line {line}: a minimal pair differs in exactly one word of the request; these "
            f"differ in {len(diff) if len(wa) == len(wb) else 'their length'}."
        )
    i = diff[0]
    ma, mb = wa[i], wb[i]
    core_a = re.match(r"[\w'-]+", ma.group())
    core_b = re.match(r"[\w'-]+", mb.group())
    if core_a is None or core_b is None or ma.group()[core_a.end() :] != mb.group()[core_b.end() :]:
        raise DataError(f"line {line}: the differing words must be verbs ({ma.group()!r}).")
    start = ma.start()
    return ContrastivePair(
        a,
        (start, start + core_a.end()),
        core_a.group().lower(),
        core_b.group().lower(),
        source="user",
        group=group,
    )


def read_pairs(
    path: str | Path,
    *,
    heldout_fraction: float = 0.2,
    seed: int = 0,
    execution_verbs: Sequence[str] = EXECUTION_VERBS,
    analysis_verbs: Sequence[str] = ANALYSIS_VERBS,
) -> PairSet:
    """Pairs from a JSONL file, split into analysis and held-out pairs.

    Each line is either ``{"execution": P, "analysis": P}`` (a ready minimal pair; ``P`` a
    string or a conversation) or ``{"prompt": P, "verb": optional}`` (a scaffolded prompt
    that :func:`pairs_from_prompt` converts). Lines are shuffled with ``seed`` and split by
    ``heldout_fraction``; all pairs converted from one prompt land on the same side.
    """
    where = "read_pairs"
    file = check_path(path, "path", where, kind="file")
    frac = check_scalar(
        heldout_fraction, "heldout_fraction", where, lo=0.0, hi=1.0, closed="neither"
    )
    seed = check_scalar(seed, "seed", where, kind=int, lo=0)
    groups: list[list[ContrastivePair]] = []
    with file.open(encoding="utf-8") as fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise DataError(f"{file}: line {n} is not JSON ({exc.msg}).") from None
            if not isinstance(row, dict):
                raise DataError(f"{file}: line {n} must be a JSON object.")
            try:
                if "execution" in row and "analysis" in row:
                    groups.append([_pair_from_two(row["execution"], row["analysis"], n, str(n))])
                elif "prompt" in row:
                    groups.append(
                        pairs_from_prompt(
                            row["prompt"],
                            verb=row.get("verb"),
                            execution_verbs=execution_verbs,
                            analysis_verbs=analysis_verbs,
                            group=str(n),
                        )
                    )
                else:
                    raise DataError(
                        f"line {n} needs 'execution' and 'analysis', or 'prompt'. Got keys "
                        f"{sorted(row)}."
                    )
            except InputError as exc:
                raise DataError(f"{file}: line {n}: {exc}") from None
            except DataError as exc:
                raise DataError(f"{file}: {exc}") from None
    if len(groups) < 2:
        raise DataError(f"{file} holds {len(groups)} usable line(s); at least 2 are needed.")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x7E]))
    order = rng.permutation(len(groups))
    n_held = min(len(groups) - 1, max(1, round(frac * len(groups))))
    held = [p for i in order[:n_held] for p in groups[int(i)]]
    ana = [p for i in order[n_held:] for p in groups[int(i)]]
    return PairSet(
        tuple(ana),
        tuple(held),
        "user",
        {"analysis": len(ana), "heldout": len(held)},
        f"pairs from {file.name} ({len(groups)} lines; held-out lines chosen at random)",
    )
