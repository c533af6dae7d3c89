"""CNNs for private inference: a float description, its fixed-point form, and a digits model.

A network is a tuple of layers: ``Conv`` (with ``groups`` for depthwise), ``Dense``, ``ReLU``,
``MaxPool``, ``AvgPool``, ``Flatten`` and ``Residual(body, shortcut)`` (``body(x) +
shortcut(x)``, an empty shortcut is the identity). ``quantise`` turns it into integers at
``frac_bits`` fractional bits: weights ``round(w 2^f)``, biases ``round(b 2^f)`` (added after
the truncation), and every ``AvgPool(k)`` becomes an exact local ``SumPool(k)`` whose ``1/k^2``
is folded into the next linear layer's weights (it commutes with ReLU and max-pooling).
``fixed_point_forward`` is the plaintext reference of the private protocol: each linear layer
computes ``round(W x / 2^f) + b`` (half-up), everything else is exact integer arithmetic.
``from_torch`` converts a PyTorch ``nn.Sequential`` (BatchNorm folded into the preceding conv);
``train_digits_cnn`` trains the embedded default on scikit-learn's digits in numpy.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from trustlab.core.errors import DataError, InputError, MissingDependencyError
from trustlab.core.validation import as_float_array, check_path, check_scalar
from trustlab.datasets.digits import load_digits
from trustlab.methods.jaguar.checks import as_int_array, check_instance, check_int
from trustlab.methods.jaguar.layout import conv2d, conv2d_int

__all__ = [
    "AvgPool",
    "Conv",
    "Dense",
    "Flatten",
    "MaxPool",
    "QuantNet",
    "ReLU",
    "Residual",
    "SumPool",
    "architecture",
    "digits_data",
    "error_bound",
    "fixed_point_forward",
    "float_forward",
    "from_torch",
    "load_quantnet",
    "public_net",
    "quantise",
    "round_shift_int",
    "save_quantnet",
    "train_digits_cnn",
]


def _weights(value: np.ndarray, name: str, where: str, ndim: int) -> np.ndarray:
    """Float weights (finite) or, once quantised, integer weights, as a numpy array."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "iu":
        if value.ndim != ndim:
            raise InputError(f"The '{name}' parameter of {where} must be {ndim}-D. Got shape "
                             f"{value.shape}.")
        return value
    return as_float_array(value, name, where, ndim=ndim)


@dataclass(frozen=True)
class Conv:
    weight: np.ndarray  # (O, C/groups, k, k); float, or int64 once quantised
    bias: np.ndarray  # (O,)
    stride: int = 1
    pad: int = 0
    groups: int = 1

    def __post_init__(self) -> None:
        w = _weights(self.weight, "weight", "Conv", 4)
        b = _weights(self.bias, "bias", "Conv", 1)
        if w.shape[2] != w.shape[3]:
            raise InputError(f"The 'weight' parameter of Conv must have square kernels "
                             f"(O, C/groups, k, k). Got shape {w.shape}.")
        if b.shape != (w.shape[0],):
            raise InputError(f"The 'bias' parameter of Conv must have shape ({w.shape[0]},). Got "
                             f"{b.shape}.")
        groups = check_int(self.groups, "groups", "Conv", lo=1)
        if w.shape[0] % groups:
            raise InputError(f"The 'groups' parameter of Conv must divide the {w.shape[0]} output "
                             f"channels. Got {groups}.")
        for name, value in (("weight", w), ("bias", b), ("groups", groups),
                            ("stride", check_int(self.stride, "stride", "Conv", lo=1)),
                            ("pad", check_int(self.pad, "pad", "Conv", lo=0))):
            object.__setattr__(self, name, value)


@dataclass(frozen=True)
class Dense:
    weight: np.ndarray  # (m, d)
    bias: np.ndarray  # (m,)

    def __post_init__(self) -> None:
        w = _weights(self.weight, "weight", "Dense", 2)
        b = _weights(self.bias, "bias", "Dense", 1)
        if b.shape != (w.shape[0],):
            raise InputError(f"The 'bias' parameter of Dense must have shape ({w.shape[0]},). Got "
                             f"{b.shape}.")
        object.__setattr__(self, "weight", w)
        object.__setattr__(self, "bias", b)


@dataclass(frozen=True)
class ReLU:
    pass


@dataclass(frozen=True)
class _Pool:
    k: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", check_int(self.k, "k", type(self).__name__, lo=1))


@dataclass(frozen=True)
class MaxPool(_Pool):
    pass


@dataclass(frozen=True)
class AvgPool(_Pool):
    pass


@dataclass(frozen=True)
class SumPool(_Pool):
    pass


@dataclass(frozen=True)
class Flatten:
    pass


_LAYERS = (Conv, Dense, ReLU, MaxPool, AvgPool, SumPool, Flatten)


def _check_layers(layers: tuple, name: str, where: str) -> tuple:
    if isinstance(layers, _LAYERS):
        layers = (layers,)
    if not isinstance(layers, tuple | list) or not all(
            isinstance(layer, (*_LAYERS, Residual)) for layer in layers):
        bad = next((type(v).__name__ for v in layers if not isinstance(v, (*_LAYERS, Residual))),
                   None) if isinstance(layers, tuple | list) else type(layers).__name__
        raise InputError(f"The '{name}' parameter of {where} must be a tuple of layers (Conv, "
                         f"Dense, ReLU, MaxPool, AvgPool, SumPool, Flatten, Residual). Got {bad}.")
    return tuple(layers)


@dataclass(frozen=True)
class Residual:
    body: tuple
    shortcut: tuple = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "body", _check_layers(self.body, "body", "Residual"))
        object.__setattr__(self, "shortcut", _check_layers(self.shortcut, "shortcut", "Residual"))
        if not self.body:
            raise InputError("The 'body' parameter of Residual must hold at least one layer.")


def output_shape(layers: tuple, shape: tuple[int, ...], where: str = "the network",
                 name: str = "layers", _path: str = "") -> tuple:
    """The output shape of ``layers`` on an input of ``shape``; an InputError names the first
    layer that does not fit (channels, kernel larger than the padded input, a Dense layer's
    width, a pooling window larger than the map, a residual whose branches differ)."""
    shape = tuple(int(v) for v in shape)

    def misfit(i: int, layer: object, need: str) -> InputError:
        return InputError(f"The '{name}' parameter of {where} does not fit its input: layer "
                          f"{_path}{i} ({type(layer).__name__}) {need}. Got shape {shape}.")

    for i, layer in enumerate(layers):
        if isinstance(layer, Conv):
            o, cg, k, _ = layer.weight.shape
            if len(shape) != 3 or shape[0] != cg * layer.groups:
                raise misfit(i, layer, f"needs an input of ({cg * layer.groups}, H, W)")
            hp, wp = shape[1] + 2 * layer.pad, shape[2] + 2 * layer.pad
            if k > min(hp, wp):
                raise misfit(i, layer, f"has a kernel ({k}) larger than its padded input")
            shape = (o, (hp - k) // layer.stride + 1, (wp - k) // layer.stride + 1)
        elif isinstance(layer, Dense):
            if shape != (layer.weight.shape[1],):
                raise misfit(i, layer, f"needs a vector of {layer.weight.shape[1]} (add Flatten)")
            shape = (layer.weight.shape[0],)
        elif isinstance(layer, MaxPool | AvgPool | SumPool):
            if len(shape) != 3 or layer.k > min(shape[1:]):
                raise misfit(i, layer, f"has a window ({layer.k}) that does not fit its input")
            shape = (shape[0], shape[1] // layer.k, shape[2] // layer.k)
        elif isinstance(layer, Flatten):
            shape = (math.prod(shape),)
        elif isinstance(layer, Residual):
            body = output_shape(layer.body, shape, where, name, f"{_path}{i}.body.")
            short = output_shape(layer.shortcut, shape, where, name, f"{_path}{i}.shortcut.")
            if body != short:
                raise misfit(i, layer, f"adds branches of shapes {body} and {short}")
            shape = body
        elif not isinstance(layer, ReLU):
            raise InputError(f"The '{name}' parameter of {where} holds an unknown layer "
                             f"{type(layer).__name__}.")
    return shape


@dataclass(frozen=True)
class QuantNet:
    """A fixed-point network: integer layers, ``frac_bits`` f, the input shape (C, H, W)."""

    layers: tuple
    frac_bits: int
    input_shape: tuple[int, int, int]
    classes: int = field(default=10)

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", _check_layers(self.layers, "layers", "QuantNet"))
        object.__setattr__(self, "frac_bits", check_int(self.frac_bits, "frac_bits", "QuantNet",
                                                        lo=1, hi=30))
        shape = as_int_array(self.input_shape, "input_shape", "QuantNet", shape=(3,), lo=1)
        object.__setattr__(self, "input_shape", tuple(int(v) for v in shape))
        object.__setattr__(self, "classes", check_int(self.classes, "classes", "QuantNet", lo=1))

    def quantise_input(self, x: np.ndarray) -> np.ndarray:
        x = as_float_array(x, "x", "QuantNet.quantise_input", ndim=3)
        if x.shape != tuple(self.input_shape):
            raise InputError(f"The 'x' parameter of QuantNet.quantise_input must have shape "
                             f"{tuple(self.input_shape)}. Got {x.shape}.")
        if np.abs(x).max() * 2.0**self.frac_bits >= 2.0**52:
            raise InputError("The 'x' parameter of QuantNet.quantise_input is too large for "
                             f"{self.frac_bits} fractional bits.")
        return np.round(x * 2.0**self.frac_bits).astype(np.int64)


# -- plaintext forward passes ------------------------------------------------------------
def _conv_float(x: np.ndarray, layer: Conv) -> np.ndarray:
    return _grouped(x, layer, lambda xi, wi: conv2d(np.asarray(xi, dtype=object),
                                                    np.asarray(wi, dtype=object), layer.stride,
                                                    layer.pad)
                    ).astype(np.float64) + layer.bias[:, None, None]


def _grouped(x: np.ndarray, layer: Conv, conv) -> np.ndarray:  # type: ignore[no-untyped-def]
    g = layer.groups
    c = x.shape[0]
    if c % g or layer.weight.shape[0] % g or layer.weight.shape[1] != c // g:
        raise InputError(f"A conv with {g} groups does not fit {c} input channels.")
    ci, co = c // g, layer.weight.shape[0] // g
    return np.concatenate([conv(x[i * ci : (i + 1) * ci], layer.weight[i * co : (i + 1) * co])
                           for i in range(g)])


def _pool(x: np.ndarray, k: int, op: str) -> np.ndarray:
    c, h, w = x.shape
    ho, wo = h // k, w // k
    win = x[:, : ho * k, : wo * k].reshape(c, ho, k, wo, k)
    return {"max": win.max(axis=(2, 4)), "sum": win.sum(axis=(2, 4)),
            "avg": win.mean(axis=(2, 4))}[op]


def float_forward(layers: tuple, x: np.ndarray) -> np.ndarray:
    """The float network on one input (C, H, W) -> logits."""
    layers = _check_layers(layers, "layers", "float_forward")
    x = as_float_array(x, "x", "float_forward", ndim=3)
    output_shape(layers, x.shape, "float_forward")
    return _float_forward(layers, x)


def _float_forward(layers: tuple, x: np.ndarray) -> np.ndarray:
    for layer in layers:
        if isinstance(layer, Conv):
            x = _conv_float(np.asarray(x, dtype=np.float64), layer)
        elif isinstance(layer, Dense):
            x = layer.weight @ x + layer.bias
        elif isinstance(layer, ReLU):
            x = np.maximum(x, 0)
        elif isinstance(layer, MaxPool):
            x = _pool(x, layer.k, "max")
        elif isinstance(layer, AvgPool):
            x = _pool(x, layer.k, "avg")
        elif isinstance(layer, Flatten):
            x = np.ravel(x)
        elif isinstance(layer, Residual):
            x = _float_forward(layer.body, x) + (_float_forward(layer.shortcut, x)
                                                 if layer.shortcut else x)
        else:
            raise InputError(f"Unknown layer {type(layer).__name__}.")
    return x


def round_shift_int(v: np.ndarray, f: int) -> np.ndarray:
    """``round(v / 2^f)`` half-up on Python/numpy integers (floor division)."""
    return (np.asarray(v, dtype=object) + (1 << (f - 1))) // (1 << f)


def fixed_point_forward(net: QuantNet, x_q: np.ndarray, layers: tuple | None = None) -> np.ndarray:
    """The plaintext fixed-point reference on one quantised input; int64 logits at scale 2^f."""
    check_instance(net, QuantNet, "net", "fixed_point_forward")
    f = net.frac_bits
    x = np.asarray(as_int_array(x_q, "x_q", "fixed_point_forward",
                                shape=tuple(net.input_shape) if layers is None else None),
                   dtype=object)
    if layers is None:
        output_shape(net.layers, x.shape, "fixed_point_forward", "net")
    for layer in net.layers if layers is None else layers:
        if isinstance(layer, Conv):
            acc = _grouped(x, layer, lambda xi, wi, c=layer: conv2d_int(xi, wi, c.stride, c.pad))
            x = round_shift_int(acc, f) + np.asarray(layer.bias, dtype=object)[:, None, None]
        elif isinstance(layer, Dense):
            acc = np.asarray(layer.weight, dtype=object) @ x
            x = round_shift_int(acc, f) + np.asarray(layer.bias, dtype=object)
        elif isinstance(layer, ReLU):
            x = np.where(x > 0, x, 0)
        elif isinstance(layer, MaxPool):
            x = _pool(x, layer.k, "max")
        elif isinstance(layer, SumPool):
            x = _pool(x, layer.k, "sum")
        elif isinstance(layer, Flatten):
            x = np.ravel(x)
        elif isinstance(layer, Residual):
            x = (fixed_point_forward(net, x, layer.body)
                 + (fixed_point_forward(net, x, layer.shortcut) if layer.shortcut else x))
        else:
            raise InputError(f"Unknown fixed-point layer {type(layer).__name__}.")
    return np.asarray(x, dtype=np.int64)


def error_bound(net: QuantNet, per_trunc: float, layers: tuple | None = None,
                e_in: float = 0.0) -> float:
    """A bound (in ulps) on |private - reference| at the output, given each truncation errs by
    at most ``per_trunc`` ulps more than the reference's rounding: ``e' = |W|_inf e / 2^f +
    per_trunc`` per linear layer, ``k^2 e`` per sum-pool, unchanged through ReLU/max."""
    check_instance(net, QuantNet, "net", "error_bound")
    per_trunc = check_scalar(per_trunc, "per_trunc", "error_bound", lo=0)
    e_in = check_scalar(e_in, "e_in", "error_bound", lo=0)
    if layers is not None:
        layers = _check_layers(layers, "layers", "error_bound")
    e = e_in
    for layer in net.layers if layers is None else layers:
        if isinstance(layer, Conv | Dense):
            w = np.abs(np.asarray(layer.weight, dtype=np.float64))
            row = w.reshape(w.shape[0], -1).sum(axis=1).max()
            e = row * e / 2.0**net.frac_bits + per_trunc
        elif isinstance(layer, SumPool):
            e = e * layer.k**2
        elif isinstance(layer, Residual):
            e = (error_bound(net, per_trunc, layer.body, e)
                 + (error_bound(net, per_trunc, layer.shortcut, e) if layer.shortcut else e))
    return e


# -- quantisation ---------------------------------------------------------------------------
def quantise(layers: tuple, frac_bits: int, input_shape: tuple[int, int, int],
             classes: int = 10) -> QuantNet:
    """Integers at ``frac_bits`` fractional bits; average pools folded into the next layer."""
    frac_bits = check_int(frac_bits, "frac_bits", "quantise", lo=1, hi=20)
    shape = as_int_array(input_shape, "input_shape", "quantise", shape=(3,), lo=1)
    classes = check_int(classes, "classes", "quantise", lo=1)
    layers = _check_layers(layers, "layers", "quantise")
    out = output_shape(layers, tuple(shape), "quantise")
    if len(out) == 1 and out != (classes,):
        raise InputError(f"The network given to quantise outputs {out[0]} logits; the 'classes' "
                         f"parameter says {classes}.")
    return QuantNet(_quantise(tuple(layers), frac_bits, 1.0), frac_bits,
                    tuple(int(v) for v in shape), classes)


def _quantise(layers: tuple, f: int, scale: float) -> tuple:
    out: list = []
    s = 2.0**f
    for layer in layers:
        if isinstance(layer, Conv):
            out.append(Conv(np.round(layer.weight * scale * s).astype(np.int64),
                            np.round(layer.bias * s).astype(np.int64), layer.stride, layer.pad,
                            layer.groups))
            scale = 1.0
        elif isinstance(layer, Dense):
            out.append(Dense(np.round(layer.weight * scale * s).astype(np.int64),
                             np.round(layer.bias * s).astype(np.int64)))
            scale = 1.0
        elif isinstance(layer, AvgPool):
            out.append(SumPool(layer.k))
            scale /= layer.k**2
        elif isinstance(layer, ReLU | MaxPool | Flatten):
            out.append(layer)
        elif isinstance(layer, Residual):
            if scale != 1.0:
                raise InputError("An average pool must be followed by a linear layer before a "
                                 "residual block (its 1/k^2 is folded into that layer).")
            out.append(Residual(_quantise(layer.body, f, 1.0), _quantise(layer.shortcut, f, 1.0)))
        else:
            raise InputError(f"Cannot quantise a layer of type {type(layer).__name__}.")
    if scale != 1.0:
        raise InputError("An average pool must be followed by a linear layer (1/k^2 is folded).")
    return tuple(out)


# -- (de)serialisation: .npz with a JSON architecture, no pickle ------------------------------
def _arch(layers: tuple, arrays: dict, prefix: str) -> list:
    spec = []
    for i, layer in enumerate(layers):
        key = f"{prefix}{i}"
        if isinstance(layer, Conv):
            arrays[key + "_w"], arrays[key + "_b"] = layer.weight, layer.bias
            spec.append({"type": "conv", "key": key, "stride": layer.stride, "pad": layer.pad,
                         "groups": layer.groups})
        elif isinstance(layer, Dense):
            arrays[key + "_w"], arrays[key + "_b"] = layer.weight, layer.bias
            spec.append({"type": "dense", "key": key})
        elif isinstance(layer, Residual):
            spec.append({"type": "residual", "body": _arch(layer.body, arrays, key + "b"),
                         "shortcut": _arch(layer.shortcut, arrays, key + "s")})
        elif isinstance(layer, MaxPool | SumPool | AvgPool):
            spec.append({"type": type(layer).__name__.lower(), "k": layer.k})
        else:
            spec.append({"type": type(layer).__name__.lower()})
    return spec


def _unarch(spec: list, arrays: dict) -> tuple:
    out: list = []
    simple = {"relu": ReLU, "flatten": Flatten}
    pools = {"maxpool": MaxPool, "sumpool": SumPool, "avgpool": AvgPool}
    for item in spec:
        t = item.get("type")
        if t == "conv":
            out.append(Conv(arrays[item["key"] + "_w"], arrays[item["key"] + "_b"],
                            int(item["stride"]), int(item["pad"]), int(item["groups"])))
        elif t == "dense":
            out.append(Dense(arrays[item["key"] + "_w"], arrays[item["key"] + "_b"]))
        elif t == "residual":
            out.append(Residual(_unarch(item["body"], arrays), _unarch(item["shortcut"], arrays)))
        elif t in pools:
            out.append(pools[t](int(item["k"])))
        elif t in simple:
            out.append(simple[t]())
        else:
            raise DataError(f"Unknown layer type {t!r} in the model file.")
    return tuple(out)


def architecture(net: QuantNet) -> str:
    """The public part of the model (shapes and layer types, no weights) as JSON."""
    arrays: dict = {}
    spec = _arch(net.layers, arrays, "L")
    shapes = {k: list(v.shape) for k, v in arrays.items()}
    return json.dumps({"layers": spec, "shapes": shapes, "frac_bits": net.frac_bits,
                       "input_shape": list(net.input_shape), "classes": net.classes})


def public_net(arch_json: str) -> QuantNet:
    """The client's view: the architecture with all-zero weights of the right shapes."""
    try:
        d = json.loads(arch_json)
        arrays = {k: np.zeros(v, dtype=np.int64) for k, v in d["shapes"].items()}
        return QuantNet(_unarch(d["layers"], arrays), int(d["frac_bits"]),
                        tuple(d["input_shape"]), int(d["classes"]))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(f"Malformed network architecture: {exc}.") from exc


def save_quantnet(net: QuantNet, path: str) -> None:
    """Write ``net`` as .npz (arrays and a JSON architecture, no pickle), atomically: a
    failed write leaves no half-written file."""
    check_instance(net, QuantNet, "net", "save_quantnet")
    if not isinstance(path, str | os.PathLike) or not str(path):
        raise InputError(f"The 'path' parameter of save_quantnet must be a file path. Got "
                         f"{path!r:.60}.")
    target = Path(path).expanduser()
    if not target.parent.is_dir():
        raise InputError(f"The 'path' parameter of save_quantnet names a folder that does not "
                         f"exist: '{target.parent}'.")
    if target.is_dir():
        raise InputError(f"The 'path' parameter of save_quantnet is a directory: '{target}'.")
    arrays: dict = {}
    spec = _arch(net.layers, arrays, "L")
    meta = json.dumps({"layers": spec, "frac_bits": net.frac_bits,
                       "input_shape": list(net.input_shape), "classes": net.classes})
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            np.savez(fh, __meta__=np.frombuffer(meta.encode(), dtype=np.uint8), **arrays)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def load_quantnet(path: str) -> QuantNet:
    """Read a network written by ``save_quantnet`` (a damaged file is a DataError)."""
    path = check_path(path, "path", "load_quantnet", kind="file")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(arrays.pop("__meta__").tobytes().decode())
        return QuantNet(_unarch(meta["layers"], arrays), int(meta["frac_bits"]),
                        tuple(meta["input_shape"]), int(meta["classes"]))
    except (OSError, KeyError, ValueError, TypeError, AttributeError, EOFError) as exc:
        raise DataError(f"Cannot read the model file {path}: {exc}.") from exc


# -- PyTorch converter ---------------------------------------------------------------------------
def from_torch(module) -> tuple:  # type: ignore[no-untyped-def]
    """Float layers from a torch ``nn.Sequential`` (Conv2d, BatchNorm2d folded into the conv
    before it, Linear, ReLU, MaxPool2d, AvgPool2d, Flatten; ``Residual`` modules made of
    ``body``/``shortcut`` Sequentials are recognised by those attribute names)."""
    try:
        import torch.nn as tnn
    except ImportError as exc:  # pragma: no cover - torch is an optional dependency
        raise MissingDependencyError(
            "from_torch needs PyTorch: pip install 'trustlab[llm]'.") from exc
    if not isinstance(module, tnn.Module):
        raise InputError(f"The 'module' parameter of from_torch must be a torch.nn.Module "
                         f"(an nn.Sequential). Got {type(module).__name__}.")
    out: list = []
    for mod in module.children() if isinstance(module, tnn.Sequential) else [module]:
        if hasattr(mod, "body") and isinstance(mod.body, tnn.Module):
            sc = getattr(mod, "shortcut", None)
            out.append(Residual(from_torch(mod.body), from_torch(sc) if sc is not None and
                                len(list(sc.children())) else ()))
        elif isinstance(mod, tnn.Conv2d):
            if mod.kernel_size[0] != mod.kernel_size[1] or mod.stride[0] != mod.stride[1]:
                raise InputError("Only square kernels and strides are supported.")
            b = (mod.bias.detach().numpy() if mod.bias is not None
                 else np.zeros(mod.out_channels))
            out.append(Conv(mod.weight.detach().numpy().astype(np.float64), b.astype(np.float64),
                            mod.stride[0], int(mod.padding[0]), mod.groups))
        elif isinstance(mod, tnn.BatchNorm2d):
            if not out or not isinstance(out[-1], Conv):
                raise InputError("BatchNorm2d must follow a Conv2d (it is folded into it).")
            conv = out.pop()
            g = mod.weight.detach().numpy() / np.sqrt(mod.running_var.numpy() + mod.eps)
            beta = mod.bias.detach().numpy() - mod.running_mean.numpy() * g
            out.append(Conv(conv.weight * g[:, None, None, None], conv.bias * g + beta,
                            conv.stride, conv.pad, conv.groups))
        elif isinstance(mod, tnn.Linear):
            b = mod.bias.detach().numpy() if mod.bias is not None else np.zeros(mod.out_features)
            out.append(Dense(mod.weight.detach().numpy().astype(np.float64), b.astype(np.float64)))
        elif isinstance(mod, tnn.ReLU):
            out.append(ReLU())
        elif isinstance(mod, tnn.MaxPool2d | tnn.AvgPool2d):
            k = mod.kernel_size if isinstance(mod.kernel_size, int) else mod.kernel_size[0]
            stride = mod.stride if isinstance(mod.stride, int) else mod.stride[0]
            if stride != k or (getattr(mod, "padding", 0) not in (0, (0, 0))):
                raise InputError("Pooling must have stride = kernel and no padding.")
            out.append(MaxPool(k) if isinstance(mod, tnn.MaxPool2d) else AvgPool(k))
        elif isinstance(mod, tnn.Flatten):
            out.append(Flatten())
        elif isinstance(mod, tnn.Sequential):
            out.extend(from_torch(mod))
        else:
            raise InputError(f"The converter does not support {type(mod).__name__}.")
    return tuple(out)


# -- the embedded default: a small CNN trained on scikit-learn's digits in numpy -----------------
def _im2col(x: np.ndarray, k: int, pad: int) -> np.ndarray:
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = h + 2 * pad - k + 1, w + 2 * pad - k + 1
    cols = np.empty((n, c, k, k, ho, wo))
    for i in range(k):
        for j in range(k):
            cols[:, :, i, j] = xp[:, :, i : i + ho, j : j + wo]
    return cols.reshape(n, c * k * k, ho * wo)


def _col2im(cols: np.ndarray, shape: tuple, k: int, pad: int) -> np.ndarray:
    n, c, h, w = shape
    ho, wo = h + 2 * pad - k + 1, w + 2 * pad - k + 1
    cols = cols.reshape(n, c, k, k, ho, wo)
    xp = np.zeros((n, c, h + 2 * pad, w + 2 * pad))
    for i in range(k):
        for j in range(k):
            xp[:, :, i : i + ho, j : j + wo] += cols[:, :, i, j]
    return xp[:, :, pad : pad + h, pad : pad + w]


def digits_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The 8x8 digits in [0, 1], shape (n, 1, 8, 8); a seeded 80/20 split (x, y, x_test, y_test)."""
    seed = check_int(seed, "seed", "digits_data", lo=0, hi=2**32 - 1)
    train, test = load_digits().split(0.8, seed)
    return train.channels_first, train.labels, test.channels_first, test.labels


def train_digits_cnn(seed: int = 0, epochs: int = 12, channels: tuple[int, int] = (8, 16)
                     ) -> tuple:
    """conv3x3(1->c1) ReLU maxpool2 conv3x3(c1->c2) ReLU avgpool2 flatten dense(->10), trained
    with Adam on the digits training split (numpy; a few seconds)."""
    seed = check_int(seed, "seed", "train_digits_cnn", lo=0, hi=2**32 - 1)
    epochs = check_int(epochs, "epochs", "train_digits_cnn", lo=1, hi=10_000)
    channels = tuple(int(v) for v in as_int_array(channels, "channels", "train_digits_cnn",
                                                   shape=(2,), lo=1, hi=4096))
    x, y, _, _ = digits_data(seed)
    rng = np.random.default_rng(seed)
    c1, c2 = channels
    params = {
        "w1": rng.normal(0, math.sqrt(2 / 9), (c1, 1, 3, 3)), "b1": np.zeros(c1),
        "w2": rng.normal(0, math.sqrt(2 / (9 * c1)), (c2, c1, 3, 3)), "b2": np.zeros(c2),
        "w3": rng.normal(0, math.sqrt(1 / (4 * c2)), (10, 4 * c2)), "b3": np.zeros(10),
    }
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v2 = {k: np.zeros_like(v) for k, v in params.items()}
    step, lr = 0, 0.01
    for _ in range(epochs):
        order = rng.permutation(len(y))
        for start in range(0, len(y), 64):
            idx = order[start : start + 64]
            grads = _digits_grads(params, x[idx], y[idx])
            step += 1
            for k in params:
                m[k] = 0.9 * m[k] + 0.1 * grads[k]
                v2[k] = 0.999 * v2[k] + 0.001 * grads[k] ** 2
                mh, vh = m[k] / (1 - 0.9**step), v2[k] / (1 - 0.999**step)
                params[k] -= lr * mh / (np.sqrt(vh) + 1e-8)
    return (Conv(params["w1"], params["b1"], 1, 1), ReLU(), MaxPool(2),
            Conv(params["w2"], params["b2"], 1, 1), ReLU(), AvgPool(2), Flatten(),
            Dense(params["w3"], params["b3"]))


def _digits_grads(p: dict, x: np.ndarray, y: np.ndarray) -> dict:
    n = x.shape[0]
    c1, c2 = p["w1"].shape[0], p["w2"].shape[0]
    col1 = _im2col(x, 3, 1)  # (n, 9, 64)
    z1 = np.einsum("ok,nkp->nop", p["w1"].reshape(c1, -1), col1) + p["b1"][None, :, None]
    a1 = np.maximum(z1, 0).reshape(n, c1, 8, 8)
    win = a1.reshape(n, c1, 4, 2, 4, 2)
    p1 = win.max(axis=(3, 5))
    arg = (win == p1[:, :, :, None, :, None])
    col2 = _im2col(p1, 3, 1)  # (n, 9c1, 16)
    z2 = np.einsum("ok,nkp->nop", p["w2"].reshape(c2, -1), col2) + p["b2"][None, :, None]
    a2 = np.maximum(z2, 0).reshape(n, c2, 4, 4)
    p2 = a2.reshape(n, c2, 2, 2, 2, 2).mean(axis=(3, 5)).reshape(n, -1)
    logits = p2 @ p["w3"].T + p["b3"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    prob = e / e.sum(axis=1, keepdims=True)
    prob[np.arange(n), y] -= 1
    g = prob / n
    grads = {"w3": g.T @ p2, "b3": g.sum(0)}
    gp2 = (g @ p["w3"]).reshape(n, c2, 2, 1, 2, 1) / 4
    ga2 = np.broadcast_to(gp2, (n, c2, 2, 2, 2, 2)).reshape(n, c2, 4, 4)
    gz2 = (ga2 * (a2 > 0)).reshape(n, c2, 16)
    grads["w2"] = np.einsum("nop,nkp->ok", gz2, col2).reshape(p["w2"].shape)
    grads["b2"] = gz2.sum(axis=(0, 2))
    gcol2 = np.einsum("ok,nop->nkp", p["w2"].reshape(c2, -1), gz2)
    gp1 = _col2im(gcol2, p1.shape, 3, 1)
    ga1 = (arg * gp1[:, :, :, None, :, None]).reshape(n, c1, 8, 8)
    gz1 = (ga1 * (a1 > 0)).reshape(n, c1, 64)
    grads["w1"] = np.einsum("nop,nkp->ok", gz1, col1).reshape(p["w1"].shape)
    grads["b1"] = gz1.sum(axis=(0, 2))
    return grads
