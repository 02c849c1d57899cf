"""A coding task's run dir as a real run leaves it: each attempt's recording of what a client
(Codex's ``exec_command`` tool over the Responses API) sent and got back, its calls.jsonl rows,
its attempts row, its check output and its workspace diff. A module of its own, so any test
file can import it whatever ``conftest`` pytest imported first."""

from __future__ import annotations

import json
from pathlib import Path

from driftdesk.rundir import CHECK_OUTPUT_SUFFIX, WORKSPACE_DIFF_SUFFIX, attempt_file
from tests.analysis.recording_fixtures import write_slot

TASK = "fix-add"
PROMPT = "In calc.py, add() multiplies. Make it add."
LOOK = "cat calc.py"
# The right and the wrong path differ in one sed: the backslash is the client's, sent once.
RIGHT_SED = "sed -i 's/a \\* b/a + b/' calc.py"
# The wrong path's second command: a script longer than six lines, and text that would be
# markup or a control sequence if it were not escaped.
WRONG_SCRIPT = "\n".join(
    [
        "python3 - <<'EOF'",
        "import re",
        "source = open('calc.py').read()",
        "# [bold]not markup[/bold] \x1b[31mnot red\x1b[0m",
        "fixed = re.sub(r'a \\* b', 'a - b', source)",
        "open('calc.py', 'w').write(fixed)",
        "print('rewrote', len(fixed), 'bytes')",
        "print('line eight')",
        "print('line nine: the last')",
        "EOF",
    ]
)
CHECK_RUN = "python3 -c 'import calc; print(calc.add(2, 3))'"


def _call(command: str, output: str) -> tuple[str, str, dict[str, str], str]:
    return ("call", "exec_command", {"cmd": command}, output)


PASSING = [
    _call(LOOK, "def add(a, b):\n    return a * b\n"),
    _call(RIGHT_SED, "Process exited with code 0\nOutput:\n"),
    _call(CHECK_RUN, "Process exited with code 0\nOutput:\n5\n"),
    ("answer", "add() now adds."),
]
FAILING = [
    _call(LOOK, "def add(a, b):\n    return a * b\n"),
    _call(WRONG_SCRIPT, "Process exited with code 0\nOutput:\nrewrote 33 bytes\n"),
    ("answer", "add() is fixed."),
]


def write_coding_run(runs_dir: Path, run_id: str = "codex-sandbox-20260301T100000Z") -> Path:
    """Attempts 0 and 2 pass (the right sed), 1 and 3 fail (a script that subtracts); every
    attempt keeps its check output and workspace diff."""
    run_dir = runs_dir / run_id
    run_dir.mkdir(parents=True)
    manifest = {
        "run_id": run_id,
        "profile": "sandbox",
        "model": "model-x",
        "suite": {"path": None, "name": "coding", "sha256": "0" * 64},
        "repeat": 4,
        "agent": "codex",
        "tasks": [TASK],
        "started_at": "2026-03-01T10:00:00Z",
        "ended_at": "2026-03-01T10:05:00Z",
        "status": "completed",
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    for attempt in range(4):
        passed = attempt % 2 == 0
        write_slot(
            run_dir,
            TASK,
            attempt,
            PASSING if passed else FAILING,
            outcome="pass" if passed else "fail",
            protocol="responses",
            prompt=PROMPT,
        )
        check = attempt_file(run_dir, TASK, attempt, CHECK_OUTPUT_SUFFIX)
        check.write_text(
            "$ python3 -c 'import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)'\n"
            + ("" if passed else "add(2, 3) gave -1\n")
            + f"check exit code {0 if passed else 1}\n"
        )
        new = "a + b" if passed else "a - b"
        attempt_file(run_dir, TASK, attempt, WORKSPACE_DIFF_SUFFIX).write_text(
            "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n"
            f" def add(a, b):\n-    return a * b\n+    return {new}\n"
        )
    return run_dir
