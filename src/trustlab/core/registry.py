"""The method registry: which experiments exist, under which id, with which config.

A method registers its experiment with the ``register`` decorator in its
``experiment`` module::

    @register("hcc", config=HCCConfig)
    def run(config: HCCConfig, ctx: RunContext) -> Report: ...

Field and title come from the static catalogue, so ``trustlab list`` can show all
nineteen methods, implemented or not, without importing any heavy dependency.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trustlab.core.catalogue import CATALOGUE, MethodInfo, method_info
from trustlab.core.config import ExperimentConfig
from trustlab.core.context import RunContext
from trustlab.core.errors import InputError, UnknownMethodError
from trustlab.core.report import Report

__all__ = [
    "Experiment",
    "get_experiment",
    "implemented_ids",
    "is_implemented",
    "method_module_file",
    "register",
]

RunFn = Callable[[ExperimentConfig, RunContext], Report]


@dataclass(frozen=True)
class Experiment:
    info: MethodInfo
    config_cls: type[ExperimentConfig]
    run: RunFn

    @property
    def id(self) -> str:
        return self.info.id


_REGISTRY: dict[str, Experiment] = {}


def register(method_id: str, *, config: type[ExperimentConfig]) -> Callable[[RunFn], RunFn]:
    """Register ``fn`` as the experiment of ``method_id`` (one of the catalogue's ids)."""
    info = method_info(method_id)
    if not (isinstance(config, type) and issubclass(config, ExperimentConfig)):
        raise InputError(f"The config of '{method_id}' must subclass ExperimentConfig.")

    def decorate(fn: RunFn) -> RunFn:
        _REGISTRY[method_id] = Experiment(info, config, fn)
        return fn

    return decorate


def _experiment_module(info: MethodInfo) -> str:
    return f"trustlab.methods.{info.module}.experiment"


def method_module_file(method_id: str, name: str) -> Path:
    """Where ``trustlab/methods/<module>/<name>.py`` lives (it may not exist)."""
    import trustlab.methods

    return Path(trustlab.methods.__file__).parent / method_info(method_id).module / f"{name}.py"


def is_implemented(method_id: str) -> bool:
    """True when the method's experiment module exists.

    Checked on disk rather than with ``find_spec``, which would import the method package
    (and its heavy dependencies) just to answer ``trustlab list``.
    """
    info = method_info(method_id)  # an unknown (or unhashable) id: UnknownMethodError
    return info.id in _REGISTRY or method_module_file(info.id, "experiment").is_file()


def implemented_ids() -> list[str]:
    return [info.id for info in CATALOGUE if is_implemented(info.id)]


def get_experiment(method_id: str) -> Experiment:
    """Import the method's experiment module (if needed) and return its registration."""
    info = method_info(method_id)
    if method_id not in _REGISTRY:
        if not is_implemented(method_id):
            raise UnknownMethodError(
                f"Method '{method_id}' is not implemented yet. "
                f"Implemented: {', '.join(implemented_ids()) or 'none'}."
            )
        importlib.import_module(_experiment_module(info))
    if method_id not in _REGISTRY:
        raise UnknownMethodError(
            f"Module {_experiment_module(info)} did not register an experiment for '{method_id}'."
        )
    return _REGISTRY[method_id]
