"""Hostile run dirs and task ids, through the real CLI: bad input is one line and exit 2, and
what a file says never changes the shape of what we print."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from analysis_fixtures import attempt_row, write_run

READERS = [
    ("report", "{run}"),
    ("report", "--format", "json", "{run}"),
    ("report", "--format", "csv", "{run}"),
    ("compare", "{run}", "{good}"),
    ("compare", "{good}", "{run}"),
    ("check", "{run}", "--min-success", "0.5"),
    ("check", "{good}", "--baseline", "{run}"),
    ("tasks", "{run}", "--failed"),
    ("plot", "{run}"),
]


@pytest.mark.parametrize("argv", READERS, ids=lambda argv: " ".join(argv[:2]))
def test_an_attempts_file_that_is_a_directory_is_bad_input(  # type: ignore[no-untyped-def]
    cli, home, tmp_path: Path, argv: tuple[str, ...]
) -> None:
    """Seen: a run dir whose attempts.jsonl is a directory gave DuckDB's 'IO Error: No files
    found …' with the SQL under it, 'this was not expected', and check exited 1 (a failed
    gate) instead of 2 (bad input)."""
    good = write_run(tmp_path, "good", [attempt_row("good", "t", 0, "pass")], tasks=["t"])
    run = tmp_path / "broken"
    (run / "attempts.jsonl").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"run_id": "broken", "tasks": ["t"]}))
    done = cli(*(a.format(run=run, good=good) for a in argv))
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line == f"driftdesk: {run / 'attempts.jsonl'}: not a file (a directory)"


def test_an_attempts_file_that_is_a_dangling_symlink_is_named(cli, home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Not an empty run: the file it points to is gone, and the line says where it pointed."""
    run = tmp_path / "linked"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"run_id": "linked", "tasks": ["t"]}))
    (run / "attempts.jsonl").symlink_to(tmp_path / "moved-away.jsonl")
    done = cli("check", str(run), "--min-success", "0.5")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == (
        f"driftdesk: {run / 'attempts.jsonl'}: a symlink to {tmp_path / 'moved-away.jsonl'}, "
        "which is not there\n"
    )


HOSTILE_IDS = ["evil\nphantom", "esc\x1b]0;PWNED\x07", "comma,id", " spaced ", "back\\slash"]


@pytest.mark.keyring
def test_a_task_id_with_a_newline_is_one_row_and_tasks_round_trips_into_run_tasks(  # type: ignore[no-untyped-def]
    cli, home, tmp_path: Path
) -> None:
    """Seen: a task id with a newline split its row of the report table and printed a phantom
    task in ``tasks --failed``; the README's ``tasks … | paste -sd,`` into ``run --tasks`` then
    asked for tasks that do not exist. Every id here fails on every attempt; "ok" may pass."""
    from driftdesk.analysis.selection import select_task_ids
    from driftdesk.providers.keys import set_key
    from driftdesk.providers.profiles import Profile, ProfileStore
    from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

    suite = tmp_path / "suite.jsonl"
    lines = [
        {
            "task_id": t,
            "prompt": "Reply 1.",
            "expected": {"equals": "nothing"},
            "reference_answer": "1",
        }
        for t in HOSTILE_IDS
    ]
    lines.append({"task_id": "ok", "prompt": "Reply 7.", "expected": {"equals": "7"}})
    suite.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with SandboxServer(seed=4) as sandbox:
        ProfileStore().save(
            Profile(name="sim", protocol="openai", base_url=sandbox.base_url, model=SIM_MODEL)
        )
        set_key("sim", "sk-test-hostile-ids-0123456789")
        first = cli("run", "--profile", "sim", "--suite", str(suite), "--repeat", "2",
                    "--out", str(tmp_path / "first"), timeout=120)  # fmt: skip
        assert first.returncode == 0, first.stderr
        (run,) = (tmp_path / "first").iterdir()

        table = cli("report", str(run)).stdout
        rows = table.split("  TASK ")[1].splitlines()[1:]
        assert len(rows) == len(lines), table  # one row a task, no phantom
        assert not any(row.lstrip().startswith("phantom") for row in rows)
        assert "\x1b" not in table and "evil\\nphantom" in table

        failed = select_task_ids([run], "failed")
        assert set(HOSTILE_IDS) <= set(failed)
        listed = cli("tasks", str(run), "--failed")
        assert listed.returncode == 0, listed.stderr
        assert len(listed.stdout.splitlines()) == len(failed) and "\x1b" not in listed.stdout
        joined = subprocess.run(
            ["paste", "-sd,"], input=listed.stdout, capture_output=True, text=True, check=True
        ).stdout.strip()
        second = cli("run", "--profile", "sim", "--suite", str(suite), "--repeat", "1",
                     "--tasks", joined, "--out", str(tmp_path / "second"), timeout=120)  # fmt: skip
        assert second.returncode == 0, second.stderr
    (rerun,) = (tmp_path / "second").iterdir()
    assert json.loads((rerun / "manifest.json").read_text())["tasks"] == failed

    # check names the tasks below a threshold on one line
    gate = cli("check", str(run), "--task-min-success", "0.5")
    assert gate.returncode == 1
    (below,) = [line for line in gate.stdout.splitlines() if "every task success" in line]
    assert "evil\\nphantom 0.00" in below and "\x1b" not in gate.stdout


def test_quoted_task_ids_read_back_whatever_they_hold() -> None:
    import random

    from driftdesk.taskids import parse_list, quote

    rng = random.Random(12)
    alphabet = "ab,\\ \t\n\r\x00\x1b\x7f\x85\u202e\u2028é-_.:/nxu0"
    ids = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8))) for _ in range(2000)]
    ids += ["plain-id", "\\x41", "a\\nb", " "]
    for task_id in ids:
        quoted = quote(task_id)
        assert "\n" not in quoted and "," not in quoted and quoted == quoted.strip()
    assert parse_list(",".join(quote(i) for i in ids)) == ids
    assert quote("plain-id") == "plain-id"


def test_csv_cells_that_a_spreadsheet_would_run_are_escaped(cli, home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Seen: ids starting with =, +, -, @ were written as they are: a spreadsheet opening the
    export runs them as formulas (CSV injection). Such text cells get a leading ' (OWASP's
    advice); numbers and other text are untouched."""
    import csv
    import io

    ids = ['=HYPERLINK("http://x.test","y")', "+1+2", "-2+3", "@SUM(A1)", "\tx", "ok"]
    rows = [attempt_row("r", t, 0, "fail") for t in ids]
    rows += [attempt_row("r", "ok", 1, "link_error", error_code="=cmd")]
    run = write_run(tmp_path, "r", list(rows), tasks=ids)
    done = cli("report", str(run), "--format", "csv", "--sort", "task")
    assert done.returncode == 0, done.stderr
    table = list(csv.DictReader(io.StringIO(done.stdout)))
    assert sorted(r["task_id"] for r in table) == sorted(["'" + i if i != "ok" else i for i in ids])
    assert all(r["task_id"][0] not in "=+-@\t\r" for r in table)
    assert {r["n"] for r in table} == {"1"}  # numbers stay numbers
    (ok,) = [r for r in table if r["task_id"] == "ok"]
    assert ok["last_error_kinds"].startswith("'=cmd")  # error kinds come from files too
