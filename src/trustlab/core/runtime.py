"""Process-wide torch settings, set for a block and restored after it.

torch keeps two pieces of global state that decide both speed and reproducibility on CPU: the
intra-op thread count and the deterministic-algorithms switch. Code that changes them must put
them back, or it silently changes every later computation in the process (a test suite, a
notebook, ``trustlab run all``). :func:`torch_runtime` is the one way trustlab changes them::

    from trustlab.core.runtime import torch_runtime

    with torch_runtime(threads=config.threads, deterministic=True):
        train(...)

It also works as a decorator (``@torch_runtime(threads=1)``). Importing this module does not
import torch: the import happens when a block is entered, so ``import trustlab.core`` stays
light. Experiment configs name the setting ``threads`` (declare it with :data:`ThreadsField`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Annotated

from pydantic import Field

from trustlab.core.errors import InputError

__all__ = ["THREADS_KEY", "Threads", "torch_runtime"]

#: The one config key for torch CPU threads (the contract test holds every config to it).
THREADS_KEY = "threads"

#: The type of an experiment config's ``threads`` field: ``threads: Threads = 1``.
Threads = Annotated[
    int,
    Field(ge=1, description="torch CPU threads, fixed for the run (restored afterwards)."),
]


@contextlib.contextmanager
def torch_runtime(
    threads: int | None = None, *, deterministic: bool | None = None
) -> Iterator[None]:
    """Run a block with ``threads`` torch intra-op threads and deterministic algorithms on/off.

    ``None`` leaves a setting as it is. Both settings are restored on exit, also when the block
    raises. Small tensors (most of trustlab's models) run fastest with one thread on a shared
    machine; ``deterministic=True`` makes torch raise on an operation without a deterministic
    kernel instead of silently varying.
    """
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise InputError(f"The 'threads' parameter of torch_runtime must be an integer >= 1. "
                         f"Got {threads!r}.")
    import torch

    old_threads = torch.get_num_threads()
    old_det = torch.are_deterministic_algorithms_enabled()
    old_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        if deterministic is not None:
            torch.use_deterministic_algorithms(bool(deterministic))
        yield
    finally:
        torch.use_deterministic_algorithms(old_det, warn_only=old_warn_only)
        torch.set_num_threads(old_threads)
