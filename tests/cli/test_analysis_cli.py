"""The analysis commands through the real ``python -m driftdesk`` subprocess."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import duckdb
import pytest
from analysis_fixtures import attempt_row, handmade_rows, write_handmade_run, write_run

FIXTURES = Path(__file__).parent.parent / "analysis" / "fixtures"


@pytest.fixture
def runs(home, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    root = tmp_path / "runs"
    write_handmade_run(root, "handmade")
    # the same run after a fix: t1 turns volatile, t2 always passes, t3 now passes
    after = []
    for row in handmade_rows("after"):
        if row["task_id"] == "t1" and row["attempt"] == 3:
            row = attempt_row("after", "t1", 3, "fail", scenario_id="s1")
        elif row["task_id"] in ("t2", "t3") and row["outcome"] == "fail":
            row = {**row, "outcome": "pass", "success": True}
        after.append(row)
    write_run(root, "after", list(after), tasks=["t1", "t2", "t3", "t4", "t5"], repeat=4)
    return root


def test_report_json_one_run_and_several(cli, runs: Path) -> None:  # type: ignore[no-untyped-def]
    done = cli("report", str(runs / "handmade"), "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["run_id"] == "handmade"
    assert data["success_rate"] == pytest.approx(0.633333, abs=1e-6)
    assert data["consistency_gap_pp"] == 40.0
    assert data["pass_hat_k"] == {"1": 0.633333, "2": 0.375, "3": 0.25, "4": 0.333333}
    assert [t["task_id"] for t in data["tasks"]] == ["t2", "t4", "t1", "t3", "t5"]
    curves = json.loads(
        cli("report", str(runs / "handmade"), "--format", "json", "--task-curves").stdout
    )
    assert curves["tasks"][0]["pass_at_k"]["2"] == round(5 / 6, 6)
    both = json.loads(cli("report", str(runs / "*"), "--format", "json").stdout)
    assert [r["run_id"] for r in both["runs"]] == ["after", "handmade"]


def test_report_options(cli, runs: Path) -> None:  # type: ignore[no-untyped-def]
    done = cli(
        "report",
        str(runs / "handmade"),
        "--format",
        "json",
        "--group-by",
        "scenario",
        "--sort",
        "task",
        "--top",
        "2",
        "--min-runs",
        "2",
        "--include-link-errors",
    )
    data = json.loads(done.stdout)
    assert [t["task_id"] for t in data["tasks"]] == ["t1", "t2"]
    assert [t["task_id"] for t in data["tasks_below_min_runs"]] == ["t5"]
    # with link errors counted, t4 is 2 of 4: (1 + 0.5 + 0 + 0.5) / 4 over t1..t4
    assert data["success_rate"] == 0.5
    assert data["task_goal_completion"] == 50.0
    # s1 min .5, s2 0, s3 (t4 only, t5 below --min-runs) .5 -> 33.3
    assert data["scenario_goal_completion"] == 33.3


def test_report_table(cli, runs: Path) -> None:  # type: ignore[no-untyped-def]
    done = cli("report", str(runs / "handmade"))
    assert done.returncode == 0
    out = done.stdout
    assert "success 63.3%" in out and "consistency gap 40.0 pp" in out
    assert "missing slots 3: t5#1, t5#2, t5#3" in out
    assert "link errors 1 (timeout: 1)" in out
    table = out.split("  TASK ", 1)[1].splitlines()[1:]
    task_lines = [line.split()[0] for line in table]
    assert task_lines == ["t2", "t4", "t1", "t3", "t5"]


def test_report_csv_and_parquet(cli, runs: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    done = cli("report", str(runs / "handmade"), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert [r["task_id"] for r in rows] == ["t2", "t4", "t1", "t3", "t5"]
    assert rows[1]["n"] == "3" and rows[1]["last_error_kinds"] == "timeout fail"
    parquet = tmp_path / "tasks.parquet"
    refused = cli("report", str(runs / "handmade"), "--format", "parquet")
    assert refused.returncode == 2 and "--out" in refused.stderr
    done = cli("report", str(runs / "handmade"), "--format", "parquet", "--out", str(parquet))
    assert done.returncode == 0, done.stderr
    table = duckdb.sql(
        f"SELECT task_id, n, passes, spread FROM '{parquet}' ORDER BY task_id"
    ).fetchall()
    assert table == [
        ("t1", 4, 4, 0.0),
        ("t2", 4, 2, 1.0),
        ("t3", 4, 0, 0.0),
        ("t4", 3, 2, 1.0),
        ("t5", 1, 1, 0.0),
    ]


def test_report_names_bad_lines_on_stderr(cli, runs: Path) -> None:  # type: ignore[no-untyped-def]
    with open(runs / "handmade" / "attempts.jsonl", "a") as fh:
        fh.write("garbage\n")
        fh.write('{"task_id": "t5", "attempt": 1, "outc')
    done = cli("report", str(runs / "handmade"), "--format", "json")
    assert done.returncode == 0
    assert "attempts.jsonl:19: skipped line" in done.stderr
    assert "attempts.jsonl:20: torn last line" in done.stderr
    data = json.loads(done.stdout)  # stdout stays clean JSON
    assert [(s["line"], s["torn"]) for s in data["skipped_lines"]] == [(19, False), (20, True)]


def test_tasks_volatile_and_failed(cli, runs: Path) -> None:  # type: ignore[no-untyped-def]
    volatile = cli("tasks", str(runs / "handmade"), "--volatile")
    assert volatile.stdout.splitlines() == ["t2", "t4"]
    failed = cli("tasks", str(runs / "handmade"), "--failed")
    assert failed.stdout.splitlines() == ["t2", "t3", "t4"]
    assert cli("tasks", str(runs / "handmade")).returncode == 2  # one of the two is required


def test_compare(cli, runs: Path) -> None:  # type: ignore[no-untyped-def]
    done = cli("compare", str(runs / "handmade"), str(runs / "after"), "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    changed = {c["task_id"]: (c["before"], c["after"]) for c in data["changed"]}
    assert changed == {
        "t1": ("pass", "volatile"),
        "t2": ("volatile", "pass"),
        "t3": ("fail", "pass"),
    }
    success = next(m for m in data["metrics"] if m["name"] == "success_rate")
    # after: t1 3/4, t2 1, t3 1, t4 2/3, t5 1 -> 4.41667 / 5; before 3.16667 / 5
    assert success["delta"] == pytest.approx((0.75 + 1 + 1 + 2 / 3 + 1) / 5 - 3.1666667 / 5)
    assert success["ci_a"] and success["ci_b"]
    table = cli("compare", str(runs / "handmade"), str(runs / "after")).stdout
    assert "t3" in table and "fail → pass" in table.replace("    ", " ").replace("  ", " ")


def test_plot(cli, runs: Path) -> None:  # type: ignore[no-untyped-def]
    done = cli("plot", str(runs / "handmade"), "--width", "60", "--height", "12")
    assert done.returncode == 0, done.stderr
    assert "pass^k" in done.stdout and "pass@k" in done.stdout
    assert "tasks by success rate" in done.stdout
    assert "\x1b[" not in done.stdout  # plain text, no colour codes


def test_missing_run_is_exit_2(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    done = cli("report", str(tmp_path / "nope"))
    assert done.returncode == 2
    assert "no such run dir" in done.stderr and "Traceback" not in done.stderr


def test_broken_price_table_is_refused(cli, home, runs: Path) -> None:  # type: ignore[no-untyped-def]
    home.config_dir.mkdir(parents=True, exist_ok=True)
    prices = home.config_dir / "prices.toml"
    prices.write_text("[models.\n")
    done = cli("report", str(runs / "handmade"))
    assert done.returncode == 2 and "prices.toml" in done.stderr
    assert prices.read_text() == "[models.\n"  # left untouched
    prices.write_text('[models."gpt-4o"]\ninput_per_mtok = 0\noutput_per_mtok = 0\n')
    data = json.loads(cli("report", str(runs / "handmade"), "--format", "json").stdout)
    assert data["cost_usd"] == 0.0


def test_import_then_report(cli, home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "imported"
    done = cli(
        "import",
        str(FIXTURES / "appworld_test_normal_evaluation.json"),
        "--out",
        str(out),
        "--run-id",
        "aw",
    )
    assert done.returncode == 0, done.stderr
    assert "imported 8 attempts of 8 tasks (an appworld file)" in done.stdout
    assert "record 9 (task 3b2e8f1_1)" in done.stderr and "1 record skipped" in done.stdout
    data = json.loads(
        cli("report", str(out / "aw"), "--format", "json", "--group-by", "scenario").stdout
    )
    assert (data["task_goal_completion"], data["scenario_goal_completion"]) == (62.5, 33.3)
    jsonl = cli("import", str(FIXTURES / "generic_results.jsonl"), "--out", str(out))
    assert jsonl.returncode == 0 and "(a jsonl file)" in jsonl.stdout
    assert "line 10: torn last line" in jsonl.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    refused = cli("import", str(bad), "--out", str(out))
    assert refused.returncode == 2 and "cannot tell the format" in refused.stderr
