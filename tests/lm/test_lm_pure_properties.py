"""Issue 38's property tests for trustlab.lm's model-free functions (distributions, directions,
rates, content parts, site names): each agrees with a brute-force formula or round-trips, and
malformed input is a one-line InputError. (The model-bound half of lm's API is still pending in
tests/test_substrate_contracts.py.)"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError
from trustlab.lm import (
    Rate,
    binomial_rate,
    content_text,
    cosine_similarity_matrix,
    diff_in_means,
    fisher_rao,
    kl_divergence,
    normalise_content,
    normalize,
    site_name,
    total_variation,
    user_message,
)
from trustlab.stats import clopper_pearson

SOME = settings(max_examples=40, deadline=None, derandomize=True)
dists = st.tuples(st.integers(2, 6), st.integers(0, 2**16)).map(
    lambda t: torch.as_tensor(np.random.default_rng(t[1]).dirichlet(np.ones(t[0]), 2)))


@SOME
@given(dists)
def test_divergences_match_their_formulas(pq):
    p, q = pq[0], pq[1]
    kl = float((p * (p / q).log()).sum())
    tv = float((p - q).abs().sum() / 2)
    fr = float(2 * torch.arccos((p * q).sqrt().sum().clamp(max=1.0)))
    assert float(kl_divergence(p, q)) == pytest.approx(kl, rel=1e-9, abs=1e-12)
    assert float(kl_divergence(p.log(), q.log(), log=True)) == pytest.approx(kl, rel=1e-6,
                                                                               abs=1e-9)
    assert float(total_variation(p, q)) == pytest.approx(tv) == float(total_variation(q, p))
    assert float(fisher_rao(p, q)) == pytest.approx(fr, abs=1e-6)
    assert 0 <= tv <= 1 and 0 <= float(fisher_rao(p, q)) <= math.pi + 1e-9
    assert float(kl_divergence(p, p)) == pytest.approx(0, abs=1e-12)
    assert float(total_variation(p, p)) == 0


@SOME
@given(st.integers(1, 5), st.integers(1, 5), st.integers(2, 6), st.integers(0, 2**16))
def test_directions_match_brute_force(n_a, n_b, d, seed):
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(n_a, d, generator=g), torch.randn(n_b, d, generator=g)
    torch.testing.assert_close(diff_in_means(a, b), a.mean(0) - b.mean(0))
    u = normalize(a)
    torch.testing.assert_close(u.norm(dim=-1), torch.ones(n_a))
    cos = cosine_similarity_matrix(a, b)
    want = torch.tensor([[float(x @ y / (x.norm() * y.norm())) for y in b] for x in a])
    torch.testing.assert_close(cos, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(cosine_similarity_matrix(a).diagonal(), torch.ones(n_a))


@SOME
@given(st.lists(st.booleans(), min_size=1, max_size=30), st.sampled_from([0.01, 0.05, 0.2]))
def test_binomial_rate_is_clopper_pearson(flags, alpha):
    r = binomial_rate(flags, alpha)
    lo, hi = clopper_pearson(sum(flags), len(flags), alpha)
    assert isinstance(r, Rate) and (r.k, r.n, r.alpha) == (sum(flags), len(flags), alpha)
    assert (r.lower, r.upper) == (lo, hi) and r.lower <= r.rate <= r.upper
    assert binomial_rate(np.array(flags), alpha) == r == binomial_rate([int(f) for f in flags],
                                                                       alpha)


@SOME
@given(st.text(min_size=1, max_size=20).filter(str.strip), st.integers(0, 40))
def test_text_content_round_trips_and_sites_are_named_by_layer(text, layer):
    msg = user_message(text)
    assert msg == {"role": "user", "content": text}
    assert normalise_content(text) == text and content_text(text) == text
    parts = [{"type": "text", "text": text}, {"type": "text", "text": "tail"}]
    assert content_text(normalise_content(parts)) == f"{text} tail"
    assert site_name(layer, "resid_post") == f"blocks.{layer}.resid_post"
    assert site_name(np.int64(layer), "mlp_out") == f"blocks.{layer}.mlp_out"


P = torch.tensor([0.5, 0.5])


@pytest.mark.parametrize(("call", "match"), [
    (lambda: kl_divergence(P, torch.tensor([0.2, 0.3, 0.5])), "same shape"),
    (lambda: kl_divergence(torch.tensor([math.nan, 1.0]), P), "finite"),
    (lambda: total_variation(torch.tensor([2.0, 2.0]), P), "sum to 1"),
    (lambda: fisher_rao(torch.tensor([-0.5, 1.5]), P), "non-negative"),
    (lambda: cosine_similarity_matrix(torch.eye(2), torch.eye(3)), "widths"),
    (lambda: normalize(torch.zeros(3)), "zero vector"),
    (lambda: diff_in_means(torch.ones(0, 2), torch.zeros(4, 2)), "non-empty"),
    (lambda: binomial_rate([]), "at least one"),
    (lambda: binomial_rate([0.5, 0.0]), "True/False"),
    (lambda: binomial_rate([math.nan]), "True/False"),
    (lambda: binomial_rate("yes"), "list of True/False"),
    (lambda: binomial_rate(None), "list of True/False"),
    (lambda: site_name(-1, "resid_post"), "layer"),
    (lambda: site_name(1.5, "resid_post"), "layer"),
    (lambda: site_name(1, "resid"), "site kind"),
    (lambda: normalise_content(None), "content"),
])
def test_malformed_input_is_a_one_line_input_error(call, match):
    with pytest.raises(InputError, match=match) as caught:
        call()
    assert "\n" not in str(caught.value)
