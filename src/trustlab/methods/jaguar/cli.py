"""``trustlab jaguar serve|query|export-digits``: private inference between two processes.

    trustlab jaguar export-digits --out digits.npz        # train + quantise the embedded CNN
    trustlab jaguar serve --model digits.npz --port 7000  # the server (holds the weights)
    trustlab jaguar query --image digits:0-9 --port 7000 --network wan   # the client
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from trustlab.core.errors import InputError

app = typer.Typer(help="Jaguar private CNN inference: serve a model, query it privately.")

_System = Annotated[str, typer.Option("--system", help="jaguar or cheetah (the baseline).")]
_Ell = Annotated[int, typer.Option("--ell", help="Target ring bits of the 2PC part.")]


def _load_model(model: str, frac_bits: int):  # type: ignore[no-untyped-def]
    from trustlab.methods.jaguar.network import load_quantnet, quantise, train_digits_cnn

    if model == "digits":
        return quantise(train_digits_cnn(), frac_bits, (1, 8, 8))
    return load_quantnet(model)


def _load_images(spec: str) -> np.ndarray:
    from trustlab.methods.jaguar.network import digits_data

    if spec.startswith("digits:"):
        lo, _, hi = spec[7:].partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError as exc:
            raise InputError(f"--image digits:A-B needs integers. Got {spec!r}.") from exc
        return digits_data(0)[2][a : b + 1]
    try:
        x = np.load(spec, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise InputError(f"Cannot read the image file {spec}: {exc}.") from exc
    return x[None] if x.ndim == 3 else x


@app.command("export-digits")
def export_digits(
    out: Annotated[Path, typer.Option("--out", help="Where to write the model (.npz).")],
    frac_bits: Annotated[int, typer.Option("--frac-bits", help="Fixed-point fraction bits.")] = 12,
) -> None:
    """Train the embedded digits CNN, quantise it and save it (no pickle)."""
    from trustlab.methods.jaguar.network import save_quantnet

    if not out.expanduser().parent.is_dir() or out.is_dir():  # before the training, not after
        raise InputError(f"--out must name a file in an existing folder. Got '{out}'.")
    save_quantnet(_load_model("digits", frac_bits), str(out))
    typer.echo(f"saved {out}")


@app.command()
def serve(
    model: Annotated[str, typer.Option("--model", help="A .npz model, or 'digits'.")] = "digits",
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 7000,
    system: _System = "jaguar",
    ell: _Ell = 25,
    frac_bits: Annotated[int, typer.Option("--frac-bits")] = 12,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per receive.")] = 120.0,
) -> None:
    """Serve one private-inference session (the server holds the weights)."""
    from trustlab.methods.jaguar.inference import ProtocolConfig
    from trustlab.methods.jaguar.inference import serve as serve_one

    cfg = ProtocolConfig(system=system, ell=ell, timeout=timeout)  # checked before the model
    net = _load_model(model, frac_bits)
    typer.echo(f"serving {model} ({system}, ell={ell}) on {host}:{port}")
    serve_one(net, cfg, host, port)


@app.command()
def query(
    image: Annotated[str, typer.Option("--image", help="A .npy (C,H,W) or (B,C,H,W), or "
                                                         "'digits:A-B' (test images).")],
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 7000,
    system: _System = "jaguar",
    ell: _Ell = 25,
    network: Annotated[str, typer.Option("--network", help="lan or wan time model.")] = "lan",
    timeout: Annotated[float, typer.Option("--timeout")] = 120.0,
) -> None:
    """Classify images privately (the client holds the images)."""
    from trustlab.core.validation import check_choice
    from trustlab.methods.jaguar.inference import NETWORKS, ProtocolConfig, estimate_time
    from trustlab.methods.jaguar.inference import query as query_one

    check_choice(network, "--network", sorted(NETWORKS), "jaguar query")  # before the session
    cfg = ProtocolConfig(system=system, ell=ell, timeout=timeout)
    res = query_one(_load_images(image), cfg, host, port)
    typer.echo(f"predictions: {res.logits.argmax(1).tolist()}")
    typer.echo(f"online: {res.seconds:.2f} s, {res.bytes / 2**20:.2f} MiB, {res.rounds} latencies; "
               f"setup {res.setup_seconds:.2f} s, {res.setup_bytes / 2**20:.2f} MiB")
    typer.echo(f"estimated {network.upper()} time: "
               f"{estimate_time(res.seconds, res.bytes, res.rounds, network):.2f} s")
