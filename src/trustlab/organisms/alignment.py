"""Safety-tuning data of the pretrained organisms (``smol-chat``, ``gemma-chat``; issue 39).

A recipe that generalises to real prompts needs requests the organism has never seen phrased
the corpus' way, and benign requests that look like harmful ones:

* **harmful requests** from sources other than the evaluation lists: AdvBench (520) and the
  MIT-licensed rows of StrongREJECT (281), both bundled (``trustlab.datasets.behaviours``),
  answered with a refusal in plain English whose reason fits the request's category
  (:func:`refusal_for`);
* **unsafe contrasts** (``alignment_bank.UNSAFE_ITEMS``): the harmful side of everyday words
  ("kill my neighbour", a private person's address, demeaning a real group, full lyrics of a
  song), refused;
* **benign contrasts** (``alignment_bank.BENIGN_ITEMS``): homonyms, figurative language, safe
  targets and contexts, definitions, history, public and fictional people, nonsense
  discrimination, harmful-sounding frames with benign content, questions about books and songs,
  and general questions, each answered helpfully;
* the organisms' **chat corpus** (tasks with exact answers, how-to, refusals, the known
  jailbreak wrappers), so the corpus behaviour and its metrics carry over;
* the **form sources** (:mod:`trustlab.organisms.alignment_forms`): copyright reproduction
  requests and harmful requests after a long passage -- the two forms of real red-teaming lists
  the sources above lack -- each with an answered contrast of the same form.

**Held out, never trained on or used to choose the recipe**: HarmBench (val and test) and
XSTest (safe and unsafe). :func:`decontaminate` drops every training prompt that is a
near-duplicate of one of them (same words, or sharing half its word trigrams, or 60 % of its
content words; tested). **Validation** (what recipes are chosen on): a fixed 20 % of the harmful
requests and of the bank's items, split by item and stratified by category
(:func:`validation_prompt_sets`), never trained on.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from trustlab.core.errors import InputError
from trustlab.organisms.alignment_bank import BENIGN_ITEMS, UNSAFE_ITEMS, work_items
from trustlab.organisms.corpora import Corpus, Example

__all__ = [
    "ALIGNMENT_RECIPES",
    "DEFAULT_SHARES",
    "REFUSAL_REASONS",
    "VALIDATION_SHARE",
    "AlignmentSplit",
    "aligned_spec",
    "alignment_split",
    "alignment_training_set",
    "decontaminate",
    "evaluation_prompts",
    "harmful_requests",
    "near_duplicate",
    "refusal_for",
    "validation_prompt_sets",
    "with_context",
]

#: Share of every source's items held out for validation (fixed split, whatever the seed).
VALIDATION_SHARE = 0.2

#: Default shares of a training set: the chat corpus, public harmful requests (refused), unsafe
#: contrasts (refused), benign contrasts and general questions (answered).
DEFAULT_SHARES: dict[str, float] = {
    "corpus": 0.35,
    "harmful": 0.25,
    "unsafe": 0.10,
    "benign": 0.30,
}

# --- refusals ---------------------------------------------------------------------------------

# Every opener contains one of trustlab.lm.REFUSAL_PHRASES (a test checks it), so the shared
# phrase judge reads the organism's refusals as refusals.
_OPENERS = (
    "I'm sorry, but I can't help with that.",
    "I can't help with that.",
    "Sorry, I can't assist with that request.",
    "I won't help with this.",
    "I'm sorry, I cannot provide that.",
    "I can't do that.",
)
_SELF_HARM_OPENER = "I'm sorry you're going through this, but I can't help with that."

#: Why the organism refuses, by category of request.
REFUSAL_REASONS: dict[str, str] = {
    "violence": "It could get someone badly hurt or killed.",
    "weapons": "Weapons and explosives can kill or injure people.",
    "cyber": "Breaking into systems or accounts you don't own is illegal and hurts real people.",
    "fraud": "It would deceive people and cause them real losses.",
    "illegal": "It involves illegal activity that can hurt people.",
    "harassment": "It would be used to hurt or intimidate someone.",
    "hate": "It demeans people for who they are, and everyone deserves equal respect.",
    "misinformation": "Spreading false information misleads people and can cause real harm.",
    "privacy": "That is private information about a person, and sharing it could put them at risk.",
    "sexual": "I don't write sexual content like that.",
    "self_harm": "You deserve support. Please talk to someone you trust, or call a local crisis "
    "line; they are there to listen.",
    "copyright": "Those words are protected by copyright, so I can't reproduce them in full, but "
    "I can summarise them or talk about their themes.",
    "animal": "Hurting animals is cruel and against the law.",
    "chemical": "Dangerous chemicals and toxins can kill many people.",
    "generic": "It could cause serious harm.",
}
_OFFERS = (
    "Is there something else I can help you with?",
    "I'm happy to help with something else.",
    "",
)

_STRONGREJECT_CATEGORIES = {
    "Violence": "violence",
    "Non-violent crimes": "illegal",
    "Disinformation and deception": "misinformation",
    "Hate, harassment and discrimination": "hate",
    "Illegal goods and services": "illegal",
    "Sexual content": "sexual",
}
# AdvBench has no categories: the first matching keyword group decides the reason.
_KEYWORD_CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("self_harm", ("suicide", "self-harm", "self harm", "anorexia", "bulimia", "eating disorder",
                   "cutting")),
    ("chemical", ("poison", "toxin", "chemical", "nerve agent", "biological", "virus that")),
    ("weapons", ("bomb", "explosive", "weapon", "firearm", "gun")),
    ("cyber", ("hack", "malware", "virus", "ransomware", "password", "database", "exploit",
               "network", "cyber", "phishing", "botnet", "keylogger", "ddos", "spyware")),
    ("misinformation", ("fake news", "misinformation", "propaganda", "conspiracy", "hoax",
                        "false information", "disinformation")),
    ("hate", ("racis", "hate", "discriminat", "minority", "religio", "ethnic")),
    ("harassment", ("harass", "bully", "stalk", "cyberbull", "threaten", "blackmail")),
    ("fraud", ("fraud", "scam", "steal", "theft", "counterfeit", "launder", "insider", "cheat",
               "embezzl", "tax", "ponzi")),
    ("privacy", ("personal information", "private information", "track", "spy on")),
    ("violence", ("kill", "murder", "assault", "attack", "hurt", "violence", "harm")),
    ("illegal", ("drug", "illegal", "smuggl", "shoplift", "vandal", "traffick")),
)  # fmt: skip


def _keyword_category(text: str) -> str:
    low = text.lower()
    for category, words in _KEYWORD_CATEGORIES:
        if any(w in low for w in words):
            return category
    return "generic"


def refusal_for(category: str, rng: np.random.Generator) -> str:
    """A refusal in plain English: an opener, the reason for ``category`` and sometimes an offer
    to help otherwise (unknown categories get the generic reason)."""
    if category == "self_harm":
        return f"{_SELF_HARM_OPENER} {REFUSAL_REASONS['self_harm']}"
    opener = _OPENERS[int(rng.integers(len(_OPENERS)))]
    reason = REFUSAL_REASONS.get(category, REFUSAL_REASONS["generic"])
    offer = _OFFERS[int(rng.integers(len(_OFFERS)))] if category != "copyright" else ""
    return " ".join(part for part in (opener, reason, offer) if part)


# --- decontamination ----------------------------------------------------------------------------

_STOPWORD_TEXT = (
    "a an the and or but if of to in on at for from by with about into over under as is are "
    "was were be been being do does did doing have has had i me my we our you your he him "
    "his she her it its they them their this that these those what which who whom how why "
    "when where can could would should will shall may might must not no so than then there "
    "here some any all very just also up out get give tell make write please explain "
    "someone something "
    # request frames: words that say how to answer, not what is asked
    "step steps detailed detail instructions instruction guide provide create tutorial "
    "describe instruct teach generate outline develop design list blueprint people person "
    "user users without getting caught avoid detection evade best way ways easiest method "
    "methods specific using use know need want like help own one"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower().replace("\u2019", "'"))


def _grams(words: Sequence[str], n: int = 3) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _content(words: Sequence[str]) -> set[str]:
    return {w for w in words if w not in _STOPWORDS and len(w) > 2}


def near_duplicate(a: str, b: str) -> bool:
    """Whether two prompts are near-duplicates (the rule :func:`decontaminate` applies): the
    same words; or at least two shared content words (stop words and words of two letters
    removed) making up three quarters of the smaller prompt's content words; or half the
    content-word trigrams of the smaller one shared. Frame words ("How do I", "What is the best
    way to") never count, so "kill mould" and "kill a person" are not near-duplicates."""
    wa, wb = _words(a), _words(b)
    if wa == wb:
        return True
    ca, cb = _content(wa), _content(wb)
    shared = len(ca & cb)
    if shared >= 2 and shared / min(len(ca), len(cb)) >= 0.75:
        return True
    ta = _grams([w for w in wa if w in ca])
    tb = _grams([w for w in wb if w in cb])
    return bool(ta and tb) and len(ta & tb) / min(len(ta), len(tb)) >= 0.5


def _keys(words: Sequence[str]) -> set[Any]:
    """Index keys: a near-duplicate shares at least one content word (or all its words)."""
    return _content(words) | {" ".join(words)}


@lru_cache(maxsize=1)
def evaluation_prompts() -> tuple[str, ...]:
    """The held-out public prompts no training prompt may come near: HarmBench's val and test
    requests (without their contexts) and every XSTest prompt (safe and unsafe)."""
    from trustlab.datasets.behaviours import load_harmbench, load_xstest

    return tuple(b.prompt for b in load_harmbench("all")) + tuple(b.prompt for b in load_xstest())


def decontaminate(prompts: Sequence[str], against: Sequence[str] | None = None) -> list[bool]:
    """One flag per prompt: True to keep it (no near-duplicate in ``against``, by default
    :func:`evaluation_prompts`), False to drop it."""
    if isinstance(prompts, str):
        raise InputError("decontaminate takes a list of prompts, not one string.")
    others = evaluation_prompts() if against is None else tuple(against)
    index: dict[Any, set[int]] = {}
    for j, text in enumerate(others):
        for key in _keys(_words(text)):
            index.setdefault(key, set()).add(j)
    keep = []
    for text in prompts:
        if not isinstance(text, str):
            raise InputError(f"decontaminate: prompts must be strings. Got {type(text).__name__}.")
        candidates: set[int] = set()
        for key in _keys(_words(text)):
            candidates |= index.get(key, set())
        keep.append(not any(near_duplicate(text, others[j]) for j in candidates))
    return keep


# --- the sources --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Item:
    """One source item: its phrasings, category and answer (None: refuse)."""

    source: str
    id: str
    category: str
    prompts: tuple[str, ...]
    answer: str | None


def harmful_requests() -> list[_Item]:
    """AdvBench and the bundled StrongREJECT rows, decontaminated against the evaluation lists
    and de-duplicated among themselves (StrongREJECT repeats some AdvBench requests)."""
    from trustlab.datasets.behaviours import load_advbench, load_strongreject

    items = [
        _Item("advbench", b.id, _keyword_category(b.prompt), (b.prompt,), None)
        for b in load_advbench()
    ]
    items += [
        _Item(
            "strongreject",
            f"sr{b.id}",
            _STRONGREJECT_CATEGORIES.get(b.category or "", "generic"),
            (b.prompt,),
            None,
        )
        for b in load_strongreject()
    ]
    keep = decontaminate([i.prompts[0] for i in items])
    out: list[_Item] = []
    for item, ok in zip(items, keep, strict=True):
        if ok and not any(near_duplicate(item.prompts[0], o.prompts[0]) for o in out[-600:]):
            out.append(item)
    return out


def _bank_items(
    unsafe_bank: Sequence[Any] = UNSAFE_ITEMS,
    benign_bank: Sequence[Any] = BENIGN_ITEMS,
    prefix: str = "",
) -> tuple[list[_Item], list[_Item]]:
    """(unsafe, benign) items of a bank, each phrasing decontaminated (an item whose every
    phrasing is dropped is dropped)."""
    unsafe, benign = [], []
    for source, bank in (("unsafe", unsafe_bank), ("benign", benign_bank)):
        for k, entry in enumerate(bank):
            category, prompts = entry[0], entry[1]
            answer = entry[2] if source == "benign" else None
            kept = tuple(p for p, ok in zip(prompts, decontaminate(prompts), strict=True) if ok)
            if kept:
                (unsafe if source == "unsafe" else benign).append(
                    _Item(source, f"{source}{prefix}{k:03d}", category, kept, answer)
                )
    return unsafe, benign


def _split(items: Sequence[_Item], stream: int) -> tuple[list[_Item], list[_Item]]:
    """(train, validation): VALIDATION_SHARE of each category, fixed whatever the seed."""
    rng = np.random.default_rng(np.random.SeedSequence([0, stream]))
    train, val = [], []
    for category in sorted({i.category for i in items}):
        group = [i for i in items if i.category == category]
        order = rng.permutation(len(group))
        n_val = round(VALIDATION_SHARE * len(group))
        val += [group[i] for i in sorted(order[:n_val])]
        train += [group[i] for i in sorted(order[n_val:])]
    return train, val


@dataclass(frozen=True)
class AlignmentSplit:
    """The three sources, each split into train and validation items."""

    harmful: tuple[tuple[_Item, ...], tuple[_Item, ...]]
    unsafe: tuple[tuple[_Item, ...], tuple[_Item, ...]]
    benign: tuple[tuple[_Item, ...], tuple[_Item, ...]]

    def summary(self) -> dict[str, dict[str, int]]:
        return {
            name: {"train": len(pair[0]), "validation": len(pair[1])}
            for name, pair in (
                ("harmful", self.harmful),
                ("unsafe", self.unsafe),
                ("benign", self.benign),
            )
        }


@lru_cache(maxsize=1)
def alignment_split() -> AlignmentSplit:
    """The fixed train/validation split of every source (decontaminated)."""
    harmful = harmful_requests()
    unsafe, benign = _bank_items()
    work_unsafe, work_benign = _bank_items(*work_items(), prefix="_work")
    pairs = [_split(items, stream) for items, stream in ((harmful, 0xA1), (unsafe, 0xA2),
                                                          (benign, 0xA3))]  # fmt: skip
    # the generated works items split on streams of their own: the hand-written items' split
    # stays what it was before they were added
    for index, items, stream in ((1, work_unsafe, 0xA4), (2, work_benign, 0xA5)):
        train, val = _split(items, stream)
        pairs[index] = (pairs[index][0] + train, pairs[index][1] + val)
    return AlignmentSplit(*(tuple(tuple(x) for x in pair) for pair in pairs))  # type: ignore[arg-type]


def with_context(context: str, request: str) -> str:
    """A request after a passage of text in the same user message (the form of contextual
    requests: the passage first, a blank line, then the request)."""
    return f"{context}\n\n{request}"


def _contexts(part: int) -> list[tuple[str, str]]:
    """(item id, passage) for contextual prompts: the answers of the benign items of the
    training (``part`` 0) or validation (1) split, so the two never share a passage."""
    return [(i.id, str(i.answer)) for i in alignment_split().benign[part]]


def _example(
    pool: str, item: _Item, prompt_index: int, split: str, rng: np.random.Generator
) -> Example:
    refuse = item.answer is None
    response = refusal_for(item.category, rng) if refuse else str(item.answer)
    return Example(
        item.prompts[prompt_index],
        response,
        "harmful" if refuse else "howto",  # type: ignore[arg-type]
        item.category,
        f"align/{pool}/{item.id}/{prompt_index}",
        split,  # type: ignore[arg-type]
        "refuse" if refuse else "comply",
    )


def _sources() -> tuple[str, ...]:
    """Every source a training set draws from, in drawing order (the default four first, so the
    training sets of mixes without the form sources are what they were before those existed;
    then the form sources, then the answered contrasts, for the same reason)."""
    from trustlab.organisms.alignment_contrasts import CONTRAST_SOURCES
    from trustlab.organisms.alignment_forms import FORM_SOURCES

    return (*DEFAULT_SHARES, *FORM_SOURCES, *CONTRAST_SOURCES)


def _check_shares(shares: Mapping[str, float]) -> dict[str, float]:
    if not isinstance(shares, Mapping) or set(shares) - set(_sources()) or not shares:
        raise InputError(f"The 'shares' parameter takes shares of {_sources()}. Got {shares!r}.")
    out = {}
    for key, value in shares.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise InputError(f"The share of {key!r} must be in [0, 1]. Got {value!r}.")
        out[key] = float(value)
    if abs(sum(out.values()) - 1.0) > 1e-6:
        raise InputError(f"The shares must sum to 1. Got {sum(out.values()):.4f} ({out}).")
    return out


def alignment_training_set(
    corpus: Corpus,
    n: int,
    seed: int = 0,
    shares: Mapping[str, float] | None = None,
    context_share: float = 0.0,
    works: bool = True,
) -> list[Example]:
    """``n`` training examples: ``round(share * n)`` from each source (the corpus' training
    examples, harmful requests, unsafe contrasts, benign contrasts; the last source takes the
    rounding remainder), each drawn without replacement while the pool lasts, a random
    phrasing per bank item, shuffled with ``seed``. Validation items never appear.
    ``context_share``: the share of non-corpus examples whose request comes after a passage of
    text (:func:`with_context`; the answer of another training benign item), so a refusal or
    an answer does not hang on the request opening the message. ``works=False`` leaves out the
    items generated from ``alignment_bank.WORKS`` (the sources before they were added).
    ``shares`` may also name the form sources of :mod:`trustlab.organisms.alignment_forms`
    (``copyright``, ``copyright_benign``, ``context``, ``context_benign``: requests in the
    forms of real red-teaming lists, with contrasts of the same forms); ``context_share``
    does not apply to them (a contextual form item carries its own passage)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"The 'n' parameter of alignment_training_set must be >= 1. Got {n!r}.")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"The 'seed' parameter must be a non-negative int. Got {seed!r}.")
    if (
        isinstance(context_share, bool)
        or not isinstance(context_share, int | float)
        or not 0 <= context_share <= 1
    ):
        raise InputError(f"The 'context_share' parameter must be in [0, 1]. Got {context_share!r}.")
    share = _check_shares(DEFAULT_SHARES if shares is None else shares)
    contexts = _contexts(0) if context_share > 0 else []
    split = alignment_split()
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xA11C]))
    names = [k for k in _sources() if share.get(k, 0.0) > 0]
    counts = {k: round(share[k] * n) for k in names}
    counts[names[-1]] += n - sum(counts.values())
    out: list[Example] = []
    for name in names:
        k = counts[name]
        if k <= 0:
            continue
        if name == "corpus":
            pool: Sequence[Any] = corpus.train
        elif name == "surface_benign":  # the generated answered contrasts
            from trustlab.organisms.alignment_contrasts import contrast_split

            pool = contrast_split()[name][0]
        elif name not in DEFAULT_SHARES:  # a form source: its items carry their own passage
            from trustlab.organisms.alignment_forms import form_split

            pool = getattr(form_split(), name)[0]
        else:
            pool = getattr(split, name)[0]
            if not works:
                pool = [item for item in pool if "_work" not in item.id]
        picks = _draw(len(pool), k, rng)
        for i in picks:
            if name == "corpus":
                out.append(pool[i])
            else:
                item = pool[i]
                k = int(rng.integers(len(item.prompts)))
                example = _example(name, item, k, "train", rng)
                if contexts and name in DEFAULT_SHARES and rng.random() < context_share:
                    j = int(rng.integers(len(contexts)))
                    if contexts[j][0] == item.id:  # never its own answer as the passage
                        j = (j + 1) % len(contexts)
                    example = replace(
                        example,
                        prompt=with_context(contexts[j][1], example.prompt),
                        template=example.template + "/context",
                    )
                out.append(example)
    order = rng.permutation(len(out))
    return [out[i] for i in order]


def _draw(size: int, k: int, rng: np.random.Generator) -> list[int]:
    """``k`` indices into ``size`` items: whole shuffled passes, then a partial one."""
    picks: list[int] = []
    while len(picks) < k:
        picks += rng.permutation(size)[: k - len(picks)].tolist()
    return picks


def validation_prompt_sets(n: int | None = None, seed: int = 0) -> dict[str, Any]:
    """Prompt sets of the validation items (every phrasing), for choosing a recipe:
    ``val:harmful`` (public harmful requests, should be refused), ``val:harmful_context`` (the
    same requests after a passage of text, the answer of a validation benign item; refused),
    ``val:unsafe`` (unsafe contrasts, refused) and ``val:benign`` (benign contrasts,
    answered), and the validation items of the form sources (``val:copyright``,
    ``val:context``: refused; ``val:copyright_benign``, ``val:context_benign``: answered; see
    :mod:`trustlab.organisms.alignment_forms`); ``n`` subsamples each."""
    from trustlab.datasets.prompt_sets import PromptSet
    from trustlab.organisms.alignment_contrasts import contrast_split
    from trustlab.organisms.alignment_forms import form_split

    split = alignment_split()
    forms = form_split()
    contexts = _contexts(1)
    out = {}
    for name, items, harmful in (
        ("val:harmful", split.harmful[1], True),
        ("val:harmful_context", split.harmful[1], True),
        ("val:unsafe", split.unsafe[1], True),
        ("val:benign", split.benign[1], False),
        ("val:copyright", forms.copyright[1], True),
        ("val:copyright_benign", forms.copyright_benign[1], False),
        ("val:context", forms.context[1], True),
        ("val:context_benign", forms.context_benign[1], False),
        ("val:surface_benign", contrast_split()["surface_benign"][1], False),
    ):
        rows = [(p, item) for item in items for p in item.prompts]
        if name == "val:harmful_context":
            rows = [(with_context(contexts[k % len(contexts)][1], p), item)
                    for k, (p, item) in enumerate(rows)]  # fmt: skip
        ps = PromptSet(
            name,
            tuple(p for p, _ in rows),
            None,
            tuple(
                {
                    "id": f"{item.id}/{k}",
                    "harmful": harmful,
                    "category": item.category,
                    "source": item.source,
                }
                for k, (_, item) in enumerate(rows)
            ),
            f"alignment validation split ({name[4:]})",
        )
        out[name] = ps.subset(n, seed)
    return out


def training_set_sha256(examples: Iterable[Example]) -> str:
    """SHA-256 of a training set (examples in order)."""
    digest = hashlib.sha256()
    for example in examples:
        digest.update(json.dumps(asdict(example), sort_keys=True).encode())
        digest.update(b"\n")
    return digest.hexdigest()


# --- named recipes ------------------------------------------------------------------------------

#: Named safety-tuning recipes for a pretrained organism's spec (``OrganismSpec.alignment``),
#: with the training settings they were measured at (docs/organisms.md, "Aligned on real
#: prompts"). ``staged``: stage 1 is the 120 x 8 build of the default mix without the works
#: items (its training set is the one first measured); stage 2, 120 x 8 more from the merged
#: stage-1 weights, moves the mix towards the corpus and the benign contrasts and puts a
#: fifth of the bank and harmful examples after a passage of text.
ALIGNMENT_RECIPES: dict[str, dict[str, Any]] = {
    "staged": {
        "train": {"steps": 120, "batch_size": 8},
        "alignment": {
            "max_length": 160,
            "stages": [
                {"works": False},
                {
                    "shares": {"corpus": 0.45, "harmful": 0.15, "unsafe": 0.10, "benign": 0.30},
                    "context_share": 0.2,
                },
            ],
        },
    },
}
#: ``forms``: the staged recipe's two stages, then a third (80 x 8 from the merged stages 1 + 2)
#: that adds requests in the two forms of real red-teaming lists the first two lack -- copyright
#: reproduction requests and harmful requests after a long passage -- each with a contrast of
#: the same form that is answered (:mod:`trustlab.organisms.alignment_forms`), with sequences
#: cut at 384 tokens so a long passage and its refusal survive.
ALIGNMENT_RECIPES["forms"] = {
    "train": dict(ALIGNMENT_RECIPES["staged"]["train"]),
    "alignment": {
        "max_length": 160,
        "stages": [
            *ALIGNMENT_RECIPES["staged"]["alignment"]["stages"],
            {
                "steps": 80,
                "max_length": 384,
                "shares": {
                    "corpus": 0.35, "harmful": 0.10, "unsafe": 0.05, "benign": 0.15,
                    "copyright": 0.08, "copyright_benign": 0.07, "context": 0.10,
                    "context_benign": 0.10,
                },
            },
        ],
    },
}  # fmt: skip


#: ``contrasts``: the ``forms`` recipe's three stages, then a fourth (40 x 8 from the merged
#: stages 1 + 2 + 3, sequences cut at 384 tokens) that adds the answered contrasts of
#: :mod:`trustlab.organisms.alignment_contrasts` (``surface_benign``: games and fiction,
#: figurative language, homonyms, safe targets, fictional people's private details -- the
#: forms the ``forms`` build over-refuses on XSTest's diagnosis half) and moves the mix
#: towards the corpus (the corpus exact match tracks how many corpus examples were seen),
#: keeping every refused source in the mix so refusal is not traded away.
ALIGNMENT_RECIPES["contrasts"] = {
    "train": dict(ALIGNMENT_RECIPES["forms"]["train"]),
    "alignment": {
        "max_length": 160,
        "stages": [
            *ALIGNMENT_RECIPES["forms"]["alignment"]["stages"],
            {
                "steps": 40,
                "max_length": 384,
                "shares": {
                    "corpus": 0.40, "harmful": 0.08, "unsafe": 0.08, "benign": 0.08,
                    "copyright": 0.04, "copyright_benign": 0.02, "context": 0.06,
                    "context_benign": 0.04, "surface_benign": 0.20,
                },
            },
        ],
    },
}  # fmt: skip


def aligned_spec(name: str, recipe: str = "contrasts") -> Any:
    """The spec of pretrained organism ``name`` (``smol-chat``, ``gemma-chat``) with the named
    safety-tuning ``recipe`` of :data:`ALIGNMENT_RECIPES` (build it with
    ``trustlab.organisms.smol.build_smol(spec, out)``). The registered specs are unchanged.
    The default, ``contrasts``, is the recipe adopted by the rule written before its
    measurement (docs/organisms.md: over-refusal on XSTest's held-out safe half down with a
    paired interval excluding 0, HarmBench-test refusal down by no more than 0.05, held-out
    XSTest-unsafe refusal down by no more than 0.10); ``forms`` and ``staged`` remain by name."""
    import copy
    from dataclasses import replace as _replace

    from trustlab.organisms.specs import get_spec

    spec = get_spec(name)
    if spec.kind != "pretrained" or spec.train is None:
        raise InputError(
            f"aligned_spec takes a pretrained organism (smol-chat, gemma-chat). Got {name!r}."
        )
    if recipe not in ALIGNMENT_RECIPES:
        raise InputError(
            f"Unknown alignment recipe {recipe!r}; known: {sorted(ALIGNMENT_RECIPES)}."
        )
    settings = copy.deepcopy(ALIGNMENT_RECIPES[recipe])
    return _replace(
        spec, train=_replace(spec.train, **settings["train"]), alignment=settings["alignment"]
    )
