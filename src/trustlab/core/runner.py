"""Run one experiment end to end: resolve config, seed, run, write the report."""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
from pathlib import Path
from typing import Any

from trustlab.core.config import resolve_config
from trustlab.core.context import RunContext
from trustlab.core.errors import InputError, TrustlabError
from trustlab.core.provenance import collect_provenance
from trustlab.core.registry import get_experiment
from trustlab.core.report import Report

__all__ = ["RunResult", "check_out_dir", "check_seed", "default_out_dir", "run_experiment"]

log = logging.getLogger(__name__)


class RunResult:
    def __init__(self, report: Report, out_dir: Path) -> None:
        self.report = report
        self.out_dir = out_dir

    @property
    def report_path(self) -> Path:
        return self.out_dir / "report.json"


def default_out_dir(method_id: str, root: str | os.PathLike[str] = "runs") -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S_%fZ")
    return Path(root) / method_id / stamp


def check_out_dir(out: str | os.PathLike[str], option: str = "--out") -> Path:
    """Check, before any work, that a run can write its report under ``out``.

    ``out`` may be absent (it is created) or an existing directory (a previous run's files are
    replaced when the new report is written); it may not be a file, sit below a file, or lie
    where the process cannot write. A finished run is never lost to an output problem.
    """
    path = Path(out).expanduser()
    if path.exists() and not path.is_dir():
        raise InputError(f"{option} '{path}' exists and is a file; give a directory (new or "
                         "existing) for the report.")
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"{option} '{path}' cannot be created: '{parent}' is a file.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{option} '{path}' is not writable (no write permission on '{parent}').")
    return path


def check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise InputError(f"The seed must be an integer in [0, 2**63). Got {seed!r}.")
    return seed


def run_experiment(
    method_id: str,
    *,
    config_file: str | os.PathLike[str] | None = None,
    overrides: list[str] | tuple[str, ...] | dict[str, Any] = (),
    quick: bool = False,
    seed: int = 0,
    out_dir: str | os.PathLike[str] | None = None,
    quiet: bool = True,
    full: bool = False,
) -> RunResult:
    """Run the experiment of ``method_id`` and write its report under ``out_dir``.

    Everything a user gives is checked before the experiment starts: the method id, the config
    (keys, values, paths), the seed and the output directory.
    """
    experiment = get_experiment(method_id)
    check_seed(seed)
    config = resolve_config(
        experiment.config_cls,
        quick=quick,
        file=config_file,
        overrides=overrides,
        method_id=method_id,
        full=full,
    )
    out = check_out_dir(out_dir if out_dir is not None else default_out_dir(method_id))
    report = Report(method_id, title=experiment.info.title)
    report.config = config.model_dump(mode="json")
    report.provenance = collect_provenance(seed, quick)
    report.provenance["full"] = full
    report.provenance["started_utc"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    ctx = RunContext(method_id=method_id, seed=seed, out_dir=out, quick=quick, quiet=quiet,
                     report=report)
    start = time.perf_counter()
    result = experiment.run(config, ctx)
    if not isinstance(result, Report):
        raise TrustlabError(f"The experiment of '{method_id}' must return a Report.")
    if not result.headline:
        raise TrustlabError(f"The experiment of '{method_id}' reported no headline metric.")
    result.provenance.update(report.provenance)
    result.provenance["stages"] = dict(ctx.stages)
    result.provenance["wall_time_s"] = time.perf_counter() - start
    result.config = report.config
    result.write(out)
    log.info("wrote %s", out / "report.json")
    return RunResult(result, out)
