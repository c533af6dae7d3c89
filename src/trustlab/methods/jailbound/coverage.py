"""The taxonomy coverage study: the taxonomy-driven benchmark against the plain public lists.

The taxonomy-driven benchmark is the template meta-attack generator over every cell (one
instance per attack template; ``optimised_suffix`` cells hold the slot the embedding-space
search fills), so it reaches every cell by construction: the measured part of the comparison
is what the public lists reach once their categories are mapped in (see
:mod:`trustlab.methods.jailbound.taxonomy` for how a list item is placed).
"""

from __future__ import annotations

from pathlib import Path

from trustlab.datasets.behaviours import load_harmbench, load_strongreject
from trustlab.methods.jailbound.meta_attack import TemplateMetaAttackGenerator
from trustlab.methods.jailbound.taxonomy import (
    CoverageReport,
    Taxonomy,
    coverage_report,
    list_items,
    load_taxonomy,
)

__all__ = ["default_coverage"]


def default_coverage(taxonomy: Taxonomy | str | Path | None = None, *,
                     harmbench_root: str | Path | None = None,
                     strongreject_root: str | Path | None = None) -> CoverageReport:
    """Coverage of ``jailbound`` (the generator over every cell), ``harmbench`` (its 400 text
    behaviours), ``strongreject`` (bundled MIT rows, or the full file under ``root``) and
    ``harmbench+strongreject`` (both lists together)."""
    tax = taxonomy if isinstance(taxonomy, Taxonomy) else load_taxonomy(taxonomy)
    gen = TemplateMetaAttackGenerator(tax).fit()
    hb = list_items(tax, "harmbench",
                    ((b.category, b.text) for b in load_harmbench("all", root=harmbench_root)))
    sr = list_items(tax, "strongreject",
                    ((b.category, b.text) for b in load_strongreject(strongreject_root)))
    return coverage_report(tax, {
        "jailbound": [m.cell for m in gen.generate_all()],
        "harmbench": hb,
        "strongreject": sr,
        "harmbench+strongreject": hb + sr,
    })
