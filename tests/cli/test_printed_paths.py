"""Every path the CLI prints is shown like other untrusted text: a run dir under a folder whose
name holds ESC, BEL, an OSC 52 (clipboard write) sequence, a C1 control character and a raw
byte that is no UTF-8 never reaches the terminal as control bytes — through ``run``,
``resume``, ``report``, ``compare``, ``tasks``, ``trend``, ``explain``, ``import``, ``cache``
and their error lines, each the real CLI in a subprocess."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from driftdesk.terminal import printable

# ESC (a screen clear), BEL, OSC 52 (set the clipboard), C1 CSI as a character (UTF-8 c2 9b),
# and the raw byte 0x9b (no UTF-8: a path's byte read back as the surrogate \udc9b).
HOSTILE = "out\x1b[2J\x07\x1b]52;c;cHduZWQ=\x07\x9b31m\udc9bend"
SHOWN = "out\\x1b[2J\\x07\\x1b]52;c;cHduZWQ=\\x07\\x9b31m\\x9bend"
# The same without the raw byte, for the commands that read runs with DuckDB: it cannot open
# a path that is no UTF-8 at all (its error is no control sequence either; not this test's).
HOSTILE_TEXT = HOSTILE.replace("\udc9b", "")
SHOWN_TEXT = SHOWN.replace("\\x9bend", "end")
# Any C0 control but newline and tab, DEL, any C1: as characters of the decoded output.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def assert_inert(data: bytes, what: str) -> str:
    """``data`` is UTF-8 (no raw byte such as 0x9b) holding no control character."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AssertionError(f"{what}: a raw byte that is no UTF-8 was printed: {exc}") from None
    found = _CONTROL.search(text)
    assert found is None, f"{what}: raw {found.group()!r} printed in {text!r}"
    return text


def driftdesk(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """The real CLI; its stdout and stderr checked inert, returned decoded."""
    done = subprocess.run(
        [sys.executable, "-m", "driftdesk", *args], capture_output=True, timeout=300, cwd=cwd
    )
    what = " ".join(printable(a) for a in args[:2])
    return (
        done.returncode,
        assert_inert(done.stdout, f"{what} stdout"),
        assert_inert(done.stderr, f"{what} stderr"),
    )


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    folder = tmp_path / HOSTILE
    folder.mkdir()
    return folder


@pytest.fixture
def hostile_text(tmp_path: Path) -> Path:
    folder = tmp_path / HOSTILE_TEXT
    folder.mkdir()
    return folder


@pytest.fixture
def sandbox(home: object) -> Iterator[SandboxServer]:
    with SandboxServer(seed=3) as server:
        ProfileStore().save(
            Profile(
                name="sim", protocol="openai", base_url=server.base_url, model=SIM_MODEL,
                no_key=True,
            )
        )  # fmt: skip
        yield server


def _run_dirs(out: Path) -> set[Path]:
    return {p for p in out.iterdir() if (p / "manifest.json").is_file()} if out.exists() else set()


def _run(out: Path, shown: str = SHOWN) -> Path:
    before = _run_dirs(out)
    code, stdout, stderr = driftdesk(
        "run", "--profile", "sim", "--suite", "basic", "--repeat", "2", "--concurrency", "8",
        "--no-probe", "--out", str(out),
    )  # fmt: skip
    assert code == 0, stderr
    assert stdout.startswith("completed: ") and shown in stdout.splitlines()[0], stdout
    assert shown in stdout.split("next:", 1)[1], stdout
    (run_dir,) = _run_dirs(out) - before
    return run_dir


def test_run_and_resume_print_the_run_dir_escaped(sandbox: SandboxServer, hostile: Path) -> None:
    run_dir = _run(hostile / "runs")
    # Take the last rows away: resume runs them and prints its completed:/next: lines.
    attempts = run_dir / "attempts.jsonl"
    lines = attempts.read_bytes().splitlines(keepends=True)
    attempts.write_bytes(b"".join(lines[:-3]))
    code, stdout, stderr = driftdesk("resume", str(run_dir))
    assert code == 0, stderr
    assert stdout.startswith("completed: ") and SHOWN in stdout, stdout
    assert "next:" in stdout and f"{SHOWN}" in stdout.split("next:", 1)[1]
    code, stdout, _ = driftdesk("resume", str(run_dir))  # nothing left: it says so, and next:
    assert code == 0 and "nothing to resume" in stdout and SHOWN in stdout
    # A second run beside it: its next: names the run before it to compare with.
    _run(hostile / "runs")


def test_analysis_commands_print_paths_escaped(sandbox: SandboxServer, hostile_text: Path) -> None:
    run_dir = _run(hostile_text / "runs", SHOWN_TEXT)
    other = hostile_text / "runs" / "copy"
    shutil.copytree(run_dir, other)
    code, stdout, stderr = driftdesk("report", str(run_dir))
    assert code == 0, stderr
    code, _, stderr = driftdesk(
        "report", str(run_dir), "--format", "parquet", "--out", str(hostile_text / "r.parquet")
    )
    assert code == 0 and SHOWN_TEXT in stderr, stderr  # "wrote <path>"
    code, stdout, stderr = driftdesk("compare", str(run_dir), str(other))
    assert code == 0, stderr
    code, stdout, stderr = driftdesk("compare", str(run_dir), str(other), "--format", "json")
    assert code == 0, stderr
    assert json.loads(stdout)  # still JSON, the path's characters escaped the JSON way
    code, stdout, stderr = driftdesk("tasks", str(run_dir), "--failed")
    assert code == 0, stderr
    code, stdout, stderr = driftdesk("trend", str(hostile_text / "runs"))
    assert code in (0, 2), stderr
    code, stdout, stderr = driftdesk("cache", "info", str(run_dir))
    assert code == 0 and SHOWN_TEXT in stdout, stdout + stderr
    code, stdout, stderr = driftdesk("cache", "clear", str(run_dir))
    assert code == 0, stderr
    task = json.loads((run_dir / "attempts.jsonl").read_text().splitlines()[0])["task_id"]
    code, stdout, stderr = driftdesk("explain", str(run_dir), task)
    assert code in (0, 1), stderr
    # Error lines name the path they could not use.
    missing = hostile_text / "missing"
    for args in (
        ("report", str(missing)),
        ("resume", str(missing)),
        ("compare", str(missing), str(run_dir)),
        ("explain", str(missing), "t"),
        ("cache", "info", str(missing)),
        ("trend", str(missing)),
        ("tasks", str(missing), "--failed"),
    ):
        code, stdout, stderr = driftdesk(*args)
        assert code != 0 and SHOWN_TEXT in stderr, (args, stderr)


def test_import_prints_paths_escaped(home: object, hostile_text: Path) -> None:
    source = hostile_text / "rows.jsonl"
    source.write_text(
        "".join(
            json.dumps({"task_id": f"t{n % 3}", "success": n % 2 == 0}) + "\n" for n in range(6)
        )
    )
    out = hostile_text / "imported"
    code, stdout, stderr = driftdesk("import", str(source), "--out", str(out))
    assert code == 0, stderr
    assert stdout.count(SHOWN_TEXT) >= 2, stdout  # into <run dir>; reads its rows from <source>
    (run_dir,) = out.iterdir()
    moved = hostile_text / "moved.jsonl"
    source.rename(moved)
    code, stdout, stderr = driftdesk("import", str(moved), "--relink", str(run_dir))
    assert code == 0 and stdout.count(SHOWN_TEXT) >= 2, stdout + stderr
    code, stdout, stderr = driftdesk("import", str(moved), "--out", str(out))
    assert code == 2 and SHOWN_TEXT in stderr, stderr  # imported before, as <run dir>
    bad = hostile_text / "bad.jsonl"
    bad.write_text('{"task_id": "a", "success": "maybe"}\n{"task_id": "b", "success": true}\n')
    code, stdout, stderr = driftdesk("import", str(bad), "--out", str(out), "--copy")
    assert code == 0 and SHOWN_TEXT in stderr, stderr  # warning: <path>: line 1 ...
    code, stdout, stderr = driftdesk("import", str(hostile_text / "none.jsonl"), "--out", str(out))
    assert code == 2 and SHOWN_TEXT in stderr, stderr


def test_a_run_that_cannot_start_names_its_folder_escaped(
    sandbox: SandboxServer, hostile: Path
) -> None:
    blocker = hostile / "a-file"
    blocker.write_text("not a folder")
    code, _, stderr = driftdesk(
        "run", "--profile", "sim", "--suite", "basic", "--repeat", "1", "--no-probe",
        "--out", str(blocker / "runs"),
    )  # fmt: skip
    assert code == 2 and SHOWN in stderr, stderr
    suite = hostile / "suite.jsonl"
    suite.write_text('{"id": "x"\n')
    code, _, stderr = driftdesk(
        "run", "--profile", "sim", "--suite", str(suite), "--no-probe", "--out", str(hostile)
    )
    assert code == 2 and SHOWN in stderr, stderr


def test_printable_shows_a_raw_byte_of_a_path_as_its_escape() -> None:
    assert printable("a\udc9bb") == "a\\x9bb"
    assert printable("a\ud800b") == "a\\ud800b"
    assert printable(HOSTILE) == SHOWN


def test_switch_history_status_and_restore_print_config_paths_escaped(
    home: object, hostile_text: Path
) -> None:
    # (A path that is no UTF-8 is refused earlier there: the switch history is JSON text.)
    ProfileStore().save(
        Profile(
            name="sim", protocol="openai", base_url="http://127.0.0.1:9/v1", model=SIM_MODEL,
            no_key=True,
        )
    )  # fmt: skip
    env_file = str(hostile_text / ".env")
    code, stdout, stderr = driftdesk("switch", "sim", "--target", "env", "--env-file", env_file)
    assert code == 0, stderr
    assert stdout.count(SHOWN_TEXT) >= 2, stdout  # the diff's header, "wrote <path>"
    for args in (("history",), ("status",)):
        code, stdout, stderr = driftdesk(*args)
        assert code == 0 and SHOWN_TEXT in stdout, (args, stdout, stderr)
    code, stdout, stderr = driftdesk("restore", "env", "--env-file", env_file, "--yes")
    assert code == 0 and SHOWN_TEXT in stdout, stdout + stderr
