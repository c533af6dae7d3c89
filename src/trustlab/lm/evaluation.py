"""One evaluation path: models × prompt sets × transforms × interventions → replies → judges →
rates with intervals and paired differences between cells.

    from trustlab import lm
    from trustlab.datasets.prompt_sets import load_prompt_set

    result = lm.evaluate(
        models=["organism:chat-xs", "organism:chat-s"],
        prompt_sets=[load_prompt_set("organism:jailbreak"), load_prompt_set("organism:task")],
        judges=[lm.RefusalJudge(), lm.ExactMatchJudge()],
        transforms={"plain": None, "reversed": lm.Transform("reversed", rev, rev)},
        cache_dir="runs/cache/replies",
    )
    print(result)                    # the rate table and the paired differences
    result.rates, result.differences, result.items   # tidy rows (lists of dicts)

A **cell** is one (model, prompt set, transform, intervention). Each cell's prompts are sent
through the transform's ``encode`` (applied to every user message), generated with the
decoding settings, decoded with the transform's ``decode``, and judged by every judge that
applies to the set (:class:`~trustlab.lm.judges.ExactMatchJudge` only where the set has
reference answers). Per (cell, judge): a :class:`Rate` with its Clopper–Pearson interval over
the items with a verdict, the number of items without one (``n_unparseable``, never scored),
and the mean score with a percentile-bootstrap interval when the judge gives scores. Per pair
of cells that differ in one factor (model, transform or intervention) on the same prompts: the
paired difference with Newcombe's paired interval (:func:`trustlab.stats.paired_difference`),
each level against the factor's first (baseline) level.

Local models (``hf:``, ``organism:`` or a :class:`LanguageModel`) decode through the
KV-cached decoder with **early stopping**: when every judge of a prompt set has a stop rule
(refusal, placeholder compliance and exact match do), a reply stops as soon as its verdicts
can no longer change; replies are then prefixes, judged exactly as the full reply would be.
Pass ``Decoding(stop_early=False)`` for full replies. Under a transform, early stopping is off
unless the transform declares ``prefix_safe`` (decoding a prefix gives a prefix of the
decoded reply).

**Cache**: with ``cache_dir``, replies are stored in one SQLite file keyed by the model's
fingerprint (weights, tokenizer, template, interventions), the conversation as sent, the
decoding settings and the stop rule (:mod:`trustlab.lm.reply_cache`); a second run generates
nothing. Backends without a fingerprint (e.g. :class:`ScriptedChatModel`) are never cached.

**Interventions** (local models only): a name maps to None (no intervention), a global
:class:`~trustlab.lm.interventions.Intervention` (``AddVector``, ``AblateDirection``...), a
:class:`~trustlab.lm.steering.RowSteering` (per-prompt, optionally gated), a list of those
(at most one RowSteering), or a callable ``fn(lm) -> any of those`` for model-specific vectors.

Red-teaming hygiene: ``items`` keep verdicts and a SHA-256 of each reply; raw replies are kept
only with ``keep_text=True`` (they remain in the local reply cache, which is never reported).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.errors import InputError
from trustlab.datasets.prompt_sets import PromptSet, load_prompt_set
from trustlab.lm.chat import ChatModel, HFChatModel, chat_model
from trustlab.lm.content import content_key
from trustlab.lm.formatting import as_conversation
from trustlab.lm.judges import JudgeItem, Rate, Verdict, binomial_rate
from trustlab.lm.model import LanguageModel
from trustlab.lm.reply_cache import ReplyCache, fingerprint_of, model_fingerprint

__all__ = [
    "Decoding",
    "Evaluation",
    "Transform",
    "evaluate",
    "judge_replies",
]

_FACTORS = ("model", "transform", "intervention")


@dataclass(frozen=True)
class Decoding:
    """Decoding settings of one evaluation: greedy when ``temperature == 0``."""

    max_new_tokens: int = 64
    temperature: float = 0.0
    seed: int = 0
    stop_early: bool = True

    def __post_init__(self) -> None:
        m = self.max_new_tokens
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise InputError(f"Decoding.max_new_tokens must be a whole number >= 1. Got {m!r}.")
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0.0 <= t < math.inf:
            raise InputError(f"Decoding.temperature must be a finite number >= 0. Got {t!r}.")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise InputError(f"Decoding.seed must be an integer. Got {self.seed!r}.")

    def record(self) -> dict[str, Any]:
        return {
            "max_new_tokens": self.max_new_tokens,
            "temperature": float(self.temperature),
            "seed": self.seed,
        }


@dataclass(frozen=True)
class Transform:
    """A per-prompt transform: ``encode`` every user message before generation, ``decode`` the
    reply before judging. ``prefix_safe``: decoding a prefix of an encoded reply gives a prefix
    of the decoded reply (then early stopping stays on). A transform may instead define
    ``encode_conversation(messages) -> messages`` (e.g. to add in-context examples)."""

    name: str
    encode: Callable[[str], str]
    decode: Callable[[str], str]
    prefix_safe: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InputError("A Transform needs a non-empty name.")
        if not callable(self.encode) or not callable(self.decode):
            raise InputError(f"Transform {self.name!r} needs callable encode and decode.")

    def fingerprint(self) -> str:
        return fingerprint_of([self.name, self.encode, self.decode, self.prefix_safe])


def _encode_content(transform: Any, content: Any) -> Any:
    """A transform encodes a user message's text; image parts pass unchanged."""
    if isinstance(content, str):
        return transform.encode(content)
    return [{"type": "text", "text": transform.encode(p["text"])} if p["type"] == "text" else p
            for p in content]  # fmt: skip


def _encode_conversation(transform: Any, conv: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if transform is None:
        return conv
    if hasattr(transform, "encode_conversation"):
        return as_conversation(transform.encode_conversation([dict(m) for m in conv]))
    return [
        {"role": m["role"], "content": _encode_content(transform, m["content"])
         if m["role"] == "user" else m["content"]}
        for m in conv
    ]  # fmt: skip


def _as_conv(prompt: Any) -> list[dict[str, Any]]:
    """A prompt as a conversation; image parts kept (as RGB PIL images)."""
    return as_conversation(prompt)


def _conversation_key(conv: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A conversation for a cache key: images by their pixel hash."""
    return [{"role": m["role"], "content": content_key(m["content"])} for m in conv]


# ---------------------------------------------------------------------------------------------
# results


@dataclass
class Evaluation:
    """The tidy result of :func:`evaluate` (lists of dicts; ``to_frames()`` for pandas)."""

    rates: list[dict[str, Any]]
    differences: list[dict[str, Any]]
    items: list[dict[str, Any]]
    alpha: float
    decoding: Decoding
    stats: dict[str, Any] = field(default_factory=dict)

    def rate(self, **where: Any) -> Rate:
        """The :class:`Rate` of the one rate row matching ``where`` (e.g. model=..., judge=...)."""
        rows = [r for r in self.rates if all(r.get(k) == v for k, v in where.items())]
        if len(rows) != 1:
            raise InputError(f"{len(rows)} rate rows match {where}; name the cell fully.")
        r = rows[0]
        return Rate(r["k"], r["n"], r["rate"], r["lower"], r["upper"], self.alpha)

    def difference(self, **where: Any) -> dict[str, Any]:
        rows = [r for r in self.differences if all(r.get(k) == v for k, v in where.items())]
        if len(rows) != 1:
            raise InputError(f"{len(rows)} difference rows match {where}; name the cell fully.")
        return rows[0]

    def compare(self, a: Mapping[str, Any], b: Mapping[str, Any], *, judge: str) -> dict[str, Any]:
        """Paired difference ``rate(b) - rate(a)`` between two cells on the same prompts."""
        return _paired(self.items, dict(a), dict(b), judge, self.alpha)

    def to_frames(self) -> dict[str, Any]:
        import pandas as pd

        return {
            "rates": pd.DataFrame(self.rates),
            "differences": pd.DataFrame(self.differences),
            "items": pd.DataFrame(self.items),
        }

    def write(self, folder: str | Path) -> dict[str, Path]:
        """``rates.csv``, ``differences.csv`` and ``items.csv`` (atomically) under ``folder``."""
        import csv
        import io

        from trustlab.core.io import write_text_atomic

        out = {}
        folder = Path(folder)
        for name, rows in (("rates", self.rates), ("differences", self.differences),
                           ("items", self.items)):  # fmt: skip
            buf = io.StringIO()
            cols = list(dict.fromkeys(k for r in rows for k in r))
            writer = csv.DictWriter(buf, fieldnames=cols)
            writer.writeheader()
            writer.writerows(rows)
            path = folder / f"{name}.csv"
            write_text_atomic(path, buf.getvalue())
            out[name] = path
        return out

    def format(self) -> str:
        """The rate table and the difference table as fixed-width text."""
        a = 100 * (1 - self.alpha)
        rate_rows = [
            [r["model"], r["prompts"], r["transform"], r["intervention"], r["judge"],
             f"{r['k']}/{r['n']}", _pct(r["rate"]), f"[{_pct(r['lower'])}, {_pct(r['upper'])}]",
             str(r["n_unparseable"])]
            for r in self.rates
        ]  # fmt: skip
        text = _table(
            ["model", "prompts", "transform", "intervention", "judge", "k/n", "rate",
             f"{a:.0f}% CI (Clopper-Pearson)", "unparseable"],
            rate_rows,
        )  # fmt: skip
        if self.differences:
            diff_rows = [
                [d["factor"], f"{d['level']} - {d['baseline']}", d["model"], d["prompts"],
                 d["transform"], d["intervention"], d["judge"], str(d["n_pairs"]),
                 _pts(d["estimate"]), f"[{_pts(d['lower'])}, {_pts(d['upper'])}]"]
                for d in self.differences
            ]  # fmt: skip
            text += "\n\n" + _table(
                ["factor", "difference", "model", "prompts", "transform", "intervention",
                 "judge", "pairs", "diff (pts)", f"{a:.0f}% CI (Newcombe paired)"],
                diff_rows,
            )  # fmt: skip
        return text

    def __str__(self) -> str:
        return self.format()


def _pct(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def _pts(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:+.1f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    cols = [header, *rows]
    widths = [max(len(str(r[i])) for r in cols) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)]).rstrip()


# ---------------------------------------------------------------------------------------------
# inputs


def _name_models(models: Any) -> list[tuple[str, Any]]:
    if isinstance(models, str | ChatModel | LanguageModel) or not isinstance(
        models, Mapping | Sequence
    ):
        models = [models]
    items = list(models.items()) if isinstance(models, Mapping) else [(None, m) for m in models]
    pairs = []
    for key, m in items:
        if key is not None:
            if not (isinstance(m, str | LanguageModel) or hasattr(m, "generate")):
                raise InputError(
                    f"models[{key!r}] must be a spec string, a LanguageModel or a ChatModel. Got "
                    f"{type(m).__name__}."
                )
            pairs.append((str(key), m))
        else:
            if isinstance(m, str):
                pairs.append((m, m))
            elif isinstance(m, LanguageModel):
                pairs.append((m.spec or m.adapter.model_type, m))
            elif hasattr(m, "generate"):
                pairs.append((str(getattr(m, "name", type(m).__name__)), m))
            else:
                raise InputError(
                    "models holds a spec string, a LanguageModel or a ChatModel per entry. Got "
                    f"{type(m).__name__}."
                )
    if not pairs:
        raise InputError("evaluate needs at least one model. Got none.")
    names = [n for n, _ in pairs]
    if len(set(names)) != len(names):
        raise InputError(f"Model names must be distinct (pass a dict to name them). Got {names}.")
    return pairs


def _prompt_sets(sets: Any) -> list[PromptSet]:
    if isinstance(sets, PromptSet | str | Path):
        sets = [sets]
    if not isinstance(sets, Mapping | Sequence):
        raise InputError(
            "prompt_sets must be a PromptSet, a spec, or a list/dict of them. Got "
            f"{type(sets).__name__}."
        )
    if isinstance(sets, Mapping):
        out = [load_prompt_set(v).renamed(str(k)) for k, v in sets.items()]
    else:
        out = [load_prompt_set(s) for s in sets]
    if not out:
        raise InputError("evaluate needs at least one prompt set. Got none.")
    names = [p.name for p in out]
    if len(set(names)) != len(names):
        raise InputError(f"Prompt-set names must be distinct. Got {names}.")
    return out


def _judges(judges: Any) -> list[Any]:
    if judges is None or (not isinstance(judges, Sequence) and hasattr(judges, "verdicts")):
        judges = [judges] if judges is not None else []
    if isinstance(judges, str) or not isinstance(judges, Sequence):
        raise InputError(
            f"judges must be a list of judges (or a dict set name -> list). Got "
            f"{type(judges).__name__}."
        )
    out = list(judges)
    if not out:
        raise InputError("evaluate needs at least one judge. Got none.")
    for j in out:
        if not hasattr(j, "verdicts") or not isinstance(getattr(j, "name", None), str):
            raise InputError(
                f"A judge needs a 'name' and a verdicts(items) method. Got {type(j).__name__} "
                "(wrap a function in lm.CallableJudge)."
            )
    names = [j.name for j in out]
    if len(set(names)) != len(names):
        raise InputError(f"Judge names must be distinct. Got {names}.")
    return out


def _judges_per_set(judges: Any, sets: list[PromptSet]) -> dict[str, list[Any]]:
    """Judges for each prompt set: one list for all, or a dict set name -> list."""
    if isinstance(judges, Mapping):
        names = [ps.name for ps in sets]
        unknown = sorted(set(map(str, judges)) - set(names))
        missing = [n for n in names if n not in judges]
        if unknown or missing:
            raise InputError(
                f"judges given per prompt set must name every set exactly: unknown "
                f"{unknown or 'none'}, missing {missing or 'none'} (sets: {names})."
            )
        out = {str(k): _judges(v) for k, v in judges.items()}
        by_name: dict[str, Any] = {}
        for js in out.values():
            for j in js:
                if by_name.setdefault(j.name, j) is not j:
                    raise InputError(f"Two different judges are both named {j.name!r}.")
        return out
    common = _judges(judges)
    return {ps.name: common for ps in sets}


def _levels(levels: Any, what: str) -> list[tuple[str, Any]]:
    if levels is None:
        return [("none", None)]
    if isinstance(levels, Mapping):
        out = [(str(k), v) for k, v in levels.items()]
    elif isinstance(levels, Sequence) and not isinstance(levels, str):
        out = []
        for v in levels:
            if v is None:
                out.append(("none", None))
            elif isinstance(getattr(v, "name", None), str):
                out.append((v.name, v))
            else:
                raise InputError(f"Give {what} as a dict name -> {what[:-1]} (or None).")
    else:
        raise InputError(f"Give {what} as a dict name -> {what[:-1]} (or None).")
    if not out:
        raise InputError(f"{what} must not be empty (use None for 'none').")
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise InputError(f"{what} names must be distinct. Got {names}.")
    for n, v in out:
        if (
            what == "transforms"
            and v is not None
            and not (
                hasattr(v, "encode_conversation") or (hasattr(v, "encode") and hasattr(v, "decode"))
            )
        ):
            raise InputError(f"Transform {n!r} needs encode and decode callables.")
    return out


def _applies(judge: Any, ps: PromptSet) -> bool:
    return not getattr(judge, "needs_reference", False) or ps.has_references


# ---------------------------------------------------------------------------------------------
# interventions


def _resolve_intervention(spec: Any, lm: LanguageModel, name: str) -> tuple[list[Any], Any]:
    """(global interventions, row steering or None) of one level for one model."""
    from trustlab.lm.steering import RowSteering

    if callable(spec) and not hasattr(spec, "apply") and not isinstance(spec, RowSteering):
        spec = spec(lm)
    if spec is None:
        return [], None
    items = list(spec) if isinstance(spec, list | tuple) else [spec]
    glob, rows = [], []
    for it in items:
        if isinstance(it, RowSteering):
            rows.append(it)
        elif hasattr(it, "apply"):
            glob.append(it)
        else:
            raise InputError(
                f"Intervention {name!r} holds a {type(it).__name__}; use lm.AddVector, "
                "lm.AblateDirection, ... or lm.RowSteering."
            )
    if len(rows) > 1:
        raise InputError(f"Intervention {name!r} holds {len(rows)} RowSteerings; at most one.")
    return glob, rows[0] if rows else None


# ---------------------------------------------------------------------------------------------
# the loop


def _reply_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _stop_rule(
    judges: list[Any], items: list[JudgeItem]
) -> tuple[Callable[[int, str], bool] | None, str]:
    rules = []
    for j in judges:
        fn = getattr(j, "settled", None)
        if fn is None:
            return None, "none"
        rules.append(fn(items))
    if not rules:
        return None, "none"
    fps = [getattr(j, "fingerprint", lambda j=j: j.name)() for j in judges]
    return (lambda i, text: all(r(i, text) for r in rules)), "|".join(fps)


def judge_replies(judges: Sequence[Any], items: Sequence[JudgeItem]) -> dict[str, list[Verdict]]:
    """Run every judge over the same items; a judge must return one Verdict per item."""
    out = {}
    for j in _judges(list(judges)):
        vs = list(j.verdicts(list(items)))
        if len(vs) != len(items):
            raise InputError(
                f"Judge {j.name!r} returned {len(vs)} verdicts for {len(items)} items."
            )
        out[j.name] = [v if isinstance(v, Verdict) else Verdict(None, detail="not a Verdict")
                       for v in vs]  # fmt: skip
    return out


def _summarise(verdicts: list[Verdict], alpha: float, rng: np.random.Generator) -> dict[str, Any]:
    flags = [bool(v.value) for v in verdicts if v.value is not None]
    row: dict[str, Any] = {"n_unparseable": sum(1 for v in verdicts if v.value is None)}
    if flags:
        r = binomial_rate(flags, alpha)
        row.update(k=r.k, n=r.n, rate=r.rate, lower=r.lower, upper=r.upper)
    else:
        row.update(k=0, n=0, rate=float("nan"), lower=float("nan"), upper=float("nan"))
    scores = np.asarray([v.score for v in verdicts if v.score is not None], dtype=float)
    if scores.size:
        row["mean_score"] = float(scores.mean())
        if scores.size > 1 and np.ptp(scores) > 0:
            boots = rng.choice(scores, (2000, scores.size)).mean(1)
            lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
            row["score_lower"], row["score_upper"] = float(lo), float(hi)
        else:
            row["score_lower"] = row["score_upper"] = float(scores.mean())
    return row


def _paired(
    items: list[dict[str, Any]], a: dict[str, Any], b: dict[str, Any], judge: str, alpha: float
) -> dict[str, Any]:
    from trustlab.stats.proportions import paired_difference

    def pick(cell: dict[str, Any]) -> dict[int, bool | None]:
        rows = [r for r in items if r["judge"] == judge and all(r[k] == v for k, v in cell.items())]
        if not rows:
            raise InputError(f"No judged items match {cell} for judge {judge!r}.")
        if len({r["prompts"] for r in rows}) != 1 or len({tuple((k, r[k]) for k in _FACTORS)
                                                          for r in rows}) != 1:  # fmt: skip
            raise InputError(f"{cell} names several cells; give model, prompts, transform and "
                             "intervention.")  # fmt: skip
        return {r["index"]: r["value"] for r in rows}

    va, vb = pick(a), pick(b)
    common = sorted(i for i in va if i in vb and va[i] is not None and vb[i] is not None)
    if not common:
        raise InputError(f"The cells {a} and {b} share no item judged in both.")
    d = paired_difference([vb[i] for i in common], [va[i] for i in common], alpha)
    return {
        "judge": judge,
        "n_pairs": len(common),
        "estimate": d.estimate,
        "lower": d.lower,
        "upper": d.upper,
        "n_only_level": d.n10,
        "n_only_baseline": d.n01,
    }


def evaluate(
    models: Any,
    prompt_sets: Any,
    judges: Any,
    *,
    transforms: Mapping[str, Any] | Sequence[Any] | None = None,
    interventions: Mapping[str, Any] | None = None,
    decoding: Decoding | None = None,
    cache_dir: str | Path | None = None,
    alpha: float = 0.05,
    keep_text: bool = False,
    batch_size: int = 128,
    progress: Callable[..., Any] | None = None,
    seed: int = 0,
    load_options: Mapping[str, Any] | None = None,
    backend: Any = None,
    store: Any = None,
) -> Evaluation:
    """Run the evaluation loop (see the module docstring) and return an :class:`Evaluation`.

    ``models``: spec strings (``hf:``, ``organism:``, ``openai:``), :class:`LanguageModel` s or
    :class:`ChatModel` s (a list, or a dict name -> model). ``prompt_sets``: :class:`PromptSet`
    s or specs (:func:`~trustlab.datasets.prompt_sets.load_prompt_set`; a dict names them).
    ``judges``: objects with ``name`` and ``verdicts(items)``, one list for every set or a dict
    set name -> list. ``transforms``/``interventions``: dicts name ->
    level (None = the untouched level). ``progress``: e.g. ``RunContext.progress``. ``seed``
    seeds the score bootstrap. ``load_options``: ``dtype``/``device`` for spec strings.
    ``batch_size``: rows per decoding batch for local models (capped so one batch's KV cache
    stays near 2^28 floats).

    Periodic evaluation during training: pass the model being trained as a
    :class:`LanguageModel` (or ``{"step 100": lm}``) without ``cache_dir`` (its weights change
    between calls). Generation runs in eval mode under ``torch.no_grad``; the torch module's
    training flag is restored when ``evaluate`` returns (also on error).

    Scale-out (docs/scale.md): with ``backend`` (``trustlab.core.units.make_backend``: 'local'
    or 'ray') or ``store`` (a ``UnitStore`` or folder), each model's row of cells -- one model
    under one transform and one intervention, all prompt sets, generated as one batch as without
    a backend -- is a work unit: a Ray task that loads the model on its worker, recorded in the
    store as it finishes (a re-run skips it). Models must then be spec strings or picklable
    chat models, judges picklable; rates and differences are computed here from the units'
    verdicts in the declared order, so the result equals the one without a backend.
    """
    from trustlab.core.validation import check_open_unit

    alpha = check_open_unit(alpha, "alpha", "evaluate")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a whole number >= 1. Got {batch_size!r}.")
    decoding = decoding or Decoding()
    if not isinstance(decoding, Decoding):
        raise InputError(f"decoding must be an lm.Decoding. Got {type(decoding).__name__}.")
    model_list = _name_models(models)
    sets = _prompt_sets(prompt_sets)
    per_set = _judges_per_set(judges, sets)
    t_levels = _levels(transforms, "transforms")
    i_levels = _levels(interventions, "interventions")
    for ps in sets:
        if not any(_applies(j, ps) for j in per_set[ps.name]):
            raise InputError(
                f"No judge applies to prompt set {ps.name!r} (it has no reference answers)."
            )
    if backend is not None or store is not None:
        return _evaluate_units(model_list, sets, per_set, t_levels, i_levels, decoding,
                               cache_dir, np.random.default_rng(seed), alpha, keep_text,
                               batch_size, progress, load_options, backend, store)
    cache = ReplyCache(cache_dir) if cache_dir is not None else None
    rng = np.random.default_rng(seed)
    training = [(m.model, bool(m.model.training)) for _, m in model_list
                if isinstance(m, LanguageModel)]  # fmt: skip
    for module, _ in training:
        module.eval()
    try:
        return _evaluate(model_list, sets, per_set, t_levels, i_levels, decoding, cache, rng,
                         alpha, keep_text, batch_size, progress, load_options)  # fmt: skip
    finally:
        for module, flag in training:
            module.train(flag)


def _evaluate(model_list, sets, per_set, t_levels, i_levels, decoding, cache, rng, alpha,
              keep_text, batch_size, progress, load_options) -> Evaluation:  # fmt: skip
    judge_list = list({j.name: j for js in per_set.values() for j in js}.values())
    items: list[dict[str, Any]] = []
    stats = {"generated": 0, "cached": 0, "uncached_backends": []}
    groups = [(m, t, i) for m in model_list for t in t_levels for i in i_levels]
    iterator = progress(groups, description="evaluate") if progress is not None else groups
    loaded: dict[str, Any] = {}
    for (mname, mspec), (tname, transform), (iname, ispec) in iterator:
        backend = loaded.get(mname)
        if backend is None:
            loaded.clear()  # one model in memory at a time
            backend = _backend(mspec, batch_size, load_options or {})
            loaded[mname] = backend
            fingerprint = model_fingerprint(backend) if cache is not None else None
            loaded["__fp__"] = fingerprint
            if cache is not None and fingerprint is None:
                stats["uncached_backends"].append(mname)
        fingerprint = loaded.get("__fp__")
        items += _group_items(backend, fingerprint, mname, sets, per_set, tname, transform,
                              iname, ispec, decoding, cache, stats, keep_text)
    loaded.clear()
    rates = _rates(items, model_list, sets, judge_list, t_levels, i_levels, alpha, rng)
    differences = _differences(items, model_list, sets, judge_list, t_levels, i_levels, alpha)
    if cache is not None:
        stats["cache_hits"], stats["cache_misses"] = cache.hits, cache.misses
    return Evaluation(rates, differences, items, alpha, decoding, stats)


def _group_items(backend, fingerprint, mname, sets, per_set, tname, transform, iname, ispec,
                 decoding, cache, stats, keep_text) -> list[dict[str, Any]]:  # fmt: skip
    """Replies and verdict rows of one model under one (transform, intervention), all sets."""
    items: list[dict[str, Any]] = []
    replies = _generate_group(
        backend, fingerprint, sets, per_set, transform, iname, ispec, decoding, cache,
        stats,
    )  # fmt: skip
    for ps, texts in zip(sets, replies, strict=True):
        decoded = [transform.decode(t) if transform is not None else t for t in texts]
        jitems = [
            JudgeItem(ps.instruction(i), decoded[i], ps.reference(i), ps.item_meta(i))
            for i in range(len(ps))
        ]
        applicable = [j for j in per_set[ps.name] if _applies(j, ps)]
        verdicts = judge_replies(applicable, jitems)
        ids = ps.ids()
        for j in applicable:
            for i, v in enumerate(verdicts[j.name]):
                row = {
                    "model": mname,
                    "prompts": ps.name,
                    "transform": tname,
                    "intervention": iname,
                    "judge": j.name,
                    "index": i,
                    "id": ids[i],
                    "value": v.value,
                    "score": v.score,
                    "detail": v.detail,
                    "reply_sha256": _reply_sha(decoded[i]),
                }
                if keep_text:
                    row["reply"] = decoded[i]
                    row["raw_reply"] = texts[i]
                items.append(row)
    return items


def _unit_rows(unit: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One work unit of :func:`evaluate`: load the model, generate, judge (a Ray task or a
    local call). Returns the verdict rows and the generation counts."""
    (mname, mspec, sets, per_set, tname, transform, iname, ispec, decoding, cache_dir,
     batch_size, load_options, keep_text) = unit.payload
    stats: dict[str, Any] = {"generated": 0, "cached": 0, "uncached_backends": []}
    cache = ReplyCache(cache_dir) if cache_dir is not None else None
    backend = _backend(mspec, batch_size, load_options or {})
    fingerprint = model_fingerprint(backend) if cache is not None else None
    if cache is not None and fingerprint is None:
        stats["uncached_backends"].append(mname)
    rows = _group_items(backend, fingerprint, mname, sets, per_set, tname, transform, iname,
                        ispec, decoding, cache, stats, keep_text)
    if cache is not None:
        stats["cache_hits"], stats["cache_misses"] = cache.hits, cache.misses
    return rows, stats


def _evaluate_units(model_list, sets, per_set, t_levels, i_levels, decoding, cache_dir, rng,
                    alpha, keep_text, batch_size, progress, load_options, backend,
                    store) -> Evaluation:  # fmt: skip
    from trustlab.core.units import LocalBackend, RayBackend, Sweep, WorkUnit, run_sweep

    if not isinstance(backend, LocalBackend | RayBackend | None):
        raise InputError("backend must be a backend from trustlab.core.units.make_backend or "
                         f"None. Got {type(backend).__name__}.")
    for mname, mspec in model_list:
        if isinstance(mspec, LanguageModel):
            raise InputError(f"evaluate with a backend loads each model on its worker: give "
                             f"model {mname!r} as a spec string (hf:, organism:, openai:), not "
                             "a LanguageModel.")
    units = []
    for (mname, mspec), (tname, transform), (iname, ispec) in (
            (m, t, i) for m in model_list for t in t_levels for i in i_levels):
        units.append(WorkUnit(f"{mname} | {tname} | {iname}", (
            mname, mspec, sets, per_set, tname, transform, iname, ispec, decoding,
            None if cache_dir is None else str(cache_dir), batch_size, dict(load_options or {}),
            keep_text)))
    result = run_sweep(Sweep("evaluate", _unit_rows, tuple(units)), backend=backend,
                       store=store, progress=progress).raise_failed()
    items: list[dict[str, Any]] = []
    stats: dict[str, Any] = {"generated": 0, "cached": 0, "uncached_backends": []}
    for rows, unit_stats in result.results.values():  # declared order: as without a backend
        items += rows
        for key in ("generated", "cached", "cache_hits", "cache_misses"):
            if key in unit_stats:
                stats[key] = stats.get(key, 0) + unit_stats[key]
        stats["uncached_backends"] += [m for m in unit_stats["uncached_backends"]
                                       if m not in stats["uncached_backends"]]
    judge_list = list({j.name: j for js in per_set.values() for j in js}.values())
    rates = _rates(items, model_list, sets, judge_list, t_levels, i_levels, alpha, rng)
    differences = _differences(items, model_list, sets, judge_list, t_levels, i_levels, alpha)
    stats["units_resumed"] = len(result.resumed)
    return Evaluation(rates, differences, items, alpha, decoding, stats)


def _backend(spec: Any, batch_size: int, options: Mapping[str, Any]) -> Any:
    if isinstance(spec, LanguageModel):
        return HFChatModel(spec, batch_size=batch_size)
    if isinstance(spec, str):
        if spec.startswith("openai:"):
            return chat_model(spec, **{k: v for k, v in options.items()
                                       if k not in ("dtype", "device")})  # fmt: skip
        return chat_model(spec, batch_size=batch_size, **options)
    return spec


def _generate_group(
    backend: Any,
    fingerprint: str | None,
    sets: list[PromptSet],
    judges: dict[str, list[Any]],
    transform: Any,
    iname: str,
    ispec: Any,
    decoding: Decoding,
    cache: ReplyCache | None,
    stats: dict[str, Any],
) -> list[list[str]]:
    """Replies for every prompt set under one (model, transform, intervention)."""
    local = isinstance(backend, HFChatModel)
    glob: list[Any] = []
    row_steer = None
    if ispec is not None:
        if not local:
            raise InputError(
                f"Intervention {iname!r} needs a local model (hf:, organism:); "
                f"{getattr(backend, 'name', type(backend).__name__)} is a remote or scripted "
                "backend."
            )
        glob, row_steer = _resolve_intervention(ispec, backend.lm, iname)
    convs, owners, stop_fns, stop_keys = [], [], [], []
    early = (
        decoding.stop_early
        and local
        and (transform is None or bool(getattr(transform, "prefix_safe", False)))
    )
    for s_idx, ps in enumerate(sets):
        applicable = [j for j in judges[ps.name] if _applies(j, ps)]
        jitems = [JudgeItem(ps.instruction(i), "", ps.reference(i), ps.item_meta(i))
                  for i in range(len(ps))]  # fmt: skip
        rule, rule_key = _stop_rule(applicable, jitems) if early else (None, "none")
        if rule is not None and transform is not None:
            # the judges see decoded replies, so the stop rule must too (a raw encoded prefix
            # such as ROT13's "Fher" is never a prefix of the reference "Sure: ...")
            rule = (lambda r, dec: lambda i, text: r(i, dec(text)))(rule, transform.decode)
            rule_key = f"{rule_key}|decoded"
        for i in range(len(ps)):
            convs.append(_encode_conversation(transform, _as_conv(ps.prompts[i])))
            owners.append((s_idx, i))
            stop_fns.append(None if rule is None else (rule, i))
            ref = ps.reference(i) if rule is not None else None
            stop_keys.append(rule_key if ref is None else f"{rule_key}|ref={ref}")
    int_fp = None
    if ispec is not None:
        int_fp = fingerprint_of([glob, row_steer])
    keys: list[str | None] = [None] * len(convs)
    found: dict[str, str] = {}
    if cache is not None and fingerprint is not None:
        keys = [
            ReplyCache.key({
                "model": fingerprint,
                "conversation": _conversation_key(c),
                "decoding": decoding.record(),
                "interventions": int_fp,
                "stop": sk,
            })
            for c, sk in zip(convs, stop_keys, strict=True)
        ]  # fmt: skip
        found = cache.get_many([k for k in keys if k is not None])
    todo = [n for n, k in enumerate(keys) if k is None or k not in found]
    replies: list[str] = [found.get(k, "") if k is not None else "" for k in keys]
    if todo:
        new = _run_backend(backend, [convs[n] for n in todo], [stop_fns[n] for n in todo],
                           glob, row_steer, decoding)  # fmt: skip
        for n, text in zip(todo, new, strict=True):
            replies[n] = text
        if cache is not None and fingerprint is not None:
            cache.put_many((keys[n], replies[n]) for n in todo if keys[n] is not None)
    stats["generated"] += len(todo)
    stats["cached"] += len(convs) - len(todo)
    out: list[list[str]] = [[""] * len(ps) for ps in sets]
    for (s_idx, i), text in zip(owners, replies, strict=True):
        out[s_idx][i] = text
    return out


def _run_backend(
    backend: Any,
    convs: list[list[dict[str, str]]],
    stops: list[Any],
    glob: list[Any],
    row_steer: Any,
    decoding: Decoding,
) -> list[str]:
    if isinstance(backend, HFChatModel):
        from trustlab.lm.decoding import Steering

        model = backend.with_interventions(*glob) if glob else backend
        settled = None
        if any(s is not None for s in stops):

            def settled(n: int, text: str) -> bool:
                s = stops[n]
                return s is not None and s[0](s[1], text)

        steering = None
        if row_steer is not None:
            deltas = row_steer.deltas(backend.lm, convs)
            steering = Steering(row_steer.site, deltas, row_steer.positions)
        return model.generate(
            convs,
            max_new_tokens=decoding.max_new_tokens,
            temperature=decoding.temperature,
            seed=decoding.seed,
            settled=settled,
            steering=steering,
        )
    replies = backend.generate(
        convs,
        max_new_tokens=decoding.max_new_tokens,
        temperature=decoding.temperature,
        seed=decoding.seed,
    )
    if not isinstance(replies, list) or len(replies) != len(convs):
        raise InputError(
            f"{getattr(backend, 'name', type(backend).__name__)} returned "
            f"{len(replies) if isinstance(replies, list) else type(replies).__name__} replies for "
            f"{len(convs)} prompts."
        )
    return [str(r) for r in replies]


def _rates(items, models, sets, judges, t_levels, i_levels, alpha, rng) -> list[dict[str, Any]]:
    by_cell: dict[tuple, list[Verdict]] = {}
    for r in items:
        key = (r["model"], r["prompts"], r["transform"], r["intervention"], r["judge"])
        by_cell.setdefault(key, []).append(Verdict(r["value"], r["score"]))
    rows = []
    for m, _ in models:
        for ps in sets:
            for t, _ in t_levels:
                for i, _ in i_levels:
                    for j in judges:
                        key = (m, ps.name, t, i, j.name)
                        if key not in by_cell:
                            continue
                        rows.append({
                            "model": m, "prompts": ps.name, "transform": t, "intervention": i,
                            "judge": j.name, **_summarise(by_cell[key], alpha, rng),
                        })  # fmt: skip
    return rows


def _differences(items, models, sets, judges, t_levels, i_levels, alpha) -> list[dict[str, Any]]:
    levels = {
        "model": [m for m, _ in models],
        "transform": [t for t, _ in t_levels],
        "intervention": [i for i, _ in i_levels],
    }
    present = {(r["model"], r["prompts"], r["transform"], r["intervention"], r["judge"])
               for r in items}  # fmt: skip
    rows = []
    for factor in _FACTORS:
        names = levels[factor]
        if len(names) < 2:
            continue
        base = names[0]
        others = [f for f in _FACTORS if f != factor]
        combos = [
            dict(zip(others, vals, strict=True)) for vals in _product([levels[f] for f in others])
        ]
        for ps in sets:
            for j in judges:
                for combo in combos:
                    for level in names[1:]:
                        a = {**combo, factor: base, "prompts": ps.name}
                        b = {**combo, factor: level, "prompts": ps.name}
                        ka = (a["model"], ps.name, a["transform"], a["intervention"], j.name)
                        kb = (b["model"], ps.name, b["transform"], b["intervention"], j.name)
                        if ka not in present or kb not in present:
                            continue
                        try:
                            d = _paired(items, a, b, j.name, alpha)
                        except InputError:
                            continue  # no item judged in both cells
                        rows.append({"factor": factor, "baseline": base, "level": level,
                                     "model": b["model"], "prompts": ps.name,
                                     "transform": b["transform"],
                                     "intervention": b["intervention"], **d})  # fmt: skip
    return rows


def _product(lists: list[list[str]]) -> list[tuple[str, ...]]:
    import itertools

    return list(itertools.product(*lists))
