"""What a verdict may be written as, and how it is scored.

- :func:`recheck_witness`: a witness re-checked on an untouched, batch-1 onnxruntime session of
  the original file, with margins ``|m| < 1e-4`` flagged;
- :func:`write_result`: the VNN-COMP result file (``unsat`` only for a sound proof unless the
  caller opts in) and the sidecar JSON next to it (schema :data:`SIDECAR_SCHEMA`);
- :func:`written_answer`, :func:`vnncomp_score`, :func:`is_wrong`: the scoring rules the
  experiment applies to every method (VNN-COMP 2025: +10 for a correct ``sat``/``unsat``,
  -150 for an incorrect one, 0 otherwise).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from trustlab.core.errors import InputError
from trustlab.core.io import write_text_atomic
from trustlab.datasets.onnx_nets import OnnxNetwork
from trustlab.datasets.vnnlib import VnnlibSpec
from trustlab.methods.flowreach.falsify import margin_np
from trustlab.methods.flowreach.verifier import GUARANTEES, InstanceResult, format_witness

__all__ = [
    "SIDECAR_SCHEMA",
    "SIDECAR_VERSION",
    "SMALL_MARGIN",
    "is_disputed",
    "is_wrong",
    "recheck_witness",
    "sidecar_path",
    "sidecar_record",
    "vnncomp_score",
    "write_result",
    "written_answer",
]

SIDECAR_VERSION = 1
SMALL_MARGIN = 1e-4  # witnesses closer than this to the spec boundary are flagged
SCORE_CORRECT, SCORE_INCORRECT = 10, -150

_NUM = {"type": ["number", "null"]}
SIDECAR_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "flowreach verdict sidecar",
    "description": "Written next to every VNN-COMP result file F as F.json: what the verdict "
                   "guarantees, with the full certificate or the re-checked witness.",
    "type": "object",
    "required": ["schema_version", "tool", "network", "property", "result_written", "verdict",
                 "guarantee", "probabilistic_unsat", "seconds", "certificate", "witness"],
    "additionalProperties": False,
    "properties": {
        "schema_version": {"const": SIDECAR_VERSION},
        "tool": {"const": "trustlab flowreach"},
        "network": {"type": "object", "required": ["path", "sha256"],
                    "properties": {"path": {"type": "string"},
                                   "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}},
        "property": {"type": "object", "required": ["path", "sha256"],
                     "properties": {"path": {"type": "string"},
                                    "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}},
        "result_written": {"enum": ["sat", "unsat", "unknown", "timeout"],
                           "description": "The first line of the result file."},
        "verdict": {"enum": ["sat", "unsat", "unknown", "timeout"],
                    "description": "What the pipeline concluded (unsat may be probabilistic)."},
        "guarantee": {"enum": list(GUARANTEES)},
        "probabilistic_unsat": {"type": "boolean",
                                "description": "Whether --probabilistic-unsat was given."},
        "seconds": {"type": "number", "minimum": 0},
        "falsifier": {"type": "object"},
        "certificate": {
            "oneOf": [
                {"type": "null"},
                {"type": "object",
                 "required": ["bound", "alpha", "delta", "ams_delta", "n_cal", "n_train",
                              "epsilon", "confidence", "input_law", "assumptions",
                              "rests_on_flow_mass", "regions"],
                 "properties": {
                     "bound": {"type": "number", "minimum": 0, "maximum": 2,
                               "description": "Upper bound on P(violation) = alpha + AMS bound "
                                              "(worst input region)."},
                     "alpha": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                     "delta": {"type": ["number", "null"]},
                     "ams_delta": {"type": "number", "exclusiveMinimum": 0,
                                   "exclusiveMaximum": 1},
                     "n_cal": {"type": "integer", "minimum": 1},
                     "n_train": {"type": "integer", "minimum": 1},
                     "epsilon": {"type": "number"},
                     "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                     "input_law": {"type": "string"},
                     "assumptions": {"type": "array", "items": {"type": "string"},
                                     "minItems": 1},
                     "rests_on_flow_mass": {"type": "boolean"},
                     "regions": {"type": "array", "items": {
                         "type": "object",
                         "required": ["radius", "roundtrip_error", "ams_radius", "ams_upper",
                                      "ams_n_crossed", "bound"],
                         "properties": {"radius": _NUM, "roundtrip_error": _NUM,
                                        "ams_radius": _NUM, "ams_upper": _NUM,
                                        "ams_estimate": _NUM,
                                        "ams_n_crossed": {"type": ["integer", "null"]},
                                        "ams_finished": {"type": ["boolean", "null"]},
                                        "bound": _NUM}}},
                 }},
            ]
        },
        "witness": {
            "oneOf": [
                {"type": "null"},
                {"type": "object",
                 "required": ["x", "y", "margin", "confirmed", "small_margin", "rechecked_on"],
                 "properties": {
                     "x": {"type": "array", "items": {"type": "number"}},
                     "y": {"type": "array", "items": {"type": "number"}},
                     "margin": {"type": "number",
                                "description": "min_k max_a (A_k y - b_k)_a on the re-check; "
                                               "<= 0 means the output is unsafe."},
                     "confirmed": {"type": "boolean"},
                     "small_margin": {"type": "boolean",
                                      "description": "|margin| < 1e-4: float32 rounding in "
                                                     "another runtime could flip it."},
                     "rechecked_on": {"type": "string"},
                 }},
            ]
        },
    },
}


def recheck_witness(net: OnnxNetwork, spec: VnnlibSpec,
                    x: NDArray[np.floating]) -> dict[str, Any]:
    """Re-run ``x`` on an untouched batch-1 onnxruntime session of the original file."""
    x = np.asarray(x, dtype=np.float32).reshape(-1)
    y = net.recheck(x[None])[0]
    inside = [r for r in spec.regions if r.contains_input(x[None])[0]]
    margin = min((float(margin_np(r, y[None])[0]) for r in inside), default=math.inf)
    confirmed = bool(spec.violated(x[None], y[None])[0])
    return {"x": [float(v) for v in x], "y": [float(v) for v in y], "margin": margin,
            "confirmed": confirmed, "small_margin": bool(abs(margin) < SMALL_MARGIN),
            "rechecked_on": "fresh onnxruntime session of the original file, batch 1"}


def _sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _clean(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python, NaN/inf to None."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def sidecar_path(result_file: str | Path) -> Path:
    """``F`` -> ``F.json`` (next to the result file)."""
    p = Path(result_file)
    return p.with_name(p.name + ".json")


def sidecar_record(result: InstanceResult, net_path: str | Path, prop_path: str | Path,
                   written: str, *, probabilistic_unsat: bool,
                   witness: dict[str, Any] | None, method: str = "flowreach") -> dict[str, Any]:
    verdict = result.verdicts.get(method, "unknown")
    guarantee = result.guarantee(method)
    cert = result.certificates.get(method) if verdict != "sat" else None
    if cert is not None and method != "flowreach":
        cert = None  # the sidecar documents flowreach's certificate
    return _clean({
        "schema_version": SIDECAR_VERSION,
        "tool": "trustlab flowreach",
        "network": {"path": str(net_path), "sha256": _sha256(net_path)},
        "property": {"path": str(prop_path), "sha256": _sha256(prop_path)},
        "result_written": written,
        "verdict": verdict,
        "guarantee": guarantee,
        "probabilistic_unsat": probabilistic_unsat,
        "seconds": float(result.seconds.get(method, 0.0)),
        "falsifier": {"stage": result.falsify_stage, "best_margin": result.best_margin,
                      "seconds": result.falsify_seconds, "box_search_boxes": result.search_boxes,
                      "proved_by_box_search": result.proved_by_search},
        "certificate": cert if guarantee in ("probabilistic", "none") and cert
        and math.isfinite(cert.get("bound", math.nan)) else None,
        "witness": witness,
    })


def write_result(result_file: str | Path, result: InstanceResult, net: OnnxNetwork,
                 spec: VnnlibSpec, net_path: str | Path, prop_path: str | Path, *,
                 probabilistic_unsat: bool = False) -> tuple[str, dict[str, Any]]:
    """Write the VNN-COMP result file and its sidecar JSON; returns (text, sidecar).

    A witness is written as ``sat`` only if the untouched batch-1 re-check confirms it;
    otherwise the file says ``unknown`` and the sidecar records the failed re-check.
    """
    witness = None
    text = format_witness(result, probabilistic_unsat=probabilistic_unsat)
    if result.verdicts.get("flowreach") == "sat" and result.counterexample is not None:
        witness = recheck_witness(net, spec, result.counterexample.x)
        if not witness["confirmed"]:
            text = "unknown\n"
    written = text.split("\n", 1)[0]
    record = sidecar_record(result, net_path, prop_path, written,
                            probabilistic_unsat=probabilistic_unsat, witness=witness)
    write_text_atomic(result_file, text)
    write_text_atomic(sidecar_path(result_file), json.dumps(record, indent=1) + "\n")
    return text, record


def written_answer(verdict: str, guarantee: str, *, probabilistic_unsat: bool = False) -> str:
    """What a VNN-COMP result file would say for this verdict (the scorers' input)."""
    if verdict == "sat" and guarantee == "falsified":
        return "sat"
    if verdict == "unsat" and (guarantee == "sound" or (guarantee == "probabilistic"
                                                        and probabilistic_unsat)):
        return "unsat"
    if verdict not in ("sat", "unsat", "unknown", "timeout"):
        raise InputError(f"Unknown verdict {verdict!r}.")
    return "timeout" if verdict == "timeout" else "unknown"


def vnncomp_score(written: str, expected: str) -> int:
    """VNN-COMP 2025 points for one written answer: +10 correct, -150 incorrect, 0 otherwise."""
    if written not in ("sat", "unsat") or expected not in ("sat", "unsat"):
        return 0
    return SCORE_CORRECT if written == expected else SCORE_INCORRECT


def is_wrong(verdict: str, guarantee: str, expected: str, *, disputed: bool = False,
             witness_confirmed: bool | None = None, violation_upper: float | None = None,
             epsilon: float = 0.01) -> bool:
    """Whether a verdict contradicts what is known about the instance.

    - a witness is wrong when the known answer is ``unsat`` or its re-check fails;
    - a sound ``unsat`` is wrong on a known-``sat`` instance (never excused: the copied ACAS Xu
      files are the ones VNN-COMP ran);
    - a probabilistic ``unsat`` on a known-``sat`` instance is wrong unless a fresh
      Clopper–Pearson bound puts the violation probability at or below ``epsilon`` (the
      certificate's claim then holds, it is just not a proof);
    - ``disputed`` rows (known answers refuted on the copied files, MNIST only) are not scored.
    """
    if disputed:
        return False
    if verdict == "sat":
        return expected == "unsat" or witness_confirmed is False
    if verdict == "unsat" and expected == "sat":
        if guarantee == "probabilistic":
            return violation_upper is None or violation_upper > epsilon
        return True
    return False


def is_disputed(benchmark: str, expected: str, *, sound_unsat: bool,
                witness_confirmed: bool | None) -> bool:
    """A known answer refuted on the copied files, excused from scoring: **MNIST rows only**.

    The copied MNIST vnnlib files were generated with another seed than the ones VNN-COMP 2025
    ran (docs: "MNIST known answers"), so a name-matched answer can belong to another image.
    The ACAS Xu files are the competition's own: there a sound proof of a known-sat instance,
    or a witness on a known-unsat one, is a bug and is scored as wrong, never disputed.
    """
    if benchmark != "mnist":
        return False
    return (expected == "sat" and sound_unsat) or (expected == "unsat" and bool(witness_confirmed))
