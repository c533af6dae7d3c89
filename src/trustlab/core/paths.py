"""Where trustlab keeps its cache and looks for the shared real data (one place for both), and
the cross-process lock of a cache entry built into it."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from trustlab.core.errors import InputError

__all__ = ["cache_lock", "shared_data_dir", "trustlab_home"]

log = logging.getLogger(__name__)


def trustlab_home() -> Path:
    """``$TRUSTLAB_HOME``, or ``~/.cache/trustlab`` when unset (organisms, embedding caches)."""
    env = os.environ.get("TRUSTLAB_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "trustlab"


def shared_data_dir(*parts: str) -> Path:
    """``$TRUSTLAB_SHARED_DATA/<parts>``, else ``<checkout>/../shared/data/<parts>``.

    Non-bundled real data (non-commercial or unlicensed) lives there beside a checkout; the
    path may not exist (a user's clone has no ``../shared``), so callers check.
    """
    env = os.environ.get("TRUSTLAB_SHARED_DATA")
    base = Path(env) if env else Path(__file__).resolve().parents[3].parent / "shared" / "data"
    return base.joinpath(*parts)


@contextlib.contextmanager
def cache_lock(target: str | os.PathLike[str], *,
               lock: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """Hold the cross-process lock of the cache entry ``target`` while building it.

    Processes sharing one ``$TRUSTLAB_HOME`` (two pytest-xdist workers, two users' runs) build an
    entry once: the first holds the lock and builds; the others wait (with a log line), then
    find the entry built. Callers check for the entry *again* inside the block::

        with cache_lock(target):
            if not (target / "card.json").is_file():
                build_into(target)   # atomically: temporary sibling, then os.replace

    The lock file is ``<target's folder>/.locks/<target's name>.lock`` unless ``lock`` names
    another file (the organism registry keeps its locks in ``<home>/.locks``, outside the folder
    of built organisms); it holds no state and stays after release (deleting it would let a third process lock a different file). Do not
    nest two blocks for the same target: the inner one would wait for the outer forever.
    Yields ``target`` as a Path.
    """
    from filelock import FileLock, Timeout

    if not isinstance(target, str | os.PathLike) or not str(target) \
            or Path(target).name in ("", ".", ".."):
        raise InputError(f"The 'target' parameter of cache_lock must be a path naming a cache "
                         f"entry. Got {target!r:.80}.")
    if lock is not None and (not isinstance(lock, str | os.PathLike) or not str(lock)
                             or Path(lock).name in ("", ".", "..")):
        raise InputError(f"The 'lock' parameter of cache_lock must be a path naming a lock file "
                         f"or None. Got {lock!r:.80}.")
    path = Path(target)
    lock_file = Path(lock) if lock is not None else path.parent / ".locks" / f"{path.name}.lock"
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    held = FileLock(lock_file)
    try:
        held.acquire(timeout=0)
    except Timeout:
        log.info("waiting for another process building %s", path)
        held.acquire()
    try:
        yield path
    finally:
        held.release()
