"""Issue 38's property tests for ONNX networks: a drawn ReLU MLP survives ONNX export, the
onnxruntime session, torch and the affine/ReLU folding with the same outputs; instances.csv rows
resolve to their files; malformed arguments give one-line errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx", reason="ONNX networks need trustlab[verify]")
pytest.importorskip("onnxruntime", reason="ONNX networks need trustlab[verify]")

import torch

from trustlab.core.errors import DataError, InputError
from trustlab.datasets.onnx_nets import (
    Instance,
    OnnxNetwork,
    ReluMLP,
    load_instances,
    relu_mlp_from_onnx,
)

FEW = settings(max_examples=10, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture])


def _mlp(seed, widths):
    rng = np.random.default_rng(seed)
    ws = tuple(rng.normal(size=(o, i)) for i, o in itertools.pairwise(widths))
    bs = tuple(rng.normal(size=o) for o in widths[1:])
    return ReluMLP(ws, bs)


@FEW
@given(st.integers(0, 2**16), st.lists(st.integers(1, 5), min_size=2, max_size=4),
       st.booleans())
def test_a_relu_mlp_survives_onnx_torch_and_folding(seed, widths, fixed_batch):
    mlp = _mlp(seed, widths)
    x = np.random.default_rng(seed + 1).normal(size=(7, widths[0]))
    want = mlp(x)
    assert want.shape == (7, widths[-1]) and mlp.n_inputs == widths[0]
    hidden = x
    for w, b in zip(mlp.weights[:-1], mlp.biases[:-1], strict=True):  # brute force
        hidden = np.maximum(hidden @ w.T + b, 0)
    np.testing.assert_allclose(want, hidden @ mlp.weights[-1].T + mlp.biases[-1], rtol=1e-12)
    net = OnnxNetwork(mlp.to_onnx_bytes(fixed_batch=fixed_batch), name="drawn")
    assert (net.n_inputs, net.n_outputs) == (widths[0], widths[-1])
    np.testing.assert_allclose(net.run(x, batch_size=3), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(net.recheck(x[:2]), want[:2], rtol=1e-4, atol=1e-4)
    folded = relu_mlp_from_onnx(net)
    np.testing.assert_allclose(folded(x), want, rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        got = net.to_torch()(torch.as_tensor(x, dtype=torch.float32)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(mlp.to_torch(torch.float64)(torch.as_tensor(x)).numpy(),
                                   want, rtol=1e-12)


def test_instances_resolve_to_their_files(tmp_path):
    (tmp_path / "onnx").mkdir()
    (tmp_path / "vnnlib").mkdir()
    for i in range(3):
        (tmp_path / "onnx" / f"n{i}.onnx").write_bytes(b"x")
        (tmp_path / "vnnlib" / f"p{i}.vnnlib").write_text("x")
    (tmp_path / "instances.csv").write_text(
        "".join(f"n{i}.onnx,vnnlib/p{i}.vnnlib,{10 * i + 1}\n" for i in range(3)))
    got = load_instances(tmp_path)
    assert all(isinstance(r, Instance) for r in got)
    assert [r.key for r in got] == [(f"n{i}.onnx", f"p{i}.vnnlib") for i in range(3)]
    assert [r.timeout for r in got] == [1.0, 11.0, 21.0] and all(r.onnx.is_file() for r in got)


MLP = _mlp(0, [2, 3, 1])
NET = OnnxNetwork(MLP.to_onnx_bytes())


@pytest.mark.parametrize(("call", "match"), [
    (lambda p: MLP(np.zeros((2, 3))), "2 inputs"),
    (lambda p: MLP([["a", "b"]]), "numeric"),
    (lambda p: NET.run(np.zeros((2, 5))), "inputs per row"),
    (lambda p: NET.run(np.zeros((2, 2)), batch_size=0), "batch_size"),
    (lambda p: NET.run([["a", "b"]]), "numeric"),
    (lambda p: NET.recheck(np.zeros((1, 4))), "inputs per row"),
    (lambda p: relu_mlp_from_onnx("net.onnx"), "OnnxNetwork"),
    (lambda p: OnnxNetwork(b"not onnx"), "."),
    (lambda p: load_instances(3), "folder"),
    (lambda p: load_instances(p / "missing"), "does not exist"),
    (lambda p: load_instances(p, csv_name="missing.csv"), "Cannot read"),
])
def test_bad_arguments_are_one_line_errors(tmp_path, call, match):
    with pytest.raises((InputError, DataError), match=match) as caught:
        call(tmp_path)
    assert "\n" not in str(caught.value)
