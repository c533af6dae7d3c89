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
from trustlab.core.errors import TrustlabError
from trustlab.core.provenance import collect_provenance
from trustlab.core.registry import get_experiment
from trustlab.core.report import Report

__all__ = ["RunResult", "default_out_dir", "run_experiment"]

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


def run_experiment(
    method_id: str,
    *,
    config_file: str | os.PathLike[str] | None = None,
    overrides: list[str] | tuple[str, ...] | dict[str, Any] = (),
    quick: bool = False,
    seed: int = 0,
    out_dir: str | os.PathLike[str] | None = None,
    quiet: bool = True,
) -> RunResult:
    """Run the experiment of ``method_id`` and write its report under ``out_dir``."""
    experiment = get_experiment(method_id)
    config = resolve_config(
        experiment.config_cls,
        quick=quick,
        file=config_file,
        overrides=overrides,
        method_id=method_id,
    )
    out = Path(out_dir) if out_dir is not None else default_out_dir(method_id)
    report = Report(method_id, title=experiment.info.title)
    report.config = config.model_dump(mode="json")
    report.provenance = collect_provenance(seed, quick)
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
