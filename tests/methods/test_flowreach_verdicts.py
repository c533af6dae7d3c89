"""flowreach: what a verdict guarantees and how it is written, scored and checked.

Result files say ``unsat`` only for sound proofs; the sidecar JSON validates against the
documented schema; witnesses are re-checked on an untouched session; the scoring and
wrong-verdict rules; no headline over nothing; the batched CROWN and the box search; AMS
coverage at the verifier's own settings; input validation (incl. a hypothesis property test).
"""

from __future__ import annotations

import itertools
import json
import math

import jsonschema
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import integrate, stats
from tests.cli_inprocess import run_cli

from trustlab.core.errors import InputError
from trustlab.datasets.onnx_nets import OnnxNetwork, ReluMLP
from trustlab.datasets.vnncomp import load_known_results
from trustlab.datasets.vnnlib import (
    OutputPolytope,
    VnnlibRegion,
    VnnlibSpec,
    format_vnnlib,
)
from trustlab.methods.flowreach import (
    SIDECAR_SCHEMA,
    BoxReachSet,
    BoxSearch,
    FlowMatching,
    VerifySettings,
    bounded_ams,
    calibrated_threshold,
    crown_bounds,
    crown_bounds_batch,
    deep_relu_instance,
    falsify,
    is_wrong,
    margin_np,
    min_certificate,
    polish_lp,
    prove_region_bab,
    recheck_witness,
    restricted_tail_exact,
    sample_box,
    verify_instance,
    vnncomp_score,
    write_result,
    written_answer,
)
from trustlab.methods.flowreach.results import sidecar_path

torch.set_num_threads(1)
FAST = dict(n_train=400, n_cal=1000, flow_iters=40, ams_particles=16, falsify_starts=32,
            falsify_steps=30, roundtrip_samples=1000, falsify_until_timeout=False)


def _flip(spec: VnnlibSpec) -> VnnlibSpec:
    r = spec.regions[0]
    return VnnlibSpec(spec.n_inputs, spec.n_outputs, (VnnlibRegion(
        r.lower, r.upper, (OutputPolytope(-r.polytopes[0].A, -r.polytopes[0].b),)),))


@pytest.fixture(scope="module")
def deep3():
    mlp, spec = deep_relu_instance(3, np.random.default_rng(0), width=16)
    return mlp, spec, OnnxNetwork(mlp.to_onnx_bytes(fixed_batch=True), name="deep3")


@pytest.fixture(scope="module")
def files(deep3, tmp_path_factory):
    mlp, spec, _ = deep3
    d = tmp_path_factory.mktemp("inst")
    (d / "net.onnx").write_bytes(mlp.to_onnx_bytes(fixed_batch=True))
    (d / "safe.vnnlib").write_text(format_vnnlib(spec))
    (d / "unsafe.vnnlib").write_text(format_vnnlib(_flip(spec)))
    return d


# ---------------------------------------------------------------- result files and sidecars
def test_result_file_writes_unsat_only_for_sound_proofs(deep3, files, tmp_path):
    _, spec, net = deep3
    s = VerifySettings(**FAST, baselines=False, sound=False)
    res = verify_instance(net, spec, s, np.random.default_rng(0))
    assert res.verdicts["flowreach"] == "unsat" and res.guarantee() == "probabilistic"
    out = tmp_path / "r.txt"
    text, record = write_result(out, res, net, spec, files / "net.onnx", files / "safe.vnnlib")
    assert out.read_text() == text == "unknown\n"
    side = json.loads(sidecar_path(out).read_text())
    jsonschema.validate(side, SIDECAR_SCHEMA)
    assert side == record and side["guarantee"] == "probabilistic"
    assert side["result_written"] == "unknown" and side["verdict"] == "unsat"
    cert = side["certificate"]
    assert cert["bound"] <= s.epsilon and cert["n_cal"] == s.n_cal and cert["alpha"] == s.alpha
    assert cert["regions"][0]["ams_radius"] >= cert["regions"][0]["radius"]
    text, side = write_result(out, res, net, spec, files / "net.onnx", files / "safe.vnnlib",
                              probabilistic_unsat=True)
    assert text == "unsat\n" and side["probabilistic_unsat"] is True
    jsonschema.validate(side, SIDECAR_SCHEMA)
    # a sound proof (the pipeline's CROWN box search closes the box) is written unsat
    s2 = VerifySettings(**{**FAST, "falsify_until_timeout": True}, timeout=3.0, clock="process",
                        baselines=False, sound=False)
    res2 = verify_instance(net, spec, s2, np.random.default_rng(0))
    assert res2.proved_by_search and res2.guarantee() == "sound"
    text, side = write_result(out, res2, net, spec, files / "net.onnx", files / "safe.vnnlib")
    assert text == "unsat\n" and side["certificate"] is None
    jsonschema.validate(side, SIDECAR_SCHEMA)


def test_witness_file_and_untouched_recheck(deep3, files, tmp_path):
    _, spec, net = deep3
    bad = _flip(spec)
    res = verify_instance(net, bad, VerifySettings(**FAST, baselines=False, sound=False),
                          np.random.default_rng(0))
    assert res.guarantee() == "falsified"
    text, side = write_result(tmp_path / "w.txt", res, net, bad, files / "net.onnx",
                              files / "unsafe.vnnlib")
    assert text.startswith("sat\n((X_0 ")
    jsonschema.validate(side, SIDECAR_SCHEMA)
    w = side["witness"]
    assert w["confirmed"] and w["margin"] <= 0 and w["small_margin"] == (abs(w["margin"]) < 1e-4)
    # the re-check runs a fresh batch-1 session: same numbers as run() to float32 precision
    x = np.asarray(w["x"], np.float32)[None]
    np.testing.assert_allclose(net.recheck(x), net.run(x), rtol=1e-5, atol=1e-6)
    # a point outside the unsafe set is not confirmed
    assert not recheck_witness(net, spec, x[0])["confirmed"]


def test_schema_rejects_a_probabilistic_unsat_without_certificate_fields(deep3, files):
    _, spec, net = deep3
    res = verify_instance(net, spec, VerifySettings(**FAST, baselines=False, sound=False),
                          np.random.default_rng(1))
    from trustlab.methods.flowreach.results import sidecar_record

    rec = sidecar_record(res, files / "net.onnx", files / "safe.vnnlib", "unknown",
                         probabilistic_unsat=False, witness=None)
    jsonschema.validate(rec, SIDECAR_SCHEMA)
    del rec["certificate"]["alpha"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(rec, SIDECAR_SCHEMA)
    rec["certificate"] = None
    rec["result_written"] = "proved"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(rec, SIDECAR_SCHEMA)


def _trustlab(argv: list[str], capsys) -> tuple[int, str]:
    """``trustlab ARGV`` in-process: exit code and stderr."""
    code, _out, err = run_cli(argv, capsys)
    return code, err


def test_cli_writes_result_and_sidecar_and_checks_paths_first(files, tmp_path, capsys):
    out = tmp_path / "res.txt"
    cmd = ["verify", str(files / "net.onnx"), str(files / "safe.vnnlib"), "--timeout", "4",
           "--result-file", str(out)]
    code, err = _trustlab(cmd, capsys)
    assert code == 0, err[-2000:]
    first = out.read_text().split("\n", 1)[0]
    side = json.loads(sidecar_path(out).read_text())
    jsonschema.validate(side, SIDECAR_SCHEMA)
    assert first == side["result_written"]
    assert first != "unsat" or side["guarantee"] == "sound"
    # an unwritable result path fails in one line before any work
    bad = tmp_path / "missing_dir" / "r.txt"
    code, err = _trustlab([*cmd[:-1], str(bad)], capsys)
    assert code == 2 and "does not exist" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and not bad.parent.exists(), err


# ---------------------------------------------------------------- scoring and wrong verdicts
def test_written_answers_and_scores():
    assert written_answer("unsat", "probabilistic") == "unknown"
    assert written_answer("unsat", "probabilistic", probabilistic_unsat=True) == "unsat"
    assert written_answer("unsat", "sound") == "unsat"
    assert written_answer("sat", "falsified") == "sat"
    assert written_answer("timeout", "none") == "timeout"
    assert vnncomp_score("unsat", "unsat") == 10 and vnncomp_score("sat", "sat") == 10
    assert vnncomp_score("unsat", "sat") == -150 and vnncomp_score("sat", "unsat") == -150
    assert vnncomp_score("unknown", "sat") == 0 and vnncomp_score("unsat", "") == 0
    with pytest.raises(InputError):
        written_answer("proved", "sound")


def test_wrong_verdict_rule():
    # a sound proof of a known-sat instance is always wrong (ACAS Xu never excuses it)
    assert is_wrong("unsat", "sound", "sat")
    assert not is_wrong("unsat", "sound", "sat", disputed=True)  # MNIST rows only
    # a probabilistic certificate on a known-sat instance is wrong unless a fresh bound shows
    # the violation probability is below epsilon
    assert is_wrong("unsat", "probabilistic", "sat", violation_upper=0.02, epsilon=0.01)
    assert is_wrong("unsat", "probabilistic", "sat", violation_upper=None)
    assert not is_wrong("unsat", "probabilistic", "sat", violation_upper=2e-4, epsilon=0.01)
    assert is_wrong("sat", "falsified", "unsat")
    assert is_wrong("sat", "falsified", "sat", witness_confirmed=False)
    assert not is_wrong("unknown", "none", "sat") and not is_wrong("unsat", "sound", "unsat")


def test_disputes_are_for_mnist_rows_only():
    from trustlab.methods.flowreach.results import is_disputed

    assert is_disputed("mnist", "sat", sound_unsat=True, witness_confirmed=None)
    assert is_disputed("mnist", "unsat", sound_unsat=False, witness_confirmed=True)
    assert not is_disputed("acasxu", "sat", sound_unsat=True, witness_confirmed=None)
    assert not is_disputed("acasxu", "unsat", sound_unsat=False, witness_confirmed=True)
    assert not is_disputed("mnist", "unsat", sound_unsat=True, witness_confirmed=False)


@pytest.mark.realdata
def test_sound_methods_never_prove_a_known_sat_acas_xu_instance():
    """On ACAS Xu a CROWN proof of a known-sat instance is a bug (the files are VNN-COMP's):
    unbranched CROWN and CROWN+BaB (a short budget) must not say unsat on any of the 47."""
    import os
    from pathlib import Path

    from trustlab.datasets.onnx_nets import load_instances
    from trustlab.datasets.vnnlib import load_vnnlib
    from trustlab.methods.flowreach.bounds import prove_region

    folder = Path(os.environ.get("TRUSTLAB_SHARED_DATA", Path(__file__).resolve().parents[2]
                                 .parent / "shared" / "data")) / "vnncomp" / "acasxu"
    if not folder.is_dir():
        pytest.skip(f"VNN-COMP data not available here: {folder}")
    known = load_known_results(folder)
    sat = [i for i in load_instances(folder) if known[i.key].expected == "sat"]
    assert len(sat) == 47
    import time

    for inst in sat:
        mlp = OnnxNetwork(inst.onnx).relu_mlp()
        for region in load_vnnlib(inst.vnnlib).regions:
            assert prove_region(mlp, region, "crown").verdict != "unsat", inst.key
            bab = prove_region_bab(mlp, region, timeout=0.3, clock=time.process_time)
            assert bab.verdict != "unsat", inst.key
            if bab.verdict == "sat":  # a violating box centre: it must really violate
                assert region.output_violated(mlp(bab.witness[None]))[0]


def test_monte_carlo_dominance_bound():
    """flowreach's certificate alpha + u can never go below 1 - delta^(1/n_cal), which is above
    Monte Carlo's Clopper-Pearson bound on the same n_train + n_cal samples."""
    from trustlab.stats import clopper_pearson_upper

    for n_train, n_cal, delta in ((1500, 2000, 0.01), (500, 1000, 0.05), (4000, 4000, 0.001)):
        alpha = 1.0 - delta ** (1.0 / n_cal) + 1e-6
        s = VerifySettings(n_train=n_train, n_cal=n_cal, delta=delta, ams_delta=delta,
                           alpha=alpha, epsilon=0.5)
        floor = min_certificate(s)
        assert floor == pytest.approx(float(clopper_pearson_upper(0, n_cal, delta)), rel=1e-6)
        assert float(clopper_pearson_upper(0, n_train + n_cal, delta)) < floor
        with pytest.raises(InputError, match="n_cal"):
            VerifySettings(n_cal=n_cal, delta=delta, alpha=alpha * 0.9, epsilon=0.5)


# ---------------------------------------------------------------- no headline over nothing
def test_no_data_no_verdict_headline(tmp_path):
    from trustlab.core import run_experiment

    empty = tmp_path / "nodata"
    empty.mkdir()
    run = run_experiment("flowreach", quick=True, seed=1, out_dir=tmp_path / "run",
                         overrides={"data_dir": str(empty), "depths": [2]})
    data = json.loads(run.report_path.read_text())
    assert data["headline"]["evaluated"] == 0
    verdictish = ("wrong", "score", "certified", "falsified", "unsat_on_known_sat", "proved")
    assert not [k for k in data["headline"] if any(v in k for v in verdictish)]
    assert not [k for k in data["metrics"] if k.startswith(("wrong", "acas_"))]
    assert any("not evaluated" in n for n in data["notes"])


# ---------------------------------------------------------------- bounds and box search
def _mlp(seed, dims=(3, 12, 12, 2)):
    rng = np.random.default_rng(seed)
    return ReluMLP(tuple(rng.normal(size=(o, i)) * np.sqrt(2 / i) for i, o in itertools.pairwise(dims)),
                   tuple(0.1 * rng.normal(size=o) for o in dims[1:]))


def test_batched_crown_is_at_least_crown_and_sound():
    mlp = _mlp(0)
    rng = np.random.default_rng(1)
    lo = rng.uniform(-1, 0, (7, 3))
    hi = lo + rng.uniform(0.05, 1, (7, 3))
    C = np.array([[1.0, -1.0], [0.0, 1.0]])
    lb, A = crown_bounds_batch(mlp, lo, hi, C)
    assert A.shape == (7, 2, 3)
    for i in range(7):
        single, _ = crown_bounds(mlp, lo[i], hi[i], C)
        # the same back-substitution; neurons that interval bounds already find stable get
        # their exact relaxation, so the batched bound is never looser
        assert np.all(lb[i] >= single - 1e-10)
        x = rng.uniform(lo[i], hi[i], (4000, 3))
        assert np.all(lb[i] <= (mlp(x) @ C.T).min(axis=0) + 1e-9)


def test_box_search_proves_and_falsifies():
    mlp = _mlp(2)
    lo, hi = -np.ones(3) * 0.5, np.ones(3) * 0.5
    y = mlp(np.random.default_rng(0).uniform(lo, hi, (20000, 3)))
    safe = VnnlibRegion(lo, hi, (OutputPolytope(np.array([[-1.0, 0.0]]),
                                                np.array([-(y[:, 0].max() + 0.1 * np.ptp(
                                                    y[:, 0]))])),))
    res = prove_region_bab(mlp, safe, timeout=30.0)
    assert res.verdict == "unsat" and res.boxes > 1
    unsafe = VnnlibRegion(lo, hi, (OutputPolytope(np.array([[-1.0, 0.0]]),
                                                  np.array([-np.quantile(y[:, 0], 0.999)])),))
    res = prove_region_bab(mlp, unsafe, timeout=30.0)
    assert res.verdict == "sat" and unsafe.output_violated(mlp(res.witness[None]))[0]
    search = BoxSearch(mlp, unsafe)
    blo, bhi = search.worst(3)
    assert blo.shape == bhi.shape and np.all(blo <= bhi)


def test_lp_descent_reaches_a_violation_adam_misses():
    """On a thin violation set, exact linear-region descent from a nearby point gets inside."""
    mlp = _mlp(5, (2, 16, 16, 1))
    lo, hi = -np.ones(2), np.ones(2)
    x = np.random.default_rng(0).uniform(lo, hi, (200000, 2))
    top = mlp(x)[:, 0].max()
    region = VnnlibRegion(lo, hi, (OutputPolytope(np.array([[-1.0]]), np.array([-top])),))
    start = x[np.argsort(mlp(x)[:, 0])[-5000]]
    xb, mb = polish_lp(mlp, region, start)
    assert mb <= float(margin_np(region, mlp(start[None]))[0])
    assert region.contains_input(xb[None])[0]


def test_falsifier_spends_the_budget_only_when_needed():
    mlp = _mlp(3)
    net = OnnxNetwork(mlp.to_onnx_bytes())
    lo, hi = -np.ones(3) * 0.5, np.ones(3) * 0.5
    y = mlp(np.random.default_rng(0).uniform(lo, hi, (20000, 3)))
    easy = VnnlibRegion(lo, hi, (OutputPolytope(np.array([[-1.0, 0.0]]),
                                                np.array([-np.median(y[:, 0])])),))
    r = falsify(net.mlp_torch(), easy, net.run, np.random.default_rng(0), n_random=500,
                n_starts=32, n_steps=20, max_rounds=None, time_limit=30.0, mlp=mlp)
    # stopped at the uniform samples: no gradient step was spent (a count, not a clock)
    assert r.counterexample is not None and r.stage == "random" and r.n_evaluated == 500
    safe = VnnlibRegion(lo, hi, (OutputPolytope(np.array([[-1.0, 0.0]]),
                                                np.array([-(y[:, 0].max() + 1.0)])),))
    r = falsify(net.mlp_torch(), safe, net.run, np.random.default_rng(0), n_random=500,
                n_starts=32, n_steps=20, max_rounds=None, time_limit=20.0, mlp=mlp)
    assert r.counterexample is None and r.proved  # the box search closes: no budget wasted


# ---------------------------------------------------------------- AMS at the verifier's settings
def _needle_exact(t, h, dim, r):
    def f(z2, z1):
        return (stats.norm.pdf(z1) * stats.norm.pdf(z2)
                * stats.chi2.cdf(max(r * r - z1 * z1 - z2 * z2, 0.0), dim - 2))

    num, _ = integrate.dblquad(f, t, r, -h, h, epsabs=1e-14, epsrel=1e-9)
    return num / stats.chi2.cdf(r * r, dim)


_DIM, _R = 5, 4.0
_W = np.ones(_DIM) / np.sqrt(_DIM)
AMS_CASES = {
    "half-space tail": (lambda z: z @ _W - 2.6, lambda: restricted_tail_exact(2.6, _DIM, _R)),
    "two disconnected caps": (lambda z: np.maximum(z @ _W - 2.9, -(z @ _W) - 3.1),
                              lambda: restricted_tail_exact(2.9, _DIM, _R)
                              + restricted_tail_exact(3.1, _DIM, _R)),
    "thin sliver": (lambda z: np.minimum(z[:, 0] - 1.8, 0.05 - np.abs(z[:, 1])),
                    lambda: _needle_exact(1.8, 0.05, _DIM, _R)),
    "sliver below p_min": (lambda z: np.minimum(z[:, 0] - 2.2, 0.05 - np.abs(z[:, 1])),
                           lambda: _needle_exact(2.2, 0.05, _DIM, _R)),
}


@pytest.mark.parametrize("case", list(AMS_CASES))
def test_ams_upper_bound_coverage_at_the_verifiers_settings(case):
    """200 repetitions at delta = 0.01 with the verifier's AMS settings (32 particles, p_min
    1e-3, 6 MCMC steps, cloning, 40 rounds) in the latent dimension of ACAS Xu (5) and a ball
    radius like its calibrated ones: the upper bound must cover the exact probability in at
    least 1 - delta - 2 SE of the repetitions."""
    s = VerifySettings()
    score, exact_fn = AMS_CASES[case]
    exact = exact_fn()
    reps, delta = 200, s.ams_delta
    cover = 0
    for seed in range(reps):
        res = bounded_ams(score, _DIM, np.random.default_rng(seed), radius=_R,
                          n_particles=s.ams_particles, p_min=s.ams_p_min, n_mcmc=s.ams_mcmc,
                          max_rounds=s.ams_max_rounds, delta=delta, clone=s.ams_clone)
        cover += res.upper >= exact
    se = math.sqrt(delta * (1 - delta) / reps)
    assert cover / reps >= 1 - delta - 2 * se, (case, exact, cover)


# ---------------------------------------------------------------- known answers reader
def test_known_results_reader(tmp_path):
    assert load_known_results(tmp_path) == {}
    (tmp_path / "known_results_vnncomp2025.csv").write_text(
        "onnx,vnnlib,expected,alpha_beta_crown_result,alpha_beta_crown_time_s\n"
        "a.onnx,p.vnnlib,sat,sat,1.5\nb.onnx,p.vnnlib,unsat,timeout,\n")
    known = load_known_results(tmp_path)
    assert known[("a.onnx", "p.vnnlib")].expected == "sat"
    assert known[("a.onnx", "p.vnnlib")].tool("alpha_beta_crown") == ("sat", 1.5)
    assert known[("b.onnx", "p.vnnlib")].tool("alpha_beta_crown") == ("timeout", None)
    (tmp_path / "known_results_vnncomp2025.csv").write_text("onnx,vnnlib,expected\na,b,maybe\n")
    from trustlab.core.errors import DataError

    with pytest.raises(DataError, match="maybe"):
        load_known_results(tmp_path)


# ---------------------------------------------------------------- input validation (issue 38)
def test_settings_and_entry_points_reject_bad_input_naming_the_parameter(deep3):
    _, spec, net = deep3
    for bad, name in (({"alpha": 0.0}, "alpha"), ({"alpha": float("nan")}, "alpha"),
                      ({"n_cal": 10}, "n_cal"), ({"timeout": -1}, "timeout"),
                      ({"alpha": 0.2, "epsilon": 0.1}, "epsilon"),
                      ({"clock": "sundial"}, "clock"), ({"nope": 1}, "nope")):
        with pytest.raises(InputError, match=name):
            VerifySettings(**bad)
    with pytest.raises(InputError, match="'spec'"):
        verify_instance(net, "prop.vnnlib")
    with pytest.raises(InputError, match="'rng'"):
        verify_instance(net, spec, VerifySettings(**FAST), rng=0)
    with pytest.raises(InputError, match="'settings'"):
        verify_instance(net, spec, {"alpha": 0.1})
    region = spec.regions[0]
    with pytest.raises(InputError, match="time_limit"):
        falsify(net.mlp_torch(), region, net.run, np.random.default_rng(0), time_limit=math.nan)
    with pytest.raises(InputError, match="n_starts"):
        falsify(net.mlp_torch(), region, net.run, np.random.default_rng(0), n_starts=-1)
    with pytest.raises(InputError, match="inputs per row"):
        net.recheck(np.zeros((1, 7)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    alpha=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2, 2),
                    st.text(max_size=3), st.none()),
    n_cal=st.one_of(st.integers(-5, 5000), st.floats(allow_nan=True), st.text(max_size=2)),
    timeout=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-3, 3)),
    n_particles=st.integers(-3, 40),
    p_min=st.floats(allow_nan=True, allow_infinity=True),
    radius=st.floats(allow_nan=True, allow_infinity=True),
)
def test_public_api_property_correct_result_or_input_error(alpha, n_cal, timeout, n_particles,
                                                          p_min, radius):
    """Malformed settings and AMS arguments give a valid object or InputError, never a raw
    exception or a NaN-filled result."""
    try:
        s = VerifySettings(alpha=alpha, n_cal=n_cal, timeout=timeout)
    except InputError:
        pass
    else:
        assert 0 < s.alpha < 1 and s.n_cal >= 50 and math.isfinite(s.timeout) and s.timeout > 0
        assert s.alpha <= s.epsilon
    try:
        res = bounded_ams(lambda z: z[:, 0] - 3.0, 2, np.random.default_rng(0), radius=radius,
                          n_particles=n_particles, p_min=p_min, max_rounds=3, delta=0.1)
    except InputError:
        pass
    else:
        assert 0 <= res.upper <= 1 and math.isfinite(res.estimate)
        assert n_particles >= 2 and 0 < p_min < 1 and radius > 0


_bad_floats = st.sampled_from([float("nan"), float("inf"), -float("inf"), 0.0, -1.0, 1.0, 0.3])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(0, 6), cols=st.integers(0, 4), poison=_bad_floats,
    where=st.integers(0, 30), alpha=_bad_floats, n=st.one_of(st.integers(-3, 5), st.just(2.5)),
)
def test_array_entry_points_property(rows, cols, poison, where, alpha, n):
    """Arrays of any shape with NaN/inf cells: a correct result or InputError naming the
    parameter, never a raw exception or a NaN result."""
    rng = np.random.default_rng(0)
    y = rng.normal(size=(rows, cols))
    if y.size:
        y.flat[where % y.size] = poison
    region = VnnlibRegion(np.zeros(2), np.ones(2), (OutputPolytope(np.eye(3)[:1], np.zeros(1)),))
    mlp = _mlp(0, (2, 4, 3))
    calls = [
        lambda: margin_np(region, y),
        lambda: BoxReachSet(alpha=alpha).fit(y).calibrate(y),
        lambda: calibrated_threshold(y.ravel(), alpha, None),
        lambda: sample_box(region, n, rng),
        lambda: crown_bounds(mlp, y.ravel()[:2], y.ravel()[:2] + 0.1, np.eye(3)),
        lambda: FlowMatching(n_iters=2).fit(y),
    ]
    for call in calls:
        try:
            out = call()
        except InputError as exc:
            assert str(exc) and "\n" not in str(exc)
            continue
        if isinstance(out, tuple):
            out = out[0]
        # never NaN (an infinite output has an infinite margin, which is correct)
        if isinstance(out, np.ndarray) and out.dtype.kind == "f":
            assert not np.isnan(out).any()
        elif isinstance(out, float):
            assert not math.isnan(out)


@pytest.mark.realdata
@pytest.mark.parametrize("flag", [False, True])
def test_cli_benchmark_result_files_on_acas_xu(tmp_path, flag, capsys):
    """Every result file the CLI writes over ACAS Xu instances: `unsat` only from a sound proof
    unless --probabilistic-unsat was given; every sidecar validates; the CSV carries the
    guarantee and certificate columns."""
    import csv
    import os
    from pathlib import Path

    folder = Path(os.environ.get("TRUSTLAB_SHARED_DATA", Path(__file__).resolve().parents[2]
                                 .parent / "shared" / "data")) / "vnncomp" / "acasxu"
    if not folder.is_dir():
        pytest.skip(f"VNN-COMP data not available here: {folder}")
    picks = [("1_1", "prop_1"), ("1_1", "prop_3"), ("2_1", "prop_2"), ("4_1", "prop_4")]
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "instances.csv").write_text("".join(
        f"{folder / 'onnx' / f'ACASXU_run2a_{n}_batch_2000.onnx'},{folder / 'vnnlib' / p}.vnnlib,"
        "116\n" for n, p in picks))
    out = tmp_path / "res"
    # process seconds: the known-sat 2_1/prop_2 falsified in well under 0.1 CPU-s whatever
    # the load (a wall budget shrinks with the machine's load)
    cmd = ["verify", "--benchmark", str(bench), "--timeout", "4", "--clock", "process",
           "--result-dir", str(out), "--result-file", str(tmp_path / "s.csv")]
    code, err = _trustlab(cmd + (["--probabilistic-unsat"] if flag else []), capsys)
    assert code == 0, err[-2000:]
    files = sorted(out.glob("*.txt"))
    assert len(files) == len(picks)
    for f in files:
        first = f.read_text().split("\n", 1)[0]
        side = json.loads(sidecar_path(f).read_text())
        jsonschema.validate(side, SIDECAR_SCHEMA)
        assert side["result_written"] == first and side["probabilistic_unsat"] is flag
        if first == "unsat":
            assert side["guarantee"] == "sound" or (flag and side["guarantee"] == "probabilistic")
        if side["guarantee"] == "probabilistic" and not flag:
            assert first == "unknown" and side["certificate"]["bound"] <= 0.01
        if "2_1" in f.name:  # known sat: a witness, re-checked
            assert first == "sat" and side["witness"]["confirmed"]
    rows = list(csv.DictReader((tmp_path / "s.csv").open()))
    assert {"guarantee", "certificate", "result", "verdict"} <= set(rows[0])
