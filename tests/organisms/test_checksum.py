"""The organisms are built through the fine-tuning substrate with the weights they had before it.

chat-xs's weights are pinned by checksum, per CPU kernel family: torch dispatches to vectorised
kernels by CPU capability (AVX-512, AVX2, ...), and these round differently, so one seed gives
one set of weights per kernel family (measured: 0.535 / 0.505 / 0.53 held-out exact match for
AVX512 / AVX2 / DEFAULT; docs/organisms.md, *Across machines*). The pins were taken from the
training loop as it was before the substrate existed (organisms/train.py at 86261aa), with
``ATEN_CPU_CAPABILITY`` forcing each family on one machine.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="organisms need trustlab[llm] (torch)")

import torch

from trustlab.finetune import weights_sha256

CHAT_XS_SHA256 = {
    "AVX512": "b1595a3f08dd8c4747cee89168cc35e3d6999abfb03a04eaff7ec22d5d914519",
    "AVX2": "91c7622c9d75f7f4485c5eaa053e34e73e061bfdc579592ec1b255e0edded6c9",
    "DEFAULT": "01505526b1af404e2b8d99ce393c9e7f5801b5632f08a58825a3a24814ff256d",
}

_TRAIN_ONLY = """
import json, torch
from trustlab.finetune import weights_sha256
from trustlab.organisms.build_grown import corpora_for, shared_tokenizer
from trustlab.organisms.specs import get_spec
from trustlab.core.runtime import torch_runtime
from trustlab.organisms.train import make_llama, train_lm
spec = get_spec("chat-xs")
corpora = corpora_for(spec.seed, spec.n_train, spec.n_heldout)
tokenizer = shared_tokenizer(corpora)
generator = torch.Generator().manual_seed(spec.seed)
with torch_runtime(spec.train.threads, deterministic=True):
    model = make_llama(spec.shape, tokenizer, generator, spec.train.init_std)
    model, _ = train_lm(model, tokenizer, corpora["chat"].train, spec.train, generator)
print(json.dumps({"cap": torch.backends.cpu.get_cpu_capability(), "sha": weights_sha256(model)}))
"""


def test_chat_xs_weights_are_bit_identical_to_the_pre_substrate_build(chat_xs):
    """The session's chat-xs (built through the substrate) against the pin for this kernel;
    on a kernel family without a pin, a training-only rebuild forced to DEFAULT kernels."""
    capability = torch.backends.cpu.get_cpu_capability()
    assert chat_xs.card["hardware"]["cpu_capability"] == capability
    if capability in CHAT_XS_SHA256:
        assert weights_sha256(chat_xs.model) == CHAT_XS_SHA256[capability]
        return
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip(f"no pinned chat-xs checksum for {capability} kernels on {platform.machine()}")
    env = dict(os.environ, ATEN_CPU_CAPABILITY="default")
    out = subprocess.run(
        [sys.executable, "-c", _TRAIN_ONLY], env=env, capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"cap": "DEFAULT", "sha": CHAT_XS_SHA256["DEFAULT"]}
