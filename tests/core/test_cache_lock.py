"""``trustlab.core.paths.cache_lock``: one build per cache entry across processes sharing a home.

Properties: for any entry name the lock is held inside the block (another lock on the same file
cannot be taken) and free after it, also when the block raises; malformed targets are one-line
InputErrors; two processes building the same entry build it once.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from pathlib import Path

import pytest
from filelock import FileLock, Timeout
from hypothesis import given
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.core.paths import cache_lock

NAMES = st.text(st.characters(whitelist_categories=("Ll", "Lu", "Nd"),
                              whitelist_characters="-_."), min_size=1, max_size=40).filter(
    lambda n: n not in (".", ".."))


def _held(lock_file: Path) -> bool:
    other = FileLock(lock_file)
    try:
        other.acquire(timeout=0)
    except Timeout:
        return True
    other.release()
    return False


@given(name=NAMES, raises=st.booleans())
def test_the_lock_is_held_inside_the_block_only(tmp_path_factory, name, raises):
    folder = tmp_path_factory.mktemp("home") / "derived"
    target = folder / name
    lock_file = folder / ".locks" / f"{name}.lock"
    expect = pytest.raises(RuntimeError) if raises else contextlib.nullcontext()
    with expect, cache_lock(str(target)) as held:
        assert held == target and isinstance(held, Path)
        assert _held(lock_file)
        if raises:
            raise RuntimeError("a failed build")
    assert not _held(lock_file)  # released, also after a failed build
    assert not target.exists()  # the lock creates no entry, only its lock file


@pytest.mark.parametrize("bad", ["", None, 3, b"x", Path("."), Path("a/.."), ["a"]])
def test_a_malformed_target_is_a_one_line_input_error(bad):
    with pytest.raises(InputError, match="'target' parameter of cache_lock") as info, \
            cache_lock(bad):
        pass
    assert "\n" not in str(info.value)


def _build(target: str, log: str, release: str) -> None:
    with cache_lock(target):
        if not Path(target).is_dir():
            with open(log, "a") as fh:
                fh.write(f"{os.getpid()}\n")
            deadline = time.monotonic() + 30
            while not Path(release).exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            tmp = Path(target + ".tmp")
            tmp.mkdir()
            os.replace(tmp, target)


def test_two_processes_building_one_entry_build_it_once(tmp_path):
    target, log, release = (str(tmp_path / n) for n in ("entry", "builds", "release"))
    ctx = multiprocessing.get_context("fork")
    first = ctx.Process(target=_build, args=(target, log, release))
    first.start()
    deadline = time.monotonic() + 30
    while not Path(log).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    second = ctx.Process(target=_build, args=(target, log, release))
    second.start()  # finds the lock held, waits, then finds the entry built
    Path(release).touch()
    for process in (first, second):
        process.join(timeout=30)
        assert process.exitcode == 0
    assert len(Path(log).read_text().split()) == 1 and Path(target).is_dir()


@given(name=NAMES)
def test_an_explicit_lock_file_is_the_one_held(tmp_path_factory, name):
    home = tmp_path_factory.mktemp("home")
    target, lock_file = home / "organisms" / name, home / ".locks" / f"organism-{name}.lock"
    with cache_lock(target, lock=lock_file):
        assert _held(lock_file)
        assert not (home / "organisms" / ".locks").exists()  # not the default place
    assert not _held(lock_file)


@pytest.mark.parametrize("bad", ["", 3, Path("."), Path("a/.."), ["a"]])
def test_a_malformed_lock_is_a_one_line_input_error(tmp_path, bad):
    with pytest.raises(InputError, match="'lock' parameter of cache_lock") as info, \
            cache_lock(tmp_path / "entry", lock=bad):
        pass
    assert "\n" not in str(info.value)
