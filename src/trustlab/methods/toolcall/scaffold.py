"""The scaffold claim: does the scaffold make calling the default, with analysis verbs
suppressing it?

The same held-out requests are run with and without the system scaffold, each with its
execution verb, its analysis verb and a *neutral* word in the verb's place (the organisms'
``[UNK]`` token, which their training put in place of 3% of prompt words; a word such as
``handle`` for ``hf:`` models). Two readings per condition:

* **behaviour** — the call rate of each variant (Clopper–Pearson intervals): if the scaffold
  makes calling the default, the neutral request calls with the scaffold and much less
  without it;
* **representation** — where the neutral request sits on μΔ between the analysis mean (0) and
  the execution mean (1), measured with the μΔ fitted in that condition: near 1 means the
  analysis verb moves the state away from a calling default and the execution verb adds
  little; near 0 the reverse.

Also the cosine between μΔ fitted with and without the scaffold, per layer: whether the
scaffold changes the direction or only the default.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar
from trustlab.lm import binomial_rate
from trustlab.methods.toolcall.decision import ToolDecision
from trustlab.methods.toolcall.direction import ToolDirection
from trustlab.methods.toolcall.pairs import check_pairs

__all__ = ["ScaffoldAnalysis", "scaffold_analysis"]


@dataclass(frozen=True)
class ScaffoldAnalysis:
    """Rows per (scaffold, variant) with call rates and μΔ positions; per-layer cosines.

    ``default_position``: the neutral request's position on μΔ with the scaffold (0 = the
    analysis mean, 1 = the execution mean) at the chosen layer and position.
    """

    rows: list[dict[str, Any]]
    cosines: list[dict[str, Any]]
    layer: int
    position: int
    neutral_verb: str

    def value(self, scaffold: bool, variant: str, key: str) -> Any:
        for r in self.rows:
            if r["scaffold"] == scaffold and r["variant"] == variant:
                return r[key]
        raise KeyError((scaffold, variant, key))

    @property
    def default_position(self) -> float:
        return float(self.value(True, "neutral", "mu_position"))


def scaffold_analysis(
    decision: ToolDecision,
    direction: ToolDirection,
    fit_pairs: Sequence[Any],
    eval_pairs: Sequence[Any],
    *,
    layer: int,
    position: int = -1,
    neutral_verb: str = "[UNK]",
    progress: Callable[..., Any] | None = None,
) -> ScaffoldAnalysis:
    """Run the scaffold analysis (see the module doc).

    ``direction`` is μΔ fitted with the scaffold; ``fit_pairs`` (analysis pairs) fit the
    no-scaffold μΔ; ``eval_pairs`` (held-out pairs) give the call rates and positions.
    """
    if not isinstance(decision, ToolDecision):
        raise InputError("The 'decision' parameter of scaffold_analysis must be a ToolDecision.")
    if not hasattr(direction, "mu_delta_"):
        raise InputError("The 'direction' parameter of scaffold_analysis must be fitted.")
    for name, pairs in (("fit_pairs", fit_pairs), ("eval_pairs", eval_pairs)):
        if isinstance(pairs, str) or not isinstance(pairs, Sequence) or not pairs:
            raise InputError(f"The '{name}' parameter of scaffold_analysis must be non-empty.")
    fit_pairs = check_pairs(fit_pairs, "fit_pairs", "scaffold_analysis")
    eval_pairs = check_pairs(eval_pairs, "eval_pairs", "scaffold_analysis")
    n_layers, n_pos = direction.mu_delta_.shape[:2]
    layer = check_scalar(layer, "layer", "scaffold_analysis", kind=int, lo=0, hi=n_layers - 1)
    position = check_scalar(position, "position", "scaffold_analysis", kind=int, lo=-n_pos, hi=-1)
    if not isinstance(neutral_verb, str) or not neutral_verb.strip():
        raise InputError(
            "The 'neutral_verb' parameter of scaffold_analysis must be a non-empty string. "
            f"Got {neutral_verb!r}."
        )
    if not all(p.has_scaffold for p in [*fit_pairs, *eval_pairs]):
        raise InputError("scaffold_analysis needs pairs with a system scaffold to take away.")
    bare = ToolDirection(
        n_positions=direction.n_positions, batch_size=direction.batch_size, chunk=direction.chunk
    ).fit(decision.model, [p.without_scaffold() for p in fit_pairs], progress=progress)
    j = len(direction.positions_) + position
    rows = []
    for scaffold, fitted in ((True, direction), (False, bare)):
        pairs = list(eval_pairs) if scaffold else [p.without_scaffold() for p in eval_pairs]
        means = fitted.mean_projections(fitted.unit(layer, position), position)
        ex_mean, an_mean = float(means["execution"][layer]), float(means["analysis"][layer])
        for variant in ("execution", "analysis", "neutral"):
            prompts = [
                p.variant(neutral_verb) if variant == "neutral" else getattr(p, variant)
                for p in pairs
            ]
            calls = decision.calls(prompts)
            logit = decision.logit_diff(prompts)
            proj = fitted.projections(decision.model, prompts, progress=progress)[:, layer, j]
            rate = binomial_rate(calls.tolist())
            gap = ex_mean - an_mean
            rows.append(
                {
                    "scaffold": scaffold,
                    "variant": variant,
                    "n": rate.n,
                    "call_rate": rate.rate,
                    "call_low": rate.lower,
                    "call_high": rate.upper,
                    "logit": float(logit.mean()),
                    "projection": float(proj.mean()),
                    "mu_position": float((proj.mean() - an_mean) / gap) if gap else float("nan"),
                }
            )
    cosines = []
    for i, site in enumerate(direction.layers_):
        a = direction.mu_delta_[i, j]
        b = bare.mu_delta_[i, j]
        na, nb = float(a.norm()), float(b.norm())
        cos = float(a @ b) / (na * nb) if na > 0 and nb > 0 else float("nan")
        cosines.append(
            {
                "layer": i,
                "site": site,
                "position": position,
                "norm_with_scaffold": na,
                "norm_without_scaffold": nb,
                "cosine": cos,
            }
        )
    return ScaffoldAnalysis(rows, cosines, int(layer), int(position), neutral_verb)
