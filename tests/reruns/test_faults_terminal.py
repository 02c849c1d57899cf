"""Task ids with terminal escape sequences (``\\e]0;PWNED…\\e[2J``) in every terminal output of
the CLI: ``report``, ``compare``, ``tasks`` on a terminal, and the run's progress notes."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from driftdesk.reruns.events import RunStarted
from driftdesk.reruns.progress import TextProgress
from driftdesk.terminal import printable

HOSTILE = "t\x1b]0;PWNED\x07\x1b[2J\x9b31m\u202eend"
SHOWN = "t\\x1b]0;PWNED\\x07\\x1b[2J\\x9b31m\\u202eend"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def _run_dir(tmp_path: Path, run_id: str = "r1") -> Path:
    run_dir = tmp_path / "runs" / run_id
    run_dir.mkdir(parents=True)
    manifest = {"run_id": run_id, "repeat": 2, "tasks": [HOSTILE, "ok"], "status": "completed",
                "model": "m", "profile": "p", "started_at": "2026-01-01T00:00:00Z"}  # fmt: skip
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    rows = []
    hostile = ["pass", "fail"] if run_id == "r1" else ["fail", "fail"]
    for task, outcomes in ((HOSTILE, hostile), ("ok", ["pass", "pass"])):
        for attempt, outcome in enumerate(outcomes):
            rows.append(
                {
                    "run_id": run_id,
                    "task_id": task,
                    "scenario_id": None,
                    "attempt": attempt,
                    "outcome": outcome,
                    "success": outcome == "pass",
                    "score": 1.0 if outcome == "pass" else 0.0,
                    "error_code": None,
                    "error_message": None,
                    "retries": 0,
                    "calls": 1,
                    "prompt_tokens": 1,
                    "completion_tokens": 1,
                    "total_tokens": 2,
                    "latency_ms": 10.0,
                    "started_at": "2026-01-01T00:00:00Z",
                    "ended_at": "2026-01-01T00:00:01Z",
                    "model": "m",
                    "base_url": "http://127.0.0.1:1/v1",
                }
            )
    (run_dir / "attempts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run_dir


def _cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "driftdesk", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_report_and_compare_print_hostile_task_ids_escaped(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    other = _run_dir(tmp_path, "r2")
    for output in (_cli("report", str(run_dir)), _cli("compare", str(run_dir), str(other))):
        assert not any(ch in output for ch in RAW), output
    assert SHOWN in _cli("report", str(run_dir))
    assert SHOWN in _cli("compare", str(run_dir), str(other))  # it changed: it is listed


def test_tasks_escapes_on_a_terminal_and_quotes_reversibly_in_a_pipe(tmp_path: Path) -> None:
    from driftdesk.taskids import quote, unquote

    run_dir = _run_dir(tmp_path)
    piped = _cli("tasks", str(run_dir), "--volatile")
    # Data for --tasks: one line per id, no raw control character, and the exact id back.
    assert piped == quote(HOSTILE) + "\n" and not any(ch in piped for ch in RAW)
    assert unquote(piped.rstrip("\n")) == HOSTILE
    leader, follower = pty.openpty()
    done = subprocess.run(
        [sys.executable, "-m", "driftdesk", "tasks", str(run_dir), "--volatile"],
        stdout=follower, stderr=subprocess.PIPE, timeout=120,
    )  # fmt: skip
    os.close(follower)
    shown = os.read(leader, 65536).decode()
    os.close(leader)
    assert done.returncode == 0
    assert SHOWN in shown and not any(ch in shown for ch in RAW)


def test_run_progress_notes_are_escaped() -> None:
    out = io.StringIO()
    progress = TextProgress(stream=out)
    progress.on_event(
        RunStarted(
            run_id="r", run_dir=Path("/tmp/r"),
            spec={"notices": [f"attempts.jsonl line 3 of task {HOSTILE}"]},
            task_ids=(HOSTILE,), repeat=1, total_attempts=1,
        )
    )  # fmt: skip
    assert SHOWN in out.getvalue() and not any(ch in out.getvalue() for ch in RAW)


def test_printable_keeps_plain_text_and_newlines() -> None:
    assert printable("plain — text\n\tnext") == "plain — text\n\tnext"
    assert printable("a\nb", keep_newlines=False) == "a\\nb"
