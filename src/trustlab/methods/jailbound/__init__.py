"""JailBound: taxonomy-driven, embedding-space jailbreak evaluation.

A hierarchical threat taxonomy (risk category x application domain x attack type, shipped as
data with HarmBench's, StrongREJECT's and the organisms' categories mapped in), a template
meta-attack generator, and coverage reports against the plain public lists.
"""

from trustlab.methods.jailbound.coverage import default_coverage
from trustlab.methods.jailbound.meta_attack import (
    SUFFIX_SLOT,
    MetaAttack,
    TemplateMetaAttackGenerator,
    behaviour_placeholder,
)
from trustlab.methods.jailbound.taxonomy import (
    AttackType,
    Cell,
    CoverageReport,
    Domain,
    RiskCategory,
    Taxonomy,
    TaxonomyItem,
    coverage_report,
    default_taxonomy_path,
    list_items,
    load_taxonomy,
)

__all__ = [
    "SUFFIX_SLOT",
    "AttackType",
    "Cell",
    "CoverageReport",
    "Domain",
    "MetaAttack",
    "RiskCategory",
    "Taxonomy",
    "TaxonomyItem",
    "TemplateMetaAttackGenerator",
    "behaviour_placeholder",
    "coverage_report",
    "default_coverage",
    "default_taxonomy_path",
    "list_items",
    "load_taxonomy",
]
