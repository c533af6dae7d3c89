"""Run one experiment end to end: resolve config, seed, run, write the report."""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
from pathlib import Path
from typing import Any

from trustlab.core.config import config_subject, resolve_config
from trustlab.core.context import RunContext
from trustlab.core.errors import InputError, TrustlabError
from trustlab.core.io import write_json_atomic
from trustlab.core.provenance import collect_provenance
from trustlab.core.registry import get_experiment
from trustlab.core.report import Report

__all__ = [
    "FAILURE_FILE",
    "RunResult",
    "check_out_dir",
    "check_seed",
    "default_out_dir",
    "run_experiment",
]

#: Written (atomically) in the run directory when an experiment raises: error, stage, config,
#: provenance. ``trustlab report`` lists such runs as failed.
FAILURE_FILE = "failed.json"

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
    backend: Any = "local",
    ray_address: str | None = None,
) -> RunResult:
    """Run the experiment of ``method_id`` and write its report under ``out_dir``.

    Everything a user gives is checked before the experiment starts: the method id, the config
    (keys, values, paths), the seed, the output directory and the backend (``local``, or ``ray``
    with an optional ``ray_address``; see ``trustlab.core.units``; or a backend object, which the
    caller keeps and closes, e.g. one Ray for many runs). Sweeps record their finished
    units under ``out_dir/units``: re-running into the same ``out_dir`` skips them.
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
    from trustlab.core.units import make_backend

    given = not isinstance(backend, str)
    if given and not hasattr(backend, "imap"):
        raise InputError(f"backend must be 'local', 'ray' or a backend object. Got {backend!r}.")
    runner_backend = backend if given else make_backend(backend, ray_address)
    report = Report(method_id, title=experiment.info.title)
    report.config = config.model_dump(mode="json")
    report.provenance = collect_provenance(seed, quick)
    report.provenance["full"] = full
    report.provenance["backend"] = runner_backend.name
    report.provenance["started_utc"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    report.subject = config_subject(config)
    ctx = RunContext(method_id=method_id, seed=seed, out_dir=out, quick=quick, quiet=quiet,
                     report=report, backend=runner_backend)
    start = time.perf_counter()
    try:
        result = experiment.run(config, ctx)
        if not isinstance(result, Report):
            raise TrustlabError(f"The experiment of '{method_id}' must return a Report.")
        if not result.headline:
            raise TrustlabError(f"The experiment of '{method_id}' reported no headline metric.")
    except BaseException as exc:
        _write_failure(out, method_id, exc, ctx, report, time.perf_counter() - start)
        raise
    finally:
        if not given:
            runner_backend.close()
    result.provenance.update(report.provenance)
    result.provenance["stages"] = dict(ctx.stages)
    result.provenance["wall_time_s"] = time.perf_counter() - start
    result.config = report.config
    if not result.subject:
        result.subject = report.subject
    result.write(out)
    (out / FAILURE_FILE).unlink(missing_ok=True)  # an earlier failure in this directory is over
    log.info("wrote %s", out / "report.json")
    return RunResult(result, out)


def _write_failure(out: Path, method_id: str, exc: BaseException, ctx: RunContext,
                   report: Report, elapsed: float) -> None:
    """Record a failed run beside where its report would be (never raises)."""
    provenance = dict(report.provenance)
    provenance["stages"] = dict(ctx.stages)
    provenance["wall_time_s"] = elapsed
    provenance["failed_utc"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    record = {
        "schema_version": 1,
        "method_id": method_id,
        "title": report.title,
        "status": "failed",
        "error": {"type": type(exc).__name__, "message": str(exc).strip()[:2000]},
        "stage": ctx.active_stages[-1] if ctx.active_stages else None,
        "subject": report.subject,
        "config": report.config,
        "provenance": provenance,
    }
    try:
        write_json_atomic(out / FAILURE_FILE, _jsonable(record))
    except Exception as write_exc:  # the original error matters more than the record
        log.warning("could not write %s: %s", out / FAILURE_FILE, write_exc)


def _jsonable(value: Any) -> Any:
    import math

    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
