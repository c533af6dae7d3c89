"""`trustlab flowreach verify`: VNN-COMP-style verification of one instance or a benchmark."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Annotated

import typer

from trustlab.core.errors import InputError
from trustlab.core.io import write_text_atomic

app = typer.Typer(help="flowreach: probabilistic NN verification with learned reach sets.")

_PROB_HELP = ("Write 'unsat' for a probabilistic certificate too (VNN-COMP scorers read "
              "'unsat' as a proof; by default only a sound proof is written as 'unsat').")


def _check_out(path: Path | None, what: str) -> None:
    """Fail before any work when an output path cannot be written."""
    if path is None:
        return
    if path.is_dir():
        raise InputError(f"{what} '{path}' is a directory; give a file path.")
    if not path.parent.exists():
        raise InputError(f"{what} '{path}': the folder '{path.parent}' does not exist.")


@app.command("schema")
def schema() -> None:
    """Print the JSON Schema of the sidecar written next to every result file."""
    from trustlab.methods.flowreach.results import SIDECAR_SCHEMA

    typer.echo(json.dumps(SIDECAR_SCHEMA, indent=1))


@app.command("verify")
def verify(
    net: Annotated[Path | None, typer.Argument(help="ONNX network (.onnx or .onnx.gz).")] = None,
    prop: Annotated[Path | None, typer.Argument(help="VNN-LIB property.")] = None,
    benchmark: Annotated[Path | None, typer.Option("--benchmark", help="Folder with an "
                                                   "instances.csv (runs every row).")] = None,
    alpha: Annotated[float | None, typer.Option(help="Conformal miscoverage.")] = None,
    delta: Annotated[float | None, typer.Option(help="PAC miscoverage of the calibration.")] = None,
    epsilon: Annotated[float | None, typer.Option(help="Violation probability to certify.")] = None,
    timeout: Annotated[float | None, typer.Option(help="Seconds per instance (default 116, as "
                                                  "VNN-COMP; the falsifier uses all of it "
                                                  "unless a witness or proof ends it).")] = None,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    clock: Annotated[str, typer.Option(help="What --timeout counts: 'wall' seconds (VNN-COMP) "
                                       "or this process's CPU seconds ('process', for shared "
                                       "machines).")] = "wall",
    result_file: Annotated[Path | None, typer.Option("--result-file", help="Write the VNN-COMP "
                                                     "result here (and the certificate to "
                                                     "FILE.json); with --benchmark, a CSV.")] = None,
    result_dir: Annotated[Path | None, typer.Option("--result-dir", help="With --benchmark: one "
                                                    "result file + sidecar per instance.")] = None,
    probabilistic_unsat: Annotated[bool, typer.Option("--probabilistic-unsat",
                                                      help=_PROB_HELP)] = False,
    backend: Annotated[str, typer.Option("--backend", help="With --benchmark: run the instances "
                                         "'local'ly (one after the other) or as 'ray' tasks "
                                         "(docs/scale.md).")] = "local",
    ray_address: Annotated[str | None, typer.Option("--ray-address", envvar="RAY_ADDRESS",
                                                    help="With --backend ray: the cluster "
                                                    "(host:port, ray://host:port, 'auto'); "
                                                    "default: a local Ray.")] = None,
    cpus_per_instance: Annotated[float, typer.Option("--cpus-per-instance", help="With "
                                                     "--backend ray: CPUs each instance "
                                                     "requests.")] = 1.0,
) -> None:
    """Print sat + witness / unsat (sound proof) / unknown, with what the verdict guarantees.

    With --benchmark and --result-dir, finished instances are recorded in RESULT_DIR/.units;
    re-running the same command skips them (resume after a killed run).
    """
    import numpy as np

    from trustlab.core.runtime import torch_runtime
    from trustlab.datasets.onnx_nets import OnnxNetwork
    from trustlab.datasets.vnnlib import load_vnnlib
    from trustlab.methods.flowreach.verifier import VerifySettings, verify_instance

    _check_out(result_file, "--result-file")
    if result_dir is not None and result_dir.exists() and not result_dir.is_dir():
        raise InputError(f"--result-dir '{result_dir}' exists and is not a directory.")
    given = {"alpha": alpha, "delta": delta, "epsilon": epsilon, "timeout": timeout,
             "clock": clock}
    base = VerifySettings(baselines=False, sound=False,
                          **{k: v for k, v in given.items() if v is not None})
    if benchmark is None and (net is None or prop is None):
        raise InputError("Give NET.onnx and PROP.vnnlib, or --benchmark DIR.")
    if backend == "local":
        ray_address = None  # RAY_ADDRESS only matters with --backend ray
    if benchmark is not None:
        _verify_benchmark(benchmark, base, seed, result_file, result_dir, probabilistic_unsat,
                          backend, ray_address, cpus_per_instance)
        return
    if backend != "local":
        raise InputError("--backend ray needs --benchmark DIR (one instance runs here).")
    with torch_runtime(threads=1):  # small networks: one thread is fastest; restored after
        assert net is not None and prop is not None
        network, spec = OnnxNetwork(net), load_vnnlib(prop)
        res = verify_instance(network, spec, base, np.random.default_rng(seed))
        written, record = _written(res, network, spec, net, prop, result_file,
                                   probabilistic_unsat)
    from trustlab.methods.flowreach.verifier import format_witness

    text = format_witness(res, probabilistic_unsat=probabilistic_unsat)
    typer.echo(text.rstrip() if written != "unknown" or text.startswith("unknown")
               else "unknown")
    verdict, guarantee = res.verdicts["flowreach"], res.guarantee()
    if guarantee == "probabilistic":
        how = "written as unsat (--probabilistic-unsat)" if probabilistic_unsat else \
            "written as unknown: not a proof"
        typer.echo(f"; probabilistic certificate: P(violation) <= {res.certificate:.3g} with "
                   f"confidence {1 - (base.delta or 0) - base.ams_delta:.3g} under the flow "
                   f"assumption ({how})")
    elif guarantee == "sound":
        typer.echo("; sound proof (CROWN box search closed every input box)")
    elif verdict == "sat" and record and record["witness"]:
        w = record["witness"]
        flag = " (small margin: |m| < 1e-4)" if w["small_margin"] else ""
        typer.echo(f"; witness re-checked on an untouched batch-1 onnxruntime session: "
                   f"margin {w['margin']:.3g}{flag}")


def _verify_unit(unit):
    """One benchmark instance (a Ray task or a local call): the network and property travel as
    bytes/text, so workers need no shared file system; the seed is the command's --seed, as for
    a single instance, so an instance's verdict does not depend on the others or on order."""
    import numpy as np

    from trustlab.core.runtime import torch_runtime
    from trustlab.datasets.onnx_nets import OnnxNetwork
    from trustlab.datasets.vnnlib import parse_vnnlib
    from trustlab.methods.flowreach.verifier import VerifySettings, verify_instance

    p = unit.payload
    with torch_runtime(threads=1):
        network = OnnxNetwork(p["onnx"], name=p["onnx_name"])
        spec = parse_vnnlib(p["vnnlib"], source=p["vnnlib_name"])
        return verify_instance(network, spec, VerifySettings(**p["settings"]),
                               np.random.default_rng(unit.seed))


def _verify_benchmark(benchmark, base, seed, result_file, result_dir, probabilistic_unsat,
                      backend, ray_address, cpus_per_instance) -> None:
    from trustlab.core.runtime import torch_runtime
    from trustlab.core.units import Sweep, UnitStore, WorkUnit, make_backend, run_sweep
    from trustlab.datasets.onnx_nets import OnnxNetwork, _load_model_bytes, load_instances
    from trustlab.datasets.vnnlib import parse_vnnlib, read_text_maybe_gz

    instances = load_instances(benchmark)
    if isinstance(cpus_per_instance, bool) or not 0 < cpus_per_instance <= 1024:
        raise InputError(f"--cpus-per-instance must be in (0, 1024]. Got {cpus_per_instance}.")
    runner = make_backend(backend, ray_address)
    units, keys = [], {}
    for inst in instances:
        s = base.model_copy(update={"timeout": min(base.timeout, inst.timeout)})
        key = f"{inst.key[0]}__{inst.key[1]}"
        keys[key] = inst
        units.append(WorkUnit(key, {"onnx": _load_model_bytes(inst.onnx),
                                    "onnx_name": inst.onnx.name,
                                    "vnnlib": read_text_maybe_gz(inst.vnnlib),
                                    "vnnlib_name": str(inst.vnnlib),
                                    "settings": s.model_dump()}, seed, cpus_per_instance))
    sweep = Sweep("flowreach-verify", _verify_unit, tuple(units))
    by_key = {u.key: u for u in sweep.units}
    rows: dict[str, list] = {}
    store = None
    if result_dir is not None:
        result_dir.mkdir(parents=True, exist_ok=True)
        store = UnitStore(result_dir / ".units")

    def write(key, res) -> None:
        inst, p = keys[key], by_key[key].payload
        network = OnnxNetwork(p["onnx"], name=p["onnx_name"])
        spec = parse_vnnlib(p["vnnlib"], source=p["vnnlib_name"])
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", key) + ".txt"
        out = result_dir / name if result_dir is not None else None
        written, record = _written(res, network, spec, inst.onnx, inst.vnnlib, out,
                                   probabilistic_unsat)
        total = res.seconds["flowreach"]
        cert = (record or {}).get("certificate") or {}
        rows[key] = [inst.key[0], inst.key[1], "flowreach", written, res.verdicts["flowreach"],
                     res.guarantee(), cert.get("bound", ""), f"{total:.3f}"]
        typer.echo(f"{inst.key[0]} {inst.key[1]}: {written} "
                   f"[{res.verdicts['flowreach']}, {res.guarantee()}] ({total:.2f} s)")

    try:
        with torch_runtime(threads=1):  # the witness re-checks run here
            result = run_sweep(sweep, backend=runner, store=store, on_result=write)
    finally:
        runner.close()
    if result.resumed:
        typer.echo(f"; {len(result.resumed)} of {len(units)} instance(s) taken from "
                   f"{store.root if store else ''} (resumed)")
    buf = io.StringIO()
    csv.writer(buf).writerows([["onnx", "vnnlib", "tool", "result", "verdict", "guarantee",
                                "certificate", "time_s"],
                               *(rows[u.key] for u in sweep.units if u.key in rows)])
    if result_file is not None:
        write_text_atomic(result_file, buf.getvalue())
    result.raise_failed()  # after writing what finished: the failed instances are named


def _written(res, network, spec, net_path, prop_path, out, probabilistic_unsat):
    from trustlab.methods.flowreach.results import recheck_witness, sidecar_record, write_result
    from trustlab.methods.flowreach.verifier import format_witness

    if out is not None:
        text, record = write_result(out, res, network, spec, net_path, prop_path,
                                    probabilistic_unsat=probabilistic_unsat)
        return text.split("\n", 1)[0], record
    witness = None
    text = format_witness(res, probabilistic_unsat=probabilistic_unsat)
    if res.verdicts.get("flowreach") == "sat" and res.counterexample is not None:
        witness = recheck_witness(network, spec, res.counterexample.x)
        if not witness["confirmed"]:
            text = "unknown\n"
    written = text.split("\n", 1)[0]
    return written, sidecar_record(res, net_path, prop_path, written,
                                   probabilistic_unsat=probabilistic_unsat, witness=witness)
