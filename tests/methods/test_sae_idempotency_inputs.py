"""sae-idempotency's public API on bad input: a correct result or an InputError, nothing else.

First the reproductions of issue 38, then property-based tests (hypothesis) over the names in
``sae_idempotency.__all__``: NaN/inf, wrong dtype or shape, empty, out of range. A call must
either return a result that satisfies its contract or raise ``InputError`` (``DataError`` for
files) — never another exception, a NaN-filled result, or a result computed on a silently
reinterpreted input.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.core.errors import DataError, InputError
from trustlab.methods.sae_idempotency import (
    DeltaLoss,
    EncoderDecoder,
    FunctionalEncoderDecoder,
    IdempotencyDiagnostics,
    JumpReLUFunction,
    NormTrajectory,
    SAETrainer,
    ScaleSensitivity,
    SparseAutoencoder,
    SparseFeatureData,
    StepFunction,
    TrainConfig,
    active_set_jaccard,
    batch_topk,
    dead_latent_fraction,
    delta_loss,
    diagnose,
    feature_recovery,
    fraction_of_variance_unexplained,
    idempotency_penalty,
    l0,
    latent_fire_counts,
    load_activations,
    load_saelens,
    norm_trajectory,
    normalization_scale,
    per_latent_reliability,
    reconstruct,
    rectangle,
    reencoding_error,
    save_activations,
    save_saelens,
    scale_sensitivity,
    sparse_feature_data,
    topk_activation,
)

from ..malformed import ARRAY, INT, POSITIVE, SAMPLES, Case, malformed_input_tests, scalar

PROPERTY = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def attempt(fn, *args, **kwargs):
    """The result, or None when the call raised InputError (any other exception fails)."""
    try:
        return fn(*args, **kwargs)
    except InputError as exc:
        assert str(exc) and "\n" not in str(exc)
        return None


@pytest.fixture(scope="module")
def data():
    d = sparse_feature_data(1500, 12, 24, p_active=2 / 24, generator=gen(0))
    return d.x * normalization_scale(d.x)


CFG = TrainConfig(architecture="topk", d_sae=32, k=2, n_steps=120, batch_size=64)


# -- issue 38 reproductions --------------------------------------------------------------------
def test_numpy_arrays_and_lists_of_rows_are_one_dataset_not_a_stream(data):
    """fit(x.numpy()) used to read every row as a chunk of one (held-out FVU 0.78 vs 0.08)."""
    held = data[1200:]

    def fvu(trainer):
        return fraction_of_variance_unexplained(held, reconstruct(trainer.sae_, held)[1])

    as_tensor = SAETrainer(CFG).fit(data[:1200], generator=gen(1))
    as_numpy = SAETrainer(CFG).fit(data[:1200].numpy(), generator=gen(1))
    as_rows = SAETrainer(CFG).fit(data[:1200].tolist(), generator=gen(1))
    assert as_numpy.n_steps_ == as_rows.n_steps_ == 120
    assert fvu(as_numpy) == pytest.approx(fvu(as_tensor), rel=1e-6)
    assert fvu(as_rows) == pytest.approx(fvu(as_tensor), rel=1e-6)
    assert fvu(as_tensor) < 0.5
    # a list of 2-D chunks is a stream (read once): 1200 rows / 64 per step
    chunks = [data[i : i + 400].numpy() for i in range(0, 1200, 400)]
    assert SAETrainer(CFG).fit(chunks, generator=gen(1)).n_steps_ == 3 * 7


def test_one_nan_in_the_activations_is_refused_not_trained_into_a_nan_sae(data):
    x = data[:500].clone()
    x[17, 3] = float("nan")
    with pytest.raises(InputError, match=r"must be finite\. Got 1 NaN"):
        SAETrainer(CFG).fit(x)
    with pytest.raises(InputError, match=r"data\[1\]"):
        SAETrainer(CFG).fit(iter([data[:100], x[:100]]))
    with pytest.raises(InputError, match="finite"):
        SAETrainer(CFG).fit([data[:100].numpy(), x[:100].numpy()])


def test_diagnose_accepts_float64_inputs(data):
    sae = SAETrainer(CFG).fit(data, generator=gen(2)).sae_
    d32 = diagnose(sae, data[:300])
    d64 = diagnose(sae, data[:300].double())
    assert d64.reencoding_error == pytest.approx(d32.reencoding_error, rel=1e-6)
    assert d64.jaccard == pytest.approx(d32.jaccard)


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"d_sae": 24.5}, "d_sae"), ({"n_steps": "5"}, "n_steps"), ({"lr": float("nan")}, "lr"),
    ({"k": 0}, "k"), ({"batch_size": True}, "batch_size"), ({"architecture": "gated"},
                                                             "architecture"),
])
def test_train_config_errors_name_the_parameter(kwargs, name):
    with pytest.raises(InputError, match=f"'{name}' parameter of TrainConfig"):
        TrainConfig(**kwargs)


def test_a_diverging_run_stops_with_a_solver_error(data):
    from trustlab.core.errors import SolverError

    huge = TrainConfig(architecture="relu", d_sae=16, n_steps=200, lr=1e30, grad_clip=1e30,
                       unit_norm_decoder=False)
    with pytest.raises(SolverError, match="diverged"):
        SAETrainer(huge).fit(data[:400] * 1e18, generator=gen(3))


# -- properties ----------------------------------------------------------------------------------
junk = st.one_of(st.none(), st.text(max_size=3), st.booleans(), st.just(float("nan")),
                 st.just(float("inf")), st.lists(st.integers(), max_size=2))
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                    st.integers(-3, 300), junk)


@PROPERTY
@given(st.dictionaries(st.sampled_from(["architecture", "d_sae", "k", "l1_coefficient",
                                        "bandwidth", "sparsity_warmup_fraction", "auxk_alpha",
                                        "auxk_k", "dead_after", "idempotency_lambda",
                                        "idempotency_grad", "lr", "batch_size", "n_steps",
                                        "grad_clip", "unit_norm_decoder"]),
                       st.one_of(numbers, st.sampled_from(["relu", "topk", "batchtopk",
                                                           "jumprelu", "full", "reencode"])),
                       max_size=4))
def test_train_config_is_valid_or_refused(kwargs):
    cfg = attempt(TrainConfig, **kwargs)
    if cfg is None:
        return
    assert 1 <= cfg.k <= cfg.d_sae and cfg.n_steps >= 1 and cfg.batch_size >= 1
    assert cfg.lr > 0 and math.isfinite(cfg.lr) and 0 <= cfg.sparsity_warmup_fraction <= 1
    assert isinstance(cfg.unit_norm_decoder, bool)


def _tensor(kind: str, shape: tuple[int, ...]) -> object:
    x = torch.randn(*shape, generator=gen(5)) if all(shape) else torch.zeros(shape)
    if kind == "nan" and x.numel():
        x.view(-1)[0] = float("nan")
    if kind == "inf" and x.numel():
        x.view(-1)[-1] = float("inf")
    if kind == "int":
        return x.round().to(torch.int64)
    if kind == "bool":
        return x > 0
    if kind == "numpy":
        return x.numpy()
    if kind == "float64":
        return x.double()
    if kind == "list":
        return x.tolist()
    if kind == "str":
        return "activations"
    return x


kinds = st.sampled_from(["ok", "nan", "inf", "int", "bool", "numpy", "float64", "list", "str"])
shapes = st.one_of(st.tuples(st.integers(0, 6), st.sampled_from([5, 6, 7])),
                   st.tuples(st.integers(1, 4)), st.tuples(st.integers(1, 3), st.integers(1, 3),
                                                            st.just(6)))


@pytest.fixture(scope="module")
def saes():
    out = {}
    for arch in ("relu", "topk", "batchtopk", "jumprelu"):
        sae = SparseAutoencoder(6, 10, arch, k=3 if arch in ("topk", "batchtopk") else None,
                                generator=gen(7))
        out[arch] = sae.eval()
    return out


@PROPERTY
@given(kinds, shapes, st.sampled_from(["relu", "topk", "batchtopk", "jumprelu"]))
def test_encoding_and_diagnostics_are_finite_or_refused(saes, kind, shape, arch):
    sae = saes[arch]
    x = _tensor(kind, shape)
    z = attempt(sae.encode, x)
    if z is not None:
        assert kind in ("ok", "int", "numpy", "float64", "list") and shape[-1] == 6
        assert z.shape[-1] == 10 and bool(torch.isfinite(z).all())
        assert bool(torch.isfinite(sae.decode(z)).all())
    for fn in (reencoding_error, active_set_jaccard, per_latent_reliability):
        out = attempt(fn, sae, x)
        if out is not None:
            assert len(shape) == 2 and shape[0] > 0 and shape[1] == 6
            if fn is active_set_jaccard:
                assert bool(((out >= 0) & (out <= 1)).all())
    diag = attempt(diagnose, sae, x)
    if diag is not None:
        assert 0 <= diag.jaccard <= 1 and math.isfinite(diag.scale_jaccard)


#: sizes that are small, not integers, or far too large to allocate (never a few GiB: the
#: machine is shared)
sizes = st.one_of(st.integers(-3, 64), junk, st.floats(1e13, 1e15), st.floats(0.1, 50.0))


@PROPERTY
@given(sizes, sizes, st.sampled_from(["relu", "topk", "batchtopk", "jumprelu", "gated"]),
       st.one_of(st.none(), sizes))
def test_sae_constructor_is_valid_or_refused(d_in, d_sae, arch, k):
    sae = attempt(SparseAutoencoder, d_in, d_sae, arch, k=k)
    if sae is None:
        return
    assert sae.W_enc.shape == (sae.d_in, sae.d_sae) and sae.d_in >= 1
    if arch in ("topk", "batchtopk"):
        assert 1 <= sae.k <= sae.d_sae


@PROPERTY
@given(kinds, shapes, kinds)
def test_metrics_are_finite_or_refused(kind, shape, kind_hat):
    x, x_hat = _tensor(kind, shape), _tensor(kind_hat, shape)
    fvu = attempt(fraction_of_variance_unexplained, x, x_hat)
    if fvu is not None:
        assert math.isfinite(fvu) and fvu >= 0
    for fn in (l0, dead_latent_fraction):
        v = attempt(fn, x)
        if v is not None:
            assert math.isfinite(v) and v >= 0
    counts = attempt(latent_fire_counts, x)
    if counts is not None:
        assert counts.shape == (shape[-1],)
    rec = attempt(feature_recovery, x, x_hat, threshold=0.5)
    if rec is not None:
        assert all(-1 - 1e-9 <= v <= 1 + 1e-9 for v in rec)
    s = attempt(normalization_scale, x)
    if s is not None:
        assert math.isfinite(s) and s > 0


@PROPERTY
@given(kinds, st.one_of(st.integers(-1, 8), numbers))
def test_sparsifying_activations_keep_k_or_refuse(kind, k):
    pre = _tensor(kind, (4, 6))
    for fn in (topk_activation, batch_topk):
        z = attempt(fn, pre, k)
        if z is None:
            continue
        assert isinstance(k, int) and 1 <= k <= 6 and bool(torch.isfinite(z).all())
        per_row = (z != 0).sum(-1)
        assert (per_row <= k).all() if fn is topk_activation else int(per_row.sum()) <= 4 * k


@PROPERTY
@given(st.one_of(st.integers(-1, 300), numbers), st.one_of(st.integers(0, 8), numbers),
       st.one_of(st.floats(-0.5, 1.5), numbers), st.one_of(st.floats(-1, 1), numbers))
def test_synthetic_data_is_valid_or_refused(n, n_features, p_active, noise):
    d = attempt(sparse_feature_data, n, 4, n_features, p_active=p_active, noise=noise,
                generator=gen(0))
    if d is None:
        return
    assert d.x.shape == (n, 4) and bool(torch.isfinite(d.x).all())
    assert 0 < p_active <= 1 and noise >= 0


@PROPERTY
@given(st.one_of(st.lists(st.floats(0.1, 3.0), min_size=0, max_size=3),
                 st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=3), junk),
       st.one_of(st.integers(-1, 12), numbers), st.one_of(st.floats(-1, 1), numbers))
def test_diagnostic_options_are_checked(saes, scales, n_iter, rel_tol):
    x = torch.randn(20, 6, generator=gen(9))
    sc = attempt(scale_sensitivity, saes["relu"], x, scales)
    if sc is not None:
        assert len(sc.scales) == len(scales) > 0 and all(c > 0 for c in scales)
    traj = attempt(norm_trajectory, saes["topk"], x, n_iter)
    if traj is not None:
        assert n_iter >= 2 and abs(sum(traj.outcome_shares.values()) - 1) < 1e-9
    rel = attempt(per_latent_reliability, saes["jumprelu"], x, rel_tol=rel_tol)
    if rel is not None:
        assert rel_tol >= 0 and bool(((rel[~rel.isnan()] >= 0) & (rel[~rel.isnan()] <= 1)).all())


def test_a_foreign_encoder_that_returns_nan_is_named():
    bad = FunctionalEncoderDecoder(lambda x: x * float("nan"), lambda z: z)
    with pytest.raises(InputError, match="returned NaN"):
        reencoding_error(bad, torch.ones(3, 4))
    with pytest.raises(InputError, match="encode"):
        diagnose(object(), torch.ones(3, 4))
    with pytest.raises(InputError, match="two callables"):
        FunctionalEncoderDecoder(lambda x: x, "decode")


@settings(max_examples=15, deadline=None)
@given(st.sampled_from([".pt", ".npy", ".safetensors", ".txt", ""]), kinds)
def test_activation_files_round_trip_or_refuse(tmp_path_factory, suffix, kind):
    x = _tensor(kind, (5, 3))
    path = tmp_path_factory.mktemp("acts") / f"a{suffix}"
    written = attempt(save_activations, path, x)
    if written is None:
        assert not path.exists()  # nothing half-written
        return
    back = load_activations(written)
    assert back.shape == (5, 3) and bool(torch.isfinite(back).all())
    assert torch.allclose(back, torch.as_tensor(np.asarray(x, dtype=np.float32)), atol=1e-6)


def test_a_file_of_nan_activations_is_a_data_error(tmp_path):
    path = tmp_path / "nan.npy"
    np.save(path, np.full((4, 3), np.nan, dtype=np.float32))
    with pytest.raises(DataError, match="NaN"):
        load_activations(path)


@PROPERTY
@given(kinds, st.sampled_from([(4, 6), (6,), (2, 3, 6)]), st.one_of(st.floats(-1, 1), numbers),
       st.one_of(st.floats(-1, 1), numbers), st.sampled_from(["jump", "step"]))
def test_straight_through_functions_are_checked(kind, shape, threshold, bandwidth, which):
    pre = _tensor(kind, shape)
    theta = torch.full((6,), threshold, dtype=torch.float64) if isinstance(threshold, float) \
        else threshold
    fn = JumpReLUFunction if which == "jump" else StepFunction
    out = attempt(fn.apply, pre, theta, bandwidth)
    if out is not None:
        assert out.shape == torch.as_tensor(np.asarray(pre, dtype=np.float32)).shape
        assert bool(torch.isfinite(out).all()) and bandwidth > 0
    k = attempt(rectangle, pre)
    if k is not None:
        assert bool(((k == 0) | (k == 1)).all())


@PROPERTY
@given(kinds, shapes, st.sampled_from(["reencode", "full", "both", 1]))
def test_idempotency_penalty_is_finite_or_refused(saes, kind, shape, grad):
    z = _tensor(kind, shape if shape[-1] != 6 else (*shape[:-1], 10))
    out = attempt(idempotency_penalty, saes["topk"], z, grad)
    if out is not None:
        assert grad in ("reencode", "full") and float(out) >= 0 and math.isfinite(float(out))


def test_result_types_are_what_the_diagnostics_return(saes):
    x = torch.randn(30, 6, generator=gen(11))
    d = diagnose(saes["topk"], x, n_iter=3)
    assert isinstance(d, IdempotencyDiagnostics) and isinstance(d.trajectory, NormTrajectory)
    assert isinstance(d.scale, ScaleSensitivity)
    assert isinstance(sparse_feature_data(5, 3, 4, generator=gen(0)), SparseFeatureData)
    assert isinstance(FunctionalEncoderDecoder(lambda v: v, lambda v: v), EncoderDecoder)
    assert DeltaLoss(2.0, 2.5, 4.0, 10).loss_recovered == pytest.approx(0.75)
    with pytest.raises(InputError, match="n_tokens"):
        DeltaLoss(2.0, 2.5, 4.0, 0)


def test_delta_loss_checks_its_arguments_before_any_work(saes):
    with pytest.raises(InputError, match="LanguageModel"):
        delta_loss(None, saes["relu"], ["a prompt"], "blocks.0.resid_post")


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(["list", "shape", "nan", "k", "ok"]), st.sampled_from(["relu", "topk"]))
def test_saelens_folders_load_or_give_a_data_error(tmp_path_factory, damage, arch):
    import json

    sae = SparseAutoencoder(6, 10, arch, k=3 if arch == "topk" else None, generator=gen(1))
    folder = save_saelens(sae, tmp_path_factory.mktemp("sae") / "s")
    cfg_file = folder / "cfg.json"
    cfg = json.loads(cfg_file.read_text())
    if damage == "list":
        cfg_file.write_text("[1, 2]")
    elif damage == "k" and arch == "topk":
        cfg["k"] = 50  # more latents than the dictionary has
        cfg.get("metadata", {}).get("trustlab", {}).pop("k", None)
        cfg_file.write_text(json.dumps(cfg))
    elif damage in ("shape", "nan"):
        import safetensors.torch as st_torch

        tensors = st_torch.load_file(str(folder / "sae_weights.safetensors"))
        if damage == "shape":
            tensors["b_enc"] = torch.zeros(3)
        else:
            tensors["W_dec"][0, 0] = float("nan")
        st_torch.save_file(tensors, str(folder / "sae_weights.safetensors"))
    try:
        back = load_saelens(folder)
    except DataError as exc:
        assert damage != "ok" and "\n" not in str(exc)
        return
    assert damage in ("ok", "k") and torch.equal(back.W_dec, sae.W_dec)
    with pytest.raises(InputError, match="path"):
        load_saelens(None)
    with pytest.raises(InputError, match="SparseAutoencoder"):
        save_saelens("not an sae", folder)


# -- the shared corruptions (tests/malformed.py): every array and scalar argument -----------------
_X = torch.randn(40, 6, generator=gen(21)).numpy()
_SAE = SparseAutoencoder(6, 10, "topk", k=3, generator=gen(22)).eval()


def _np(out):
    if isinstance(out, torch.Tensor):
        return out.detach().numpy()
    if isinstance(out, tuple):
        return tuple(_np(o) for o in out)
    return out


def _row(d):
    return {k: v for k, v in d.as_row().items()}


MALFORMED = [
    Case("fraction_of_variance_unexplained", lambda x, x_hat: fraction_of_variance_unexplained(
        x, x_hat), {"x": _X, "x_hat": _X * 0.9}, {"x": SAMPLES, "x_hat": SAMPLES}),
    Case("normalization_scale", lambda x: normalization_scale(x), {"x": _X}, {"x": SAMPLES}),
    Case("l0", lambda z: l0(z), {"z": np.abs(_X) * (_X > 0)}, {"z": ARRAY}),
    Case("dead_latent_fraction", lambda z: dead_latent_fraction(z), {"z": _X * (_X > 0)},
         {"z": ARRAY}),
    Case("feature_recovery", lambda learned, truth, threshold: feature_recovery(
        learned, truth, threshold=threshold), {"learned": _X[:10], "truth": _X[10:14],
                                               "threshold": 0.5},
         {"learned": SAMPLES, "truth": SAMPLES, "threshold": scalar("threshold", 1.5, -2.0)}),
    Case("reconstruct", lambda x: _np(reconstruct(_SAE, x)), {"x": _X}, {"x": SAMPLES}),
    Case("diagnose", lambda x: _row(diagnose(_SAE, x, n_iter=3)), {"x": _X}, {"x": SAMPLES}),
    Case("active_set_jaccard", lambda x: _np(active_set_jaccard(_SAE, x)), {"x": _X},
         {"x": SAMPLES}),
    Case("topk_activation", lambda pre, k: _np(topk_activation(pre, k)), {"pre": _X, "k": 2},
         {"pre": ARRAY, "k": INT(7, lo=1)}),
    Case("sparse_feature_data", lambda n, p_active: _np(sparse_feature_data(
        n, 4, 6, p_active=p_active, generator=gen(0)).x), {"n": 20, "p_active": 0.3},
         {"n": INT(lo=1), "p_active": scalar("p_active", 0.0, 1.5, -0.1)}),
    Case("TrainConfig", lambda d_sae, lr, n_steps: TrainConfig(d_sae=d_sae, k=2, lr=lr,
                                                               n_steps=n_steps),
         {"d_sae": 16, "lr": 3e-3, "n_steps": 5},
         {"d_sae": INT(lo=2), "lr": POSITIVE, "n_steps": INT(lo=1)}),
    Case("SparseAutoencoder", lambda d_in, d_sae: _np(SparseAutoencoder(
        d_in, d_sae, "relu", generator=gen(1)).W_dec), {"d_in": 4, "d_sae": 6},
         {"d_in": INT(lo=1), "d_sae": INT(lo=1)}),
]
test_every_corruption_once, test_malformed_input = malformed_input_tests(MALFORMED)
