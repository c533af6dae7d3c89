"""ONNX loading: onnxruntime, the torch interpreter and the folded ReLU MLP agree."""

from __future__ import annotations

import csv
import gzip
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from trustlab.core.errors import DataError
from trustlab.datasets.onnx_nets import OnnxNetwork, ReluMLP, load_instances

VNNCOMP = Path(os.environ.get("TRUSTLAB_SHARED_DATA", Path(__file__).resolve().parents[2].parent
                              / "shared" / "data")) / "vnncomp"


def acas_like_model(seed: int = 0) -> bytes:
    """Opset 8, input [1,1,1,5], Sub(AvgImg) -> Flatten -> 3 x (MatMul+Add+Relu) -> MatMul+Add."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.normal(size=(1, 1, 1, 5)).astype(np.float32), "avg")]
    nodes = [helper.make_node("Sub", ["input", "avg"], ["s"]),
             helper.make_node("Flatten", ["s"], ["h_-1"], axis=1)]
    dims = [5, 16, 16, 16, 5]
    for i in range(4):
        inits.append(numpy_helper.from_array(
            rng.normal(size=(dims[i], dims[i + 1])).astype(np.float32) / 2, f"W{i}"))
        inits.append(numpy_helper.from_array(rng.normal(size=dims[i + 1]).astype(np.float32), f"B{i}"))
        nodes.append(helper.make_node("MatMul", [f"h_{i - 1}", f"W{i}"], [f"m{i}"]))
        out = "output" if i == 3 else f"a{i}"
        nodes.append(helper.make_node("Add", [f"m{i}", f"B{i}"], [out]))
        if i < 3:
            nodes.append(helper.make_node("Relu", [out], [f"h_{i}"]))
    graph = helper.make_graph(
        nodes, "acas_like",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 1, 5])]
        + [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(t.dims)) for t in inits],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 5])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])
    model.ir_version = 3
    onnx.checker.check_model(model)
    return model.SerializeToString()


def test_fixed_batch_opset8_graph_runs_batched_and_matches_torch():
    net = OnnxNetwork(acas_like_model(), name="acas_like")
    assert net.fixed_batch and (net.n_inputs, net.n_outputs) == (5, 5)
    x = np.random.default_rng(1).uniform(-1, 1, (300, 5)).astype(np.float32)
    y = net.run(x)
    assert net._batched  # the batch dimension was made symbolic
    row_by_row = np.concatenate([net.run(r[None]) for r in x[:20]])
    np.testing.assert_allclose(y[:20], row_by_row, atol=1e-6)
    y_torch = net.to_torch()(torch.as_tensor(x)).numpy()
    np.testing.assert_allclose(y, y_torch, atol=1e-5)
    mlp = net.relu_mlp()
    assert len(mlp.weights) == 4
    np.testing.assert_allclose(y, mlp(x), atol=1e-4)
    np.testing.assert_allclose(y, mlp.to_torch()(torch.as_tensor(x)).numpy(), atol=1e-4)


def test_torch_gradients_flow():
    net = OnnxNetwork(acas_like_model(2))
    x = torch.zeros(3, 5, requires_grad=True)
    net.to_torch()(x).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_relu_mlp_round_trips_through_onnx():
    rng = np.random.default_rng(0)
    mlp = ReluMLP((rng.normal(size=(8, 3)), rng.normal(size=(2, 8))),
                  (rng.normal(size=8), rng.normal(size=2)))
    for fixed in (False, True):
        net = OnnxNetwork(mlp.to_onnx_bytes(fixed_batch=fixed))
        x = rng.uniform(-1, 1, (50, 3))
        np.testing.assert_allclose(net.run(x), mlp(x), atol=1e-4)


def test_unsupported_op_is_named():
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 3])
    graph = helper.make_graph([helper.make_node("Softmax", ["input"], ["output"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    net = OnnxNetwork(model.SerializeToString())
    with pytest.raises(DataError, match="Softmax"):
        net.to_torch()
    with pytest.raises(DataError, match="Softmax"):
        net.relu_mlp()


def test_instances_csv_with_gzipped_files(tmp_path):
    (tmp_path / "onnx").mkdir()
    (tmp_path / "vnnlib").mkdir()
    (tmp_path / "onnx" / "net.onnx.gz").write_bytes(gzip.compress(acas_like_model()))
    (tmp_path / "vnnlib" / "p.vnnlib.gz").write_bytes(gzip.compress(b"; empty"))
    with (tmp_path / "instances.csv").open("w", newline="") as fh:
        csv.writer(fh).writerows([["onnx/net.onnx", "vnnlib/p.vnnlib", "60"]])
    (inst,) = load_instances(tmp_path)
    assert inst.key == ("net.onnx", "p.vnnlib") and inst.timeout == 60.0
    assert OnnxNetwork(inst.onnx).n_inputs == 5
    with pytest.raises(DataError, match="does not exist"):
        load_instances(tmp_path / "missing")


@pytest.mark.realdata
def test_real_networks_agree_across_paths():
    if not VNNCOMP.is_dir():
        pytest.skip(f"VNN-COMP data not available here: {VNNCOMP}")
    acas = load_instances(VNNCOMP / "acasxu")
    assert len(acas) == 186
    assert len(load_instances(VNNCOMP / "cora_mnist")) == 20
    rng = np.random.default_rng(0)
    for path in (acas[0].onnx, acas[-1].onnx, VNNCOMP / "cora_mnist" / "onnx" / "mnist-set.onnx"):
        net = OnnxNetwork(path)
        x = rng.uniform(-0.5, 0.5, (500, net.n_inputs)).astype(np.float32)
        y = net.run(x)
        np.testing.assert_allclose(y, net.to_torch()(torch.as_tensor(x)).numpy(), atol=1e-4)
        np.testing.assert_allclose(y, net.relu_mlp()(x), atol=1e-4)
