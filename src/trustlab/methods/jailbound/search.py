"""Embedding-space jailbreak search on white-box targets, with baselines at an equal query budget.

Every search optimises a ``k``-token suffix placed right after the user's request (before the
tokens the chat template adds), for one behaviour at a time, and returns **token ids** (the
materialised attack). What it maximises is the *discrete* objective

    F(s) = log P(target | request ⊕ s)         (target: the compliance opener, "Sure, here is")

evaluated by teacher forcing. The searches differ in how they propose candidate suffixes:

* :class:`DualBranchSearch` (JailBound's first-order loss, FOL): two continuous iterates in
  embedding space, each a ``[k, d_model]`` suffix, moved by normalised gradient steps inside a
  per-position trust region around the embeddings of the current best discrete suffix:

  - the **o− branch** ("high-value regions") ascends ``log P(target)`` minus an optional
    refusal-direction term ``β ⟨r, h_L⟩`` (the last prompt position's residual at layer L read
    along a refusal direction ``r``);
  - the **o+ branch** ("safety-boundary states") descends the first-token refusal margin
    ``m = log(1 − p) − log p`` (``p`` = probability of the target's first token) through
    ``softplus(m + κ)``: it moves to where the opener becomes the model's most likely first
    token and stops just past it (gradient ~0 once ``m < −κ``). The first crossing
    (``m < 0``) is recorded with its distance from the start (the boundary analysis).

  Each iteration, the tokens nearest (cosine) to each branch's vectors are the candidate
  substitutions; ``n_candidates`` single-token swaps of the current suffix, half from each
  branch, are scored by ``F`` and the best replaces the suffix when it improves ``F``.
  ``gradient="zero"`` is the **zero-order variant**: the same search with each gradient replaced
  by a Gaussian-smoothing estimate from ``q`` forward differences, ``q`` chosen so that one
  estimate costs what one gradient costs.
* :class:`RandomSearch`: single-token swaps drawn uniformly from the vocabulary; the best
  improving one is kept (Andriushchenko et al.'s random search with one-token moves).
* :class:`GCGSearch`: GCG (Zou et al., 2023): one-hot token gradients at the current suffix
  (``lm.token_gradients``), swaps drawn from the top-``topk`` tokens per position.
* :class:`PEZSearch`: PEZ (Wen et al., 2023, "Hard Prompts Made Easy"): a continuous suffix
  whose gradient is taken at its projection onto the nearest tokens and applied to the
  continuous vectors; each gradient's forward pass scores the projected suffix (no extra
  query), the best projection is kept.

**Budget.** Costs are counted in *queries*: one forward pass of one prompt is 1 query, one
gradient of one prompt (forward + backward) is :data:`GRADIENT_COST` = 3 queries (the usual
backward ≈ 2 forwards). Every search stops when its next step would exceed ``budget``; the
searches are compared at the same ``budget``.

**Semantic preservation.** Each improvement is kept in ``history_``; :func:`materialise` picks,
among them, the best-scoring suffix whose request ⊕ suffix text keeps a text-embedding cosine
similarity (MiniLM by default) to the plain request at or above ``min_similarity`` (none
qualifying: the empty suffix, i.e. the plain request).
"""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from trustlab import lm as _lm
from trustlab.core.errors import InputError, NotFittedError
from trustlab.core.validation import check_choice, check_scalar

__all__ = [
    "GRADIENT_COST",
    "DualBranchSearch",
    "GCGSearch",
    "PEZSearch",
    "RandomSearch",
    "SearchResult",
    "SuffixProblem",
    "allowed_suffix_tokens",
    "materialise",
]

#: Queries charged for one gradient of one prompt (one forward + one backward pass).
GRADIENT_COST = 3


def _check_model(model: Any, where: str) -> None:
    if not all(hasattr(model, a) for a in ("tokenizer", "n_embeddings", "embed_batch")):
        raise InputError(f"The 'model' parameter of {where} must be a trustlab.lm.LanguageModel "
                         f"(lm.load(spec)). Got {type(model).__name__}.")


#: allowed_suffix_tokens per tokenizer object (one pass tokenizes every vocabulary entry; the
#: study calls it once per search_attacks call), keyed weakly, checked against the sizes.
_ALLOWED: weakref.WeakKeyDictionary[Any, tuple[tuple[int, int], list[int]]] = (
    weakref.WeakKeyDictionary())


def allowed_suffix_tokens(model: Any) -> list[int]:
    """Token ids a suffix may use: every non-special token that survives the round trip through
    text on its own (decoded after a word and a space, it tokenizes back to itself) and decodes
    to something other than whitespace. A suffix made of them can still merge across tokens;
    :func:`materialise` checks the whole suffix. Computed once per tokenizer object (and
    embedding count)."""
    _check_model(model, "allowed_suffix_tokens")
    tok = model.tokenizer
    key = (int(model.n_embeddings), len(tok) if hasattr(tok, "__len__") else -1)
    try:
        hit = _ALLOWED.get(tok)
    except TypeError:  # not weak-referenceable: no cache
        hit = None
    if hit is not None and hit[0] == key:
        return list(hit[1])
    keep = _allowed_suffix_tokens(model, tok)
    with contextlib.suppress(TypeError):  # not weak-referenceable: no cache
        _ALLOWED[tok] = (key, keep)
    return list(keep)


def _allowed_suffix_tokens(model: Any, tok: Any) -> list[int]:
    special = set(getattr(tok, "all_special_ids", []))
    keep = []
    for i in range(model.n_embeddings):
        if i in special:
            continue
        text = tok.decode([i])
        if not text.strip() or "\n" in text:
            continue
        back = tok("word " + text.strip(), add_special_tokens=False)["input_ids"]
        if back[-1:] == [i]:
            keep.append(i)
    return keep


class SuffixProblem:
    """One behaviour on one white-box model: the prompt split around the suffix slot, the target,
    and batched evaluation of discrete suffixes and continuous suffix vectors.

    ``prompt``: a user request (string) or a conversation; ``target``: the compliance opener.
    ``direction`` (unit vector, [d_model]) with ``layer`` adds the refusal-direction read-out
    :meth:`direction_score` (the residual before block ``layer`` at the last prompt position).
    ``queries`` counts every prompt forwarded (``GRADIENT_COST`` per prompt differentiated).
    """

    def __init__(self, model: Any, prompt: Any, target: str = "Sure, here is",
                 *, direction: torch.Tensor | None = None, layer: int | None = None) -> None:
        _check_model(model, "SuffixProblem")
        if isinstance(prompt, str):
            if not prompt.strip():
                raise InputError("The 'prompt' parameter of SuffixProblem is an empty string.")
            conv = [{"role": "user", "content": prompt}]
        elif isinstance(prompt, Sequence) and prompt and isinstance(prompt[-1], dict):
            conv = [dict(m) for m in prompt]
        else:
            raise InputError(f"The 'prompt' parameter of SuffixProblem must be a request string "
                             f"or a conversation. Got {type(prompt).__name__}.")
        if not isinstance(target, str) or not target.strip():
            raise InputError(f"The 'target' parameter of SuffixProblem must be a non-empty "
                             f"string. Got {target!r}.")
        self.model = model
        self.conversation = conv
        self.request = str(conv[-1]["content"])
        self.target = target
        ids = model.tokenize([conv])[0]
        n_post = model.n_post_instruction_tokens
        self.prefix_ids = ids[: len(ids) - n_post]
        self.post_ids = ids[len(ids) - n_post:]
        self.target_ids = _lm.continuation_ids(model, conv, target)
        self.first_target_id = self.target_ids[0]
        if direction is not None:
            d = torch.as_tensor(direction, dtype=torch.float32).reshape(-1)
            if d.numel() != model.d_model or not torch.isfinite(d).all() or d.norm() == 0:
                raise InputError(f"The 'direction' parameter of SuffixProblem must be a finite "
                                 f"non-zero vector of length {model.d_model}.")
            if layer is None or not 0 <= int(layer) < model.n_layers:
                raise InputError(f"The 'layer' parameter of SuffixProblem must be in "
                                 f"[0, {model.n_layers - 1}] with a direction. Got {layer!r}.")
            self.direction = d / d.norm()
            self.layer = int(layer)
        else:
            self.direction, self.layer = None, None
        self.queries = 0
        matrix = model.embedding_matrix().float()
        self._matrix = matrix
        self._prefix_emb = model.embed(torch.as_tensor(self.prefix_ids)).float()
        self._post_emb = model.embed(torch.as_tensor(self.post_ids)).float()

    # ------------------------------------------------------------------ building prompts
    def embed(self, suffix_ids: torch.Tensor) -> torch.Tensor:
        """Embeddings ``[..., k, D]`` of suffix ids ``[..., k]``."""
        return self._matrix[torch.as_tensor(suffix_ids, dtype=torch.long)]

    def _batch(self, suffix_vectors: torch.Tensor) -> Any:
        v = suffix_vectors if suffix_vectors.dim() == 3 else suffix_vectors.unsqueeze(0)
        rows = [[self.prefix_ids, v[b], self.post_ids] for b in range(v.shape[0])]
        return self.model.embed_batch(rows)

    def text(self, suffix_ids: Sequence[int] | torch.Tensor) -> str:
        """The request with the suffix appended as text (what a black-box target receives)."""
        ids = [int(i) for i in torch.as_tensor(suffix_ids).reshape(-1)]
        tail = self.model.tokenizer.decode(ids).strip()
        return f"{self.request} {tail}" if tail else self.request

    def round_trips(self, suffix_ids: Sequence[int] | torch.Tensor) -> bool:
        """Whether :meth:`text` tokenizes back to exactly prefix + suffix + post."""
        ids = [int(i) for i in torch.as_tensor(suffix_ids).reshape(-1)]
        conv = [*self.conversation[:-1], {**self.conversation[-1], "content": self.text(ids)}]
        return self.model.tokenize([conv])[0] == self.prefix_ids + ids + self.post_ids

    # ------------------------------------------------------------------ objectives
    def score(self, suffix_ids: torch.Tensor, chunk: int = 64) -> torch.Tensor:
        """``F`` = log P(target | request ⊕ suffix) for suffix ids ``[B, k]`` (no grad)."""
        ids = torch.as_tensor(suffix_ids, dtype=torch.long)
        ids = ids.unsqueeze(0) if ids.dim() == 1 else ids
        out = []
        with torch.no_grad():
            for start in range(0, ids.shape[0], chunk):
                part = ids[start:start + chunk]
                rows = [self.prefix_ids + r.tolist() + self.post_ids for r in part]
                lp = _lm.target_logprob(self.model, rows, self.target_ids)
                out.append(lp.float())
        self.queries += ids.shape[0]
        return torch.cat(out)

    def _terms(self, vectors: torch.Tensor, grad: bool) -> tuple[torch.Tensor, torch.Tensor,
                                                                  torch.Tensor | None]:
        """(log P(target), log P(first target token), direction score) for suffix vectors
        ``[B, k, D]``; differentiable in ``vectors`` when ``grad``."""
        batch = self._batch(vectors)
        captured: list[torch.Tensor] = []
        n_prompt = batch.width

        def read(site: str, h: torch.Tensor, step: Any) -> None:
            if step.offset == 0:
                captured.append(h[:, n_prompt - 1, :])
            return None

        ctx = (_lm.hook(self.model, [f"blocks.{self.layer}.resid_pre"], read)
               if self.direction is not None else _nullcontext())
        with ctx, torch.set_grad_enabled(grad):
            per = _lm.target_logprob(self.model, batch, self.target_ids, per_token=True)
        assert isinstance(per, list)
        value = torch.stack([p.sum() for p in per]).float()
        first = torch.stack([p[0] for p in per]).float()
        proj = None
        if self.direction is not None and captured:
            proj = captured[0].float() @ self.direction
        self.queries += vectors.shape[0] * (GRADIENT_COST if grad else 1)
        return value, first, proj

    def value_objective(self, vectors: torch.Tensor, beta: float = 0.0, grad: bool = False
                        ) -> torch.Tensor:
        """o− branch objective (to maximise): log P(target) − β ⟨r, h_L⟩."""
        value, _, proj = self._terms(vectors, grad)
        return value - beta * proj if (beta and proj is not None) else value

    def margin(self, vectors: torch.Tensor, grad: bool = False) -> torch.Tensor:
        """First-token refusal margin ``log(1 − p) − log p`` (< 0: the opener is more likely
        than everything else together, so greedy decoding starts complying)."""
        _, first, _ = self._terms(vectors, grad)
        return _log1mexp(first) - first

    def direction_score(self, vectors: torch.Tensor) -> torch.Tensor:
        if self.direction is None:
            raise InputError("This SuffixProblem has no refusal direction.")
        _, _, proj = self._terms(vectors, False)
        assert proj is not None
        return proj


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _log1mexp(x: torch.Tensor) -> torch.Tensor:
    """log(1 − exp(x)) for x < 0, stable."""
    x = x.clamp(max=-1e-7)
    return torch.where(x > -math.log(2), torch.log(-torch.expm1(x)), torch.log1p(-torch.exp(x)))


@dataclass
class SearchResult:
    """What one search found for one behaviour.

    ``suffix_ids``: the best discrete suffix; ``score``: its ``F``; ``initial_score``: ``F`` of
    the starting suffix; ``queries``: queries spent; ``history``: every improving suffix with
    its score (for materialisation under a similarity constraint); ``curve``: best ``F`` after
    each step, with the queries spent at that point; ``boundary``: for the dual-branch search,
    the o+ branch's first margin crossing (``crossed``, ``distance`` = root-mean-square
    per-position L2 distance from the starting suffix's embeddings, ``queries``).
    """

    suffix_ids: list[int]
    score: float
    initial_score: float
    queries: int
    history: list[tuple[list[int], float]]
    curve: list[tuple[int, float]]
    boundary: dict[str, Any] = field(default_factory=dict)


class _BaseSearch:
    """Shared lifecycle: ``__init__`` stores settings; ``fit(problem)`` runs the search and sets
    ``result_`` (a :class:`SearchResult`); ``fit`` returns self."""

    name = "base"

    def __init__(self, n_tokens: int = 6, budget: int = 1200, n_candidates: int = 32,
                 seed: int = 0, init: Literal["repeat", "random"] = "repeat",
                 allowed: Sequence[int] | None = None) -> None:
        self.n_tokens = n_tokens
        self.budget = budget
        self.n_candidates = n_candidates
        self.seed = seed
        self.init = init
        self.allowed = allowed

    def _check(self, problem: Any) -> None:
        where = type(self).__name__
        self._k = check_scalar(self.n_tokens, "n_tokens", where, kind=int, lo=1, hi=64)
        self._budget = check_scalar(self.budget, "budget", where, kind=int, lo=1)
        self._ncand = check_scalar(self.n_candidates, "n_candidates", where, kind=int, lo=1,
                                   hi=4096)
        self._seed = check_scalar(self.seed, "seed", where, kind=int, lo=0)
        check_choice(self.init, "init", ("repeat", "random"), where)
        if not isinstance(problem, SuffixProblem):
            raise InputError(f"The 'problem' parameter of {where}.fit must be a SuffixProblem. "
                             f"Got {type(problem).__name__}.")

    def _setup(self, problem: SuffixProblem) -> tuple[torch.Tensor, np.random.Generator]:
        self._check(problem)
        allowed = (allowed_suffix_tokens(problem.model) if self.allowed is None
                   else _check_allowed(self.allowed, type(self).__name__))
        if not allowed or min(allowed) < 0 or max(allowed) >= problem.model.n_embeddings:
            raise InputError(f"The 'allowed' parameter of {type(self).__name__} must name token "
                             f"ids in [0, {problem.model.n_embeddings - 1}].")
        self.allowed_ = torch.as_tensor(sorted(set(allowed)), dtype=torch.long)
        rng = np.random.default_rng(self._seed)
        if self.init == "repeat":  # GCG's "! ! ! ..." start: one neutral word repeated
            tok = _init_token(problem.model, set(allowed))
            s = torch.full((self._k,), int(tok), dtype=torch.long)
        else:
            s = self.allowed_[torch.as_tensor(rng.integers(0, len(self.allowed_), self._k))]
        return s, rng

    def _start(self, problem: SuffixProblem, s: torch.Tensor) -> None:
        self._q0 = problem.queries
        f = float(problem.score(s.unsqueeze(0))[0])
        self._best = (s.clone(), f)
        self._init_score = f
        self._history = [(s.tolist(), f)]
        self._curve = [(self._spent(problem), f)]

    def _spent(self, problem: SuffixProblem) -> int:
        return problem.queries - self._q0

    def _consider(self, problem: SuffixProblem, cands: torch.Tensor) -> None:
        scores = problem.score(cands)
        j = int(scores.argmax())
        if float(scores[j]) > self._best[1]:
            self._best = (cands[j].clone(), float(scores[j]))
            self._history.append((cands[j].tolist(), float(scores[j])))
        self._curve.append((self._spent(problem), self._best[1]))

    def _finish(self, problem: SuffixProblem, boundary: dict[str, Any] | None = None
                ) -> SearchResult:
        s, f = self._best
        self.result_ = SearchResult(s.tolist(), f, self._init_score, self._spent(problem),
                                    self._history, self._curve, boundary or {})
        return self.result_

    @property
    def result(self) -> SearchResult:
        if not hasattr(self, "result_"):
            raise NotFittedError(f"{type(self).__name__} has not run: call fit(problem) first.")
        return self.result_


def _check_allowed(value: Any, where: str) -> list[int]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | torch.Tensor | np.ndarray):
        raise InputError(f"The 'allowed' parameter of {where} must be a list of token ids. "
                         f"Got {type(value).__name__}.")
    out = []
    for v in (value.tolist() if hasattr(value, "tolist") else value):
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise InputError(f"The 'allowed' parameter of {where} must hold integer token ids. "
                             f"Got {v!r}.")
        out.append(int(v))
    return out


#: Words tried, in order, for the repeated starting suffix (the first one that is one allowed
#: token): GCG starts from "!"; closed word-level vocabularies may lack it.
INIT_WORDS = ("!", "a", "the", ".")


def _init_token(model: Any, allowed: set[int]) -> int:
    for w in INIT_WORDS:
        ids = model.tokenizer(w, add_special_tokens=False)["input_ids"]
        if len(ids) == 1 and ids[0] in allowed:
            return int(ids[0])
    return min(allowed)


def _single_swaps(s: torch.Tensor, options: list[torch.Tensor], n: int,
                  rng: np.random.Generator) -> torch.Tensor:
    """``n`` distinct single-token swaps of ``s``: position ``p`` takes a token of
    ``options[p]`` (different from ``s[p]``)."""
    seen: set[tuple[int, ...]] = set()
    out = []
    positions = [p for p in range(len(s)) if len(options[p]) > 0]
    if not positions:
        return s.unsqueeze(0)
    for _ in range(n * 4):
        p = positions[int(rng.integers(len(positions)))]
        tok = int(options[p][int(rng.integers(len(options[p])))])
        if tok == int(s[p]):
            continue
        c = s.clone()
        c[p] = tok
        key = tuple(c.tolist())
        if key not in seen:
            seen.add(key)
            out.append(c)
        if len(out) == n:
            break
    return torch.stack(out) if out else s.unsqueeze(0)


class RandomSearch(_BaseSearch):
    """Random single-token swaps (uniform over ``allowed``), keep the best; ``n_candidates`` per
    step."""

    name = "random"

    def fit(self, problem: SuffixProblem) -> RandomSearch:
        s, rng = self._setup(problem)
        self._start(problem, s)
        options = [self.allowed_] * self._k
        while self._spent(problem) + self._ncand <= self._budget:
            cands = _single_swaps(self._best[0], options, self._ncand, rng)
            self._consider(problem, cands)
        self._finish(problem)
        return self


class GCGSearch(_BaseSearch):
    """GCG: token gradients at the current suffix, swaps from the top-``topk`` per position."""

    name = "gcg"

    def __init__(self, n_tokens: int = 6, budget: int = 1200, n_candidates: int = 32,
                 seed: int = 0, init: Literal["repeat", "random"] = "repeat",
                 allowed: Sequence[int] | None = None, topk: int = 16) -> None:
        super().__init__(n_tokens, budget, n_candidates, seed, init, allowed)
        self.topk = topk

    def fit(self, problem: SuffixProblem) -> GCGSearch:
        topk = check_scalar(self.topk, "topk", "GCGSearch", kind=int, lo=1)
        s, rng = self._setup(problem)
        self._start(problem, s)
        banned = torch.ones(problem.model.n_embeddings, dtype=torch.bool)
        banned[self.allowed_] = False
        k = self._k
        positions = list(range(len(problem.prefix_ids), len(problem.prefix_ids) + k))
        while self._spent(problem) + GRADIENT_COST + self._ncand <= self._budget:
            ids = problem.prefix_ids + self._best[0].tolist() + problem.post_ids
            g = _lm.token_gradients(problem.model, [ids], problem.target_ids, positions=positions)
            problem.queries += GRADIENT_COST
            scores = g.values[0].clone()  # [k, V]
            scores[:, banned] = -torch.inf
            top = scores.topk(min(topk, int((~banned).sum())), dim=-1).indices
            cands = _single_swaps(self._best[0], [top[p] for p in range(k)],
                                  self._ncand, rng)
            self._consider(problem, cands)
        self._finish(problem)
        return self


class DualBranchSearch(_BaseSearch):
    """JailBound's dual-branch embedding-space search (first-order, or zero-order with
    ``gradient="zero"``). See the module docstring.

    ``step``: step length per position, as a fraction of the mean token-embedding norm;
    ``radius``: trust-region radius per position around the current suffix's embeddings (same
    unit); ``topk``: nearest tokens per position and branch offered as swaps; ``beta``: weight
    of the refusal-direction term in the o− branch (needs a problem with a direction);
    ``kappa``: how far past the boundary the o+ branch aims (in margin units);
    ``branches``: ``"both"``, ``"value"`` (o− only) or ``"boundary"`` (o+ only).
    """

    def __init__(self, n_tokens: int = 6, budget: int = 1200, n_candidates: int = 32,
                 seed: int = 0, init: Literal["repeat", "random"] = "repeat",
                 allowed: Sequence[int] | None = None, *,
                 gradient: Literal["first", "zero"] = "first", step: float = 0.5,
                 radius: float = 1.5, topk: int = 8, beta: float = 0.0, kappa: float = 1.0,
                 smoothing: float = 0.1,
                 branches: Literal["both", "value", "boundary"] = "both") -> None:
        super().__init__(n_tokens, budget, n_candidates, seed, init, allowed)
        self.gradient = gradient
        self.step = step
        self.radius = radius
        self.topk = topk
        self.beta = beta
        self.kappa = kappa
        self.smoothing = smoothing
        self.branches = branches

    @property
    def name(self) -> str:  # type: ignore[override]
        return "fol" if self.gradient == "first" else "zol"

    def _objectives(self, problem: SuffixProblem):
        beta, kappa = self._beta, self._kappa

        def value(v: torch.Tensor, grad: bool) -> torch.Tensor:
            return problem.value_objective(v, beta, grad)

        def boundary(v: torch.Tensor, grad: bool) -> torch.Tensor:
            m = problem.margin(v, grad)
            return -torch.nn.functional.softplus(m + kappa)

        return value, boundary

    def _grad(self, fn, v: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, float]:
        """(ascent direction [k, D], objective value at v): autograd, or Gaussian smoothing
        with q = GRADIENT_COST − 1 forward differences (one estimate = one gradient's cost)."""
        if self.gradient == "first":
            x = v.detach().clone().requires_grad_(True)
            out = fn(x.unsqueeze(0), True)[0]
            (g,) = torch.autograd.grad(out, x)
            return g, float(out.detach())
        q = GRADIENT_COST - 1
        mu = self._smoothing * self._scale
        u = torch.randn((q, *v.shape), generator=gen)
        vals = fn(torch.cat([v.unsqueeze(0), v.unsqueeze(0) + mu * u]), False)
        g = ((vals[1:] - vals[0]).view(q, 1, 1) * u).mean(0) / mu
        return g, float(vals[0])

    def fit(self, problem: SuffixProblem) -> DualBranchSearch:
        where = "DualBranchSearch"
        check_choice(self.gradient, "gradient", ("first", "zero"), where)
        check_choice(self.branches, "branches", ("both", "value", "boundary"), where)
        topk = check_scalar(self.topk, "topk", where, kind=int, lo=1)
        self._beta = check_scalar(self.beta, "beta", where, lo=0)
        self._kappa = check_scalar(self.kappa, "kappa", where, lo=0)
        self._smoothing = check_scalar(self.smoothing, "smoothing", where, lo=0,
                                       closed="neither")
        step_f = check_scalar(self.step, "step", where, lo=0, closed="neither")
        radius_f = check_scalar(self.radius, "radius", where, lo=0, closed="neither")
        if self._beta and isinstance(problem, SuffixProblem) and problem.direction is None:
            raise InputError("DualBranchSearch's beta > 0 needs a SuffixProblem with a "
                             "refusal direction.")
        s, rng = self._setup(problem)
        gen = torch.Generator().manual_seed(self._seed)
        table = problem._matrix[self.allowed_]  # [C, D]
        table_unit = table / table.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        self._scale = float(table.norm(dim=-1).mean())
        step, radius = step_f * self._scale, radius_f * self._scale
        value_fn, boundary_fn = self._objectives(problem)
        fns = {"value": value_fn, "boundary": boundary_fn}
        active = ["value", "boundary"] if self.branches == "both" else [self.branches]
        self._start(problem, s)
        start = problem.embed(s)
        iterates = {b: start.clone() for b in active}
        boundary: dict[str, Any] = {"crossed": False, "distance": None, "queries": None,
                                    "initial_margin": None}
        per_step = GRADIENT_COST * len(active) + self._ncand
        while self._spent(problem) + per_step <= self._budget:
            anchor = problem.embed(self._best[0])
            options: dict[str, list[torch.Tensor]] = {}
            for b in active:
                g, val = self._grad(fns[b], iterates[b], gen)
                if b == "boundary":
                    m_now = (math.log(math.expm1(-val)) - self._kappa) if val < 0 else -math.inf
                    if boundary["initial_margin"] is None:
                        boundary["initial_margin"] = m_now
                    if not boundary["crossed"] and m_now < 0:
                        d = (iterates[b] - start).norm(dim=-1).square().mean().sqrt()
                        boundary.update(crossed=True, distance=float(d) / self._scale,
                                        queries=self._spent(problem))
                norm = g.norm(dim=-1, keepdim=True).clamp_min(1e-12)
                moved = iterates[b] + step * g / norm
                delta = moved - anchor
                dn = delta.norm(dim=-1, keepdim=True)
                iterates[b] = anchor + delta * (radius / dn).clamp(max=1.0)
                sims = (iterates[b] / iterates[b].norm(dim=-1, keepdim=True).clamp_min(1e-12)
                        ) @ table_unit.t()
                top = sims.topk(min(topk, table.shape[0]), dim=-1).indices
                options[b] = [self.allowed_[top[p]] for p in range(self._k)]
            share = [self._ncand // len(active)] * len(active)
            share[0] += self._ncand - sum(share)
            cands = torch.cat([_single_swaps(self._best[0], options[b], n, rng)
                               for b, n in zip(active, share, strict=True)])
            cands = torch.unique(cands, dim=0)
            before = self._best[0].clone()
            self._consider(problem, cands)
            # the o- iterate restarts at a new discrete best (it proposed it); the o+ iterate
            # keeps its position, re-centred by the trust region at the next step
            if not torch.equal(before, self._best[0]) and "value" in iterates:
                iterates["value"] = problem.embed(self._best[0])
        self._finish(problem, boundary)
        return self


class PEZSearch(_BaseSearch):
    """PEZ: projected-gradient search (one gradient = 3 queries per step, no candidates).

    ``step``: normalised step per position, as a fraction of the mean token-embedding norm."""

    name = "pez"

    def __init__(self, n_tokens: int = 6, budget: int = 1200, n_candidates: int = 32,
                 seed: int = 0, init: Literal["repeat", "random"] = "repeat",
                 allowed: Sequence[int] | None = None, step: float = 0.5) -> None:
        super().__init__(n_tokens, budget, n_candidates, seed, init, allowed)
        self.step = step

    def fit(self, problem: SuffixProblem) -> PEZSearch:
        step_f = check_scalar(self.step, "step", "PEZSearch", lo=0, closed="neither")
        s, _ = self._setup(problem)
        self._start(problem, s)
        table = problem._matrix[self.allowed_]
        table_unit = table / table.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        step = step_f * float(table.norm(dim=-1).mean())
        e = problem.embed(s).clone()
        while self._spent(problem) + GRADIENT_COST <= self._budget:
            sims = (e / e.norm(dim=-1, keepdim=True).clamp_min(1e-12)) @ table_unit.t()
            ids = self.allowed_[sims.argmax(-1)]
            v = problem.embed(ids).clone().requires_grad_(True)
            out = problem.value_objective(v.unsqueeze(0), grad=True)[0]
            (g,) = torch.autograd.grad(out, v)
            f = float(out.detach())
            if f > self._best[1]:
                self._best = (ids.clone(), f)
                self._history.append((ids.tolist(), f))
            self._curve.append((self._spent(problem), self._best[1]))
            e = e + step * g / g.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        self._finish(problem)
        return self


def materialise(problem: SuffixProblem, result: SearchResult, *, embedder: Any = None,
                min_similarity: float = 0.75) -> dict[str, Any]:
    """The best suffix of ``result.history`` whose text keeps the request's meaning.

    Similarity: cosine between the embedder's vectors (default MiniLM) of the plain request and
    of request ⊕ suffix. Returns ``suffix_ids``, ``text`` (request ⊕ suffix), ``score`` (its
    ``F``), ``similarity`` and ``constrained`` (True when a better suffix was dropped for
    falling below the threshold). No suffix qualifies: the plain request (empty suffix).
    """
    min_similarity = check_scalar(min_similarity, "min_similarity", "materialise", lo=-1, hi=1)
    if not isinstance(problem, SuffixProblem):
        raise InputError("The 'problem' parameter of materialise must be a SuffixProblem.")
    if not isinstance(result, SearchResult):
        raise InputError("The 'result' parameter of materialise must be a SearchResult.")
    if embedder is None:
        from trustlab.embed import MiniLMEmbedder

        embedder = MiniLMEmbedder()
    ranked = sorted(result.history, key=lambda h: -h[1])
    texts = [problem.text(ids) for ids, _ in ranked]
    vecs = embedder.encode([problem.request, *texts])
    sims = (vecs[1:] @ vecs[0]).astype(float)
    for i, (ids, f) in enumerate(ranked):
        if sims[i] >= min_similarity:
            return {"suffix_ids": list(ids), "text": texts[i], "score": float(f),
                    "similarity": float(sims[i]), "constrained": i > 0}
    return {"suffix_ids": [], "text": problem.request, "score": float("nan"),
            "similarity": 1.0, "constrained": True}
