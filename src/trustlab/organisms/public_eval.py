"""Refusal of a pretrained organism on real prompts: the public lists and the validation split.

The cards of ``smol-chat`` and ``gemma-chat`` record, next to the corpus metrics and the
perplexity, how often the organism refuses

* ``harmbench_val`` / ``harmbench_test``: HarmBench's text behaviours (80 / 320: standard,
  copyright and contextual; contextual ones carry their context in the user message) --
  should be refused;
* ``xstest_unsafe``: XSTest's 200 unsafe contrast prompts -- should be refused;
* ``xstest_safe``: XSTest's 250 safe prompts that sound unsafe -- should be *answered*
  (refusal here is over-refusal);

each with its Clopper-Pearson interval, through the shared evaluation loop
(:func:`trustlab.lm.evaluate`: greedy, 48 new tokens, the shared phrase judge
:class:`trustlab.lm.RefusalJudge`). These lists are never trained on or used to choose the recipe
(:mod:`trustlab.organisms.alignment`); the recipe is chosen on :func:`validation_metrics`.
Per-item verdicts and reply hashes (never the replies) go to the organism's
``public_lists.json``.

A build whose spec sets ``alignment`` measures them itself (``build_smol``); for any other built
chat organism (the registered ``smol-chat`` and ``gemma-chat`` builds),
:func:`record_public_lists` (``trustlab organisms evaluate-public NAME``) measures them on the
build in the cache and writes them into that build's own card, with the SHA-256 of the weights
they were measured on: a rebuild replaces the directory and drops the record with the old build.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from trustlab.core.errors import InputError

__all__ = [
    "PUBLIC_LISTS",
    "XSTEST_HALVES",
    "choose_refusal_bias",
    "evaluate_refusal",
    "public_list_metrics",
    "record_public_lists",
    "refusal_bias",
    "refusal_margins",
    "validation_metrics",
    "xstest_half",
]

#: The public lists of a card: name -> (behaviour list, should the organism refuse?).
PUBLIC_LISTS: dict[str, tuple[str, bool]] = {
    "harmbench_val": ("harmbench_val", True),
    "harmbench_test": ("harmbench_test", True),
    "xstest_unsafe": ("xstest_unsafe", True),
    "xstest_safe": ("xstest_safe", False),
}

MAX_NEW_TOKENS = 48

#: The two fixed halves of XSTest (:func:`xstest_half`).
XSTEST_HALVES = ("diagnosis", "heldout")
_XSTEST_SPLIT_SALT = "trustlab-39-xstest-split:"


def xstest_half(label: str, half: str) -> Any:
    """A fixed half of XSTest's ``safe`` or ``unsafe`` prompts as a prompt set.

    Within each XSTest type the prompts are ordered by SHA-256 of ``salt + id`` and the first
    ``ceil(n / 2)`` form the ``diagnosis`` half (which may be read per type and per verdict
    to diagnose a recipe), the rest the ``heldout`` half (reported only, never read per item
    before a recipe is fixed). The split depends on the ids alone, fixed before any verdict was
    read (docs/organisms.md, issue 39)."""
    import hashlib

    from trustlab.datasets.behaviours import load_xstest
    from trustlab.datasets.prompt_sets import PromptSet

    if label not in ("safe", "unsafe"):
        raise InputError(f"xstest_half: label must be 'safe' or 'unsafe'. Got {label!r}.")
    if half not in XSTEST_HALVES:
        raise InputError(f"xstest_half: half must be one of {XSTEST_HALVES}. Got {half!r}.")
    items = load_xstest(label)
    keep: set[str] = set()
    for category in sorted({b.category for b in items}):
        group = sorted(
            (b for b in items if b.category == category),
            key=lambda b: hashlib.sha256((_XSTEST_SPLIT_SALT + b.id).encode()).hexdigest(),
        )
        first = (len(group) + 1) // 2
        chosen = group[:first] if half == "diagnosis" else group[first:]
        keep |= {b.id for b in chosen}
    rows = [b for b in items if b.id in keep]
    return PromptSet(
        f"xstest_{label}_{half}",
        tuple(b.text for b in rows),
        None,
        tuple(
            {"id": b.id, "harmful": b.harmful, "category": b.category, "dataset": b.dataset}
            for b in rows
        ),
        f"XSTest {label}, {half} half (fixed by a salted hash of the ids, per type)",
    )


def _as_lm(model: Any, tokenizer: Any) -> Any:
    from trustlab.lm import LanguageModel

    if isinstance(model, LanguageModel) or tokenizer is None:
        return model
    return LanguageModel(model, tokenizer)


def _check_bias(bias: Any) -> float:
    from trustlab.core.validation import check_scalar

    return check_scalar(bias, "refusal_bias", lo=0.0, hi=1e4)


@contextlib.contextmanager
def refusal_bias(lm: Any, bias: float, token_ids: Sequence[int] | None = None) -> Iterator[Any]:
    """An operating point of a local model's refusal: inside the block, ``bias`` is subtracted
    from the logits of the refusal-opener tokens (``token_ids``; default
    :func:`trustlab.lm.refusal_token_ids`: the first tokens of "I", "Sorry", "As") at the
    *first response token* only, i.e. in a forward pass that carries no KV cache (the prefill of
    :func:`trustlab.lm.decoding.generate_rows` and :func:`trustlab.lm.next_token_logprobs`);
    decoding steps over the cache are untouched, so a reply may still refuse after its first
    token. Under greedy decoding the reply opens with a refusal token iff the prompt's
    :func:`refusal_margins` exceeds ``bias``. ``bias = 0`` changes nothing (tested). The
    cache-less reference decoder (``generate_rows(cache=False)``) reruns the prefill at every
    step, so there the bias applies at every step."""
    from trustlab.lm import LanguageModel
    from trustlab.lm.judges import _refusal_ids

    if not isinstance(lm, LanguageModel):
        raise InputError(
            f"refusal_bias needs a trustlab.lm.LanguageModel. Got {type(lm).__name__}."
        )
    b = _check_bias(bias)
    ids = _refusal_ids(lm, token_ids)
    torch_ids = list(ids)
    head = lm.model.get_output_embeddings()
    if head is None:
        raise InputError("refusal_bias: the model has no output embedding (lm_head).")
    state = {"prefill": False}

    def pre(_module: Any, args: Any, kwargs: Any) -> None:
        state["prefill"] = all(kwargs.get(k) is None for k in ("cache", "past_key_values"))

    def post(_module: Any, _args: Any, out: Any) -> Any:
        if state["prefill"] and b != 0.0:
            out = out.clone()
            out[..., -1, torch_ids] -= b
        return out

    handles = [lm.model.register_forward_pre_hook(pre, with_kwargs=True),
               head.register_forward_hook(post)]  # fmt: skip
    try:
        yield ids
    finally:
        for h in handles:
            h.remove()


def refusal_margins(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Any],
    token_ids: Sequence[int] | None = None,
    *,
    batch_size: int = 32,
) -> list[float]:
    """Per prompt, the first response token's refusal margin: the largest logit among the
    refusal-opener tokens minus the largest logit among all other tokens (positive: greedy
    decoding opens with a refusal token). Instruction strings are sent as one user message. Under :func:`refusal_bias` with bias ``b`` the reply
    opens with a refusal token iff the margin exceeds ``b``."""
    from trustlab.lm.distributions import next_token_logprobs
    from trustlab.lm.judges import _refusal_ids

    lm = _as_lm(model, tokenizer)
    ids = _refusal_ids(lm, token_ids)
    if isinstance(prompts, str) or not prompts:
        raise InputError("refusal_margins takes a non-empty list of prompts.")
    # an instruction string is one user message, as the evaluation loop sends it
    convs = [[{"role": "user", "content": p}] if isinstance(p, str) else p for p in prompts]
    logp = next_token_logprobs(lm, convs, batch_size=batch_size)
    inside = logp[:, ids].max(-1).values
    rest = logp.clone()
    rest[:, ids] = float("-inf")
    return [float(x) for x in (inside - rest.max(-1).values)]


def choose_refusal_bias(
    margins: Mapping[str, Sequence[float]],
    refused: Mapping[str, Sequence[bool]],
    floors: Mapping[str, float],
    minimise: str,
    grid: Sequence[float],
) -> tuple[float, dict[float, dict[str, float]]]:
    """The operating-point rule: predict, for each bias ``b`` of ``grid``, each calibration
    set's refusal rate as the share of prompts refused at bias 0 whose margin exceeds ``b``
    (a suppressed opener is predicted to be answered; a prompt answered at bias 0 stays
    answered), and take the ``b`` with the lowest predicted rate on ``minimise`` among those
    keeping every set of ``floors`` at or above its floor (ties: the smallest ``b``; none
    feasible: 0). Returns ``(b, {b: {set: predicted rate}})``."""
    if not grid or any(not float(b) >= 0.0 for b in grid):
        raise InputError(f"choose_refusal_bias: grid must be biases >= 0. Got {list(grid)!r}.")
    names = {*floors, minimise}
    missing = [n for n in names if n not in margins or n not in refused]
    if missing:
        raise InputError(f"choose_refusal_bias: no margins or verdicts for {sorted(missing)}.")
    for n in names:
        if len(margins[n]) != len(refused[n]) or not margins[n]:
            raise InputError(f"choose_refusal_bias: set {n!r} needs one margin per verdict.")
    table: dict[float, dict[str, float]] = {}
    for b in sorted({float(x) for x in grid}):
        table[b] = {
            n: sum(bool(r) and m > b for m, r in zip(margins[n], refused[n], strict=True))
            / len(margins[n])
            for n in names
        }
    feasible = [b for b, row in table.items() if all(row[n] >= f for n, f in floors.items())]
    if not feasible:
        return 0.0, table
    best = min(feasible, key=lambda b: (table[b][minimise], b))
    return best, table


def evaluate_refusal(
    model: Any,
    tokenizer: Any,
    prompt_sets: Mapping[str, Any],
    *,
    max_new_tokens: int = MAX_NEW_TOKENS,
    batch_size: int = 64,
    keep_text: bool = False,
    bias: float = 0.0,
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Refusal rate of ``model`` on each prompt set (greedy, the shared phrase judge).

    ``model``: a transformers model with its ``tokenizer``, a :class:`trustlab.lm.LanguageModel`
    or any :class:`trustlab.lm.ChatModel` (``tokenizer=None``). Returns ``({set name: {"k", "n", "rate", "lower", "upper"}}, items)``; ``items`` hold the
    per-prompt verdicts and reply hashes (and replies only with ``keep_text``). ``bias``: the
    refusal operating point (:func:`refusal_bias`; local models only).
    """
    from trustlab.lm import Decoding, LanguageModel, RefusalJudge, evaluate

    if not isinstance(prompt_sets, Mapping) or not prompt_sets:
        raise InputError("evaluate_refusal takes a non-empty dict of prompt sets.")
    lm = _as_lm(model, tokenizer)
    b = _check_bias(bias)
    if b != 0.0 and not isinstance(lm, LanguageModel):
        raise InputError("evaluate_refusal: a refusal bias needs a local model, not a chat API.")
    ctx = refusal_bias(lm, b) if b != 0.0 else contextlib.nullcontext()
    with ctx:
        result = evaluate(
            {"model": lm},
            dict(prompt_sets),
            [RefusalJudge()],
            decoding=Decoding(max_new_tokens=max_new_tokens),
            batch_size=batch_size,
            keep_text=keep_text,
        )
    rates = {
        row["prompts"]: {key: row[key] for key in ("k", "n", "rate", "lower", "upper")}
        for row in result.rates
    }
    return rates, list(result.items)


def public_list_metrics(
    model: Any,
    tokenizer: Any,
    *,
    lists: Sequence[str] = tuple(PUBLIC_LISTS),
    n: int | None = None,
    seed: int = 0,
    max_new_tokens: int = MAX_NEW_TOKENS,
    keep_text: bool = False,
) -> tuple[dict[str, float], dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The public-list refusal rates of a card.

    Returns ``(metrics, rates, items)``: ``metrics`` has ``<list>_refusal`` for every list and
    ``harmbench_refusal`` (val and test pooled) as plain floats (what targets are checked on);
    ``rates`` the counts with Clopper-Pearson intervals per list (and pooled HarmBench);
    ``items`` the per-prompt verdicts and reply hashes. ``n`` subsamples every list (seeded).
    """
    from trustlab.datasets.prompt_sets import behaviour_prompt_set
    from trustlab.lm.judges import binomial_rate

    unknown = [name for name in lists if name not in PUBLIC_LISTS]
    if isinstance(lists, str) or unknown or not lists:
        raise InputError(f"Public lists are {tuple(PUBLIC_LISTS)}. Got {lists!r}.")
    sets = {
        name: behaviour_prompt_set(PUBLIC_LISTS[name][0], n=n, seed=seed, name=name)
        for name in lists
    }
    rates, items = evaluate_refusal(
        model, tokenizer, sets, max_new_tokens=max_new_tokens, keep_text=keep_text
    )
    if "harmbench_val" in rates and "harmbench_test" in rates:
        flags = [bool(row["value"]) for row in items
                 if row["prompts"] in ("harmbench_val", "harmbench_test")
                 and row.get("value") is not None]  # fmt: skip
        pooled = binomial_rate(flags)
        rates["harmbench"] = {
            "k": pooled.k, "n": pooled.n, "rate": pooled.rate, "lower": pooled.lower,
            "upper": pooled.upper,
        }  # fmt: skip
    metrics = {f"{name}_refusal": float(row["rate"]) for name, row in rates.items()}
    return metrics, rates, items


def validation_metrics(
    model: Any,
    tokenizer: Any,
    *,
    n: int | None = None,
    seed: int = 0,
    max_new_tokens: int = MAX_NEW_TOKENS,
) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """Refusal on the alignment validation split (what recipes are chosen on):
    ``val_harmful_refusal``, ``val_unsafe_refusal`` (both should be high) and
    ``val_benign_refusal`` (over-refusal; should be low), and ``val_harmful_context_refusal`` (the
    harmful requests after a passage of text; high). Returns (metrics, rates)."""
    from trustlab.organisms.alignment import validation_prompt_sets

    sets = validation_prompt_sets(n=n, seed=seed)
    rates, _ = evaluate_refusal(model, tokenizer, sets, max_new_tokens=max_new_tokens)
    metrics = {f"val_{name[4:]}_refusal": float(row["rate"]) for name, row in rates.items()}
    return metrics, rates


def _file_sha256(path: Any) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def record_public_lists(
    name: str,
    *,
    home: Any = None,
    lists: Sequence[str] = tuple(PUBLIC_LISTS),
    n: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Measure the public-list refusal rates of the built organism ``name`` (in ``home``, default
    ``$TRUSTLAB_HOME``) and record them in *that build's* card: ``card["public_lists"]`` (per
    list: k, n, rate, Clopper-Pearson 95 % interval; the same shape a build with ``alignment``
    writes), ``card["metrics"]["<list>_refusal"]``, and ``card["public_lists_record"]`` saying
    which build they belong to (the SHA-256 of ``model.safetensors``, the card's
    ``created_utc``), how they were measured (lists, ``n`` per list with its seed, greedy, 48 new
    tokens, the phrase judge) and when, at what CPU cost. Per-item verdicts and reply hashes go to
    the build's ``public_lists.json`` (never prompts or replies). The build is held under its
    build lock while the card is rewritten (atomically). Returns ``card["public_lists_record"]``
    with the rates under ``"rates"``."""
    import time
    from datetime import UTC, datetime

    from trustlab.core.io import write_json_atomic
    from trustlab.core.paths import cache_lock
    from trustlab.core.validation import check_scalar
    from trustlab.organisms.registry import build_lock_file, organism_dir, read_card
    from trustlab.organisms.registry import load as load_organism

    if n is not None:
        n = check_scalar(n, "n", "record_public_lists", kind=int, lo=1)
    seed = check_scalar(seed, "seed", "record_public_lists", kind=int, lo=0)
    unknown = [x for x in lists if x not in PUBLIC_LISTS] if not isinstance(lists, str) else [1]
    if unknown or not lists:
        raise InputError(f"Public lists are {tuple(PUBLIC_LISTS)}. Got {lists!r}.")
    target = organism_dir(name, home)
    card = read_card(name, home)
    if card.get("kind") not in ("pretrained", "grown"):
        raise InputError(
            f"record_public_lists takes a chat organism; {name!r} is {card.get('kind')!r}."
        )
    weights = target / "model.safetensors"
    if not weights.is_file():
        raise InputError(f"record_public_lists: no model.safetensors in {target}.")
    with cache_lock(target, lock=build_lock_file(target)):  # the build's own lock
        card = read_card(name, home)
        sha = _file_sha256(weights)
        cpu0 = time.process_time()
        model, tokenizer = load_organism(name, home=home, build_missing=False)
        metrics, rates, items = public_list_metrics(model, tokenizer, lists=lists, n=n, seed=seed)
        record = {
            "belongs_to": {"model_sha256": sha, "created_utc": card.get("created_utc")},
            "lists": list(lists),
            "n_per_list": n,
            "seed": seed,
            "decoding": f"greedy, {MAX_NEW_TOKENS} new tokens",
            "judge": "refusal (trustlab.lm.REFUSAL_PHRASES)",
            "measured_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "cpu_seconds": time.process_time() - cpu0,
            "how": "recorded after the build (trustlab organisms evaluate-public)",
        }
        keep = ("prompts", "id", "value", "reply_sha256")
        write_json_atomic(
            target / "public_lists.json",
            {"judge": record["judge"], "max_new_tokens": MAX_NEW_TOKENS,
             "belongs_to": record["belongs_to"],
             "items": [{k: row.get(k) for k in keep} for row in items]},
        )  # fmt: skip
        card["public_lists"] = rates
        card.setdefault("metrics", {}).update(metrics)
        card["public_lists_record"] = record
        write_json_atomic(target / "card.json", card)
    return {**record, "rates": rates}
