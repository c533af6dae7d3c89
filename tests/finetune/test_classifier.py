"""The image-classifier loop (``finetune_classifier``, ``classifier_accuracy``) on malformed
input (issue 38: InputError in one line, or the canonical result) and properties that fail if
the loop were wrong: one plain SGD step is ``w - lr * grad`` on the batch the generator draws,
the same seed gives the same weights, the parameter mask and LoRA train only what they name
(the head trains fully under LoRA), clipping caps the step, accuracy is per-image correctness.
A random 2-layer ViT of 16-pixel images (built in milliseconds)."""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from trustlab.core.errors import InputError
from trustlab.finetune import FinetuneConfig, LoraSettings, classifier_accuracy, finetune_classifier

from ..malformed import OBJECT, Case, Kind, Mutation, malformed_input_tests

FEW = settings(max_examples=6, deadline=None, derandomize=True)


def _vit(seed: int = 0):
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(image_size=16, patch_size=8, num_channels=3, hidden_size=16,
                       num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=4)  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ViTForImageClassification(config).eval()


def _pixels(n: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, 16, 16, generator=gen) * 2 - 1, torch.randint(4, (n,), generator=gen)


VIT = _vit()
X, Y = _pixels(8)
TINY = FinetuneConfig(steps=2, batch_size=4, lr=1e-3)
MODEL = OBJECT.extend(Mutation("a module without config", lambda v, r: torch.nn.Linear(3, 3)))
PIXELS = Kind("pixels", (
    Mutation("nan", lambda v, r: torch.where(torch.arange(v.numel()).reshape(v.shape) == 5,
                                             torch.nan, v)),
    Mutation("3-D", lambda v, r: v[0]), Mutation("numpy", lambda v, r: v.numpy()),
    Mutation("list", lambda v, r: v.tolist()), Mutation("None", lambda v, r: None),
    Mutation("integers", lambda v, r: (v * 100).long()),
    Mutation("one image short", lambda v, r: v[:-1]),
))  # fmt: skip
LABELS = Kind("labels", (
    Mutation("floats", lambda v, r: v.float()), Mutation("one short", lambda v, r: v[:-1]),
    Mutation("2-D", lambda v, r: v[:, None]), Mutation("None", lambda v, r: None),
    Mutation("list", lambda v, r: v.tolist()), Mutation("int32", lambda v, r: v.int(), same=True),
))  # fmt: skip

CASES = [
    Case("finetune_classifier",
         lambda model, pixels, labels: finetune_classifier(
             copy.deepcopy(model) if isinstance(model, torch.nn.Module) else model,
             pixels, labels, TINY).losses,
         {"model": VIT, "pixels": X, "labels": Y},
         {"model": MODEL, "pixels": PIXELS, "labels": LABELS}),
    Case("classifier_accuracy",
         lambda model, pixels, labels: classifier_accuracy(model, pixels, labels).numpy(),
         {"model": VIT, "pixels": X, "labels": Y},
         {"model": MODEL, "pixels": PIXELS, "labels": LABELS}),
]  # fmt: skip

test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)


@given(seed=st.integers(0, 2**16), lr=st.sampled_from([1e-3, 1e-2, 0.1]), flip=st.booleans())
@FEW
def test_one_plain_sgd_step_is_w_minus_lr_grad_on_the_drawn_batch(seed, lr, flip):
    x, y = _pixels(8, seed)
    model = _vit(seed % 3)
    cfg = FinetuneConfig(steps=1, batch_size=4, lr=lr, optimizer="sgd", momentum=0.0,
                         schedule="constant", seed=seed)  # fmt: skip
    gen = torch.Generator().manual_seed(seed)  # the draws the loop makes, in its order
    idx = torch.randint(len(y), (4,), generator=gen)
    xb = x[idx]
    if flip:
        f = torch.rand(4, generator=gen) < 0.5
        xb = torch.where(f[:, None, None, None], xb.flip(3), xb)
    ref = copy.deepcopy(model).train()
    loss = F.cross_entropy(ref(pixel_values=xb).logits, y[idx])
    loss.backward()
    result = finetune_classifier(model, x, y, cfg, flip=flip)
    assert result.losses == [pytest.approx(float(loss.detach()), rel=1e-6)]
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters(), strict=True):
        assert torch.allclose(p, q - lr * q.grad, atol=1e-7), name


def test_same_seed_same_weights_and_the_mask_is_honoured():
    cfg = FinetuneConfig(steps=3, batch_size=4, lr=1e-2, trainable=("classifier.*",))
    a, b = copy.deepcopy(VIT), copy.deepcopy(VIT)
    ra, rb = finetune_classifier(a, X, Y, cfg), finetune_classifier(b, X, Y, cfg)
    assert ra.losses == rb.losses and torch.equal(a.classifier.weight, b.classifier.weight)
    assert torch.equal(a.vit.layers[0].mlp.fc1.weight,
                       VIT.vit.layers[0].mlp.fc1.weight)
    assert not torch.equal(a.classifier.weight, VIT.classifier.weight)
    assert set(ra.module_grad_norms[0]) == {"classifier"} and ra.steps_run == 3
    assert all(p.requires_grad for p in a.parameters())  # flags restored after the run


def test_lora_trains_adapters_and_the_head_and_merges_into_a_plain_model():
    cfg = FinetuneConfig(steps=2, batch_size=4, lr=1e-2,
                         lora=LoraSettings(r=2, target_modules=("q_proj", "v_proj")))  # fmt: skip
    model = copy.deepcopy(VIT)
    result = finetune_classifier(model, X, Y, cfg)
    merged = result.model
    assert type(merged) is type(VIT)
    trained = {k.rsplit(".", 1)[0] for k in result.module_grad_norms[0]}
    assert any("lora_" in k for k in trained) and any("classifier" in k for k in trained)
    assert not any("fc1" in k or "k_proj" in k for k in trained)
    assert not torch.equal(merged.classifier.weight, VIT.classifier.weight)
    assert torch.equal(merged.vit.layers[0].mlp.fc1.weight,
                       VIT.vit.layers[0].mlp.fc1.weight)


def test_clipping_caps_the_first_step_and_reports_the_norm_before_it():
    seen = []
    cfg = FinetuneConfig(steps=1, batch_size=4, lr=1.0, optimizer="sgd", momentum=0.0,
                         schedule="constant", clip_grad_norm=1e-3)  # fmt: skip
    model = copy.deepcopy(VIT)
    result = finetune_classifier(model, X, Y, cfg, callbacks=[seen.append])
    with torch.no_grad():
        moved = torch.sqrt(sum(((p - q) ** 2).sum() for p, q in
                               zip(model.parameters(), VIT.parameters(), strict=True)))  # fmt: skip
    assert float(moved) == pytest.approx(1e-3, rel=1e-3)
    assert seen[0].clipped and seen[0].grad_norm == result.grad_norms[0] > 1e-3


def test_accuracy_is_per_image_correctness_and_evaluations_run():
    with torch.no_grad():
        pred = VIT(pixel_values=X).logits.argmax(-1)
    assert torch.equal(classifier_accuracy(VIT, X, Y, batch=3), pred == Y)
    result = finetune_classifier(copy.deepcopy(VIT), X, Y, TINY, eval_every=1,
                                 evaluate=lambda m, step: {"step": step})  # fmt: skip
    assert result.evaluations == [(1, {"step": 1.0}), (2, {"step": 2.0})]
    with pytest.raises(InputError, match="eval_every"):
        finetune_classifier(copy.deepcopy(VIT), X, Y, TINY, eval_every=1)
    with pytest.raises(InputError, match="batch_size"):
        finetune_classifier(copy.deepcopy(VIT), X, Y, TINY, batch_size=9)
