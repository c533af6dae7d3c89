"""Property tests of trustlab.core.units without Ray: seeds, order independence, the store, retries.

Public names covered: WorkUnit, Sweep, SweepResult, UnitOutcome, UnitStore, UnitsFailedError,
unit_seed, run_sweep, make_backend, LocalBackend, RayBackend (its address checks, which fail
before Ray starts; the Ray runs are in test_scale_ray.py).
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys

import numpy as np
import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.malformed import SETTINGS

from trustlab.core.context import RunContext
from trustlab.core.errors import InputError
from trustlab.core.units import (
    LocalBackend,
    RayBackend,
    Sweep,
    SweepResult,
    UnitOutcome,
    UnitsFailedError,
    UnitStore,
    WorkUnit,
    make_backend,
    run_sweep,
    unit_seed,
)

KEYS = st.lists(st.text(min_size=1, max_size=12).filter(str.strip), min_size=1, max_size=8,
                unique=True)


def draw_unit(unit: WorkUnit) -> float:
    """A unit function that uses the unit's own stream and payload."""
    return float(unit.rng().normal()) + float(unit.payload)


_CALLS: dict[str, int] = {}


def flaky(unit: WorkUnit) -> str:
    """Fails the first ``payload`` calls of its key, then answers."""
    _CALLS[unit.key] = _CALLS.get(unit.key, 0) + 1
    if _CALLS[unit.key] <= unit.payload:
        raise RuntimeError(f"transient failure {_CALLS[unit.key]}")
    return unit.key.upper()


def _sweep(keys, seed=0, name="toy", fn=draw_unit) -> Sweep:
    ctx = RunContext("toy", seed, "unused")
    return Sweep.of(name, fn, {k: i for i, k in enumerate(keys)}, rng_factory=ctx.child_rng)


@given(keys=KEYS, seed=st.integers(0, 2**32), data=st.data())
@SETTINGS
def test_results_do_not_depend_on_order_or_on_other_units(keys, seed, data):
    """A unit's seed and result depend on (run seed, sweep, key) only: permuting the units or
    dropping some leaves every remaining unit's result unchanged."""
    full = _sweep(keys, seed)
    perm = data.draw(st.permutations(list(full.units)))
    keep = perm[: data.draw(st.integers(1, len(perm)))]
    shuffled = Sweep(full.name, full.fn, tuple(keep))
    a = run_sweep(full).results
    b = run_sweep(shuffled).results
    assert list(a) == [u.key for u in full.units]  # declared order
    assert list(b) == [u.key for u in keep]
    assert all(b[k] == a[k] for k in b)
    ctx = RunContext("toy", seed, "unused")
    assert all(u.seed == unit_seed(ctx.child_rng, "toy", u.key) for u in full.units)


@given(keys=st.lists(st.text(min_size=1, max_size=6).filter(str.strip), min_size=2, max_size=6,
                     unique=True))
@SETTINGS
def test_unit_seeds_differ_between_keys_sweeps_and_run_seeds(keys):
    ctx0, ctx1 = RunContext("t", 0, "u"), RunContext("t", 1, "u")
    seeds = {unit_seed(ctx0.child_rng, "s", k) for k in keys}
    assert len(seeds) == len(keys)
    assert all(unit_seed(ctx0.child_rng, "s", k) != unit_seed(ctx1.child_rng, "s", k)
               for k in keys)
    assert all(unit_seed(ctx0.child_rng, "s", k) != unit_seed(ctx0.child_rng, "other", k)
               for k in keys)


_RUNS: list[str] = []


def counted(unit: WorkUnit) -> float:
    _RUNS.append(unit.key)
    return draw_unit(unit)


@given(keys=KEYS, data=st.data())
@SETTINGS
def test_store_resumes_exactly_the_recorded_units(tmp_path_factory, keys, data):
    """Units recorded in the store are taken from it (not run), with the same values; exactly
    the missing ones run; a changed payload or function invalidates the affected records."""
    root = tmp_path_factory.mktemp("store")
    sweep = _sweep(keys, fn=counted)
    _RUNS.clear()
    first = run_sweep(sweep, store=root)
    assert first.resumed == () and first.complete and sorted(_RUNS) == sorted(keys)
    store = UnitStore(root)
    assert sorted(store.keys()) == sorted(keys)
    dropped = data.draw(st.sets(st.sampled_from(keys)))
    for k in dropped:
        store._path(k).unlink()
    _RUNS.clear()
    again = run_sweep(sweep, store=root)
    assert sorted(_RUNS) == sorted(dropped)
    assert set(again.resumed) == set(keys) - dropped
    assert again.results == first.results and list(again.results) == keys
    changed = sweep.units[0]
    edited = Sweep(sweep.name, sweep.fn, (WorkUnit(changed.key, 100, changed.seed),
                                          *sweep.units[1:]))
    _RUNS.clear()
    third = run_sweep(edited, store=root)
    assert [changed.key] == _RUNS
    assert third.results[changed.key] == pytest.approx(first.results[changed.key] + 100)
    other = run_sweep(Sweep(sweep.name, draw_unit, sweep.units), store=root)
    assert other.resumed == ()  # another function: nothing is taken from the store


def test_store_ignores_foreign_or_truncated_files(tmp_path):
    sweep = _sweep(["a", "b"])
    store = UnitStore(tmp_path)
    run_sweep(sweep, store=store)
    store._path("a").write_bytes(b"\x80garbage")
    store._path("b").write_bytes(pickle.dumps({"key": "b", "fingerprint": "old", "value": 9}))
    again = run_sweep(sweep, store=store)
    assert again.resumed == ()
    assert again.results == run_sweep(sweep).results


@given(fails=st.lists(st.integers(0, 4), min_size=1, max_size=6), retries=st.integers(0, 3))
@SETTINGS
def test_local_retries_are_bounded_and_failures_reported(fails, retries):
    """A unit failing f times succeeds iff f <= retries; otherwise it is in ``failed`` with its
    error and attempt count -- never missing from both results and failures."""
    _CALLS.clear()
    units = tuple(WorkUnit(f"u{i}", f) for i, f in enumerate(fails))
    res = run_sweep(Sweep("flaky", flaky, units), backend=LocalBackend(retries))
    for i, f in enumerate(fails):
        key = f"u{i}"
        if f <= retries:
            assert res.results[key] == key.upper() and key not in res.failed
        else:
            assert key not in res.results
            assert "transient failure" in res.failed[key]
            assert f"after {retries + 1} attempt(s)" in res.failed[key]
        assert _CALLS[key] == min(f + 1, retries + 1)
    assert res.complete == all(f <= retries for f in fails)
    if not res.complete:
        with pytest.raises(UnitsFailedError) as info:
            res.raise_failed()
        assert info.value.exit_code == 1 and set(info.value.failed) == set(res.failed)
    else:
        assert res.raise_failed() is res


def test_sweep_result_and_outcome_fields():
    out = UnitOutcome("k", True, 3, attempts=2, seconds=0.5)
    assert (out.key, out.ok, out.value, out.attempts) == ("k", True, 3, 2)
    res = SweepResult("s", {"k": 3}, {"j": "boom"})
    assert not res.complete
    with pytest.raises(UnitsFailedError, match="1 unit\\(s\\) of sweep 's' failed"):
        res.raise_failed()


def test_run_context_sweep_records_units_in_the_run_directory(tmp_path):
    ctx = RunContext("toy", 3, tmp_path)
    sweep = Sweep.of("my sweep", draw_unit, {"a": 0, "b": 1}, rng_factory=ctx.child_rng,
                     merge=lambda r: sum(r.values()))
    total = ctx.run_sweep(sweep)
    assert total == pytest.approx(sum(run_sweep(sweep).results.values()))
    assert sorted(UnitStore(tmp_path / "units" / "my_sweep").keys()) == ["a", "b"]
    ctx2 = RunContext("toy", 3, tmp_path)
    assert ctx2.run_sweep(sweep) == total
    assert ctx2.report.provenance["sweeps"]["my sweep"]["resumed"] == 2


# ------------------------------------------------------------------------- malformed input
@given(bad=st.one_of(st.just(""), st.just("  "), st.integers(), st.none(), st.floats()))
@SETTINGS
def test_malformed_keys_and_names(bad):
    with pytest.raises(InputError):
        WorkUnit(bad)
    with pytest.raises(InputError):
        Sweep(bad, draw_unit, ())
    with pytest.raises(InputError):
        unit_seed(np.random.default_rng, "s", bad)


@given(seed=st.one_of(st.integers(max_value=-1), st.integers(min_value=2**63), st.floats(),
                      st.booleans(), st.text()))
@SETTINGS
def test_malformed_unit_seed_is_refused(seed):
    with pytest.raises(InputError, match="seed"):
        WorkUnit("k", None, seed)


@given(cpus=st.one_of(st.floats(max_value=0), st.floats(min_value=1025), st.just(float("nan")),
                      st.booleans(), st.text()))
@SETTINGS
def test_malformed_cpu_request_is_refused(cpus):
    with pytest.raises(InputError, match="num_cpus"):
        WorkUnit("k", None, 0, cpus)


def test_malformed_sweeps():
    with pytest.raises(InputError, match="repeats the unit key"):
        Sweep("s", draw_unit, (WorkUnit("a"), WorkUnit("a")))
    with pytest.raises(InputError, match="WorkUnit"):
        Sweep("s", draw_unit, ("a",))
    with pytest.raises(InputError, match="callable"):
        Sweep("s", "not a function", ())
    with pytest.raises(InputError, match="payloads"):
        Sweep.of("s", draw_unit, ["a"], rng_factory=np.random.default_rng)
    with pytest.raises(InputError, match="rng_factory"):
        unit_seed(3, "s", "k")
    with pytest.raises(InputError, match="Sweep"):
        run_sweep("s")
    with pytest.raises(InputError, match="backend"):
        run_sweep(_sweep(["a"]), backend=object())
    with pytest.raises(InputError, match="progress"):
        run_sweep(_sweep(["a"]), progress=3)
    with pytest.raises(InputError, match="path"):
        UnitStore(3)


@given(name=st.text().filter(lambda s: s not in ("local", "ray")))
@SETTINGS
def test_unknown_backend_is_refused(name):
    with pytest.raises(InputError, match="--backend must be one of local, ray"):
        make_backend(name)


@given(retries=st.one_of(st.integers(max_value=-1), st.integers(min_value=101), st.booleans(),
                         st.floats()))
@SETTINGS
def test_malformed_retries_are_refused(retries):
    with pytest.raises(InputError, match="retries"):
        LocalBackend(retries)
    with pytest.raises(InputError, match="retries"):
        RayBackend(retries=retries)


@given(address=st.one_of(st.just(""), st.just("host"), st.just("host:0"), st.just("host:99999"),
                         st.just("http://x:1"), st.text(alphabet="!@#$ %", min_size=1)))
@SETTINGS
def test_malformed_ray_address_is_refused_before_ray_starts(address):
    with pytest.raises(InputError, match="--ray-address"):
        RayBackend(address)


def test_unreachable_ray_address_is_one_line_error():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(InputError, match="no Ray cluster answers there") as info:
        make_backend("ray", f"127.0.0.1:{port}")
    assert "\n" not in str(info.value)
    with pytest.raises(InputError, match="needs --backend ray"):
        make_backend("local", f"127.0.0.1:{port}")


def _advance_payload_generator(unit: WorkUnit) -> float:
    """A unit that draws from a generator in its payload (advancing the caller's object)."""
    return float(unit.payload["rng"].normal())


class _Cfg(pydantic.BaseModel):
    model_config = {"frozen": True}
    a: int = 1
    b: str = "x"
    c: float = 0.5


def test_resume_holds_for_payloads_a_unit_mutates_or_that_pickle_per_process(tmp_path):
    """Regression (issue 36): the fingerprint was taken after the unit ran, so a generator in
    the payload that the unit advanced made the record never match on re-run."""
    units = tuple(WorkUnit(k, {"rng": np.random.default_rng(i), "cfg": _Cfg(a=i, b=k)}, i)
                  for i, k in enumerate(["a", "b", "c"]))
    first = run_sweep(Sweep("gen", _advance_payload_generator, units), store=tmp_path)
    fresh = tuple(WorkUnit(k, {"rng": np.random.default_rng(i), "cfg": _Cfg(b=k, a=i)}, i)
                  for i, k in enumerate(["a", "b", "c"]))
    again = run_sweep(Sweep("gen", _advance_payload_generator, fresh), store=tmp_path)
    assert again.resumed == ("a", "b", "c") and again.results == first.results
    moved = tuple(WorkUnit(u.key, {"rng": np.random.default_rng(9), "cfg": u.payload["cfg"]},
                           u.seed) for u in fresh)
    assert run_sweep(Sweep("gen", _advance_payload_generator, moved),
                     store=tmp_path).resumed == ()  # another generator state: run again


def test_fingerprint_does_not_depend_on_the_hash_seed():
    """A pydantic model with several set fields and a set of strings pickle in hash order;
    the fingerprint must be the same in every process."""
    code = ("import pydantic, numpy as np\n"
            "from trustlab.core.units import Sweep, UnitStore, WorkUnit\n"
            "class C(pydantic.BaseModel):\n"
            "    a: int = 0\n    b: str = ''\n    c: float = 0.0\n"
            "C.__module__ = 'm'; C.__qualname__ = 'C'\n"
            "u = WorkUnit('k', {'cfg': C(c=1.5, b='y', a=2), 's': {'p', 'q', 'r', 's'},\n"
            "                   'rng': np.random.default_rng(3)}, 7)\n"
            "print(UnitStore.fingerprint(Sweep('s', len, (u,)), u))\n")
    outs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        outs.add(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                capture_output=True, text=True).stdout.strip())
    assert len(outs) == 1
