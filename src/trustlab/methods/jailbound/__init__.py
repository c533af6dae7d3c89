"""JailBound: taxonomy-driven, embedding-space jailbreak evaluation.

A hierarchical threat taxonomy (risk category x application domain x attack type, shipped as
data with HarmBench's, StrongREJECT's and the organisms' categories mapped in), a template
meta-attack generator and a model one over any ChatModel (fine-tuned on the templates' meta-attack
examples), coverage reports against the plain public lists, and the first-order
dual-branch embedding-space suffix search with zero-order, random-search and GCG baselines at an
equal query budget.
"""

from trustlab.methods.jailbound.coverage import default_coverage
from trustlab.methods.jailbound.generator import (
    REQUEST_SLOT,
    ModelMetaAttackGenerator,
    build_generator,
    finetune_generator,
    generator_instruction,
    meta_attack_examples,
)
from trustlab.methods.jailbound.meta_attack import (
    SUFFIX_SLOT,
    MetaAttack,
    TemplateMetaAttackGenerator,
    behaviour_placeholder,
)
from trustlab.methods.jailbound.search import (
    GRADIENT_COST,
    DualBranchSearch,
    GCGSearch,
    PEZSearch,
    RandomSearch,
    SearchResult,
    SuffixProblem,
    allowed_suffix_tokens,
    materialise,
)
from trustlab.methods.jailbound.study import (
    METHODS,
    OPENER,
    TARGET_SCHEMES,
    AttackRecord,
    attack_transforms,
    behaviour_phrase,
    make_search,
    meta_attack_prompts,
    request_targets,
    search_attacks,
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
    "GRADIENT_COST",
    "METHODS",
    "OPENER",
    "REQUEST_SLOT",
    "SUFFIX_SLOT",
    "TARGET_SCHEMES",
    "AttackRecord",
    "AttackType",
    "Cell",
    "CoverageReport",
    "Domain",
    "DualBranchSearch",
    "GCGSearch",
    "MetaAttack",
    "ModelMetaAttackGenerator",
    "PEZSearch",
    "RandomSearch",
    "RiskCategory",
    "SearchResult",
    "SuffixProblem",
    "Taxonomy",
    "TaxonomyItem",
    "TemplateMetaAttackGenerator",
    "allowed_suffix_tokens",
    "attack_transforms",
    "behaviour_phrase",
    "behaviour_placeholder",
    "build_generator",
    "coverage_report",
    "default_coverage",
    "default_taxonomy_path",
    "finetune_generator",
    "generator_instruction",
    "list_items",
    "load_taxonomy",
    "make_search",
    "materialise",
    "meta_attack_examples",
    "meta_attack_prompts",
    "request_targets",
    "search_attacks",
]
