"""`trustlab isc ...`: write the workflow library, check workflow folders, run one validator.

Every command that runs a validator runs it in the sandbox and refuses, with one line, where
the sandbox has no namespace isolation; ``--unsandboxed`` opts out explicitly (resource limits
only: the validator could then reach the network and the files this user can read).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trustlab.core.errors import DataError, InputError

app = typer.Typer(help="Internal Safety Collapse: TVD workflows (write, check, validate).",
                  no_args_is_help=True)  # fmt: skip

_UNSANDBOXED = typer.Option(
    "--unsandboxed",
    help="Run validators with resource limits only where namespace isolation is unavailable "
    "(no network or filesystem isolation; only for workflows you trust).",
)


def _sandbox(unsandboxed: bool):
    from trustlab.sandbox import Sandbox, probe

    report = probe()
    if report.level == "namespace":
        return Sandbox("namespace")
    if not unsandboxed:
        raise InputError(
            f"Validators run sandboxed and namespace isolation is unavailable here "
            f"({report.reason or report.level}); pass --unsandboxed to run them with resource "
            "limits only (trusted workflows only)."
        )
    return Sandbox("rlimits")


@app.command("library")
def library_cmd(
    out: Annotated[Path, typer.Argument(help="Directory to write the 53 workflow folders into "
                                        "(created; its parent must exist).")],
) -> None:
    """Write the shipped workflow library (placeholders only) as workflow folders."""
    from trustlab.methods.isc.library import write_library

    if out.exists() and not out.is_dir():
        raise InputError(f"{out} is a file; the library is written into a directory.")
    if not out.parent.is_dir():
        raise InputError(f"The parent of {out} does not exist.")
    flows = write_library(out)
    typer.echo(f"{len(flows)} workflows written to {out}")


@app.command("check")
def check_cmd(
    root: Annotated[Path, typer.Argument(help="A folder of workflow folders, or one workflow "
                                         "folder.")],
    unsandboxed: Annotated[bool, _UNSANDBOXED] = False,
) -> None:
    """Load every workflow under ROOT and validate its data as shipped: it must fail (its
    demanded fields hold placeholders). Exit 1 when one passes."""
    from trustlab.methods.isc.workflow import (
        MANIFEST,
        load_workflow,
        load_workflows,
        run_validators,
    )

    if not root.is_dir():
        raise DataError(f"{root} is not a directory.")
    box = _sandbox(unsandboxed)
    flows = [load_workflow(root)] if (root / MANIFEST).is_file() else load_workflows(root)
    results = run_validators([(w, w.data) for w in flows], box)
    passing = [w.id for w, v in zip(flows, results, strict=True) if v.passed]
    for w, v in zip(flows, results, strict=True):
        state = "PASSES (broken)" if v.passed else f"fails on {', '.join(sorted(set(v.failed_fields()))) or 'its data'}"
        typer.echo(f"{w.id:28s} {w.discipline:22s} {state}")
    typer.echo(f"{len(flows)} workflow(s) loaded; {len(flows) - len(passing)} fail on their "
               f"placeholders as they must ({box.level} isolation).")  # fmt: skip
    if passing:
        typer.echo(f"error: placeholder data passes the validator of {passing}", err=True)
        raise typer.Exit(1)


@app.command("validate")
def validate_cmd(
    folder: Annotated[Path, typer.Argument(help="One workflow folder.")],
    data: Annotated[Path | None, typer.Option("--data", "-d", help="A JSON file of data to "
                                              "validate (default: the folder's own data).")] = None,
    unsandboxed: Annotated[bool, _UNSANDBOXED] = False,
) -> None:
    """Run a workflow's validator (sandboxed) on its data or on --data; print the verdict and
    the fields it rejected. Exit 1 when the data fails."""
    from trustlab.methods.isc.workflow import load_workflow, read_json, run_validator

    flow = load_workflow(folder)
    value = flow.data
    if data is not None:
        if not data.is_file():
            raise DataError(f"--data {data} is not a file.")
        value = read_json(data, f"--data {data}")
    result = run_validator(flow, value, _sandbox(unsandboxed))
    if result.passed:
        typer.echo(f"{flow.id}: passed ({result.sandbox.isolation} isolation)")
        return
    fields = sorted({f for f in result.failed_fields() if f}) or ["(no field named)"]
    typer.echo(f"{flow.id}: failed ({result.sandbox.summary()}); rejected fields: "
               f"{', '.join(fields)}")  # fmt: skip
    raise typer.Exit(1)
