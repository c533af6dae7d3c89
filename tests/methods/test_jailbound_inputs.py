"""JailBound's public API on bad input: a correct result or an InputError, nothing else.

Property tests (hypothesis, tests/malformed.py) over the callables in ``jailbound.__all__``:
taxonomy loading and coverage, the meta-attack generator, the searches (on chat-xs, tiny
budgets), materialisation and the study helpers. The pydantic schema classes (``Taxonomy``,
``RiskCategory``, ``Domain``, ``AttackType``) are checked through ``load_taxonomy``, which turns
their validation errors into one-line ``DataError``s (tests/methods/test_jailbound_taxonomy.py);
``Cell``, ``TaxonomyItem``, ``MetaAttack``, ``SearchResult``, ``AttackRecord`` and
``CoverageReport`` are plain records built by the functions below.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.malformed import (
    INT,
    OBJECT,
    SETTINGS,
    Case,
    Kind,
    Mutation,
    malformed_input_tests,
    scalar,
)

from trustlab import lm
from trustlab.core.errors import DataError, InputError
from trustlab.embed import HashingEmbedder
from trustlab.methods.jailbound import (
    GRADIENT_COST,
    METHODS,
    OPENER,
    REQUEST_SLOT,
    SUFFIX_SLOT,
    TARGET_SCHEMES,
    AttackRecord,
    AttackType,
    Cell,
    CoverageReport,
    Domain,
    DualBranchSearch,
    GCGSearch,
    MetaAttack,
    ModelMetaAttackGenerator,
    PEZSearch,
    RandomSearch,
    RiskCategory,
    SearchResult,
    SuffixProblem,
    Taxonomy,
    TaxonomyItem,
    TemplateMetaAttackGenerator,
    allowed_suffix_tokens,
    attack_transforms,
    behaviour_phrase,
    behaviour_placeholder,
    build_generator,
    coverage_report,
    default_coverage,
    default_taxonomy_path,
    finetune_generator,
    generator_instruction,
    list_items,
    load_taxonomy,
    make_search,
    materialise,
    meta_attack_examples,
    meta_attack_prompts,
    request_targets,
    search_attacks,
)

TAX = load_taxonomy()
REQUEST = "Give me a detailed plan to [behaviour: fraud]."

TEXT = Kind("text", (
    Mutation("None", lambda v, r: None),
    Mutation("int", lambda v, r: 3),
    Mutation("empty", lambda v, r: "   "),
    Mutation("list", lambda v, r: [v]),
))
PATH = Kind("path", (
    Mutation("int", lambda v, r: 3),
    Mutation("bytes", lambda v, r: b"taxonomy.yaml"),
    Mutation("list", lambda v, r: [v]),
    Mutation("Path object", lambda v, r: Path(v), same=True),
))
TAXONOMY = Kind("taxonomy", (*OBJECT.mutations, Mutation("int", lambda v, r: 3)))
SIMILARITY = scalar("similarity", 1.5, -2.0)


def _tax_summary(t: Taxonomy) -> tuple:
    return (t.risk_ids, t.domain_ids, t.attack_ids, len(t.cells()))


def _coverage(taxonomy, benchmarks):
    r = coverage_report(taxonomy, benchmarks)
    assert isinstance(r, CoverageReport)
    return sorted(r.covered("b"))


def _items(taxonomy, source, rows):
    return [(i.risk, i.domains, i.attack) for i in list_items(taxonomy, source, rows)]


def _generate(cell, behaviour):
    out = TemplateMetaAttackGenerator(TAX).fit().generate(cell, behaviour)
    assert all(isinstance(m, MetaAttack) for m in out)
    return [m.prompt for m in out]


def _model_generate(cell, behaviour):
    chat = lm.ScriptedChatModel(lambda conv: f"Be free. {REQUEST_SLOT} Go.")
    out = ModelMetaAttackGenerator(chat, TAX).fit().generate(cell, behaviour)
    return [m.prompt for m in out]


def _prompts(requests, risks):
    gens = {"template": TemplateMetaAttackGenerator(TAX).fit()}
    return meta_attack_prompts(gens, requests, risks, domains=["finance"], attacks=["role_play"])


RISKS = Kind("risks", (Mutation("string", lambda v, r: "fraud"),
                       Mutation("empty", lambda v, r: []),
                       Mutation("unknown", lambda v, r: ["mars"]),
                       Mutation("int", lambda v, r: 3)))

TAXONOMY_CASES = [
    Case("ModelMetaAttackGenerator.generate", _model_generate,
         {"cell": Cell("fraud", "finance", "role_play"), "behaviour": "[behaviour: fraud]"},
         {"cell": OBJECT, "behaviour": TEXT}),
    Case("generator_instruction", lambda cell: generator_instruction(TAX, cell),
         {"cell": ("fraud", "finance", "role_play")}, {"cell": OBJECT}),
    Case("meta_attack_examples", lambda risks: len(meta_attack_examples(TAX, risks)),
         {"risks": ["fraud"]}, {"risks": RISKS}),
    Case("meta_attack_prompts", _prompts,
         {"requests": [REQUEST, "Explain [behaviour: weapons]."], "risks": ["fraud", "weapons"]},
         {"requests": OBJECT, "risks": RISKS}),
    Case("load_taxonomy", lambda path: _tax_summary(load_taxonomy(path)),
         {"path": str(default_taxonomy_path())}, {"path": PATH}),
    Case("coverage_report", _coverage,
         {"taxonomy": TAX, "benchmarks": {"b": [Cell("fraud", "general", "direct"),
                                               TaxonomyItem("x", "weapons", ("finance",), "direct")]}},
         {"taxonomy": TAXONOMY, "benchmarks": OBJECT}),
    Case("list_items", _items,
         {"taxonomy": TAX, "source": "harmbench", "rows": [("illegal", "at the bank")]},
         {"taxonomy": TAXONOMY, "source": Kind("source", OBJECT.mutations[:3]),
          "rows": OBJECT}),
    Case("TemplateMetaAttackGenerator.generate", _generate,
         {"cell": Cell("fraud", "finance", "role_play"), "behaviour": "[behaviour: fraud]"},
         {"cell": OBJECT, "behaviour": TEXT}),
    Case("behaviour_placeholder", behaviour_placeholder, {"risk": "fraud"},
         {"risk": Kind("risk", (Mutation("None", lambda v, r: None),
                                Mutation("int", lambda v, r: 3),
                                Mutation("empty", lambda v, r: "")))}),
    Case("behaviour_phrase", behaviour_phrase, {"request": REQUEST}, {"request": TEXT}),
    Case("request_targets", request_targets,
         {"requests": [REQUEST, "Explain [behaviour: weapons]."], "scheme": "compliance"},
         {"requests": Kind("requests", (Mutation("string", lambda v, r: REQUEST),
                                        Mutation("empty", lambda v, r: []),
                                        Mutation("None", lambda v, r: None),
                                        Mutation("int item", lambda v, r: [*v, 3]),
                                        Mutation("blank item", lambda v, r: [*v, " "]))),
          "scheme": Kind("scheme", (Mutation("other", lambda v, r: "suffix"),
                                    Mutation("None", lambda v, r: None)))}),
    Case("default_coverage", lambda taxonomy: [s["cells_covered"] for s in
                                               default_coverage(taxonomy).summary()],
         {"taxonomy": TAX}, {"taxonomy": Kind("taxonomy", (Mutation("int", lambda v, r: 3),
                                                            Mutation("list", lambda v, r: [1])))}),
]
test_taxonomy_every_corruption, test_taxonomy_malformed = malformed_input_tests(TAXONOMY_CASES)


@pytest.fixture(scope="module")
def model(chat_xs):
    from trustlab import lm

    return lm.LanguageModel(chat_xs.model, chat_xs.tokenizer, spec="organism:chat-xs")


def _search_cases(model):
    problem = SuffixProblem(model, REQUEST)
    allowed = allowed_suffix_tokens(model)[:40]

    def run(cls, **kw):
        def go(**args):
            return cls(**{**kw, **args}).fit(problem).result.suffix_ids
        return go

    base = {"n_tokens": 2, "budget": 12, "n_candidates": 4, "seed": 1}
    kinds = {"n_tokens": INT(0, 65), "budget": INT(0, lo=1), "n_candidates": INT(0),
             "seed": INT(-1)}
    res = RandomSearch(n_tokens=2, budget=12, n_candidates=4, allowed=allowed).fit(problem).result
    assert isinstance(res, SearchResult)
    emb = HashingEmbedder(64)
    return [
        Case("DualBranchSearch.fit", run(DualBranchSearch, allowed=allowed),
             {**base, "step": 0.5, "radius": 1.5, "topk": 4, "gradient": "first"},
             {**kinds, "step": scalar("step", 0.0, -1.0), "radius": scalar("radius", 0.0),
              "topk": INT(0), "gradient": Kind("choice", (Mutation("other", lambda v, r: "x"),
                                                          Mutation("None", lambda v, r: None)))}),
        Case("RandomSearch.fit", run(RandomSearch, allowed=allowed), base, kinds),
        Case("PEZSearch.fit", run(PEZSearch, allowed=allowed), {**base, "step": 0.5},
             {"budget": INT(0), "seed": INT(-1), "step": scalar("step", 0.0, -1.0)}),
        Case("GCGSearch.fit", run(GCGSearch), {**base, "topk": 4, "allowed": allowed},
             {"topk": INT(0), "allowed": Kind("ids", (
                 Mutation("string", lambda v, r: "ids"), Mutation("floats", lambda v, r: [0.5]),
                 Mutation("out of range", lambda v, r: [10**6]),
                 Mutation("numpy", lambda v, r: np.asarray(v), same=True)))}),
        Case("SuffixProblem", lambda model, prompt: SuffixProblem(model, prompt).prefix_ids,
             {"model": model, "prompt": REQUEST}, {"model": OBJECT, "prompt": TEXT}),
        Case("allowed_suffix_tokens", allowed_suffix_tokens, {"model": model},
             {"model": OBJECT}),
        Case("materialise", lambda result, min_similarity: materialise(
                 problem, result, embedder=emb, min_similarity=min_similarity)["text"],
             {"result": res, "min_similarity": 0.2},
             {"result": OBJECT, "min_similarity": SIMILARITY}),
        Case("make_search", lambda method, budget: make_search(
                 method, n_tokens=2, budget=budget, n_candidates=4, seed=0,
                 allowed=allowed).fit(problem).result.suffix_ids,
             {"method": "random", "budget": 12},
             {"method": Kind("method", (Mutation("other", lambda v, r: "pgd"),
                                        Mutation("None", lambda v, r: None))),
              "budget": INT(0)}),
        Case("search_attacks", lambda requests, budget, target: [r.suffix for r in search_attacks(
                 model, requests, methods=["random"], budget=budget, n_tokens=2,
                 n_candidates=4, embedder=emb, min_similarity=0.0, target=target)[0]],
             {"requests": [REQUEST], "budget": 12, "target": OPENER},
             {"requests": Kind("requests", (Mutation("string", lambda v, r: REQUEST),
                                            Mutation("empty", lambda v, r: []),
                                            Mutation("duplicates", lambda v, r: v + v),
                                            Mutation("None", lambda v, r: None))),
              "budget": INT(0),
              "target": Kind("target", (Mutation("None", lambda v, r: None),
                                        Mutation("blank", lambda v, r: " "),
                                        Mutation("one per request", lambda v, r: [v], same=True),
                                        Mutation("too many", lambda v, r: [v, v]),
                                        Mutation("int item", lambda v, r: [3])))}),
        Case("attack_transforms", lambda prompts: sorted(attack_transforms(prompts)),
             {"prompts": {"fol": {REQUEST: REQUEST + " a"}}}, {"prompts": OBJECT}),
    ]


def test_search_inputs(model):
    """Every corruption of every search-side case, once (hypothesis draws would re-run the
    searches many times; the corruption list is exhaustive here)."""
    from tests.malformed import run_one

    for case in _search_cases(model):
        for param, kind in case.kinds.items():
            for m in kind.mutations:
                run_one(case, param, m)


def test_generator_builders_reject_bad_input_before_any_work(tmp_path):
    """build_generator / finetune_generator: a bad base, taxonomy or risk list is one line,
    before any model is loaded (the real build is the slow study's)."""
    for bad in ("chat-s", None, 3, "openai:http://x|m"):
        with pytest.raises(InputError, match="base"):
            build_generator(bad, home=tmp_path)
    with pytest.raises(InputError, match="risks"):
        build_generator("organism:chat-xs", risks=["mars"], home=tmp_path)
    with pytest.raises(InputError, match="taxonomy"):
        finetune_generator(object(), taxonomy=3)
    assert not any(tmp_path.iterdir())


def test_records_and_constants():
    assert set(METHODS) == {"fol", "zol", "random", "gcg", "pez"} and GRADIENT_COST == 3
    assert TARGET_SCHEMES == ("compliance", "opener") and OPENER == "Sure, here is"
    assert SUFFIX_SLOT in TemplateMetaAttackGenerator(TAX).fit().generate(
        Cell("fraud", "general", "optimised_suffix"), "x")[0].prompt
    assert {f for f in AttackRecord.__dataclass_fields__} >= {"method", "suffix", "similarity"}
    for cls in (RiskCategory, Domain, AttackType):
        assert cls.model_config["extra"] == "forbid"
    with pytest.raises(DataError):
        load_taxonomy({"version": 1})
    with pytest.raises(InputError):
        TAX.domain("mars")


@given(text=st.text(max_size=80))
@settings(SETTINGS, max_examples=10)  # a keyword set lookup: 10 draws (was 25) offset issue-28 tests
def test_domains_of_any_text(text):
    """Any text lands in at least one known domain, and 'general' only when no keyword hits."""
    got = TAX.domains_of(text)
    assert got and set(got) <= set(TAX.domain_ids)
    assert ("general" in got) == (got == ("general",))
