"""Work units: a sweep's independent pieces, run on a local or a Ray backend, resumable.

A :class:`Sweep` names its independent :class:`WorkUnit` s (an instance, a target, a model, a
model x prompt-set cell), one pure module-level function that runs one unit, and optionally how
the unit results merge. Each unit carries its own seed (drawn from ``RunContext.child_rng``), so
a unit's result depends on the unit alone -- not on the machine it ran on, nor on the order.

Backends (:func:`make_backend`):

* ``local`` (default): the units run one after the other in this process (today's behaviour).
* ``ray``: one Ray task per unit (``num_cpus`` = the unit's CPU request), results streamed back
  with ``ray.wait`` as they finish; Ray retries a failed task (a raised exception or a lost
  worker) ``retries`` times. Ray is the scheduler: nothing here queues or places work.

A unit that still fails after its retries is reported in :attr:`SweepResult.failed` (with the
error) and never dropped: :meth:`SweepResult.raise_failed` raises :class:`UnitsFailedError`
naming every failed unit. With a :class:`UnitStore` (``RunContext.sweep`` uses
``<run dir>/units/<sweep>``) each finished unit is recorded atomically the moment it arrives; a
re-run with the same store skips the recorded units, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from trustlab.core.errors import InputError, MissingDependencyError, TrustlabError

__all__ = [
    "BACKENDS",
    "LocalBackend",
    "RayBackend",
    "Sweep",
    "SweepResult",
    "UnitOutcome",
    "UnitStore",
    "UnitsFailedError",
    "WorkUnit",
    "make_backend",
    "run_sweep",
    "unit_seed",
]

#: The backend names ``--backend`` accepts.
BACKENDS = ("local", "ray")
#: Retries of a failed unit before it is reported as failed (both backends).
DEFAULT_RETRIES = 2
_STORE_VERSION = 1


class UnitsFailedError(TrustlabError, RuntimeError):
    """Units of a sweep failed after their retries; the message names each and its error.

    The command line exits with status 1 (not 2: the input was fine, the work failed); the
    completed units stay recorded, so re-running the same command retries only the failed ones.
    """

    exit_code = 1

    def __init__(self, sweep: str, failed: Mapping[str, str]) -> None:
        self.sweep = sweep
        self.failed = dict(failed)
        shown = "; ".join(f"{k}: {v}" for k, v in list(self.failed.items())[:5])
        more = f" (and {len(self.failed) - 5} more)" if len(self.failed) > 5 else ""
        super().__init__(f"{len(self.failed)} unit(s) of sweep '{sweep}' failed after their "
                         f"retries: {shown}{more}. Completed units are recorded; re-run the "
                         "same command to retry only the failed ones.")


# ----------------------------------------------------------------------------- units and sweeps
def unit_seed(rng_factory: Callable[[str], np.random.Generator], sweep: str, key: str) -> int:
    """The seed of unit ``key`` of ``sweep``: drawn from ``rng_factory(f"{sweep}/{key}")``.

    Pass ``RunContext.child_rng`` as ``rng_factory``: the seed then depends on the run's seed,
    the sweep and the key only (not on the unit's position or on other units).
    """
    if not callable(rng_factory):
        raise InputError("The 'rng_factory' parameter of unit_seed must be callable (e.g. "
                         f"RunContext.child_rng). Got {type(rng_factory).__name__}.")
    _check_name(sweep, "sweep", "unit_seed")
    _check_name(key, "key", "unit_seed")
    return int(rng_factory(f"{sweep}/{key}").integers(0, 2**63 - 1))


def _check_name(value: object, what: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"The '{what}' parameter of {where} must be a non-empty string. "
                         f"Got {value!r}.")
    return value


@dataclass(frozen=True)
class WorkUnit:
    """One independent piece of a sweep: a key unique in the sweep, the payload the unit
    function reads (picklable), its seed and its CPU request (Ray's ``num_cpus``)."""

    key: str
    payload: Any = None
    seed: int = 0
    num_cpus: float = 1.0

    def __post_init__(self) -> None:
        _check_name(self.key, "key", "WorkUnit")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int | np.integer) \
                or not 0 <= int(self.seed) < 2**63:
            raise InputError(f"The 'seed' parameter of WorkUnit must be an integer in "
                             f"[0, 2**63). Got {self.seed!r}.")
        if isinstance(self.num_cpus, bool) or not isinstance(self.num_cpus, int | float) \
                or not (0 < float(self.num_cpus) <= 1024):
            raise InputError(f"The 'num_cpus' parameter of WorkUnit must be a number in "
                             f"(0, 1024]. Got {self.num_cpus!r}.")

    def rng(self) -> np.random.Generator:
        """A fresh Generator seeded by this unit's seed (the same wherever the unit runs)."""
        return np.random.default_rng(int(self.seed))


@dataclass(frozen=True)
class Sweep:
    """Independent units, the pure function that runs one (``fn(unit) -> result``; module-level
    so Ray workers import it by name) and an optional ``merge(results) -> value`` called with the
    results as a dict key -> result in the units' declared order."""

    name: str
    fn: Callable[[WorkUnit], Any]
    units: tuple[WorkUnit, ...]
    merge: Callable[[dict[str, Any]], Any] | None = None

    def __post_init__(self) -> None:
        _check_name(self.name, "name", "Sweep")
        if not callable(self.fn):
            raise InputError(f"The 'fn' parameter of Sweep must be callable. Got {self.fn!r}.")
        if self.merge is not None and not callable(self.merge):
            raise InputError(f"The 'merge' parameter of Sweep must be callable or None. "
                             f"Got {self.merge!r}.")
        units = tuple(self.units) if isinstance(self.units, Iterable) else None
        if units is None or not all(isinstance(u, WorkUnit) for u in units):
            raise InputError("The 'units' parameter of Sweep must be WorkUnit objects.")
        seen: set[str] = set()
        for u in units:
            if u.key in seen:
                raise InputError(f"Sweep '{self.name}' repeats the unit key '{u.key}'.")
            seen.add(u.key)
        object.__setattr__(self, "units", units)

    @classmethod
    def of(cls, name: str, fn: Callable[[WorkUnit], Any], payloads: Mapping[str, Any], *,
           rng_factory: Callable[[str], np.random.Generator],
           merge: Callable[[dict[str, Any]], Any] | None = None,
           num_cpus: float = 1.0) -> Sweep:
        """Units from ``key -> payload``, each seeded by :func:`unit_seed` from ``rng_factory``
        (``RunContext.child_rng``)."""
        if not isinstance(payloads, Mapping):
            raise InputError("The 'payloads' parameter of Sweep.of must map unit keys to "
                             f"payloads. Got {type(payloads).__name__}.")
        units = tuple(WorkUnit(k, p, unit_seed(rng_factory, name, k), num_cpus)
                      for k, p in payloads.items())
        return cls(name, fn, units, merge)


@dataclass(frozen=True)
class UnitOutcome:
    """What became of one unit: ``ok`` with its ``value``, or the ``error`` after ``attempts``."""

    key: str
    ok: bool
    value: Any = None
    error: str = ""
    attempts: int = 1
    seconds: float = 0.0


@dataclass
class SweepResult:
    """Results in the units' declared order, the failed units with their errors, the units taken
    from the store (``resumed``) and the backend that ran the rest."""

    sweep: str
    results: dict[str, Any]
    failed: dict[str, str] = field(default_factory=dict)
    resumed: tuple[str, ...] = ()
    backend: str = "local"
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.failed

    def raise_failed(self) -> SweepResult:
        """Raise :class:`UnitsFailedError` if any unit failed; else return self."""
        if self.failed:
            raise UnitsFailedError(self.sweep, self.failed)
        return self


# ----------------------------------------------------------------------------- the store
def _canonical(obj: Any) -> Any:
    """A process-independent form of a payload for fingerprinting.

    Pickling a payload as it is depends on the process: a pydantic model pickles its set of
    set fields and a ``set`` of strings iterates in hash order (``PYTHONHASHSEED``); a numpy
    ``Generator`` pickles its current state. Models become their class and field values,
    sets and mappings are sorted, generators become their bit generator's state.
    """
    if isinstance(obj, BaseModel):
        cls = type(obj)
        return ("model", f"{cls.__module__}.{cls.__qualname__}",
                _canonical({name: getattr(obj, name) for name in cls.model_fields}))
    if isinstance(obj, Mapping):
        items = [(_canonical(k), _canonical(v)) for k, v in obj.items()]
        return ("map", tuple(sorted(items, key=repr)))
    if isinstance(obj, set | frozenset):
        return ("set", tuple(sorted((_canonical(v) for v in obj), key=repr)))
    if isinstance(obj, list | tuple):
        return (type(obj).__name__, tuple(_canonical(v) for v in obj))
    if isinstance(obj, np.random.Generator):
        return ("generator", _canonical(obj.bit_generator.state))
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            return ("array", "O", obj.shape, _canonical(obj.tolist()))
        return ("array", obj.dtype.str, obj.shape, obj.tobytes())
    return obj


class UnitStore:
    """Finished units of one sweep, one pickle file per unit under ``root``, written atomically.

    A record holds the unit's fingerprint (sweep, function, key, payload, seed, trustlab
    version): a unit whose declaration changed is run again instead of being taken from the store.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        if not isinstance(root, str | os.PathLike):
            raise InputError(f"The 'root' parameter of UnitStore must be a path. Got {root!r}.")
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        slug = re.sub(r"[^A-Za-z0-9_.-]", "_", key)[:60]
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        return self.root / f"{slug}-{digest}.pkl"

    @staticmethod
    def fingerprint(sweep: Sweep, unit: WorkUnit) -> str:
        from trustlab import __version__

        fn = f"{getattr(sweep.fn, '__module__', '')}.{getattr(sweep.fn, '__qualname__', '')}"
        record = (_STORE_VERSION, __version__, sweep.name, fn, unit.key,
                  _canonical(unit.payload), int(unit.seed))
        try:
            blob = pickle.dumps(record, protocol=4)
        except Exception:  # a payload holding a lambda or a local class: hashed by its repr,
            blob = repr(record).encode()  # which changes between processes: never resumed
        return hashlib.sha256(blob).hexdigest()

    def load(self, sweep: Sweep, unit: WorkUnit) -> tuple[bool, Any]:
        """(True, value) when the unit is recorded with the same fingerprint, else (False, None).

        An unreadable record (a file cut short by a crash cannot exist: writes are atomic, but a
        foreign file may) counts as absent and is run again.
        """
        path = self._path(unit.key)
        try:
            with open(path, "rb") as fh:
                record = pickle.load(fh)
        except Exception:  # unreadable or foreign: not a record of this unit
            return False, None
        if not isinstance(record, dict) or record.get("key") != unit.key \
                or record.get("fingerprint") != self.fingerprint(sweep, unit):
            return False, None
        return True, record.get("value")

    def save(self, sweep: Sweep, unit: WorkUnit, value: Any, *,
             fingerprint: str | None = None) -> Path:
        """Record a finished unit atomically (temporary file, fsync, rename).

        ``fingerprint``: the unit's fingerprint taken *before* it ran (``run_sweep`` passes it);
        a unit run in this process may have advanced a generator in its payload, and the
        record must match the declaration a re-run will compare against.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        path = self._path(unit.key)
        if fingerprint is None:
            fingerprint = self.fingerprint(sweep, unit)
        record = {"key": unit.key, "fingerprint": fingerprint, "value": value}
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as fh:
                pickle.dump(record, fh, protocol=4)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return path

    def keys(self) -> list[str]:
        """Keys of the records present (whatever their fingerprint)."""
        out = []
        for p in sorted(self.root.glob("*.pkl")) if self.root.is_dir() else ():
            try:
                with open(p, "rb") as fh:
                    out.append(pickle.load(fh)["key"])
            except Exception:
                continue
        return out


# ----------------------------------------------------------------------------- backends
def _check_retries(retries: object, where: str) -> int:
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 100:
        raise InputError(f"The 'retries' parameter of {where} must be an integer in [0, 100]. "
                         f"Got {retries!r}.")
    return retries


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:500] if text else type(exc).__name__


class LocalBackend:
    """Units one after the other in this process; a raising unit is retried ``retries`` times."""

    name = "local"

    def __init__(self, retries: int = DEFAULT_RETRIES) -> None:
        self.retries = _check_retries(retries, "LocalBackend")

    def imap(self, fn: Callable[[WorkUnit], Any],
             units: Iterable[WorkUnit]) -> Iterator[UnitOutcome]:
        for unit in units:
            error = ""
            start = time.perf_counter()
            for attempt in range(1, self.retries + 2):
                try:
                    value = fn(unit)
                except Exception as exc:  # reported with the unit, never dropped
                    error = _describe(exc)
                    continue
                yield UnitOutcome(unit.key, True, value, attempts=attempt,
                                  seconds=time.perf_counter() - start)
                break
            else:
                yield UnitOutcome(unit.key, False, error=error, attempts=self.retries + 1,
                                  seconds=time.perf_counter() - start)

    def close(self) -> None:
        """Nothing to release."""


_ADDRESS = re.compile(r"^(?:ray://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})$")


def _check_address(address: str | None, probe_timeout: float) -> str | None:
    """None / 'auto' / 'local' / [ray://]host:port; a host:port must accept a TCP connection."""
    if address is None:
        return None
    if not isinstance(address, str) or not address.strip():
        raise InputError(f"--ray-address must be host:port, ray://host:port, 'auto' or 'local'. "
                         f"Got {address!r}.")
    address = address.strip()
    if address in ("auto", "local"):
        return address
    m = _ADDRESS.match(address)
    if m is None or not 0 < int(m["port"]) < 65536:
        raise InputError(f"--ray-address '{address}' is not host:port, ray://host:port, 'auto' "
                         "or 'local'.")
    host = m["host"].strip("[]")
    try:
        with socket.create_connection((host, int(m["port"])), timeout=probe_timeout):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InputError(f"--ray-address '{address}': no Ray cluster answers there "
                         f"({reason}); start one with 'ray start --head' or fix the "
                         "address.") from None
    return address


class RayBackend:
    """One Ray task per unit (``num_cpus`` = the unit's request), results streamed back with
    ``ray.wait``; Ray retries a failed task ``retries`` times (exceptions and lost workers).

    ``address`` None starts (or joins, when this process already called ``ray.init``) a local
    Ray with ``num_cpus`` CPUs -- unless RAY_ADDRESS is set, which Ray then joins; 'auto' joins
    the cluster started on this machine by ``ray start``; host:port / ray://host:port a remote
    head. A cluster this backend started is shut down by :meth:`close`.
    """

    name = "ray"

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None,
                 retries: int = DEFAULT_RETRIES, probe_timeout: float = 5.0) -> None:
        self.retries = _check_retries(retries, "RayBackend")
        if num_cpus is not None and (isinstance(num_cpus, bool) or not isinstance(num_cpus, int)
                                     or num_cpus < 1):
            raise InputError(f"The 'num_cpus' parameter of RayBackend must be a positive "
                             f"integer or None. Got {num_cpus!r}.")
        self.address = _check_address(address, probe_timeout)
        self.num_cpus = num_cpus
        self._owns = False
        self._remote: dict[Any, Any] = {}
        try:
            import ray
        except ImportError:
            raise MissingDependencyError.for_package("ray", "dist", "The ray backend") from None
        self._ray = ray
        self._start()

    def _start(self) -> None:
        ray = self._ray
        if ray.is_initialized():
            return
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True,
                                  "configure_logging": False}
        if self.address in (None, "local") and not (self.address is None
                                                    and os.environ.get("RAY_ADDRESS")):
            kwargs["num_cpus"] = self.num_cpus
            kwargs["address"] = "local"
        else:
            kwargs["address"] = self.address  # None: Ray reads RAY_ADDRESS
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
            where = self.address or os.environ.get("RAY_ADDRESS") or "a local cluster"
            raise InputError(f"Cannot start or join Ray at {where}: "
                             f"{' '.join(str(exc).split())[:300]}") from None
        self._owns = True

    def _task(self, fn: Callable[[WorkUnit], Any], num_cpus: float) -> Any:
        key = (fn, float(num_cpus))
        if key not in self._remote:
            self._remote[key] = self._ray.remote(num_cpus=num_cpus, max_retries=self.retries,
                                                 retry_exceptions=True)(_call_unit).options(
                name=getattr(fn, "__qualname__", "unit"))
        return self._remote[key]

    def imap(self, fn: Callable[[WorkUnit], Any],
             units: Iterable[WorkUnit]) -> Iterator[UnitOutcome]:
        """Submit every unit, then yield each outcome as its task finishes (completion order)."""
        ray = self._ray
        started = time.perf_counter()
        refs = {self._task(fn, u.num_cpus).remote(fn, u): u.key for u in units}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                key = refs.pop(ref)
                try:
                    value, seconds = ray.get(ref)
                except Exception as exc:  # after Ray's retries: reported, never dropped
                    cause = getattr(exc, "cause", None) or exc
                    yield UnitOutcome(key, False, error=_describe(cause),
                                      attempts=self.retries + 1,
                                      seconds=time.perf_counter() - started)
                else:
                    yield UnitOutcome(key, True, value, seconds=seconds)

    def close(self) -> None:
        """Shut down the Ray this backend started (a joined or caller-started one stays up)."""
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns = False


def _call_unit(fn: Callable[[WorkUnit], Any], unit: WorkUnit) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn(unit)
    return value, time.perf_counter() - start


def make_backend(name: str = "local", address: str | None = None, *,
                 num_cpus: int | None = None, retries: int = DEFAULT_RETRIES
                 ) -> LocalBackend | RayBackend:
    """The backend called ``name`` ('local' or 'ray'); ``address`` only with 'ray'."""
    if name not in BACKENDS:
        raise InputError(f"--backend must be one of {', '.join(BACKENDS)}. Got {name!r}.")
    if name == "local":
        if address is not None:
            raise InputError("--ray-address needs --backend ray.")
        return LocalBackend(retries)
    return RayBackend(address, num_cpus=num_cpus, retries=retries)


# ----------------------------------------------------------------------------- running a sweep
def run_sweep(sweep: Sweep, *, backend: LocalBackend | RayBackend | None = None,
              store: UnitStore | str | os.PathLike[str] | None = None,
              progress: Callable[..., Iterable[Any]] | None = None,
              on_result: Callable[[str, Any], None] | None = None) -> SweepResult:
    """Run the units of ``sweep`` not already in ``store`` on ``backend`` (default local).

    Each finished unit is saved to the store the moment its result arrives, then passed to
    ``on_result(key, value)`` (resumed units first, in declared order; then as they finish).
    ``progress`` wraps the stream of outcomes (``RunContext.progress``: a bar advancing as
    results come back). Failed units are in the result's ``failed``; ``raise_failed()`` stops.
    """
    if not isinstance(sweep, Sweep):
        raise InputError(f"The 'sweep' parameter of run_sweep must be a Sweep. Got {sweep!r}.")
    backend = backend if backend is not None else LocalBackend()
    if not hasattr(backend, "imap"):
        raise InputError(f"The 'backend' parameter of run_sweep must be a LocalBackend or "
                         f"RayBackend. Got {backend!r}.")
    if store is not None and not isinstance(store, UnitStore):
        store = UnitStore(store)
    if progress is not None and not callable(progress):
        raise InputError("The 'progress' parameter of run_sweep must be callable or None.")
    if on_result is not None and not callable(on_result):
        raise InputError("The 'on_result' parameter of run_sweep must be callable or None.")
    done: dict[str, Any] = {}
    resumed: list[str] = []
    todo: list[WorkUnit] = []
    for unit in sweep.units:
        found, value = store.load(sweep, unit) if store is not None else (False, None)
        if found:
            done[unit.key] = value
            resumed.append(unit.key)
        else:
            todo.append(unit)
    if on_result is not None:
        for key in resumed:
            on_result(key, done[key])
    by_key = {u.key: u for u in todo}
    # Fingerprints before anything runs: the local backend runs units on the caller's objects.
    prints = {u.key: store.fingerprint(sweep, u) for u in todo} if store is not None else {}
    failed: dict[str, str] = {}
    seconds: dict[str, float] = {}
    stream: Iterable[UnitOutcome] = backend.imap(sweep.fn, todo) if todo else ()
    if progress is not None and todo:
        stream = progress(stream, description=sweep.name, total=len(todo))
    for outcome in stream:
        seconds[outcome.key] = outcome.seconds
        if outcome.ok:
            done[outcome.key] = outcome.value
            if store is not None:
                store.save(sweep, by_key[outcome.key], outcome.value,
                           fingerprint=prints[outcome.key])
            if on_result is not None:
                on_result(outcome.key, outcome.value)
        else:
            failed[outcome.key] = f"{outcome.error} (after {outcome.attempts} attempt(s))"
    ordered = {u.key: done[u.key] for u in sweep.units if u.key in done}
    return SweepResult(sweep.name, ordered, {u.key: failed[u.key] for u in sweep.units
                                             if u.key in failed},
                       tuple(resumed), getattr(backend, "name", "local"), seconds)
