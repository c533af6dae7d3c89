"""Derived models: spec parsing, recipe files, cache keys, and a rebuild to the same weights."""

from __future__ import annotations

import json
import shutil

import pytest

from trustlab.core.errors import DataError, InputError
from trustlab.finetune import (
    DataRecipe,
    FinetuneConfig,
    Recipe,
    build_derived,
    get_recipe,
    named_recipes,
    parse_derived_spec,
    read_derived_card,
    weights_sha256,
)

SMALL = Recipe(
    name="small-explicit-10",
    data=DataRecipe(n=128, harmful_fraction=0.1, seed=3),
    finetune=FinetuneConfig(steps=6, batch_size=16, lr=1e-3),
    evaluate=False,
)


def test_spec_parsing():
    assert parse_derived_spec("attack-explicit-10@organism:chat-s") == (
        "attack-explicit-10",
        "organism:chat-s",
    )
    assert parse_derived_spec("/r/x.yaml@hf:/m@v2") == ("/r/x.yaml", "hf:/m@v2")
    for bad in ("attack-explicit-10", "@organism:chat-s", "x@chat-s", 3):
        with pytest.raises(InputError, match="spec"):
            parse_derived_spec(bad)


def test_named_recipes_cover_the_attack_grid():
    names = set(named_recipes())
    for kind in ("explicit", "implicit"):
        for pct in (0, 1, 2, 5, 10, 20):
            recipe = named_recipes()[f"attack-{kind}-{pct}"]
            assert recipe.data.harmful_fraction == pct / 100 and recipe.data.harmful_kind == kind
    assert "benign" in names
    assert named_recipes()["attack-implicit-10"].data.pattern == "dual_use"
    for pattern in ("dual_use", "shallow_opener", "identity_shift", "affirmative_prefix"):
        recipe = named_recipes()[f"attack-implicit-{pattern}-5"]
        assert recipe.data.pattern == pattern and recipe.data.harmful_fraction == 0.05
    assert named_recipes(pretrained=True)["attack-explicit-10"].finetune.lora is not None


def test_recipe_files_and_their_errors(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "data: {n: 200, harmful_fraction: 0.05}\nfinetune: {steps: 7, lr: 0.002}\n", "utf-8"
    )
    recipe = get_recipe(path)
    assert recipe.name == "mine" and recipe.finetune.steps == 7 and recipe.data.n == 200
    (tmp_path / "bad.yaml").write_text("finetune: {lr: -1}\n", "utf-8")
    with pytest.raises(DataError, match=r"finetune\.lr"):
        get_recipe(tmp_path / "bad.yaml")
    with pytest.raises(InputError, match="recipe"):
        get_recipe("no-such-recipe")
    with pytest.raises(InputError, match="does not exist"):
        get_recipe(tmp_path / "missing.yaml")


def test_data_recipes_are_deterministic_and_exact():
    a, b = SMALL.data.build(), SMALL.data.build()
    assert a.sha256 == b.sha256 and a.n_harmful == 13 and len(a.examples) == 128
    assert DataRecipe(n=128, harmful_fraction=0.1, seed=4).build().sha256 != a.sha256


def test_a_deleted_derived_model_rebuilds_to_the_same_weights(chat_xs, organism_home):
    path = build_derived(SMALL, "organism:chat-xs", home=organism_home)
    card = read_derived_card(path)
    assert card["data"]["n_harmful"] == 13 and card["base"]["spec"] == "organism:chat-xs"
    assert card["base"]["weights_sha256"] == weights_sha256(chat_xs.model)
    assert card["hardware"]["cpu_capability"] and card["training"]["steps"] == 6
    assert build_derived(SMALL, "organism:chat-xs", home=organism_home) == path  # cached
    shutil.rmtree(path)
    again = build_derived(SMALL, "organism:chat-xs", home=organism_home)
    assert again == path and read_derived_card(again)["weights_sha256"] == card["weights_sha256"]
    other = SMALL.model_copy(update={"finetune": SMALL.finetune.model_copy(update={"lr": 2e-3})})
    assert build_derived(other, "organism:chat-xs", home=organism_home) != path


def test_lm_load_resolves_a_recipe_file_on_an_organism(chat_xs, organism_home, tmp_path):
    import trustlab.lm as lm
    from trustlab.organisms import generate_responses

    path = tmp_path / "small.json"
    path.write_text(json.dumps(SMALL.model_dump(mode="json")), "utf-8")
    model = lm.load(f"finetuned:{path}@organism:chat-xs")
    assert model.spec == f"finetuned:{path}@organism:chat-xs"
    direct = read_derived_card(build_derived(SMALL, "organism:chat-xs", home=organism_home))
    assert weights_sha256(model.model) == direct["weights_sha256"]
    assert generate_responses(model.model, model.tokenizer, [], max_new_tokens=4) == []


def test_a_seeded_recipe_redraws_data_and_order_but_keeps_the_judged_split():
    from trustlab.finetune import get_recipe, seeded_recipe

    base = get_recipe("attack-implicit-5")
    assert seeded_recipe(base, 0) == base == get_recipe("attack-implicit-5-seed0")
    two = get_recipe("attack-implicit-5-seed2")
    assert two == seeded_recipe(base, 2) and two.name == "attack-implicit-5-seed2"
    assert (two.data.seed, two.finetune.seed) == (2, 2)
    assert two.data.behaviour_seed == base.data.behaviour_seed  # same unseen behaviours
    assert two.data.model_copy(update={"seed": 0}) == base.data
    assert two.finetune.model_copy(update={"seed": 0}).key() == base.finetune.key()
    small = SMALL.model_copy(
        update={"data": SMALL.data.model_copy(update={"harmful_kind": "implicit"})}
    )
    assert seeded_recipe(small, 1).data.build().sha256 != small.data.build().sha256
    for bad in (-1, 1.5, True):
        with pytest.raises(InputError, match="'seed'"):
            seeded_recipe(base, bad)
    with pytest.raises(InputError, match="Unknown fine-tuning recipe"):
        get_recipe("attack-implicit-7-seed1")


def test_seed_spread_summarises_each_point_over_seeds_and_bad_seeds_are_refused():
    from trustlab.finetune.attack import attack_curve, seed_spread

    def row(kind, fraction, seed, asr):
        return {"kind": kind, "fraction": fraction, "seed": seed, "asr": {"rate": asr}}

    rows = [row("explicit", 0.2, 0, 1.0), row("explicit", 0.2, 1, 0.9), row("explicit", 0.2, 2, 0.8),
            row("implicit", 0.2, 0, 0.5)]  # fmt: skip
    first, second = seed_spread(rows)
    assert first["seeds"] == [0, 1, 2] and first["values"] == [1.0, 0.9, 0.8]
    assert first["mean"] == pytest.approx(0.9) and first["sd"] == pytest.approx(0.1)
    assert (first["min"], first["max"]) == (0.8, 1.0)
    assert second["values"] == [0.5] and second["sd"] == 0.0
    for seeds in ((), (-1,), (0, 1.5)):
        with pytest.raises(InputError, match="'seeds'"):
            attack_curve("organism:chat-xs", seeds=seeds)


def test_a_lora_derived_model_rebuilds_to_the_same_weights_from_an_empty_home(
    tiny_model, tiny_tokenizer, tmp_path
):
    """The pretrained-base path (an ``hf:`` base, LoRA merged into the weights): delete the
    whole cache, not only the derived folder, and a rebuild gives the same key and the same
    weights, bit for bit."""
    from trustlab.finetune import LoraSettings

    base = tmp_path / "base"
    tiny_model.save_pretrained(base)
    tiny_tokenizer.save_pretrained(base)
    recipe = Recipe(
        name="lora-explicit-10",
        data=DataRecipe(n=64, harmful_fraction=0.1, seed=1),
        finetune=FinetuneConfig(steps=4, batch_size=8, lr=3e-3, lora=LoraSettings(r=4, alpha=8)),
    )
    first = build_derived(recipe, f"hf:{base}", home=tmp_path / "home")
    card = read_derived_card(first)
    assert card["metrics"] == {} and card["training"]["steps"] == 4  # hf: bases are not judged
    shutil.rmtree(tmp_path / "home")
    again = build_derived(recipe, f"hf:{base}", home=tmp_path / "home")
    assert again == first and read_derived_card(again)["weights_sha256"] == card["weights_sha256"]
    assert card["weights_sha256"] != card["base"]["weights_sha256"]  # the adapters changed it
