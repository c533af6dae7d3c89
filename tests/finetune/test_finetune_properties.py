"""trustlab.finetune's public API on malformed input (issue 38): InputError/DataError in one
line naming the problem, never a raw exception -- and properties that fail if the substrate is
wrong: gradient rows follow their examples under any permutation and have the layout's width,
the mean gradient is the mean row, mixes hold round(fraction * n) harmful examples, a seeded
recipe changes only the seeds, rates are Clopper-Pearson intervals, one optimiser step per
StepInfo. Uses the seconds-small Llama of conftest.py (no organism build)."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pydantic
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.core.errors import DataError, InputError
from trustlab.finetune import (
    DataRecipe,
    EncodedExample,
    FinetuneResult,
    Mix,
    RateCI,
    Recipe,
    StepInfo,
    attack_metrics,
    build_derived,
    derived_dir,
    encode_data,
    finetune,
    get_recipe,
    gradient_layout,
    hardware_fingerprint,
    load_derived,
    mean_gradient,
    named_recipes,
    parse_derived_spec,
    per_example_gradients,
    rate,
    read_derived_card,
    seed_spread,
    seeded_recipe,
)
from trustlab.stats import clopper_pearson

from ..malformed import INT, OBJECT, Case, Kind, Mutation, malformed_input_tests

FEW = settings(max_examples=5, deadline=None, derandomize=True)
SOME = settings(max_examples=40, deadline=None, derandomize=True)
KEY = "ab" * 32
SPEC = Kind("spec", (
    Mutation("no @", lambda v, r: v.replace("@", "")), Mutation("None", lambda v, r: None),
    Mutation("no recipe", lambda v, r: "@" + v.split("@")[1]),
    Mutation("base without scheme", lambda v, r: v.split("@")[0] + "@chat-s"),
    Mutation("list", lambda v, r: [v]),
))
RECIPE = Kind("recipe", (
    Mutation("unknown name", lambda v, r: "attack-explicit-7"),
    Mutation("missing file", lambda v, r: "/nonexistent/recipe.yaml"),
    Mutation("None", lambda v, r: None), Mutation("number", lambda v, r: 3),
    Mutation("Recipe object", lambda v, r: named_recipes()[v], same=True),
    Mutation("seed 0", lambda v, r: f"{v}-seed0", same=True),
))


def _recipe_dump(recipe):
    return get_recipe(recipe).model_dump()


CASES = [
    Case("parse_derived_spec", parse_derived_spec, {"spec": "attack-explicit-10@organism:chat-s"},
         {"spec": SPEC}),
    Case("get_recipe", _recipe_dump, {"recipe": "attack-implicit-5"}, {"recipe": RECIPE}),
    Case("seeded_recipe", lambda recipe, seed: seeded_recipe(recipe, seed).model_dump(),
         {"recipe": named_recipes()["benign"], "seed": 3},
         {"recipe": OBJECT, "seed": INT(-1).without("integer float")}),
    Case("derived_dir", derived_dir, {"key": KEY, "home": "/tmp/trustlab-s38"},
         {"key": Kind("key", (Mutation("empty", lambda v, r: ""),
                              Mutation("path", lambda v, r: "../../etc"),
                              Mutation("number", lambda v, r: 3), Mutation("None", lambda v, r: None),
                              Mutation("short", lambda v, r: v[:8]))),
          "home": Kind("home", (Mutation("number", lambda v, r: 3),
                                Mutation("list", lambda v, r: [v])))}),
    Case("read_derived_card", read_derived_card, {"path": None}, {"path": Kind("path", (
        Mutation("number", lambda v, r: 3), Mutation("list", lambda v, r: ["/tmp"])))}),
]
CASES[-1]._reference["value"] = None  # no valid card without a build: every corruption must fail

test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


# ---------------------------------------------------------------------------- recipes and data


@SOME
@given(st.sampled_from(sorted(named_recipes())), st.integers(0, 50))
def test_a_seeded_recipe_changes_only_its_seeds(name, seed):
    base = get_recipe(name)
    seeded = seeded_recipe(base, seed)
    assert get_recipe(f"{name}-seed{seed}") == seeded if seed else seeded == base
    assert seeded.data.seed == seed and seeded.finetune.seed == seed
    assert seeded.data.behaviour_seed == base.data.behaviour_seed  # same held-out sets
    strip = {"name": True, "data": {"seed"}, "finetune": {"seed"}}
    assert seeded.model_dump(exclude=strip) == base.model_dump(exclude=strip)
    assert parse_derived_spec(f"{seeded.name}@organism:chat-s") == (seeded.name,
                                                                     "organism:chat-s")


@FEW
@given(st.integers(4, 24), st.sampled_from([0.0, 0.1, 0.25, 0.5]), st.integers(0, 99),
       st.sampled_from(["explicit", "implicit"]))
def test_mixes_hold_round_fraction_n_harmful_examples_reproducibly(n, fraction, seed, kind):
    recipe = DataRecipe(n=n, harmful_fraction=fraction, seed=seed, harmful_kind=kind)
    m = recipe.build()
    assert isinstance(m, Mix) and len(m.examples) == len(m.harmful) == n
    assert m.n_harmful == round(fraction * n) and m.sha256 == recipe.build().sha256
    assert m.sha256 != DataRecipe(n=n, harmful_fraction=fraction, seed=seed + 1,
                                  harmful_kind=kind).build().sha256


@pytest.mark.parametrize("bad", [{"n": 0}, {"harmful_fraction": 1.5}, {"harmful_fraction": math.nan},
                                 {"harmful_kind": "other"}, {"seed": -1}, {"unknown": 1}])
def test_data_recipes_reject_bad_fields(bad):
    with pytest.raises(pydantic.ValidationError):
        DataRecipe(**bad)
    with pytest.raises(pydantic.ValidationError):
        Recipe(name="", data=DataRecipe())


def test_derived_builds_check_recipe_and_base_before_loading_anything(tmp_path):
    for call in (build_derived, load_derived):
        with pytest.raises(InputError, match="recipe"):
            call("attack-explicit-7", "organism:chat-xs")
        for base in (None, 3, "chat-xs"):
            with pytest.raises(InputError, match="base"):
                call("benign", base)
    with pytest.raises(DataError, match="card"):
        read_derived_card(tmp_path / "missing")
    (tmp_path / "card.json").write_text("[1]")
    with pytest.raises(DataError, match="JSON object"):
        read_derived_card(tmp_path)
    card = {"name": "benign@organism:chat-xs", "metrics": {}}
    (tmp_path / "card.json").write_text(json.dumps(card))
    assert read_derived_card(tmp_path) == card
    assert derived_dir(KEY, tmp_path) == tmp_path / "derived" / KEY[:20]


# ---------------------------------------------------------------------------- rates


flags = st.lists(st.booleans(), min_size=1, max_size=40)


@SOME
@given(flags, st.sampled_from([0.01, 0.05, 0.2]))
def test_rate_is_the_share_with_its_clopper_pearson_interval(values, alpha):
    r = rate(values, alpha)
    lo, hi = clopper_pearson(sum(values), len(values), alpha)
    assert isinstance(r, RateCI) and (r.k, r.n) == (sum(values), len(values))
    assert r.rate == sum(values) / len(values) and (r.lower, r.upper) == (lo, hi)
    assert r.lower <= r.rate <= r.upper and r.to_dict()["k"] == r.k
    assert rate(np.array(values), alpha) == r  # a numpy bool array is the same flags


@pytest.mark.parametrize("bad", [[0.5, 0.0], [math.nan, 0], [True, None], [2, 1], ["1"], "ab",
                                 b"\x01", None, 3])
def test_rate_rejects_what_is_not_a_list_of_flags(bad):
    # 0.5, NaN, 2 and the characters of a string used to count by their truthiness
    with pytest.raises(InputError):
        rate(bad)


def test_rate_takes_0_1_integers_and_numpy_flags_as_the_same_flags():
    ref = rate([True, False, True])
    assert rate([1, 0, 1]) == ref == rate(np.array([1, 0, 1])) == rate(np.array([True, False, True]))


@SOME
@given(st.lists(st.tuples(st.sampled_from(["explicit", "implicit"]), st.sampled_from([0.0, 0.1]),
                          st.integers(0, 3), st.floats(0, 1)), min_size=1, max_size=12))
def test_seed_spread_summarises_each_kind_and_fraction_over_seeds(rows):
    table = [{"kind": k, "fraction": f, "seed": s, "asr": {"rate": v}} for k, f, s, v in rows]
    out = seed_spread(table)
    last = {}
    for k, f, s, v in rows:  # a repeated (kind, fraction, seed) keeps its last row
        last.setdefault((k, f), {})[s] = v
    assert {(o["kind"], o["fraction"]) for o in out} == set(last)
    for o in out:
        values = [last[(o["kind"], o["fraction"])][s] for s in sorted(last[(o["kind"],
                                                                             o["fraction"])])]
        assert o["values"] == values and o["seeds"] == sorted(last[(o["kind"], o["fraction"])])
        assert o["mean"] == pytest.approx(statistics.fmean(values))
        assert (o["min"], o["max"]) == (min(values), max(values))
        assert o["sd"] == (pytest.approx(statistics.stdev(values)) if len(values) > 1 else 0.0)


def test_attack_metrics_checks_its_counts_before_generating():
    with pytest.raises(InputError):
        attack_metrics(None, None, n=0)


# ---------------------------------------------------------------------------- gradients, loop

MLP = ["model.layers.0.mlp.*"]


@settings(FEW, suppress_health_check=[HealthCheck.function_scoped_fixture])  # weights unchanged
@given(st.permutations(range(4)), st.sampled_from([MLP, ["model.layers.1.*"], ["lm_head.*"]]))
def test_gradient_rows_follow_their_examples(tiny_model, tiny_tokenizer, tiny_data, order, params):
    data = tiny_data[:4]
    layout = gradient_layout(tiny_model, params)
    width = sum(math.prod(shape) for _, shape in layout)
    full = per_example_gradients(tiny_model, data, tokenizer=tiny_tokenizer, params=params)
    assert full.shape == (4, width) and torch.isfinite(full).all()
    permuted = per_example_gradients(tiny_model, [data[i] for i in order],
                                     tokenizer=tiny_tokenizer, params=params, batch_size=3)
    torch.testing.assert_close(permuted, full[list(order)], rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(mean_gradient(tiny_model, data, tokenizer=tiny_tokenizer,
                                             params=params), full.mean(0), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(("call", "match"), [
    (lambda m, t, d: gradient_layout(None), "model"),
    (lambda m, t, d: gradient_layout(m, "model.*"), "params"),
    (lambda m, t, d: gradient_layout(m, ["nothing.*"]), "params"),
    (lambda m, t, d: per_example_gradients(m, d, tokenizer=t, batch_size=0), "batch_size"),
    (lambda m, t, d: per_example_gradients(m, [], tokenizer=t), "data"),
    (lambda m, t, d: per_example_gradients(m, d, tokenizer=t, reference=torch.zeros(3)),
     "reference"),
    (lambda m, t, d: mean_gradient(m, [], tokenizer=t), "data"),
    (lambda m, t, d: encode_data(None, d), "tokenizer"),
    (lambda m, t, d: encode_data(t, d, max_length=-1), "max_length"),
    (lambda m, t, d: encode_data(t, "text"), "data"),
])
def test_gradient_and_encoding_entry_points_name_a_bad_argument(tiny_model, tiny_tokenizer,
                                                                tiny_data, call, match):
    with pytest.raises(InputError, match=match):
        call(tiny_model, tiny_tokenizer, tiny_data[:2])


def test_encoded_examples_and_one_step_info_per_optimiser_step(tiny_model, tiny_tokenizer,
                                                                tiny_data):
    encoded = encode_data(tiny_tokenizer, tiny_data[:5])
    assert all(isinstance(e, EncodedExample) and 0 < e.n_prompt < len(e.ids) for e in encoded)
    assert all(e.ids[-1] == tiny_tokenizer.eos_token_id for e in encoded)
    short = encode_data(tiny_tokenizer, tiny_data[:5], max_length=min(len(e.ids) for e in encoded))
    assert all(len(s.ids) <= len(e.ids) for s, e in zip(short, encoded, strict=False))
    seen: list[StepInfo] = []
    result = finetune(tiny_model, tiny_data[:16], {"steps": 3, "batch_size": 8, "lr": 1e-2},
                      tokenizer=tiny_tokenizer, callbacks=[seen.append])
    assert isinstance(result, FinetuneResult) and result.steps_run == 3 == len(seen)
    assert [s.step for s in seen] == [1, 2, 3] and all(s.total_steps == 3 for s in seen)
    assert [s.loss for s in seen] == result.losses and all(math.isfinite(s.loss) for s in seen)
    stats = result.stats()
    json.dumps(stats) and json.dumps(hardware_fingerprint())
    assert stats["steps"] == 3 and stats["final_loss"] == pytest.approx(result.losses[-1])
    fp = hardware_fingerprint()
    assert fp == hardware_fingerprint() and fp["torch"] == torch.__version__
