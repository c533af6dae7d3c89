"""toolcall's public API on malformed input: InputError with one line, or the canonical result.

Every name in ``trustlab.methods.toolcall.__all__`` is covered below (issue 38's contract):
the callables as :class:`Case` s on tests/malformed.py, the result types through the calls
that make them. Cases that need a model run on tool-xs (built once per session); the model,
decision and fitted direction are filled in lazily so that collection builds nothing.
"""

from __future__ import annotations

import json
import math

import hypothesis  # noqa: F401 - the property tests are built by malformed_input_tests
import numpy as np
import pytest
import torch

from trustlab.core.errors import DataError, InputError, NotFittedError
from trustlab.lm import AddVector, Positions
from trustlab.methods.toolcall import (
    ANALYSIS_VERBS,
    EXECUTION_VERBS,
    NATURAL_SCAFFOLD,
    CandidateChoice,
    CausalTest,
    ComponentAttribution,
    ComponentPatching,
    ContrastivePair,
    DecisionFormat,
    FlipCheck,
    ModelStudy,
    PairSet,
    ScaffoldAnalysis,
    SeparationSweep,
    StudySettings,
    ToolDecision,
    ToolDirection,
    ablation,
    addition,
    causal_test,
    check_flips,
    choose_candidate,
    clamp,
    component_attribution,
    induced_call_quality,
    layer_names,
    natural_pairs,
    organism_pairs,
    pairs_from_prompt,
    patch_components,
    random_directions,
    read_pairs,
    scaffold_analysis,
    study_model,
    transmission,
)
from trustlab.organisms import SPECS

from ..malformed import (
    ARRAY,
    CHOICE,
    INT,
    OBJECT,
    POSITIVE,
    Case,
    Kind,
    Mutation,
    malformed_input_tests,
    run_one,
    scalar,
)

D = SPECS["tool-xs"].shape.d_model
N_SITES = SPECS["tool-xs"].shape.n_layers + 1
PAIRS = organism_pairs(8, 4, seed=0)
FEW = list(PAIRS.heldout[:2])
VEC = np.random.default_rng(0).normal(size=D)
STATE: dict[str, object] = {}


class Lazy:
    """A stand-in for an object built by the fixture (the model, its decision, μΔ)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


MODEL, DECISION, DIRECTION = Lazy("model"), Lazy("decision"), Lazy("direction")


def _r(value):
    return STATE[value.name] if isinstance(value, Lazy) else value


@pytest.fixture(autouse=True, scope="module")
def _tool_xs(tool_xs):
    from trustlab import lm

    torch.set_num_threads(1)
    model = lm.load("organism:tool-xs")
    STATE["model"] = model
    STATE["decision"] = ToolDecision(model, batch_size=16)
    STATE["direction"] = ToolDirection(n_positions=2).fit(model, list(PAIRS.analysis))
    yield
    STATE.clear()


# ------------------------------------------------------------------------------ kinds
TEXT = Kind(
    "text",
    (
        Mutation("None", lambda v, r: None),
        Mutation("empty", lambda v, r: ""),
        Mutation("blank", lambda v, r: "   "),
        Mutation("number", lambda v, r: 3),
        Mutation("list", lambda v, r: [v]),
    ),
)
VERB = TEXT.extend(Mutation("a verb of neither class", lambda v, r: "fly"), name="verb")
VERBS = Kind(
    "verbs",
    (
        Mutation("a string", lambda v, r: "write"),
        Mutation("empty", lambda v, r: []),
        Mutation("None", lambda v, r: None),
        Mutation("a number in it", lambda v, r: [*v, 3]),
        Mutation("two words", lambda v, r: [*v, "look at"]),
        Mutation("a verb of the other class", lambda v, r: [*v, "explain", "write"]),
        Mutation("tuple", lambda v, r: tuple(v), same=True),
        Mutation("upper case", lambda v, r: [x.upper() for x in v], same=True),
    ),
)
PROMPT = Kind(
    "prompt",
    (
        Mutation("None", lambda v, r: None),
        Mutation("empty string", lambda v, r: ""),
        Mutation("number", lambda v, r: 7),
        Mutation("no user message", lambda v, r: [m for m in v if m["role"] != "user"]),
        Mutation("message without content", lambda v, r: [{"role": "user"}]),
        Mutation("empty conversation", lambda v, r: []),
        Mutation("no verb", lambda v, r: [*v[:-1], {"role": "user", "content": "Hello there."}]),
    ),
)
PAIR_LIST = Kind(
    "pairs",
    (
        Mutation("None", lambda v, r: None),
        Mutation("string", lambda v, r: "pairs"),
        Mutation("empty", lambda v, r: []),
        Mutation("numbers", lambda v, r: [1, 2]),
        Mutation("a dict in it", lambda v, r: [*v, {"execution": "x"}]),
        Mutation("tuple", lambda v, r: tuple(v), same=True),
    ),
)
PROMPTS = Kind(
    "prompts",
    (
        Mutation("None", lambda v, r: None),
        Mutation("one string", lambda v, r: "write code"),
        Mutation("empty", lambda v, r: []),
        Mutation("a number in it", lambda v, r: [*v, 3]),
        Mutation("an empty prompt in it", lambda v, r: [*v, ""]),
        Mutation("a bad message in it", lambda v, r: [*v, [{"role": "user"}]]),
    ),
)
VECTOR = ARRAY.without("list", "pandas", "torch tensor").extend(
    Mutation("zero vector", lambda v, r: np.zeros_like(np.asarray(v))),
    Mutation("one entry short", lambda v, r: np.asarray(v)[:-1]),
    Mutation("float32 tensor", lambda v, r: torch.as_tensor(np.asarray(v)).float(), same=True),
)
VALUES = ARRAY.without("list", "pandas", "torch tensor").extend(
    Mutation("one value short", lambda v, r: np.asarray(v)[:-1]),
    Mutation("list", lambda v, r: np.asarray(v).tolist(), same=True),
)
INTERVENTIONS = Kind(
    "interventions",
    (
        Mutation("None", lambda v, r: None),
        Mutation("string", lambda v, r: "ablate"),
        Mutation("a tensor", lambda v, r: torch.zeros(D)),
        Mutation("numbers in it", lambda v, r: [1, 2]),
    ),
)
GENERATOR = Kind(
    "generator",
    (
        Mutation("None", lambda v, r: None),
        Mutation("int seed", lambda v, r: 0),
        Mutation("numpy generator", lambda v, r: np.random.default_rng(0)),
    ),
)
POSITION = INT(0, 1, 5)
LAYER = INT(-1, N_SITES, lo=0)
FRACTION = scalar("fraction", 0.0, 1.0, -0.1, 1.5)


# ------------------------------------------------------------------------------ runners
def _pairset(ps: PairSet):
    return (ps.analysis, ps.heldout, dict(ps.n_candidates))


def run_organism_pairs(n_analysis, n_heldout, seed):
    return _pairset(organism_pairs(n_analysis, n_heldout, seed))


def run_natural_pairs(n_analysis, n_heldout, seed):
    return _pairset(natural_pairs(n_analysis, n_heldout, seed))


CONVERSATION = [
    {"role": "system", "content": NATURAL_SCAFFOLD},
    {"role": "user", "content": "Please write a Python function that sorts a list."},
]


def run_from_prompt(prompt, verb, execution_verbs, analysis_verbs):
    pairs = pairs_from_prompt(
        prompt, verb=verb, execution_verbs=execution_verbs, analysis_verbs=analysis_verbs
    )
    return [(p.execution, p.analysis) for p in pairs]


def run_read_pairs(path, heldout_fraction, seed):
    return _pairset(read_pairs(path, heldout_fraction=heldout_fraction, seed=seed))


def run_format(call, prose):
    fmt = DecisionFormat(call, prose)
    return (fmt.call, fmt.prose)


def run_variant(verb):
    assert isinstance(PAIRS.heldout[0], ContrastivePair)
    return PAIRS.heldout[0].variant(verb)


def run_pairset(analysis, heldout):
    return len(PairSet(analysis, heldout, "user", {}).analysis)


def run_settings(n_select, alpha, control_band, fit_on, max_layer_fraction):
    s = StudySettings(
        n_select=n_select,
        alpha=alpha,
        control_band=control_band,
        fit_on=fit_on,
        max_layer_fraction=max_layer_fraction,
    ).check()
    return (s.n_select, s.alpha, s.control_band, s.fit_on, s.max_layer_fraction)


def run_decision(model, batch_size):
    return ToolDecision(_r(model), batch_size=batch_size).batch_size


def run_logit_diff(prompts):
    return _r(DECISION).logit_diff(prompts)


def run_check_flips(decision, pairs):
    check = check_flips(_r(decision), pairs)
    assert isinstance(check, FlipCheck)
    return check.counts()


def run_layer_names(model):
    return layer_names(_r(model))


def run_fit(model, pairs, n_positions):
    d = ToolDirection(n_positions=n_positions).fit(_r(model), pairs)
    return d.mu_delta_.numpy()


def run_vector(layer, position):
    return _r(DIRECTION).vector(layer, position).numpy()


def run_mean_projections(direction, position):
    return _r(DIRECTION).mean_projections(direction, position)


def run_separation(model, pairs):
    sweep = _r(DIRECTION).separation(_r(model), pairs)
    assert isinstance(sweep, SeparationSweep)
    return sweep.auc


def run_ablation(direction):
    return ablation(direction)[0].direction.numpy()


def run_clamp(model, direction, values, position):
    out = clamp(_r(model), direction, values, position)
    return [(c.value, c.sites) for c in out]


def run_addition(model, vector, layer, position, alpha):
    (a,) = addition(_r(model), vector, layer, position, alpha)
    return (a.vector.numpy(), a.sites, a.alpha)


def run_random_directions(direction, n, generator):
    return random_directions(direction, n, generator).numpy()


def _gen():
    return torch.Generator().manual_seed(0)


def run_causal_test(decision, prompts, intervention, controls, control_band, logit_before):
    t = causal_test(
        _r(decision),
        prompts,
        intervention,
        controls,
        name="t",
        population="execution",
        control_band=control_band,
        logit_before=logit_before,
    )
    assert isinstance(t, CausalTest)
    return (t.calls_after, t.control_calls)


def run_choose(decision, direction, pairs, alpha):
    c = choose_candidate(_r(decision), _r(direction), pairs, alpha=alpha)
    assert isinstance(c, CandidateChoice)
    return (c.layer, c.position)


def run_quality(decision, pairs, interventions, max_new_tokens, variant):
    return induced_call_quality(
        _r(decision), pairs, interventions, max_new_tokens=max_new_tokens, variant=variant
    )


def run_attribution(decision, pairs):
    att = component_attribution(_r(decision), pairs)
    assert isinstance(att, ComponentAttribution)
    return att.execution


def run_patching(decision, pairs, components, positions):
    p = patch_components(_r(decision), pairs, components, positions=positions)
    assert isinstance(p, ComponentPatching)
    return p.effect()


def run_transmission(decision, pairs, interventions):
    return transmission(_r(decision), pairs, interventions)


def run_scaffold(decision, direction, fit_pairs, eval_pairs, layer, position, neutral_verb):
    sc = scaffold_analysis(
        _r(decision),
        _r(direction),
        fit_pairs,
        eval_pairs,
        layer=layer,
        position=position,
        neutral_verb=neutral_verb,
    )
    assert isinstance(sc, ScaffoldAnalysis)
    return sc.rows


def run_study(model, decision, settings, generator, rng):
    st = study_model(
        _r(model),
        _r(decision),
        PairSet(PAIRS.analysis[:2], PAIRS.heldout[:2], "organism", {}),
        settings,
        generator=generator,
        rng=rng,
    )
    assert isinstance(st, ModelStudy)
    return (st.decided, st.reason)


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("toolcall") / "pairs.jsonl"
    rows = [{"prompt": CONVERSATION}, {"execution": "Please run the code.", "analysis":
                                       "Please explain the code."}]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


ANALYSIS_TWO = [p.analysis for p in FEW]
EXEC_TWO = [p.execution for p in FEW]
NO_STUDY = StudySettings(n_probe=2, n_select=1, n_readout=1, min_probe_flip_share=1.0)
ONE_ABLATION = ablation(VEC)
ONE_ADDITION = [AddVector(torch.as_tensor(VEC).float(), "blocks.1.resid_pre",
                          positions=Positions.at([-1]))]  # fmt: skip

CASES = [
    Case("organism_pairs", run_organism_pairs, {"n_analysis": 5, "n_heldout": 3, "seed": 0},
         {"n_analysis": INT(10**6, lo=1), "n_heldout": INT(10**6, lo=1),
          "seed": INT(lo=0)}),
    Case("natural_pairs", run_natural_pairs, {"n_analysis": 5, "n_heldout": 3, "seed": 0},
         {"n_analysis": INT(10**6, lo=1), "n_heldout": INT(10**6, lo=1),
          "seed": INT(lo=0)}),
    Case("pairs_from_prompt", run_from_prompt,
         {"prompt": CONVERSATION, "verb": "write", "execution_verbs": list(EXECUTION_VERBS),
          "analysis_verbs": list(ANALYSIS_VERBS)},
         {"prompt": PROMPT, "verb": VERB.without("None"), "execution_verbs": VERBS,
          "analysis_verbs": VERBS}),
    Case("DecisionFormat", run_format, {"call": "<tool_call>", "prose": "Sure"},
         {"call": TEXT, "prose": TEXT}),
    Case("ContrastivePair.variant", run_variant, {"verb": "explain"},
         {"verb": TEXT}),
    Case("PairSet", run_pairset, {"analysis": PAIRS.analysis, "heldout": PAIRS.heldout},
         {"analysis": PAIR_LIST.without("tuple"), "heldout": PAIR_LIST.without("tuple")}),
    Case("StudySettings.check", run_settings,
         {"n_select": 3, "alpha": 1.0, "control_band": 0.1, "fit_on": "all",
          "max_layer_fraction": 0.8},
         {"n_select": INT(lo=1), "alpha": POSITIVE, "control_band": scalar("band", -0.1, 1.5),
          "fit_on": CHOICE("flipping"), "max_layer_fraction": scalar("frac", 0.0, 1.5)}),
    Case("ToolDecision", run_decision, {"model": MODEL, "batch_size": 8},
         {"model": OBJECT, "batch_size": INT(lo=1).without("integer float", "numpy int")}),
    Case("ToolDecision.logit_diff", run_logit_diff, {"prompts": EXEC_TWO}, {"prompts": PROMPTS}),
    Case("check_flips", run_check_flips, {"decision": DECISION, "pairs": FEW},
         {"decision": OBJECT, "pairs": PAIR_LIST}),
    Case("layer_names", run_layer_names, {"model": MODEL}, {"model": OBJECT}),
    Case("ToolDirection.fit", run_fit, {"model": MODEL, "pairs": FEW, "n_positions": 2},
         {"model": OBJECT, "pairs": PAIR_LIST, "n_positions": INT(lo=1)}),
    Case("ToolDirection.vector", run_vector, {"layer": 1, "position": -1},
         {"layer": LAYER, "position": POSITION}),
    Case("ToolDirection.mean_projections", run_mean_projections,
         {"direction": VEC, "position": -1},
         {"direction": VECTOR.without("float32 tensor"), "position": POSITION}),
    Case("ToolDirection.separation", run_separation, {"model": MODEL, "pairs": FEW},
         {"model": OBJECT, "pairs": PAIR_LIST}),
    Case("ablation", run_ablation, {"direction": VEC},
         {"direction": VECTOR.without("one entry short")}),
    Case("clamp", run_clamp,
         {"model": MODEL, "direction": VEC, "values": np.zeros(N_SITES), "position": -1},
         {"model": OBJECT, "direction": VECTOR, "values": VALUES, "position": POSITION}),
    Case("addition", run_addition,
         {"model": MODEL, "vector": VEC, "layer": 1, "position": -1, "alpha": 1.0},
         {"model": OBJECT, "vector": VECTOR, "layer": LAYER, "position": POSITION,
          "alpha": scalar("alpha")}),
    Case("random_directions", run_random_directions,
         {"direction": VEC, "n": 2, "generator": Lazy("generator")},
         {"direction": VECTOR.without("one entry short"), "n": INT(lo=1),
          "generator": GENERATOR}),
    Case("causal_test", run_causal_test,
         {"decision": DECISION, "prompts": EXEC_TWO, "intervention": ONE_ABLATION,
          "controls": [ONE_ABLATION], "control_band": 0.1, "logit_before": np.zeros(2)},
         {"decision": OBJECT, "prompts": PROMPTS.without("an empty prompt in it",
                                                         "a bad message in it", "a number in it"),
          "intervention": INTERVENTIONS, "controls": INTERVENTIONS.without("a tensor"),
          "control_band": scalar("band", -0.1, 1.5),
          "logit_before": VALUES.without("list", "None")}),
    Case("choose_candidate", run_choose,
         {"decision": DECISION, "direction": DIRECTION, "pairs": FEW, "alpha": 1.0},
         {"decision": OBJECT, "direction": OBJECT, "pairs": PAIR_LIST, "alpha": POSITIVE}),
    Case("induced_call_quality", run_quality,
         {"decision": DECISION, "pairs": FEW, "interventions": [], "max_new_tokens": 8,
          "variant": "execution"},
         {"decision": OBJECT, "pairs": PAIR_LIST, "interventions": INTERVENTIONS,
          "max_new_tokens": INT(lo=1), "variant": CHOICE("analysis")}),
    Case("component_attribution", run_attribution, {"decision": DECISION, "pairs": FEW},
         {"decision": OBJECT, "pairs": PAIR_LIST}),
    Case("patch_components", run_patching,
         {"decision": DECISION, "pairs": FEW, "components": ["blocks.1.attn_out"],
          "positions": "last"},
         {"decision": OBJECT, "pairs": PAIR_LIST,
          "components": Kind("components", (Mutation("string", lambda v, r: "blocks.1"),
                                            Mutation("empty", lambda v, r: []),
                                            Mutation("numbers", lambda v, r: [1]))),
          "positions": CHOICE("all")}),
    Case("transmission", run_transmission,
         {"decision": DECISION, "pairs": FEW, "interventions": ONE_ADDITION},
         {"decision": OBJECT, "pairs": PAIR_LIST, "interventions": INTERVENTIONS}),
    Case("scaffold_analysis", run_scaffold,
         {"decision": DECISION, "direction": DIRECTION, "fit_pairs": FEW, "eval_pairs": FEW,
          "layer": 1, "position": -1, "neutral_verb": "[UNK]"},
         {"decision": OBJECT, "direction": OBJECT, "fit_pairs": PAIR_LIST.without("tuple"),
          "eval_pairs": PAIR_LIST.without("tuple"), "layer": LAYER, "position": POSITION,
          "neutral_verb": TEXT.without("list")}),
    Case("study_model", run_study,
         {"model": MODEL, "decision": DECISION, "settings": NO_STUDY,
          "generator": Lazy("generator"), "rng": Lazy("rng")},
         {"model": OBJECT, "decision": OBJECT, "settings": OBJECT, "generator": GENERATOR,
          "rng": Kind("rng", (Mutation("int", lambda v, r: 0), Mutation("None", lambda v, r: None)))}),
]  # fmt: skip


def _fresh(case: Case) -> Case:
    """Generators are consumed by a call: give each call a fresh one of the same seed."""
    lazy = {k for k, v in case.args.items() if isinstance(v, Lazy) and v.name in ("generator",
                                                                                   "rng")}  # fmt: skip
    if not lazy:
        return case

    def run(**args):
        for k in lazy:
            if isinstance(args[k], Lazy):
                args[k] = _gen() if args[k].name == "generator" else np.random.default_rng(0)
        return case.run(**args)

    return Case(case.name, run, case.args, case.kinds)


CASES = [_fresh(c) for c in CASES]
test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


# ------------------------------------------------------------------------------ beyond the cases
def test_read_pairs_refuses_bad_paths_and_bad_lines(pairs_file, tmp_path):
    ps = read_pairs(pairs_file, heldout_fraction=0.5, seed=0)
    assert len(ps.analysis) + len(ps.heldout) == len(ANALYSIS_VERBS) + 1
    for bad, match in ((tmp_path / "missing.jsonl", "does not exist"), (tmp_path, "file"),
                       (None, "path")):  # fmt: skip
        with pytest.raises(InputError, match=match):
            read_pairs(bad)
    for frac in (0.0, 1.0, math.nan, "0.5"):
        with pytest.raises(InputError, match="heldout_fraction"):
            read_pairs(pairs_file, heldout_fraction=frac)
    lines = {
        "is not JSON": "{oops",
        "must be a JSON object": "[1, 2]",
        "needs 'execution' and 'analysis', or 'prompt'": '{"x": 1}',
        "exactly one word": '{"execution": "run it now", "analysis": "explain it later"}',
        "outside the last user message": json.dumps(
            {"execution": [{"role": "system", "content": "a"}, {"role": "user", "content":
             "run it"}], "analysis": [{"role": "system", "content": "b"}, {"role": "user",
             "content": "explain it"}]}),
        "none of the execution or analysis verbs": '{"prompt": "hello there"}',
    }  # fmt: skip
    for match, line in lines.items():
        path = tmp_path / "bad.jsonl"
        path.write_text(json.dumps({"prompt": "please write code"}) + "\n" + line + "\n")
        with pytest.raises(DataError, match=match) as exc:
            read_pairs(path)
        assert "\n" not in str(exc.value) and "line 2" in str(exc.value)


def test_direction_steps_out_of_order_name_the_step():
    d = ToolDirection()
    for step in (lambda: d.vector(1), lambda: d.norms(), lambda: d.candidates(),
                 lambda: d.mean_projections(VEC)):  # fmt: skip
        with pytest.raises(NotFittedError, match="fit"):
            step()


def test_replay_one_corruption():
    """run_one replays a single corruption (what a failing hypothesis draw prints)."""
    case = next(c for c in CASES if c.name == "addition")
    run_one(case, "vector", next(m for m in VECTOR.mutations if m.name == "nan"))
