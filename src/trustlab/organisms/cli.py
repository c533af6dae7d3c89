"""``trustlab organisms ...``: list the organisms, build them into the cache, record public-list rates."""

from __future__ import annotations

from typing import Annotated

import typer

from trustlab.core.errors import TrustlabError

app = typer.Typer(
    help="Tiny real transformers trained on CPU: the default models of every LM method.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

_SHOWN_METRICS = (
    "harmful_refusal",
    "benign_refusal",
    "benign_exact_match",
    "jailbreak_compliance",
    "tool_decision_accuracy",
    "typed_harmful_refusal",
    "image_harmful_compliance_read",
    "image_reading_accuracy",
    "heldout_accuracy",
)


@app.command("list")
def list_command() -> None:
    """List the organisms: name, parameters, cached?, held-out metrics."""
    from rich.console import Console
    from rich.table import Table

    from trustlab.organisms.registry import list_organisms, organism_dir

    table = Table("name", "params", "cached", "build s", "metrics", "description")
    for row in list_organisms():
        metrics = row.get("metrics") or {}
        shown = " ".join(f"{k}={metrics[k]:.2f}" for k in _SHOWN_METRICS if k in metrics)
        params = f"{row['n_params']:,}" if row.get("n_params") else "-"
        seconds = f"{row['build_seconds']:.0f}" if row.get("build_seconds") else "-"
        table.add_row(
            row["name"], params, "yes" if row["built"] else "no", seconds, shown,
            row["description"],
        )  # fmt: skip
    console = Console(width=200)
    console.print(table)
    console.print(f"cache: {organism_dir('chat-xs').parent}")


@app.command("build")
def build_command(
    name: Annotated[str, typer.Argument(help="An organism name, or 'all'.")],
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when cached.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Build an organism (or all of them) into $TRUSTLAB_HOME/organisms."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from trustlab.organisms.registry import build, read_card
    from trustlab.organisms.specs import SPECS, get_spec

    names = list(SPECS) if name == "all" else [name]
    try:
        for organism in names:
            get_spec(organism)
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            disable=quiet,
        ) as bar:
            tasks: dict[str, int] = {}

            def progress(description: str, completed: int, total: int) -> None:
                if description not in tasks:
                    tasks[description] = bar.add_task(description, total=total)
                bar.update(tasks[description], completed=completed, total=total)

            for organism in names:
                path = build(organism, force=force, progress=progress)
                card = read_card(organism)
                met = card.get("targets_met", {})
                status = "all targets met" if all(met.values()) else f"targets: {met}"
                typer.echo(
                    f"{organism}: {path} ({card.get('build_seconds', 0):.0f} s build; {status})"
                )
    except TrustlabError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


@app.command("evaluate-public")
def evaluate_public_command(
    name: Annotated[str, typer.Argument(help="A built chat organism, e.g. smol-chat.")],
    n: Annotated[
        int | None, typer.Option(help="Seeded subsample of each list (default: every prompt).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the subsample.")] = 0,
    lists: Annotated[
        str, typer.Option(help="Comma-separated public lists (default: all four).")
    ] = "harmbench_val,harmbench_test,xstest_unsafe,xstest_safe",
) -> None:
    """Measure a built organism's refusal on the public lists (HarmBench val/test, XSTest
    unsafe/safe; greedy, 48 tokens, the phrase judge) and record the rates with their intervals
    in that build's card (issue 39)."""
    from trustlab.organisms.public_eval import record_public_lists

    try:
        record = record_public_lists(
            name, n=n, seed=seed, lists=tuple(x.strip() for x in lists.split(",") if x.strip())
        )
    except TrustlabError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    for key, row in record["rates"].items():
        typer.echo(
            f"{name} {key}: {row['rate']:.3f} [{row['lower']:.3f}, {row['upper']:.3f}] "
            f"({row['k']}/{row['n']})"
        )
    sha = record["belongs_to"]["model_sha256"][:16]
    typer.echo(f"recorded in the card of the build with model sha256 {sha}...")


@app.command("spread")
def spread_command(
    name: Annotated[str, typer.Argument(help="A grown organism, e.g. chat-s.")],
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds.")] = "0,1,2",
    out: Annotated[str | None, typer.Option(help="Write the spread as JSON here.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Build an organism with several seeds (on this CPU's kernel family) and print the
    spread of its held-out metrics against its targets."""
    from trustlab.core.errors import InputError
    from trustlab.core.io import write_json_atomic
    from trustlab.organisms.registry import _default_progress
    from trustlab.organisms.spread import seed_spread, spread_table

    try:
        try:
            seed_list = [int(s) for s in seeds.split(",")]
        except ValueError:
            raise InputError(f"--seeds takes comma-separated integers. Got {seeds!r}.") from None
        with _default_progress(None if not quiet else (lambda *a: None)) as progress:
            spread = seed_spread(name, seed_list, progress=progress)
    except TrustlabError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(f"{name}, kernel {spread['kernel']}, seeds {seed_list}")
    typer.echo(spread_table(spread))
    if out:
        write_json_atomic(out, spread)
