"""VNN-LIB specifications (the VNN-COMP subset), parsed into boxes and linear output constraints.

A VNN-LIB file describes the *unsafe* set: the network violates the property iff some input
satisfying the input constraints maps to an output satisfying the output constraints
("sat" = counterexample exists, "unsat" = the property holds).

Supported subset (everything VNN-COMP's ACAS Xu, MNIST and most other benchmarks use):

- ``(declare-const X_i Real)`` / ``(declare-const Y_j Real)``;
- ``(assert ATOM)`` with ``ATOM = (<= a b) | (>= a b) | (< a b) | (> a b)``, where ``a`` and ``b``
  are a variable or a numeric constant (input atoms: ``X_i`` against a constant; output atoms:
  ``Y_j`` against a constant or another ``Y_k``); strict and non-strict comparisons are treated
  alike (they differ on a set of measure zero);
- ``(assert (or (and ATOM ...) ...))`` and ``(assert (and ATOM ...))``, nested freely;
  the conjunction of all asserts is multiplied out into disjunctive normal form;
- ``;`` comments.

Anything else (other sorts, ``+``/``*`` terms, X-vs-X atoms, X-vs-Y atoms, ``not``) raises
``DataError`` naming the line. The result is a ``VnnlibSpec``: a list of ``VnnlibRegion``, each an
input box and a disjunction of output polytopes ``{y : A y <= b}``.
"""

from __future__ import annotations

import gzip
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from trustlab.core.errors import DataError, InputError

__all__ = [
    "OutputPolytope",
    "VnnlibRegion",
    "VnnlibSpec",
    "format_vnnlib",
    "load_vnnlib",
    "parse_vnnlib",
    "read_text_maybe_gz",
]

_VAR = re.compile(r"^([XY])_(\d+)$")
_MAX_CLAUSES = 100_000


@dataclass(frozen=True)
class OutputPolytope:
    """One conjunction of output atoms, ``A @ y <= b`` (rows of ``A`` are atoms)."""

    A: NDArray[np.float64]
    b: NDArray[np.float64]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OutputPolytope):
            return NotImplemented
        return (
            self.A.shape == other.A.shape
            and np.array_equal(self.A, other.A)
            and np.array_equal(self.b, other.b)
        )

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class VnnlibRegion:
    """An input box ``lower <= x <= upper`` and a disjunction of unsafe output polytopes."""

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    polytopes: tuple[OutputPolytope, ...]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, VnnlibRegion):
            return NotImplemented
        return (
            np.array_equal(self.lower, other.lower)
            and np.array_equal(self.upper, other.upper)
            and self.polytopes == other.polytopes
        )

    __hash__ = None  # type: ignore[assignment]

    def output_violated(self, y: NDArray[np.floating]) -> NDArray[np.bool_]:
        """Rows of ``y`` (n, n_outputs) inside the unsafe output set (any polytope); a row with
        NaN is inside no polytope (its comparisons are false)."""
        width = self.polytopes[0].A.shape[1] if self.polytopes else None
        y = _rows(y, "y", width)
        hit = np.zeros(len(y), dtype=bool)
        for poly in self.polytopes:
            hit |= np.all(y @ poly.A.T <= poly.b, axis=1)
        return hit

    def contains_input(self, x: NDArray[np.floating], atol: float = 0.0) -> NDArray[np.bool_]:
        x = _rows(x, "x", len(self.lower))
        return np.all((x >= self.lower - atol) & (x <= self.upper + atol), axis=1)


@dataclass(frozen=True)
class VnnlibSpec:
    """A parsed VNN-LIB property: the unsafe set is the union of its regions."""

    n_inputs: int
    n_outputs: int
    regions: tuple[VnnlibRegion, ...]
    source: str = field(default="", compare=False)

    def violated(self, x: NDArray[np.floating], y: NDArray[np.floating]) -> NDArray[np.bool_]:
        """Which (input, output) pairs lie in the unsafe set."""
        x, y = _rows(x, "x", self.n_inputs), _rows(y, "y", self.n_outputs)
        if len(x) != len(y):
            raise InputError(f"violated needs one output row per input row. Got {len(x)} and "
                             f"{len(y)}.")
        hit = np.zeros(len(x), dtype=bool)
        for region in self.regions:
            hit |= region.contains_input(x) & region.output_violated(y)
        return hit


def _rows(a: object, name: str, width: int | None) -> NDArray[np.float64]:
    """``a`` as float rows of ``width`` columns (a wrong width used to fail inside numpy's
    matmul or broadcast silently against the box)."""
    try:
        arr = np.atleast_2d(np.asarray(a, dtype=np.float64))
    except (TypeError, ValueError) as exc:
        raise InputError(f"The '{name}' parameter must be numeric rows. Got {type(a).__name__} "
                         f"({exc}).") from None
    if arr.ndim != 2 or (width is not None and arr.shape[1] != width):
        raise InputError(f"The '{name}' parameter must have shape (n, {width}). Got "
                         f"{arr.shape}.")
    return arr


# ---------------------------------------------------------------------------- tokenising
def _tokenise(text: str, source: str) -> list[tuple[str, int]]:
    tokens: list[tuple[str, int]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        line = line.split(";", 1)[0]
        for tok in re.findall(r"\(|\)|[^\s()]+", line):
            tokens.append((tok, lineno))
    return tokens


def _read_sexprs(tokens: list[tuple[str, int]], source: str) -> list[tuple[object, int]]:
    """Nested lists of (token, line) leaves; returns top-level expressions with their line."""
    out: list[tuple[object, int]] = []
    stack: list[list[object]] = []
    starts: list[int] = []
    for tok, line in tokens:
        if tok == "(":
            stack.append([])
            starts.append(line)
        elif tok == ")":
            if not stack:
                raise DataError(f"{source}: line {line}: unbalanced ')'.")
            done = stack.pop()
            start = starts.pop()
            if stack:
                stack[-1].append((done, start))
            else:
                out.append((done, start))
        else:
            if not stack:
                raise DataError(f"{source}: line {line}: '{tok}' outside parentheses.")
            stack[-1].append((tok, line))
    if stack:
        raise DataError(f"{source}: line {starts[-1]}: '(' is never closed.")
    return out


# ---------------------------------------------------------------------------- parsing
@dataclass(frozen=True)
class _Atom:
    """``coef . v <= rhs`` over X (kind 'X') or Y (kind 'Y'); coef is a sparse dict."""

    kind: str
    coef: tuple[tuple[int, float], ...]
    rhs: float


def _operand(item: tuple[object, int], source: str) -> tuple[str, int] | float:
    value, line = item
    if isinstance(value, list):
        head = value[0][0] if value and not isinstance(value[0][0], list) else "(...)"
        raise DataError(
            f"{source}: line {line}: unsupported term '({head} ...)'; only variables and "
            "constants may be compared (no arithmetic)."
        )
    assert isinstance(value, str)
    m = _VAR.match(value)
    if m:
        return (m.group(1), int(m.group(2)))
    try:
        number = float(value)
    except ValueError:
        raise DataError(f"{source}: line {line}: unknown symbol '{value}'.") from None
    if not math.isfinite(number):
        raise DataError(f"{source}: line {line}: non-finite constant '{value}'.")
    return number


def _atom(op: str, args: list[tuple[object, int]], line: int, source: str) -> _Atom:
    if len(args) != 2:
        raise DataError(f"{source}: line {line}: '{op}' needs exactly two operands.")
    a, b = (_operand(x, source) for x in args)
    if op in (">=", ">"):
        a, b = b, a  # a >= b  <=>  b <= a
    # now: a <= b
    if isinstance(a, float) and isinstance(b, float):
        raise DataError(f"{source}: line {line}: comparison of two constants.")
    if isinstance(a, tuple) and isinstance(b, tuple):
        if a[0] != b[0] or a[0] == "X":
            raise DataError(
                f"{source}: line {line}: unsupported atom comparing {a[0]}_{a[1]} with "
                f"{b[0]}_{b[1]}; only Y-vs-Y atoms may compare two variables."
            )
        if a[1] == b[1]:
            return _Atom("Y", (), 0.0)
        return _Atom("Y", ((a[1], 1.0), (b[1], -1.0)), 0.0)
    if isinstance(a, tuple):
        return _Atom(a[0], ((a[1], 1.0),), float(b))  # type: ignore[arg-type]
    assert isinstance(b, tuple)
    return _Atom(b[0], ((b[1], -1.0),), -float(a))


def _dnf(expr: tuple[object, int], source: str) -> list[list[_Atom]]:
    value, line = expr
    if not isinstance(value, list) or not value:
        raise DataError(f"{source}: line {line}: expected a formula, got '{value}'.")
    head, _ = value[0]
    args = value[1:]
    if head in ("<=", ">=", "<", ">"):
        return [[_atom(str(head), args, line, source)]]
    if head == "and":
        clauses: list[list[_Atom]] = [[]]
        for arg in args:
            sub = _dnf(arg, source)
            clauses = [c + s for c in clauses for s in sub]
            if len(clauses) > _MAX_CLAUSES:
                raise DataError(f"{source}: line {line}: DNF expansion exceeds {_MAX_CLAUSES}.")
        return clauses
    if head == "or":
        if not args:
            raise DataError(f"{source}: line {line}: empty 'or'.")
        return [c for arg in args for c in _dnf(arg, source)]
    raise DataError(
        f"{source}: line {line}: unsupported operator '{head}'; the VNN-COMP subset allows "
        "<=, >=, <, >, and, or."
    )


def parse_vnnlib(text: str, *, source: str = "<vnnlib>") -> VnnlibSpec:
    """Parse VNN-LIB text into a ``VnnlibSpec``; raises ``DataError`` naming the offending line."""
    exprs = _read_sexprs(_tokenise(text, source), source)
    declared: dict[str, set[int]] = {"X": set(), "Y": set()}
    clauses: list[list[_Atom]] = [[]]
    for value, line in exprs:
        assert isinstance(value, list)
        if not value or isinstance(value[0][0], list):
            raise DataError(f"{source}: line {line}: expected a command.")
        head = value[0][0]
        if head == "declare-const":
            if len(value) != 3 or isinstance(value[1][0], list) or value[2][0] != "Real":
                raise DataError(
                    f"{source}: line {line}: only '(declare-const X_i Real)' / "
                    "'(declare-const Y_j Real)' declarations are supported."
                )
            m = _VAR.match(str(value[1][0]))
            if not m:
                raise DataError(
                    f"{source}: line {line}: variable '{value[1][0]}' must be named X_i or Y_j."
                )
            declared[m.group(1)].add(int(m.group(2)))
        elif head == "assert":
            if len(value) != 2:
                raise DataError(f"{source}: line {line}: 'assert' takes one formula.")
            sub = _dnf(value[1], source)
            for atom in (a for c in sub for a in c):
                for idx, _ in atom.coef:
                    if idx not in declared[atom.kind]:
                        raise DataError(
                            f"{source}: line {line}: {atom.kind}_{idx} is used but not declared."
                        )
            if len(sub) == 1:
                for c in clauses:
                    c.extend(sub[0])
            else:
                clauses = [c + s for c in clauses for s in sub]
            if len(clauses) > _MAX_CLAUSES:
                raise DataError(f"{source}: line {line}: DNF expansion exceeds {_MAX_CLAUSES}.")
        else:
            raise DataError(
                f"{source}: line {line}: unsupported command '{head}'; only declare-const "
                "and assert are allowed."
            )
    for kind in ("X", "Y"):
        if declared[kind] != set(range(len(declared[kind]))):
            raise DataError(f"{source}: {kind} variables must be numbered 0..n-1 without gaps.")
    n_in, n_out = len(declared["X"]), len(declared["Y"])
    if n_in == 0 or n_out == 0:
        raise DataError(f"{source}: declares no X or no Y variables.")
    return VnnlibSpec(n_in, n_out, _regions(clauses, n_in, n_out, source), source=source)


def _regions(clauses: list[list[_Atom]], n_in: int, n_out: int, source: str):
    grouped: dict[tuple[tuple[float, ...], tuple[float, ...]], list[OutputPolytope]] = {}
    for clause in clauses:
        lower = np.full(n_in, -np.inf)
        upper = np.full(n_in, np.inf)
        rows, rhs = [], []
        for atom in clause:
            if atom.kind == "X":
                (idx, c), = atom.coef
                if c > 0:
                    upper[idx] = min(upper[idx], atom.rhs)
                else:
                    lower[idx] = max(lower[idx], -atom.rhs)
            elif atom.coef:
                row = np.zeros(n_out)
                for idx, c in atom.coef:
                    row[idx] += c
                rows.append(row)
                rhs.append(atom.rhs)
        if np.any(lower > upper):
            continue  # an empty input box contributes nothing
        if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
            missing = int(np.flatnonzero(~(np.isfinite(lower) & np.isfinite(upper)))[0])
            raise DataError(f"{source}: input X_{missing} has no finite lower and upper bound.")
        poly = OutputPolytope(
            np.array(rows, dtype=np.float64).reshape(len(rows), n_out),
            np.array(rhs, dtype=np.float64),
        )
        key = (tuple(lower), tuple(upper))
        polys = grouped.setdefault(key, [])
        if poly not in polys:
            polys.append(poly)
    if not grouped:
        raise DataError(f"{source}: the input constraints are unsatisfiable (empty input set).")
    return tuple(
        VnnlibRegion(np.array(lo), np.array(hi), tuple(polys))
        for (lo, hi), polys in grouped.items()
    )


# ---------------------------------------------------------------------------- files
def read_text_maybe_gz(path: str | Path) -> str:
    """Read a text file, transparently gunzipping ``*.gz`` (VNN-COMP ships both)."""
    if not isinstance(path, str | os.PathLike):
        raise InputError(f"The 'path' parameter must be a path. Got {type(path).__name__}.")
    p = Path(path)
    if not p.is_file():
        gz = p.with_name(p.name + ".gz")
        if gz.is_file():
            p = gz
        else:
            raise DataError(f"File '{path}' does not exist.")
    try:
        if p.suffix == ".gz":
            with gzip.open(p, "rt", encoding="utf-8") as fh:
                return fh.read()
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"Cannot read '{p}': {exc}.") from None


def load_vnnlib(path: str | Path) -> VnnlibSpec:
    """Parse a VNN-LIB file (``.vnnlib`` or ``.vnnlib.gz``)."""
    return parse_vnnlib(read_text_maybe_gz(path), source=str(path))


def _num(v: float) -> str:
    return repr(float(v))


def format_vnnlib(spec: VnnlibSpec) -> str:
    """Write a spec back as VNN-LIB text; ``parse_vnnlib(format_vnnlib(s)) == s``."""
    if not isinstance(spec, VnnlibSpec):
        raise InputError(f"format_vnnlib needs a VnnlibSpec. Got {type(spec).__name__}.")
    lines = [f"(declare-const X_{i} Real)" for i in range(spec.n_inputs)]
    lines += [f"(declare-const Y_{j} Real)" for j in range(spec.n_outputs)]
    disjuncts = []
    for region in spec.regions:
        box = [f"(<= X_{i} {_num(hi)}) (>= X_{i} {_num(lo)})"
               for i, (lo, hi) in enumerate(zip(region.lower, region.upper, strict=True))]
        for poly in region.polytopes:
            atoms = []
            for row, rhs in zip(poly.A, poly.b, strict=True):
                nz = np.flatnonzero(row)
                if len(nz) == 1 and row[nz[0]] in (1.0, -1.0):
                    j = int(nz[0])
                    op = "<=" if row[j] > 0 else ">="
                    atoms.append(f"({op} Y_{j} {_num(rhs * row[j])})")
                elif len(nz) == 2 and rhs == 0.0 and sorted(row[nz]) == [-1.0, 1.0]:
                    pos, neg = (int(nz[0]), int(nz[1])) if row[nz[0]] > 0 else (int(nz[1]), int(nz[0]))
                    atoms.append(f"(<= Y_{pos} Y_{neg})")
                else:
                    raise InputError(
                        "format_vnnlib can only write atoms Y_j vs constant or Y_j vs Y_k."
                    )
            disjuncts.append(f"(and {' '.join(box)} {' '.join(atoms)})")
    lines.append("(assert (or\n    " + "\n    ".join(disjuncts) + "\n))")
    return "\n".join(lines) + "\n"

