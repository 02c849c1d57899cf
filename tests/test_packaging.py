"""The wheel owns exactly one import name, ``driftdesk``, and works installed on its own.

The wheel is built by pip from this checkout (isolated build, as a user's ``pip install .``)
and installed, not editable, into a fresh venv that borrows only the third-party packages of
the test environment; commands run from a folder outside the checkout, so nothing of the source
tree is on ``sys.path``.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "analysis" / "fixtures" / "generic_results.jsonl"


def build_wheel(out: Path) -> Path:
    """The wheel of this checkout, built by pip (isolated build, as ``pip install .``)."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (built,) = out.glob("driftdesk-*.whl")
    return built


def session_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built once per test session: under xdist the first worker to ask builds it
    (the others wait on a lock) into a folder named by the run's id, beside every worker's
    temp dir, and the packaging and plain-install tests all use that one."""
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run_id is None:  # no xdist: one process, one module fixture each
        return build_wheel(tmp_path_factory.mktemp("wheel"))
    shared = tmp_path_factory.getbasetemp().parent / f"wheel-{run_id}"
    shared.mkdir(exist_ok=True)
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = sorted(shared.glob("driftdesk-*.whl"))
        return built[0] if built else build_wheel(shared)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_wheel(tmp_path_factory)


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel; its dependencies come from the test venv's purelib,
    added as a plain path entry (its .pth files, such as our editable finder, are not run)."""
    target = tmp_path_factory.mktemp("venv") / "v"
    venv.EnvBuilder(with_pip=False).create(target)
    python = target / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deps = [p for p in sys.path if p.endswith("site-packages")] or [
        sysconfig.get_paths()["purelib"]
    ]
    Path(site, "test-deps.pth").write_text("\n".join(deps) + "\n")
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(python), "install"),
            "--no-deps",
            "--no-index",
            "--quiet",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return target


def _run(venv_dir: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["HOME"] = str(cwd)
    return subprocess.run(
        [str(venv_dir / "bin" / argv[0]), *argv[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_wheel_has_one_top_level_name(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"driftdesk"}
    for folder in ("cli", "providers", "reruns", "analysis", "tui"):
        assert f"driftdesk/{folder}/__init__.py" in names
    assert "driftdesk/reruns/suites/basic.jsonl" in names
    assert "driftdesk/tui/app.tcss" in names
    with zipfile.ZipFile(wheel) as archive:
        (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")] or [None]
        if top_level:
            assert archive.read(top_level).decode().split() == ["driftdesk"]


def test_the_installed_wheel_runs_on_its_own(installed: Path, tmp_path: Path) -> None:
    where = _run(installed, tmp_path, "python", "-c", "import driftdesk; print(driftdesk.__file__)")
    assert where.returncode == 0, where.stderr
    assert str(installed) in where.stdout and str(ROOT) not in where.stdout

    for argv in (("driftdesk", "--help"), ("driftdesk", "sandbox", "--help")):
        result = _run(installed, tmp_path, *argv)
        assert result.returncode == 0, result.stderr
        assert "usage: driftdesk" in result.stdout

    imported = _run(installed, tmp_path, "driftdesk", "import", str(FIXTURE), "--format", "jsonl")
    assert imported.returncode == 0, imported.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    report = _run(installed, tmp_path, "driftdesk", "report", str(run_dir))
    assert report.returncode == 0, report.stderr
    assert "gsm-001" in report.stdout and "consistency gap" in report.stdout


def test_the_installed_wheel_writes_the_page(installed: Path, tmp_path: Path) -> None:
    """``report --format html``: the page's skeleton, style and script are package data."""
    imported = _run(installed, tmp_path, "driftdesk", "import", str(FIXTURE), "--format", "jsonl")
    assert imported.returncode == 0, imported.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    out = tmp_path / "page.html"
    made = _run(installed, tmp_path, "driftdesk", "report", str(run_dir), "--format", "html",
                "--out", str(out))  # fmt: skip
    assert made.returncode == 0, made.stderr
    page = out.read_text(encoding="utf-8")
    assert 'id="driftdesk-data"' in page and "gsm-001" in page
    assert "driftdesk-ready" in page and "Content-Security-Policy" in page  # script, CSP


@pytest.mark.parametrize("bare", ["analysis", "providers", "reruns", "tui", "cli"])
def test_no_bare_top_level_package_is_installed(installed: Path, tmp_path: Path, bare: str) -> None:
    result = _run(installed, tmp_path, "python", "-c", f"import {bare}")
    assert result.returncode != 0
    assert f"No module named '{bare}'" in result.stderr


def test_package_resources_are_found_installed(installed: Path, tmp_path: Path) -> None:
    probe = (
        "from importlib import resources\n"
        "from driftdesk.reruns.suites import builtin_suites\n"
        "print(sorted(builtin_suites()))\n"
        "print(resources.files('driftdesk.tui').joinpath('app.tcss').is_file())\n"
        "import driftdesk.tui.app as app, pathlib\n"
        "print(pathlib.Path(app.__file__).with_name(app.DriftdeskApp.CSS_PATH).is_file())\n"
    )
    result = _run(installed, tmp_path, "python", "-c", probe)
    assert result.returncode == 0, result.stderr
    suites, tcss, css_path = result.stdout.split("\n")[:3]
    assert "basic" in suites
    assert tcss == "True" and css_path == "True"


def test_the_sdist_holds_everything_the_wheel_does(wheel: Path, tmp_path: Path) -> None:
    # `python -m build` makes the sdist, then the wheel from the unpacked sdist: a file the
    # sdist forgot would be missing from that second wheel.
    result = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (from_sdist,) = tmp_path.glob("driftdesk-*.whl")

    def files(path: Path) -> set[str]:
        with zipfile.ZipFile(path) as archive:
            return {n for n in archive.namelist() if ".dist-info/" not in n}

    assert files(from_sdist) == files(wheel)
