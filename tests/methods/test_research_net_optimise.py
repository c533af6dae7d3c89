"""research-net: the optimiser finds the optimum, beats fixed topologies, keeps budgets exact,
and reproduces the Law of the Few qualitatively; analysis helpers and the experiment wiring."""

from __future__ import annotations

import itertools
import json

import networkx as nx
import numpy as np
import pytest
import torch

from trustlab.core import run_experiment
from trustlab.core.errors import NotFittedError
from trustlab.methods.research_net import (
    FIXED_TOPOLOGIES,
    Budget,
    NetworkOptimiser,
    ResearchModel,
    Support,
    attention_graph,
    best_fixed,
    bimodality_coefficient,
    fixed_topology,
    network_stats,
    null_network_stats,
    split_roles,
)

D = torch.float64


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _simplex_grid(steps: int) -> np.ndarray:
    pts = [(a, b, steps - a - b) for a in range(steps + 1) for b in range(steps + 1 - a)]
    return np.array(pts, dtype=float) / steps


@pytest.mark.parametrize("formulation", ["one_hop", "diffusion"])
def test_three_agent_optimum_matches_grid_search(formulation):
    """n = 3: each agent's row (r_i, w_ij, w_ik) lies on a 2-simplex; brute force over a grid of
    all three rows, then compare with gradient ascent."""
    model = ResearchModel(formulation=formulation, lam=3.0, delta=0.25)
    support = Support.complete(3)  # edges in order (0,1) (0,2) (1,0) (1,2) (2,0) (2,1)
    grid = torch.as_tensor(_simplex_grid(12), dtype=D)  # 91 points per agent
    idx = torch.tensor(list(itertools.product(range(len(grid)), repeat=3)))
    rows = grid[idx]  # (B, 3 agents, 3 shares: own, first other, second other)
    r = rows[:, :, 0]
    w = rows[:, :, 1:].reshape(len(idx), 6)
    values = torch.cat([model.total_knowledge(Budget(support, r[s], w[s]))
                        for s in torch.split(torch.arange(len(idx)), 200_000)])
    grid_best = float(values.max())
    opt = NetworkOptimiser(model, n_steps=400, lr=0.1, n_restarts=4, seed=0).fit(support)
    assert opt.objective_ >= grid_best - 1e-9  # the grid is a subset of the feasible set
    assert opt.objective_ <= grid_best * 1.02  # and fine enough to come within 2 %
    best_r = np.sort(r[int(values.argmax())].numpy())
    np.testing.assert_allclose(np.sort(opt.budget_.r.numpy()), best_r, atol=1 / 12)


@pytest.mark.parametrize("formulation", ["one_hop", "diffusion", "coverage"])
@pytest.mark.parametrize("parametrisation", ["softmax", "simplex"])
def test_optimiser_never_worse_than_best_fixed_and_improves_its_start(formulation, parametrisation):
    n = 10
    model = ResearchModel(formulation=formulation, n_ideas=12, idea_affinity=0.1)
    support = Support.complete(n)
    rng = np.random.default_rng(0)
    grid = np.linspace(0, 1, 11)
    fixed = [best_fixed(model, fixed_topology(t, n, rng), t, support, grid) for t in FIXED_TOPOLOGIES]
    best = max(fixed, key=lambda f: f.objective)
    opt = NetworkOptimiser(model, parametrisation=parametrisation, n_steps=60, n_restarts=1,
                           seed=1).fit(support, {best.name: best.budget})
    assert all(opt.objective_ >= f.objective - 1e-9 for f in fixed)
    for restart in opt.restarts_:
        assert restart.best_objective >= restart.initial_objective
    assert opt.restarts_[0].best_objective > opt.restarts_[0].initial_objective  # random start
    assert torch.allclose(opt.budget_.row_sums(), torch.ones(n, dtype=D), atol=1e-13, rtol=0)
    assert torch.all(opt.budget_.r >= 0) and torch.all(opt.budget_.w >= 0)
    assert opt.objective_ == pytest.approx(float(model.total_knowledge(opt.budget_)), rel=1e-12)


def test_projected_ascent_keeps_budgets_exact_and_reaches_exact_zeros():
    model = ResearchModel(formulation="one_hop")
    opt = NetworkOptimiser(model, parametrisation="simplex", n_steps=150, lr=0.1,
                           n_restarts=1).fit(Support.complete(12))
    b = opt.budget_
    assert torch.allclose(b.row_sums(), torch.ones(12, dtype=D), atol=1e-14, rtol=0)
    assert int((b.w == 0).sum()) > b.support.n_edges // 4  # links are cut exactly
    assert opt.objective_ > 1.5 * opt.restarts_[0].initial_objective


def test_law_of_the_few_a_few_researchers_many_better_off_learners():
    """Galeotti-Goyal / Bramoulle-Kranton, qualitatively: the optimum has few specialised
    researchers and many learners who end up knowing more."""
    n = 20
    model = ResearchModel(formulation="one_hop")
    opt = NetworkOptimiser(model, n_steps=250, n_restarts=1, seed=0).fit(Support.complete(n))
    roles = split_roles(opt.budget_.r.numpy())
    k = opt.knowledge_.numpy()
    assert roles.is_split
    assert 1 <= roles.researchers.size <= n // 3
    assert opt.budget_.r[roles.researchers].min() > 0.8
    assert k[roles.learners].min() > k[roles.researchers].max()


def test_unfitted_optimiser_names_the_missing_step():
    with pytest.raises(NotFittedError, match="fit"):
        _ = NetworkOptimiser(ResearchModel()).curve_


# -- analysis ----------------------------------------------------------------------------------
def test_split_roles_and_bimodality():
    rng = np.random.default_rng(1)
    r = np.concatenate([rng.uniform(0.9, 1.0, 6), rng.uniform(0.0, 0.1, 18)])
    roles = split_roles(r)
    assert set(roles.researchers.tolist()) == set(range(6)) and roles.is_split
    assert bimodality_coefficient(r) > 5 / 9
    assert bimodality_coefficient(rng.normal(size=2000)) < 5 / 9
    assert not split_roles(np.full(6, 0.4)).is_split


def test_network_stats_paths_equal_networkx_and_null_is_density_matched():
    rng = np.random.default_rng(0)
    graph = nx.connected_watts_strogatz_graph(30, 4, 0.2, seed=1)
    for a, b in graph.edges():
        s = float(rng.uniform(0.1, 1.0))
        graph[a][b].update(weight=s, distance=1 / s)
    stats = network_stats(graph)
    pairs = [d for s, row in nx.all_pairs_dijkstra_path_length(graph, weight="distance")
             for t, d in row.items() if s != t]
    assert stats.path_weighted == pytest.approx(np.mean(pairs), rel=1e-12)
    assert stats.path_hops == pytest.approx(nx.average_shortest_path_length(graph), rel=1e-12)
    assert stats.clustering_weighted == pytest.approx(nx.average_clustering(graph, weight="weight"))
    null = null_network_stats(graph, 3, rng)
    assert null.n_edges == graph.number_of_edges()


def test_attention_graph_symmetrises_and_thresholds():
    support = Support.complete(3)
    w = torch.tensor([0.5, 0.0, 0.2, 0.0, 0.004, 0.003], dtype=D)  # (0,1) (0,2) (1,0) (1,2) (2,0) (2,1)
    r = 1 - torch.zeros(3, dtype=D).index_add(0, support.src, w)
    g = attention_graph(Budget(support, r, w), threshold=0.01)
    assert set(g.edges()) == {(0, 1)} and g[0][1]["weight"] == pytest.approx(0.7)


# -- experiment wiring ---------------------------------------------------------------------------
def test_experiment_runs_and_reports_the_four_findings(tmp_path):
    result = run_experiment(
        "research-net", quick=True, seed=3, out_dir=tmp_path,
        overrides={"sizes": [8], "n_steps": 40, "formulations": ["one_hop", "coverage"]},
    )
    data = json.loads(result.report_path.read_text())
    findings = data["tables"]["findings"]["rows"]
    assert len(findings) == 2 * 4
    assert data["headline"]["min_ratio_optimised_vs_best_fixed"] >= 1.0
    for name in ("optimised_networks", "learning_curves", "inequality", "roles"):
        assert (tmp_path / data["figures"][name]["path"]).is_file()
