"""Per-example gradients: both implementations agree with a batch-of-one backward pass,
projections equal the full product, and memory stays bounded."""

from __future__ import annotations

import pytest
import torch

from trustlab.core.errors import InputError
from trustlab.finetune import encode_data
from trustlab.finetune.pergrad import gradient_layout, mean_gradient, per_example_gradients

MLP = ("model.layers.1.mlp.*",)


def _reference_grads(model, tokenizer, data, params):
    """Per-example gradients the plain way: the HF loss of one unpadded example, backward."""
    names = [n for n, _ in gradient_layout(model, params)]
    chosen = dict(model.named_parameters())
    rows = []
    for e in encode_data(tokenizer, data):
        ids = torch.tensor([e.ids])
        labels = torch.full_like(ids, -100)
        labels[0, e.n_prompt :] = ids[0, e.n_prompt :]
        model.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=labels).loss.backward()
        rows.append(torch.cat([chosen[n].grad.reshape(-1) for n in names]))
    model.zero_grad(set_to_none=True)
    return torch.stack(rows)


@pytest.mark.parametrize("method", ["loop", "vmap"])
def test_per_example_gradients_match_a_batch_of_one_backward(
    tiny_model, tiny_tokenizer, tiny_data, method
):
    data = tiny_data[:6]
    expected = _reference_grads(tiny_model, tiny_tokenizer, data, MLP)
    got = per_example_gradients(
        tiny_model, data, tokenizer=tiny_tokenizer, params=MLP, method=method, batch_size=4
    )
    assert got.shape == (6, 3 * 16 * 32)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-6)
    assert all(p.grad is None for p in tiny_model.parameters())


def test_projection_equals_the_full_product_and_cosines_are_bounded(
    tiny_model, tiny_tokenizer, tiny_data
):
    data = tiny_data[:5]
    full = per_example_gradients(tiny_model, data, tokenizer=tiny_tokenizer, params=MLP)
    ref = torch.randn(2, full.shape[1], generator=torch.Generator().manual_seed(0))
    proj = per_example_gradients(
        tiny_model, data, tokenizer=tiny_tokenizer, params=MLP, reference=ref, batch_size=2
    )
    torch.testing.assert_close(proj, full @ ref.T, rtol=1e-4, atol=1e-5)
    one = per_example_gradients(
        tiny_model, data, tokenizer=tiny_tokenizer, params=MLP, reference=ref[0] * 7.0,
        normalize=True,
    )  # fmt: skip
    assert one.shape == (5,) and (one.abs() <= 1 + 1e-5).all()
    cos = (full @ ref[0]) / (full.norm(dim=1) * ref[0].norm())
    torch.testing.assert_close(one, cos, rtol=1e-4, atol=1e-5)  # scale-free


def test_mean_gradient_is_the_mean_of_the_rows(tiny_model, tiny_tokenizer, tiny_data):
    full = per_example_gradients(tiny_model, tiny_data[:7], tokenizer=tiny_tokenizer, params=MLP)
    mean = mean_gradient(tiny_model, tiny_data[:7], tokenizer=tiny_tokenizer, params=MLP)
    torch.testing.assert_close(mean, full.mean(0))


def test_memory_guard_and_bad_arguments(tiny_model, tiny_tokenizer, tiny_data):
    with pytest.raises(InputError, match="max_bytes"):
        per_example_gradients(tiny_model, tiny_data, tokenizer=tiny_tokenizer, max_bytes=1000)
    with pytest.raises(InputError, match="'params'"):
        per_example_gradients(tiny_model, tiny_data, tokenizer=tiny_tokenizer, params=("x.*",))
    with pytest.raises(InputError, match="'reference'"):
        per_example_gradients(
            tiny_model, tiny_data, tokenizer=tiny_tokenizer, params=MLP, reference=torch.ones(3)
        )
    with pytest.raises(InputError, match="'method'"):
        per_example_gradients(tiny_model, tiny_data, tokenizer=tiny_tokenizer, method="jit")
    with pytest.raises(InputError, match="'batch_size'"):
        per_example_gradients(tiny_model, tiny_data, tokenizer=tiny_tokenizer, batch_size=0)


def test_reduce_sees_each_chunk_and_equals_the_function_of_the_full_matrix(
    tiny_model, tiny_tokenizer, tiny_data
):
    data = tiny_data[:7]
    full = per_example_gradients(tiny_model, data, tokenizer=tiny_tokenizer, params=MLP)
    half = full.shape[1] // 2
    seen = []

    def per_half_norms(g):
        seen.append(g.shape[0])
        # a reduce may keep what it sees (FIHS sums probe gradients): no autograd graph to the
        # parameters outside 'params' (it used to carry one with vmap)
        assert not g.requires_grad
        return torch.stack([g[:, :half].norm(dim=1), g[:, half:].norm(dim=1)], dim=1)

    got = per_example_gradients(
        tiny_model, data, tokenizer=tiny_tokenizer, params=MLP, batch_size=3,
        reduce=per_half_norms, max_bytes=1,  # no [n, d] matrix is kept, so no memory guard
    )  # fmt: skip
    assert seen == [3, 3, 1]
    expected = torch.stack([full[:, :half].norm(dim=1), full[:, half:].norm(dim=1)], dim=1)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-6)
    with pytest.raises(InputError, match="'reduce'"):
        per_example_gradients(
            tiny_model, data, tokenizer=tiny_tokenizer, params=MLP,
            reduce=lambda g: g.sum(),  # not one row per example
        )  # fmt: skip
    with pytest.raises(InputError, match="'reduce'"):
        per_example_gradients(
            tiny_model, data, tokenizer=tiny_tokenizer, params=MLP, reduce=per_half_norms,
            reference=torch.ones(full.shape[1]),
        )  # fmt: skip
