"""Properties of the SAE architectures, the trainer, the metrics and the idempotency measures."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trustlab.core.errors import DataError, InputError, NotFittedError
from trustlab.methods.sae_idempotency import (
    FunctionalEncoderDecoder,
    JumpReLUFunction,
    SAETrainer,
    SparseAutoencoder,
    StepFunction,
    TrainConfig,
    active_set_jaccard,
    batch_topk,
    dead_latent_fraction,
    diagnose,
    feature_recovery,
    fraction_of_variance_unexplained,
    l0,
    load_activations,
    load_saelens,
    norm_trajectory,
    normalization_scale,
    per_latent_reliability,
    reconstruct,
    reencoding_error,
    save_activations,
    save_saelens,
    scale_sensitivity,
    sparse_feature_data,
)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def synthetic():
    data = sparse_feature_data(6000, 16, 32, p_active=2 / 32, generator=gen(0))
    s = normalization_scale(data.x)
    return data, data.x * s


# -- architectures -----------------------------------------------------------------------


def test_topk_keeps_exactly_k_active():
    sae = SparseAutoencoder(8, 40, "topk", k=5, generator=gen(1))
    with torch.no_grad():
        sae.b_enc.fill_(10.0)  # every pre-activation positive, so ReLU removes none of the top k
    z = sae.encode(torch.randn(100, 8, generator=gen(2)))
    assert ((z != 0).sum(-1) == 5).all()


def test_topk_keeps_the_largest():
    pre = torch.tensor([[0.1, 3.0, -1.0, 2.0, 0.5]])
    sae = SparseAutoencoder(5, 5, "topk", k=2)
    z = sae.activate(pre)
    assert torch.equal(z, torch.tensor([[0.0, 3.0, 0.0, 2.0, 0.0]]))


def test_batchtopk_keeps_k_times_batch_in_total_and_rows_may_differ():
    pre = torch.randn(32, 50, generator=gen(3)).abs() + 0.01
    pre[0] *= 10  # one row dominates: it takes more than k of the budget
    z = batch_topk(pre, 4)
    assert int((z != 0).sum()) == 4 * 32
    per_row = (z != 0).sum(-1)
    assert per_row[0] > 4 and per_row.min() < 4
    kept_min = z[z != 0].min()
    assert (pre[z == 0] <= kept_min).all()  # it kept the largest entries of the whole batch


def test_batchtopk_uses_its_threshold_at_inference():
    sae = SparseAutoencoder(6, 12, "batchtopk", k=2, generator=gen(4))
    sae.train()
    x = torch.randn(64, 6, generator=gen(5))
    sae.update_batch_threshold(sae.encode(x))
    sae.eval()
    theta = float(sae.batch_threshold)
    pre = sae.pre_activations(x)
    z = sae.encode(x)
    assert theta > 0
    assert torch.equal(z != 0, pre > theta)


def test_jumprelu_forward_and_straight_through_gradients_match_their_definition():
    eps = 0.5
    pre = torch.tensor([[0.3, 0.9, 1.2, 2.0]], requires_grad=True)
    theta = torch.tensor([1.0, 1.0, 1.0, 1.0], requires_grad=True)
    out = JumpReLUFunction.apply(pre, theta, eps)
    assert torch.equal(out.detach(), torch.tensor([[0.0, 0.0, 1.2, 2.0]]))
    out.sum().backward()
    # dz: H(pre - θ); dθ: -(θ/ε)·K((pre-θ)/ε) with K the rectangle on (-1/2, 1/2)
    assert torch.equal(pre.grad, torch.tensor([[0.0, 0.0, 1.0, 1.0]]))
    in_window = torch.tensor([0.0, 1.0, 1.0, 0.0])  # |pre-θ| < ε/2 = 0.25 for 0.9 and 1.2
    assert torch.allclose(theta.grad, -(1.0 / eps) * in_window)
    assert theta.grad.abs().sum() > 0

    theta2 = torch.tensor([1.0, 1.0, 1.0, 1.0], requires_grad=True)
    StepFunction.apply(pre.detach(), theta2, eps).sum().backward()
    assert torch.allclose(theta2.grad, -(1.0 / eps) * in_window)


def test_jumprelu_threshold_gradient_reaches_the_sae_parameter():
    sae = SparseAutoencoder(
        4, 8, "jumprelu", bandwidth=1.0, initial_threshold=0.3, generator=gen(6)
    )
    x = torch.randn(50, 4, generator=gen(7))
    (sae(x) - x).pow(2).sum().backward()
    assert sae.jump_threshold.grad is not None and sae.jump_threshold.grad.abs().sum() > 0


def test_unit_norm_decoder_after_training(synthetic):
    _, x = synthetic
    for arch in ("relu", "topk", "batchtopk", "jumprelu"):
        tr = SAETrainer(TrainConfig(architecture=arch, d_sae=24, k=2, n_steps=30)).fit(
            x, generator=gen(8)
        )
        assert torch.allclose(tr.sae_.decoder_norms(), torch.ones(24), atol=1e-5), arch
    free = SAETrainer(
        TrainConfig(architecture="relu", d_sae=24, n_steps=30, unit_norm_decoder=False)
    )
    norms = free.fit(x, generator=gen(8)).sae_.decoder_norms()
    assert not torch.allclose(norms, torch.ones(24), atol=1e-3)


def test_parallel_gradient_projection_is_tangent():
    sae = SparseAutoencoder(5, 7, "relu", generator=gen(9))
    sae.W_dec.grad = torch.randn(7, 5, generator=gen(10))
    sae.remove_parallel_decoder_grad()
    assert torch.allclose((sae.W_dec.grad * sae.W_dec).sum(1), torch.zeros(7), atol=1e-6)


def test_bad_arguments_raise_one_line_errors():
    with pytest.raises(InputError, match="architecture"):
        SparseAutoencoder(4, 8, "gated")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="'k'"):
        SparseAutoencoder(4, 8, "topk", k=9)
    with pytest.raises(InputError, match="last dimension 4"):
        SparseAutoencoder(4, 8, "relu").encode(torch.zeros(3, 5))
    with pytest.raises(InputError, match="'k' parameter of TrainConfig must be <= d_sae=4"):
        TrainConfig(d_sae=4, k=5)
    with pytest.raises(NotFittedError, match="fit"):
        _ = SAETrainer().sae


# -- metrics -----------------------------------------------------------------------------


def test_fvu_is_zero_for_perfect_and_one_for_the_mean():
    x = torch.randn(200, 6, generator=gen(11))
    assert fraction_of_variance_unexplained(x, x.clone()) == 0.0
    assert fraction_of_variance_unexplained(x, x.mean(0).expand_as(x)) == pytest.approx(1.0)


def test_l0_and_dead_latents():
    z = torch.tensor([[1.0, 0.0, 2.0, 0.0], [0.0, 0.0, 3.0, 0.0]])
    assert l0(z) == 1.5
    assert dead_latent_fraction(z) == 0.5


def test_trainer_tracks_dead_latents():
    """Half the latents start with an encoder bias of -100, so they can never fire (no AuxK to
    revive them): the trainer must mark exactly those dead, and they are silent on the data."""
    x = torch.randn(2000, 8, generator=gen(12))
    init = SparseAutoencoder(8, 64, "topk", k=1, generator=gen(13))
    with torch.no_grad():
        init.b_enc[:32] = -100.0
    cfg = TrainConfig(architecture="topk", d_sae=64, k=1, n_steps=60, dead_after=500,
                      auxk_alpha=0.0)
    tr = SAETrainer(cfg).fit(x, generator=gen(13), init_sae=init)
    z, _ = reconstruct(tr.sae_, x)
    silent = (z != 0).sum(0) == 0
    assert tr.dead_mask_.dtype == torch.bool and tr.dead_mask_.shape == (64,)
    assert bool(silent[:32].all()) and bool(tr.dead_mask_[:32].all())
    assert int(tr.dead_mask_.sum()) < 64  # the others fire
    assert bool(tr.dead_mask_[silent].all())  # silent on all data => dead in the trainer too
    assert tr.history_[-1]["dead_fraction"] == pytest.approx(float(tr.dead_mask_.double().mean()))
    assert dead_latent_fraction(z) >= 0.5


@pytest.mark.parametrize(
    ("arch", "extra", "max_fvu", "min_recovered"),
    [
        ("relu", {"l1_coefficient": 1.0}, 0.2, 0.8),
        ("topk", {}, 0.3, 0.8),
        ("batchtopk", {}, 0.3, 0.6),
        ("jumprelu", {}, 0.2, 0.6),
    ],
)
def test_each_architecture_recovers_known_sparse_features(
    synthetic, arch, extra, max_fvu, min_recovered
):
    data, x = synthetic
    cfg = TrainConfig(architecture=arch, d_sae=64, k=2, n_steps=500, batch_size=128, **extra)
    tr = SAETrainer(cfg).fit(x[:5000], generator=gen(14))
    z, x_hat = reconstruct(tr.sae_, x[5000:])
    fvu = fraction_of_variance_unexplained(x[5000:], x_hat)
    mmcs, share = feature_recovery(tr.sae_.W_dec.detach(), data.features, threshold=0.9)
    assert fvu < max_fvu, (arch, fvu)
    assert share >= min_recovered, (arch, share, mmcs)
    if arch == "topk":
        assert ((z != 0).sum(-1) <= 2).all()


def test_training_is_deterministic_for_a_seed(synthetic):
    _, x = synthetic
    cfg = TrainConfig(architecture="batchtopk", d_sae=16, k=2, n_steps=25, idempotency_lambda=1.0)
    a = SAETrainer(cfg).fit(x, generator=gen(15)).sae_
    b = SAETrainer(cfg).fit(x, generator=gen(15)).sae_
    assert torch.equal(a.W_dec, b.W_dec) and torch.equal(a.batch_threshold, b.batch_threshold)


def test_streaming_fit_reads_chunks(synthetic):
    _, x = synthetic
    chunks = [x[i : i + 1000] for i in range(0, 3000, 1000)]
    tr = SAETrainer(TrainConfig(d_sae=16, k=2, n_steps=1000, batch_size=100)).fit(
        iter(chunks), generator=gen(16)
    )
    assert tr.n_steps_ == 30  # the stream ran out after 3000 inputs


# -- idempotency ---------------------------------------------------------------------------


def orthonormal_topk(d: int, k: int, seed: int = 0) -> SparseAutoencoder:
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=gen(seed)))
    sae = SparseAutoencoder(d, d, "topk", k=k)
    with torch.no_grad():
        sae.W_dec.copy_(q.t())  # rows orthonormal
        sae.W_enc.copy_(q)
        sae.b_enc.zero_()
        sae.b_dec.zero_()
    return sae.eval()


def in_span_sparse(sae: SparseAutoencoder, n: int, k: int, seed: int = 1) -> torch.Tensor:
    g = gen(seed)
    codes = torch.zeros(n, sae.d_sae)
    for i in range(n):
        idx = torch.randperm(sae.d_sae, generator=g)[:k]
        codes[i, idx] = 0.5 + torch.rand(k, generator=g)
    return codes @ sae.W_dec.detach()


def test_orthonormal_topk_on_its_span_is_exactly_idempotent():
    sae = orthonormal_topk(12, 3)
    x = in_span_sparse(sae, 300, 3)
    err = reencoding_error(sae, x)
    assert float(err.max()) < 1e-5
    assert torch.equal(active_set_jaccard(sae, x), torch.ones(300, dtype=torch.float64))
    rel = per_latent_reliability(sae, x)
    assert np.nanmin(rel.numpy()) == 1.0
    d = diagnose(sae, x)
    assert d.trajectory.outcome_shares["converges"] == 1.0
    assert d.scale_error < 1e-5 and d.scale_jaccard == 1.0  # bias-free TopK is homogeneous


def test_an_exact_linear_projection_is_idempotent():
    basis, _ = torch.linalg.qr(torch.randn(10, 4, generator=gen(2)))  # [10, 4] orthonormal cols
    pair = FunctionalEncoderDecoder(lambda x: x @ basis, lambda z: z @ basis.t())
    x = torch.randn(100, 10, generator=gen(3))
    assert float(reencoding_error(pair, x).max()) < 1e-5
    traj = norm_trajectory(pair, x, 5)
    assert traj.outcome_shares["converges"] == 1.0


def test_a_non_idempotent_pair_scores_high():
    sae = orthonormal_topk(12, 3)
    x = in_span_sparse(sae, 300, 3)
    with torch.no_grad():
        sae.W_enc.mul_(2.0)  # E(D(z)) = 2z: error 1, and norms double every iteration
    err = reencoding_error(sae, x)
    assert torch.allclose(err, torch.ones_like(err), atol=1e-5)
    traj = norm_trajectory(sae, x, 8)
    assert traj.outcome_shares["explodes"] == 1.0 and traj.growth > 50
    assert np.nanmax(per_latent_reliability(sae, x).numpy()) == 0.0


def test_unstable_active_sets_lower_jaccard():
    # a random overcomplete dictionary with TopK re-encodes to different latents
    sae = SparseAutoencoder(8, 64, "topk", k=4, generator=gen(4)).eval()
    x = torch.randn(200, 8, generator=gen(5))
    assert float(active_set_jaccard(sae, x).mean()) < 0.9
    assert float(reencoding_error(sae, x).nanmean()) > 0.1


def test_scale_sensitivity_detects_a_bias():
    sae = orthonormal_topk(12, 3)
    x = in_span_sparse(sae, 100, 3)
    assert scale_sensitivity(sae, x).mean_relative_error < 1e-5
    relu = SparseAutoencoder(12, 12, "relu", generator=gen(6)).eval()
    with torch.no_grad():
        relu.b_enc.fill_(-0.3)
    assert scale_sensitivity(relu, x, [0.5, 2.0]).mean_relative_error > 0.05


def test_norm_trajectory_detects_cycles():
    flip = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    pair = FunctionalEncoderDecoder(lambda x: x @ flip, lambda z: z)
    traj = norm_trajectory(pair, torch.tensor([[1.0, 2.0], [3.0, 0.5]]), 6)
    assert traj.outcome_shares["cycles"] == 1.0


def test_idempotency_loss_lowers_reencoding_error_on_the_same_data_and_seed(synthetic):
    _, x = synthetic
    errs = {}
    for lam in (0.0, 10.0):
        cfg = TrainConfig(
            architecture="topk", d_sae=64, k=2, n_steps=300, batch_size=128, idempotency_lambda=lam
        )
        sae = SAETrainer(cfg).fit(x[:5000], generator=gen(17)).sae_
        errs[lam] = float(reencoding_error(sae, x[5000:]).nanmean())
    assert errs[10.0] < 0.8 * errs[0.0], errs


# -- I/O -------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["relu", "topk", "batchtopk", "jumprelu"])
def test_saelens_round_trip_is_exact(tmp_path, synthetic, arch):
    _, x = synthetic
    sae = (
        SAETrainer(TrainConfig(architecture=arch, d_sae=16, k=2, n_steps=20))
        .fit(x, generator=gen(18))
        .sae_
    )
    save_saelens(sae, tmp_path / "sae", hook_name="blocks.1.resid_post", model_name="chat-xs")
    back = load_saelens(tmp_path / "sae")
    assert back.architecture == arch
    for name in ("W_enc", "W_dec", "b_enc", "b_dec"):
        assert torch.equal(getattr(back, name), getattr(sae, name)), name
    assert torch.equal(back.threshold, sae.threshold)
    z, xh = reconstruct(sae, x[:200])
    z2, xh2 = reconstruct(back, x[:200])
    assert torch.equal(z, z2) and torch.equal(xh, xh2)


def test_load_saelens_reads_an_older_topk_config(tmp_path):
    import json

    import safetensors.torch as st

    d_in, d_sae = 4, 6
    st.save_file(
        {
            "W_enc": torch.randn(d_in, d_sae),
            "W_dec": torch.randn(d_sae, d_in),
            "b_enc": torch.zeros(d_sae),
            "b_dec": torch.zeros(d_in),
        },
        str(tmp_path / "sae_weights.safetensors"),
    )
    (tmp_path / "cfg.json").write_text(
        json.dumps(
            {
                "architecture": "standard",
                "activation_fn_str": "topk",
                "activation_fn_kwargs": {"k": 2},
                "d_in": d_in,
                "d_sae": d_sae,
            }
        )
    )
    sae = load_saelens(tmp_path)
    assert sae.architecture == "topk" and sae.k == 2
    with pytest.raises(DataError, match=r"cfg\.json"):
        load_saelens(tmp_path / "nowhere")


@pytest.mark.parametrize("suffix", [".pt", ".npy", ".safetensors"])
def test_activation_files_round_trip(tmp_path, suffix):
    x = torch.randn(3, 5, 7, generator=gen(19))
    path = save_activations(tmp_path / f"acts{suffix}", x)
    back = load_activations(path)
    assert torch.equal(back, x.reshape(-1, 7))


def test_activation_file_errors(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_activations(tmp_path / "missing.pt")
    torch.save({"a": torch.zeros(2, 3), "b": torch.zeros(2, 3)}, tmp_path / "two.pt")
    with pytest.raises(DataError, match="key="):
        load_activations(tmp_path / "two.pt")
    assert load_activations(tmp_path / "two.pt", key="b").shape == (2, 3)
    (tmp_path / "x.csv").write_text("1,2")
    with pytest.raises(DataError, match=r"\.csv"):
        load_activations(tmp_path / "x.csv")


def test_idempotency_loss_helps_at_matched_sparsity_and_fvu_over_seeds(synthetic):
    """TopK fixes L0 = k, so sparsity is matched; FVU may rise by at most 0.05 on average."""
    from trustlab.stats import bootstrap_ci

    _, x = synthetic
    rows = []
    for seed in range(5):
        out = {}
        for lam in (0.0, 3.0):
            cfg = TrainConfig(
                architecture="topk",
                d_sae=64,
                k=2,
                n_steps=400,
                batch_size=128,
                idempotency_lambda=lam,
            )
            sae = SAETrainer(cfg).fit(x[:5000], generator=gen(100 + seed)).sae_
            z, x_hat = reconstruct(sae, x[5000:])
            out[lam] = (
                float(reencoding_error(sae, x[5000:]).nanmean()),
                fraction_of_variance_unexplained(x[5000:], x_hat),
                l0(z),
            )
        rows.append(out)
    d_err = np.array([r[3.0][0] - r[0.0][0] for r in rows])
    d_fvu = np.array([r[3.0][1] - r[0.0][1] for r in rows])
    ci = bootstrap_ci(d_err, np.mean, rng=0)
    assert ci.high < 0, (ci, d_err)
    assert d_fvu.mean() < 0.05, d_fvu
    assert all(abs(r[3.0][2] - r[0.0][2]) < 0.1 for r in rows)


def test_the_run_seed_reaches_the_chat_corpus():
    """--seed seeds the corpus the experiment's prompts come from (before, it was fixed at 0);
    seed 0 keeps the organisms' own corpus, so the default run is unchanged."""
    from trustlab.methods.sae_idempotency.experiment import _prompts
    from trustlab.organisms import build_chat_corpus

    zero, again, three = _prompts(30, 0), _prompts(30, 0), _prompts(30, 3)
    assert zero == again and zero != three
    train0 = {ex.prompt for ex in build_chat_corpus(seed=0, n_train=100).train}
    train3 = {ex.prompt for ex in build_chat_corpus(seed=3, n_train=100).train}
    assert train0 != train3
    assert sum(any(p in text for p in train3 - train0) for text in three) > 0
