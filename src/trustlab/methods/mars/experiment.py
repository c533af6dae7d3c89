"""`trustlab run mars`: the study of :mod:`trustlab.methods.mars.study`, registered."""

from __future__ import annotations

from trustlab.core import register
from trustlab.methods.mars.study import MarsConfig, run_study

__all__ = ["MarsConfig", "run"]

run = register("mars", config=MarsConfig)(run_study)
