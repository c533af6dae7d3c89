"""Causal test: inject ``alpha * r`` at the chosen layer and measure refusal and benign utility,
against matched-norm placebo vectors, unconditionally or gated by a harm-recognition probe.

* unconditional: every prompt gets the vector at every real token (prompt and reply);
* conditional (in the spirit of conditional activation steering, Lee et al. 2024): a prompt gets
  it only when its projection on the harm-recognition direction, read at the injection layer at
  the refusal direction's post-instruction position before any injection, exceeds a threshold
  ``tau`` set as the ``1 - q`` quantile of the same projection on benign calibration prompts
  (so about a share ``q`` of benign prompts are steered).

All (vector, prompt) pairs are decoded greedily in one batched loop (``greedy_rows``); placebos
are Gaussian directions orthogonal to ``r`` rescaled to ``||alpha * r||``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from trustlab.core.errors import InputError, NotFittedError
from trustlab.lm import LanguageModel, Prompt, get_activations
from trustlab.methods.rheology.sensitivity import row_additions

__all__ = ["HarmGate", "exact_match_settled", "greedy_rows", "refusal_settled"]


def greedy_rows(
    lm: LanguageModel,
    prompts: Sequence[Prompt],
    site: str,
    deltas: torch.Tensor,
    gates: torch.Tensor | None = None,
    *,
    max_new_tokens: int = 8,
    max_rows: int = 2048,
    settled: Callable[[int, str], bool] | None = None,
    cache: bool = True,
) -> list[list[str]]:
    """Greedy replies [K][N]: reply ``n`` under delta ``k`` added at ``site`` (when
    ``gates[k, n]``), at every real token of the prompt and of the reply so far.

    With ``cache`` (default) the prompts are prefilled once and each reply token is one
    incremental step over the KV cache; the delta is added to every new token too, so this is
    the same computation as rerunning the whole sequence (``cache=False``, which reruns the
    padded batch of the rows still decoding at every step) up to float rounding.

    ``settled(n, text)``: given prompt ``n`` and its reply so far, whether the verdict the
    caller will draw from the reply can no longer change (e.g. a refusal phrase has appeared,
    or the reply already departs from the exact answer); such a row stops decoding there and
    its returned text is that prefix.
    """
    k, n = int(deltas.shape[0]), len(prompts)
    if gates is None:
        gates = torch.ones((k, n), dtype=torch.bool)
    if tuple(gates.shape) != (k, n):
        raise InputError(f"gates must be [{k}, {n}]. Got {tuple(gates.shape)}.")
    rows = lm.tokenize(prompts)
    per_chunk = max(1, max_rows // max(1, n))
    if cache:  # bound the KV cache of one chunk to ~2^28 floats
        width = max(len(r) for r in rows) + max_new_tokens
        kv_per_row = 2 * lm.n_layers * width * lm.d_model
        per_chunk = max(1, min(per_chunk, (1 << 28) // max(1, kv_per_row * n)))
    decode = _decode_cached if cache else _decode_rerun
    out: list[list[str]] = []
    with torch.no_grad():
        for start in range(0, k, per_chunk):
            ks = list(range(start, min(k, start + per_chunk)))
            d = (deltas[ks].float().unsqueeze(1) * gates[ks].float().unsqueeze(-1)).reshape(
                -1, deltas.shape[1]
            )
            seqs = [list(r) for _ in ks for r in rows]
            new = decode(lm, site, seqs, d, n, max_new_tokens, settled)
            texts = [_decode(lm, t) for t in new]
            out += [texts[j * n : (j + 1) * n] for j in range(len(ks))]
    return out


def _step(
    lm: LanguageModel,
    idx: list[int],
    toks: list[int],
    new: list[list[int]],
    n: int,
    settled: Callable[[int, str], bool] | None,
) -> list[int]:
    """Record one greedy token per row of ``idx``; return the rows that keep decoding."""
    eos = set(lm.eos_token_ids)
    still = []
    for i, tok in zip(idx, toks, strict=True):
        if tok in eos:
            continue
        new[i].append(tok)
        if settled is not None and settled(i % n, _decode(lm, new[i])):
            continue
        still.append(i)
    return still


def _decode_rerun(lm, site, seqs, d, n, max_new_tokens, settled) -> list[list[int]]:
    new: list[list[int]] = [[] for _ in seqs]
    active = list(range(len(seqs)))  # rows still decoding (finished rows leave the batch)
    for _ in range(max_new_tokens):
        batch = lm.pad([seqs[i] for i in active], "left")
        with row_additions(lm, site, d[active]):
            nxt = lm.forward(batch, last_only=True)[:, -1, :].argmax(-1).tolist()
        for i, tok in zip(active, nxt, strict=True):
            seqs[i].append(int(tok))
        active = _step(lm, active, [int(t) for t in nxt], new, n, settled)
        if not active:
            break
    return new


def _decode_cached(lm, site, seqs, d, n, max_new_tokens, settled) -> list[list[int]]:
    new: list[list[int]] = [[] for _ in seqs]
    batch = lm.pad(seqs, "left")
    mask, pos = batch.attention_mask, batch.position_ids
    kwargs = {"logits_to_keep": 1} if lm._accepts_logits_to_keep else {}
    # transformers >= 5 names the KV cache `cache` (earlier: `past_key_values`)
    key = "cache" if "cache" in inspect.signature(lm.model.forward).parameters else None
    key = key or "past_key_values"
    alive = torch.ones(len(seqs), dtype=torch.bool)
    with row_additions(lm, site, d):
        out = lm.model(
            input_ids=batch.input_ids,
            attention_mask=mask,
            position_ids=pos,
            use_cache=True,
            **kwargs,
        )
        for step in range(max_new_tokens):
            nxt = out.logits[:, -1, :].argmax(-1)
            idx = alive.nonzero().flatten().tolist()
            still = _step(lm, idx, nxt[idx].tolist(), new, n, settled)
            alive[:] = False
            alive[still] = True
            if not still or step == max_new_tokens - 1:
                break
            # finished rows keep feeding tokens (one column each); their replies are final
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
            pos = pos[:, -1:] + 1
            out = lm.model(
                input_ids=nxt.unsqueeze(1),
                attention_mask=mask,
                position_ids=pos,
                **{key: getattr(out, key)},
                use_cache=True,
                **kwargs,
            )
    return new


def _decode(lm: LanguageModel, ids: list[int]) -> str:
    return lm.tokenizer.decode(ids, skip_special_tokens=True).strip()


def _squash(text: str) -> str:
    return "".join(text.split())


def exact_match_settled(answers: Sequence[str]) -> Callable[[int, str], bool]:
    """``settled`` for exact match: the reply so far, whitespace removed, is no longer a prefix
    of the answer (whitespace removed), so it cannot end up equal to it. A reply holding an
    undecodable partial character (U+FFFD) is never settled."""
    squashed = [_squash(a) for a in answers]

    def fn(n: int, text: str) -> bool:
        return "\ufffd" not in text and not squashed[n].startswith(_squash(text))

    return fn


def refusal_settled(is_refusal: Callable[[str], bool]) -> Callable[[int, str], bool]:
    """``settled`` for phrase-based refusal judging: a refusal phrase has already appeared."""
    return lambda _n, text: is_refusal(text)


@dataclass
class HarmGate:
    """The conditional-injection gate: project on the harm-recognition direction, threshold.

    Parameters: ``benign_rate`` (``q``: share of benign calibration prompts let through).
    ``fit(lm, candidates, harmful_calibration, benign_calibration)`` takes harm-recognition
    candidates [L, P, D] (differences in means at ``resid_pre``), sets for each (layer,
    position) the threshold ``tau`` = the ``1 - q`` quantile of the benign projections, and
    keeps the one that lets through the largest share of harmful calibration prompts
    (``recall_``); it sets ``site_``, ``position_``, ``direction_`` (unit), ``threshold_``.
    ``gate(lm, prompts)`` -> bool [N].
    """

    benign_rate: float = 0.05
    batch_size: int = 32

    def _acts(self, lm: LanguageModel, prompts: Sequence[Prompt], sites: list[str]) -> torch.Tensor:
        return get_activations(
            lm, list(prompts), sites, "post_instruction", batch_size=self.batch_size
        ).double()

    def fit(
        self,
        lm: LanguageModel,
        candidates: torch.Tensor,
        harmful_calibration: Sequence[Prompt],
        benign_calibration: Sequence[Prompt],
    ) -> HarmGate:
        if not 0.0 < self.benign_rate < 1.0:
            raise InputError(f"benign_rate must be in (0, 1). Got {self.benign_rate}.")
        cand = torch.as_tensor(candidates, dtype=torch.float64)
        sites = lm.sites("resid_pre")
        if cand.dim() != 3 or cand.shape[0] != len(sites):
            raise InputError(f"candidates must be [{len(sites)}, P, D]. Got {tuple(cand.shape)}.")
        units = cand / cand.norm(dim=-1, keepdim=True).clamp_min(1e-30)
        ben = torch.einsum("nlpd,lpd->nlp", self._acts(lm, benign_calibration, sites), units)
        har = torch.einsum("nlpd,lpd->nlp", self._acts(lm, harmful_calibration, sites), units)
        tau = torch.quantile(ben, 1.0 - self.benign_rate, dim=0, interpolation="higher")
        recall = (har > tau).double().mean(0)
        recall[cand.norm(dim=-1) == 0] = -1.0
        best = int(recall.argmax())
        layer, pos = divmod(best, cand.shape[1])
        self.layer_, self.position_ = layer, pos
        self.site_ = sites[layer]
        self.direction_ = units[layer, pos].float()
        self.threshold_ = float(tau[layer, pos])
        self.recall_ = float(recall[layer, pos])
        self.recall_by_site_ = recall.float()
        return self

    def scores(self, lm: LanguageModel, prompts: Sequence[Prompt]) -> torch.Tensor:
        if not hasattr(self, "direction_"):
            raise NotFittedError("Call HarmGate.fit(...) before scoring prompts.")
        acts = self._acts(lm, prompts, [self.site_])[:, 0, self.position_]
        return (acts @ self.direction_.double()).float()

    def gate(self, lm: LanguageModel, prompts: Sequence[Prompt]) -> torch.Tensor:
        return self.scores(lm, prompts) > self.threshold_
