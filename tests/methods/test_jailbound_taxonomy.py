"""JailBound's taxonomy: schema checks, category mappings against the real lists, coverage."""

from __future__ import annotations

import pytest
import yaml

from trustlab.core.errors import DataError, InputError, NotFittedError
from trustlab.datasets.behaviours import load_harmbench, load_strongreject
from trustlab.methods.jailbound import (
    SUFFIX_SLOT,
    Cell,
    TaxonomyItem,
    TemplateMetaAttackGenerator,
    behaviour_placeholder,
    coverage_report,
    default_coverage,
    default_taxonomy_path,
    load_taxonomy,
)


@pytest.fixture(scope="module")
def tax():
    return load_taxonomy()


def _raw():
    return yaml.safe_load(default_taxonomy_path().read_text())


def test_every_category_of_every_source_is_mapped(tax):
    from trustlab.organisms.alignment_bank import UNSAFE_ITEMS
    from trustlab.organisms.corpora import HARMFUL_BEHAVIOURS

    present = {
        "harmbench": {b.category for b in load_harmbench("all")},
        "strongreject": {b.category for b in load_strongreject()},
        "organism_corpus": {c for c, _ in HARMFUL_BEHAVIOURS},
        "organism_alignment": {c for c, *_ in UNSAFE_ITEMS},
    }
    for source, cats in present.items():
        assert cats == set(tax.source_categories[source]), source
        for c in cats:
            assert tax.risk_of(source, c) in tax.risk_ids


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d["risk_categories"].append(dict(d["risk_categories"][0])), "duplicate ids"),
    (lambda d: d["source_categories"]["harmbench"].update(illegal="nope"), "unknown risk"),
    (lambda d: d["attack_types"][1].update(templates=["no slot here"]), "{request}"),
    (lambda d: d["application_domains"].pop(0), "'general' domain"),
    (lambda d: d["risk_categories"][0].update(colour="red"), "colour"),
    (lambda d: d.update(version=0), "version"),
])
def test_schema_errors_are_one_line(mutate, needle):
    d = _raw()
    mutate(d)
    with pytest.raises(DataError) as e:
        load_taxonomy(d)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_bad_files_are_one_line(tmp_path):
    bad = tmp_path / "t.yaml"
    bad.write_text("risk_categories: [\n")
    with pytest.raises(DataError, match="not valid YAML at line"):
        load_taxonomy(bad)
    bad.write_text("- a\n- b\n")
    with pytest.raises(DataError, match="mapping at the top level"):
        load_taxonomy(bad)
    with pytest.raises(DataError, match="does not exist"):
        load_taxonomy(tmp_path / "missing.yaml")
    with pytest.raises(InputError, match="'path'"):
        load_taxonomy(3)


def test_unmapped_category_is_named(tax):
    with pytest.raises(DataError, match="'astrology' of source 'harmbench'"):
        tax.risk_of("harmbench", "astrology")


def test_coverage_counts_planted_items_in_their_cells(tax):
    assert tax.domains_of("At the hospital, the bank") == ("healthcare", "finance")
    assert tax.domains_of("nothing specific") == ("general",)
    items = [TaxonomyItem("x", "fraud", ("healthcare", "finance"), "direct"),
             TaxonomyItem("x", "fraud", ("general",), "direct"),
             Cell("violence", "education", "role_play")]
    r = coverage_report(tax, {"b": items})
    assert r.covered("b") == {"fraud/healthcare/direct", "fraud/finance/direct",
                              "fraud/general/direct", "violence/education/role_play"}
    assert sum(r.counts["b"].values()) == 4
    with pytest.raises(DataError, match="not a cell"):
        coverage_report(tax, {"b": [Cell("fraud", "mars", "direct")]})


def test_default_coverage_jailbound_every_cell_lists_measured(tax):
    r = default_coverage(tax)
    s = {row["benchmark"]: row for row in r.summary()}
    assert s["jailbound"]["cells_covered"] == r.n_cells == len(tax.cells())
    # plain lists hold unwrapped requests only: at most one attack type, and strictly fewer cells
    for b in ("harmbench", "strongreject", "harmbench+strongreject"):
        assert s[b]["attacks_covered"] == 1 and s[b]["cells_covered"] < r.n_cells
    assert s["harmbench"]["instances"] >= 400 and s["strongreject"]["instances"] >= 281
    assert s["harmbench+strongreject"]["cells_covered"] == len(
        r.covered("harmbench") | r.covered("strongreject"))
    by_risk = {row["risk"]: row for row in r.risk_table()}
    assert by_risk["sexual_content"]["harmbench"] == 0 and by_risk["sexual_content"]["strongreject"] > 0
    assert by_risk["copyright"]["harmbench"] > 0 and by_risk["copyright"]["strongreject"] == 0


def test_generator_places_behaviour_in_domain_and_templates(tax):
    g = TemplateMetaAttackGenerator(tax)
    with pytest.raises(NotFittedError):
        g.generate(Cell("fraud", "finance", "role_play"), "x")
    g.fit()
    b = behaviour_placeholder("fraud")
    out = g.generate(("fraud", "finance", "prefix_injection"), b)
    assert len(out) == len(tax.attack("prefix_injection").templates)
    for m in out:
        assert b in m.prompt and tax.domain("finance").context in m.prompt
    assert [m.prompt for m in g.generate(Cell("fraud", "general", "direct"), b)] == [b]
    assert g.generate(Cell("fraud", "general", "optimised_suffix"), b)[0].prompt.endswith(SUFFIX_SLOT)
    with pytest.raises(InputError, match="Unknown domain"):
        g.generate(Cell("fraud", "mars", "direct"), b)
    with pytest.raises(InputError, match="behaviour"):
        g.generate(Cell("fraud", "general", "direct"), "  ")
    assert len(TemplateMetaAttackGenerator(tax, templates_per_cell=1).fit().generate_all()) == len(tax.cells())
