"""The ``trustlab`` command line: list, run, report, and one sub-command group per method.

User errors print one line to stderr and exit with status 2; nothing imports this module.
"""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from trustlab import __version__
from trustlab.core.catalogue import CATALOGUE
from trustlab.core.errors import ConfigError, TrustlabError, UnknownMethodError

app = typer.Typer(
    help="trustlab: nineteen methods for AI safety and trustworthy ML.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"trustlab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """trustlab: nineteen methods for AI safety and trustworthy ML."""


@app.command("list")
def list_methods() -> None:
    """List the nineteen methods: id, field, title, and whether each is implemented."""
    from rich.console import Console
    from rich.table import Table

    from trustlab.core.registry import is_implemented

    table = Table("id", "field", "title", "implemented")
    for info in CATALOGUE:
        table.add_row(info.id, info.field, info.title, "yes" if is_implemented(info.id) else "no")
    Console(width=160).print(table)


@app.command("run")
def run(
    method: Annotated[str, typer.Argument(help="A method id, or 'all' for every implemented one.")],
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="YAML file of config values.")
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", "-s", help="Override a config key: --set key=value (repeatable)."),
    ] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Use the quick preset (seconds).")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of every random generator.")] = 0,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output directory.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Run a method's experiment and write report.json, report.md and figures/."""
    from trustlab.core.registry import implemented_ids
    from trustlab.core.runner import default_out_dir, run_experiment

    _configure_logging(quiet)
    overrides = list(set_ or [])
    if method == "all":
        if config is not None or overrides:
            raise ConfigError("'trustlab run all' takes no --config or --set; run methods one by one.")
        failures = []
        for method_id in implemented_ids():
            target = out / method_id if out is not None else default_out_dir(method_id)
            try:
                result = run_experiment(method_id, quick=quick, seed=seed, out_dir=target,
                                        quiet=quiet)
            except TrustlabError as exc:
                failures.append(method_id)
                typer.echo(f"error: {method_id}: {exc}", err=True)
                continue
            _print_result(result)
        if failures:
            typer.echo(f"error: {len(failures)} method(s) failed: {', '.join(failures)}", err=True)
            raise typer.Exit(1)
        return
    result = run_experiment(method, config_file=config, overrides=overrides, quick=quick, seed=seed,
                            out_dir=out, quiet=quiet)
    _print_result(result)


@app.command("report")
def report(
    directory: Annotated[Path, typer.Argument(help="Directory searched for report.json files.")],
) -> None:
    """Render a static HTML index over every report.json under DIRECTORY."""
    from trustlab.core.html_index import find_reports, render_index

    index = render_index(directory)
    typer.echo(f"{len(find_reports(directory))} report(s) indexed: {index}")


@app.command("config")
def config_command(
    method: Annotated[str, typer.Argument(help="A method id.")],
) -> None:
    """Print the config reference of a method (keys, types, defaults, quick preset) as Markdown."""
    from trustlab.core.config import config_reference
    from trustlab.core.registry import get_experiment

    typer.echo(config_reference(get_experiment(method).config_cls))


def _print_result(result) -> None:  # type: ignore[no-untyped-def]
    headline = ", ".join(f"{k}={_short(v)}" for k, v in result.report.headline.items())
    typer.echo(f"[{result.report.method_id}] {headline}")
    typer.echo(f"[{result.report.method_id}] report: {result.report_path}")


def _short(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _configure_logging(quiet: bool) -> None:
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )


def _mount_method_clis(argv: list[str]) -> None:
    """Add ``trustlab <id> ...`` for every method that ships a ``cli`` module with an ``app``.

    Only the group actually invoked is imported (method packages pull in torch, scipy, ...);
    the others appear in ``--help`` as light stubs that point to ``trustlab <id> --help``.
    """
    from trustlab.core.registry import method_module_file

    wanted = argv[1] if len(argv) > 1 and argv[0] == "serve" else (argv[0] if argv else None)
    if wanted == "organisms":
        from trustlab.organisms.cli import app as organisms_app

        app.add_typer(organisms_app, name="organisms")
    else:
        app.add_typer(
            typer.Typer(help="Tiny trained transformers: the embedded default models (list, build)."),
            name="organisms",
        )
    for info in CATALOGUE:
        if not method_module_file(info.id, "cli").is_file():
            continue
        if info.id == wanted:
            module = importlib.import_module(f"trustlab.methods.{info.module}.cli")
            sub = getattr(module, "app", None)
            if isinstance(sub, typer.Typer):
                app.add_typer(sub, name=info.id)
            continue
        stub = typer.Typer(help=f"Commands of {info.id} ({info.title}).")
        app.add_typer(stub, name=info.id)


# Top-level shortcuts for method commands that a field expects at the top level.
ALIASES: dict[str, list[str]] = {"verify": ["flowreach", "verify"]}


def _serving_argv(argv: list[str]) -> list[str]:
    """``trustlab serve <id> ARGS`` is ``trustlab <id> serve ARGS`` (methods that offer a service);
    ``trustlab verify ARGS`` is ``trustlab flowreach verify ARGS``."""
    if argv and argv[0] in ALIASES:
        return [*ALIASES[argv[0]], *argv[1:]]
    if len(argv) >= 2 and argv[0] == "serve" and not argv[1].startswith("-"):
        from trustlab.core.catalogue import method_info
        from trustlab.core.registry import method_module_file

        info = method_info(argv[1])
        if not method_module_file(info.id, "cli").is_file():
            raise UnknownMethodError(f"Method '{info.id}' offers no service.")
        return [info.id, "serve", *argv[2:]]
    return argv


@app.command("serve", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def serve(
    method: Annotated[str, typer.Argument(help="A method that offers a service (e.g. lisa).")],
) -> None:
    """Start a method's service: `trustlab serve lisa --db PATH --port P` (see `trustlab lisa serve --help`)."""
    raise UnknownMethodError(f"Method '{method}' offers no service.")  # reached only without a cli


@app.command("verify", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def verify() -> None:
    """Verify NET.onnx PROP.vnnlib (or --benchmark DIR): `trustlab flowreach verify --help`."""


def main() -> None:
    """Console-script entry point: user errors become one line on stderr and exit 2."""
    try:
        argv = _serving_argv(sys.argv[1:])
        _mount_method_clis(argv)
        sys.argv[1:] = argv
        app()
    except TrustlabError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
