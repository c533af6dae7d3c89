"""Meta-attack generation: a taxonomy cell + a behaviour -> attack prompts.

:class:`TemplateMetaAttackGenerator` is the embedded default: the request is placed in the
cell's application domain (the domain's context sentence before it) and wrapped by each of the
attack type's templates from the taxonomy. Behaviours are whatever the caller passes: a real
request from a behaviour list, or :func:`behaviour_placeholder` (``[behaviour: <risk>]``), so the
generator itself ships no harmful text. An attack type without templates (``optimised_suffix``)
yields the request followed by :data:`SUFFIX_SLOT`, the slot an embedding-space search fills.

The fine-tuned generator of the paper (a model fine-tuned on meta-attack examples) is
:class:`trustlab.methods.jailbound.generator.ModelMetaAttackGenerator` over any ``ChatModel``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from trustlab.core.errors import InputError, NotFittedError
from trustlab.methods.jailbound.taxonomy import Cell, Taxonomy, load_taxonomy

__all__ = [
    "SUFFIX_SLOT",
    "MetaAttack",
    "TemplateMetaAttackGenerator",
    "behaviour_placeholder",
]

#: Where an optimised suffix goes in an ``optimised_suffix`` instance.
SUFFIX_SLOT = "[optimised suffix]"


def behaviour_placeholder(risk: str) -> str:
    """A content-free stand-in for a behaviour of risk category ``risk``."""
    if not isinstance(risk, str) or not risk:
        raise InputError(f"The 'risk' parameter of behaviour_placeholder must be a non-empty "
                         f"string. Got {risk!r}.")
    return f"[behaviour: {risk}]"


@dataclass(frozen=True)
class MetaAttack:
    """One generated attack prompt: its cell, which template of the attack type made it (for a
    model generator: which sample), the behaviour it carries and the prompt text; ``source`` is
    ``"template"`` or ``"model"``, ``wrapper`` the model's wrapper text (None for templates) and
    ``slot_found`` whether the model put the request slot in it."""

    cell: Cell
    template: int
    behaviour: str
    prompt: str
    wrapper: str | None = None
    slot_found: bool = True
    source: str = "template"


class TemplateMetaAttackGenerator:
    """Template meta-attack generator over a taxonomy (default: the shipped one).

    ``fit()`` loads and checks the taxonomy; ``generate(cell, behaviour)`` returns one
    :class:`MetaAttack` per template of the cell's attack type (``templates_per_cell`` keeps
    the first k); ``generate_all(behaviours)`` covers every cell of the taxonomy, with
    ``behaviours`` a mapping risk -> behaviour (default: placeholders).
    """

    def __init__(self, taxonomy: Taxonomy | str | None = None,
                 templates_per_cell: int | None = None) -> None:
        self.taxonomy = taxonomy
        self.templates_per_cell = templates_per_cell

    def fit(self) -> TemplateMetaAttackGenerator:
        t = self.taxonomy
        self.taxonomy_ = t if isinstance(t, Taxonomy) else load_taxonomy(t)
        k = self.templates_per_cell
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise InputError(f"The 'templates_per_cell' parameter of TemplateMetaAttackGenerator "
                             f"must be a positive integer or None. Got {k!r}.")
        return self

    def _tax(self) -> Taxonomy:
        if not hasattr(self, "taxonomy_"):
            raise NotFittedError("TemplateMetaAttackGenerator is not fitted: call fit() first.")
        return self.taxonomy_

    def generate(self, cell: Cell | tuple[str, str, str], behaviour: str) -> list[MetaAttack]:
        tax = self._tax()
        if isinstance(cell, tuple) and not isinstance(cell, Cell):
            if len(cell) != 3:
                raise InputError("The 'cell' parameter of generate is a Cell or a (risk, "
                                 f"domain, attack) tuple. Got a tuple of {len(cell)}.")
            cell = Cell(*cell)
        if not isinstance(cell, Cell):
            raise InputError(f"The 'cell' parameter of generate is a Cell. Got "
                             f"{type(cell).__name__}.")
        if cell.risk not in tax.risk_ids:
            raise InputError(f"Unknown risk {cell.risk!r}; the taxonomy has: "
                             f"{', '.join(tax.risk_ids)}.")
        if not isinstance(behaviour, str) or not behaviour.strip():
            raise InputError(f"The 'behaviour' parameter of generate must be a non-empty "
                             f"string. Got {behaviour!r}.")
        domain, attack = tax.domain(cell.domain), tax.attack(cell.attack)
        request = f"{domain.context} {behaviour.strip()}".strip()
        templates: Sequence[str] = attack.templates or (f"{{request}} {SUFFIX_SLOT}",)
        if self.templates_per_cell is not None:
            templates = templates[: self.templates_per_cell]
        return [MetaAttack(cell, i, behaviour, t.replace("{request}", request))
                for i, t in enumerate(templates)]  # fmt: skip

    def generate_all(self, behaviours: dict[str, str] | None = None,
                     cells: Iterable[Cell] | None = None) -> list[MetaAttack]:
        tax = self._tax()
        behaviours = dict(behaviours or {})
        out: list[MetaAttack] = []
        for cell in tax.cells() if cells is None else cells:
            b = behaviours.get(cell.risk) or behaviour_placeholder(cell.risk)
            out.extend(self.generate(cell, b))
        return out
