"""How the code is layered, proved on the code itself.

- The cores and the CLI parser never import Textual (the harlequin rule): a subprocess proves it.
- Imports run top-down (faces -> cores -> ground) and form no circle, lazy imports included.
- Everything is imported as ``driftdesk.*``: no module uses a bare top-level ``providers``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORES = ["driftdesk.providers", "driftdesk.reruns", "driftdesk.analysis", "driftdesk"]
FOLDERS = ("providers", "reruns", "analysis", "tui", "cli")

# What each layer may import of ours. "ground" is driftdesk's own modules (atomic files, JSONL,
# paths, redaction, run-dir layout); faces may import cores; cores never import a face.
ALLOWED = {
    "ground": {"ground"},
    "providers": {"ground", "providers"},
    "analysis": {"ground", "analysis"},
    "reruns": {"ground", "providers", "analysis", "reruns"},
    "tui": {"ground", "providers", "analysis", "reruns", "tui"},
    "cli": {"ground", "providers", "analysis", "reruns", "tui", "cli"},
    "__main__": {"cli"},
}


def _textual_loaded_after(code: str) -> bool:
    probe = textwrap.dedent(code) + "\nimport sys\nprint('textual' in sys.modules)\n"
    out = (
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        .stdout.strip()
        .splitlines()
    )
    return out[-1] == "True"


@pytest.mark.parametrize("package", CORES)
def test_core_packages_do_not_import_textual(package: str) -> None:
    code = f"""
    import importlib, pkgutil
    pkg = importlib.import_module({package!r})
    for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        if not mod.name.endswith("__main__"):  # running it would start the app
            importlib.import_module(mod.name)
    """
    assert not _textual_loaded_after(code), f"{package} (or a submodule) imports textual"


def test_cli_parser_and_help_do_not_import_textual_or_openai() -> None:
    code = """
    import contextlib, io, sys
    from driftdesk.cli.main import build_parser
    parser = build_parser()
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(["--help"])
        except SystemExit:
            pass
    assert "openai" not in sys.modules, "the CLI parser imported openai"
    """
    assert not _textual_loaded_after(code)


def test_the_probe_can_fail() -> None:
    # Guards the guard: importing the TUI must show up as textual being loaded.
    assert _textual_loaded_after("import driftdesk.tui.app")


def project_modules() -> dict[str, Path]:
    """Every module of the installed ``driftdesk`` package, by its import name, from the
    package-dir mapping in pyproject.toml (the one place that says where each folder goes)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    modules: dict[str, Path] = {}
    for package, folder in setuptools["package-dir"].items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    return modules


def never_run(tree: ast.AST) -> set[int]:
    """The ids of the nodes inside ``if TYPE_CHECKING:`` blocks (only type checkers read them)."""
    return {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Our modules ``path`` imports, at the top or inside functions; ``if TYPE_CHECKING`` blocks
    do not run and do not count."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = never_run(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found.update(name for name in names if name in known)
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] not in ALLOWED:
        return "ground"
    return parts[1]


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    known = set(modules)
    return {name: imports_of(path, known) - {name} for name, path in modules.items()}


def test_imports_run_top_down() -> None:
    upward = [
        f"{module} ({layer(module)}) imports {target} ({layer(target)})"
        for module, targets in import_graph().items()
        for target in sorted(targets)
        if layer(target) not in ALLOWED[layer(module)]
    ]
    assert not upward, "\n".join(upward)


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_no_import_circles() -> None:
    assert find_cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c"]]


def test_nothing_imports_a_bare_top_level_folder() -> None:
    # From the repository root the folders are importable as top-level packages too; a stray
    # `from providers import x` would pass here and fail in an installed wheel.
    sources = [
        path
        for path in ROOT.rglob("*.py")
        if not {".venv", ".venv-test", ".tools", ".git", "build"}
        & set(path.relative_to(ROOT).parts)
    ]
    bare = []
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            bare += [
                f"{path.relative_to(ROOT)}:{node.lineno}: {name}"
                for name in names
                if name.split(".")[0] in FOLDERS
            ]
    assert not bare, "\n".join(bare)
