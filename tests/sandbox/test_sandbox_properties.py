"""trustlab.sandbox's public API on malformed input (issue 38): InputError naming the argument
in one line, never a raw exception from subprocess or setrlimit -- and properties that fail if the
sandbox is wrong: stdin comes back from ``cat`` unchanged, exit codes map to statuses, output is
cut at exactly ``max_output_bytes``, and every limit is validated the same way."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.sandbox import (
    IsolationReport,
    Limits,
    Sandbox,
    SandboxError,
    SandboxResult,
    probe,
)

from ..malformed import OBJECT, Case, Kind, Mutation, malformed_input_tests

FEW = settings(max_examples=8, deadline=None, derandomize=True)
SOME = settings(max_examples=60, deadline=None, derandomize=True)
BOX = Sandbox(isolation="rlimits", limits=Limits(timeout_s=20))
INT_LIMITS = ["cpu_s", "memory_mb", "max_processes", "max_file_mb", "max_open_files",
              "max_output_bytes", "tmp_mb"]


def _run(argv, workdir, env, stdin):
    r = BOX.run(argv, workdir, env=env, stdin=stdin)
    return (r.status, r.returncode, r.stdout)


ARGV = Kind("argv", (
    Mutation("one string", lambda a, r: " ".join(a)),
    Mutation("empty", lambda a, r: []),
    Mutation("None", lambda a, r: None),
    Mutation("a number in it", lambda a, r: [*a, 3]),
    Mutation("NUL in an argument", lambda a, r: [a[0], "a\0b"]),
    Mutation("bytes", lambda a, r: [s.encode() for s in a]),
    Mutation("dict", lambda a, r: {"cat": 1}),
    Mutation("tuple", lambda a, r: tuple(a), same=True),
))
WORKDIR = Kind("workdir", (
    Mutation("None", lambda w, r: None),
    Mutation("missing", lambda w, r: os.path.join(w, "missing")),
    Mutation("a file", lambda w, r: __file__),
    Mutation("number", lambda w, r: 3),
    Mutation("list", lambda w, r: [w]),
))
ENV = Kind("env", (
    Mutation("list", lambda e, r: [("A", "1")]),
    Mutation("int value", lambda e, r: {"A": 1}),
    Mutation("= in key", lambda e, r: {"A=B": "1"}),
    Mutation("NUL in value", lambda e, r: {"A": "x\0y"}),
    Mutation("empty key", lambda e, r: {"": "1"}),
    Mutation("string", lambda e, r: "A=1"),
    Mutation("None", lambda e, r: None, same=True),
))
STDIN = Kind("stdin", (
    Mutation("bytes", lambda s, r: s.encode()),
    Mutation("number", lambda s, r: 3),
    Mutation("list", lambda s, r: [s]),
))


def _limit(name):
    def run(value):
        return Limits(**{name: value})

    return run


def _limit_kind(integer: bool) -> Kind:
    muts = (
        Mutation("zero", lambda v, r: 0), Mutation("negative", lambda v, r: -1),
        Mutation("nan", lambda v, r: math.nan), Mutation("inf", lambda v, r: math.inf),
        Mutation("string", lambda v, r: str(v)), Mutation("None", lambda v, r: None),
        Mutation("bool", lambda v, r: True), Mutation("list", lambda v, r: [v]),
        Mutation("numpy int", lambda v, r: np.int64(v), same=True),
        Mutation("huge", lambda v, r: 10**30),
    )
    if integer:
        muts += (Mutation("2.5", lambda v, r: 2.5),
                 Mutation("integer float", lambda v, r: float(v), same=True))
    return Kind("limit", muts)


def _tmp():
    import tempfile

    return tempfile.mkdtemp(prefix="trustlab-sbx-test-")


WORK = _tmp()
CASES = [
    Case("Sandbox.run", _run, {"argv": ["cat"], "workdir": WORK, "env": {"A": "1"},
                               "stdin": "hello"},
         {"argv": ARGV, "workdir": WORKDIR, "env": ENV, "stdin": STDIN}),
    Case("Sandbox(limits)", lambda limits: Sandbox(isolation="rlimits", limits=limits).limits,
         {"limits": Limits()}, {"limits": OBJECT}),
    Case("Sandbox(readable)", lambda readable: Sandbox(readable=readable).readable,
         {"readable": ["/etc"]}, {"readable": Kind("paths", (
             Mutation("one string", lambda p, r: "/etc"),
             Mutation("a number in it", lambda p, r: ["/etc", 3]),
             Mutation("None", lambda p, r: None),
             Mutation("tuple", lambda p, r: tuple(p), same=True),
         ))}),
    Case("Sandbox(isolation)", lambda isolation: Sandbox(isolation=isolation).isolation,
         {"isolation": "rlimits"}, {"isolation": Kind("isolation", (
             Mutation("unknown", lambda v, r: "docker"), Mutation("upper", lambda v, r: "RLIMITS"),
             Mutation("None", lambda v, r: None), Mutation("list", lambda v, r: [v]),
         ))}),
    Case("Limits(timeout_s)", _limit("timeout_s"), {"value": 5.0}, {"value": _limit_kind(False)}),
    *[Case(f"Limits({name})", _limit(name), {"value": 16}, {"value": _limit_kind(True)})
      for name in INT_LIMITS],
]

test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


@SOME
@given(st.sampled_from(["timeout_s", *INT_LIMITS]),
       st.one_of(st.integers(-3, 2**32), st.floats(allow_nan=True, allow_infinity=True)))
def test_a_limit_is_accepted_exactly_when_it_is_a_positive_finite_bounded_number(name, value):
    ok = math.isfinite(value) and 0 < value <= 2**31
    if name != "timeout_s":
        ok = ok and float(value).is_integer()
    try:
        limits = Limits(**{name: value})
    except InputError as exc:
        assert not ok and name in str(exc) and "\n" not in str(exc)
        return
    assert ok and getattr(limits, name) == value
    assert type(getattr(limits, name)) is (float if name == "timeout_s" else int)


@FEW
@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40))
def test_stdin_comes_back_from_cat_unchanged(text):
    r = BOX.run(["cat"], WORK, stdin=text)
    assert isinstance(r, SandboxResult) and r.ok and r.returncode == 0 and r.signal is None
    assert r.stdout == text and not r.truncated and r.isolation == "rlimits"


@FEW
@given(st.integers(0, 255))
def test_the_exit_code_decides_the_status(code):
    r = BOX.run(["sh", "-c", f"exit {code}"], WORK)
    assert r.returncode == code and r.ok == (code == 0)
    assert r.status == ("ok" if code == 0 else "failed")
    assert str(code) in r.summary() and "\n" not in r.summary()


@FEW
@given(st.integers(1, 300), st.integers(1, 300))
def test_output_is_cut_at_exactly_max_output_bytes(n_bytes, cap):
    box = BOX.with_limits(max_output_bytes=cap)
    r = box.run(["head", "-c", str(n_bytes), "/dev/zero"], WORK)
    assert len(r.stdout) == min(n_bytes, cap) and r.truncated == (n_bytes > cap)


def test_with_limits_changes_only_what_it_names_and_rejects_unknown_limits():
    box = BOX.with_limits(cpu_s=3)
    assert box.limits.cpu_s == 3 and box.limits.timeout_s == BOX.limits.timeout_s
    assert box.isolation == BOX.isolation and BOX.limits.cpu_s == Limits().cpu_s
    with pytest.raises(InputError, match="cpu_seconds"):
        BOX.with_limits(cpu_seconds=3)
    with pytest.raises(InputError, match="cpu_s"):
        BOX.with_limits(cpu_s=0)


def test_probe_reports_a_level_and_namespace_isolation_fails_loudly_without_it():
    report = probe()
    assert isinstance(report, IsolationReport) and report.level in ("namespace", "rlimits")
    assert (report.mode == "none") == (report.level == "rlimits")
    assert bool(report.reason) == (report.level == "rlimits")
    box = Sandbox(isolation="namespace")
    if report.level == "namespace":
        assert box.level == "namespace" and Sandbox().level == "namespace"
        r = box.run(["cat"], WORK, stdin="inside")  # the same round trip inside the namespaces
        assert r.ok and r.stdout == "inside" and r.isolation == "namespace"
    else:
        with pytest.raises(SandboxError, match="rlimits"):
            box.level  # noqa: B018 - the property raises
