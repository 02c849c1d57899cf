"""ruff (lint + format) and mypy over the whole project: style and types are part of the build."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from typecheck import run_mypy

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str) -> str:
    candidate = Path(sys.executable).with_name(name)
    found = str(candidate) if candidate.exists() else shutil.which(name)
    assert found, f"{name} is not installed (pip install -e '.[test]')"
    return found


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_lint_passes() -> None:
    result = _run(_tool("ruff"), "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_applied() -> None:
    result = _run(_tool("ruff"), "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_passes() -> None:
    _tool("mypy")
    result = run_mypy()
    assert result.returncode == 0, result.stdout + result.stderr
    # The package-dir layout is really seen: far more than driftdesk/'s own few files.
    checked = int(result.stdout.split(" in ")[-1].split()[0])
    assert checked > 50, result.stdout
