"""ONNX networks as VNN-COMP ships them: onnxruntime for sampling, torch for gradients.

``OnnxNetwork`` loads a ``.onnx`` (or ``.onnx.gz``) file and runs it on a batch of flat inputs
``(n, n_inputs) -> (n, n_outputs)``. Graphs with a fixed batch of 1 (ACAS Xu: input
``[1, 1, 1, 5]``, opset 8) are rewritten to a symbolic batch when that gives the same numbers, and
run one row at a time otherwise. ``to_torch`` interprets the graph's nodes with weights read
from its initializers (MatMul, Gemm, Add, Sub, Mul, Div, Relu, Sigmoid, Tanh, Flatten, Reshape,
Identity, Constant), giving a batched, differentiable ``torch.nn.Module``. ``relu_mlp`` reads an
affine/ReLU chain as a list of ``(W, b)`` layers for bound propagation.

``instances.csv`` folders (``onnx,vnnlib,timeout`` rows, files optionally gzipped) load with
``load_instances``.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from trustlab.core.errors import DataError, InputError, MissingDependencyError
from trustlab.core.validation import check_scalar

__all__ = [
    "Instance",
    "OnnxNetwork",
    "ReluMLP",
    "load_instances",
    "relu_mlp_from_onnx",
]

_TORCH_OPS = {
    "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Flatten",
    "Reshape", "Identity", "Constant",
}


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(
            f"{module} is needed to run ONNX networks: pip install 'trustlab[verify]'."
        ) from None


def _load_model_bytes(path: str | Path) -> bytes:
    p = Path(path)
    if not p.is_file():
        gz = p.with_name(p.name + ".gz")
        if not gz.is_file():
            raise DataError(f"ONNX file '{path}' does not exist.")
        p = gz
    data = p.read_bytes()
    if p.suffix == ".gz":
        data = gzip.decompress(data)
    return data


@dataclass(frozen=True)
class ReluMLP:
    """``y = W_L relu(... relu(W_1 x + b_1) ...) + b_L``; ``weights[i]`` has shape (out, in)."""

    weights: tuple[NDArray[np.float64], ...]
    biases: tuple[NDArray[np.float64], ...]

    @property
    def n_inputs(self) -> int:
        return int(self.weights[0].shape[1])

    @property
    def n_outputs(self) -> int:
        return int(self.weights[-1].shape[0])

    def __call__(self, x: NDArray[np.floating]) -> NDArray[np.float64]:
        try:
            h = np.atleast_2d(np.asarray(x, dtype=np.float64))
        except (TypeError, ValueError) as exc:
            raise InputError(f"ReluMLP takes numeric rows ({exc}).") from None
        if h.ndim != 2 or h.shape[1] != self.n_inputs:  # used to fail inside numpy's matmul
            raise InputError(f"ReluMLP takes {self.n_inputs} inputs per row. Got shape {h.shape}.")
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = h @ w.T + b
            if i < len(self.weights) - 1:
                h = np.maximum(h, 0.0)
        return h

    def to_torch(self, dtype: Any = None) -> Any:
        torch = _require("torch")
        layers: list[Any] = []
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            # built in the target dtype: float32 layers cast afterwards lost float64 weights' bits
            lin = torch.nn.Linear(w.shape[1], w.shape[0], dtype=dtype or torch.float32)
            with torch.no_grad():
                lin.weight.copy_(torch.as_tensor(w))
                lin.bias.copy_(torch.as_tensor(b))
            layers.append(lin)
            if i < len(self.weights) - 1:
                layers.append(torch.nn.ReLU())
        net = torch.nn.Sequential(*layers)
        net.requires_grad_(False)
        return net.to(dtype or torch.float32)

    def to_onnx_bytes(self, *, opset: int = 13, fixed_batch: bool = False) -> bytes:
        """Serialise as an ONNX MatMul/Add/Relu graph (input ``input``, output ``output``)."""
        onnx = _require("onnx")
        from onnx import TensorProto, helper, numpy_helper

        nodes, inits = [], []
        prev = "input"
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            inits.append(numpy_helper.from_array(w.T.astype(np.float32), f"W{i}"))
            inits.append(numpy_helper.from_array(b.astype(np.float32), f"B{i}"))
            nodes.append(helper.make_node("MatMul", [prev, f"W{i}"], [f"m{i}"]))
            out = "output" if i == len(self.weights) - 1 else f"a{i}"
            nodes.append(helper.make_node("Add", [f"m{i}", f"B{i}"], [out]))
            if i < len(self.weights) - 1:
                nodes.append(helper.make_node("Relu", [out], [f"h{i}"]))
                prev = f"h{i}"
        batch: int | str = 1 if fixed_batch else "N"
        graph = helper.make_graph(
            nodes, "relu_mlp",
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, self.n_inputs])],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, [batch, self.n_outputs])],
            inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 7
        onnx.checker.check_model(model)
        return model.SerializeToString()


class OnnxNetwork:
    """A single-input, single-output ONNX network over flat float32 vectors."""

    def __init__(self, source: str | Path | bytes, *, name: str | None = None) -> None:
        onnx = _require("onnx")
        if not isinstance(source, str | Path | bytes):
            raise InputError(f"The 'source' parameter of OnnxNetwork must be a path or bytes. "
                             f"Got {type(source).__name__}.")
        data = source if isinstance(source, bytes) else _load_model_bytes(source)
        self.raw_bytes = data  # the file as given, for re-checks on an untouched session
        try:
            self.model = onnx.load_model_from_string(data)
        except Exception as exc:
            raise DataError(f"Cannot parse ONNX model '{name or source!s:.80}': {exc}.") from None
        self.name = name or (Path(source).name if not isinstance(source, bytes) else "<bytes>")
        graph = self.model.graph
        init_names = {i.name for i in graph.initializer}
        inputs = [i for i in graph.input if i.name not in init_names]
        if len(inputs) != 1 or len(graph.output) != 1:
            raise DataError(
                f"{self.name}: expected one input and one output; got {len(inputs)} and "
                f"{len(graph.output)}."
            )
        self.input_name = inputs[0].name
        self.output_name = graph.output[0].name
        self.input_shape = _dims(inputs[0])
        self.output_shape = _dims(graph.output[0])
        self.n_inputs = int(np.prod([d for d in self.input_shape[1:] if isinstance(d, int)]))
        self.n_outputs = int(np.prod([d for d in self.output_shape[1:] if isinstance(d, int)]))
        self.fixed_batch = isinstance(self.input_shape[0], int)
        self._session: Any = None
        self._batched = not self.fixed_batch
        self._torch: Any = None
        self._mlp: ReluMLP | str | None = None  # the folded MLP, or why it is not one
        self._mlp_torch: Any = None

    # -- onnxruntime --------------------------------------------------------------
    def _make_session(self, model: Any) -> Any:
        ort = _require("onnxruntime")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        return ort.InferenceSession(
            model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
        )

    @property
    def session(self) -> Any:
        if self._session is None:
            if self.fixed_batch:
                self._session = self._try_dynamic_batch()
            if self._session is None:
                self._session = self._make_session(self.model)
        return self._session

    def _try_dynamic_batch(self) -> Any:
        """Rewrite the batch dimension to be symbolic; keep it only if it reproduces batch 1."""
        import copy

        model = copy.deepcopy(self.model)
        graph = model.graph
        for vi in [*graph.input, *graph.output]:
            if vi.name in (self.input_name, self.output_name):
                dim = vi.type.tensor_type.shape.dim[0]
                dim.ClearField("dim_value")
                dim.dim_param = "N"
        del graph.value_info[:]
        for node in graph.node:
            if node.op_type == "Reshape":
                return None  # a constant shape would pin the batch; fall back to row loops
        try:
            session = self._make_session(model)
            probe = np.random.default_rng(0).uniform(-1, 1, (3, self.n_inputs))
            batched = session.run(None, {self.input_name: self._shape(probe)})[0]
            single = self._make_session(self.model)
            rows = [single.run(None, {self.input_name: self._shape(p[None])})[0] for p in probe]
            ok = np.allclose(batched.reshape(3, -1), np.concatenate(rows).reshape(3, -1),
                             atol=1e-6, rtol=1e-6)
        except Exception:
            return None
        if ok:
            self._batched = True
            return session
        return None

    def _shape(self, x: NDArray[np.floating]) -> NDArray[np.float32]:
        tail = [d if isinstance(d, int) else -1 for d in self.input_shape[1:]]
        return np.ascontiguousarray(x, dtype=np.float32).reshape(len(x), *tail)

    def run(self, x: NDArray[np.floating], *, batch_size: int = 65536) -> NDArray[np.float32]:
        """Outputs of onnxruntime for flat inputs ``x`` of shape (n, n_inputs)."""
        batch_size = check_scalar(batch_size, "batch_size", "OnnxNetwork.run", kind=int, lo=1)
        try:
            x = np.atleast_2d(np.asarray(x, dtype=np.float32))
        except (TypeError, ValueError) as exc:
            raise InputError(f"{self.name} takes numeric rows ({exc}).") from None
        if x.ndim != 2 or x.shape[1] != self.n_inputs:
            raise InputError(
                f"{self.name} takes {self.n_inputs} inputs per row. Got shape {x.shape}."
            )
        sess = self.session
        outs = []
        if self._batched:
            for start in range(0, len(x), batch_size):
                chunk = self._shape(x[start : start + batch_size])
                outs.append(sess.run(None, {self.input_name: chunk})[0].reshape(len(chunk), -1))
        else:
            for row in x:
                outs.append(sess.run(None, {self.input_name: self._shape(row[None])})[0]
                            .reshape(1, -1))
        return np.concatenate(outs, axis=0) if outs else np.zeros((0, self.n_outputs), np.float32)

    def recheck(self, x: NDArray[np.floating]) -> NDArray[np.float32]:
        """Outputs for the rows of ``x`` from a fresh onnxruntime session of the *original* file.

        Independent of :meth:`run`: the graph is not rewritten (no symbolic batch), and each
        row is fed alone, as a batch of 1 in the input shape the file declares. This is the
        check a VNN-COMP witness must pass.
        """
        ort = _require("onnxruntime")
        x = np.atleast_2d(np.asarray(x, dtype=np.float32))
        if x.ndim != 2 or x.shape[1] != self.n_inputs:
            raise InputError(f"{self.name} takes {self.n_inputs} inputs per row. Got shape "
                             f"{x.shape}.")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 3
        session = ort.InferenceSession(self.raw_bytes, opts, providers=["CPUExecutionProvider"])
        shape = [1] + [d if isinstance(d, int) else -1 for d in self.input_shape[1:]]
        rows = [np.asarray(session.run(None, {self.input_name: r.reshape(shape)})[0]).reshape(-1)
                for r in x]
        return np.stack(rows).astype(np.float32)

    # -- torch ----------------------------------------------------------------------
    def to_torch(self) -> Any:
        """A batched, differentiable torch module (float32) interpreting the graph."""
        if self._torch is None:
            self._torch = _GraphModule(self)
        return self._torch

    def relu_mlp(self) -> ReluMLP:
        """The network as an affine/ReLU chain (raises DataError when it is not one).

        Folded once per network and cached (the graph is immutable after loading).
        """
        if self._mlp is None:
            try:
                self._mlp = relu_mlp_from_onnx(self)
            except DataError as exc:
                self._mlp = str(exc)
        if isinstance(self._mlp, str):
            raise DataError(self._mlp)
        return self._mlp

    def mlp_torch(self) -> Any:
        """The cached float32 torch module of :meth:`relu_mlp` (DataError when not an MLP)."""
        if self._mlp_torch is None:
            self._mlp_torch = self.relu_mlp().to_torch()
        return self._mlp_torch


def _dims(value_info: Any) -> list[int | str]:
    dims: list[int | str] = []
    for d in value_info.type.tensor_type.shape.dim:
        dims.append(int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "N"))
    return dims


def _initializers(net: OnnxNetwork) -> dict[str, NDArray[Any]]:
    from onnx import numpy_helper

    consts = {i.name: numpy_helper.to_array(i) for i in net.model.graph.initializer}
    for node in net.model.graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    consts[node.output[0]] = numpy_helper.to_array(attr.t)
    return consts


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


class _GraphModule:
    """Interprets a feed-forward ONNX graph with torch ops; batch is the leading dimension."""

    def __init__(self, net: OnnxNetwork) -> None:
        torch = _require("torch")
        self.net = net
        self.nodes = list(net.model.graph.node)
        for node in self.nodes:
            if node.op_type not in _TORCH_OPS:
                raise DataError(
                    f"{net.name}: op '{node.op_type}' is not supported by the torch converter "
                    f"(supported: {', '.join(sorted(_TORCH_OPS))})."
                )
        self.consts = {k: torch.as_tensor(np.array(v)) for k, v in _initializers(net).items()}
        self.dtype = torch.float32

    def to(self, dtype: Any) -> _GraphModule:
        self.dtype = dtype
        return self

    def __call__(self, x: Any) -> Any:
        torch = _require("torch")
        n = x.shape[0]
        tail = [d if isinstance(d, int) else -1 for d in self.net.input_shape[1:]]
        env: dict[str, Any] = {self.net.input_name: x.to(self.dtype).reshape(n, *tail)}

        def get(name: str) -> Any:
            if name in env:
                return env[name]
            c = self.consts[name]
            return c.to(self.dtype) if c.is_floating_point() else c

        for node in self.nodes:
            op, ins, at = node.op_type, node.input, _attrs(node)
            if op == "Constant":
                continue
            a = get(ins[0])
            if op == "MatMul":
                out = a @ get(ins[1])
            elif op == "Gemm":
                b = get(ins[1])
                a = a.T if at.get("transA", 0) else a
                b = b.T if at.get("transB", 0) else b
                out = at.get("alpha", 1.0) * (a @ b)
                if len(ins) > 2 and ins[2]:
                    out = out + at.get("beta", 1.0) * get(ins[2])
            elif op == "Add":
                out = a + get(ins[1])
            elif op == "Sub":
                out = a - get(ins[1])
            elif op == "Mul":
                out = a * get(ins[1])
            elif op == "Div":
                out = a / get(ins[1])
            elif op == "Relu":
                out = torch.relu(a)
            elif op == "Sigmoid":
                out = torch.sigmoid(a)
            elif op == "Tanh":
                out = torch.tanh(a)
            elif op == "Identity":
                out = a
            elif op == "Flatten":
                axis = at.get("axis", 1)
                out = a.reshape(n, -1) if axis == 1 else a.reshape(
                    int(np.prod(a.shape[:axis])), -1
                )
            elif op == "Reshape":
                shape = [int(s) for s in get(ins[1]).tolist()]
                if shape and shape[0] in (1, 0, -1):
                    shape[0] = n
                out = a.reshape(*shape)
            else:  # pragma: no cover - guarded in __init__
                raise DataError(f"unsupported op {op}")
            env[node.output[0]] = out
        return env[self.net.output_name].reshape(n, -1)


def relu_mlp_from_onnx(net: OnnxNetwork) -> ReluMLP:
    """Fold a MatMul/Gemm/Add/Sub/Mul/Div/Relu/Flatten chain into ``(W, b)`` layers."""
    if not isinstance(net, OnnxNetwork):
        raise InputError(f"relu_mlp_from_onnx takes an OnnxNetwork. Got {type(net).__name__}.")
    consts = _initializers(net)
    n_in = net.n_inputs
    W = np.eye(n_in)
    b = np.zeros(n_in)
    weights, biases = [], []
    current = net.input_name

    def const(name: str) -> NDArray[np.float64]:
        if name not in consts:
            raise DataError(f"{net.name}: '{name}' is not a constant; not an affine/ReLU chain.")
        return np.asarray(consts[name], dtype=np.float64)

    def flat(c: NDArray[np.float64], width: int) -> NDArray[np.float64]:
        c = c.reshape(-1)
        if c.size not in (1, width):
            raise DataError(f"{net.name}: cannot broadcast a constant of size {c.size}.")
        return np.broadcast_to(c, (width,)).copy()

    for node in net.model.graph.node:
        op, ins = node.op_type, list(node.input)
        if op == "Constant":
            continue
        if ins[0] != current:
            raise DataError(f"{net.name}: node {op} does not continue a chain; not an MLP.")
        width = W.shape[0]
        if op in ("Flatten", "Identity", "Reshape"):
            pass
        elif op == "MatMul":
            M = const(ins[1])
            W, b = M.T @ W, b @ M
        elif op == "Gemm":
            at = _attrs(node)
            M = const(ins[1])
            M = M.T if at.get("transB", 0) else M
            if at.get("transA", 0):
                raise DataError(f"{net.name}: Gemm with transA is not an MLP layer.")
            M = M * at.get("alpha", 1.0)
            W, b = M.T @ W, b @ M
            if len(ins) > 2 and ins[2]:
                b = b + at.get("beta", 1.0) * flat(const(ins[2]), W.shape[0])
        elif op == "Add":
            b = b + flat(const(ins[1]), width)
        elif op == "Sub":
            b = b - flat(const(ins[1]), width)
        elif op == "Mul":
            c = flat(const(ins[1]), width)
            W, b = W * c[:, None], b * c
        elif op == "Div":
            c = flat(const(ins[1]), width)
            W, b = W / c[:, None], b / c
        elif op == "Relu":
            weights.append(W)
            biases.append(b)
            W, b = np.eye(width), np.zeros(width)
        else:
            raise DataError(f"{net.name}: op '{op}' is not part of an affine/ReLU chain.")
        current = node.output[0]
    if current != net.output_name:
        raise DataError(f"{net.name}: the chain does not end at the output.")
    weights.append(W)
    biases.append(b)
    return ReluMLP(tuple(weights), tuple(biases))


# ---------------------------------------------------------------------------- instances.csv
@dataclass(frozen=True)
class Instance:
    """One benchmark row: network, property, timeout in seconds."""

    onnx: Path
    vnnlib: Path
    timeout: float

    @property
    def key(self) -> tuple[str, str]:
        return (_strip_gz(self.onnx.name), _strip_gz(self.vnnlib.name))


def _strip_gz(name: str) -> str:
    return name[:-3] if name.endswith(".gz") else name


def _resolve(folder: Path, rel: str, kind: str) -> Path:
    rel = rel.strip()
    candidates = [folder / rel, folder / Path(rel).name, folder / kind / Path(rel).name]
    for cand in candidates:
        for c in (cand, cand.with_name(cand.name + ".gz")):
            if c.is_file():
                return c
    for c in folder.rglob(Path(rel).name + "*"):
        if c.is_file() and _strip_gz(c.name) == _strip_gz(Path(rel).name):
            return c
    raise DataError(f"{folder}: instance file '{rel}' not found (also tried ./{kind}/ and .gz).")


def load_instances(folder: str | Path, csv_name: str | None = None) -> list[Instance]:
    """Rows of a VNN-COMP benchmark folder's ``instances.csv`` (gzipped files are fine).

    Paths in the CSV are resolved relative to the folder, then by file name under the folder
    (VNN-COMP moved files into ``onnx/`` and ``vnnlib/`` subfolders across editions).
    """
    if not isinstance(folder, str | os.PathLike):
        raise InputError(f"The 'folder' parameter of load_instances is a path. Got "
                         f"{type(folder).__name__}.")
    root = Path(folder)
    if not root.is_dir():
        raise DataError(f"Benchmark folder '{folder}' does not exist.")
    if csv_name is None:
        found = sorted(root.glob("instances*.csv")) + sorted(root.glob("*instances*.csv"))
        if not found:
            raise DataError(f"{root}: no instances.csv (or instances_*.csv) found.")
        path = found[0]
    else:
        path = root / csv_name
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:  # a missing csv_name raised FileNotFoundError
        raise DataError(f"Cannot read the instances file '{path}': {exc}.") from None
    rows = []
    for lineno, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 3:
            raise DataError(f"{path}: line {lineno}: expected onnx,vnnlib,timeout; got {row}.")
        try:
            timeout = float(row[2])
        except ValueError:
            if lineno == 1:
                continue  # a header row
            raise DataError(f"{path}: line {lineno}: timeout '{row[2]}' is not a number.") from None
        rows.append(Instance(_resolve(root, row[0], "onnx"), _resolve(root, row[1], "vnnlib"),
                             timeout))
    if not rows:
        raise DataError(f"{path}: no instances.")
    return rows
