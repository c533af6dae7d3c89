"""The run context: what an experiment gets besides its config.

Seeded random generators, the output directory, a logger, progress bars and wall time
per stage. Nothing here is global, so two experiments can run in one process.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from trustlab.core.report import Report

__all__ = ["RunContext"]

T = TypeVar("T")


@dataclass
class RunContext:
    """Everything an experiment needs from its surroundings.

    ``rng`` is a numpy Generator seeded from ``seed``; use ``child_rng(name)`` for an
    independent, reproducible stream per component, and ``torch_generator()`` for torch.
    """

    method_id: str
    seed: int
    out_dir: Path
    quick: bool = False
    quiet: bool = False
    report: Report = field(default=None)  # type: ignore[assignment]
    log: logging.Logger = field(default=None)  # type: ignore[assignment]
    stages: dict[str, float] = field(default_factory=dict)
    #: The stages open right now, outermost first (a failure record names the innermost).
    active_stages: list[str] = field(default_factory=list)
    #: Where sweeps run their units (``trustlab.core.units``): a LocalBackend (default) or a
    #: RayBackend (``trustlab run --backend ray``).
    backend: Any = None

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)
        self.rng = np.random.default_rng(self.seed)
        if self.report is None:
            self.report = Report(self.method_id)
        if self.log is None:
            self.log = logging.getLogger(f"trustlab.run.{self.method_id}")
        if self.backend is None:
            from trustlab.core.units import LocalBackend

            self.backend = LocalBackend()

    # -- work units ----------------------------------------------------------------
    def unit_store(self, name: str) -> Any:
        """The :class:`~trustlab.core.units.UnitStore` of sweep ``name`` in this run's
        directory (``<out_dir>/units/<name>``): finished units recorded there are skipped by a
        re-run into the same directory."""
        import re

        from trustlab.core.units import UnitStore

        return UnitStore(self.out_dir / "units" / re.sub(r"[^A-Za-z0-9_.-]", "_", name))

    def run_sweep(self, sweep: Any) -> Any:
        """Run a :class:`~trustlab.core.units.Sweep` on this run's backend, resumably.

        Finished units are recorded in ``<out_dir>/units/<sweep name>``; a re-run into the same
        directory skips them. Units that fail after their retries raise
        :class:`~trustlab.core.units.UnitsFailedError` (the completed ones stay recorded).
        Returns ``sweep.merge(results)``, or the results (key -> value, in declared order).
        """
        from trustlab.core.units import run_sweep

        store = self.unit_store(sweep.name)
        result = run_sweep(sweep, backend=self.backend, store=store, progress=self.progress)
        record = self.report.provenance.setdefault("sweeps", {})
        record[sweep.name] = {"backend": result.backend, "units": len(sweep.units),
                              "resumed": len(result.resumed), "failed": len(result.failed)}
        if result.resumed:
            self.log.info("sweep %s: %d of %d units taken from %s", sweep.name,
                          len(result.resumed), len(sweep.units), store.root)
        result.raise_failed()
        return sweep.merge(result.results) if sweep.merge is not None else result.results

    # -- randomness --------------------------------------------------------------
    def child_rng(self, name: str) -> np.random.Generator:
        """An independent Generator for a named component, stable across code changes elsewhere."""
        key = [ord(c) for c in name]
        return np.random.default_rng(np.random.SeedSequence([self.seed, *key]))

    def torch_generator(self, name: str = "torch") -> Any:
        import torch

        gen = torch.Generator()
        gen.manual_seed(int(self.child_rng(name).integers(0, 2**62)))
        return gen

    # -- timing and progress -----------------------------------------------------
    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a stage of the run; times are recorded in the report's provenance."""
        start = time.perf_counter()
        self.log.info("stage %s ...", name)
        self.active_stages.append(name)
        try:
            yield
        finally:
            self.stages[name] = self.stages.get(name, 0.0) + time.perf_counter() - start
        self.active_stages.pop()  # only on success: a failure leaves the failing stage listed

    @property
    def show_progress(self) -> bool:
        return not self.quiet and sys.stderr.isatty()

    def progress(
        self, items: Iterable[T], *, description: str = "", total: int | None = None
    ) -> Iterator[T]:
        """Iterate with a rich progress bar (silent when quiet or not on a terminal)."""
        if total is None and hasattr(items, "__len__"):
            total = len(items)  # type: ignore[arg-type]
        if not self.show_progress:
            yield from items
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns = (
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, transient=True) as bar:
            task = bar.add_task(description or self.method_id, total=total)
            for item in items:
                yield item
                bar.advance(task)
