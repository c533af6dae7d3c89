"""Run untrusted commands in a subprocess that holds: namespaces, a read-only view, limits.

Isolation levels (``probe()`` says which one this machine gives):

``namespace``
    Linux namespaces through util-linux (``unshare``, ``mount``, ``pivot_root``, ``setpriv``):
    a new mount, network, PID, IPC and UTS namespace. The command sees a fresh root holding
    only read-only binds of the system and Python directories it needs (``/usr``, the
    interpreter's prefixes, paths the caller names), its own writable directory at
    ``/sandbox``, a private ``/tmp`` (tmpfs), ``/dev/{null,zero,random,urandom}`` and a
    ``/proc`` of its own PID namespace. The user's home, the host's ``/tmp`` and every other
    path do not exist for it; the network namespace has only a loopback device that is down.
    The setup runs as (namespace) root; the command then runs with no capabilities, with
    ``no_new_privs``, and as root on the host as an unprivileged uid picked for the run, so
    ``RLIMIT_NPROC`` binds (it does not bind uid 0). As a non-root user the same setup runs
    inside a user namespace (``unshare --user --map-root-user``), with the command keeping the
    caller's uid and losing every capability.
``rlimits``
    Where namespaces are unavailable: a plain subprocess in a new session, with the same
    resource limits, a scrubbed environment and a private working directory, but **no**
    network or filesystem isolation. Callers decide whether that is acceptable (the isc
    method's agentic setting refuses it unless told ``unsandboxed=True``).

Every run: wall-clock timeout (the whole process tree is killed: in a PID namespace, killing
its first process kills every process in it), ``RLIMIT_CPU``, ``RLIMIT_AS`` (memory),
``RLIMIT_NPROC`` (processes), ``RLIMIT_FSIZE`` (largest file), ``RLIMIT_NOFILE``, captured
output capped in size, and an environment holding only ``PATH``, ``HOME=/sandbox``, ``TMPDIR``,
``LANG`` and ``PYTHON*`` switches (plus what the caller passes). The result says how the run
ended (:class:`SandboxResult.status`): ``ok``, ``failed``, ``timeout``, ``cpu_limit``,
``memory_limit``, ``killed`` (another signal) or ``error`` (the sandbox could not start).

Written by hand over util-linux rather than taking bubblewrap/nsjail/docker: those are not on
our machines (nor installable from PyPI), while util-linux is part of every Debian/Ubuntu base
system. The escape tests (tests/sandbox/) attack each property: sockets, writes outside the
directory, unbounded forks, endless loops, reads of the home directory, memory, environment.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import resource
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from trustlab.core.errors import InputError, TrustlabError
from trustlab.core.validation import check_scalar

__all__ = [
    "Isolation",
    "IsolationReport",
    "Limits",
    "Sandbox",
    "SandboxError",
    "SandboxResult",
    "probe",
]

log = logging.getLogger(__name__)

Isolation = Literal["namespace", "rlimits"]
Status = Literal["ok", "failed", "timeout", "cpu_limit", "memory_limit", "killed", "error"]

_TOOLS = ("unshare", "mount", "umount", "pivot_root", "setpriv")
_TOOL_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
_SANDBOX_DIR = "/sandbox"
_SYSTEM_RO = ("/usr", "/bin", "/lib", "/lib32", "/lib64", "/sbin", "/libx32")


class SandboxError(TrustlabError, RuntimeError):
    """The sandbox could not give the isolation asked for (e.g. no namespaces here)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run (each also bounds every child process)."""

    timeout_s: float = 10.0  # wall clock for the whole run
    cpu_s: int = 10  # RLIMIT_CPU per process (SIGXCPU, then SIGKILL)
    memory_mb: int = 1024  # RLIMIT_AS per process (address space, not resident memory)
    max_processes: int = 32  # RLIMIT_NPROC of the run's uid
    max_file_mb: int = 16  # RLIMIT_FSIZE
    max_open_files: int = 256  # RLIMIT_NOFILE
    max_output_bytes: int = 65536  # stdout and stderr are each cut to this many bytes
    tmp_mb: int = 64  # size of the private /tmp (namespace isolation)

    def __post_init__(self) -> None:
        for name in ("timeout_s", "cpu_s", "memory_mb", "max_processes", "max_file_mb",
                     "max_open_files", "max_output_bytes", "tmp_mb"):  # fmt: skip
            # finite, > 0 and at most 2**31 (a huge rlimit failed in the child's preexec, a huge
            # timeout overflowed in communicate); whole numbers (numpy ints too) for the rlimits
            kind = float if name == "timeout_s" else int
            value = check_scalar(getattr(self, name), name, "Limits", kind=kind, lo=0, hi=2**31,
                                 closed="right")
            object.__setattr__(self, name, value)


@dataclass(frozen=True)
class SandboxResult:
    """How a sandboxed command ended. ``status`` is one of ``ok`` (exit 0), ``failed`` (another
    exit code), ``timeout`` (wall clock), ``cpu_limit``, ``memory_limit``, ``killed`` (another
    signal) and ``error`` (the sandbox itself failed to start; ``stderr`` says why)."""

    status: Status
    returncode: int | None
    signal: int | None
    stdout: str
    stderr: str
    wall_s: float
    isolation: Isolation
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def summary(self) -> str:
        """One line: status, exit code or signal, seconds."""
        how = f"signal {self.signal}" if self.signal else f"exit {self.returncode}"
        return f"{self.status} ({how}, {self.wall_s:.2f} s, {self.isolation})"


@dataclass(frozen=True)
class IsolationReport:
    """What :func:`probe` found: the best level here, how it is obtained, and why not better."""

    level: Isolation
    mode: Literal["root", "userns", "none"]
    reason: str = ""


# ---------------------------------------------------------------------------------------------


def _set_limits(limits: Limits) -> None:  # runs in the child between fork and exec
    def lim(what: int, value: int) -> None:
        try:
            resource.setrlimit(what, (value, value))
        except (ValueError, OSError):
            _soft, hard = resource.getrlimit(what)
            resource.setrlimit(what, (min(value, hard) if hard >= 0 else value, hard))

    lim(resource.RLIMIT_CPU, int(limits.cpu_s))
    lim(resource.RLIMIT_AS, int(limits.memory_mb) * 1024 * 1024)
    lim(resource.RLIMIT_NPROC, int(limits.max_processes))
    lim(resource.RLIMIT_FSIZE, int(limits.max_file_mb) * 1024 * 1024)
    lim(resource.RLIMIT_NOFILE, int(limits.max_open_files))
    lim(resource.RLIMIT_CORE, 0)


def _base_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": _SANDBOX_DIR,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONHASHSEED": "0",
    }
    if extra is not None and not isinstance(extra, Mapping):
        raise InputError(f"The sandbox 'env' must be a mapping str -> str. Got "
                         f"{type(extra).__name__}.")
    for key, value in (extra or {}).items():
        if (not isinstance(key, str) or not isinstance(value, str) or not key or "=" in key
                or "\0" in key or "\0" in value):
            raise InputError(f"Sandbox environment entries are str -> str. Got {key!r}.")
        env[key] = value
    return env


def _python_paths() -> list[str]:
    """The directories the running interpreter needs (prefixes, the executable's real home)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    real = Path(os.path.realpath(sys.executable))
    paths.add(str(real.parent.parent))
    for entry in sys.path:
        if entry and "site-packages" in entry and os.path.isdir(entry):
            paths.add(entry)
    return sorted(p for p in paths if p and os.path.isdir(p))


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _setup_script(root: str, work: str, readable: Sequence[str], run_uid: int | None,
                  limits: Limits, argv: Sequence[str], env: Mapping[str, str]) -> str:  # fmt: skip
    """The shell run as the PID namespace's first process: build the root, then run argv."""
    q = shlex.quote
    lines = [
        "set -eu",
        "mount --make-rprivate /",
        f"mount -t tmpfs -o mode=0755,size=16m trustlab-sandbox {q(root)}",
    ]
    binds: list[str] = []
    for path in readable:
        if _under(path, binds):
            continue
        binds.append(path)
    for path in binds:
        target = root + path
        if os.path.islink(path) and os.path.dirname(path) == "/":
            lines.append(f"ln -s {q(os.readlink(path))} {q(target)}")
            continue
        lines.append(f"mkdir -p {q(target)}")
        lines.append(f"mount --rbind {q(path)} {q(target)}")
        lines.append(f"mount -o remount,bind,ro {q(target)}")
    lines += [
        f"mkdir -p {q(root + _SANDBOX_DIR)} {q(root + '/tmp')} {q(root + '/dev')} "
        f"{q(root + '/proc')}",
        f"mount --bind {q(work)} {q(root + _SANDBOX_DIR)}",
        f"mount -t tmpfs -o mode=1777,size={int(limits.tmp_mb)}m,nosuid,nodev sandbox-tmp "
        f"{q(root + '/tmp')}",
    ]
    for dev in ("null", "zero", "random", "urandom"):
        lines.append(f"touch {q(root + '/dev/' + dev)}")
        lines.append(f"mount --bind /dev/{dev} {q(root + '/dev/' + dev)}")
    lines += [
        # a /proc of this PID namespace (optional: some container runtimes forbid it)
        f"mount -t proc -o nosuid,nodev,noexec proc {q(root + '/proc')} 2>/dev/null || true",
        f"mkdir {q(root + '/.old')}",
        f"cd {q(root)}",
        "pivot_root . .old",
        "cd /",
        "umount -l /.old",
        "rmdir /.old",
        "mount -o remount,ro,bind / 2>/dev/null || mount -o remount,ro /",
        f"cd {_SANDBOX_DIR}",
    ]
    drop = ["setpriv", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]
    if run_uid is not None:
        drop += [f"--reuid={run_uid}", f"--regid={run_uid}", "--clear-groups"]
    envs = [f"{k}={v}" for k, v in env.items()]
    command = " ".join(q(a) for a in [*drop, "--", "env", "-i", *envs, *argv])
    # not exec: this shell stays the namespace's first process, so killing it kills them all
    lines += ["set +e", command, "exit $?"]
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=1)
def probe() -> IsolationReport:
    """The best isolation this machine gives (cached for the process): runs ``true`` inside."""
    if not sys.platform.startswith("linux"):
        return IsolationReport("rlimits", "none", "namespaces need Linux")
    missing = [t for t in _TOOLS if shutil.which(t, path=_TOOL_PATH) is None]
    if missing:
        return IsolationReport("rlimits", "none", f"util-linux tools missing: {missing}")
    mode: Literal["root", "userns"] = "root" if os.geteuid() == 0 else "userns"
    box = Sandbox(isolation="namespace", limits=Limits(timeout_s=30, cpu_s=10))
    try:
        with tempfile.TemporaryDirectory(prefix="trustlab-probe-") as tmp:
            result = box._run_namespace(["true"], Path(tmp), None, None, mode)
    except OSError as exc:  # pragma: no cover - depends on the machine
        return IsolationReport("rlimits", "none", f"namespace sandbox failed: {exc}")
    if result.status != "ok":
        reason = (result.stderr.strip().splitlines() or [result.summary()])[-1]
        return IsolationReport("rlimits", "none", f"namespace sandbox failed: {reason}")
    return IsolationReport("namespace", mode)


@dataclass
class Sandbox:
    """Run commands in a sandbox (see the module docstring).

    ``isolation``: ``"auto"`` (the best :func:`probe` finds), ``"namespace"`` (fail with
    :class:`SandboxError` where unavailable) or ``"rlimits"`` (limits only, no isolation).
    ``readable``: extra host paths the command may read (bound read-only at the same path).
    """

    isolation: Literal["auto", "namespace", "rlimits"] = "auto"
    limits: Limits = field(default_factory=Limits)
    readable: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.isolation not in ("auto", "namespace", "rlimits"):
            raise InputError(
                f"The 'isolation' of a Sandbox is 'auto', 'namespace' or 'rlimits'. "
                f"Got {self.isolation!r}."
            )
        if not isinstance(self.limits, Limits):
            raise InputError(
                f"'limits' must be a sandbox Limits. Got {type(self.limits).__name__}."
            )
        if isinstance(self.readable, str | bytes | os.PathLike) or not isinstance(
            self.readable, Sequence | set | frozenset
        ):  # a lone "/data" would be read as the paths "/", "d", "a", ...: "/" exposes the host
            raise InputError(
                f"'readable' of a Sandbox must be a list of paths. Got {self.readable!r:.80}."
            )
        if not all(isinstance(p, str | os.PathLike) for p in self.readable):
            raise InputError(f"'readable' of a Sandbox must hold paths. Got {self.readable!r:.80}.")
        self.readable = tuple(str(p) for p in self.readable)

    @property
    def level(self) -> Isolation:
        """The isolation runs get (``auto`` resolved by :func:`probe`)."""
        if self.isolation == "auto":
            return probe().level
        if self.isolation == "namespace" and probe().level != "namespace":
            raise SandboxError(
                f"Namespace isolation is not available here ({probe().reason}); use "
                "isolation='rlimits' only for code you trust."
            )
        return self.isolation

    def with_limits(self, **changes: float) -> Sandbox:
        unknown = sorted(set(changes) - set(Limits.__dataclass_fields__))
        if unknown:
            raise InputError(f"Unknown sandbox limit(s) {unknown}; the limits are "
                             f"{sorted(Limits.__dataclass_fields__)}.")
        return Sandbox(self.isolation, replace(self.limits, **changes), self.readable)

    def run(
        self,
        argv: Sequence[str],
        workdir: str | os.PathLike[str],
        *,
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
    ) -> SandboxResult:
        """Run ``argv`` with ``workdir`` as its writable directory (``/sandbox`` inside a
        namespace sandbox, the working directory in both levels)."""
        if (isinstance(argv, str | bytes) or not isinstance(argv, Sequence) or not argv
                or not all(isinstance(a, str) and "\0" not in a for a in argv)):
            raise InputError(f"'argv' must be a non-empty list of strings (no NUL). Got "
                             f"{argv!r:.80}.")
        if stdin is not None and not isinstance(stdin, str):
            raise InputError(f"The sandbox 'stdin' must be a str or None. Got {type(stdin).__name__}.")
        if not isinstance(workdir, str | os.PathLike):
            raise InputError(f"The sandbox 'workdir' must be a path. Got {type(workdir).__name__}.")
        work = Path(workdir)
        if not work.is_dir():
            raise InputError(f"The sandbox 'workdir' must be an existing directory. Got {work}.")
        if self.level == "namespace":
            return self._run_namespace(list(argv), work.resolve(), env, stdin, probe().mode)
        return self._run_rlimits(list(argv), work.resolve(), env, stdin)

    def python(self) -> str:
        """The interpreter to run Python in the sandbox with (this process's, its site-packages
        readable inside)."""
        return sys.executable

    # -----------------------------------------------------------------------------------------

    def _run_rlimits(self, argv: list[str], work: Path, env: Mapping[str, str] | None,
                     stdin: str | None) -> SandboxResult:  # fmt: skip
        full_env = _base_env(env)
        full_env["HOME"] = str(work)
        return self._spawn(argv, full_env, work, stdin, "rlimits")

    def _run_namespace(self, argv: list[str], work: Path, env: Mapping[str, str] | None,
                       stdin: str | None, mode: str) -> SandboxResult:  # fmt: skip
        with tempfile.TemporaryDirectory(prefix="trustlab-sandbox-root-") as rootdir:
            os.chmod(rootdir, 0o755)
            run_uid = None
            if mode == "root":
                # an unprivileged uid of its own per run: RLIMIT_NPROC counts per uid and does
                # not bind uid 0; one uid per run keeps concurrent sandboxes from sharing it
                run_uid = 2_000_000 + secrets.randbelow(1_000_000)
                _chown_tree(work, run_uid)
            readable = [p for p in _SYSTEM_RO if os.path.lexists(p)]
            readable += _python_paths() + [str(Path(p).resolve()) for p in self.readable]
            script = _setup_script(rootdir, str(work), readable, run_uid, self.limits, argv,
                                   _base_env(env))  # fmt: skip
            outer = [shutil.which("unshare", path=_TOOL_PATH) or "unshare", "--mount", "--net", "--pid", "--ipc", "--uts", "--fork",
                     "--kill-child"]  # fmt: skip
            if mode == "userns":
                outer.insert(1, "--user")
                outer.insert(2, "--map-root-user")
            try:
                return self._spawn([*outer, "/bin/sh", "-c", script], {"PATH": _TOOL_PATH},
                                   work, stdin, "namespace")  # fmt: skip
            finally:
                if run_uid is not None:
                    _chown_tree(work, os.geteuid(), os.getegid())

    def _spawn(self, argv: list[str], env: dict[str, str], cwd: Path, stdin: str | None,
               level: Isolation) -> SandboxResult:  # fmt: skip
        limits = self.limits
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=functools.partial(_set_limits, limits),
                close_fds=True,
            )
        except OSError as exc:
            return SandboxResult("error", None, None, "", f"could not start: {exc}",
                                 time.perf_counter() - start, level)  # fmt: skip
        timed_out = False
        try:
            out, err = proc.communicate(
                stdin.encode() if stdin is not None else None, timeout=limits.timeout_s
            )
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_tree(proc)
            out, err = proc.communicate()
        wall = time.perf_counter() - start
        cap = limits.max_output_bytes
        truncated = len(out) > cap or len(err) > cap
        rc = proc.returncode
        sig = -rc if rc is not None and rc < 0 else None
        if level == "namespace" and rc is not None and rc > 128 and not timed_out:
            sig = rc - 128  # the first process (sh) reports the command's signal as 128 + n
        text_err = err[:cap].decode("utf-8", "replace")
        if timed_out:
            status: Status = "timeout"
        elif sig == signal.SIGXCPU or (sig == signal.SIGKILL and "xcpu" in text_err.lower()):
            status = "cpu_limit"
        elif sig is not None:
            status = "memory_limit" if _mentions_memory(text_err) else "killed"
            if sig == signal.SIGKILL and _cpu_exhausted(wall, limits):
                status = "cpu_limit"
        elif rc == 0:
            status = "ok"
        else:
            status = "memory_limit" if _mentions_memory(text_err) else "failed"
        return SandboxResult(
            status, None if sig else rc, sig, out[:cap].decode("utf-8", "replace"), text_err,
            wall, level, truncated,
        )  # fmt: skip


def _mentions_memory(stderr: str) -> bool:
    tail = stderr[-2000:]
    return "MemoryError" in tail or "Cannot allocate memory" in tail or "std::bad_alloc" in tail


def _cpu_exhausted(wall: float, limits: Limits) -> bool:
    return wall >= limits.cpu_s  # SIGKILL after the hard CPU limit needs at least that long


def _kill_tree(proc: subprocess.Popen) -> None:
    """Kill the run's session (and with it, in a PID namespace, every process inside)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def _chown_tree(path: Path, uid: int, gid: int | None = None) -> None:
    gid = uid if gid is None else gid
    for dirpath, dirnames, filenames in os.walk(path):
        os.chown(dirpath, uid, gid, follow_symlinks=False)
        for name in (*dirnames, *filenames):
            os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)
