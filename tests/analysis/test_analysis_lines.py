"""Bad lines never stop a report and are named by line number; live refresh reads new lines only."""

from __future__ import annotations

import json
import random
from pathlib import Path

import duckdb
import pytest
from analysis_fixtures import attempt_row, handmade_rows, write_handmade_run, write_run

from driftdesk.analysis import attempt_table
from driftdesk.analysis.attempts import task_attempts
from driftdesk.analysis.live import LiveVolatility
from driftdesk.analysis.prices import load_prices
from driftdesk.analysis.report import build_report


def random_row(rng: random.Random, run_id: str, task_id: str, attempt: int) -> dict:
    """A row of random values: every outcome, latencies to 3 decimals (some 0), some rows
    without a model latency or a total, priced and unpriced models."""
    outcome = rng.choice(["pass", "pass", "fail", "link_error", "harness_error"])
    prompt, completion = rng.randint(0, 5000), rng.randint(0, 900)
    extra = {"model_latency_ms": round(rng.uniform(5, 900), 3)} if rng.random() < 0.7 else {}
    return attempt_row(
        run_id, task_id, attempt, outcome,
        scenario_id=rng.choice([None, "s1", "s2"]),
        error_code=rng.choice([None, "429", "500"]) if outcome.endswith("error") else None,
        latency_ms=0.0 if rng.random() < 0.1 else round(rng.uniform(10, 9000), 3),
        prompt_tokens=prompt, completion_tokens=completion,
        total_tokens=None if rng.random() < 0.2 else prompt + completion,
        model=rng.choice(["gpt-4o", "gpt-4o", "gpt-4o-mini", "unpriced-model"]),
        retries=rng.randint(0, 2), **extra,
    )  # fmt: skip


def _comparable(data: dict) -> dict:
    return {k: v for k, v in data.items() if k not in ("skipped_lines", "skipped_line_count")}


def test_malformed_lines_are_skipped_and_named(tmp_path: Path) -> None:
    good = [json.dumps(attempt_row("m", "a", i, "pass")) for i in range(3)]
    lines = [
        good[0],  # 1
        "",  # 2 blank: not a record, not a problem
        "{not json",  # 3
        json.dumps([1, 2]),  # 4 an array
        json.dumps(attempt_row("m", "a", 9, "pass") | {"attempt": 1.5}),  # 5 not an integer
        json.dumps(attempt_row("m", "a", 9, "maybe")),  # 6 unknown outcome
        good[1],  # 7
        "   ",  # 8 blank
        json.dumps({k: v for k, v in attempt_row("m", "b", 0, "fail").items() if k != "task_id"}),
        good[2],  # 10
    ]
    run = write_run(tmp_path, "m", list(lines))
    (report,) = build_report([run])
    assert [(s.line, s.torn) for s in report.skipped_lines] == [
        (3, False),
        (4, False),
        (5, False),
        (6, False),
        (9, False),
    ]
    reasons = [s.reason for s in report.skipped_lines]
    assert "Expecting property name" in reasons[0]
    assert reasons[1] == "expected an object, got list"
    assert reasons[2].startswith("attempt is not an integer")
    assert reasons[3].startswith("outcome 'maybe'")
    assert reasons[4] == "missing task_id"
    # the good rows are all there
    (task,) = report.tasks
    assert (task.task_id, task.n, task.passes) == ("a", 3, 3)


def test_torn_last_line_is_said_so(tmp_path: Path) -> None:
    run = write_handmade_run(tmp_path)
    with open(run / "attempts.jsonl", "ab") as fh:
        fh.write(b'{"run_id": "handmade", "task_id": "t5", "attem')  # killed mid-write
    (report,) = build_report([run])
    (skipped,) = report.skipped_lines
    assert (skipped.line, skipped.torn) == (19, True)
    assert str(skipped).endswith(skipped.reason) and "torn last line" in str(skipped)
    assert report.attempts_judged == 16  # nothing else lost


def test_missing_optional_fields_do_not_break_the_reader(tmp_path: Path) -> None:
    # rows from an older writer: only the required fields
    rows = [
        '{"task_id": "x", "attempt": 0, "outcome": "pass"}',
        '{"task_id": "x", "attempt": "1", "outcome": "fail"}',
        # a field of the wrong type is a bad row, named (tests/analysis/test_analysis_row_validation.py)
        '{"task_id": "x", "attempt": "2", "outcome": "fail", "latency_ms": "slow"}',
    ]
    (report,) = build_report([write_run(tmp_path, "old", list(rows))])
    (task,) = report.tasks
    assert (task.n, task.passes, task.latency_mean_ms) == (2, 1, None)
    assert report.tokens == {"prompt": 0, "completion": 0, "total": 0}
    assert [(s.line, s.reason) for s in report.skipped_lines] == [
        (3, "latency_ms is not a finite number ≥ 0: 'slow'")
    ]


def test_live_refresh_matches_the_cold_report(tmp_path: Path) -> None:
    run = write_handmade_run(tmp_path)
    live = LiveVolatility(run)
    assert _comparable(live.refresh().to_json()) == _comparable(build_report([run])[0].to_json())


def test_live_refresh_reads_only_appended_lines(tmp_path: Path) -> None:
    rows = handmade_rows("grow")
    run = write_run(
        tmp_path, "grow", list(rows[:5]), tasks=["t1", "t2", "t3", "t4", "t5"], repeat=4
    )
    live = LiveVolatility(run, ci_interval_s=0)
    first = live.refresh()
    assert live.lines_read_last_refresh == 5
    assert first.attempts_judged == 4  # t4 #0 is a link error so far
    path = run / "attempts.jsonl"
    with open(path, "a") as fh:
        for row in rows[5:12]:
            fh.write(json.dumps(row) + "\n")
        fh.write(json.dumps(rows[12])[:30])  # a row half written
    second = live.refresh()
    assert live.lines_read_last_refresh == 7  # the partial line waits
    assert second.skipped_line_count == 0
    with open(path, "a") as fh:
        fh.write(json.dumps(rows[12])[30:] + "\n")
        for row in rows[13:]:
            fh.write(json.dumps(row) + "\n")
    third = live.refresh()
    assert live.lines_read_last_refresh == 6
    assert _comparable(third.to_json()) == _comparable(build_report([run])[0].to_json())
    assert live.refresh().to_json() == third.to_json()
    assert live.lines_read_last_refresh == 0


def test_live_refresh_starts_over_when_the_file_is_replaced(tmp_path: Path) -> None:
    run = write_handmade_run(tmp_path)
    live = LiveVolatility(run)
    live.refresh()
    (run / "attempts.jsonl").write_text(json.dumps(attempt_row("handmade", "t1", 0, "fail")) + "\n")
    report = live.refresh()
    assert [(t.task_id, t.n, t.passes) for t in report.tasks] == [("t1", 1, 0)]


def test_live_names_malformed_lines(tmp_path: Path) -> None:
    run = write_run(tmp_path, "lm", [json.dumps(attempt_row("lm", "a", 0, "pass")), "oops"])
    report = LiveVolatility(run).refresh()
    assert [(s.line, s.reason[:9]) for s in report.skipped_lines] == [(2, "Expecting")]


def test_task_attempts_drill_down(tmp_path: Path) -> None:
    run = write_handmade_run(tmp_path)
    folder = run / "attempts" / "t4"
    folder.mkdir(parents=True)
    (folder / "0.log").write_text("agent output\n")
    (folder / "0.transcript.json").write_text("[]")
    (folder / "1.result.json").write_text('{"success": false}')
    rows = task_attempts(run, "t4")
    assert [(r["attempt"], r["outcome"], r["line"], r["superseded"]) for r in rows] == [
        (0, "link_error", 4, True),
        (1, "fail", 9, False),
        (2, "link_error", 13, False),
        (3, "pass", 17, False),
        (0, "pass", 18, False),
    ]
    assert rows[0]["log_path"] == str(folder / "0.log")
    assert rows[0]["transcript_path"] == str(folder / "0.transcript.json")
    assert rows[1]["log_path"] is None
    assert rows[1]["result_path"] == str(folder / "1.result.json")
    assert rows[0]["result_path"] is None
    assert task_attempts(run, "t") == []  # a prefix of an id is not the id


@pytest.mark.parametrize("missing", ["manifest", "attempts"])
def test_partial_run_dirs(tmp_path: Path, missing: str) -> None:
    run = write_handmade_run(tmp_path)
    (run / ("manifest.json" if missing == "manifest" else "attempts.jsonl")).unlink()
    (report,) = build_report([run])
    assert report.run_id == "handmade"
    assert report.tasks_judged == (5 if missing == "manifest" else 0)


def test_live_reuses_intervals_within_ci_interval(tmp_path: Path) -> None:
    rows = handmade_rows("ci")
    run = write_run(tmp_path, "ci", list(rows[:10]))
    cached, always = LiveVolatility(run, ci_interval_s=3600), LiveVolatility(run, ci_interval_s=0)
    first_cached, first_always = cached.refresh(), always.refresh()
    assert first_cached.ci95 == first_always.ci95
    with open(run / "attempts.jsonl", "a") as fh:
        for row in rows[10:]:
            fh.write(json.dumps(row) + "\n")
    assert cached.refresh().ci95 == first_cached.ci95  # reused: computed under an hour ago
    assert always.refresh().ci95 == build_report([run])[0].ci95  # recomputed


def test_live_matches_cold_when_appended_rows_supersede_slots(tmp_path: Path) -> None:
    # A resume appends rows for slots already written (the later row wins, its model takes
    # the slot's tokens), with a bad line and a blank line among them.
    rows = handmade_rows("sup")
    run = write_run(tmp_path, "sup", list(rows), tasks=["t1", "t2", "t3", "t4", "t5"], repeat=4)
    incremental = LiveVolatility(run, ci_interval_s=0)
    incremental.refresh()
    with open(run / "attempts.jsonl", "a") as fh:
        for row in (
            attempt_row("sup", "t2", 1, "pass", latency_ms=900.0, model="other-model"),
            attempt_row("sup", "t4", 2, "fail"),
        ):
            fh.write(json.dumps(row) + "\n")
        fh.write("{broken\n\n")
        fh.write(json.dumps(attempt_row("sup", "t5", 1, "link_error", error_code="500")) + "\n")
    for include in (False, True):
        live = incremental if not include else LiveVolatility(run, include_link_errors=True)
        report = live.refresh()
        cold = build_report([run], include_link_errors=include)[0]
        assert report.to_json(task_curves=True) == cold.to_json(task_curves=True)
        assert [(s.line, s.reason[:9]) for s in report.skipped_lines] == [(21, "Expecting")]
        t2 = next(t for t in report.tasks if t.task_id == "t2")
        assert (t2.n, t2.passes) == (4, 3)  # slot #1: fail superseded by a pass
        assert report.unpriced_models == ["other-model"] and report.cost_usd is None
        live.close()


def test_live_forgets_a_model_whose_every_row_was_superseded(tmp_path: Path) -> None:
    # The slot's first row came from one model, its retry from another: the winning row's
    # model takes the slot's tokens, and the first model is no longer in the run at all.
    first = attempt_row("m", "t1", 0, "link_error", error_code="429", model="model-a")
    run = write_run(tmp_path, "m", [first], tasks=["t1"], repeat=1)
    live = LiveVolatility(run, ci_interval_s=0)
    assert live.refresh().models == ["model-a"]
    with open(run / "attempts.jsonl", "a") as fh:
        fh.write(json.dumps(attempt_row("m", "t1", 0, "pass", model="model-b")) + "\n")
    report = live.refresh()
    cold = build_report([run])[0]
    assert report.models == cold.models == ["model-b"]
    assert report.to_json(task_curves=True) == cold.to_json(task_curves=True)
    live.close()


@pytest.mark.parametrize("min_runs", [1, 3])
def test_live_refresh_line_by_line_matches_cold_every_time(tmp_path: Path, min_runs: int) -> None:
    # The live view rebuilds only the touched tasks' stats and missing slots; after every
    # appended line (a task reaching --min-runs, a slot filled, a superseding row, a task the
    # manifest does not list, one it lists that never runs) it must equal a cold report.
    rows: list[dict] = [*handmade_rows("steps")]
    rows += [
        attempt_row("steps", "t2", 1, "pass", model="other-model"),
        attempt_row("steps", "extra", 0, "fail"),
    ]
    run = write_run(tmp_path, "steps", [], tasks=["t1", "t2", "t3", "t4", "t5", "never"], repeat=4)
    live = LiveVolatility(run, ci_interval_s=0, min_runs=min_runs)
    compared = 0
    for row in rows:
        with open(run / "attempts.jsonl", "a") as fh:
            fh.write(json.dumps(row) + "\n")
        report = live.refresh().to_json(task_curves=True)
        cold = build_report([run], min_runs=min_runs)[0].to_json(task_curves=True)
        assert report == cold
        assert report["missing_slots"]  # "never" stays missing
        compared += 1
    live.close()
    assert compared == len(rows) > 2


@pytest.mark.parametrize("include_link_errors", [False, True])
def test_live_merges_added_slots_and_recomputes_the_tasks_it_cannot_merge(
    tmp_path: Path, include_link_errors: bool
) -> None:
    # What a running run writes only adds slots: those tasks' aggregates are merged from
    # their new rows alone (means and deviations from counts). A row for a slot already
    # written, a slot twice in one batch or an attempt from 128 on needs all of a task's
    # rows. Either way the aggregates must be the cold ones, to float precision.
    rng = random.Random(5)

    def row(task_id: str, attempt: int) -> dict:
        return random_row(rng, "merge", task_id, attempt)

    tasks = [f"t{i}" for i in range(1, 7)]
    first = [row(t, attempt) for attempt in range(6) for t in tasks]
    batch = [row(t, attempt) for attempt in range(6, 10) for t in ("t1", "t2", "t3")]
    batch += [row("t7", attempt) for attempt in range(3)]  # a task first seen now
    batch += [row("t4", 2), row("t5", 6), row("t5", 6), row("t6", 130)]  # not mergeable
    run = write_run(tmp_path, "merge", list(first), tasks=[*tasks, "t7", "t8"], repeat=8)
    batch_file = tmp_path / "batch.jsonl"
    batch_file.write_text("".join(json.dumps(r) + "\n" for r in batch))
    prices = load_prices()

    def aggregates(con: duckdb.DuckDBPyConnection) -> list[tuple]:
        return con.execute("SELECT * FROM task_aggs ORDER BY task_id").fetchall()

    with attempt_table.connection() as con:
        since = attempt_table.load_file(con, run / "attempts.jsonl", 0)
        attempt_table.price_models(con, prices)
        attempt_table.aggregate(con, include_link_errors=include_link_errors)
        attempt_table.load_file(con, batch_file, 0)
        attempt_table.price_models(con, prices, since)
        result = attempt_table.aggregate(
            con, include_link_errors=include_link_errors, touched_since=since, per_task_extras=True
        )
        assert sorted(result.touched) == ["t1", "t2", "t3", "t4", "t5", "t6", "t7"]
        assert result.merged == {"t1", "t2", "t3", "t7"}
        merged = aggregates(con)
    with attempt_table.connection() as con:
        for path in (run / "attempts.jsonl", batch_file):
            attempt_table.load_file(con, path, 0)
        attempt_table.price_models(con, prices)
        attempt_table.aggregate(con, include_link_errors=include_link_errors)
        cold = aggregates(con)
    assert len(merged) == len(cold) == 7
    for live_row, cold_row in zip(merged, cold, strict=True):
        assert live_row == pytest.approx(cold_row, rel=1e-12, abs=1e-12), live_row[1]

    # The same through the live view: its report (token sums and error kinds per task and
    # per run included) is the cold one.
    live = LiveVolatility(run, include_link_errors=include_link_errors, ci_interval_s=0)
    live.refresh()
    with open(run / "attempts.jsonl", "a") as fh:
        fh.write(batch_file.read_text())
    report = live.refresh().to_json(task_curves=True)
    live.close()
    assert report == build_report([run], include_link_errors=include_link_errors)[0].to_json(
        task_curves=True
    )
    # t6's attempt 130 is past what the slot bit sets hold: its slots are read from its rows
    assert {(s["task_id"], s["attempt"]) for s in report["missing_slots"]} == {
        ("t4", 6), ("t4", 7), ("t5", 7), ("t6", 6), ("t6", 7),
        *(("t7", a) for a in range(3, 8)), *(("t8", a) for a in range(8)),
    }  # fmt: skip


def test_live_mean_on_a_rounding_tie_is_the_cold_one(tmp_path: Path) -> None:
    # Latencies are written to 3 decimals, so the mean of two sits exactly on a tie of the 3
    # decimals a report shows: 538.478 and 2694.467 average to 1616.4725. A live view that
    # merged the second row into the first's mean (mean + (x − mean) / 2) got another last
    # bit than the cold report's sum / 2, and showed 1616.472 against its 1616.473.
    first = attempt_row("tie", "t1", 0, "pass", latency_ms=538.478, model_latency_ms=538.478)
    run = write_run(tmp_path, "tie", [first], tasks=["t1"], repeat=2)
    live = LiveVolatility(run, ci_interval_s=0)
    live.refresh()
    with open(run / "attempts.jsonl", "a") as fh:
        second = attempt_row("tie", "t1", 1, "fail", latency_ms=2694.467, model_latency_ms=2694.467)
        fh.write(json.dumps(second) + "\n")
    (task,) = live.refresh().tasks
    live.close()
    (cold,) = build_report([run])[0].tasks
    shown, cold_shown = task.to_json(), cold.to_json()
    assert shown["latency_mean_ms"] == cold_shown["latency_mean_ms"] == 1616.473
    assert shown["model_latency_mean_ms"] == cold_shown["model_latency_mean_ms"] == 1616.473


# Seeds whose batches put a merged mean on a rounding tie: four of the eight (of 80 tried)
# where the live view, merging means from means, showed another digit than the cold report.
@pytest.mark.parametrize("seed", [11, 14, 28, 38])
def test_live_refresh_of_random_batches_is_the_cold_report(tmp_path: Path, seed: int) -> None:
    # Random rows a few at a time (new slots, retried slots, every outcome, latencies to 3
    # decimals, some of them 0, rows without a total or a model latency): after each batch
    # the live view's report is the cold one, to the last digit shown.
    rng = random.Random(seed)

    def row(task_id: str, attempt: int) -> dict:
        return random_row(rng, "random", task_id, attempt)

    tasks = [f"t{i}" for i in range(5)]
    repeat = 4
    first = [row(t, a) for a in range(2) for t in tasks]
    run = write_run(tmp_path, "random", first, tasks=tasks, repeat=repeat)
    for include in (False, True):
        live = LiveVolatility(run, ci_interval_s=0, include_link_errors=include)
        live.refresh()
        for _ in range(5):
            with open(run / "attempts.jsonl", "a") as fh:
                for _ in range(rng.randint(1, 6)):
                    fh.write(json.dumps(row(rng.choice(tasks), rng.randrange(repeat))) + "\n")
            report = live.refresh().to_json(task_curves=True)
            cold = build_report([run], include_link_errors=include)[0]
            assert report == cold.to_json(task_curves=True)
        live.close()


def test_a_latency_too_large_to_sum_exactly_still_gives_a_mean(tmp_path: Path) -> None:
    # Exact sums hold latencies below 10^15 ms; a row may carry any finite latency ≥ 0.
    # Past that, the task's mean is a float mean again, cold and live, and nothing aborts.
    rows = [attempt_row("huge", "t1", 0, "pass", latency_ms=1e300)]
    run = write_run(tmp_path, "huge", rows, tasks=["t1", "t2"], repeat=2)
    live = LiveVolatility(run, ci_interval_s=0)
    assert live.refresh().tasks[0].latency_mean_ms == 1e300
    with open(run / "attempts.jsonl", "a") as fh:
        for row in (
            attempt_row("huge", "t1", 1, "fail", latency_ms=1000.0),
            attempt_row("huge", "t2", 0, "pass", latency_ms=1000.25),
            attempt_row("huge", "t2", 1, "pass", latency_ms=3e15),
        ):
            fh.write(json.dumps(row) + "\n")
    report = live.refresh()
    live.close()
    cold = build_report([run])[0]
    for tasks in (report.tasks, cold.tasks):
        means = {t.task_id: t.latency_mean_ms for t in tasks}
        assert means["t1"] == pytest.approx(5e299) and means["t2"] == pytest.approx(
            1.5e15 + 500.125
        )
    assert report.to_json(task_curves=True) == cold.to_json(task_curves=True)


def test_the_drill_down_skips_a_line_over_the_row_limit(tmp_path: Path) -> None:
    from driftdesk.analysis.sources import MAX_ROW_BYTES

    run = write_run(
        tmp_path,
        "r",
        [
            attempt_row("r", "t", 0, "pass"),
            json.dumps({**attempt_row("r", "t", 1, "fail"), "note": "x" * MAX_ROW_BYTES}),
            attempt_row("r", "t", 2, "fail"),
        ],
    )
    assert [(r["attempt"], r["line"]) for r in task_attempts(run, "t")] == [(0, 1), (2, 3)]


def test_the_lines_containing_a_needle_are_the_ones_a_line_by_line_read_finds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The drill-down's block search against the line-by-line read it replaced: same line
    numbers, same lines, over blank lines, lines over the row limit (which hold the needle
    too), a needle twice in a line, lines and needles that straddle the blocks, and a last
    line without a newline."""
    import io

    from driftdesk.analysis import sources

    monkeypatch.setattr(sources, "MAX_ROW_BYTES", 24)  # both readers look it up when called
    rng = random.Random(5)
    needle = b"t/9"
    pieces = [b"", b"\n", b"  \n", b"t/9", b"t/9 t/9", b"t/", b"9", b"x" * 30, b"y" * 21, b"z"]
    for case in range(300):
        lines = [
            b"".join(rng.choices(pieces, k=rng.randint(0, 4))) for _ in range(rng.randint(0, 12))
        ]
        content = b"\n".join(lines) + (b"\n" if rng.random() < 0.5 else b"")
        expected = [
            (number, raw)
            for number, (raw, _, _) in enumerate(
                sources.iter_bounded_lines(io.BytesIO(content)), start=1
            )
            if needle in raw
        ]
        for block in (1, 2, 5, 16, 1 << 10):
            found = list(sources.lines_containing(io.BytesIO(content), needle, block=block))
            assert found == expected, (case, block, content)
