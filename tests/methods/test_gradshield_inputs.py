"""gradshield's public API on malformed input: InputError with one line, or the canonical result.

Every name in ``trustlab.methods.gradshield.__all__`` that takes arguments is a case below
(issue 38's contract); the corruptions per argument kind are in tests/malformed.py. The
gradient-based entry points run on a seconds-small Llama.
"""

from __future__ import annotations

import hypothesis  # noqa: F401 - the property tests are built by malformed_input_tests
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="gradshield needs trustlab[llm] (torch)")
pytest.importorskip("transformers", reason="gradshield needs trustlab[llm] (transformers)")

from trustlab.core.errors import InputError  # noqa: E402
from trustlab.embed import HashingEmbedder  # noqa: E402
from trustlab.finetune import explicit_harmful_examples, utility_examples  # noqa: E402
from trustlab.lm import LanguageModel, ScriptedChatModel  # noqa: E402
from trustlab.methods import gradshield as api  # noqa: E402
from trustlab.methods.gradshield import (  # noqa: E402
    FIHS,
    EmbeddingScorer,
    FilterResult,
    GradSafeScorer,
    GradShield,
    ModerationScorer,
    ParameterSlices,
    ReferenceSets,
    make_threshold,
)

from ..malformed import (  # noqa: E402
    ARRAY,
    BOOL,
    CHOICE,
    INT,
    OBJECT,
    RNG,
    UNIT,
    Case,
    Kind,
    Mutation,
    malformed_input_tests,
    scalar,
)


def _tiny():
    from trustlab.organisms import build_chat_corpus
    from trustlab.organisms.specs import ModelShape
    from trustlab.organisms.tokenizer import build_tokenizer
    from trustlab.organisms.train import make_llama

    corpus = build_chat_corpus(0, n_train=300, n_heldout=10)
    tok = build_tokenizer(corpus.texts())
    shape = ModelShape(n_layers=1, d_model=8, n_heads=2, d_mlp=16)
    return LanguageModel(make_llama(shape, tok, torch.Generator().manual_seed(0), 0.05), tok)


MODEL = _tiny()
REFS = api.organism_references(4, 8, seed=1)
DATA = utility_examples(3, 2) + explicit_harmful_examples(2, 2)
FITTED = FIHS(slice_fraction=0.2, batch_size=8).fit(
    MODEL, list(REFS.harmful), list(REFS.refusal), list(REFS.benign_slices)
)
SHIELD = GradShield(FIHS(slice_fraction=0.2)).fit(MODEL, REFS)
_rng = np.random.default_rng(0)
SCORES = _rng.normal(size=40)
CAL = _rng.normal(size=30)

#: A list of training examples.
EXAMPLES = Kind(
    "examples",
    (
        Mutation("None", lambda v, r: None),
        Mutation("a string", lambda v, r: "How do I bake bread?"),
        Mutation("empty list", lambda v, r: []),
        Mutation("an int item", lambda v, r: [*v[:-1], 3]),
        Mutation("a dict item", lambda v, r: [*v[:-1], {"prompt": "x"}]),
        Mutation("a one-string item", lambda v, r: [*v[:-1], ("only a prompt",)]),
        Mutation("tuple", lambda v, r: tuple(v), same=True),
    ),
)
MODELS = Kind(
    "model",
    (
        Mutation("None", lambda v, r: None),
        Mutation("a string", lambda v, r: "organism:chat-xs"),
        Mutation("an array", lambda v, r: np.zeros(3)),
    ),
)
FRACTION = scalar("fraction", 0.0, -0.1, 1.5)  # 1.0 is valid: all slices, another result
NON_NEG = scalar("non-negative", -1.0)


def _fihs_fit(slice_fraction, aggregate, use_refusal, slice_rule, batch_size, harmful, model):
    fihs = FIHS(slice_fraction=slice_fraction, aggregate=aggregate, use_refusal=use_refusal,
                slice_rule=slice_rule, batch_size=batch_size)  # fmt: skip
    fihs.fit(model, harmful, list(REFS.refusal), list(REFS.benign_slices))
    return fihs.score(MODEL, DATA)


def _fihs_score(data):
    return FITTED.score(MODEL, data)


def _shield(threshold, data):
    return GradShield(FIHS(slice_fraction=0.2), threshold=threshold).fit(MODEL, REFS).filter(
        MODEL, data
    ).removed  # fmt: skip


def _threshold(rule_name):
    def run(scores, calibration, **options):
        return make_threshold(rule_name, **options).fit(scores, calibration).threshold_

    return run


def _slices(layout):
    s = ParameterSlices(layout)
    return s.n_slices, s.n_values


def _cosines(grads, direction):
    return ParameterSlices((("a", (2, 3)), ("b", (4,)))).cosines(grads, direction).numpy()


GRADS = _rng.normal(size=(3, 10))
DIRECTION = _rng.normal(size=10)
LAYOUT = Kind(
    "layout",
    (
        Mutation("None", lambda v, r: None),
        Mutation("empty", lambda v, r: ()),
        Mutation("a 3-D shape", lambda v, r: (("a", (2, 2, 2)),)),
        Mutation("a zero size", lambda v, r: (("a", (0, 3)),)),
        Mutation("a float size", lambda v, r: (("a", (2.5, 3)),)),
        Mutation("no name", lambda v, r: ((None, (2, 3)),)),
        Mutation("a string", lambda v, r: "a"),
        Mutation("lists", lambda v, r: [list(x) for x in v], same=True),
    ),
)


def _gradsafe(gap, unsafe, data):
    gs = GradSafeScorer(gap=gap, min_fraction=0.1).fit(MODEL, unsafe, list(REFS.benign_slices))
    return gs.score(MODEL, data)


def _embedding(harmful, data):
    return EmbeddingScorer(HashingEmbedder()).fit(harmful, list(REFS.benign_slices)).score(data)


JUDGE = ScriptedChatModel(lambda conv: "I'm sorry" if "hurt" in conv[-1]["content"] else "Sure")


def _moderation(judge, mode, max_new_tokens, data):
    return ModerationScorer(judge, mode=mode, max_new_tokens=max_new_tokens).score(data)


def _references(harmful, refusal, benign):
    r = ReferenceSets(harmful, refusal, benign)
    return len(r.harmful), len(r.benign_slices)


def _filter_result(scores, removed):
    return FilterResult("x", scores, removed).n_removed


def _build_mix(kind, fraction, n, seed):
    m = api.build_mix(kind, fraction, n, seed=seed)
    return [e.prompt for e in m.examples], list(m.harmful)


#: FilterResult scores: NaN means "no score" (the 'none' and 'random' filters), so it is valid.
SCORE_ARRAY = ARRAY.without("nan")
HARM = np.array([1, 0, 1, 0, 0], dtype=bool)
REMOVED = np.array([1, 1, 0, 0, 0], dtype=bool)
MASK1D = Kind(
    "mask",
    (
        Mutation("None", lambda v, r: None),
        Mutation("a string", lambda v, r: "mask"),
        Mutation("2-D", lambda v, r: np.asarray(v)[None]),
        Mutation("too short", lambda v, r: np.asarray(v)[:-1]),
        Mutation("a 2", lambda v, r: np.where(v, 2, 0)),
        Mutation("nan", lambda v, r: np.where(v, np.nan, 0.0)),
        Mutation("0/1 integers", lambda v, r: np.asarray(v).astype(int), same=True),
        Mutation("list", lambda v, r: np.asarray(v).tolist(), same=True),
    ),
)

CASES = [
    Case("FIHS", _fihs_fit,
         {"slice_fraction": 0.2, "aggregate": "concat", "use_refusal": True,
          "slice_rule": "both", "batch_size": 4, "harmful": list(REFS.harmful), "model": MODEL},
         {"slice_fraction": FRACTION, "aggregate": CHOICE(), "use_refusal": BOOL,
          "slice_rule": CHOICE(), "batch_size": INT(lo=1), "harmful": EXAMPLES,
          "model": MODELS}),
    Case("FIHS.score", _fihs_score, {"data": DATA}, {"data": EXAMPLES}),
    Case("GradShield", _shield, {"threshold": "conformal", "data": DATA},
         {"threshold": CHOICE(), "data": EXAMPLES}),
    Case("fihs_from_gradients",
         lambda grads, direction, aggregate: api.fihs_from_gradients(grads, direction, None,
                                                                     aggregate),
         {"grads": GRADS, "direction": DIRECTION, "aggregate": "concat"},
         {"grads": ARRAY, "direction": ARRAY, "aggregate": CHOICE()}),
    Case("ParameterSlices", _slices, {"layout": (("a", (2, 3)), ("b", (4,)))}, {"layout": LAYOUT}),
    Case("ParameterSlices.cosines", _cosines, {"grads": GRADS, "direction": DIRECTION},
         {"grads": ARRAY, "direction": ARRAY}),
    Case("ConformalThreshold", _threshold("conformal"),
         {"scores": SCORES, "calibration": CAL, "alpha": 0.1},
         {"scores": ARRAY, "calibration": ARRAY, "alpha": UNIT}),
    Case("SearchThreshold", _threshold("search"),
         {"scores": SCORES, "calibration": CAL, "alpha": 0.1},
         {"scores": ARRAY, "calibration": ARRAY, "alpha": UNIT}),
    Case("MixtureThreshold", _threshold("mixture"),
         {"scores": SCORES, "calibration": None, "posterior": 0.5, "bic_margin": 10.0},
         {"scores": ARRAY, "posterior": UNIT, "bic_margin": NON_NEG}),
    Case("OtsuThreshold", _threshold("otsu"), {"scores": SCORES, "calibration": None},
         {"scores": ARRAY}),
    Case("FixedThreshold", _threshold("fixed"),
         {"scores": SCORES, "calibration": None, "value": 0.25},
         {"scores": ARRAY, "value": scalar("value")}),
    Case("make_threshold", lambda rule: type(make_threshold(rule)).__name__,
         {"rule": "otsu"}, {"rule": CHOICE()}),
    Case("GradSafeScorer", _gradsafe,
         {"gap": 0.5, "unsafe": list(REFS.harmful), "data": DATA},
         {"gap": scalar("gap"), "unsafe": EXAMPLES, "data": EXAMPLES}),
    Case("EmbeddingScorer", _embedding, {"harmful": list(REFS.harmful), "data": DATA},
         {"harmful": EXAMPLES, "data": EXAMPLES}),
    Case("ModerationScorer", _moderation,
         {"judge": JUDGE, "mode": "refusal", "max_new_tokens": 8, "data": DATA},
         {"judge": OBJECT, "mode": CHOICE(), "max_new_tokens": INT(lo=1), "data": EXAMPLES}),
    Case("ReferenceSets", _references,
         {"harmful": REFS.harmful, "refusal": REFS.refusal, "benign": REFS.benign},
         {"harmful": EXAMPLES, "refusal": EXAMPLES, "benign": EXAMPLES}),
    Case("organism_references",
         lambda n_harmful, n_benign, seed: _references(
             *vars(api.organism_references(n_harmful, n_benign, seed=seed)).values()),
         {"n_harmful": 4, "n_benign": 6, "seed": 0},
         {"n_harmful": INT(lo=4), "n_benign": INT(lo=4), "seed": INT(lo=0)}),
    Case("public_references",
         lambda n_harmful, n_benign, seed: _references(
             *vars(api.public_references(n_harmful, n_benign, seed=seed)).values()),
         {"n_harmful": 4, "n_benign": 6, "seed": 0},
         {"n_harmful": INT(lo=4), "n_benign": INT(lo=4), "seed": INT(lo=0)}),
    Case("random_removal", lambda n, k, rng: api.random_removal(n, k, rng),
         {"n": 10, "k": 3, "rng": 4}, {"n": INT(lo=0), "k": INT(11, lo=0), "rng": RNG}),
    Case("example_text", api.example_text, {"item": DATA[0]}, {"item": OBJECT}),
    Case("FilterResult", _filter_result, {"scores": SCORES[:5], "removed": REMOVED},
         {"scores": SCORE_ARRAY, "removed": MASK1D}),
    Case("build_mix", _build_mix, {"kind": "explicit", "fraction": 0.1, "n": 20, "seed": 1},
         {"kind": CHOICE(), "fraction": scalar("fraction", -0.1, 1.5), "n": INT(lo=1),
          "seed": INT(lo=0)}),
    Case("filter_metrics", lambda harmful, removed: api.filter_metrics(harmful, removed).to_dict(),
         {"harmful": HARM, "removed": REMOVED}, {"harmful": MASK1D, "removed": MASK1D}),
]  # fmt: skip


test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


def test_every_public_callable_has_a_case():
    """A new public function or class must come with its malformed-input case."""
    covered = {c.name.split(".")[0] for c in CASES}
    constants = {"THRESHOLD_RULES"}
    missing = set(api.__all__) - covered - constants
    assert not missing, f"no malformed-input case for {sorted(missing)}"


def test_filter_result_takes_nan_as_no_score_and_refuses_infinity():
    nan = FilterResult("none", np.full(3, np.nan), np.zeros(3, dtype=bool))
    assert nan.n_removed == 0 and np.isnan(nan.scores).all()
    with pytest.raises(InputError, match="infinite"):
        FilterResult("x", np.array([0.0, np.inf, 1.0]), np.zeros(3, dtype=bool))
