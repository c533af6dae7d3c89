"""Repair: retrain a detector on its training texts plus rewrites, four ways at one budget.

Every repair adds the same number ``n_aug`` of rewrites (each passing the claim check) to the
same training texts and refits a fresh copy of the detector (``detector.clone()``):

* ``none`` — no augmentation (the detector refit on its training texts);
* ``random`` — rewrites of random training texts (both classes, labels kept) with random
  strategies (random augmentation);
* ``adversarial`` — generic adversarial training: the ``n_aug`` lowest-scoring accepted
  rewrites an attack found on the *training* positives (labelled positive), whatever their axes;
* ``adversarial-balanced`` — generic adversarial training with the class mix of the
  label-preserving repairs: half the rewrites are the hardest accepted rewrites of training
  positives (as ``adversarial``), half random-strategy rewrites of training negatives (labels
  kept), so it is not taught that rhetoric means harmful -- the strongest generic baseline the
  axis repair must beat;
* ``axis`` — axis-targeted repair (ARAO): rewrites of random training texts, both classes,
  labels kept, with strategies drawn only from the failing (axis, direction) pairs found by
  attribution (on the development split). Rewriting negatives too teaches the detector that the
  style is not the signal.

With ``rounds`` > 1 (:func:`evaluate_repairs`) the detector-dependent repairs iterate at the
same total budget: each round adds its share of the rewrites and refits; before every round
after the first, ``axis`` re-runs attribution against the *current* repaired detector (the
failing directions the repair has not closed yet, added to the earlier ones) and the
adversarial repairs re-attack the training positives against it. ``random`` does not depend on
the detector, so its rounds are one draw.

Axis-repair variants (:data:`AXIS_VARIANTS`, opt-in: not in the default :data:`REPAIRS`), all at
the same budget ``n_aug``, all on the failing directions of the *first* attribution (never
re-attributed -- the drift diagnosis: re-attribution against the repaired detector widened the
failing set to 7-8 of 20 directions and turned the axis repair into random augmentation):

* ``axis-fixed`` — ``axis`` without re-attribution (one draw of ``n_aug`` rewrites);
* ``axis-balanced`` — the class mix of ``adversarial-balanced`` with the attribution in place of
  hard-example mining: half rewrites of training *positives* along the failing directions, half
  random-strategy rewrites of negatives (the same negative half as ``adversarial-balanced``);
* ``axis-hard`` — attribution-filtered adversarial training: half the hardest accepted
  rewrites of training positives *whose strategy moves a failing direction* (topped up with the
  hardest others when too few do), half random-strategy rewrites of negatives; re-attacks each
  round like ``adversarial-balanced`` (the planner-rewriter pipeline as the repair's generator);
* ``axis-mixed`` — a third hardest positives, a third random-strategy rewrites of negatives, a
  third ``axis`` rewrites (both classes): the balanced baseline's data with a third of its
  budget moved to the attributed directions (matched total budget, so it is not a superset of
  the baseline);
* ``axis-weighted`` — ``axis-fixed`` with the rewrites allocated to the failing directions in
  proportion to their *attributed mass* (``mass``: per (axis, sign), the logit that removing the
  direction gave back, summed over the dev successes it was moved in), instead of uniformly:
  directions that explain more misses get more rewrites. (Weighting the loss instead would
  need sample weights in every detector's ``fit``; at a fixed budget, allocating rewrites in
  proportion to the mass weights each direction's share of the added loss the same way.)
* ``axis-soft`` — ``axis-weighted`` over *every* direction with positive attributed mass, not
  only those that meet the failing rule (the rule's cut-off as a soft weight).

``adversarial-mixed`` (opt-in baseline) is ``axis-mixed`` with random strategies in place of the
failing directions: the ablation that tells whether a gain of ``axis-mixed`` comes from the
attribution or only from mixing hard positives with diverse rewrites.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.errors import InputError
from trustlab.detectors import check_texts
from trustlab.methods.arao.attack import AttackResult

__all__ = ["ALL_REPAIRS", "AXIS_VARIANTS", "REPAIRS", "Augmentation", "augment", "repair"]

REPAIRS = ("none", "random", "adversarial", "adversarial-balanced", "axis")
AXIS_VARIANTS = ("axis-fixed", "axis-balanced", "axis-hard", "axis-mixed", "axis-weighted", "axis-soft")
ALL_REPAIRS = REPAIRS + AXIS_VARIANTS + ("adversarial-mixed",)
_ALL = ALL_REPAIRS
# repairs that depend on the current detector and iterate over rounds
_REATTACK = ("adversarial", "adversarial-balanced", "axis-hard", "axis-mixed", "adversarial-mixed")


@dataclass
class Augmentation:
    """The added texts and labels, the strategies used and how many rewrites were rejected."""

    texts: list[str]
    labels: list[int]
    mode: str
    n_rejected: int = 0


def _rewrites(
    texts: list[str], labels: list[int], n_aug: int, rewriter: Any, claim: Any,
    rng: np.random.Generator, sampler: Any, *, max_rounds: int = 6,
) -> tuple[list[str], list[int], int]:  # fmt: skip
    out_t: list[str] = []
    out_y: list[int] = []
    rejected = 0
    for _ in range(max_rounds):
        need = n_aug - len(out_t)
        if need <= 0:
            break
        idx = rng.integers(len(texts), size=int(need * 1.3) + 2)
        strats = [sampler(rng) for _ in idx]
        seeds = [int(rng.integers(2**31)) for _ in idx]
        rw = rewriter.rewrite([texts[i] for i in idx], strats, seeds)
        ok = [k for k, t in enumerate(rw) if t is not None and t.strip()]
        rejected += len(idx) - len(ok)
        if not ok:
            continue
        v = claim.check([texts[idx[k]] for k in ok], [rw[k] for k in ok])
        for m, k in enumerate(ok):
            if v.accepted[m] and len(out_t) < n_aug:
                out_t.append(rw[k])  # type: ignore[arg-type]
                out_y.append(labels[idx[k]])
            elif not v.accepted[m]:
                rejected += 1
    return out_t, out_y, rejected


def augment(
    texts: Sequence[str],
    labels: Sequence[int],
    *,
    mode: str,
    n_aug: int,
    rewriter: Any = None,
    claim: Any = None,
    rng: np.random.Generator | int = 0,
    failing: Sequence[tuple[int, int]] | None = None,
    adversarial: AttackResult | None = None,
    adversarial_texts: Sequence[str] | None = None,
    mass: Mapping[tuple[int, int], float] | None = None,
) -> Augmentation:
    """The augmentation of one repair (see the module docstring); ``labels`` are 0/1;
    ``mass`` (``axis-weighted``, ``axis-soft``): attributed mass per (axis index, sign), see
    :meth:`~trustlab.methods.arao.attribution.Attribution.mass`."""
    where = "augment"
    items = check_texts(texts, "texts", where)
    y = [int(v) for v in labels]
    if len(y) != len(items) or any(v not in (0, 1) for v in y):
        raise InputError(f"augment needs one 0/1 label per text. Got {len(y)} labels for {len(items)} texts.")
    if mode not in _ALL:
        raise InputError(f"The 'mode' parameter of augment must be one of {', '.join(_ALL)}. Got {mode!r}.")
    from trustlab.core.validation import check_scalar

    n_aug = check_scalar(n_aug, "n_aug", where, kind=int, lo=0)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    if mode == "none" or n_aug == 0:
        return Augmentation([], [], mode)
    if rewriter is None or claim is None:
        raise InputError(f"augment(mode={mode!r}) needs a rewriter and a claim check.")
    space = rewriter.space
    if mode == "random":
        t, lab, rej = _rewrites(items, y, int(n_aug), rewriter, claim, gen, space.sample)
        return Augmentation(t, lab, mode, rej)
    allowed = [(int(a), int(s)) for a, s in failing] if failing else []
    weights = None
    if mode in ("axis-weighted", "axis-soft"):
        allowed, weights = _weighted(allowed, mass, soft=mode == "axis-soft")
    if mode.startswith("axis") and not allowed:
        raise InputError(f"augment(mode={mode!r}) needs the failing axes (none were found).")

    def along(g: np.random.Generator) -> tuple[int, ...]:
        if weights is not None:
            return _sample_weighted(space, g, allowed, weights)
        return space.sample(g, allowed=allowed)

    neg = [t for t, v in zip(items, y, strict=True) if v == 0]
    pos = [t for t, v in zip(items, y, strict=True) if v == 1]

    def negatives(n: int) -> tuple[list[str], list[int], int]:
        return _rewrites(neg, [0] * len(neg), n, rewriter, claim, gen, space.sample) if neg and n > 0 else ([], [], 0)

    if mode in ("axis", "axis-fixed", "axis-weighted", "axis-soft"):
        t, lab, rej = _rewrites(items, y, int(n_aug), rewriter, claim, gen, along)
        return Augmentation(t, lab, mode, rej)
    if mode == "axis-balanced":
        tp, lp, rp = (_rewrites(pos, [1] * len(pos), (int(n_aug) + 1) // 2, rewriter, claim, gen, along)
                      if pos else ([], [], 0))  # fmt: skip
        tn, ln, rn = negatives(int(n_aug) - len(tp))
        return Augmentation(tp + tn, lp + ln, mode, rp + rn)
    # the rest mine the attack on the training positives
    if adversarial is None or adversarial_texts is None:
        raise InputError(f"augment(mode={mode!r}) needs the attack result and its texts.")
    src = check_texts(adversarial_texts, "adversarial_texts", where)
    if mode == "adversarial":
        t, rej = _hardest(adversarial, src, int(n_aug), rewriter)
        return Augmentation(t, [1] * len(t), mode, rej)
    if mode in ("adversarial-balanced", "axis-hard"):
        t, rej = _hardest(adversarial, src, (int(n_aug) + 1) // 2, rewriter,
                          allowed=allowed if mode == "axis-hard" else None)  # fmt: skip
        tn, ln, rn = negatives(int(n_aug) - len(t))
        return Augmentation(t + tn, [1] * len(t) + ln, mode, rej + rn)
    # axis-mixed / adversarial-mixed: thirds
    n_hard = int(n_aug) // 3 + (1 if int(n_aug) % 3 else 0)
    n_neg = int(n_aug) // 3 + (1 if int(n_aug) % 3 == 2 else 0)
    t, rej = _hardest(adversarial, src, n_hard, rewriter)
    tn, ln, rn = negatives(n_neg)
    ta, la, ra = _rewrites(items, y, int(n_aug) - len(t) - len(tn), rewriter, claim, gen,
                           along if mode == "axis-mixed" else space.sample)  # fmt: skip
    return Augmentation(t + tn + ta, [1] * len(t) + ln + la, mode, rej + rn + ra)


def _weighted(failing: list[tuple[int, int]], mass: Mapping[tuple[int, int], float] | None, *,
              soft: bool) -> tuple[list[tuple[int, int]], np.ndarray]:  # fmt: skip
    """The directions and their sampling weights: the failing ones weighted by their mass
    (``soft``: every direction with positive mass); uniform where no mass is known (the
    surrogate fallback), so the variant never has fewer directions than ``axis``."""
    if mass is None:
        raise InputError("augment(mode='axis-weighted'/'axis-soft') needs the attributed mass.")
    m = {(int(a), int(np.sign(g))): float(v) for (a, g), v in mass.items()}
    if any(not np.isfinite(v) or v < 0 for v in m.values()):
        raise InputError("The 'mass' parameter of augment must map (axis, sign) to finite masses >= 0.")
    dirs = list(dict.fromkeys(failing))
    if soft:
        dirs = list(dict.fromkeys([d for d in sorted(m, key=lambda d: -m[d]) if m[d] > 0] + dirs))
    w = np.array([m.get(d, 0.0) for d in dirs], dtype=np.float64)
    if not dirs:
        return [], w
    if w.sum() <= 0:
        w = np.ones(len(dirs))
    # a failing direction with no measured mass keeps the smallest positive weight
    w = np.where(w > 0, w, w[w > 0].min())
    return dirs, w / w.sum()


def _sample_weighted(space: Any, rng: np.random.Generator, dirs: list[tuple[int, int]],
                     w: np.ndarray) -> tuple[int, ...]:  # fmt: skip
    """A strategy over ``dirs``: k ~ U{1..min(max_active, distinct axes)} directions drawn
    without replacement with probability proportional to ``w`` (one direction per axis), each at
    a random level."""
    s = [0] * space.dim
    k = int(rng.integers(1, min(space.max_active, len({a for a, _ in dirs})) + 1))
    p = w.copy()
    while k > 0 and p.sum() > 0:
        j = int(rng.choice(len(dirs), p=p / p.sum()))
        a, g = dirs[j]
        s[a] = g * int(rng.integers(1, space.max_level + 1))
        k -= 1
        for i, (b, _) in enumerate(dirs):  # one direction per axis
            if b == a:
                p[i] = 0.0
    return tuple(s)


def _hardest(adversarial: AttackResult, src: list[str], n: int, rewriter: Any,
             allowed: Sequence[tuple[int, int]] | None = None) -> tuple[list[str], int]:  # fmt: skip
    """The ``n`` lowest-scoring accepted rewrites of the attack (distinct item, strategy, seed);
    with ``allowed``, those whose strategy moves an allowed (axis, sign) first, then the rest."""
    pool = [(sc, r.index, s, seed) for r in adversarial.items for (s, seed, sc, _sim, _why) in r.trace
            if sc is not None and any(s)]  # fmt: skip
    pool.sort(key=lambda p: (p[0], p[1]))
    if allowed:
        ok = {(int(a), int(np.sign(g))) for a, g in allowed}

        def moves(s: tuple[int, ...]) -> bool:
            return any(v != 0 and (a, int(np.sign(v))) in ok for a, v in enumerate(s))

        pool = [p for p in pool if moves(p[2])] + [p for p in pool if not moves(p[2])]
    seen: set[tuple[int, tuple[int, ...], int]] = set()
    chosen = []
    for _sc, i, s, seed in pool:
        if len(chosen) >= n:
            break
        if (i, s, seed) not in seen:
            seen.add((i, s, seed))
            chosen.append((i, s, seed))
    if not chosen:
        return [], 0
    rw = rewriter.rewrite([src[i] for i, _, _ in chosen], [s for _, s, _ in chosen], [d for _, _, d in chosen])
    t = [x for x in rw if x is not None and x.strip()]
    return t, len(rw) - len(t)


def repair(detector: Any, texts: Sequence[str], labels: Sequence[int], aug: Augmentation) -> Any:
    """A fresh copy of ``detector`` fitted on the texts plus the augmentation."""
    if not hasattr(detector, "clone"):
        raise InputError(
            "repair needs a trainable detector with clone() and fit() (EmbeddingDetector, "
            "TfidfDetector, SklearnDetector)."
        )
    items = check_texts(texts, "texts", "repair")
    if not isinstance(aug, Augmentation):
        raise InputError("The 'aug' parameter of repair must be an Augmentation.")
    return detector.clone().fit(items + list(aug.texts), list(labels) + list(aug.labels))


@dataclass
class RepairOutcome:
    """One repaired detector on the held-out split: scores of the originals, of the adaptive
    attack's best rewrites (positives only; negatives keep their originals) and of the
    transferred rewrites (found against the unrepaired detector)."""

    mode: str
    detector: Any
    threshold: float
    n_aug: int
    original_scores: np.ndarray
    attacked_scores: np.ndarray
    attacked_pos_only_scores: np.ndarray
    transfer_scores: np.ndarray | None
    attack_success: float
    n_attacked: int
    styled_negative_fpr: float
    failing: list[tuple[int, int]] = field(default_factory=list)


def evaluate_repairs(
    base: Any,
    train: tuple[list[str], list[int]],
    dev: tuple[list[str], list[int]],
    evaluation: tuple[list[str], list[int]],
    *,
    rewriter: Any,
    claim: Any,
    make_planner: Any,
    failing: Sequence[tuple[int, int]],
    adversarial: AttackResult,
    adversarial_texts: Sequence[str],
    n_aug: int,
    budget: int,
    fpr: float,
    rng: np.random.Generator,
    modes: Sequence[str] = REPAIRS,  # or any of AXIS_VARIANTS too
    transfer_texts: Sequence[str] | None = None,
    progress: Any = None,
    rounds: int = 1,
    refind_failing: Any = None,
    reattack: Any = None,
    mass: Mapping[tuple[int, int], float] | None = None,
) -> list[RepairOutcome]:
    """Every repair in ``modes``: augment, refit, recalibrate the threshold on the dev
    negatives at ``fpr``, then build the held-out attacked set: each positive replaced by the
    lowest-scoring rewrite an adaptive attack finds against *this* detector (``make_planner()``,
    whole budget spent minimising the score), each negative by one random-strategy rewrite
    (the same rewrites for every repair: benign texts use rhetoric too, so a repair that learns
    "rhetoric means harmful" is caught). ``attacked_pos_only_scores`` keeps the negatives
    original (BODEGA's setting); ``transfer_scores`` scores the rewrites found against the
    unrepaired detector.

    ``rounds`` > 1 iterates the detector-dependent repairs at the same total ``n_aug`` (see
    the module docstring): ``refind_failing(detector, threshold, rng)`` returns the failing
    directions of the current repaired detector (attribution on the dev split) and
    ``reattack(detector, threshold, rng)`` the attack on the training positives against it
    (both required when ``rounds`` > 1 and the mode needs them). ``mass``: the attributed mass
    per (axis, sign) of the first attribution (``axis-weighted``, ``axis-soft``)."""
    from trustlab.core.validation import check_scalar
    from trustlab.methods.arao.attack import RhetoricalAttack, calibrate_threshold

    rounds = check_scalar(rounds, "rounds", "evaluate_repairs", kind=int, lo=1)
    bad = [m for m in modes if m not in _ALL]
    if bad:
        raise InputError(f"The 'modes' parameter of evaluate_repairs must name repairs of {', '.join(_ALL)}. Got {bad}.")
    if rounds > 1 and (("axis" in modes and refind_failing is None)
                       or (set(_REATTACK) & set(modes) and reattack is None)):  # fmt: skip
        raise InputError("evaluate_repairs(rounds > 1) needs refind_failing (axis) and reattack (adversarial).")

    tr_t, tr_y = train
    dv_t, dv_y = dev
    ev_t, ev_y = evaluation
    pos = [t for t, y in zip(ev_t, ev_y, strict=True) if y == 1]
    neg_idx = [i for i, y in enumerate(ev_y) if y == 0]
    styled = _styled(ev_t, neg_idx, rewriter, claim, np.random.default_rng(int(rng.integers(2**31))))
    out = []
    seeds = {m: int(rng.integers(2**31)) for m in modes}
    for mode in progress(list(modes), description="repairs") if progress else modes:
        gen = np.random.default_rng(seeds[mode])
        neg_dev = [t for t, y in zip(dv_t, dv_y, strict=True) if y == 0]
        n_rounds = rounds if mode == "axis" or mode in _REATTACK else 1
        shares = [n_aug // n_rounds + (1 if k < n_aug % n_rounds else 0) for k in range(n_rounds)]
        aug = Augmentation([], [], mode)
        fail_k, adv_k = list(failing), adversarial
        det = base
        for k, share in enumerate(shares):
            if k > 0:
                thr_k = calibrate_threshold(det.score(neg_dev), fpr)
                if mode == "axis":  # the directions the repair has not closed yet come first
                    new = [f for f in refind_failing(det, thr_k, gen) if f not in fail_k]
                    fail_k = new + fail_k
                else:
                    adv_k = reattack(det, thr_k, gen)
            step = augment(tr_t, tr_y, mode=mode, n_aug=share, rewriter=rewriter, claim=claim, rng=gen,
                           failing=fail_k, adversarial=adv_k, adversarial_texts=adversarial_texts,
                           mass=mass)  # fmt: skip
            aug = Augmentation(aug.texts + step.texts, aug.labels + step.labels, mode, aug.n_rejected + step.n_rejected)
            det = repair(base, tr_t, tr_y, aug)
        thr = calibrate_threshold(det.score(neg_dev), fpr)
        orig = np.asarray(det.score(ev_t), dtype=np.float64)
        pos_scores = orig[np.asarray(ev_y) == 1]
        attack = RhetoricalAttack(det, rewriter, make_planner(), claim, threshold=thr,
                                  budget=budget, stop_on_success=False)  # fmt: skip
        # every positive is attacked (not only the flagged ones): ROC-AUC ranks them all
        res = attack.run(pos, gen, original_scores=pos_scores, attack_all=True)
        attacked_pos = orig.copy()
        best = np.array([min(r.best_score, s) for r, s in zip(res.items, pos_scores, strict=True)])
        attacked_pos[np.asarray(ev_y) == 1] = best
        attacked = attacked_pos.copy()
        styled_scores = np.asarray(det.score(styled), dtype=np.float64) if styled else np.zeros(0)
        attacked[neg_idx] = styled_scores
        styled_fpr = float(np.mean(styled_scores >= thr)) if styled else float("nan")
        flagged = pos_scores >= thr
        success = float(np.mean(best[flagged] < thr)) if flagged.any() else float("nan")
        transfer = None
        if transfer_texts is not None:
            transfer = orig.copy()
            transfer[np.asarray(ev_y) == 1] = det.score(list(transfer_texts))
        out.append(RepairOutcome(mode, det, thr, len(aug.texts), orig, attacked, attacked_pos, transfer,
                                 success, len(pos), styled_fpr, fail_k if mode.startswith("axis") else []))  # fmt: skip
    return out


def _styled(texts: list[str], idx: list[int], rewriter: Any, claim: Any, rng: np.random.Generator) -> list[str]:
    """One random-strategy rewrite per text (the original where the rewrite fails the claim check)."""
    if not idx:
        return []
    src = [texts[i] for i in idx]
    strats = [rewriter.space.sample(rng) for _ in idx]
    rw = rewriter.rewrite(src, strats, [int(rng.integers(2**31)) for _ in idx])
    cand = [r if r is not None and r.strip() else t for r, t in zip(rw, src, strict=True)]
    ok = claim.check(src, cand).accepted
    return [c if a else t for c, a, t in zip(cand, ok, src, strict=True)]
