"""`trustlab flowreach verify`: VNN-COMP-style verification of one instance or a benchmark."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from trustlab.core.errors import InputError
from trustlab.core.io import write_text_atomic

app = typer.Typer(help="flowreach: probabilistic NN verification with learned reach sets.")


@app.command("verify")
def verify(
    net: Annotated[Path | None, typer.Argument(help="ONNX network (.onnx or .onnx.gz).")] = None,
    prop: Annotated[Path | None, typer.Argument(help="VNN-LIB property.")] = None,
    benchmark: Annotated[Path | None, typer.Option("--benchmark", help="Folder with an "
                                                   "instances.csv (runs every row).")] = None,
    alpha: Annotated[float, typer.Option(help="Conformal miscoverage.")] = 0.005,
    delta: Annotated[float, typer.Option(help="PAC miscoverage of the calibration.")] = 0.01,
    epsilon: Annotated[float, typer.Option(help="Violation probability to certify.")] = 0.01,
    timeout: Annotated[float, typer.Option(help="Seconds per instance.")] = 120.0,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    result_file: Annotated[Path | None, typer.Option("--result-file", help="Write the result "
                                                     "(or, with --benchmark, the CSV) here.")] = None,
) -> None:
    """Print sat + witness / unsat (holds with the probabilistic certificate) / unknown / timeout."""
    import torch

    from trustlab.datasets.onnx_nets import OnnxNetwork, load_instances
    from trustlab.datasets.vnnlib import load_vnnlib
    from trustlab.methods.flowreach.verifier import VerifySettings, format_witness, verify_instance

    torch.set_num_threads(1)
    settings = VerifySettings(alpha=alpha, delta=delta, epsilon=epsilon, timeout=timeout,
                              baselines=False, sound=False)
    if benchmark is not None:
        rows = []
        nets: dict[Path, OnnxNetwork] = {}
        for inst in load_instances(benchmark):
            network = nets.setdefault(inst.onnx, OnnxNetwork(inst.onnx))
            s = VerifySettings(**{**settings.__dict__, "timeout": min(timeout, inst.timeout)})
            res = verify_instance(network, load_vnnlib(inst.vnnlib), s,
                                  np.random.default_rng(seed))
            total = sum(v for k, v in res.seconds.items() if k == "flowreach")
            rows.append([inst.key[0], inst.key[1], "flowreach", res.verdicts["flowreach"],
                         f"{total:.3f}"])
            typer.echo(f"{inst.key[0]} {inst.key[1]}: {res.verdicts['flowreach']} ({total:.2f} s)")
        buf = io.StringIO()
        csv.writer(buf).writerows([["onnx", "vnnlib", "tool", "result", "time_s"], *rows])
        if result_file is not None:
            write_text_atomic(result_file, buf.getvalue())
        return
    if net is None or prop is None:
        raise InputError("Give NET.onnx and PROP.vnnlib, or --benchmark DIR.")
    res = verify_instance(OnnxNetwork(net), load_vnnlib(prop), settings,
                          np.random.default_rng(seed))
    text = format_witness(res)
    typer.echo(text.rstrip())
    if res.verdicts["flowreach"] == "unsat":
        typer.echo(f"; holds with P(violation) <= {res.certificate:.3g} "
                   f"(conformal alpha={alpha}, PAC delta={delta})")
    if result_file is not None:
        write_text_atomic(result_file, text)
