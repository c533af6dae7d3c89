"""How ``make test`` packs the acceptance session onto two pytest-xdist workers (``--by-cost``).

xdist's ``--dist loadscope`` hands each worker whole modules (so a module's fixtures, such as
the Ray cluster of tests/core/test_scale_ray.py, exist on one worker only), in collection order.
Acceptance modules cost from seconds to minutes, and three of them start by building an
organism that others need (chat-s, tool-s): in collection order a worker could sit on the
build lock while the other builds, and the last long module could start when the other worker
is already done. :class:`CostScheduling` keeps loadscope's grouping and changes the order:

1. the scopes that build a shared organism first (so its users find it built: nothing waits on
   a build lock), longest first;
2. then every other scope, longest first (LPT packing), by :data:`COSTS` -- seconds measured on
   CI's machine (serial acceptance run, setup + call of each test; organism builds included
   where the scope triggers them); a scope not in the table counts :data:`UNKNOWN_S`.

:data:`SPLIT` lists modules whose tests are scheduled one by one (they share no module-scoped
fixture, and one of them is a 250 s build while the others need other organisms).
Costs only order the work: a wrong or missing figure costs time, never a result.
"""

from __future__ import annotations

from typing import Any

#: Seconds per scope on CI's machine (last CI, serial: setup + call; collection excluded).
COSTS: dict[str, float] = {
    "tests/methods/test_toolcall_acceptance.py": 293,  # builds tool-s (230 s)
    "tests/finetune/test_attack.py": 213,  # builds chat-s (186 s)
    "tests/methods/test_lisa_suites.py": 256,
    "tests/organisms/test_slow_organisms.py::test_the_larger_family_members_meet_the_chat_s"
    "_targets[chat-m-480]": 252,  # builds chat-m
    "tests/core/test_scale_ray.py": 125,
    "tests/methods/test_gmu_acceptance.py": 75,
    "tests/methods/test_rheology.py": 53,
    "tests/methods/test_flowreach_acceptance.py": 35,
    "tests/methods/test_asymmetry_acceptance.py": 34,
    "tests/methods/test_arao_heldout.py": 166,
    "tests/methods/test_arao_acceptance.py": 30,
    "tests/methods/test_isc_acceptance.py": 27,
    "tests/methods/test_geobias_acceptance.py": 23,
    "tests/methods/test_jailbound_acceptance.py": 12,
    "tests/methods/test_mars_acceptance.py": 11,
    "tests/methods/test_gradshield_acceptance.py": 11,
    "tests/methods/test_jaguar_2pc.py": 8,
    "tests/methods/test_asymmetry_smol_run.py": 3,  # session 47, measured locally (chat-xs built)
    # read cards of organisms built before them: well under a second each
    "tests/organisms/test_slow_organisms.py::test_chat_s_meets_the_issue_targets": 1,
    "tests/organisms/test_slow_organisms.py::test_tool_s_decides_tool_calls_on_heldout_templates":
        1,
    "tests/organisms/test_vlm.py": 1,
    "tests/methods/test_gmu_smol.py": 1,  # skips unless smol-chat is built
}

#: Scopes that build an organism other scopes use: dispatched before everything else.
BUILDERS: frozenset[str] = frozenset({
    "tests/methods/test_toolcall_acceptance.py",  # tool-s
    "tests/finetune/test_attack.py",  # chat-s
})

#: Modules scheduled test by test instead of as one unit.
SPLIT: frozenset[str] = frozenset({"tests/organisms/test_slow_organisms.py"})

#: The cost assumed for a scope COSTS does not list (a new acceptance test: a few minutes at most).
UNKNOWN_S = 60.0


def scope_of(nodeid: str) -> str:
    """The scheduling unit of a test: its module (loadscope), or itself in a SPLIT module."""
    module = nodeid.split("::", 1)[0]
    return nodeid if module in SPLIT else nodeid.rsplit("::", 1)[0]


def rank(scope: str, position: int) -> tuple[int, float, int]:
    """Sort key: builders first, then longest first, then collection order."""
    return (0 if scope in BUILDERS else 1, -COSTS.get(scope, UNKNOWN_S), position)


def make_scheduler(config: Any, log: Any) -> Any:
    """An xdist LoadScopeScheduling that dispatches scopes in :func:`rank` order."""
    from xdist.scheduler import LoadScopeScheduling

    class CostScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            # move the best-ranked waiting scope to the front; the base class pops the front
            scopes = list(self.workqueue)
            best = min(range(len(scopes)), key=lambda i: rank(scopes[i], i))
            self.workqueue.move_to_end(scopes[best], last=False)
            super()._assign_work_unit(node)

    return CostScheduling(config, log)
