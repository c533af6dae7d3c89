"""The acceptance session's xdist order (tests/xdist_schedule.py): what it names exists, and
organism builders go first, then the longest scopes."""

from __future__ import annotations

from pathlib import Path

from tests.xdist_schedule import BUILDERS, COSTS, SPLIT, UNKNOWN_S, rank, scope_of

REPO = Path(__file__).resolve().parents[1]


def test_every_scope_named_exists():
    for scope in [*COSTS, *BUILDERS, *SPLIT]:
        module, _, test = scope.partition("::")
        assert (REPO / module).is_file(), scope
        if test:
            assert f"def {test.split('[')[0]}(" in (REPO / module).read_text(), scope


def test_builders_first_then_longest_first_then_collection_order():
    scopes = ["tests/a.py", "tests/methods/test_lisa_suites.py", *sorted(BUILDERS),
              "tests/b.py", "tests/methods/test_jaguar_2pc.py"]
    order = sorted(scopes, key=lambda s: rank(s, scopes.index(s)))
    assert set(order[:len(BUILDERS)]) == BUILDERS
    rest = order[len(BUILDERS):]
    assert rest[0] == "tests/methods/test_lisa_suites.py" and rest[-1].endswith("jaguar_2pc.py")
    assert rest[1:3] == ["tests/a.py", "tests/b.py"]  # unknown: UNKNOWN_S each, then position
    assert COSTS["tests/methods/test_jaguar_2pc.py"] < UNKNOWN_S < COSTS[rest[0]]


def test_split_modules_schedule_each_test_alone():
    module = next(iter(SPLIT))
    assert scope_of(f"{module}::test_x[a]") == f"{module}::test_x[a]"
    assert scope_of("tests/core/test_scale_ray.py::test_y") == "tests/core/test_scale_ray.py"
    assert scope_of("tests/m.py::Cls::test_z") == "tests/m.py::Cls"
