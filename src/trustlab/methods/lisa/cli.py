"""`trustlab lisa ...`: serve LiSA over HTTP, or check a case from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="LiSA: a fixed guardrail that learns from sparse, noisy user reports.")


@app.command()
def serve(
    db: Annotated[Path, typer.Option("--db", help="SQLite file holding the report log.")] = Path(
        "lisa.db"
    ),
    host: Annotated[str, typer.Option("--host", help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port.")] = 8000,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="TRUSTLAB_LISA_TOKEN",
            help="Bearer token required for POST /v1/report (env TRUSTLAB_LISA_TOKEN).",
        ),
    ] = None,
) -> None:
    """Run the LiSA service (FastAPI + SQLite WAL)."""
    import uvicorn

    from trustlab.methods.lisa.service import create_app

    if token is None:
        typer.echo("warning: no --token / TRUSTLAB_LISA_TOKEN; report writes are open.", err=True)
    uvicorn.run(create_app(db, token=token or None), host=host, port=port, log_level="info")


@app.command()
def check(
    case_json: Annotated[str, typer.Argument(help="The case as a JSON object.")],
    db: Annotated[
        Path | None, typer.Option("--db", help="Replay this report log into memory first.")
    ] = None,
) -> None:
    """Decide one case with the default base guardrail (and a report log's memory)."""
    from trustlab.core.errors import InputError
    from trustlab.methods.lisa.cases import Case
    from trustlab.methods.lisa.guardrail import Lisa
    from trustlab.methods.lisa.service import ReportLog, default_base

    try:
        case = Case.from_dict(json.loads(case_json))
    except json.JSONDecodeError as exc:
        raise InputError(f"The case must be a JSON object: {exc}.") from exc
    log = None if db is None else ReportLog(db, must_exist=True)  # a typo is not a new log
    base = default_base()
    lisa = Lisa(base, embedder=base.embedder)
    if log is not None:
        for _, c, label in log.replay():
            lisa.report(c, label)
    d = lisa.check(case)
    typer.echo(json.dumps({"decision": "block" if d.block else "allow", "score": d.score,
                           "source": d.source, "fired": [f.entry_id for f in d.fired]}))
