"""Shared test fixtures: ../shared/data (absent on a user's clone) and the organisms.

``chat_xs`` is built once per test session into a temporary TRUSTLAB_HOME (set in the
environment while the session runs, so subprocesses such as the contract tests' CLI runs and
``trustlab.lm.load("organism:chat-xs")`` find the same build). ``TRUSTLAB_TEST_HOME=/path``
reuses organisms built there instead, for iterating on slow tests; ``make test`` points it at
one fresh mktemp home for both of its pytest sessions (the default suite, then acceptance), so a
CI run builds each organism once, from cold. Under pytest-xdist (``-n 2``) the workers share one
home beside their temporary directories, and the organisms' build lock
(``trustlab.organisms.registry.build``) makes one worker build while the other waits and reuses.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import pytest
from hypothesis import settings as hypothesis_settings

from trustlab.core import paths as core_paths

matplotlib.use("Agg")

# Property tests draw the same examples in every run (a CI run must not find a counterexample
# that the developer's run did not); a test's own @settings still overrides the other fields.
hypothesis_settings.register_profile("trustlab", derandomize=True, deadline=None)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "trustlab"))

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = core_paths.shared_data_dir()

# pytest-xdist workers share the machine's cores: torch threads per worker = cores // workers
# (set before any test imports torch; an explicit OMP_NUM_THREADS wins), so two workers on CI's
# two cores do not run four busy-waiting OpenMP threads. Inherited by the tests' subprocesses.
_XDIST_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
if _XDIST_WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _XDIST_WORKERS)))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--by-cost", action="store_true", default=False,
        help="with -n N --dist loadscope: dispatch organism-building modules first, then the "
             "longest first (tests/xdist_schedule.py; make test's acceptance session)")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if not config.getoption("by_cost") or config.getoption("dist", None) != "loadscope":
        return None
    from tests.xdist_schedule import make_scheduler

    return make_scheduler(config, log)


def shared_data(*parts: str) -> Path:
    """Path under ../shared/data, or skip the test (with the reason) when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real data not available here: {path} (it ships only beside CI's checkout)")
    return path


@pytest.fixture
def shared_data_dir():
    return shared_data


@dataclass(frozen=True)
class BuiltOrganism:
    """A built organism: its name, cache dir, card, and the loaded model and tokenizer."""

    name: str
    path: Path
    card: dict[str, Any]
    model: Any
    tokenizer: Any


@pytest.fixture(scope="session")
def organism_home(tmp_path_factory: pytest.TempPathFactory):
    """A fresh TRUSTLAB_HOME for the session (set in the environment while the session runs).

    ``TRUSTLAB_TEST_HOME=/path`` reuses organisms built there instead (for iterating on slow
    tests); by default every session builds fresh ones, so the tests check real builds. xdist
    workers of one session share a home (their basetemp's parent), built once under the lock.
    """
    reuse = os.environ.get("TRUSTLAB_TEST_HOME")
    if reuse:
        home = Path(reuse)
    elif os.environ.get("PYTEST_XDIST_WORKER"):
        home = tmp_path_factory.getbasetemp().parent / "trustlab_home"
        home.mkdir(exist_ok=True)
    else:
        home = tmp_path_factory.mktemp("trustlab_home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRUSTLAB_HOME", str(home))
        yield home


def _built(name: str, home: Path) -> BuiltOrganism:
    pytest.importorskip("torch", reason="organisms need trustlab[llm] (torch)")
    pytest.importorskip("transformers", reason="organisms need trustlab[llm] (transformers)")
    from trustlab.organisms import build, load, read_card

    path = build(name, home=home)
    model, tokenizer = load(name, home=home)
    return BuiltOrganism(name, path, read_card(name, home=home), model, tokenizer)


@pytest.fixture(scope="session")
def chat_xs(organism_home: Path) -> BuiltOrganism:
    """`chat-xs`, built once per session (under a minute of CPU)."""
    return _built("chat-xs", organism_home)


@pytest.fixture(scope="session")
def vlm_xs(organism_home: Path, chat_xs: BuiltOrganism) -> BuiltOrganism:
    """`vlm-xs` (on chat-xs), built once per session (about 80 CPU-s; mars's quick run)."""
    return _built("vlm-xs", organism_home)


@pytest.fixture(scope="session")
def chat_s(organism_home: Path) -> BuiltOrganism:
    """`chat-s`, built once per session (a few minutes of CPU; use from slow tests only)."""
    return _built("chat-s", organism_home)


@pytest.fixture(scope="session")
def tool_xs(organism_home: Path) -> BuiltOrganism:
    """`tool-xs`, the tool-caller of default tests, built once per session (under a minute)."""
    return _built("tool-xs", organism_home)


@pytest.fixture(scope="session")
def tool_s(organism_home: Path) -> BuiltOrganism:
    """`tool-s`, built once per session (a few minutes of CPU; use from slow tests only)."""
    return _built("tool-s", organism_home)


@pytest.fixture(scope="session")
def smol_chat(organism_home: Path) -> BuiltOrganism:
    """`smol-chat`, built once per session (tens of minutes of CPU; slow tests only)."""
    pytest.importorskip("peft", reason="smol-chat needs peft (trustlab[llm])")
    return _built("smol-chat", organism_home)

