"""Escape attempts against the sandbox: each one must be contained and reported.

Each attack is a small Python script run as a validator would be run. The namespace tests run
where :func:`trustlab.sandbox.probe` finds namespace isolation (they skip, saying why, where it
does not); the limits tests run at both levels. The fork attack is bounded by the script itself
(at most 2,000 forks) so that a broken limit could never take a shared machine down: it checks
that the sandbox stops it far below that.
"""

from __future__ import annotations

import contextlib
import os
import socket
import textwrap
import threading
from pathlib import Path

import pytest

from trustlab.core.errors import InputError
from trustlab.sandbox import Limits, Sandbox, SandboxError, probe

NAMESPACE = probe().level == "namespace"
needs_ns = pytest.mark.skipif(
    not NAMESPACE, reason=f"no namespace isolation here: {probe().reason}"
)


def _run(tmp_path: Path, code: str, *, isolation: str = "auto", **limits) -> object:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "attack.py").write_text(textwrap.dedent(code))
    box = Sandbox(isolation=isolation, limits=Limits(**{"timeout_s": 20, **limits}))
    return box.run([box.python(), "attack.py"], work)


@needs_ns
def test_a_socket_to_a_listening_host_server_never_connects(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.5)
    port = server.getsockname()[1]
    accepted = []

    def accept():
        with contextlib.suppress(OSError):
            accepted.append(server.accept())

    thread = threading.Thread(target=accept)
    thread.start()
    result = _run(
        tmp_path,
        f"""
        import socket
        for host in ("127.0.0.1", "1.1.1.1", "8.8.8.8"):
            try:
                socket.create_connection((host, {port} if host == "127.0.0.1" else 53), timeout=2)
                print("CONNECTED", host)
            except OSError as exc:
                print("BLOCKED", host, type(exc).__name__)
        try:
            socket.getaddrinfo("pypi.org", 443)
            print("RESOLVED")
        except OSError as exc:
            print("NO_DNS", type(exc).__name__)
    """,
    )
    thread.join()
    server.close()
    assert result.status == "ok", result.summary() + result.stderr
    assert "CONNECTED" not in result.stdout and "RESOLVED" not in result.stdout
    assert result.stdout.count("BLOCKED") == 3
    assert accepted == []


@needs_ns
def test_writes_outside_the_directory_fail_and_leave_nothing(tmp_path):
    outside = tmp_path / "outside.txt"
    existing = tmp_path / "existing.txt"
    existing.write_text("original")
    home = Path.home()
    result = _run(
        tmp_path,
        f"""
        import os
        targets = [{str(outside)!r}, {str(home / "trustlab-sandbox-escape.txt")!r},
                   "/usr/trustlab-escape.txt", "/tmp/../usr/x", "/escape.txt",
                   {str(existing)!r}]
        for t in targets:
            try:
                with open(t, "w") as f:
                    f.write("escaped")
                print("WROTE", t)
            except OSError as exc:
                print("DENIED", t, type(exc).__name__)
        open("inside.txt", "w").write("fine")          # its own directory is writable
        open("/tmp/scratch.txt", "w").write("fine")    # and its private /tmp
        print("INSIDE_OK")
    """,
    )
    assert result.status == "ok", result.summary() + result.stderr
    assert "WROTE" not in result.stdout, result.stdout
    assert result.stdout.count("DENIED") == 6 and "INSIDE_OK" in result.stdout
    assert not outside.exists()
    assert not (home / "trustlab-sandbox-escape.txt").exists()
    assert (tmp_path / "work" / "inside.txt").read_text() == "fine"
    assert existing.read_text() == "original"


@needs_ns
def test_the_home_directory_and_host_paths_are_not_visible(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    result = _run(
        tmp_path,
        f"""
        import os
        for p in [{str(Path.home())!r}, {str(secret)!r}, "/etc/passwd", "/etc/shadow",
                  "/proc/1/environ", {str(tmp_path)!r}]:
            try:
                if os.path.isdir(p):
                    print("LISTED", p, os.listdir(p))
                else:
                    print("READ", p, open(p).read()[:20])
            except OSError as exc:
                print("HIDDEN", p, type(exc).__name__)
        print("ENV", sorted(os.environ))
    """,
    )
    assert result.status == "ok", result.summary() + result.stderr
    assert "s3cret" not in result.stdout
    lines = result.stdout.splitlines()
    home_line = next(line for line in lines if str(Path.home()) in line and "ENV" not in line)
    # the home path may exist only as an empty mount point of the interpreter's own directory
    assert home_line.startswith("HIDDEN") or ".pyenv" in home_line or "[]" in home_line
    assert not any(line.startswith("READ /etc") for line in lines)
    env_line = next(line for line in lines if line.startswith("ENV"))
    assert "TRUSTLAB_SECRET_PROBE" not in env_line


@needs_ns
def test_the_environment_is_scrubbed(tmp_path, monkeypatch):
    monkeypatch.setenv("TRUSTLAB_SECRET_PROBE", "tok-123")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    result = _run(
        tmp_path,
        """
        import os
        print(sorted(os.environ.items()))
    """,
    )
    assert result.ok, result.stderr
    assert "tok-123" not in result.stdout and "sk-test" not in result.stdout
    assert "HOME', '/sandbox'" in result.stdout


@needs_ns
def test_unbounded_forks_are_stopped_by_the_process_limit(tmp_path):
    result = _run(
        tmp_path,
        """
        import os, time
        made = 0
        for _ in range(2000):          # the test's own safety bound
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            made += 1
        print("FORKED", made)
    """,
        max_processes=24,
        timeout_s=15,
    )
    assert result.status == "ok", result.summary() + result.stderr
    made = int(result.stdout.split()[-1])
    assert made < 24, made
    # the sleeping children die with the namespace: nothing of the run's uid remains
    assert result.wall_s < 14


def test_an_endless_loop_is_killed_and_reported(tmp_path):
    result = _run(tmp_path, "while True:\n    pass\n", timeout_s=2, cpu_s=30)
    assert result.status == "timeout" and not result.ok
    assert result.wall_s < 10
    result = _run(tmp_path, "while True:\n    pass\n", timeout_s=30, cpu_s=1)
    assert result.status == "cpu_limit", result.summary()


def test_a_memory_bomb_is_stopped_and_reported(tmp_path):
    result = _run(tmp_path, "x = bytearray(4 * 1024 ** 3)\nprint(len(x))\n", memory_mb=256)
    assert result.status == "memory_limit", result.summary() + result.stderr[-300:]


def test_a_huge_file_is_stopped_by_the_file_size_limit(tmp_path):
    result = _run(
        tmp_path,
        """
        with open("big.bin", "wb") as f:
            f.write(b"0" * (8 * 1024 * 1024))
    """,
        max_file_mb=1,
    )
    assert not result.ok
    assert (tmp_path / "work" / "big.bin").stat().st_size <= 1024 * 1024


def test_output_is_capped(tmp_path):
    result = _run(tmp_path, "print('x' * 200000)\n", max_output_bytes=1000)
    assert result.ok and result.truncated and len(result.stdout) == 1000


@needs_ns
def test_sleeping_children_do_not_outlive_a_timeout(tmp_path):
    marker = "trustlab-orphan-probe-7431"
    result = _run(
        tmp_path,
        f"""
        import subprocess, time
        subprocess.Popen(["sleep", "600"], start_new_session=True)
        subprocess.Popen(["/bin/sh", "-c", "exec -a {marker} sleep 600"])
        time.sleep(60)
    """,
        timeout_s=2,
    )
    assert result.status == "timeout"
    import subprocess
    import time

    time.sleep(0.5)
    leftover = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    assert leftover.strip() == ""


def test_rlimits_level_still_bounds_and_times_out(tmp_path):
    result = _run(tmp_path, "while True:\n    pass\n", isolation="rlimits", timeout_s=2)
    assert result.status == "timeout" and result.isolation == "rlimits"


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(InputError, match="argv"):
        Sandbox().run("python x.py", tmp_path)
    with pytest.raises(InputError, match="workdir"):
        Sandbox().run(["true"], tmp_path / "missing")
    with pytest.raises(InputError, match="timeout_s"):
        Limits(timeout_s=0)
    with pytest.raises(InputError, match="isolation"):
        Sandbox(isolation="docker")


def test_namespace_isolation_is_refused_where_it_is_unavailable(monkeypatch):
    from trustlab.sandbox import runner

    monkeypatch.setattr(runner, "probe", lambda: runner.IsolationReport("rlimits", "none", "test"))
    with pytest.raises(SandboxError, match="not available"):
        _ = Sandbox(isolation="namespace").level
    assert Sandbox().level == "rlimits"


def test_the_work_directory_is_handed_back_to_the_caller(tmp_path):
    result = _run(tmp_path, "open('made.txt', 'w').write('x')\n")
    assert result.ok
    made = tmp_path / "work" / "made.txt"
    assert made.stat().st_uid == os.geteuid()


@needs_ns
def test_the_mounts_cannot_be_undone_from_inside(tmp_path):
    result = _run(
        tmp_path,
        """
        import os, subprocess
        attempts = [
            ["umount", "-l", "/tmp"],
            ["mount", "-o", "remount,rw", "/usr"],
            ["mount", "-o", "remount,rw", "/"],
            ["unshare", "-rm", "sh", "-c", "umount -l /sandbox; mount -o remount,rw,bind /usr && touch /usr/pwned"],
            ["unshare", "-rn", "sh", "-c", "ip link set lo up"],
        ]
        for argv in attempts:
            r = subprocess.run(argv, capture_output=True, text=True)
            print("RC", r.returncode, " ".join(argv[:3]))
        for t in ("/usr/pwned", "/usr/x"):
            try:
                open(t, "w")
                print("WROTE", t)
            except OSError as exc:
                print("DENIED", t, type(exc).__name__)
        print("ROOT", sorted(os.listdir("/")))
    """,
    )
    assert result.status == "ok", result.summary() + result.stderr
    assert "WROTE" not in result.stdout, result.stdout
    assert ".old" not in result.stdout  # the host's root is unmounted, not hidden
    assert not Path("/usr/pwned").exists()
