"""The end-to-end study: every filter on every mix, fine-tuned and measured.

For each data seed, harmful kind (explicit, implicit) and harmful fraction, a mix of ``n``
examples is built (:func:`build_mix`), each filter decides what to remove, and the kept data
are fine-tuned on (:func:`run_cell`). The clean run — the 0 % mix, unfiltered — is the utility
reference of its seed. Filters:

* ``none`` — fine-tune on everything;
* ``gradshield`` — FIHS with the adaptive threshold (settings fixed on the validation split:
  docs/methods/gradshield.md);
* ``gradsafe`` — GradSafe's score with a fixed threshold (the threshold is tuned on a
  validation split with labels, or given): an oracle reference, stronger than GradSafe;
* ``gradsafe_labelfree`` — the same score with a label-free fixed threshold set from the
  reference sets only: the conformal cut at GradShield's ``alpha`` on GradSafe's scores of the
  trusted benign calibration half (GradSafe's paper fixes its cut for its own model's cosine
  scale, which means nothing on another model);
* ``embedding`` — MiniLM nearest-neighbour margin with a fixed threshold tuned the same way;
* ``moderation`` — the base model as a refusal judge of each example's request;
* ``random`` — as many examples as GradShield removed on the same mix, uniformly at random.

``gradsafe`` and ``embedding`` get their thresholds from validation mixes (other data seeds,
same distribution), with the labels — an advantage GradShield's adaptive threshold does not
have.

``StudySettings.finetune_seeds`` (empty: the fine-tuning config's own seed) fine-tunes every
filtered set once per seed; the replicates pooled and paired in the analysis are then the
(data seed, fine-tuning seed) pairs (:func:`replicates`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.errors import InputError
from trustlab.core.units import Sweep, WorkUnit, run_sweep
from trustlab.methods.gradshield.baselines import (
    EmbeddingScorer,
    GradSafeScorer,
    ModerationScorer,
    random_removal,
)
from trustlab.methods.gradshield.fihs import FIHS
from trustlab.methods.gradshield.mixes import build_mix, filter_metrics
from trustlab.methods.gradshield.protocol import EvalSets, run_cell
from trustlab.methods.gradshield.references import ReferenceSets
from trustlab.methods.gradshield.shield import FilterResult, GradShield

__all__ = [
    "FILTERS", "StudyResult", "StudySettings", "replicates", "run_study", "youden_threshold",
]  # fmt: skip

FILTERS = ("none", "gradshield", "gradsafe", "embedding", "moderation", "random",
           "gradsafe_labelfree")  # fmt: skip
SCORED = ("gradshield", "gradsafe", "embedding", "moderation")


def youden_threshold(labels: np.ndarray, scores: np.ndarray) -> float:
    """The cut maximising TPR − FPR on labelled scores (remove ``score > cut``); ties go to
    the lowest cut (more recall). NaN scores are never removed."""
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=np.float64)
    ok = np.isfinite(s)
    y, s = y[ok], s[ok]
    if y.all() or not y.any():
        raise InputError("youden_threshold needs both harmful and benign validation examples.")
    cuts = np.unique(s)
    cuts = np.concatenate([[cuts[0] - 1.0], cuts])
    best, best_j = cuts[0], -np.inf
    for c in cuts:
        j = np.mean(s[y] > c) - np.mean(s[~y] > c)
        if j > best_j + 1e-12:
            best, best_j = c, j
    return float(best)


@dataclass(frozen=True)
class StudySettings:
    """What the study runs (the experiment's config maps onto it)."""

    kinds: tuple[str, ...] = ("explicit", "implicit")
    fractions: tuple[float, ...] = (0.0, 0.01, 0.02, 0.05, 0.10, 0.20)
    seeds: tuple[int, ...] = (0, 1)
    n: int = 1000
    behaviour_seed: int = 0
    filters: tuple[str, ...] = FILTERS
    validation_seeds: tuple[int, ...] = (500,)
    gradsafe_threshold: float | None = None
    cache: bool = True
    source: str = "organism"
    implicit_patterns: tuple[str, ...] = ("dual_use", "shallow_opener")
    howto_share: float = 0.0
    finetune_seeds: tuple[int, ...] = ()


def replicates(settings: StudySettings) -> list[Any]:
    """The units the analysis pools and pairs over: the data seeds, or with
    ``finetune_seeds`` one label ``"data <s>, ft <f>"`` per (data seed, fine-tuning seed)."""
    if not settings.finetune_seeds:
        return list(settings.seeds)
    return [_replicate(s, f) for s in settings.seeds for f in settings.finetune_seeds]


def _replicate(seed: int, finetune_seed: int | None) -> Any:
    return seed if finetune_seed is None else f"data {seed}, ft {finetune_seed}"


@dataclass
class StudyResult:
    """Rows per (seed, kind, fraction, filter), per-item flags, scores and thresholds."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    flags: dict[tuple, dict[str, list[bool]]] = field(default_factory=dict)
    scores: dict[tuple, dict[str, np.ndarray]] = field(default_factory=dict)
    thresholds: dict[str, float] = field(default_factory=dict)
    calibration: np.ndarray | None = None
    timings: dict[str, float] = field(default_factory=dict)
    validation: list[dict[str, Any]] = field(default_factory=list)


class _Scorers:
    """The fitted scorers; each maps a list of examples to scores."""

    def __init__(self, model: Any, refs: ReferenceSets, shield: GradShield,
                 filters: Sequence[str], embedder: Any, threads: int) -> None:  # fmt: skip
        self.model, self.shield = model, shield
        self.fns: dict[str, Callable[[list[Any]], np.ndarray]] = {}
        self.kept: Any = None  # refine > 0: the pool's kept-slice gradients
        if "gradshield" in filters or "random" in filters:
            self.fns["gradshield"] = (
                self._kept_scores if shield.refine_ else lambda data: shield.score(model, data)
            )
        self.gradsafe_calibration: np.ndarray | None = None
        if "gradsafe" in filters or "gradsafe_labelfree" in filters:
            gs = GradSafeScorer(threads=threads).fit(
                model, list(refs.harmful), list(refs.benign_slices)
            )
            self.fns["gradsafe"] = lambda data: gs.score(model, data)
            if "gradsafe_labelfree" in filters:  # the trusted half no scorer was fitted on
                self.gradsafe_calibration = gs.score(model, list(refs.benign_calibration))
        if "embedding" in filters:
            emb = EmbeddingScorer(embedder).fit(list(refs.harmful), list(refs.benign_slices))
            self.fns["embedding"] = emb.score
        if "moderation" in filters:
            mod = ModerationScorer(model)
            self.fns["moderation"] = mod.score

    def _kept_scores(self, data: list[Any]) -> np.ndarray:
        from trustlab.methods.gradshield.fihs import fihs_from_gradients

        self.kept = self.shield.fihs_.kept_gradients(self.model, data)
        return fihs_from_gradients(self.kept, self.shield.fihs_.direction_)

    def score_pool(self, examples: list[Any], timings: dict[str, float]) -> dict[str, np.ndarray]:
        import time

        out = {}
        for name, fn in self.fns.items():
            start = time.perf_counter()
            out[name] = np.asarray(fn(examples), dtype=np.float64)
            timings[f"score_{name}"] = (
                timings.get(f"score_{name}", 0.0) + time.perf_counter() - start
            )
        timings["pool_examples"] = timings.get("pool_examples", 0.0) + len(examples)
        return out


def _mixes(settings: StudySettings, seed: int, fractions: Sequence[float]) -> dict[tuple, Any]:
    out = {}
    for kind in settings.kinds:
        for f in fractions:
            key = ("clean", 0.0) if f == 0.0 else (kind, f)
            if key not in out:
                out[key] = build_mix(
                    kind,
                    f,
                    settings.n,
                    seed=seed,
                    behaviour_seed=settings.behaviour_seed,
                    source=settings.source,  # type: ignore[arg-type]
                    patterns=tuple(settings.implicit_patterns),
                    howto_share=settings.howto_share,
                )
    return out


def _pool(mixes: dict[tuple, Any]) -> tuple[list[Any], dict[Any, int]]:
    index: dict[Any, int] = {}
    for m in mixes.values():
        for e in m.examples:
            index.setdefault(e, len(index))
    return list(index), index


def run_study(
    model: Any,
    refs: ReferenceSets,
    sets: EvalSets,
    finetune_config: Any,
    settings: StudySettings,
    *,
    fihs: FIHS | None = None,
    threshold: str = "conformal",
    threshold_options: dict[str, Any] | None = None,
    depth: int = 0,
    refine: int | None = None,
    refine_mode: str = "union",
    refine_top: float = 0.0,
    refine_sides: str = "upper",
    embedder: Any = None,
    threads: int = 1,
    rng: np.random.Generator | None = None,
    progress: Callable[..., Any] | None = None,
    home: Any = None,
    sweep_runner: Callable[[Sweep], dict[str, Any]] | None = None,
) -> StudyResult:
    """Run every filter on every mix (see the module docstring).

    The fine-tuning cells are work units (``trustlab.core.units``): ``sweep_runner`` runs
    the sweep and returns key -> result in declared order (``RunContext.run_sweep``: the run's
    backend, local or Ray, and its resumable unit store); None runs them here, one by one.
    The model must then be loadable from ``model.spec`` wherever the units run.
    """
    import time

    from trustlab.finetune import weights_sha256

    unknown = [f for f in settings.filters if f not in FILTERS]
    if unknown or not settings.filters:
        raise InputError(f"Filters are {FILTERS}. Got {list(settings.filters)}.")
    if "random" in settings.filters and "gradshield" not in settings.filters:
        raise InputError("The 'random' filter removes as many examples as 'gradshield': run both.")
    rng = rng if rng is not None else np.random.default_rng(0)
    result = StudyResult()
    start = time.perf_counter()
    shield = GradShield(
        fihs, threshold=threshold, threshold_options=threshold_options, depth=depth,
        refine=refine, refine_mode=refine_mode, refine_top=refine_top, refine_sides=refine_sides,
    )  # fmt: skip
    shield.fit(model, refs)
    result.calibration = shield.calibration_scores_
    scorers = _Scorers(model, refs, shield, settings.filters, embedder, threads)
    result.timings["fit"] = time.perf_counter() - start

    # validation: fixed thresholds of the baselines (labels known), other data seeds
    fixed: dict[str, float] = {"moderation": 0.5}
    if scorers.gradsafe_calibration is not None:
        from trustlab.methods.gradshield.thresholds import make_threshold

        alpha = float((threshold_options or {}).get("alpha", 0.01))
        fixed["gradsafe_labelfree"] = float(
            make_threshold("conformal", alpha=alpha)
            .fit(scorers.gradsafe_calibration, scorers.gradsafe_calibration).threshold_
        )  # fmt: skip
    tuned = [f for f in ("gradsafe", "embedding") if f in settings.filters]
    if settings.gradsafe_threshold is not None and "gradsafe" in tuned:
        fixed["gradsafe"] = float(settings.gradsafe_threshold)
        tuned.remove("gradsafe")
    if tuned:
        labels, pooled = [], {name: [] for name in tuned}
        for vseed in settings.validation_seeds:
            vm = _mixes(settings, vseed, [f for f in settings.fractions if f > 0] or [0.05])
            examples, index = _pool(vm)
            harm = np.zeros(len(examples), dtype=bool)
            for m in vm.values():
                for e, h in zip(m.examples, m.harmful, strict=True):
                    harm[index[e]] |= h
            vs = {name: np.asarray(scorers.fns[name](examples), np.float64) for name in tuned}
            labels.append(harm)
            for name in tuned:
                pooled[name].append(vs[name])
        y = np.concatenate(labels)
        for name in tuned:
            fixed[name] = youden_threshold(y, np.concatenate(pooled[name]))
    result.thresholds = dict(fixed)

    base_sha = weights_sha256(model.model)
    fractions = sorted(set(settings.fractions) | {0.0})
    cells: list[tuple[int, tuple, str, np.ndarray, FilterResult, list[Any]]] = []
    for seed in settings.seeds:
        mixes = _mixes(settings, seed, fractions)
        examples, index = _pool(mixes)
        pool_scores = scorers.score_pool(examples, result.timings)
        for key, m in mixes.items():
            data = list(m.examples)
            labels = np.array(m.harmful, dtype=bool)
            idx = [index[e] for e in data]
            decisions: dict[str, FilterResult] = {}
            for name in settings.filters:
                if name == "none":
                    decisions[name] = FilterResult("none", np.full(len(data), np.nan),
                                                   np.zeros(len(data), dtype=bool))  # fmt: skip
                elif name == "gradshield" and shield.refine_:
                    decisions[name] = shield.decide_gradients(scorers.kept[idx])
                elif name == "gradshield":
                    decisions[name] = shield.decide(pool_scores["gradshield"][idx])
                elif name in ("gradsafe", "embedding", "moderation", "gradsafe_labelfree"):
                    s = pool_scores["gradsafe" if name == "gradsafe_labelfree" else name][idx]
                    removed = np.nan_to_num(s, nan=-np.inf) > fixed[name]
                    decisions[name] = FilterResult(name, s, removed, fixed[name])
            if "random" in settings.filters:
                k = decisions["gradshield"].n_removed
                decisions["random"] = FilterResult(
                    "random", np.full(len(data), np.nan), random_removal(len(data), k, rng)
                )
            result.scores[(seed, *key)] = {
                **{n: d.scores for n, d in decisions.items() if n in SCORED},
                "harmful": labels,
            }
            shielded = decisions.get("gradshield")
            if shielded is not None and "calibration_scores" in shielded.info:
                # refine: this set's scores use a direction of its own, so does its calibration
                result.scores[(seed, *key)]["gradshield_calibration"] = (
                    shielded.info["calibration_scores"])  # fmt: skip
            cells += [(seed, key, name, labels, decisions[name], data) for name in settings.filters]
    # One work unit per distinct fine-tuning set (issue 36): filters that keep the same examples
    # of the same mix share one cell. A unit loads the base model from its spec (a Ray worker)
    # or takes the driver's copy (local), fine-tunes and evaluates; results merge in order.
    unit_of: dict[tuple, str] = {}
    payloads: dict[str, Any] = {}
    home_arg = None if home is None else str(home)
    ft_seeds: tuple[int | None, ...] = settings.finetune_seeds or (None,)
    for fseed in ft_seeds:  # the first fine-tuning seed's cells first (a cut run keeps them)
        ft = finetune_config if fseed is None else finetune_config.model_copy(update={"seed": fseed})
        for seed, (kind, fraction), name, _labels, decision, data in cells:
            same = (seed, fseed, decision.removed.tobytes(), kind, fraction)
            if same not in unit_of:
                key = (f"seed {seed} | {kind} {fraction:g} | {name}" if fseed is None
                       else f"seed {seed} ft {fseed} | {kind} {fraction:g} | {name}")  # fmt: skip
                unit_of[same] = key
                payloads[key] = (model.spec, base_sha, tuple(decision.kept(data)), ft,
                                 sets, settings.cache, home_arg, threads)  # fmt: skip
    _BASES.clear()
    _BASES[(model.spec, base_sha)] = model  # the local backend reuses the driver's model
    sweep = Sweep("gradshield-cells", _cell_unit,
                  tuple(WorkUnit(k, p, 0, float(threads)) for k, p in payloads.items()))
    try:
        if sweep_runner is not None:
            done = sweep_runner(sweep)
        else:
            done = run_sweep(sweep, progress=progress).raise_failed().results
    finally:
        _BASES.clear()
    for fseed in ft_seeds:
        for seed, (kind, fraction), name, labels, decision, _data in cells:
            cell = done[unit_of[(seed, fseed, decision.removed.tobytes(), kind, fraction)]]
            _record(result, _replicate(seed, fseed), seed, fseed, kind, fraction, name, labels,
                    decision, cell)  # fmt: skip
    result.timings["total"] = time.perf_counter() - start
    result.timings["cells"] = float(len(done))
    return result


def _record(result: StudyResult, rep: Any, seed: int, fseed: int | None, kind: str,
            fraction: float, name: str, labels: np.ndarray, decision: FilterResult,
            cell: Any) -> None:  # fmt: skip
    metrics = filter_metrics(labels, decision.removed)
    result.flags[(rep, kind, fraction, name)] = cell.flags
    result.rows.append({
        "seed": seed, **({} if fseed is None else {"finetune_seed": fseed, "replicate": rep}),
        "kind": kind, "fraction": fraction, "filter": name,
        "threshold": decision.threshold, **metrics.to_dict(),
        **{m: cell.rate(m) for m in cell.flags}, "n_train": cell.n_train,
        "train_seconds": cell.train_seconds, "eval_seconds": cell.eval_seconds,
        "cached": cell.cached,
    })  # fmt: skip


#: Base models a unit may reuse instead of loading: (spec, weights SHA-256) -> LanguageModel.
#: Filled by :func:`run_study` on the driver for the local backend; a Ray worker loads its own.
_BASES: dict[tuple[str, str], Any] = {}


def _cell_unit(unit: WorkUnit) -> Any:
    """One fine-tuning cell as a work unit (a Ray task or a local call): the base model (from
    its spec on a worker, checked against the driver's weights), fine-tuned on the kept
    examples and evaluated by :func:`run_cell`."""
    from trustlab.core.runtime import torch_runtime

    spec, base_sha, examples, config, sets, cache, home, threads = unit.payload
    with torch_runtime(threads):
        base = _BASES.get((spec, base_sha))
        if base is None:
            import trustlab.lm as lm
            from trustlab.finetune import weights_sha256

            base = lm.load(spec)
            found = weights_sha256(base.model)
            if found != base_sha:
                raise InputError(
                    f"The worker's {spec} has other weights than the driver's (SHA-256 "
                    f"{found[:12]} vs {base_sha[:12]}): build the same organism (or copy the "
                    "same hf: folder) under every worker's TRUSTLAB_HOME."
                )
            _BASES.clear()
            _BASES[(spec, base_sha)] = base  # a worker reuses it for its next cells
        return run_cell(base, list(examples), config, sets, base_sha=base_sha, cache=cache,
                        home=home)
