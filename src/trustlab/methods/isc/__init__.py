"""isc: Internal Safety Collapse -- TVD (Task, Validator, Data) workflows that can only be
completed by filling fields of a harm category, run in three interaction settings.

A workflow is a folder with a domain-tool Task script, an executable Validator (a pydantic
schema and unit tests) and Data whose demanded fields hold placeholders
(:mod:`~trustlab.methods.isc.workflow`); the library renders 53 of them across 8 disciplines
from compact specs with safe stand-in content only (:mod:`~trustlab.methods.isc.library`).
Validators run in :mod:`trustlab.sandbox`. See docs/methods/isc.md.
"""

from trustlab.methods.isc.library import (
    LIBRARY,
    WorkflowSpec,
    library_ids,
    placeholder_value,
    standin_values,
    write_library,
    write_workflow,
)
from trustlab.methods.isc.workflow import (
    DISCIPLINES,
    FORMS,
    HARM_CATEGORIES,
    DemandedField,
    Validation,
    Workflow,
    is_placeholder,
    load_workflow,
    load_workflows,
    run_validator,
    run_validators,
)

__all__ = [
    "DISCIPLINES",
    "FORMS",
    "HARM_CATEGORIES",
    "LIBRARY",
    "DemandedField",
    "Validation",
    "Workflow",
    "WorkflowSpec",
    "is_placeholder",
    "library_ids",
    "load_workflow",
    "load_workflows",
    "placeholder_value",
    "run_validator",
    "run_validators",
    "standin_values",
    "write_library",
    "write_workflow",
]
