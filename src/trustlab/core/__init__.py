"""Core of trustlab: registry, run context, reports, configs, errors and atomic I/O."""

from trustlab.core.catalogue import CATALOGUE, MethodInfo, method_info
from trustlab.core.config import ExperimentConfig, resolve_config
from trustlab.core.context import RunContext
from trustlab.core.errors import (
    ConfigError,
    DataError,
    InputError,
    MissingDependencyError,
    NotFittedError,
    SolverError,
    TrustlabError,
    UnknownMethodError,
)
from trustlab.core.registry import get_experiment, implemented_ids, is_implemented, register
from trustlab.core.report import Report
from trustlab.core.runner import RunResult, run_experiment

__all__ = [
    "CATALOGUE",
    "ConfigError",
    "DataError",
    "ExperimentConfig",
    "InputError",
    "MethodInfo",
    "MissingDependencyError",
    "NotFittedError",
    "Report",
    "RunContext",
    "RunResult",
    "SolverError",
    "TrustlabError",
    "UnknownMethodError",
    "get_experiment",
    "implemented_ids",
    "is_implemented",
    "method_info",
    "register",
    "resolve_config",
    "run_experiment",
]
