"""Issue 38's contract for the substrates: every public function and class has property tests.

For each substrate package (and each module of ``trustlab.datasets``, whose ``__init__`` has no
``__all__``), every function or class named in ``__all__`` must appear in a test module of the
package's test folder that imports ``hypothesis`` -- the same rule
``test_method_has_property_tests_covering_its_public_api`` applies to the methods. Those modules
feed malformed input (tests/malformed.py) and check properties that fail if the function is wrong.

Packages not yet covered are listed in :data:`PENDING_SUBSTRATE_PROPERTY_TESTS` and xfail with the
missing names; a covered package (not in the dict) that gains an untested public name fails.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

#: package (relative to ``trustlab``) -> the folders under tests/ whose modules cover it.
SUBSTRATE_TEST_FOLDERS: dict[str, tuple[str, ...]] = {
    "core": ("core",),
    "stats": ("stats",),
    "embed": ("embed",),
    "detectors": ("detectors",),
    "sandbox": ("sandbox",),
    "vision": ("vision",),
    "organisms": ("organisms",),
    "finetune": ("finetune",),
    "lm": ("lm", "evaluation"),
}


def _dataset_modules() -> list[str]:
    import trustlab.datasets

    return [f"datasets.{m.name}" for m in pkgutil.iter_modules(trustlab.datasets.__path__)
            if not m.name.startswith("_")]


PACKAGES = [*SUBSTRATE_TEST_FOLDERS, *_dataset_modules()]

#: Packages whose property tests are not complete yet (issue 38), with what was missing when
#: this list was written; the test xfails for these with the names still missing.
PENDING_SUBSTRATE_PROPERTY_TESTS: dict[str, str] = {}


def _folders(package: str) -> tuple[str, ...]:
    return ("datasets",) if package.startswith("datasets.") else SUBSTRATE_TEST_FOLDERS[package]


def _hypothesis_modules(folders: tuple[str, ...]) -> list[Path]:
    found = []
    for folder in folders:
        for path in sorted((REPO_ROOT / "tests" / folder).glob("test_*.py")):
            text = path.read_text(encoding="utf-8")
            if re.search(r"^\s*(from|import) hypothesis\b", text, re.MULTILINE):
                found.append(path)
    return found


def public_callables(package: str) -> list[str]:
    """Functions and classes named in the package's ``__all__``."""
    module = importlib.import_module(f"trustlab.{package}")
    return [n for n in getattr(module, "__all__", [])
            if inspect.isfunction(getattr(module, n)) or inspect.isclass(getattr(module, n))]


def missing_property_tests(package: str) -> tuple[list[Path], list[str]]:
    files = _hypothesis_modules(_folders(package))
    text = "\n".join(p.read_text(encoding="utf-8") for p in files)
    return files, [n for n in public_callables(package)
                   if not re.search(rf"\b{re.escape(n)}\b", text)]


def test_pending_list_names_real_packages():
    assert set(PENDING_SUBSTRATE_PROPERTY_TESTS) <= set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_substrate_has_property_tests_covering_its_public_api(package):
    files, missing = missing_property_tests(package)
    where = "/".join(f"tests/{f}" for f in _folders(package))
    problem = (f"no test module in {where} imports hypothesis" if not files else
               f"{len(missing)} public name(s) of trustlab.{package} not named in the hypothesis "
               f"modules of {where}: {', '.join(missing)}" if missing else "")
    if problem and package in PENDING_SUBSTRATE_PROPERTY_TESTS:
        pytest.xfail(f"{package}: {problem} (issue 38, pending)")
    assert not problem, problem
