"""`trustlab bribery ...`: minimum bribes for a score table from the command line."""

from __future__ import annotations

from typing import Annotated

import numpy as np
import typer

from trustlab.core.errors import InputError
from trustlab.datasets.leaderboards import BUILTIN_LEADERBOARDS, load_leaderboard
from trustlab.methods.bribery.bribe import DEFAULT_MARGIN, BribeModel
from trustlab.methods.bribery.robustness import ALL_RULES, robustness

app = typer.Typer(help="Benchmark gaming as shift bribery: leaderboard robustness.",
                  no_args_is_help=True)


@app.command("robustness")
def robustness_cmd(
    scores: Annotated[str, typer.Argument(
        help="Score table (CSV/TSV/parquet, one row per model, higher is better) or a built-in "
        "name such as bbh24.")],
    rule: Annotated[str, typer.Option("--rule", "-r", help=f"One of: {', '.join(ALL_RULES)}.")] = "mwr",
    target: Annotated[str | None, typer.Option(
        "--target", "-t", help="Model name (default: every model).")] = None,
    margin: Annotated[float, typer.Option(help="Bribed score = best other + margin.")] = DEFAULT_MARGIN,
    ceiling: Annotated[float | None, typer.Option(
        help="Bribed score = this value instead (e.g. 100).")] = None,
    time_limit: Annotated[float, typer.Option(help="ILP seconds per target.")] = 10.0,
    model_column: Annotated[str | None, typer.Option(help="Column naming the models.")] = None,
    datasets: Annotated[str | None, typer.Option(
        help="Comma-separated score columns (default: every numeric column that is not "
        "metadata; the output lists what was left out).")] = None,
    duplicates: Annotated[str, typer.Option(
        help="Repeated model names: error, first or last row.")] = "error",
    decimal: Annotated[str, typer.Option(help="Decimal mark of the file: '.' or ','.")] = ".",
) -> None:
    """Print the minimum bribe (number of datasets, and which) for the target or every model."""
    if rule not in ALL_RULES:
        raise InputError(f"Unknown rule '{rule}'. Choose one of: {', '.join(ALL_RULES)}.")
    if time_limit <= 0:
        raise InputError(f"--time-limit must be > 0 seconds. Got {time_limit:g}.")
    kwargs: dict[str, object] = {}
    if model_column is not None:
        kwargs["model_column"] = model_column
    if datasets is not None:
        kwargs["dataset_columns"] = [d.strip() for d in datasets.split(",") if d.strip()]
    if duplicates != "error":
        kwargs["duplicates"] = duplicates
    if decimal != ".":
        kwargs["decimal"] = decimal
    if kwargs and scores in BUILTIN_LEADERBOARDS:
        raise InputError(
            f"'{scores}' is a built-in leaderboard; --model-column, --datasets, --duplicates "
            "and --decimal apply to files only."
        )
    lb = load_leaderboard(scores, **kwargs)
    typer.echo(lb.describe())
    bm = BribeModel(margin=margin, ceiling=ceiling)
    targets = [lb.model_index(target)] if target is not None else range(lb.n_models)
    ks = []
    for t in targets:
        r = robustness(lb, t, rule, model=bm, time_limit=time_limit)
        if not r.feasible:
            typer.echo(f"{r.target_name}: cannot win under {rule} ({r.reason})")
            ks.append(np.inf)
            continue
        if r.k is None:
            typer.echo(f"{r.target_name}: unknown ({r.status}); bounds [{r.lower_bound:g}, "
                       f"{r.upper_bound:g}]")
            continue
        cert = "optimal" if r.optimal else f"best found, lower bound {r.lower_bound:g}"
        typer.echo(f"{r.target_name}: {r.k} of {r.n_datasets} datasets ({r.share:.0%}, {cert})"
                   + (f": {', '.join(r.datasets)}" if r.datasets else ""))
        ks.append(r.k)
    if target is None and ks:
        typer.echo(f"median robustness under {rule}: {np.median(ks):g} of {lb.n_datasets} datasets")
