"""The fine-tuned meta-attack generator end to end on chat-xs (slow: a LoRA fine-tune and the
per-cell judging; 24 CPU-s with chat-xs built, collection included).

build_generator fine-tunes chat-xs on the taxonomy's meta-attack examples (its closed vocabulary
gets the ``[placeholder]`` slot), caches it (a second call is a cache hit), the experiment
judges template and generator meta-attacks per cell with intervals and paired differences,
draws a heat-map per generator, and keeps requests out of the report."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow


def test_finetuned_generator_and_per_cell_meta_attacks_on_chat_xs(chat_xs, organism_home,
                                                                   tmp_path):
    from trustlab.core import run_experiment
    from trustlab.datasets.prompt_sets import organism_prompt_set
    from trustlab.methods.jailbound import (
        ModelMetaAttackGenerator,
        build_generator,
        load_taxonomy,
    )

    path = build_generator("organism:chat-xs", home=organism_home)
    card = json.loads((path / "card.json").read_text())
    assert card["slot"] == "[placeholder]" and card["data"]["n"] == 1200
    assert not card["training"]["diverged"]
    assert card["training"]["final_loss"] < 2.0
    assert build_generator("organism:chat-xs", home=organism_home) == path  # cached
    gen = ModelMetaAttackGenerator(f"hf:{path}", slot=card["slot"], n_samples=4).fit()
    made = gen.generate(("fraud", "finance", "role_play"), "BEHAVIOUR")
    assert len(made) == 4 and all(m.source == "model" for m in made)
    assert all("BEHAVIOUR" in m.prompt for m in made)
    assert any(m.slot_found for m in made)  # it learned to write the slot

    over = {"meta_attacks": True, "generator": "finetune:organism:chat-xs",
            "meta_attack_domains": ["general", "finance"], "methods": ["fol"],
            "n_behaviours": 12}
    run = run_experiment("jailbound", quick=True, overrides=over, seed=0,
                         out_dir=tmp_path / "run")
    text = run.report_path.read_text()
    data = json.loads(text)
    cells = data["tables"]["meta_attack_cells"]
    cols = cells["columns"]
    rows = [dict(zip(cols, r, strict=True)) for r in cells["rows"]]
    templated = [a.id for a in load_taxonomy().attack_types if a.templates]
    risks = {r["risk"] for r in rows}
    assert len(rows) == 2 * len(templated) * 2 * len(risks)
    assert all(r["n"] == 0 or r["lower"] <= r["rate"] <= r["upper"] for r in rows)
    assert sum(r["n"] for r in rows if r["generator"] == "template") == 12 * len(templated) * 2
    assert "meta_attack_vs_template" in data["tables"]
    assert {"meta_attack_cells_template", "meta_attack_cells_model"} <= set(data["figures"])
    assert data["metrics"]["generator_build_cpu_s"]["value"] >= 0
    ps = organism_prompt_set("harmful")
    assert not any(ps.instruction(i) in text for i in range(len(ps)))  # hashes, not requests
