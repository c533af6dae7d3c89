"""Issue 38's property tests for trustlab.lm's direction selection (no model needed): placebo
directions are unit vectors that avoid what they exclude, select_direction picks the brute-force
best candidate; malformed arguments give one-line InputErrors. (Checks on a model -- steering,
ablation, log-probabilities -- are the next item of lm's pending list.)"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.lm import DirectionChoice, head_component, placebo_directions, select_direction

FEW = settings(max_examples=6, deadline=None, derandomize=True)


@FEW
@given(st.integers(1, 5), st.integers(4, 12), st.integers(0, 2**16))
def test_placebo_directions_are_unit_and_avoid_what_they_exclude(n, d, seed):
    g = torch.Generator().manual_seed(seed)
    exclude = torch.nn.functional.normalize(torch.randn(d, generator=g), dim=0)
    dirs = placebo_directions(n, d, g, exclude=exclude)
    assert dirs.shape == (n, d)
    torch.testing.assert_close(dirs.norm(dim=-1), torch.ones(n), rtol=1e-5, atol=1e-5)
    assert (dirs @ exclude).abs().max() < 1e-5


@FEW
@given(st.integers(2, 5), st.integers(1, 3), st.integers(0, 2**16))
def test_select_direction_picks_the_brute_force_best(n_layers, n_pos, seed):
    g = torch.Generator().manual_seed(seed)
    cands = torch.randn(n_layers, n_pos, 6, generator=g)
    table = torch.rand(n_layers, n_pos, generator=g)
    choice = select_direction(cands, lambda d, layer, pos: float(table[layer, pos]),
                              max_layer_fraction=1.0)
    assert isinstance(choice, DirectionChoice)
    best = divmod(int(table.argmin()), n_pos)
    assert (choice.layer, choice.position) == best
    torch.testing.assert_close(choice.raw, cands[best])
    torch.testing.assert_close(choice.direction, cands[best] / cands[best].norm())


@pytest.mark.parametrize("call", [
    lambda: head_component(-1, 0),
    lambda: head_component(0, -2),
    lambda: placebo_directions(0, 4, torch.Generator()),
    lambda: select_direction(torch.zeros(3), lambda d, layer, pos: 0.0),
])
def test_malformed_input_is_a_one_line_input_error(call):
    with pytest.raises(InputError) as caught:
        call()
    assert "\n" not in str(caught.value)
