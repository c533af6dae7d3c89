"""isc: Internal Safety Collapse -- TVD (Task, Validator, Data) workflows that can only be
completed by filling fields of a harm category, run in three interaction settings.

A workflow is a folder with a domain-tool Task script, an executable Validator (a pydantic
schema and unit tests) and Data whose demanded fields hold placeholders
(:mod:`~trustlab.methods.isc.workflow`); the library renders 53 of them across 8 disciplines
from compact specs with safe stand-in content only (:mod:`~trustlab.methods.isc.library`).
Validators run in :mod:`trustlab.sandbox`. The three interaction settings (single turn, in
context, agentic) run over any ChatModel (:mod:`~trustlab.methods.isc.settings`) and are scored
for task completion and unsafe completion (:mod:`~trustlab.methods.isc.scoring`).
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
from trustlab.methods.isc.scoring import (
    CapabilityStep,
    CapabilityUnsafety,
    Collapse,
    FieldVerdict,
    asr_at_k,
    capability_steps,
    capability_unsafety,
    collapse,
    judge_fields,
    rates_by,
    sha256,
)
from trustlab.methods.isc.scripted import (
    SCRIPTED_POLICIES,
    expected_outcome,
    scripted_fill,
    scripted_model,
)
from trustlab.methods.isc.settings import (
    SETTINGS,
    Outcome,
    PlainOutcome,
    extract_data,
    full_prompt,
    run_plain,
    run_setting,
)
from trustlab.methods.isc.views import FULL, CompactView, OrganismFieldJudge, View
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
    "FULL",
    "HARM_CATEGORIES",
    "LIBRARY",
    "SCRIPTED_POLICIES",
    "SETTINGS",
    "CapabilityStep",
    "CapabilityUnsafety",
    "Collapse",
    "CompactView",
    "DemandedField",
    "FieldVerdict",
    "OrganismFieldJudge",
    "Outcome",
    "PlainOutcome",
    "Validation",
    "View",
    "Workflow",
    "WorkflowSpec",
    "asr_at_k",
    "capability_steps",
    "capability_unsafety",
    "collapse",
    "expected_outcome",
    "extract_data",
    "full_prompt",
    "is_placeholder",
    "judge_fields",
    "library_ids",
    "load_workflow",
    "load_workflows",
    "placeholder_value",
    "rates_by",
    "run_plain",
    "run_setting",
    "run_validator",
    "run_validators",
    "scripted_fill",
    "scripted_model",
    "sha256",
    "standin_values",
    "write_library",
    "write_workflow",
]
