"""The ``trustlab`` command line: list, run, report, and one sub-command group per method.

User errors print one line to stderr and exit with status 2; nothing imports this module.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
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
    full: Annotated[bool, typer.Option("--full", help="Use the full preset (paper scale, e.g. "
                                       "the whole organism scaling family), where a method "
                                       "has one.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of every random generator.")] = 0,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output directory (with "
                                             "'all': one sub-directory per method).")] = None,
    runs: Annotated[Path, typer.Option("--runs", help="With 'all' and no --out: the root of "
                                       "the timestamped run directories.")] = Path("runs"),
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
    backend: Annotated[str, typer.Option("--backend", help="Where sweeps run their units: "
                                         "'local' (this process) or 'ray' (Ray tasks; see "
                                         "docs/scale.md).")] = "local",
    ray_address: Annotated[str | None, typer.Option("--ray-address", envvar="RAY_ADDRESS",
                                                    help="With --backend ray: the cluster "
                                                    "(host:port, ray://host:port or 'auto'); "
                                                    "default: a local Ray.")] = None,
) -> None:
    """Run a method's experiment and write report.json, report.md and figures/.

    Re-running into the same --out skips the sweep units already finished there (resume).
    """
    from trustlab.core.runner import check_out_dir, check_seed, run_experiment

    _configure_logging(quiet)
    overrides = list(set_ or [])
    check_seed(seed)
    if quick and full:
        raise ConfigError("--quick and --full exclude each other; give one.")
    from trustlab.core.units import BACKENDS

    if backend not in BACKENDS:
        raise ConfigError(f"--backend must be one of {', '.join(BACKENDS)}. Got {backend!r}.")
    if backend == "local":
        ray_address = None  # RAY_ADDRESS in the environment only matters with --backend ray
    if method == "all":
        if config is not None or overrides:
            raise ConfigError("'trustlab run all' takes no --config or --set; run methods one by one.")
        check_out_dir(out if out is not None else runs, "--out" if out is not None else "--runs")
        _run_all(quick=quick, full=full, seed=seed, out=out, runs=runs, quiet=quiet,
                 backend=backend, ray_address=ray_address)
        return
    if out is not None:
        check_out_dir(out)  # before any work: a finished run is never lost to its output path
    result = run_experiment(method, config_file=config, overrides=overrides, quick=quick, seed=seed,
                            out_dir=out, quiet=quiet, full=full, backend=backend,
                            ray_address=ray_address)
    _print_result(result)


def _run_all(*, quick: bool, full: bool, seed: int, out: Path | None, runs: Path,
             quiet: bool, backend: str = "local", ray_address: str | None = None) -> None:
    """Every implemented method, shortest first: the plan up front, then i of N with times."""
    from trustlab.core.config import resolve_config
    from trustlab.core.plan import format_plan, plan_run
    from trustlab.core.registry import get_experiment, implemented_ids
    from trustlab.core.units import make_backend

    configs, failures = {}, []
    for method_id in implemented_ids():
        try:
            cls = get_experiment(method_id).config_cls
            configs[method_id] = resolve_config(cls, quick=quick, full=full,
                                                method_id=method_id).model_dump(mode="json")
        except TrustlabError as exc:
            failures.append(method_id)
            typer.echo(f"error: {method_id}: {exc}", err=True)
    plan = plan_run(configs, quick=quick, runs_root=runs)
    typer.echo(format_plan(plan))
    shared = make_backend(backend, ray_address)  # one Ray for every method, not one each
    try:
        _run_plan(plan, configs, failures, quick=quick, full=full, seed=seed, out=out,
                  runs=runs, quiet=quiet, backend=shared)
    finally:
        shared.close()


def _run_plan(plan, configs, failures, *, quick, full, seed, out, runs, quiet,  # type: ignore[no-untyped-def]
              backend) -> None:
    """Run the planned methods one after the other on one backend."""
    import time

    from trustlab.core.plan import format_duration
    from trustlab.core.runner import default_out_dir, run_experiment

    start = time.perf_counter()
    for i, item in enumerate(plan, 1):
        method_id = item.method_id
        elapsed = format_duration(time.perf_counter() - start)
        typer.echo(f"[{i}/{len(plan)}] {method_id}: running (estimate "
                   f"~{format_duration(item.total_s)}; {elapsed} elapsed in all)")
        target = out / method_id if out is not None else default_out_dir(method_id, runs)
        began = time.perf_counter()
        try:
            result = run_experiment(method_id, quick=quick, full=full, seed=seed,
                                    out_dir=target, quiet=quiet, backend=backend)
        except TrustlabError as exc:
            failures.append(method_id)
            typer.echo(f"error: {method_id}: {exc}", err=True)
            continue
        _print_result(result)
        typer.echo(f"[{i}/{len(plan)}] {method_id}: done in "
                   f"{format_duration(time.perf_counter() - began)}")
    typer.echo(f"all: {len(plan) - len(set(failures) & set(configs))} of {len(plan)} method(s) "
               f"done in {format_duration(time.perf_counter() - start)}")
    if failures:
        typer.echo(f"error: {len(failures)} method(s) failed: {', '.join(failures)}", err=True)
        raise typer.Exit(1)


@app.command("report")
def report(
    directory: Annotated[Path, typer.Argument(help="Directory searched for runs (report.json, "
                                                     "failed.json).")],
    serve: Annotated[bool, typer.Option("--serve", help="Serve the dashboard on localhost "
                                                         "after writing it (Ctrl-C stops).")] = False,
    port: Annotated[int, typer.Option(help="Port for --serve (0: any free port).")] = 8000,
) -> None:
    """Write the offline dashboard over every run under DIRECTORY (index, run pages, comparisons)."""
    from trustlab.core.errors import InputError
    from trustlab.core.html_index import index_reports

    if serve and not 0 <= port <= 65535:  # before anything is written
        raise InputError(f"The port must be an integer in [0, 65535]. Got {port}.")
    result = index_reports(directory)
    for path, why in result.damaged:
        typer.echo(f"damaged: {path}: {why}", err=True)
    damaged = f" ({len(result.damaged)} damaged, not shown)" if result.damaged else ""
    failed = f", {len(result.failed)} failed run(s)" if result.failed else ""
    typer.echo(f"{len(result.indexed)} report(s) indexed{failed}{damaged}: {result.path}")
    if serve:
        from trustlab.core.dashboard import serve_site

        server = serve_site(directory, port=port, background=True)
        host, real_port = server.server_address[:2]
        typer.echo(f"Serving the dashboard at http://{host}:{real_port}/index.html (Ctrl-C stops)")
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        finally:
            server.shutdown()
            server.server_close()


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

    # Idempotent: a second call (tests drive main() in-process) replaces what the first mounted.
    app.registered_groups = []
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
    """Console-script entry point: user errors become one line on stderr and exit 2.

    That holds for trustlab's own errors and for the command line's (a missing argument, an
    unknown option, a value of the wrong type): click's usage block is folded into one line.
    """
    usage_errors, click_errors, aborts = _click_exception_types()
    try:
        argv = _serving_argv(sys.argv[1:])
        _mount_method_clis(argv)
        sys.argv[1:] = argv
        code = app(standalone_mode=False)
    except TrustlabError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(getattr(exc, "exit_code", 2))  # 1 for work that failed (UnitsFailedError)
    except usage_errors as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # the help is already on the screen
            sys.exit(2)
        names, ctx = [], exc.ctx
        while ctx is not None and ctx.parent is not None:  # the root's name is the program's
            names.insert(0, ctx.info_name)
            ctx = ctx.parent
        hint = f" (see 'trustlab {' '.join([*names, '--help'])}')"
        typer.echo(f"error: {' '.join(exc.format_message().split())}{hint}", err=True)
        sys.exit(2)
    except click_errors as exc:
        typer.echo(f"error: {' '.join(exc.format_message().split())}", err=True)
        sys.exit(exc.exit_code or 2)
    except (KeyboardInterrupt, *aborts):
        typer.echo("interrupted", err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


def _click_exception_types() -> tuple[tuple[type, ...], tuple[type, ...], tuple[type, ...]]:
    """Usage, other click and abort exception types: click's and the copy typer vendors."""
    import click

    modules = [click.exceptions]
    try:
        import typer._click.exceptions as vendored  # typer >= 0.26 ships its own click

        modules.append(vendored)
    except ImportError:
        pass
    return (tuple(m.UsageError for m in modules), tuple(m.ClickException for m in modules),
            (*(getattr(m, "Abort", KeyboardInterrupt) for m in modules), typer.Abort))


if __name__ == "__main__":
    main()
