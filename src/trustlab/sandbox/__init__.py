"""Sandbox substrate: run untrusted commands (validators, agents' commands) in a subprocess
that holds -- Linux namespaces with a read-only view and no network where available, resource
limits and a timeout always.

    from trustlab.sandbox import Sandbox, Limits, probe
    box = Sandbox(limits=Limits(timeout_s=5, memory_mb=512))
    result = box.run([box.python(), "validator.py", "data.json"], workdir)
    result.status, result.stdout, result.summary()
    probe().level          # "namespace" or "rlimits" on this machine
"""

from trustlab.sandbox.runner import (
    Isolation,
    IsolationReport,
    Limits,
    Sandbox,
    SandboxError,
    SandboxResult,
    probe,
)

__all__ = [
    "Isolation",
    "IsolationReport",
    "Limits",
    "Sandbox",
    "SandboxError",
    "SandboxResult",
    "probe",
]
