"""mypy over the package as it installs: ``python tests/typecheck.py [MYPY ARGS]``.

The top-level folders install as ``driftdesk.*`` through setuptools' package-dir mapping, which
mypy cannot follow from the source tree (nor through the editable install's import hook). So
this lays the installed layout out as symlinks in a temporary folder, from the mapping in
pyproject.toml, and runs mypy there with the project's configuration.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def link_installed_layout(into: Path) -> Path:
    """``into/driftdesk`` with every mapped folder linked where it installs."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    package = into / "driftdesk"
    package.mkdir()
    for entry in (ROOT / mapping["driftdesk"]).iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in mapping.items():
        if name != "driftdesk":
            (package / name.removeprefix("driftdesk.")).symlink_to(ROOT / folder)
    return package


def run_mypy(*extra: str) -> subprocess.CompletedProcess[str]:
    mypy = Path(sys.executable).with_name("mypy")
    command = str(mypy) if mypy.exists() else shutil.which("mypy") or "mypy"
    with tempfile.TemporaryDirectory(prefix="driftdesk-typecheck-") as tmp:
        link_installed_layout(Path(tmp))
        return subprocess.run(
            [command, "--config-file", str(ROOT / "pyproject.toml"), "-p", "driftdesk", *extra],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=600,
        )


if __name__ == "__main__":
    result = run_mypy(*sys.argv[1:])
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    raise SystemExit(result.returncode)
