"""Malformed-input property tests: corrupt one argument of a valid call, demand a clear answer.

(A NotFittedError, the library's one-line error for a step called out of order, also counts.)

The contract (docs/architecture.md, "Validation"): a public entry point given a malformed
argument raises ``InputError`` with a one-line message, or -- when the argument is only another
spelling of a valid one (a list, a torch tensor, a DataFrame, integer-valued floats, class names)
-- returns exactly what the canonical call returns. Never a raw numpy/torch exception, never a
NaN-filled result, never a result computed on a silently reinterpreted input.

A test module describes each entry point as a :class:`Case`: a function that runs it on keyword
arguments and returns something comparable, the valid arguments, and the *kind* of each argument
(which decides the corruptions tried, see :data:`MUTATIONS`). :func:`check_case` then lets
hypothesis draw (argument, corruption) pairs::

    CASES = [Case("HCC.fit", run_fit, {"probs": p, "labels": y}, {"probs": PROBS, "labels": LABELS})]

    @pytest.mark.parametrize("case", CASES, ids=str)
    @given(data=st.data())
    @SETTINGS
    def test_malformed(case, data):
        check_case(case, data)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError, NotFittedError

__all__ = [
    "ARRAY",
    "BOOL",
    "CHOICE",
    "INT",
    "LABELS",
    "MASK",
    "OBJECT",
    "POSITIVE",
    "PROBS",
    "RATE",
    "RNG",
    "SAMPLES",
    "SETTINGS",
    "UNIT",
    "Case",
    "Kind",
    "Mutation",
    "assert_same",
    "check_case",
    "every_corruption",
    "malformed_input_tests",
    "run_one",
]

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,  # the same draws in every CI run
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True)
class Mutation:
    """One corruption of a value: ``same=True`` if it keeps the value's meaning."""

    name: str
    apply: Callable[[Any, np.random.Generator], Any]
    same: bool = False

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Kind:
    """The corruptions tried on one kind of argument."""

    name: str
    mutations: tuple[Mutation, ...]

    def extend(self, *more: Mutation, name: str | None = None) -> Kind:
        return Kind(name or self.name, self.mutations + tuple(more))

    def without(self, *names: str) -> Kind:
        return Kind(self.name, tuple(m for m in self.mutations if m.name not in names))


@dataclass(frozen=True)
class Case:
    """An entry point: ``run(**args)`` returns a comparable result; ``kinds`` names each argument's kind."""

    name: str
    run: Callable[..., Any]
    args: Mapping[str, Any]
    kinds: Mapping[str, Kind]
    _reference: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __str__(self) -> str:
        return self.name

    def reference(self) -> Any:
        if "value" not in self._reference:
            self._reference["value"] = self.run(**self.args)
        return self._reference["value"]


# ---------------------------------------------------------------------------- corruptions


def _array(x: Any) -> np.ndarray:
    return np.array(x, dtype=np.float64, copy=True)


def _cell(value: float) -> Callable[[Any, np.random.Generator], Any]:
    def put(x: Any, rng: np.random.Generator) -> np.ndarray:
        a = _array(x)
        a.flat[int(rng.integers(a.size))] = value
        return a

    return put


def _torch(x: Any, rng: np.random.Generator) -> Any:
    import torch

    return torch.as_tensor(np.asarray(x))


def _frame(x: Any, rng: np.random.Generator) -> Any:
    import pandas as pd

    a = np.asarray(x)
    return pd.DataFrame(a) if a.ndim == 2 else pd.Series(a)


def _generator(x: Any, rng: np.random.Generator) -> Any:
    return (row for row in np.asarray(x))


def _ragged(x: Any, rng: np.random.Generator) -> Any:
    rows = np.asarray(x).tolist()
    if isinstance(rows, list) and rows and isinstance(rows[0], list):
        rows[0] = rows[0] + [0.5]
    else:
        rows = [rows, [1.0]]
    return rows


def _strings(x: Any, rng: np.random.Generator) -> Any:
    return np.asarray(x).astype(str)


def _with_none(x: Any, rng: np.random.Generator) -> Any:
    a = np.asarray(x).astype(object)
    a.flat[int(rng.integers(a.size))] = None
    return a


#: Corruptions of any numeric array (shape-preserving where it matters).
ARRAY_ERRORS = (
    Mutation("nan", _cell(math.nan)),
    Mutation("inf", _cell(math.inf)),
    Mutation("-inf", _cell(-math.inf)),
    Mutation("strings", _strings),
    Mutation("object with None", _with_none),
    Mutation("None", lambda x, r: None),
    Mutation("dict", lambda x, r: {"a": 1.0}),
    Mutation("string", lambda x, r: "0.5"),
    Mutation("generator", _generator),
    Mutation("ragged list", _ragged),
    Mutation("complex", lambda x, r: np.asarray(x) + 1j),
    Mutation("extra dimension", lambda x, r: np.asarray(x)[..., None, None]),
    Mutation("empty", lambda x, r: np.asarray(x)[:0]),
)
ARRAY_SAME = (
    Mutation("list", lambda x, r: np.asarray(x).tolist(), same=True),
    Mutation("torch tensor", _torch, same=True),
    Mutation("pandas", _frame, same=True),
)
ARRAY = Kind("array", ARRAY_ERRORS + ARRAY_SAME)


def _probs_neg(x: Any, rng: np.random.Generator) -> np.ndarray:
    a = _array(x)
    i = int(rng.integers(a.shape[0]))
    a[i, 1] += a[i, 0] + 0.2  # a negative probability in a row that still sums to 1
    a[i, 0] = -0.2
    return a


def _probs_over(x: Any, rng: np.random.Generator) -> np.ndarray:
    a = _array(x)
    a[int(rng.integers(a.shape[0])), 0] = 1.7
    return a


def _unnormalised(x: Any, rng: np.random.Generator) -> np.ndarray:
    return _array(x) * 0.5


def _logits(x: Any, rng: np.random.Generator) -> np.ndarray:
    return np.log(np.clip(_array(x), 1e-9, None))


#: ``(n, K)`` class probabilities whose rows sum to 1.
PROBS = Kind(
    "probs",
    ARRAY_ERRORS
    + ARRAY_SAME
    + (
        Mutation("negative entry", _probs_neg),
        Mutation("entry above 1", _probs_over),
        Mutation("rows sum to 0.5", _unnormalised),
        Mutation("logits", _logits),
        Mutation("one column dropped", lambda x, r: np.asarray(x)[:, :-1]),
        Mutation("flattened", lambda x, r: np.asarray(x).ravel()),
        Mutation("transposed", lambda x, r: np.asarray(x).T),
        Mutation("booleans", lambda x, r: np.asarray(x) > 0.3),
    ),
)


def _label_out(delta: int) -> Callable[[Any, np.random.Generator], Any]:
    def put(y: Any, rng: np.random.Generator) -> np.ndarray:
        a = np.array(y, dtype=np.int64, copy=True)
        i = int(rng.integers(a.size))
        a[i] = a.max() + delta if delta > 0 else -1
        return a

    return put


def _half(y: Any, rng: np.random.Generator) -> np.ndarray:
    a = np.array(y, dtype=np.float64, copy=True)
    a[int(rng.integers(a.size))] += 0.5
    return a


#: ``(n,)`` integer class labels ``0..K-1`` (the corruption "above range" adds 100 to the max).
LABELS = Kind(
    "labels",
    (
        *ARRAY_ERRORS,
        Mutation("list", lambda x, r: np.asarray(x).tolist(), same=True),
        Mutation("torch tensor", _torch, same=True),
        Mutation("pandas", _frame, same=True),
        Mutation("integer-valued floats", lambda x, r: np.asarray(x).astype(float), same=True),
        Mutation("int32", lambda x, r: np.asarray(x).astype(np.int32), same=True),
        Mutation("label above range", _label_out(100)),
        Mutation("negative label", _label_out(-1)),
        Mutation("non-integer label", _half),
        Mutation("one label short", lambda x, r: np.asarray(x)[:-1]),
        Mutation("column vector", lambda x, r: np.asarray(x)[:, None]),
        Mutation("booleans", lambda x, r: np.asarray(x) > 0),
    ),
)


#: ``(n, d)`` finite samples (a 1-D input is n points in one dimension).
SAMPLES = Kind(
    "samples",
    ARRAY_ERRORS + ARRAY_SAME + (Mutation("booleans", lambda x, r: np.asarray(x) > 0),),
)


def _rng_same(seed: Any, rng: np.random.Generator) -> Any:
    return np.random.default_rng(seed)


#: A random source given as an int seed (the valid value must be an int): a Generator made
#: from the same seed is the same source.
RNG = Kind(
    "rng",
    (
        Mutation("Generator of the seed", _rng_same, same=True),
        Mutation("numpy int seed", lambda v, r: np.int64(v), same=True),
        Mutation("negative seed", lambda v, r: -1),
        Mutation("float seed", lambda v, r: 0.5),
        Mutation("string", lambda v, r: "seed"),
        Mutation("list", lambda v, r: [v]),
        Mutation("legacy RandomState", lambda v, r: np.random.RandomState(0)),
    ),
)


#: An object argument that must be one of the library's own types.
OBJECT = Kind(
    "object",
    (
        Mutation("None", lambda v, r: None),
        Mutation("array", lambda v, r: np.zeros((3, 3))),
        Mutation("list", lambda v, r: [1, 2]),
        Mutation("string", lambda v, r: "sets"),
    ),
)


def _mask_two(x: Any, rng: np.random.Generator) -> np.ndarray:
    a = np.asarray(x).astype(np.float64)
    a.flat[int(rng.integers(a.size))] = 2.0
    return a


#: ``(n, m)`` boolean masks (0/1 integers are the same mask).
MASK = Kind(
    "mask",
    (
        Mutation("0/1 integers", lambda x, r: np.asarray(x).astype(np.int64), same=True),
        Mutation("list", lambda x, r: np.asarray(x).tolist(), same=True),
        Mutation("a 2 in it", _mask_two),
        Mutation("nan", lambda x, r: _cell(math.nan)(np.asarray(x).astype(float), r)),
        Mutation("one column dropped", lambda x, r: np.asarray(x)[:, :-1]),
        Mutation("flattened", lambda x, r: np.asarray(x).ravel()),
        Mutation("strings", _strings),
        Mutation("None", lambda x, r: None),
        Mutation("string", lambda x, r: "mask"),
        Mutation("generator", _generator),
    ),
)


def _scalar_errors() -> tuple[Mutation, ...]:
    return (
        Mutation("nan", lambda v, r: math.nan),
        Mutation("inf", lambda v, r: math.inf),
        Mutation("string", lambda v, r: str(v)),
        Mutation("None", lambda v, r: None),
        Mutation("bool", lambda v, r: True),
        Mutation("list", lambda v, r: [v]),
        Mutation("array", lambda v, r: np.array([v, v])),
    )


def _scalar_same() -> tuple[Mutation, ...]:
    return (Mutation("numpy scalar", lambda v, r: np.float64(v), same=True),)


def scalar(name: str, *bad: float, same: Sequence[Any] = ()) -> Kind:
    """A number; ``bad`` are out-of-range values, ``same`` values equal to the valid one."""
    return Kind(
        name,
        _scalar_errors()
        + _scalar_same()
        + tuple(Mutation(f"{b!r}", lambda v, r, b=b: b) for b in bad)
        + tuple(Mutation(f"{s!r}", lambda v, r, s=s: s, same=True) for s in same),
    )


#: A miscoverage level in (0, 1).
UNIT = scalar("unit", 0.0, 1.0, -0.1, 1.5)
#: A rate or proportion in [0, 1].
RATE = scalar("rate", -0.1, 1.5)
#: A strictly positive number.
POSITIVE = scalar("positive", 0.0, -1.0)


def INT(*bad: float, lo: int | None = None) -> Kind:
    """An integer; ``bad`` adds out-of-range values (2.5 and friends are always tried)."""
    muts = (
        Mutation("nan", lambda v, r: math.nan),
        Mutation("inf", lambda v, r: math.inf),
        Mutation("2.5", lambda v, r: v + 0.5),
        Mutation("string", lambda v, r: str(v)),
        Mutation("None", lambda v, r: None),
        Mutation("bool", lambda v, r: True),
        Mutation("list", lambda v, r: [v]),
        Mutation("numpy int", lambda v, r: np.int64(v), same=True),
        Mutation("integer float", lambda v, r: float(v), same=True),
    )
    extra = tuple(Mutation(f"{b!r}", lambda v, r, b=b: b) for b in bad)
    if lo is not None:
        extra += (Mutation(f"below {lo}", lambda v, r, lo=lo: lo - 1),)
    return Kind("int", muts + extra)


def CHOICE(*valid_alternatives: Any) -> Kind:
    """One of a fixed set of options."""
    return Kind(
        "choice",
        (
            Mutation("unknown option", lambda v, r: "no-such-option"),
            Mutation("None", lambda v, r: None),
            Mutation("number", lambda v, r: 3),
            Mutation("upper case", lambda v, r: str(v).upper() if str(v).upper() != v else "X"),
            Mutation("list", lambda v, r: [v]),
        ),
    )


BOOL = Kind(
    "bool",
    (
        Mutation("string", lambda v, r: "yes"),
        Mutation("None", lambda v, r: None),
        Mutation("2", lambda v, r: 2),
    ),
)


# ---------------------------------------------------------------------------- the check


def assert_same(got: Any, want: Any, path: str = "result") -> None:
    """Deep equality for results: arrays, floats (NaN equals NaN), dataclasses, frames."""
    if isinstance(want, np.ndarray) or isinstance(got, np.ndarray):
        g, w = np.asarray(got), np.asarray(want)
        assert g.shape == w.shape, f"{path}: shape {g.shape} != {w.shape}"
        if w.dtype.kind in "fc" or g.dtype.kind in "fc":
            assert np.allclose(g, w, rtol=1e-9, atol=1e-12, equal_nan=True), f"{path} differs"
        else:
            assert np.array_equal(g, w), f"{path} differs"
        return
    if isinstance(want, float) or isinstance(got, float):
        assert (math.isnan(got) and math.isnan(want)) or math.isclose(
            got, want, rel_tol=1e-9, abs_tol=1e-12
        ), f"{path}: {got} != {want}"
        return
    if dataclasses.is_dataclass(want) and not isinstance(want, type):
        assert type(got) is type(want), f"{path}: {type(got).__name__} != {type(want).__name__}"
        for f in dataclasses.fields(want):
            if f.compare:
                assert_same(getattr(got, f.name), getattr(want, f.name), f"{path}.{f.name}")
        return
    if hasattr(want, "to_numpy") and hasattr(want, "columns"):  # a DataFrame
        import pandas as pd

        pd.testing.assert_frame_equal(got, want)
        return
    if isinstance(want, Mapping):
        assert set(got) == set(want), f"{path}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            assert_same(got[k], want[k], f"{path}[{k!r}]")
        return
    if isinstance(want, list | tuple):
        assert len(got) == len(want), f"{path}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, f"{path}[{i}]")
        return
    assert got == want, f"{path}: {got!r} != {want!r}"


def _has_nan(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return bool(np.isnan(value).any())
    if isinstance(value, Mapping):
        return any(_has_nan(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_nan(v) for v in value)
    return False


def check_case(case: Case, data: st.DataObject) -> None:
    """Draw an argument and a corruption; demand InputError or the canonical result."""
    param = data.draw(st.sampled_from(sorted(case.kinds)), label="argument")
    mutation = data.draw(st.sampled_from(case.kinds[param].mutations), label="corruption")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    run_one(case, param, mutation, seed)


def run_one(case: Case, param: str, mutation: Mutation, seed: int = 0) -> None:
    """One corrupted call (also usable without hypothesis, e.g. to replay a failure)."""
    want = case.reference()
    args = dict(case.args)
    args[param] = mutation.apply(case.args[param], np.random.default_rng(seed))
    what = f"{case.name}: {param} <- {mutation.name}"
    try:
        got = case.run(**args)
    except (InputError, NotFittedError) as exc:
        message = str(exc)
        assert message and "\n" not in message, f"{what}: the message is not one line: {message!r}"
        return
    except Exception as exc:
        raise AssertionError(
            f"{what}: raised {type(exc).__name__} instead of InputError: {exc}"
        ) from exc
    if not mutation.same:
        raise AssertionError(f"{what}: returned a result instead of InputError: {got!r:.300}")
    assert_same(got, want, what)
    assert _has_nan(got) == _has_nan(want), f"{what}: NaN appeared in the result"


def every_corruption(cases: Sequence[Case]) -> list[Any]:
    """``pytest.param(case, argument, mutation)`` for every pair: each corruption tried once."""
    import pytest

    return [
        pytest.param(case, param, m, id=f"{case.name}-{param}-{m.name}")
        for case in cases
        for param, kind in case.kinds.items()
        for m in kind.mutations
    ]


def malformed_input_tests(cases: Sequence[Case]) -> tuple[Callable[..., None], Callable[..., None]]:
    """The two tests of a property module: every corruption once, then hypothesis' draws::

        test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)
    """
    import pytest
    from hypothesis import given

    @pytest.mark.parametrize(("case", "param", "mutation"), every_corruption(cases))
    def test_every_corruption_once(case: Case, param: str, mutation: Mutation) -> None:
        run_one(case, param, mutation)

    @pytest.mark.parametrize("case", cases, ids=str)
    @given(data=st.data())
    @SETTINGS
    def test_malformed_input(case: Case, data: st.DataObject) -> None:
        """The same corruptions at positions and seeds hypothesis draws."""
        check_case(case, data)

    return test_every_corruption_once, test_malformed_input
