"""Architecture rule: a method never imports another method (shared code lives in substrates).

Walks every module under ``trustlab.methods`` with ``ast`` (module-level and function-level
imports alike, absolute and relative) and fails naming each import of another method package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import trustlab

METHODS = Path(trustlab.__file__).parent / "methods"


def _imports(path: Path, package: str) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    module = ".".join(path.relative_to(METHODS.parents[1]).with_suffix("").parts)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if path.name != "__init__.py":
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            out.append((node.lineno, name))
            out += [
                (node.lineno, f"{name}.{a.name}") for a in node.names if name == "trustlab.methods"
            ]
    return out


def _offences() -> list[str]:
    bad = []
    for pkg in sorted(p for p in METHODS.iterdir() if (p / "__init__.py").is_file()):
        for path in sorted(pkg.rglob("*.py")):
            for line, name in _imports(path, pkg.name):
                parts = name.split(".")
                if parts[:2] == ["trustlab", "methods"] and len(parts) > 2 and parts[2] != pkg.name:
                    bad.append(f"{path.relative_to(METHODS.parents[1])}:{line} imports {name}")
    return bad


def test_no_method_package_imports_another_method_package():
    assert _offences() == []


def test_the_walk_sees_relative_absolute_and_nested_imports(tmp_path, monkeypatch):
    """The checker itself can fail: plant offending imports in a fake method tree."""
    import sys

    fake = tmp_path / "trustlab" / "methods"
    (fake / "alpha").mkdir(parents=True)
    (fake / "beta").mkdir()
    for p in (fake.parent, fake, fake / "alpha", fake / "beta"):
        (p / "__init__.py").write_text("")
    (fake / "alpha" / "a.py").write_text(
        "from ..beta import x\n"
        "def f():\n    import trustlab.methods.beta.core\n"
        "from trustlab.methods import beta\n"
        "from trustlab.methods.alpha import ok\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "METHODS", fake)
    found = _offences()
    assert len(found) == 3, found
    assert all("beta" in f for f in found)
