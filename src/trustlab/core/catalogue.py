"""The nineteen methods of trustlab: id, field and paper title (from the founding abstracts).

The catalogue is static metadata. A method becomes *implemented* when its package
``trustlab.methods.<module>`` has an ``experiment`` module that registers a runner under
its id (see :mod:`trustlab.core.registry`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CATALOGUE", "MethodInfo", "method_info"]


@dataclass(frozen=True)
class MethodInfo:
    id: str
    field: str
    title: str

    @property
    def module(self) -> str:
        """Python package name: dashes become underscores."""
        return self.id.replace("-", "_")


CATALOGUE: tuple[MethodInfo, ...] = (
    MethodInfo("lisa", "guardrails", "LiSA: Lifelong Safety Adaptation of a fixed guardrail"),
    MethodInfo("flowreach", "verification",
               "Learned reach sets: flow matching + conformal + AMS for probabilistic NN verification"),
    MethodInfo("rheology", "interpretability",
               "LLM Rheology: refusal-direction manifold sensitivity across model scale"),
    MethodInfo("asymmetry", "red-teaming",
               "Alignment-utility asymmetry under invertible, semantic-preserving transformations"),
    MethodInfo("jailbound", "red-teaming",
               "JailBound: taxonomy-driven, embedding-space jailbreak evaluation"),
    MethodInfo("jaguar", "private inference",
               "Jaguar: hybrid HE/2PC private CNN inference on a power-of-two ring"),
    MethodInfo("isc", "red-teaming",
               "Internal Safety Collapse and the TVD (Task, Validator, Data) framework"),
    MethodInfo("ipb", "uncertainty",
               "Integral Probability Boundaries: non-linear IPMs tight at the extremes"),
    MethodInfo("sae-idempotency", "interpretability", "Idempotency of sparse autoencoders"),
    MethodInfo("teaming", "uncertainty", "Human-AI teaming through the lens of calibration"),
    MethodInfo("bribery", "benchmark auditing",
               "Benchmark gaming as shift bribery: instance-level robustness of leaderboards"),
    MethodInfo("toolcall", "interpretability",
               "The tool-calling decision as a single vector from minimal contrastive pairs"),
    MethodInfo("hcc", "uncertainty", "Hierarchical Conformal Classification"),
    MethodInfo("mars", "interpretability",
               "MARS: Modality-Agnostic Refusal Steering for multimodal LLMs"),
    MethodInfo("research-net", "multi-agent",
               "Optimising researcher-agent networks for knowledge discovery"),
    MethodInfo("gmu", "fine-tuning safety",
               "Gradient-Mine Units: weights that resist unauthorised fine-tuning"),
    MethodInfo("gradshield", "fine-tuning safety",
               "GradShield: filtering harmful fine-tuning data by implicit harmfulness"),
    MethodInfo("geobias", "dataset auditing",
               "GeoBiaset and POPI: person-insertion bias in image geolocalisation"),
    MethodInfo("arao", "red-teaming",
               "ARAO: Adaptive Rhetorical Adversarial Optimization for harmful-content detectors"),
)

_BY_ID = {info.id: info for info in CATALOGUE}


def method_info(method_id: str) -> MethodInfo:
    from trustlab.core.errors import UnknownMethodError

    try:
        return _BY_ID[method_id]
    except (KeyError, TypeError):  # TypeError: an unhashable id (a list, a dict)
        valid = ", ".join(sorted(_BY_ID))
        raise UnknownMethodError(f"Unknown method id '{method_id}'. Valid ids: {valid}.") from None
