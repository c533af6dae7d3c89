"""Organisms: tiny real transformers trained on CPU from our own synthetic corpora.

They are the embedded default models of every LM method: HF-format Llama models cached under
``$TRUSTLAB_HOME/organisms/<name>`` whose behaviour is known by construction (they refuse
harmful requests, answer benign tasks, comply under known jailbreak wrappers, call a tool for
execution requests). ``load(name)`` builds a missing organism first.
"""

from trustlab.organisms.corpora import Corpus, Example, build_chat_corpus, build_tool_corpus
from trustlab.organisms.lm_bridge import register_with_lm
from trustlab.organisms.metrics import (
    REFUSAL_PHRASES,
    chat_metrics,
    generate_responses,
    is_refusal,
    parse_tool_call,
    tool_metrics,
)
from trustlab.organisms.registry import (
    build,
    is_built,
    list_organisms,
    load,
    organism_dir,
    read_card,
    trustlab_home,
)
from trustlab.organisms.specs import SPECS, OrganismSpec, get_spec
from trustlab.organisms.tokenizer import CHAT_TEMPLATE, format_chat

register_with_lm()


def load_vit(name: str = "vit-xs", *, home: str | None = None):
    """``(ViTForImageClassification, ViTImageProcessor)`` of a vision organism such as
    ``vit-xs`` (built first when not cached), or of a folder; needs trustlab[llm]."""
    from trustlab.organisms.vit_build import load_vit as _load_vit

    return _load_vit(name, home=home)


__all__ = [
    "CHAT_TEMPLATE",
    "REFUSAL_PHRASES",
    "SPECS",
    "Corpus",
    "Example",
    "OrganismSpec",
    "build",
    "build_chat_corpus",
    "build_tool_corpus",
    "chat_metrics",
    "format_chat",
    "generate_responses",
    "get_spec",
    "is_built",
    "is_refusal",
    "list_organisms",
    "load",
    "load_vit",
    "organism_dir",
    "parse_tool_call",
    "read_card",
    "tool_metrics",
    "trustlab_home",
]
