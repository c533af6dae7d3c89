"""Prompt sets as data: what the evaluation loop (``trustlab.lm.evaluate``) runs models on.

A :class:`PromptSet` is a named list of prompts (instruction strings or conversations), with an
optional reference answer per prompt (for exact-match utility) and per-prompt metadata
(``harmful``, ``category``, ``id``...). Sources:

* :func:`organism_prompt_set` — held-out examples of one kind of the organisms' chat corpus
  (``harmful``, ``jailbreak``, ``task``, ``howto``, ``wrapped_benign``; the same corpus the
  organism cards are measured on), tasks and how-to with their corpus answers as references;
* :func:`behaviour_prompt_set` — a public behaviour list (HarmBench, XSTest, AdvBench,
  StrongREJECT; see :mod:`trustlab.datasets.behaviours`) or a user's prompt file;
* :func:`refusal_prompt_set` — Arditi et al.'s refusal-direction splits read from
  ``../shared/data/refusal`` (:mod:`trustlab.datasets.refusal`; Alpaca is non-commercial and
  never bundled);
* :func:`task_prompt_set` — a user's ``.csv``/``.jsonl`` file of ``prompt``, ``answer`` rows;
* :func:`load_prompt_set` — any of these from one spec string (``organism:harmful``,
  ``harmbench``, ``refusal:harmless_val``, ``tasks:/path/file.jsonl``, ``/path/prompts.txt``);
* :class:`SteeringSplits` — the disjoint fit / calibration / validation / evaluation splits of
  a refusal-steering study, from the organisms' corpus (:func:`organism_steering_splits`) or
  from public lists with jailbreak wrappers and tasks with answers
  (:func:`public_steering_splits`).

No torch is needed here; ``subset(n, seed)`` draws a reproducible sample.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.errors import DataError, InputError
from trustlab.core.validation import check_scalar

__all__ = [
    "ORGANISM_KINDS",
    "PromptSet",
    "SteeringSplits",
    "behaviour_prompt_set",
    "load_prompt_set",
    "organism_prompt_set",
    "organism_steering_splits",
    "public_steering_splits",
    "read_tasks",
    "refusal_prompt_set",
    "task_prompt_set",
]

Prompt = str | Sequence[Mapping[str, str]]
ORGANISM_KINDS = ("harmful", "jailbreak", "task", "howto", "wrapped_benign")


def _check_prompt(p: Any, i: int, name: str) -> Any:
    if isinstance(p, str):
        if not p.strip():
            raise InputError(f"Prompt set {name!r}: prompt {i} is empty.")
        return p
    if isinstance(p, Sequence) and p and all(isinstance(m, Mapping) for m in p):
        msgs = []
        for m in p:
            if "role" not in m or "content" not in m:
                raise InputError(
                    f"Prompt set {name!r}: prompt {i} is a conversation whose messages need "
                    "'role' and 'content'."
                )
            content = m["content"]
            if isinstance(content, Sequence) and not isinstance(content, str):
                from trustlab.lm.content import normalise_content  # image parts (trustlab[llm])

                content = normalise_content(content, f"Prompt set {name!r}: prompt {i} content")
            msgs.append({"role": str(m["role"]), "content": content if isinstance(content, list)
                         else str(content)})  # fmt: skip
        if not any(m["role"] == "user" for m in msgs):
            raise InputError(f"Prompt set {name!r}: conversation {i} has no user message.")
        return tuple(msgs)
    raise InputError(
        f"Prompt set {name!r}: prompt {i} must be a string or a list of role/content messages. "
        f"Got {type(p).__name__}."
    )


@dataclass(frozen=True)
class PromptSet:
    """A named list of prompts with optional reference answers and per-prompt metadata.

    ``prompts``: instruction strings (sent as one user message) or conversations;
    ``references``: one answer per prompt (None where a prompt has none) or None;
    ``meta``: one mapping per prompt (e.g. ``{"id": ..., "harmful": True, "category": ...}``).
    """

    name: str
    prompts: tuple[Any, ...]
    references: tuple[str | None, ...] | None = None
    meta: tuple[Mapping[str, Any], ...] | None = None
    description: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InputError("A prompt set needs a non-empty name.")
        if isinstance(self.prompts, str) or not isinstance(self.prompts, Sequence):
            raise InputError(f"Prompt set {self.name!r}: prompts must be a list of prompts.")
        prompts = tuple(_check_prompt(p, i, self.name) for i, p in enumerate(self.prompts))
        if not prompts:
            raise InputError(f"Prompt set {self.name!r} holds no prompts.")
        object.__setattr__(self, "prompts", prompts)
        if self.references is not None:
            refs = tuple(None if r is None else str(r) for r in self.references)
            if len(refs) != len(prompts):
                raise InputError(
                    f"Prompt set {self.name!r}: {len(refs)} references for {len(prompts)} prompts."
                )
            object.__setattr__(self, "references", refs)
        if self.meta is not None:
            meta = tuple(dict(m) for m in self.meta)
            if len(meta) != len(prompts):
                raise InputError(
                    f"Prompt set {self.name!r}: {len(meta)} metadata rows for {len(prompts)} "
                    "prompts."
                )
            object.__setattr__(self, "meta", meta)

    def __len__(self) -> int:
        return len(self.prompts)

    @property
    def has_references(self) -> bool:
        return self.references is not None and any(r is not None for r in self.references)

    def instruction(self, i: int) -> str:
        """The last user message of prompt ``i`` (what a judge reads as the request; images
        shown as ``<image>``)."""
        p = self.prompts[i]
        if isinstance(p, str):
            return p
        content = next(m["content"] for m in reversed(p) if m["role"] == "user")
        if isinstance(content, str):
            return content
        return " ".join(x["text"] if x["type"] == "text" else "<image>" for x in content)

    def reference(self, i: int) -> str | None:
        return None if self.references is None else self.references[i]

    def item_meta(self, i: int) -> Mapping[str, Any]:
        return {} if self.meta is None else self.meta[i]

    def ids(self) -> list[str]:
        return [str(self.item_meta(i).get("id", i)) for i in range(len(self))]

    def subset(self, n: int | None, seed: int = 0, *, name: str | None = None) -> PromptSet:
        """``n`` prompts drawn without replacement with ``seed`` (all of them, in order, when
        ``n`` is None or at least the set's size)."""
        if n is None or n >= len(self):
            return self if name is None else self.renamed(name)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InputError(f"A prompt-set subset needs n >= 1. Got {n!r}.")
        idx = sorted(np.random.default_rng(seed).permutation(len(self))[:n].tolist())
        return self.take(idx, name=name)

    def take(self, index: Sequence[int], *, name: str | None = None) -> PromptSet:
        return PromptSet(
            name or self.name,
            tuple(self.prompts[i] for i in index),
            None if self.references is None else tuple(self.references[i] for i in index),
            None if self.meta is None else tuple(self.meta[i] for i in index),
            self.description,
        )

    def renamed(self, name: str) -> PromptSet:
        return PromptSet(name, self.prompts, self.references, self.meta, self.description)

    @classmethod
    def from_texts(
        cls,
        name: str,
        texts: Sequence[str],
        references: Sequence[str | None] | None = None,
        **meta: Any,
    ) -> PromptSet:
        """Instruction strings (and answers); ``meta`` values apply to every prompt."""
        if isinstance(texts, str):
            raise InputError("PromptSet.from_texts takes a list of strings, not one string.")
        return cls(name, tuple(texts), None if references is None else tuple(references),
                   tuple(dict(meta) for _ in texts) if meta else None)  # fmt: skip


def organism_prompt_set(
    kind: str,
    *,
    n: int | None = None,
    seed: int = 0,
    split: str = "heldout",
    corpus: Any = None,
    name: str | None = None,
) -> PromptSet:
    """Examples of one ``kind`` of the organisms' chat corpus (default: the held-out ones of
    the corpus the organisms are built and measured on, seed 0). References: the corpus
    answer for ``task``, ``howto`` and ``wrapped_benign`` (exact match measures utility);
    none for ``harmful`` and ``jailbreak``."""
    if kind not in ORGANISM_KINDS:
        raise InputError(f"Organism prompt kinds are {', '.join(ORGANISM_KINDS)}. Got {kind!r}.")
    if split not in ("heldout", "train"):
        raise InputError(f"split must be 'heldout' or 'train'. Got {split!r}.")
    if corpus is None:
        from trustlab.organisms.corpora import build_chat_corpus

        corpus = build_chat_corpus(0)
    examples = [e for e in corpus.examples if e.kind == kind and e.split == split]
    if not examples:
        raise DataError(f"The corpus holds no {split} examples of kind {kind!r}.")
    with_ref = kind in ("task", "howto", "wrapped_benign")
    ps = PromptSet(
        name or f"organism:{kind}",
        tuple(tuple(e.messages()) for e in examples),
        tuple(e.response for e in examples) if with_ref else None,
        tuple(
            {
                "id": f"{e.template}#{i}",
                "harmful": kind in ("harmful", "jailbreak"),
                "category": e.task,
                "template": e.template,
                "label": e.label,
            }
            for i, e in enumerate(examples)
        ),
        f"organisms' chat corpus (seed {corpus.seed}), {split} {kind} examples",
    )
    return ps.subset(n, seed)


def behaviour_prompt_set(
    name_or_path: str | Path,
    *,
    harmful: bool | None = None,
    n: int | None = None,
    seed: int = 0,
    name: str | None = None,
) -> PromptSet:
    """A public behaviour list or a user's prompt file (:func:`load_behaviour_list`).

    ``harmful`` keeps only harmful (True) or harmless (False) prompts of a list that mixes
    both (e.g. ``xstest``); for a user file it labels every prompt (default True). HarmBench's
    contextual behaviours keep their context in the user message."""
    from trustlab.datasets.behaviours import load_behaviour_list

    items = load_behaviour_list(name_or_path, harmful=True if harmful is None else harmful)
    if harmful is not None:
        items = [b for b in items if b.harmful == harmful]
    if not items:
        raise DataError(
            f"{name_or_path!s} holds no {'harmful' if harmful else 'harmless'} prompts."
        )
    ps = PromptSet(
        name or str(name_or_path),
        tuple(b.text for b in items),
        None,
        tuple(
            {"id": b.id, "harmful": b.harmful, "category": b.category, "dataset": b.dataset}
            for b in items
        ),
        f"behaviour list {name_or_path!s}",
    )
    return ps.subset(n, seed)


def refusal_prompt_set(
    split: str,
    *,
    n: int | None = None,
    seed: int = 0,
    root: str | Path | None = None,
    name: str | None = None,
) -> PromptSet:
    """One of Arditi et al.'s instruction lists (:func:`trustlab.datasets.refusal.load_refusal`)
    read from ``../shared/data/refusal`` (or ``root``)."""
    from trustlab.datasets.refusal import load_refusal

    items = load_refusal(split, root=root)
    ps = PromptSet(
        name or f"refusal:{split}",
        tuple(it.instruction for it in items),
        None,
        tuple(
            {"id": it.id, "harmful": it.harmful, "category": it.category, "dataset": split}
            for it in items
        ),
        f"refusal-direction split {split} (Arditi et al. 2024)",
    )
    return ps.subset(n, seed)


def read_tasks(path: str | Path) -> list[tuple[str, str]]:
    """(prompt, answer) pairs from a ``.csv`` or ``.jsonl`` file with ``prompt`` and
    ``answer`` columns (answers are compared after stripping surrounding whitespace)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise DataError(f"Cannot read benign tasks: '{p}' does not exist.")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"Cannot read benign tasks file '{p}': {exc}.") from exc
    if p.suffix.lower() == ".csv":
        try:
            rows: list[Any] = list(csv.DictReader(text.splitlines()))
        except csv.Error as exc:
            raise DataError(f"Benign tasks file '{p}' is not valid CSV: {exc}.") from exc
    elif p.suffix.lower() == ".jsonl":
        rows = []
        for i, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise DataError(f"'{p}' line {i} is not JSON: {exc.msg}.") from exc
    else:
        raise DataError(f"Benign tasks file '{p}' must end in .csv or .jsonl.")
    out = []
    for i, r in enumerate(rows, start=1):
        if not isinstance(r, dict) or not str(r.get("prompt") or "").strip() or "answer" not in r:
            raise DataError(f"Benign tasks file '{p}' row {i} needs a 'prompt' and an 'answer'.")
        if r["answer"] is None:
            raise DataError(f"Benign tasks file '{p}' row {i} has an empty 'answer'.")
        out.append((str(r["prompt"]).strip(), str(r["answer"]).strip()))
    if not out:
        raise DataError(f"Benign tasks file '{p}' holds no tasks.")
    return out


def task_prompt_set(
    path: str | Path, *, n: int | None = None, seed: int = 0, name: str | None = None
) -> PromptSet:
    """A user's tasks with answers (:func:`read_tasks`) as a prompt set with references."""
    pairs = read_tasks(path)
    ps = PromptSet(
        name or Path(path).name,
        tuple(p for p, _ in pairs),
        tuple(a for _, a in pairs),
        tuple({"id": str(i), "harmful": False} for i in range(len(pairs))),
        f"tasks from {path!s}",
    )
    return ps.subset(n, seed)


def load_prompt_set(
    spec: str | Path | PromptSet, *, n: int | None = None, seed: int = 0
) -> PromptSet:
    """A prompt set from a spec: ``organism:<kind>``, ``refusal:<split>``, ``tasks:<path>``, a
    behaviour-list name (``harmbench``, ``xstest_safe``...) or a prompt-file path."""
    if isinstance(spec, PromptSet):
        return spec.subset(n, seed)
    if not isinstance(spec, str | Path):
        raise InputError(f"A prompt-set spec is a string or a path. Got {type(spec).__name__}.")
    s = str(spec)
    if s.startswith("organism:"):
        return organism_prompt_set(s.removeprefix("organism:"), n=n, seed=seed)
    if s.startswith("refusal:"):
        return refusal_prompt_set(s.removeprefix("refusal:"), n=n, seed=seed)
    if s.startswith("tasks:"):
        return task_prompt_set(s.removeprefix("tasks:"), n=n, seed=seed)
    from trustlab.datasets.behaviours import BEHAVIOUR_LISTS

    harmful = {"xstest_safe": False}.get(s)
    if s in BEHAVIOUR_LISTS or any(c in s for c in "/\\.") or isinstance(spec, Path):
        return behaviour_prompt_set(spec, harmful=harmful, n=n, seed=seed)
    raise InputError(
        f"Unknown prompt set {s!r}: use organism:<kind> ({', '.join(ORGANISM_KINDS)}), "
        f"refusal:<split>, tasks:<file>, a behaviour list ({', '.join(BEHAVIOUR_LISTS)}) or a "
        "path to a .txt/.csv/.jsonl prompt file."
    )


# ---------------------------------------------------------------------------------------------
# refusal-steering splits (fit / calibration / validation / evaluation)


@dataclass(frozen=True)
class SteeringSplits:
    """The splits of a refusal-steering study (rheology; mars builds on the same shape).

    Fit/calibration prompts (organism train templates, or the rest of a public list): the
    refusal direction is fitted on ``fit_harmful`` vs ``fit_harmless`` and its layer chosen on
    ``val_harmful``; a harm gate is calibrated on ``cal_wrapped_harmful`` vs
    ``cal_wrapped_benign``. A validation split (``sel_*``) chooses the steering operating
    point, and the evaluation prompts (``eval_*``) measure it; validation and evaluation
    prompts are disjoint (no prompt text in both, tested). With empty ``sel_*`` the operating
    point is chosen on the evaluation prompts (optimistic; flagged by the caller).
    """

    fit_harmful: list[Prompt]
    fit_harmless: list[Prompt]
    val_harmful: list[Prompt]
    cal_wrapped_harmful: list[Prompt]
    cal_wrapped_benign: list[Prompt]
    eval_jailbreak: list[Prompt]
    eval_harmful: list[Prompt]
    eval_benign: list[Prompt]
    eval_tasks: list[Prompt]
    eval_task_answers: list[str]
    sel_jailbreak: list[Prompt] = field(default_factory=list)
    sel_tasks: list[Prompt] = field(default_factory=list)
    sel_task_answers: list[str] = field(default_factory=list)

    def as_prompt_sets(self, *, split: str = "eval") -> dict[str, PromptSet]:
        """The ``eval`` (or ``sel``: validation) jailbreaks and tasks as loop prompt sets."""
        if split not in ("eval", "sel"):
            raise InputError(f"split must be 'eval' or 'sel'. Got {split!r}.")
        jb = self.eval_jailbreak if split == "eval" else self.sel_jailbreak
        tasks = self.eval_tasks if split == "eval" else self.sel_tasks
        answers = self.eval_task_answers if split == "eval" else self.sel_task_answers
        out = {}
        if jb:
            out["jailbreak"] = PromptSet(f"{split}_jailbreak", tuple(jb))
        if tasks:
            out["tasks"] = PromptSet(f"{split}_tasks", tuple(tasks), tuple(answers))
        return out


def _split_disjoint(pool: Sequence[Any], order: Sequence[int], n_a: int, n_b: int, key) -> tuple:
    """First ``n_a`` items of ``pool`` in ``order``, then up to ``n_b`` further items whose
    ``key`` does not occur among the first (so the two parts share no prompt text)."""
    first = [pool[i] for i in order[:n_a]]
    seen = {key(e) for e in first}
    second = []
    for i in order[n_a:]:
        if len(second) == n_b:
            break
        if key(pool[i]) not in seen:
            second.append(pool[i])
            seen.add(key(pool[i]))
    return first, second


def organism_steering_splits(
    corpus: Any, n_fit: int, n_eval: int, seed: int = 0, n_val: int | None = None
) -> SteeringSplits:
    """Steering splits from an organisms chat corpus: fit on train templates, evaluate on
    held-out ones.

    ``n_val`` (default ``n_eval``) held-out jailbreaks and tasks, disjoint from the evaluation
    ones, form the validation split on which the injection operating point is chosen.
    """
    rng = np.random.default_rng(seed)
    n_val = n_eval if n_val is None else n_val

    def pool(kind: str, split: str) -> list[Any]:
        return [e for e in corpus.examples if e.kind == kind and e.split == split]

    def pick(kind: str, n: int, split: str) -> list[Any]:
        p = pool(kind, split)
        return [p[i] for i in rng.permutation(len(p))[:n]]

    def pick2(kind: str, n: int, n2: int, split: str) -> tuple[list[Any], list[Any]]:
        p = pool(kind, split)
        return _split_disjoint(p, rng.permutation(len(p)), n, n2, key=lambda e: e.prompt)

    def conv(es: Sequence[Any]) -> list[Prompt]:
        return [e.messages() for e in es]

    harm = pick("harmful", 2 * n_fit, "train")
    half = n_fit // 2
    tasks, sel_tasks = pick2("task", n_eval, n_val, "heldout")
    fit_harmless = conv(pick("task", half, "train") + pick("howto", n_fit - half, "train"))
    val_harmful = conv(harm[n_fit:])
    cal_wrapped_harmful = conv(pick("jailbreak", n_fit, "train"))
    cal_wrapped_benign = conv(
        pick("wrapped_benign", half, "train")
        + pick("task", half, "train")
        + pick("howto", n_fit - half, "train")
    )
    jailbreak, sel_jailbreak = pick2("jailbreak", n_eval, n_val, "heldout")
    return SteeringSplits(
        fit_harmful=conv(harm[:n_fit]),
        fit_harmless=fit_harmless,
        val_harmful=val_harmful,
        cal_wrapped_harmful=cal_wrapped_harmful,
        cal_wrapped_benign=cal_wrapped_benign,
        eval_jailbreak=conv(jailbreak),
        eval_harmful=conv(pick("harmful", n_eval, "heldout")),
        eval_benign=conv(pick("howto", n_eval // 2, "heldout") + tasks[: n_eval - n_eval // 2]),
        eval_tasks=conv(tasks),
        eval_task_answers=[e.response for e in tasks],
        sel_jailbreak=conv(sel_jailbreak),
        sel_tasks=conv(sel_tasks),
        sel_task_answers=[e.response for e in sel_tasks],
    )


def _user(texts: Sequence[str]) -> list[Prompt]:
    return [[{"role": "user", "content": t}] for t in texts]


def public_steering_splits(
    harmful: Sequence[str],
    harmless: Sequence[str],
    n_fit: int,
    n_eval: int,
    *,
    n_val: int | None = None,
    seed: int = 0,
    wrappers: Sequence[str] | None = None,
    tasks: Sequence[tuple[str, str]] | None = None,
    corpus: Any = None,
) -> SteeringSplits:
    """Steering splits from prompt lists (e.g. HarmBench behaviours and XSTest safe prompts).

    ``harmful`` / ``harmless``: request texts (deduplicated, then shuffled with ``seed``). The
    evaluation and validation harmful requests come first and are disjoint; the rest fit the
    refusal direction (half) and pick its layer (the other half); fewer than ``n_fit`` each is
    allowed. Jailbreaks are the requests inside ``wrappers`` (default: the organisms' nine
    known wrappers, ``{r}`` = the request). Benign utility: ``tasks`` (prompt, exact answer)
    pairs, split into evaluation and validation; or, when ``None``, the held-out tasks of the
    organisms ``corpus`` (exact match then measures the organisms' answer format).
    """
    where = "public_steering_splits"
    for arg, texts in (("harmful", harmful), ("harmless", harmless)):
        if isinstance(texts, str | bytes) or not isinstance(texts, Sequence) or not all(
            isinstance(t, str) for t in texts
        ):  # one string used to be split into its characters
            raise InputError(f"The '{arg}' parameter of {where} is a list of prompt texts.")
    n_fit = check_scalar(n_fit, "n_fit", where, kind=int, lo=1)
    n_eval = check_scalar(n_eval, "n_eval", where, kind=int, lo=1)
    n_val = n_eval if n_val is None else check_scalar(n_val, "n_val", where, kind=int, lo=0)
    seed = check_scalar(seed, "seed", where, kind=int, lo=0)
    rng = np.random.default_rng(seed)
    if wrappers is None:
        from trustlab.organisms.corpora import JAILBREAK_WRAPPERS

        wrappers = [w for _, w in JAILBREAK_WRAPPERS]
    if not wrappers or any("{r}" not in w for w in wrappers):
        raise DataError("Every jailbreak wrapper must contain '{r}' (the request).")
    h = list(dict.fromkeys(t.strip() for t in harmful if t.strip()))
    b = list(dict.fromkeys(t.strip() for t in harmless if t.strip()))
    if len(h) < n_eval + n_val + 4:
        raise DataError(
            f"The harmful prompt list has {len(h)} distinct prompts; a steering study needs at least "
            f"n_eval + n_val + 4 = {n_eval + n_val + 4}. Lower n_eval/n_val or add prompts."
        )
    if len(b) < n_eval + 4:
        raise DataError(
            f"The harmless prompt list has {len(b)} distinct prompts; a steering study needs at least "
            f"n_eval + 4 = {n_eval + 4}. Lower n_eval or add prompts."
        )
    h = [h[i] for i in rng.permutation(len(h))]
    b = [b[i] for i in rng.permutation(len(b))]
    ev, sel, rest = h[:n_eval], h[n_eval : n_eval + n_val], h[n_eval + n_val :]
    m = min(n_fit, len(rest) // 2)
    fit_h, val_h = rest[:m], rest[m : 2 * m]
    ev_b, rest_b = b[:n_eval], b[n_eval:]
    fit_b = rest_b[:n_fit]

    def wrap(texts: Sequence[str]) -> list[str]:
        return [wrappers[int(rng.integers(len(wrappers)))].format(r=t) for t in texts]

    if tasks is None:
        if corpus is None:
            from trustlab.organisms import build_chat_corpus

            corpus = build_chat_corpus(0, n_train=1200, n_heldout=200)
        ts = [e for e in corpus.examples if e.kind == "task" and e.split == "heldout"]
        pairs = [(e.prompt, e.response) for e in ts]
    else:
        pairs = [(p, a) for p, a in tasks]
    if len(pairs) < 2:
        raise DataError(f"a steering study needs at least 2 benign tasks; got {len(pairs)}.")
    n_task_val = min(n_val, len(pairs) // 2)
    ev_t, sel_t = _split_disjoint(
        pairs, rng.permutation(len(pairs)), min(n_eval, len(pairs) - n_task_val), n_task_val,
        key=lambda x: x[0],
    )  # fmt: skip
    return SteeringSplits(
        fit_harmful=_user(fit_h),
        fit_harmless=_user(fit_b),
        val_harmful=_user(val_h),
        cal_wrapped_harmful=_user(wrap(fit_h)),
        cal_wrapped_benign=_user(wrap(fit_b)),
        eval_jailbreak=_user(wrap(ev)),
        eval_harmful=_user(ev),
        eval_benign=_user(ev_b),
        eval_tasks=_user([p for p, _ in ev_t]),
        eval_task_answers=[a for _, a in ev_t],
        sel_jailbreak=_user(wrap(sel)),
        sel_tasks=_user([p for p, _ in sel_t]),
        sel_task_answers=[a for _, a in sel_t],
    )
