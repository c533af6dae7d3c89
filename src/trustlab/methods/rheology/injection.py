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

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from trustlab.core.errors import InputError, NotFittedError
from trustlab.lm import LanguageModel, Prompt, get_activations
from trustlab.methods.rheology.sensitivity import row_additions

__all__ = ["HarmGate", "greedy_rows"]


def greedy_rows(
    lm: LanguageModel,
    prompts: Sequence[Prompt],
    site: str,
    deltas: torch.Tensor,
    gates: torch.Tensor | None = None,
    *,
    max_new_tokens: int = 8,
    max_rows: int = 2048,
) -> list[list[str]]:
    """Greedy replies [K][N]: reply ``n`` under delta ``k`` added at ``site`` (when
    ``gates[k, n]``), at every real token of the prompt and of the reply so far.

    No KV cache: each step reruns the padded batch, so the hooks see exactly the same
    positions as in a plain forward (replies are short here).
    """
    k, n = int(deltas.shape[0]), len(prompts)
    if gates is None:
        gates = torch.ones((k, n), dtype=torch.bool)
    if tuple(gates.shape) != (k, n):
        raise InputError(f"gates must be [{k}, {n}]. Got {tuple(gates.shape)}.")
    rows = lm.tokenize(prompts)
    eos = set(lm.eos_token_ids)
    per_chunk = max(1, max_rows // max(1, n))
    out: list[list[str]] = []
    with torch.no_grad():
        for start in range(0, k, per_chunk):
            ks = list(range(start, min(k, start + per_chunk)))
            d = (deltas[ks].float().unsqueeze(1) * gates[ks].float().unsqueeze(-1)).reshape(
                -1, deltas.shape[1]
            )
            seqs = [list(r) for _ in ks for r in rows]
            new: list[list[int]] = [[] for _ in seqs]
            done = [False] * len(seqs)
            for _ in range(max_new_tokens):
                batch = lm.pad(seqs, "left")
                with row_additions(lm, site, d):
                    nxt = lm.forward(batch, last_only=True)[:, -1, :].argmax(-1).tolist()
                for i, tok in enumerate(nxt):
                    if done[i]:
                        continue
                    seqs[i].append(int(tok))
                    if int(tok) in eos:
                        done[i] = True
                    else:
                        new[i].append(int(tok))
                if all(done):
                    break
            texts = [lm.tokenizer.decode(t, skip_special_tokens=True).strip() for t in new]
            out += [texts[j * n : (j + 1) * n] for j in range(len(ks))]
    return out


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
