"""The cores and the CLI must never import Textual (the harlequin rule): a subprocess proves it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CORES = ["providers", "reruns", "analysis", "driftdesk"]


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


def test_cli_parser_and_help_do_not_import_textual() -> None:
    code = """
    import contextlib, io
    from driftdesk.cli import build_parser
    parser = build_parser()
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(["--help"])
        except SystemExit:
            pass
    """
    assert not _textual_loaded_after(code)


def test_the_probe_can_fail() -> None:
    # Guards the guard: importing the TUI must show up as textual being loaded.
    assert _textual_loaded_after("import textual")
