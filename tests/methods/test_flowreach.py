"""flowreach: coverage of the reach sets, AMS against exact probabilities, falsification
witnesses re-checked on onnxruntime, soundness of IBP/CROWN, and known ACAS Xu answers."""

from __future__ import annotations

import csv
import itertools
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from trustlab.core.runtime import torch_runtime
from trustlab.datasets.onnx_nets import OnnxNetwork, ReluMLP, load_instances
from trustlab.datasets.vnnlib import OutputPolytope, VnnlibRegion, VnnlibSpec, load_vnnlib
from trustlab.methods.flowreach import (
    BoxReachSet,
    EllipsoidReachSet,
    FlowMatching,
    FlowReachSet,
    VerifySettings,
    ZonotopeReachSet,
    bounded_ams,
    crown_bounds,
    deep_relu_instance,
    falsify,
    format_witness,
    ibp_bounds,
    margin_np,
    margin_torch,
    pac_rank,
    restricted_tail_exact,
    sample_box,
    verify_instance,
)
from trustlab.methods.flowreach.bounds import output_upper_bound, prove_region, prove_region_bab
from trustlab.methods.flowreach.synthetic import tight_relu_instance

VNNCOMP = Path(os.environ.get("TRUSTLAB_SHARED_DATA", Path(__file__).resolve().parents[2].parent
                              / "shared" / "data")) / "vnncomp"


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Small networks: one torch thread (restored after this module, unlike a global set)."""
    with torch_runtime(threads=1):
        yield


def _region(lo, hi, polys):
    return VnnlibRegion(np.asarray(lo, float), np.asarray(hi, float),
                        tuple(OutputPolytope(np.asarray(A, float), np.asarray(b, float))
                              for A, b in polys))


# ---------------------------------------------------------------- margins
def test_margin_sign_matches_the_spec():
    region = _region([0, 0], [1, 1], [([[1, -1, 0]], [0.0]), ([[0, 0, -1], [1, 0, 0]], [-3, 1])])
    y = np.random.default_rng(0).normal(0, 3, (2000, 3))
    m = margin_np(region, y)
    np.testing.assert_array_equal(m <= 0, region.output_violated(y))
    np.testing.assert_allclose(m, margin_torch(region, torch.as_tensor(y)).numpy())


# ---------------------------------------------------------------- conformal coverage
def test_pac_rank_gives_training_conditional_coverage():
    rng = np.random.default_rng(0)
    n, alpha, delta = 500, 0.05, 0.1
    k = pac_rank(n, alpha, delta)
    cover = [np.mean(rng.random(20000) <= np.sort(rng.random(n))[k - 1]) for _ in range(300)]
    assert np.mean(np.array(cover) < 1 - alpha) <= delta + 0.05


@pytest.mark.parametrize("cls", [BoxReachSet, EllipsoidReachSet, ZonotopeReachSet])
def test_fixed_shape_coverage_over_seeds(cls):
    alpha, covs = 0.1, []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        mix = np.array([[1.0, 0.3], [0.3, 0.5]])
        y = rng.standard_normal((1200, 2)) @ mix
        rs = cls(alpha=alpha).fit(y[:200]).calibrate(y[200:400])
        covs.append(rs.contains(y[400:]).mean())
    assert np.mean(covs) >= 1 - alpha - 0.01


@pytest.fixture(scope="module")
def banana_flow():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3000, 2))
    y = np.c_[a[:, 0], 0.3 * a[:, 1] + a[:, 0] ** 2]
    return FlowMatching(n_iters=150, seed=0).fit(y), y


@pytest.mark.parametrize("score", ["latent_norm", "nll"])
def test_flow_reach_set_coverage_over_calibrations(banana_flow, score):
    flow, _ = banana_flow
    alpha, covs = 0.1, []
    for seed in range(15):
        rng = np.random.default_rng(100 + seed)
        a = rng.standard_normal((700, 2))
        y = np.c_[a[:, 0], 0.3 * a[:, 1] + a[:, 0] ** 2]
        rs = FlowReachSet(alpha=alpha, score=score)
        rs.flow_, rs.fitted_ = flow, True  # reuse the trained flow; calibrate on fresh data
        rs.calibrate(y[:200])
        covs.append(rs.contains(y[200:]).mean())
    # marginal guarantee: mean coverage >= 1 - alpha up to Monte-Carlo error (sd ~ 0.005)
    assert np.mean(covs) >= 1 - alpha - 0.015


def test_flow_is_invertible_and_learns_the_law(banana_flow):
    flow, y = banana_flow
    z = flow.encode(y[:500])
    np.testing.assert_allclose(flow.decode(z), y[:500], atol=0.05)
    s = flow.sample(3000, np.random.default_rng(1))
    assert abs(np.mean(s[:, 1]) - np.mean(y[:, 1])) < 0.15
    # the banana's curvature is learned (a Gaussian fit would give a correlation near 0)
    assert np.corrcoef(s[:, 0] ** 2, s[:, 1])[0, 1] > 0.5


# ---------------------------------------------------------------- AMS vs exact
@pytest.mark.parametrize(("dim", "t", "radius"), [(3, 3.0, math.inf), (4, 2.2, 3.0)])
def test_ams_matches_exact_tail_probability(dim, t, radius):
    """Linear network + Gaussian latent: P(w.z >= t | ||z|| <= r) has a closed form."""
    exact = restricted_tail_exact(t, dim, radius)
    w = np.ones(dim) / np.sqrt(dim)  # score rotated off the axes
    delta, inside, above, ests = 0.1, 0, 0, []
    reps = 16
    for seed in range(reps):
        res = bounded_ams(lambda z: z @ w - t, dim, np.random.default_rng(seed), radius=radius,
                          n_particles=40, p_min=1e-8, max_rounds=1000, n_mcmc=50, delta=delta,
                          clone=False)
        assert res.finished
        inside += res.lower <= exact <= res.upper
        above += res.upper >= exact
        ests.append(res.estimate)
    assert above >= (1 - delta) * reps - 2  # upper bound above the truth in >= 1 - delta
    assert inside >= (1 - 2 * delta) * reps - 3
    assert 0.5 * exact < np.mean(ests) < 2 * exact


def test_ams_default_cloning_mode_is_conservative():
    exact = restricted_tail_exact(3.0, 3)
    ups = [bounded_ams(lambda z: z[:, 0] - 3.0, 3, np.random.default_rng(s), n_particles=32,
                       p_min=1e-8, max_rounds=1000, n_mcmc=10, delta=0.1).upper for s in range(10)]
    assert np.mean(np.array(ups) >= exact) >= 0.9


def test_ams_stops_at_p_min_with_a_valid_small_bound():
    res = bounded_ams(lambda z: z[:, 0] - 50.0, 2, np.random.default_rng(0), radius=4.0,
                      n_particles=32, p_min=1e-3, delta=0.05)
    assert not res.finished and res.n_crossed == 0
    assert res.upper < 5e-3  # p = 0 here; the bound shrinks to ~p_min


# ---------------------------------------------------------------- falsification and bounds
def _small_net(seed=0):
    rng = np.random.default_rng(seed)
    mlp = ReluMLP((rng.normal(size=(16, 3)), rng.normal(size=(16, 16)) / 3, rng.normal(size=(2, 16))),
                  (rng.normal(size=16), rng.normal(size=16), rng.normal(size=2)))
    return mlp, OnnxNetwork(mlp.to_onnx_bytes(fixed_batch=True))


def test_falsifier_witness_rechecks_on_onnxruntime():
    mlp, net = _small_net()
    x = np.random.default_rng(1).uniform(-1, 1, (20000, 3))
    y = mlp(x)
    thr = np.quantile(y[:, 0], 0.9995)  # a rare but reachable violation: Y_0 >= thr
    region = _region([-1] * 3, [1] * 3, [([[-1, 0]], [-thr])])
    res = falsify(net.to_torch(), region, net.run, np.random.default_rng(0), n_random=200,
                  n_starts=64, n_steps=80)
    assert res.counterexample is not None
    cex = res.counterexample
    assert region.contains_input(cex.x[None])[0]
    assert region.output_violated(net.run(cex.x[None]))[0]


def test_ibp_and_crown_are_sound_and_crown_is_tighter():
    mlp, _ = _small_net(3)
    lo, hi = -np.ones(3) * 0.3, np.ones(3) * 0.3
    C = np.array([[1.0, -1.0], [0.0, 1.0]])
    crown, _ = crown_bounds(mlp, lo, hi, C)
    ol, oh = ibp_bounds(mlp, lo, hi)[-1]
    ibp = np.maximum(C, 0) @ ol + np.minimum(C, 0) @ oh
    x = np.random.default_rng(0).uniform(lo, hi, (50000, 3))
    true_min = (mlp(x) @ C.T).min(axis=0)
    assert np.all(crown <= true_min + 1e-9) and np.all(ibp <= true_min + 1e-9)
    assert np.all(crown >= ibp - 1e-9)


def test_verifier_certifies_a_safe_synthetic_instance_and_writes_witness():
    mlp, spec = deep_relu_instance(3, np.random.default_rng(0), width=16)
    net = OnnxNetwork(mlp.to_onnx_bytes(), name="deep3")
    s = VerifySettings(n_train=500, n_cal=1100, flow_iters=60, ams_particles=16,
                       falsify_starts=32, falsify_steps=30, roundtrip_samples=2000,
                       falsify_until_timeout=False)
    res = verify_instance(net, spec, s, np.random.default_rng(0))
    # the 1-Lipschitz family is loose enough for unbranched CROWN: a sound proof, written unsat
    assert res.verdicts["crown"] == "unsat" and res.guarantee("crown") == "sound"
    assert format_witness(res, "crown") == "unsat\n"
    # flowreach's certificate is probabilistic: never written as unsat unless asked to
    assert res.verdicts["flowreach"] == "unsat" and res.guarantee() == "probabilistic"
    assert res.certificate <= s.epsilon
    assert format_witness(res) == "unknown\n"
    assert format_witness(res, probabilistic_unsat=True) == "unsat\n"
    cert = res.certificates["flowreach"]
    assert cert["bound"] == res.certificate and cert["alpha"] == s.alpha and cert["assumptions"]
    assert res.details[0].ams_radius >= res.details[0].radius  # inflated by the round trip
    # flip the property so that it is violated everywhere: a witness must appear and re-check
    r = spec.regions[0]
    flipped = VnnlibSpec(spec.n_inputs, spec.n_outputs, (VnnlibRegion(
        r.lower, r.upper, (OutputPolytope(-r.polytopes[0].A, -r.polytopes[0].b),)),))
    res2 = verify_instance(net, flipped, s, np.random.default_rng(0))
    assert res2.verdicts["flowreach"] == "sat" and res2.guarantee() == "falsified"
    assert res2.verdicts["crown"] != "unsat"  # the sound method cannot prove a violated spec
    text = format_witness(res2)
    assert text.startswith("sat\n((X_0 ") and "(Y_1 " in text
    assert flipped.violated(res2.counterexample.x[None], net.run(res2.counterexample.x[None]))[0]


# ---------------------------------------------------------------- real ACAS Xu answers
@pytest.mark.realdata
def test_acas_quick_subset_never_contradicts_known_answers():
    folder = VNNCOMP / "acasxu"
    if not folder.is_dir():
        pytest.skip(f"VNN-COMP data not available here: {folder}")
    with (folder / "known_results_vnncomp2025.csv").open() as fh:
        known = {(r["onnx"], r["vnnlib"]): r["expected"] for r in csv.DictReader(fh)}
    wanted = {("ACASXU_run2a_2_3_batch_2000.onnx", "prop_2.vnnlib"),   # sat
              ("ACASXU_run2a_4_8_batch_2000.onnx", "prop_3.vnnlib"),   # unsat
              ("ACASXU_run2a_2_8_batch_2000.onnx", "prop_1.vnnlib")}   # unsat
    s = VerifySettings(n_train=500, n_cal=1100, flow_iters=60, ams_particles=16,
                       falsify_starts=128, falsify_steps=60, timeout=3.0, clock="process",
                       roundtrip_samples=2000)
    for inst in (i for i in load_instances(folder) if i.key in wanted):
        net, spec = OnnxNetwork(inst.onnx), load_vnnlib(inst.vnnlib)
        res = verify_instance(net, spec, s, np.random.default_rng(0))
        expected = known[inst.key]
        for method, verdict in res.verdicts.items():
            assert not (verdict == "sat" and expected == "unsat"), method
            if res.guarantee(method) == "sound":
                assert not (verdict == "unsat" and expected == "sat"), method
        if res.counterexample is not None:
            assert spec.violated(res.counterexample.x[None], net.run(res.counterexample.x[None]))[0]
        if expected == "sat":
            assert res.verdicts["flowreach"] == "sat"


@pytest.mark.parametrize("cls", [BoxReachSet, EllipsoidReachSet, ZonotopeReachSet])
def test_fixed_shapes_handle_degenerate_outputs(cls):
    rng = np.random.default_rng(0)
    y = np.c_[rng.standard_normal(400), np.full(400, 2.0)]  # a constant output column
    rs = cls(alpha=0.1).fit(y[:200]).calibrate(y[200:])
    far = _region([0], [1], [([[1.0, 0.0]], [-50.0])])  # y0 <= -50: far outside the set
    near = _region([0], [1], [([[1.0, 0.0]], [0.0])])  # y0 <= 0: inside the set
    assert not rs.intersects(far) and rs.intersects(near)


# ---------------------------------------------------------------- float32 inputs stay in the box
def test_sample_box_stays_inside_bounds_float32_cannot_represent():
    # float32 cannot represent 0.3 or 0.3 + 1e-7: plain rounding leaves the box in about a
    # third of the draws; every sample (and every confirmed witness) must lie inside it
    region = _region([0.3, -1.0], [0.3 + 1e-7, 1.0], [([[1.0, 0.0]], [10.0])])
    x = sample_box(region, 5000, np.random.default_rng(0))
    assert x.dtype == np.float32 and region.contains_input(x).all()
    rounded = (region.lower + (region.upper - region.lower)
               * np.random.default_rng(0).random((5000, 2))).astype(np.float32)
    assert not region.contains_input(rounded).all()  # the failure this guards against


# ---------------------------------------------------------------- sound bounds never prove a violated property
@pytest.mark.parametrize("seed", range(6))
def test_sound_methods_never_prove_a_property_with_a_known_violating_point(seed):
    rng = np.random.default_rng(seed)
    dims = [3, 12, 12, 12, 2]
    pairs = list(itertools.pairwise(dims))
    mlp = ReluMLP(tuple(rng.normal(size=(o, i)) * np.sqrt(2 / i) for i, o in pairs),
                  tuple(0.1 * rng.normal(size=o) for o in dims[1:]))
    lo, hi = -np.full(3, 0.5), np.full(3, 0.5)
    x_bad = rng.uniform(lo, hi)
    y_bad = mlp(x_bad[None])[0]
    # unsafe iff Y_0 - Y_1 >= value at x_bad (minus a hair): x_bad violates it by construction
    region = _region(lo, hi, [([[-1.0, 1.0]], [-(y_bad[0] - y_bad[1]) + 1e-9])])
    assert region.output_violated(y_bad[None])[0]
    for method in ("ibp", "crown"):
        assert prove_region(mlp, region, method).verdict != "unsat", method
    assert prove_region_bab(mlp, region, timeout=2.0).verdict in ("sat", "timeout")
    # and CROWN's lower bound of every atom is below the atom's value at the violating point
    lb, _ = crown_bounds(mlp, lo, hi, region.polytopes[0].A)
    assert np.all(lb <= region.polytopes[0].A @ y_bad + 1e-9)


def test_bab_proves_a_tight_shallow_property_and_threshold_is_above_the_max():
    mlp, spec, info = tight_relu_instance(2, np.random.default_rng(3), width=16, n_samples=4000)
    region = spec.regions[0]
    y = mlp(np.random.default_rng(9).uniform(region.lower, region.upper, (50000, 4)))
    assert y[:, 0].max() < info.threshold  # the property holds on fresh samples
    assert info.threshold == pytest.approx(info.best_max + 0.05 * (info.best_max - info.best_min))
    assert prove_region(mlp, region, "crown").verdict == "unknown"  # tight: unbranched CROWN fails
    res = prove_region_bab(mlp, region, timeout=30.0)
    assert res.verdict == "unsat" and res.boxes > 1
    # the CROWN upper bound of Y_0 is sound and its looseness is positive
    assert output_upper_bound(mlp, region.lower, region.upper, np.array([1.0, 0.0])) >= y[:, 0].max()


def test_frozen_velocity_matches_the_module(banana_flow):
    flow, _ = banana_flow
    v = flow.velocity_
    x = torch.randn(50, flow.dim_)
    for t in (0.0, 0.37, 1.0):
        tt = torch.tensor(t)
        assert torch.allclose(v.frozen()(x, tt), v(x, tt), atol=1e-5)


# ---------------------------------------------------------------- the disputed MNIST rows, on the copied files
@pytest.mark.realdata
def test_mnist_disputed_rows_are_decided_on_the_copied_files():
    """img0 (recorded unsat) has a real counterexample; img16 (recorded sat) is proved by CROWN.

    The VNN-COMP 2025 answers refer to regenerated files (other random images); see the docs.
    """
    folder = VNNCOMP / "cora_mnist"
    if not folder.is_dir():
        pytest.skip(f"VNN-COMP data not available here: {folder}")
    import onnxruntime as ort

    onnx_path = folder / "onnx" / "mnist-set.onnx"
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    net = OnnxNetwork(onnx_path)
    mlp = net.relu_mlp()
    rng = np.random.default_rng(0)
    # img0: a uniform sample already violates; the witness lies in the box and the untouched
    # graph on onnxruntime puts another class at or above the property's class 7
    r0 = load_vnnlib(folder / "vnnlib" / "mnist-img0.vnnlib").regions[0]
    res = falsify(net.mlp_torch(), r0, net.run, rng, n_random=500, n_starts=0, n_steps=0)
    cex = res.counterexample
    assert cex is not None and r0.contains_input(cex.x[None])[0]
    y = sess.run(None, {"input": cex.x[None].astype(np.float32)})[0][0]
    assert y.argmax() != 7 and y.max() - y[7] > 1.0
    assert prove_region(mlp, r0, "crown").verdict == "unknown"
    # the recovered nominal image (box centre before clipping to [0, 1]) is classified 7
    x0 = np.where(r0.upper < 1, r0.upper - 0.1, r0.lower + 0.1).astype(np.float32)
    assert sess.run(None, {"input": x0[None]})[0][0].argmax() == 7
    # img16: CROWN proves it, and its per-atom lower bounds are below sampled and attacked minima
    r16 = load_vnnlib(folder / "vnnlib" / "mnist-img16.vnnlib").regions[0]
    C = np.concatenate([p.A for p in r16.polytopes])
    lb, _ = crown_bounds(mlp, r16.lower, r16.upper, C)
    assert prove_region(mlp, r16, "crown").verdict == "unsat" and lb.min() > 4.0
    xs = sample_box(r16, 2000, rng)
    atk = falsify(net.mlp_torch(), r16, net.run, rng, n_random=0, n_starts=16, n_steps=40)
    ys = sess.run(None, {"input": xs})[0].astype(np.float64)
    assert np.all(lb <= (ys @ C.T).min(axis=0) + 1e-6)
    assert atk.counterexample is None and atk.best_margin >= lb.min() - 1e-4
