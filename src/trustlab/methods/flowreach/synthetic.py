"""Synthetic families of growing-depth ReLU networks.

``tight_relu_instance`` (used by the experiment): He-initialised networks with a threshold set a
documented margin above the largest output a strong falsifier finds, so that the property
holds but only just, and bound looseness that grows with depth shows up as abstentions.

``deep_relu_instance``: every layer's weight matrix is rescaled to spectral norm 1, so the
network is 1-Lipschitz in the 2-norm; the property "unsafe if ``Y_0 >= f(c)_0 + r + margin``"
(``c`` the box centre, ``r`` its half-diagonal) provably holds on the whole box at every depth,
but it is so loose that unbranched CROWN proves it at every depth (measured), so it cannot show
bound looseness; it stays for tests and examples.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar
from trustlab.datasets.onnx_nets import ReluMLP
from trustlab.datasets.vnnlib import OutputPolytope, VnnlibRegion, VnnlibSpec

__all__ = ["TightSpecInfo", "deep_relu_instance", "tight_relu_instance", "v_shape_instance"]


def _random_relu_mlp(depth: int, width: int, n_inputs: int, n_outputs: int,
                     rng: np.random.Generator, init: str, bias_scale: float) -> ReluMLP:
    """A random ReLU MLP with ``depth`` hidden layers of ``width``.

    ``init="spectral"``: every weight matrix rescaled to spectral norm 1 (1-Lipschitz);
    ``init="he"``: variance ``2 / fan_in`` (hidden) and ``1 / fan_in`` (output layer).
    """
    if depth < 1 or width < 1:
        raise InputError(f"depth and width must be >= 1. Got {depth}, {width}.")
    if init not in ("he", "spectral"):
        raise InputError(f"init must be 'he' or 'spectral'. Got {init!r}.")
    dims = [n_inputs] + [width] * depth + [n_outputs]
    weights, biases = [], []
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(dims)):
        w = rng.standard_normal((fan_out, fan_in))
        if init == "he":
            w *= np.sqrt((1.0 if i == len(dims) - 2 else 2.0) / fan_in)
        else:
            w /= np.linalg.norm(w, ord=2)
        weights.append(w)
        biases.append(bias_scale * rng.standard_normal(fan_out))
    return ReluMLP(tuple(weights), tuple(biases))


def _y0_at_least(lower, upper, n_outputs: int, threshold: float) -> VnnlibSpec:
    """The box ``[lower, upper]`` with the unsafe set ``Y_0 >= threshold``."""
    row = np.zeros((1, n_outputs))
    row[0, 0] = -1.0  # -y0 <= -threshold  <=>  y0 >= threshold
    poly = OutputPolytope(row, np.array([-threshold]))
    return VnnlibSpec(len(lower), n_outputs, (VnnlibRegion(lower, upper, (poly,)),))


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
    mlp = _random_relu_mlp(depth, width, n_inputs, n_outputs, rng, "spectral", 0.1)
    lower = np.full(n_inputs, -box_halfwidth)
    upper = np.full(n_inputs, box_halfwidth)
    centre_out = mlp(np.zeros((1, n_inputs)))[0]
    radius = box_halfwidth * np.sqrt(n_inputs)
    threshold = float(centre_out[0] + radius + margin)
    spec = _y0_at_least(lower, upper, n_outputs, threshold)
    return mlp, spec


@dataclass(frozen=True)
class TightSpecInfo:
    """How the tight threshold was set: ``threshold = best_max + rel_margin * (best_max - best_min)``."""

    best_max: float  # largest Y_0 found (uniform samples + Adam ascent), a lower bound of max Y_0
    best_min: float  # smallest Y_0 found likewise
    threshold: float
    rel_margin: float


def _extreme(mlp: ReluMLP, lower, upper, sign: float, rng: np.random.Generator,
             n_samples: int, n_starts: int, n_steps: int) -> float:
    """``sign * max(sign * Y_0)`` over the box: uniform samples, then Adam from the best ones."""
    x = lower + (upper - lower) * rng.random((n_samples, len(lower)))
    vals = sign * mlp(x)[:, 0]
    best = float(vals.max())
    net = mlp.to_torch(torch.float64)
    lo, width = torch.as_tensor(lower), torch.as_tensor(upper - lower)
    seeds = x[np.argsort(-vals)[: n_starts // 2]]
    u = rng.random((n_starts, len(lower))) * 0.98 + 0.01
    u[: len(seeds)] = np.clip((seeds - lower) / (upper - lower), 0.01, 0.99)
    z = torch.logit(torch.as_tensor(u)).requires_grad_(True)
    opt = torch.optim.Adam([z], lr=0.05)
    for _ in range(n_steps):
        v = sign * net(lo + width * torch.sigmoid(z))[:, 0]
        opt.zero_grad()
        (-v.sum()).backward()
        opt.step()
    with torch.no_grad():
        xs = (lo + width * torch.sigmoid(z)).numpy()
    best = max(best, float((sign * mlp(xs)[:, 0]).max()))
    return sign * best


def tight_relu_instance(
    depth: int,
    rng: np.random.Generator,
    *,
    width: int = 32,
    n_inputs: int = 4,
    n_outputs: int = 2,
    box_halfwidth: float = 0.5,
    rel_margin: float = 0.05,
    n_samples: int = 20_000,
    n_starts: int = 32,
    n_steps: int = 150,
    init: str = "he",
) -> tuple[ReluMLP, VnnlibSpec, TightSpecInfo]:
    """A He-initialised ReLU MLP and a *tight* property: unsafe iff ``Y_0 >= threshold``.

    The threshold sits ``rel_margin`` of the observed output range above the largest ``Y_0``
    that uniform sampling plus Adam ascent finds on the box. Weights are drawn with variance
    ``2 / fan_in`` (hidden) and ``1 / fan_in`` (output) so the signal neither vanishes nor
    explodes with depth, which keeps the output range, and hence the spec, non-degenerate at
    every depth. The property is *expected* to hold (the falsifier's maximum is a lower bound of
    the true one); where a sound method proves it, it provably does.
    """
    where = "tight_relu_instance"
    rel_margin = check_scalar(rel_margin, "rel_margin", where, lo=0, closed="neither")
    box_halfwidth = check_scalar(box_halfwidth, "box_halfwidth", where, lo=0, closed="neither")
    depth, width, n_inputs, n_outputs, n_samples, n_starts = (
        check_scalar(v, name, where, kind=int, lo=1, hi=10**7) for name, v in (
            ("depth", depth), ("width", width), ("n_inputs", n_inputs),
            ("n_outputs", n_outputs), ("n_samples", n_samples), ("n_starts", n_starts)))
    n_steps = check_scalar(n_steps, "n_steps", where, kind=int, lo=0, hi=10**6)
    if depth * width > 10**6:
        raise InputError(f"tight_relu_instance: depth x width = {depth * width} hidden units is "
                         "beyond what this family is for (at most 1e6).")
    mlp = _random_relu_mlp(depth, width, n_inputs, n_outputs, rng, init, 0.05)
    lower = np.full(n_inputs, -box_halfwidth)
    upper = np.full(n_inputs, box_halfwidth)
    hi = _extreme(mlp, lower, upper, 1.0, rng, n_samples, n_starts, n_steps)
    lo = _extreme(mlp, lower, upper, -1.0, rng, n_samples, n_starts, n_steps)
    span = max(hi - lo, 1e-12)
    threshold = float(hi + rel_margin * span)
    spec = _y0_at_least(lower, upper, n_outputs, threshold)
    return mlp, spec, TightSpecInfo(hi, lo, threshold, rel_margin)


def v_shape_instance(
    gap: float,
    *,
    n_extra: int = 0,
    rng: np.random.Generator | None = None,
    width: float = 0.2,
    slack: float = 0.1,
) -> tuple[ReluMLP, VnnlibSpec]:
    """A network with a *non-convex* (V-shaped) reach set and an unsafe set in its hollow.

    Inputs ``x`` in ``[-1, 1]^(2 + n_extra)``; outputs ``Y_0 = x_0``,
    ``Y_1 = |x_0| + slack * x_1`` (plus ``n_extra`` outputs ``Y_k = x_k``, a many-output
    variant). The reach set is the band ``|Y_0| - slack <= Y_1 <= |Y_0| + slack``. The unsafe
    set ``{|Y_0| <= width, Y_1 >= width + slack + gap}`` sits ``gap`` above the band inside the
    V: the property holds for every ``gap > 0``, but every convex set containing the band
    (box, ellipsoid, zonotope) meets the unsafe set. A learned shape can separate them once
    ``gap`` exceeds its resolution; Monte Carlo certifies regardless (zero hits).
    """
    if not gap > 0 or not width > 0 or not slack >= 0:
        raise InputError(f"gap and width must be > 0, slack >= 0. Got {gap}, {width}, {slack}.")
    n_in = 2 + int(n_extra)
    w1 = np.zeros((4 + n_extra * 2, n_in))
    w1[0, 0], w1[1, 0] = 1.0, -1.0  # relu(x0), relu(-x0)
    w1[2, 1], w1[3, 1] = 1.0, -1.0  # relu(x1), relu(-x1)
    for k in range(n_extra):
        w1[4 + 2 * k, 2 + k], w1[5 + 2 * k, 2 + k] = 1.0, -1.0
    w2 = np.zeros((2 + n_extra, w1.shape[0]))
    w2[0, :2] = [1.0, -1.0]  # x0
    w2[1, :4] = [1.0, 1.0, slack, -slack]  # |x0| + slack * x1
    for k in range(n_extra):
        w2[2 + k, 4 + 2 * k: 6 + 2 * k] = [1.0, -1.0]
    mlp = ReluMLP((w1, w2), (np.zeros(len(w1)), np.zeros(len(w2))))
    n_out = 2 + n_extra
    A = np.zeros((3, n_out))
    A[0, 0], A[1, 0], A[2, 1] = 1.0, -1.0, -1.0
    b = np.array([width, width, -(width + slack + gap)])
    region = VnnlibRegion(-np.ones(n_in), np.ones(n_in), (OutputPolytope(A, b),))
    del rng
    return mlp, VnnlibSpec(n_in, n_out, (region,))
