"""Every third-party module driftdesk imports is declared by driftdesk itself.

A plain ``pip install driftdesk`` brings only the declared requirements; a module that only
arrives with another package (``httpx`` with openai 1.x, ``numpy`` with inspect-ai or Ray) works
in the test venv and fails for a user. So, read from the code and the installed metadata:

- an import at module level (run by merely importing driftdesk) must come from a base
  requirement;
- an import inside a function may also come from an extra (the feature that needs it);
- ``if TYPE_CHECKING:`` blocks never run and do not count.

Which distribution provides a module is asked of ``importlib.metadata.packages_distributions()``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from test_import_hygiene import ROOT, never_run, project_modules


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(requirements: list[str]) -> tuple[set[str], dict[str, set[str]]]:
    """(base requirement names, extra -> names) from ``Requires-Dist`` lines, markers of other
    platforms left out."""
    from packaging.requirements import Requirement

    base: set[str] = set()
    extras: dict[str, set[str]] = {}
    for line in requirements:
        req = Requirement(line)
        extra = next(iter(re.findall(r"extra\s*==\s*['\"]([^'\"]+)['\"]", str(req.marker))), None)
        if extra is not None:
            extras.setdefault(extra, set()).add(canonical(req.name))
        elif req.marker is None or req.marker.evaluate():
            base.add(canonical(req.name))
    return base, extras


def third_party_imports(path: Path) -> list[tuple[int, str, bool]]:
    """(line, top-level module, at module level?) of every import that runs."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = never_run(tree)
    in_function = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for inner in ast.walk(node)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top != "driftdesk":
                found.append((node.lineno, top, id(node) not in in_function))
    return found


def undeclared_imports(
    modules: dict[str, Path],
    base: set[str],
    extras: dict[str, set[str]],
    providers: dict[str, list[str]],
) -> list[str]:
    in_extras = set().union(*extras.values()) if extras else set()
    problems = []
    for path in modules.values():
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        for line, top, at_module_level in third_party_imports(path):
            dists = {canonical(d) for d in providers.get(top, [])}
            if not dists:
                problems.append(f"{where}:{line}: {top}: no installed distribution provides it")
            elif not dists & base and (at_module_level or not dists & in_extras):
                kind = "at module level" if at_module_level else "in a function"
                problems.append(
                    f"{where}:{line}: {top} ({', '.join(sorted(dists))}) is imported {kind} "
                    "but is not a declared requirement"
                    + ("" if at_module_level else " of driftdesk or of an extra")
                )
    return problems


def test_every_import_is_a_declared_requirement() -> None:
    base, extras = declared(importlib.metadata.requires("driftdesk") or [])
    providers = importlib.metadata.packages_distributions()
    problems = undeclared_imports(project_modules(), base, extras, providers)
    assert not problems, "\n".join(problems)


def test_the_installed_requirements_are_the_ones_in_pyproject() -> None:
    # The check above reads the installed metadata: it must not be a stale install.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    installed = importlib.metadata.requires("driftdesk") or []
    base = sorted(r.replace(" ", "") for r in installed if "extra ==" not in r)
    assert base == sorted(r.replace(" ", "").replace("'", '"') for r in project["dependencies"])


def test_the_check_finds_an_undeclared_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "import duckdb\n"
        "import yaml\n"  # not declared
        "if TYPE_CHECKING:\n"
        "    import numpy\n"  # never runs
        "def f():\n"
        "    import ray\n"  # an extra's, inside a function: fine
        "def g():\n"
        "    import torch\n"  # not even installed
    )
    providers = {"duckdb": ["duckdb"], "yaml": ["PyYAML"], "ray": ["ray"], "numpy": ["numpy"]}
    problems = undeclared_imports({"m": module}, {"duckdb"}, {"ray": {"ray"}}, providers)
    assert len(problems) == 2
    assert "m.py:3: yaml (pyyaml)" in problems[0]
    assert "m.py:9: torch: no installed distribution provides it" in problems[1]
    # An extra's module at module level would break a plain install.
    module.write_text("import ray\n")
    (problem,) = undeclared_imports({"m": module}, {"duckdb"}, {"ray": {"ray"}}, providers)
    assert "imported at module level" in problem
