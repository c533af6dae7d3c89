"""research-net: budgets on the simplex, closed forms vs simulation, and gradients."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch

from trustlab.core.errors import InputError
from trustlab.methods.research_net import (
    Budget,
    ResearchModel,
    Support,
    budget_from_graph,
    gini,
    katz_bonacich,
    katz_bonacich_iterative,
    project_budget,
    softmax_budget,
)

D = torch.float64


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _random_budget(n: int, seed: int, support: Support | None = None, scale: float = 1.0):
    support = support or Support.complete(n)
    g = torch.Generator().manual_seed(seed)
    return softmax_budget(
        scale * torch.randn(n, generator=g, dtype=D),
        scale * torch.randn(support.n_edges, generator=g, dtype=D),
        support,
    )


# -- budgets ---------------------------------------------------------------------------------
@pytest.mark.parametrize("support", [Support.complete(7), Support.random_sparse(30, 4, np.random.default_rng(1))])
def test_softmax_budget_is_exactly_on_the_simplex(support):
    b = _random_budget(support.n, 0, support, scale=5.0)
    assert torch.all(b.r > 0) and torch.all(b.w > 0)
    assert torch.allclose(b.row_sums(), torch.ones(support.n, dtype=D), atol=1e-14, rtol=0)


def _duchi_projection(v: np.ndarray) -> np.ndarray:
    """Reference sort-based Euclidean projection onto the simplex (Duchi et al. 2008)."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u)
    rho = np.nonzero(u * np.arange(1, v.size + 1) > (css - 1))[0][-1]
    theta = (css[rho] - 1) / (rho + 1.0)
    return np.maximum(v - theta, 0)


def test_projection_equals_sort_based_reference_and_is_idempotent():
    n = 6
    support = Support.complete(n)
    rng = np.random.default_rng(3)
    for _ in range(20):
        xs = torch.as_tensor(rng.normal(0, 2, n))
        xe = torch.as_tensor(rng.normal(0, 2, support.n_edges))
        b = project_budget(xs, xe, support)
        dense = b.dense_attention().numpy() + np.diag(b.r.numpy())
        raw = np.zeros((n, n))
        raw[support.src.numpy(), support.dst.numpy()] = xe.numpy()
        raw[np.arange(n), np.arange(n)] = xs.numpy()
        for i in range(n):
            np.testing.assert_allclose(dense[i], _duchi_projection(raw[i]), atol=1e-12)
        assert torch.allclose(b.row_sums(), torch.ones(n, dtype=D), atol=1e-14, rtol=0)
        again = project_budget(b.r, b.w, support)
        assert torch.allclose(again.r, b.r, atol=1e-14) and torch.allclose(again.w, b.w, atol=1e-14)


def test_budget_from_graph_splits_evenly_and_isolated_agents_research():
    graph = nx.star_graph(4)
    graph.add_node(5)
    b = budget_from_graph(graph, 0.3, Support.complete(6))
    assert torch.allclose(b.row_sums(), torch.ones(6, dtype=D), atol=1e-15)
    assert float(b.r[5]) == 1.0 and float(b.r[0]) == 0.3
    w = b.dense_attention()
    assert torch.allclose(w[0, 1:5], torch.full((4,), 0.7 / 4, dtype=D))
    assert float(w[1, 0]) == pytest.approx(0.7) and float(w[1, 2]) == 0.0


def test_support_rejects_self_loops_and_duplicates():
    with pytest.raises(InputError, match="self-loops"):
        Support(3, torch.tensor([0, 1]), torch.tensor([0, 2]))
    with pytest.raises(InputError, match="duplicate"):
        Support(3, torch.tensor([0, 0]), torch.tensor([1, 1]))


# -- ingredients -----------------------------------------------------------------------------
def test_discovery_and_absorption_shapes():
    m = ResearchModel()
    r = torch.linspace(0, 1, 101, dtype=D)
    f = m.own_discovery(r)
    assert float(f[0]) == 0.0 and float(f[-1]) == pytest.approx(1.0)
    assert torch.all(torch.diff(f) > 0) and torch.all(torch.diff(f, 2) < 0)  # increasing, concave
    phi = m.absorption(r)
    assert torch.all(phi <= torch.clamp(m.lam * r, max=1.0) + 1e-15)


def test_gini_known_values():
    assert gini(np.ones(5)) == pytest.approx(0.0)
    assert gini(np.array([0, 0, 0, 1.0])) == pytest.approx(0.75)
    assert gini(np.array([1.0, 3.0])) == pytest.approx(0.25)


def test_diffusion_needs_delta_lam_below_one():
    with pytest.raises(InputError, match="delta"):
        ResearchModel(formulation="diffusion", delta=0.3, lam=4.0)


# -- closed forms vs simulation ----------------------------------------------------------------
def test_bcz_equilibrium_by_best_response_equals_katz_bonacich_closed_form():
    """Ballester-Calvo-Armengol-Zenou: in the game u_i = a x_i - x_i^2/2 + delta sum_j g_ij x_i x_j
    the Nash equilibrium is x* = a (I - delta G)^{-1} 1; asynchronous best responses reach it."""
    rng = np.random.default_rng(0)
    n, a, delta = 15, 0.7, 0.08
    g = (rng.random((n, n)) < 0.3).astype(float)
    np.fill_diagonal(g, 0.0)
    assert delta * max(abs(np.linalg.eigvals(g))) < 1
    x = np.zeros(n)
    for _ in range(500):  # Gauss-Seidel best responses: x_i = a + delta sum_j g_ij x_j
        for i in range(n):
            x[i] = a + delta * g[i] @ x
    closed = katz_bonacich(torch.as_tensor(g), delta, torch.full((n,), a, dtype=D))
    np.testing.assert_allclose(x, closed.numpy(), rtol=1e-12)


@pytest.mark.parametrize("support", [Support.complete(12), Support.random_sparse(40, 5, np.random.default_rng(2))])
def test_diffusion_closed_form_equals_unrolled_message_passing_and_iterative_solver(support):
    dense = ResearchModel(formulation="diffusion", delta=0.24, lam=4.0, solver="dense")
    iterative = ResearchModel(formulation="diffusion", delta=0.24, lam=4.0, solver="iterative")
    b = _random_budget(support.n, 1, support, scale=2.0)
    k_dense = dense.knowledge(b)
    np.testing.assert_allclose(iterative.knowledge(b).numpy(), k_dense.numpy(), rtol=1e-11)
    traj = dense.simulate(b, 200)
    np.testing.assert_allclose(traj[-1].numpy(), k_dense.numpy(), rtol=1e-11)
    assert torch.all(torch.diff(traj, dim=0) >= -1e-15)  # knowledge only accumulates
    assert torch.allclose(traj[0], dense.own_discovery(b.r))


def test_diffusion_without_discount_is_one_hop():
    b = _random_budget(9, 4)
    one_hop = ResearchModel(formulation="one_hop").knowledge(b)
    diffusion = ResearchModel(formulation="diffusion", delta=0.0).knowledge(b)
    assert torch.allclose(one_hop, diffusion, rtol=1e-13)


def test_coverage_mean_field_equals_monte_carlo_on_a_tree():
    """On a directed tree the mean-field recursion is exact for the percolation process:
    each link i<-j is open with probability phi(w_ij), ideas travel along open links."""
    graph = nx.DiGraph([(1, 0), (2, 0), (3, 1), (4, 1), (5, 2)])  # i -> j: i attends to j
    n = 6
    support = Support.from_graph(graph, n)
    r = torch.tensor([1.0, 0.5, 0.6, 0.2, 0.3, 0.1], dtype=D)
    b = Budget(support, r, torch.ones(support.n_edges, dtype=D))
    row = b.row_sums()
    w = (1.0 - r)[support.src] / (row - r)[support.src]  # attention 1 - r_i over out-links
    b = Budget(support, r, w)
    model = ResearchModel(formulation="coverage", n_ideas=8, idea_affinity=0.6, steps=2, idea_seed=5)
    p = model.idea_trajectory(b, 2)[-1].numpy()  # (n, M)
    d = model.discovery_probabilities(b).numpy()
    a = model.absorption(b.w).numpy()
    rng = np.random.default_rng(0)
    draws = 40_000
    known = np.zeros_like(p)
    src, dst = support.src.numpy(), support.dst.numpy()
    for _ in range(4):
        disc = rng.random((draws, n, d.shape[1])) < d
        open_ = rng.random((draws, len(src), d.shape[1])) < a[:, None]
        state = disc.copy()
        for _t in range(2):
            new = disc.copy()
            for e, (i, j) in enumerate(zip(src, dst, strict=True)):
                new[:, i] |= open_[:, e] & state[:, j]
            state = new
        known += state.mean(0) / 4
    se = np.sqrt(p * (1 - p) / (4 * draws))
    assert np.all(np.abs(known - p) <= 5 * se + 1e-12)


def test_coverage_total_and_uncovered_are_different_quantities():
    """With one learning round (exact: own discoveries and direct learning are independent)
    nobody knows an idea more often than the network uncovers it; totals differ."""
    model = ResearchModel(formulation="coverage", n_ideas=16, idea_affinity=0.2, steps=1)
    b = _random_budget(10, 7)
    p = model.idea_trajectory(b, 1)[-1]
    d = model.discovery_probabilities(b)
    per_idea_uncovered = 1 - torch.prod(1 - d, dim=0)
    assert torch.all(p <= per_idea_uncovered + 1e-12)
    k, u = model.knowledge(b), model.uncovered(b)
    assert torch.all((k >= 0) & (k <= 1)) and float(k.max()) <= float(u) + 1e-12
    assert float(k.sum()) > float(u)  # per-agent knowledge counts shared ideas many times
    traj = model.simulate(b, 4)
    assert torch.all(torch.diff(traj, dim=0) >= -1e-14)


def test_coverage_mean_field_overcounts_on_loops_beyond_one_round():
    """Documented limit: with T > 1 on a dense loopy graph, echoes (i -> j -> i) are counted as
    new, so an agent may 'know' more than the network uncovered. Guard that the docs stay true."""
    model = ResearchModel(formulation="coverage", n_ideas=16, idea_affinity=0.2, steps=3)
    b = _random_budget(10, 7)
    assert float(model.knowledge(b).max()) > float(model.uncovered(b))


# -- gradients ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("formulation", "aggregation"),
    [("one_hop", "linear"), ("one_hop", "log"), ("diffusion", "linear"), ("coverage", "linear")],
)
def test_objective_gradient_matches_finite_differences(formulation, aggregation):
    support = Support.complete(4)
    model = ResearchModel(formulation=formulation, aggregation=aggregation, n_ideas=5, steps=2,
                          idea_affinity=0.5, eps=0.01)
    g = torch.Generator().manual_seed(0)
    ts = torch.randn(4, generator=g, dtype=D, requires_grad=True)
    te = torch.randn(support.n_edges, generator=g, dtype=D, requires_grad=True)

    def objective(a, b):
        return model.total_knowledge(softmax_budget(a, b, support))

    assert torch.autograd.gradcheck(objective, (ts, te), eps=1e-6, atol=1e-7, rtol=1e-5)


def test_hand_derived_katz_adjoint_matches_finite_differences_and_dense_autograd():
    support = Support.random_sparse(8, 3, np.random.default_rng(0))
    g = torch.Generator().manual_seed(1)
    a = (0.5 * torch.rand(support.n_edges, generator=g, dtype=D)).requires_grad_(True)
    u = torch.rand(8, generator=g, dtype=D).requires_grad_(True)
    weights = torch.rand(8, generator=g, dtype=D)

    def iterative(a_, u_):
        return (weights * katz_bonacich_iterative(a_, support, 0.4, u_)).sum()

    assert torch.autograd.gradcheck(iterative, (a, u), eps=1e-6, atol=1e-8)
    ga, gu = torch.autograd.grad(iterative(a, u), (a, u))
    dense_a = torch.zeros(8, 8, dtype=D)
    dense_a = dense_a.index_put((support.src, support.dst), a)
    ga2, gu2 = torch.autograd.grad((weights * katz_bonacich(dense_a, 0.4, u)).sum(), (a, u))
    assert torch.allclose(ga, ga2, rtol=1e-10) and torch.allclose(gu, gu2, rtol=1e-10)
