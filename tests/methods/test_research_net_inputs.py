"""research-net's public API on bad input: a correct result or an InputError, nothing else.

First the reproductions of issue 38 (each gave a plausible wrong answer or a traceback), then
property-based tests (hypothesis) that feed malformed inputs to every name in
``research_net.__all__``: NaN/inf, wrong dtype or shape, empty, out of range, wrong node
labels. Each call must either return a result that satisfies the function's contract or raise
``InputError`` — never another exception, a NaN-filled result, or a result computed on a
silently reinterpreted input.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.core.errors import InputError, SolverError
from trustlab.methods.research_net import (
    FIXED_TOPOLOGIES,
    Budget,
    FixedResult,
    NetworkOptimiser,
    NetworkStats,
    OptimiserSettings,
    ResearchModel,
    Restart,
    Roles,
    Support,
    attention_graph,
    best_fixed,
    bimodality_coefficient,
    budget_from_graph,
    fixed_topology,
    gini,
    katz_bonacich,
    katz_bonacich_iterative,
    network_stats,
    null_network_stats,
    project_budget,
    softmax_budget,
    split_roles,
)

from ..malformed import ARRAY, CHOICE, INT, POSITIVE, RATE, Case, malformed_input_tests, scalar

D = torch.float64
PROPERTY = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def attempt(fn, *args, **kwargs):
    """The result, or None when the call raised InputError (any other exception fails)."""
    try:
        return fn(*args, **kwargs)
    except InputError as exc:
        assert str(exc) and "\n" not in str(exc)
        return None


# -- issue 38 reproductions --------------------------------------------------------------------
def test_infeasible_warm_start_is_rejected_not_returned_as_the_optimum():
    support = Support.complete(4)
    bad = Budget(support, torch.ones(4, dtype=D), torch.ones(12, dtype=D))  # rows sum to 4
    with pytest.raises(InputError, match="r_i \\+ sum_j w_ij = 1"):
        NetworkOptimiser(ResearchModel(), n_steps=5).fit(support, {"bad": bad})
    with pytest.raises(InputError, match="shares >= 0"):
        negative = Budget(support, torch.full((4,), 1.5, dtype=D), torch.full((12,), -0.5 / 3,
                                                                                dtype=D))
        ResearchModel().total_knowledge(negative)


def test_budget_from_graph_needs_the_supports_agents():
    with pytest.raises(InputError, match="one node per agent of the support \\(10\\)"):
        budget_from_graph(nx.cycle_graph(6), 0.3, Support.complete(10))
    with pytest.raises(InputError, match=r"agent indices 0\.\.5"):
        budget_from_graph(nx.cycle_graph(8), 0.3, Support.complete(6))
    sparse = Support.from_graph(nx.path_graph(5))
    with pytest.raises(InputError, match="support does not hold"):
        budget_from_graph(nx.complete_graph(5), 0.3, sparse)
    b = budget_from_graph(nx.cycle_graph(6), 0.3, Support.complete(6))
    assert b.r.shape == (6,) and b.w.shape == (30,)


def test_a_budget_with_the_wrong_number_of_shares_is_never_scored():
    support = Support.complete(5)
    with pytest.raises(InputError, match="'w' parameter of Budget must have last dimension E=20"):
        Budget(support, torch.full((5,), 0.2, dtype=D), torch.zeros(19, dtype=D))
    with pytest.raises(InputError, match="'r' parameter of Budget must have last dimension n=5"):
        Budget(support, torch.full((4,), 0.2, dtype=D), torch.zeros(20, dtype=D))
    with pytest.raises(InputError, match="batch dimensions"):
        Budget(support, torch.ones(2, 5, dtype=D), torch.zeros(3, 20, dtype=D))


@pytest.mark.parametrize("name", ["alpha", "eps", "lam", "delta", "idea_affinity"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), "0.5", None])
def test_research_model_rejects_non_finite_and_non_numeric_parameters(name, value):
    with pytest.raises(InputError, match=f"'{name}' parameter of ResearchModel"):
        ResearchModel(**{name: value})


def test_no_restarts_and_no_warm_start_is_an_input_error():
    support = Support.complete(4)
    with pytest.raises(InputError, match="nothing to start from"):
        NetworkOptimiser(ResearchModel(), n_restarts=0).fit(support)
    ring = budget_from_graph(nx.cycle_graph(4), 0.5, support)
    opt = NetworkOptimiser(ResearchModel(), n_restarts=0, n_steps=5).fit(support, {"ring": ring})
    assert opt.objective_ >= float(ResearchModel().total_knowledge(ring))
    with pytest.raises(InputError, match="no option 'n_restart'"):
        NetworkOptimiser(ResearchModel(), n_restart=3).fit(support)
    with pytest.raises(InputError, match="'n_steps' parameter of NetworkOptimiser must be an "
                                         "integer"):
        NetworkOptimiser(ResearchModel(), n_steps=2.5).fit(support)


def test_support_from_named_or_one_based_nodes_says_how_to_relabel():
    named = nx.Graph([("alice", "bob"), ("bob", "carol")])
    with pytest.raises(InputError, match="convert_node_labels_to_integers"):
        Support.from_graph(named)
    one_based = nx.Graph([(1, 2), (2, 3)])
    with pytest.raises(InputError, match="node\\(s\\) 3"):
        Support.from_graph(one_based)
    relabelled = Support.from_graph(nx.convert_node_labels_to_integers(named, ordering="sorted"))
    assert relabelled.n == 3 and relabelled.n_edges == 4
    with pytest.raises(InputError, match="integer agent indices"):
        Support(3, torch.tensor([0.0, 1.0]), torch.tensor([1, 2]))


# -- properties ----------------------------------------------------------------------------------
junk = st.one_of(st.none(), st.text(max_size=3), st.booleans(), st.just(float("nan")),
                 st.just(float("inf")), st.just(-float("inf")), st.lists(st.integers(), max_size=2))
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                    st.integers(-5, 50), junk)


@PROPERTY
@given(st.dictionaries(st.sampled_from(["formulation", "alpha", "eps", "lam", "delta", "n_ideas",
                                        "idea_affinity", "steps", "idea_seed", "aggregation",
                                        "solver"]),
                       st.one_of(numbers, st.sampled_from(["one_hop", "diffusion", "coverage",
                                                           "log", "dense", "iterative"])),
                       max_size=4))
def test_research_model_is_valid_or_refused(kwargs):
    model = attempt(ResearchModel, **kwargs)
    if model is None:
        return
    assert 0 < model.alpha <= 1 and model.eps >= 0 and model.lam > 0 and model.delta >= 0
    assert isinstance(model.n_ideas, int) and model.n_ideas >= 1
    assert isinstance(model.steps, int) and model.steps >= 1 and model.idea_affinity > 0
    assert all(math.isfinite(v) for v in (model.alpha, model.eps, model.lam, model.delta))
    if model.formulation == "diffusion":
        assert model.delta * model.lam < 1


@PROPERTY
@given(st.one_of(st.integers(-2, 7), numbers),
       st.lists(st.integers(-2, 8), max_size=6), st.lists(st.integers(-2, 8), max_size=6))
def test_support_is_valid_or_refused(n, src, dst):
    s = attempt(Support, n, torch.tensor(src, dtype=torch.int64),
                torch.tensor(dst, dtype=torch.int64))
    if s is None:
        return
    pairs = list(zip(s.src.tolist(), s.dst.tolist(), strict=True))
    assert len(set(pairs)) == len(pairs) and all(a != b for a, b in pairs)
    assert all(0 <= a < s.n and 0 <= b < s.n for a, b in pairs)


def _budget_values(draw_shape, fill):
    return torch.full(draw_shape, fill, dtype=D)


@PROPERTY
@given(st.integers(2, 5), st.integers(-1, 1), st.integers(-1, 1),
       st.sampled_from([0.0, 0.1, -0.1, float("nan"), float("inf"), 1.0]),
       st.sampled_from(["one_hop", "diffusion", "coverage"]))
def test_budgets_are_scored_only_when_they_are_budgets(n, dr, dw, fill, formulation):
    support = Support.complete(n)
    r = torch.full((n + dr,), 1.0 - fill * (n - 1), dtype=D)
    w = torch.full((support.n_edges + dw,), fill, dtype=D)
    budget = attempt(Budget, support, r, w)
    if budget is None:
        return
    assert budget.r.shape == (n,) and budget.w.shape == (support.n_edges,)
    model = ResearchModel(formulation=formulation, n_ideas=4)
    k = attempt(model.knowledge, budget)
    if k is None:  # infeasible
        assert float(budget.r.min()) < 0 or float(budget.w.min()) < 0 or \
            not torch.allclose(budget.row_sums(), torch.ones(n, dtype=D), atol=1e-6)
        return
    assert k.shape == (n,) and bool(torch.isfinite(k).all()) and bool((k >= 0).all())


@PROPERTY
@given(st.integers(1, 5), st.integers(-1, 1),
       st.sampled_from([0.0, 3.0, -40.0, 800.0, float("nan"), float("inf")]),
       st.sampled_from(["softmax", "project"]))
def test_parametrisations_land_on_the_simplex_or_refuse(n, dn, value, kind):
    support = Support.complete(n)
    x_self = torch.full((n + dn,), value, dtype=D)
    x_edge = torch.linspace(-1.0, 1.0, support.n_edges, dtype=D)
    fn = softmax_budget if kind == "softmax" else project_budget
    b = attempt(fn, x_self, x_edge, support)
    if b is None:
        return
    assert dn == 0 and math.isfinite(value)
    assert torch.allclose(b.row_sums(), torch.ones(n, dtype=D), atol=1e-12)
    assert bool((b.r >= 0).all()) and bool((b.w >= 0).all())


node_labels = st.sampled_from(["zero", "one", "str", "shuffled"])


def _graph(kind: str, n: int) -> nx.Graph:
    g = nx.cycle_graph(n) if n >= 3 else nx.path_graph(n)
    if kind == "one":
        return nx.relabel_nodes(g, {i: i + 1 for i in g})
    if kind == "str":
        return nx.relabel_nodes(g, {i: f"agent{i}" for i in g})
    if kind == "shuffled":
        h = nx.Graph()
        h.add_nodes_from(reversed(range(n)))
        h.add_edges_from(g.edges())
        return h
    return g


@PROPERTY
@given(node_labels, st.integers(1, 6), st.integers(1, 6), st.one_of(st.floats(-0.5, 1.5),
                                                                    numbers))
def test_budget_from_graph_is_feasible_and_sized_or_refused(kind, n_graph, n_support, r0):
    support = Support.complete(n_support)
    b = attempt(budget_from_graph, _graph(kind, n_graph), r0, support)
    if b is None:
        return
    assert n_graph == n_support and kind in ("zero", "shuffled")
    assert b.r.shape == (n_support,) and b.w.shape == (support.n_edges,)
    assert torch.allclose(b.row_sums(), torch.ones(n_support, dtype=D), atol=1e-12)
    assert bool(((b.r == r0) | (b.r == 1.0)).all())


arrays = st.one_of(
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), max_size=8),
    st.lists(st.floats(0, 1), min_size=0, max_size=8),
    st.lists(st.lists(st.floats(0, 1), min_size=2, max_size=2), max_size=3),
    junk,
)


@PROPERTY
@given(arrays)
def test_summaries_of_arrays_are_finite_or_refused(x):
    g = attempt(gini, x)
    if g is not None:
        assert 0.0 <= g < 1.0
    bc = attempt(bimodality_coefficient, x)
    if bc is not None:
        assert math.isnan(bc) or bc > 0  # nan is documented: fewer than 4 values or no spread
        assert len(x) < 4 or np.ptp(np.asarray(x, float)) <= 1e-12 or math.isfinite(bc)
    roles = attempt(split_roles, x)
    if roles is not None:
        assert isinstance(roles, Roles)
        everyone = np.sort(np.concatenate([roles.researchers, roles.learners]))
        assert np.array_equal(everyone, np.arange(len(x)))


@PROPERTY
@given(st.one_of(st.sampled_from([*FIXED_TOPOLOGIES, "random", "Ring", ""]), junk),
       st.one_of(st.integers(-1, 12), numbers), st.one_of(st.integers(-1, 40), junk))
def test_fixed_topology_is_a_graph_on_n_agents_or_refused(name, n, n_edges):
    g = attempt(fixed_topology, name, n, np.random.default_rng(0), n_edges=n_edges)
    if g is None:
        return
    assert sorted(g.nodes) == list(range(n))
    b = best_fixed(ResearchModel(), g, str(name), Support.complete(n), np.linspace(0, 1, 3))
    assert isinstance(b, FixedResult)
    assert math.isfinite(b.objective) and 0 <= b.r0 <= 1


@PROPERTY
@given(st.integers(1, 4), st.integers(-1, 1),
       st.sampled_from([0.0, 0.2, -0.1, 5.0, float("nan")]),
       st.sampled_from([0.1, 1.0, float("nan"), float("inf")]))
def test_katz_solvers_are_finite_or_refused(n, dn, delta, a_value):
    support = Support.complete(n)
    u = torch.ones(n + dn, dtype=D)
    a = torch.full((n, n), a_value, dtype=D).fill_diagonal_(0.0)
    x = attempt(katz_bonacich, a, delta, u)
    if x is not None:
        assert x.shape == (n,) and bool(torch.isfinite(x).all())
        assert n == 1 or delta * a_value * (n - 1) < 1  # rho(A): constant off-diagonal matrix
    try:  # a fixed-point iteration that does not converge is a SolverError, said in one line
        y = attempt(katz_bonacich_iterative, torch.full((support.n_edges,), a_value, dtype=D),
                    support, delta, u, max_iter=2000)
    except SolverError:
        assert delta * a_value * (n - 1) >= 1
        return
    if y is not None:
        assert bool(torch.isfinite(y).all())
        if x is not None:
            assert torch.allclose(x, y, rtol=1e-9)


@PROPERTY
@given(node_labels, st.integers(3, 6), st.sampled_from([0.5, 0.0, -1.0, float("nan"), "1"]))
def test_network_statistics_need_indexed_weighted_graphs(kind, n, weight):
    g = _graph(kind, n)
    nx.set_edge_attributes(g, weight, "weight")
    nx.set_edge_attributes(g, weight, "distance")
    stats = attempt(network_stats, g)
    null = attempt(null_network_stats, g, 2, np.random.default_rng(0))
    if stats is None or null is None:
        return
    assert kind in ("zero", "shuffled") and weight == 0.5
    assert isinstance(stats, NetworkStats) and isinstance(null, NetworkStats)
    assert stats.n_edges == g.number_of_edges() == null.n_edges
    assert math.isfinite(stats.path_weighted) and 0 <= stats.clustering <= 1


@PROPERTY
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), junk))
def test_attention_graph_threshold_is_checked(threshold):
    support = Support.complete(3)
    b = softmax_budget(torch.zeros(3, dtype=D), torch.zeros(6, dtype=D), support)
    g = attempt(attention_graph, b, threshold)
    if g is not None:
        assert threshold > 0 and sorted(g.nodes) == [0, 1, 2]


@settings(max_examples=20, deadline=None)
@given(st.dictionaries(st.sampled_from(["parametrisation", "n_steps", "lr", "schedule",
                                        "n_restarts", "init_scale", "record_every", "seed",
                                        "threads", "learning_rate"]),
                       st.one_of(st.integers(-1, 3), numbers, st.sampled_from(
                           ["softmax", "simplex", "cosine", "constant"])), max_size=3))
def test_optimiser_runs_or_refuses(options):
    opt = attempt(lambda: NetworkOptimiser(ResearchModel(), OptimiserSettings(n_steps=3),
                                           **options).fit(Support.complete(3)))
    if opt is None:
        return
    assert opt.settings_.n_restarts >= 1 and math.isfinite(opt.objective_)
    assert all(isinstance(r, Restart) and r.best_objective >= r.initial_objective
               for r in opt.restarts_)
    assert torch.allclose(opt.budget_.row_sums(), torch.ones(3, dtype=D), atol=1e-12)


# -- the shared corruptions (tests/malformed.py): every array and scalar argument -----------------
R_SHARES = np.array([0.95, 0.9, 0.05, 0.1, 0.02, 0.0, 1.0])
K_VALUES = np.array([1.0, 2.0, 0.5, 3.0, 0.0, 1.5])
RING = nx.cycle_graph(5)


def _np(out):
    return out.detach().numpy() if isinstance(out, torch.Tensor) else out


def _budget_arrays(b):
    return {"r": _np(b.r), "w": _np(b.w)}


CASES = [
    Case("gini", lambda x: gini(x), {"x": K_VALUES}, {"x": ARRAY}),
    Case("bimodality_coefficient", lambda x: bimodality_coefficient(x), {"x": K_VALUES},
         {"x": ARRAY}),
    Case("split_roles", lambda r: split_roles(r).researchers, {"r": R_SHARES}, {"r": ARRAY}),
    Case("budget_from_graph", lambda r0: _budget_arrays(budget_from_graph(RING, r0,
                                                                          Support.complete(5))),
         {"r0": 0.4}, {"r0": RATE}),
    Case("best_fixed", lambda r0_grid: best_fixed(ResearchModel(), RING, "ring",
                                                  Support.complete(5), r0_grid).objective,
         {"r0_grid": np.linspace(0, 1, 5)}, {"r0_grid": ARRAY}),
    Case("softmax_budget", lambda theta_self, theta_edge: _budget_arrays(
        softmax_budget(theta_self, theta_edge, Support.complete(3))),
         {"theta_self": np.zeros(3), "theta_edge": np.linspace(-1, 1, 6)},
         {"theta_self": ARRAY, "theta_edge": ARRAY}),
    Case("project_budget", lambda x_self, x_edge: _budget_arrays(
        project_budget(x_self, x_edge, Support.complete(3))),
         {"x_self": np.full(3, 0.5), "x_edge": np.linspace(0, 1, 6)},
         {"x_self": ARRAY, "x_edge": ARRAY}),
    Case("katz_bonacich", lambda a_dense, u, delta: _np(katz_bonacich(a_dense, delta, u)),
         {"a_dense": np.full((3, 3), 0.2) - np.eye(3) * 0.2, "u": np.ones(3), "delta": 0.5},
         {"a_dense": ARRAY, "u": ARRAY, "delta": scalar("delta", -0.1, 10.0)}),
    Case("ResearchModel", lambda lam, alpha, n_ideas: ResearchModel(
        lam=lam, alpha=alpha, n_ideas=n_ideas), {"lam": 4.0, "alpha": 0.5, "n_ideas": 8},
         {"lam": POSITIVE, "alpha": scalar("alpha", 0.0, -0.1, 1.5), "n_ideas": INT(lo=1)}),
    Case("NetworkOptimiser.fit", lambda n_steps, lr: NetworkOptimiser(
        ResearchModel(), n_steps=n_steps, lr=lr, n_restarts=1).fit(Support.complete(3)).objective_,
         {"n_steps": 3, "lr": 0.1}, {"n_steps": INT(lo=1), "lr": POSITIVE}),
    Case("attention_graph", lambda threshold: sorted(attention_graph(softmax_budget(
        torch.zeros(3, dtype=D), torch.zeros(6, dtype=D), Support.complete(3)), threshold).edges),
         {"threshold": 0.01}, {"threshold": POSITIVE}),
    Case("fixed_topology", lambda name, n: sorted(fixed_topology(
        name, n, np.random.default_rng(0)).edges), {"name": "ring", "n": 6},
         {"name": CHOICE(), "n": INT(lo=3)}),
]
test_every_corruption_once, test_malformed_input = malformed_input_tests(CASES)
