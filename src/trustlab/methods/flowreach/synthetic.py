"""A synthetic family of growing-depth ReLU networks with properties that provably hold.

Every layer's weight matrix is rescaled to spectral norm 1, so the network is 1-Lipschitz in
the 2-norm; the property "unsafe if ``Y_0 >= f(c)_0 + r + margin``" (``c`` the box centre,
``r`` its half-diagonal) therefore holds on the whole box, at every depth. Sound bound
propagation loosens with depth; this is the family the scaling claim is measured on.
"""

from __future__ import annotations

import itertools

import numpy as np

from trustlab.core.errors import InputError
from trustlab.datasets.onnx_nets import ReluMLP
from trustlab.datasets.vnnlib import OutputPolytope, VnnlibRegion, VnnlibSpec

__all__ = ["deep_relu_instance"]


def deep_relu_instance(
    depth: int,
    rng: np.random.Generator,
    *,
    width: int = 32,
    n_inputs: int = 4,
    n_outputs: int = 2,
    box_halfwidth: float = 0.5,
    margin: float = 0.05,
) -> tuple[ReluMLP, VnnlibSpec]:
    """A 1-Lipschitz ReLU MLP with ``depth`` hidden layers and a property that holds."""
    if depth < 1 or width < 1:
        raise InputError(f"depth and width must be >= 1. Got {depth}, {width}.")
    dims = [n_inputs] + [width] * depth + [n_outputs]
    weights, biases = [], []
    for fan_in, fan_out in itertools.pairwise(dims):
        w = rng.standard_normal((fan_out, fan_in))
        w /= np.linalg.norm(w, ord=2)
        weights.append(w)
        biases.append(0.1 * rng.standard_normal(fan_out))
    mlp = ReluMLP(tuple(weights), tuple(biases))
    lower = np.full(n_inputs, -box_halfwidth)
    upper = np.full(n_inputs, box_halfwidth)
    centre_out = mlp(np.zeros((1, n_inputs)))[0]
    radius = box_halfwidth * np.sqrt(n_inputs)
    threshold = float(centre_out[0] + radius + margin)
    row = np.zeros((1, n_outputs))
    row[0, 0] = -1.0  # -y0 <= -threshold  <=>  y0 >= threshold
    poly = OutputPolytope(row, np.array([-threshold]))
    spec = VnnlibSpec(n_inputs, n_outputs, (VnnlibRegion(lower, upper, (poly,)),))
    return mlp, spec
