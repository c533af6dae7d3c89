"""Core of trustlab: registry, run context, reports, configs, errors, atomic I/O and work units."""

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
from trustlab.core.units import (
    LocalBackend,
    RayBackend,
    Sweep,
    SweepResult,
    UnitsFailedError,
    UnitStore,
    WorkUnit,
    make_backend,
    run_sweep,
    unit_seed,
)

__all__ = [
    "CATALOGUE",
    "ConfigError",
    "DataError",
    "ExperimentConfig",
    "InputError",
    "LocalBackend",
    "MethodInfo",
    "MissingDependencyError",
    "NotFittedError",
    "RayBackend",
    "Report",
    "RunContext",
    "RunResult",
    "SolverError",
    "Sweep",
    "SweepResult",
    "TrustlabError",
    "UnitStore",
    "UnitsFailedError",
    "UnknownMethodError",
    "WorkUnit",
    "get_experiment",
    "implemented_ids",
    "is_implemented",
    "make_backend",
    "method_info",
    "register",
    "resolve_config",
    "run_experiment",
    "run_sweep",
    "unit_seed",
]
