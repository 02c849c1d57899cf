"""Volatility screen on fixed run dirs: runs list, sorting and filtering, drill-down into a task,
compare two runs, and rerunning the volatile tasks as a new real run."""

from __future__ import annotations

import json

import pytest
from textual.widgets import DataTable, OptionList, RichLog

from driftdesk.tui.screens.compare import CompareScreen
from driftdesk.tui.screens.modals import ConfirmScreen, PickScreen
from driftdesk.tui.screens.run import RunScreen
from driftdesk.tui.screens.task import TaskScreen
from driftdesk.tui.screens.volatility import VolatilityScreen

SIZE = (140, 42)


def _task_column(screen: VolatilityScreen) -> list[str]:
    table = screen.query_one("#tasks", DataTable)
    return [str(table.get_row(key)[1]) for key in table.rows]


async def _open_run_a(app, pilot, settle) -> VolatilityScreen:  # type: ignore[no-untyped-def]
    await settle(app, pilot)
    screen = app.screen
    assert isinstance(screen, VolatilityScreen)
    runs = screen.query_one("#runs", OptionList)
    assert runs.option_count == 2
    runs.focus()
    await pilot.press("down")  # newest first: the second entry is run A (day 1)
    await settle(app, pilot)
    assert screen.run_dir is not None and screen.run_dir.name.endswith("20260101T100000Z")
    return screen


async def test_sort_and_filter(home, fixture_runs, make_app, settle) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_run_a(app, pilot, settle)
        # max − min first: the two volatile tasks lead
        assert set(_task_column(screen)[:2]) == {"arith-02", "format-01"}
        assert "sorted by max−min (o)" in str(screen.query_one("#table-state").render())
        await pilot.press("o")  # success, lowest first
        assert _task_column(screen)[0] == "lookup-01"
        assert "sorted by success (o)" in str(screen.query_one("#table-state").render())
        await pilot.press("o")  # task id
        assert _task_column(screen) == sorted(_task_column(screen))
        await pilot.press("slash", *"ar")
        assert _task_column(screen) == ["arith-01", "arith-02"]
        summary = str(screen.query_one("#summary").render())
        assert "volatile tasks" in summary


async def test_drill_into_a_task(home, fixture_runs, make_app, settle) -> None:
    # The provider's own time for attempt 0 of arith-02 (the proxy's sum over its calls);
    # older rows have none.
    rows_file = fixture_runs[0] / "attempts.jsonl"
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    for row in rows:
        if (row["task_id"], row["attempt"]) == ("arith-02", 0):
            row["model_latency_ms"] = 123.4
    rows_file.write_text("".join(json.dumps(row) + "\n" for row in rows))
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_run_a(app, pilot, settle)
        await pilot.press("slash", "0", "2", "enter")  # filter "02", then back to the table
        assert _task_column(screen) == ["arith-02"]
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, TaskScreen)
        assert app.screen.task_id == "arith-02"
        attempts = app.screen.query_one("#attempts", DataTable)
        outcomes = [str(attempts.get_row(k)[1]) for k in attempts.rows]
        assert outcomes == ["pass", "fail", "pass", "fail"]
        labels = [str(column.label) for column in attempts.columns.values()]
        wall, model = labels.index("latency ms"), labels.index("model ms")
        first, second = (attempts.get_row(k) for k in list(attempts.rows)[:2])
        assert (str(first[model]), str(second[model])) == ("123", "-")
        assert str(first[wall]) == "215"  # the attempt's wall time, beside it
        log = app.screen.query_one("#attempt-log", RichLog)
        assert any("Answer for arith-02, attempt 0" in line.text for line in log.lines)
        await pilot.press("down")
        await settle(app, pilot)
        assert any("attempt 1" in line.text for line in log.lines)
        await pilot.press("escape")
        assert isinstance(app.screen, VolatilityScreen)


async def test_compare_two_runs(home, fixture_runs, make_app, settle) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await _open_run_a(app, pilot, settle)
        await pilot.press("m")
        assert isinstance(app.screen, PickScreen)
        await pilot.press("enter")  # the only other run: B
        await settle(app, pilot)
        assert isinstance(app.screen, CompareScreen)
        changed = app.screen.query_one("#changed", DataTable)
        rows = {str(changed.get_row(k)[0]): changed.get_row(k) for k in changed.rows}
        # arith-02 went from volatile (2/4) to always passing (4/4) in B
        assert str(rows["arith-02"][1]) == "volatile" and str(rows["arith-02"][2]) == "pass"
        assert "arith-01" not in rows  # passed everywhere: unchanged
        metrics = app.screen.query_one("#metrics", DataTable)
        assert metrics.row_count > 0


@pytest.mark.keyring
async def test_rerun_all_volatile_tasks(
    home, sandbox, fixture_runs, make_app, settle, wait_for_run, runs_dir
) -> None:
    from driftdesk.providers.keys import set_key

    set_key("sandbox", "sk-test-throwaway-0123456789")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_run_a(app, pilot, settle)
        screen.query_one("#tasks", DataTable).focus()
        await pilot.press("a")  # mark all volatile
        assert screen.marked == {"arith-02", "format-01"}
        await pilot.press("R")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(app.screen, RunScreen)
        live = app.screen.live
        assert live is not None
        await wait_for_run(app, pilot, live)
        assert live.status == "completed"
        manifest = json.loads((live.run_dir / "manifest.json").read_text())
        assert manifest["tasks"] == ["arith-02", "format-01"]
        rows = (live.run_dir / "attempts.jsonl").read_text().splitlines()
        assert len(rows) == 2 * 4  # the same repeat as run A


async def test_export_and_copy(home, fixture_runs, make_app, settle) -> None:
    import csv

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_run_a(app, pilot, settle)
        await pilot.press("e")
        await settle(app, pilot)
        screen.query_one("#tasks", DataTable).focus()
        await pilot.press("c")
        assert app.clipboard in _task_column(screen)
        await pilot.press("C")
        assert app.clipboard.splitlines()[0].startswith("task\t")
        assert len(app.clipboard.splitlines()) == 1 + 5
    exports = home.project / "driftdesk-exports"
    report = json.loads((exports / f"{screen.run_dir.name}.report.json").read_text())
    assert report["run_id"] == screen.run_dir.name
    with open(exports / f"{screen.run_dir.name}.tasks.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["task_id"] for r in rows} == {
        "arith-01",
        "arith-02",
        "lookup-01",
        "format-01",
        "travel-2_1",
    }


async def test_volatility_is_live_while_a_run_is_going(
    home, make_app, settle, wait_for_run, runs_dir
) -> None:
    from driftdesk.providers.profiles import Profile, ProfileStore
    from driftdesk.reruns.run_spec import RunSpec
    from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

    server = SandboxServer(latency_ms=60.0)  # slow enough to be seen half-done
    server.start()
    try:
        ProfileStore().save(Profile("slow", "openai", server.base_url, SIM_MODEL))
        app = make_app(start_mode="volatility")
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            spec = RunSpec(
                profile="slow",
                suite="basic",
                repeat=3,
                concurrency=4,
                out_dir=runs_dir,
                api_key="sk-test-throwaway-0123456789",
            )
            live = app.start_run(spec)
            while live.run_dir is None:
                await pilot.pause(0.05)
            screen = app.screen
            assert isinstance(screen, VolatilityScreen)
            screen.select_run(live.run_dir)
            seen_live: list[int] = []
            while not live.finished:
                await pilot.pause(0.2)
                report = screen.report
                if report is not None and "LIVE" in str(screen.query_one("#summary").render()):
                    seen_live.append(report.attempts_judged)
            await wait_for_run(app, pilot, live)
            assert live.worker.state.name == "SUCCESS" and live.status == "completed"
            rows = (live.run_dir / "attempts.jsonl").read_text().splitlines()
            slots = {(json.loads(r)["task_id"], json.loads(r)["attempt"]) for r in rows}
            assert len(rows) == len(slots) == len(live.task_ids) * 3
            await settle(app, pilot)
            while "LIVE" in str(screen.query_one("#summary").render()):
                await pilot.pause(0.2)  # the final report replaces the live one
            assert seen_live and min(seen_live) < len(live.task_ids) * 3
            assert screen.report.attempts_judged == len(live.task_ids) * 3
            await settle(app, pilot)
            assert screen._live is None  # the finished run's live report was closed
    finally:
        server.stop()


async def test_a_run_the_harness_broke_says_so_in_the_headline(
    home, runs_dir, make_app, settle
) -> None:
    # Seen with a plain install: the demo landed on "success -", "0 · 0 judged", "link errors 0"
    # and nothing said that every attempt had crashed.
    from tui_runs import write_run

    broken = {"t1": ["harness_error:harness_crash"] * 2, "t2": ["harness_error:no_result"]}
    write_run(runs_dir, "sandbox-sandbox-sim-20260101T100000Z", broken)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, VolatilityScreen) and screen.report is not None
        summary = str(screen.query_one("#summary").render())
        assert "harness errors    3 (harness_crash 2, no_result 1)" in summary
        assert "every attempt (3) was a harness error" in summary


async def test_plot_in_colour_and_histogram_only_when_wide(
    home, fixture_runs, make_app, settle
) -> None:
    app = make_app()
    async with app.run_test(size=(200, 42)) as pilot:
        screen = await _open_run_a(app, pilot, settle)
        plot = screen.query_one("#plot").render()
        assert "pass^k" in str(plot) and any(span.style for span in plot.spans)  # type: ignore[union-attr]
        histogram = screen.query_one("#histogram")
        assert histogram.display and "tasks by success rate" in str(histogram.render())
        summary = str(screen.query_one("#summary").render())
        assert " %  CI95 " in summary and " pp  CI95 " in summary
        await pilot.resize_terminal(140, 42)
        await settle(app, pilot)
        assert not histogram.display


async def test_run_list_tells_runs_apart_and_a_run_without_its_suite_is_not_resumable(
    home, fixture_runs, runs_dir, make_app, settle
) -> None:
    gone = runs_dir / "gone-suite-run"
    gone.mkdir()
    manifest = json.loads((fixture_runs[0] / "manifest.json").read_text())
    manifest.update(
        run_id="gone-suite-run",
        status="interrupted",
        started_at="2026-01-03T10:00:00Z",
        suite={"path": str(home.project / "deleted.jsonl"), "name": "deleted", "sha256": "0"},
    )
    (gone / "manifest.json").write_text(json.dumps(manifest))
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        runs = screen.query_one("#runs", OptionList)
        labels = [str(runs.get_option_at_index(i).prompt) for i in range(runs.option_count)]
        # run B: 16 of 20 judged; its agent named (a fixture from before clients were recorded)
        assert (
            "basic ×4 · sandbox-sim · builtin (client unknown) · attempts passed 80%" in labels[1]
        )
        assert "gone-suite-run" in labels[0] and "interrupted (suite file gone)" in labels[0]
        info = next(r for r in screen.runs if r.run_id == "gone-suite-run")
        assert not info.resumable


async def test_an_imported_run_shows_tokens_and_cost_as_unknown(
    home, runs_dir, make_app, settle, cli
) -> None:
    results = home.project / "results.jsonl"
    results.write_text(
        "".join(json.dumps({"task_id": f"t{i}", "success": i % 2 == 0}) + "\n" for i in range(4))
    )
    done = cli("import", str(results), "--format", "jsonl", "--out", str(runs_dir))
    assert done.returncode == 0, done.stderr
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        summary = str(app.screen.query_one("#summary").render())
        assert "tokens · cost" in summary
        line = next(line for line in summary.splitlines() if line.startswith("tokens · cost"))
        assert line.split()[-3:] == ["unknown", "·", "unknown"], line


async def test_rerun_of_an_imported_run_asks_which_profile(
    home, runs_dir, make_app, settle, cli
) -> None:
    from driftdesk.providers.profiles import Profile, ProfileStore

    ProfileStore().save(Profile("mine", "openai", "http://127.0.0.1:9/v1", "m"))
    results = home.project / "results.jsonl"
    results.write_text(
        "".join(json.dumps({"task_id": "t1", "success": ok}) + "\n" for ok in (True, False, True))
    )
    done = cli("import", str(results), "--format", "jsonl", "--out", str(runs_dir))
    assert done.returncode == 0, done.stderr
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.screen.query_one("#tasks").focus()
        await pilot.press("a", "R")  # mark the volatile task, rerun
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(app, pilot)
        assert isinstance(app.screen, PickScreen)  # asked, not "no profile named 'None'"
        assert [value for value, _ in app.screen._options] == ["mine"]
        await pilot.press("escape")
        await settle(app, pilot)
        assert not app.live_runs


async def test_a_run_of_many_tasks_lists_the_first_ones_and_says_how_many(
    home, runs_dir, make_app, settle
) -> None:  # type: ignore[no-untyped-def]
    """Seen: on a 1M-row run (20,000 tasks) the Volatility screen took 110 s to open and each
    sort, mark or filter key 5–9 s: its table was given every task, and Textual measures each
    cell of each row it is given. The table now holds the first ``MAX_LISTED_ROWS`` tasks of
    the sorted, filtered list and says how many there are; the filter reaches the rest, and
    marking, copying and rerunning still work on all of them."""
    from tui_runs import write_run

    from driftdesk.tui.widgets.tables import MAX_LISTED_ROWS

    count = MAX_LISTED_ROWS + 200
    # every task but each seventh one passes once and fails once: volatile
    outcomes = {f"t{i:04d}": ["pass", "pass" if i % 7 == 0 else "fail"] for i in range(count)}
    volatile = [task for i, task in enumerate(outcomes) if i % 7]
    assert len(volatile) > MAX_LISTED_ROWS
    write_run(runs_dir, "sandbox-sandbox-sim-20260101T100000Z", outcomes)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, VolatilityScreen) and screen.run_dir is not None
        state = screen.query_one("#table-state")
        assert _task_column(screen) == volatile[:MAX_LISTED_ROWS]  # spread first, then by id
        assert f"first {MAX_LISTED_ROWS} of {count} tasks" in str(state.render())
        await pilot.press("o", "o")  # by task id
        assert _task_column(screen) == list(outcomes)[:MAX_LISTED_ROWS]
        screen.query_one("#tasks", DataTable).focus()
        await pilot.press("a")  # every volatile task, listed or not
        assert screen.marked == set(volatile)
        assert f"{len(volatile)} marked" in str(state.render())
        await pilot.press("C")  # the table copied whole, not just its listed rows
        assert len(app.clipboard.splitlines()) == 1 + count
        await pilot.press("slash", *f"t{count - 1:04d}")  # a task past the listed ones
        assert _task_column(screen) == [f"t{count - 1:04d}"]
        assert "1 tasks" in str(state.render()) and "first" not in str(state.render())


def test_runs_are_listed_from_their_manifests_and_measured_once_until_their_rows_change(
    runs_dir,
) -> None:  # type: ignore[no-untyped-def]
    """Seen: with one 1M-row run in the runs folder the Volatility screen took 110 s to open.
    Listing the runs read each run's whole attempts file in Python (13.6 s for that run), and
    the rescan every 2 s started another read of it before the first had ended. A run is now
    listed from its manifest; its success is measured by the report's reader in a worker of
    its own, once, and again only when its rows changed and a measurement is due."""
    from tui_runs import RUN_B, write_run

    from driftdesk.analysis.run_success import (
        REMEASURE_AFTER_COSTS,
        last_measured,
        measure_success,
        success_to_measure,
    )
    from driftdesk.reruns.run_facts import run_facts
    from driftdesk.rundir.catalog import discover_runs

    run = write_run(runs_dir, "sandbox-sandbox-sim-20260102T100000Z", RUN_B, day=2)
    (info,) = discover_runs([runs_dir], run_facts())
    assert info.success is None and "attempts passed -" in info.details  # not read yet
    assert success_to_measure([(run, info.manifest)], 0.0) == [run]
    measure_success(run)
    (info,) = discover_runs([runs_dir], run_facts())
    assert info.success == 0.8  # 16 of 20 judged attempts passed
    measured = last_measured(run)
    assert measured is not None
    # rows unchanged: never again
    assert success_to_measure([(run, info.manifest)], measured.at + 3600) == []
    with open(run / "attempts.jsonl", "a") as fh:  # a run being written: one more row
        fh.write(json.dumps({"task_id": "arith-01", "attempt": 4, "outcome": "fail"}) + "\n")
    soon = measured.at + REMEASURE_AFTER_COSTS * measured.cost
    assert success_to_measure([(run, info.manifest)], soon - 1e-6) == []  # not due yet
    assert success_to_measure([(run, info.manifest)], soon) == [run]
    measure_success(run)
    (info,) = discover_runs([runs_dir], run_facts())
    assert info.success == 16 / 21


# A second start of the workbench, in a process of its own: how it lists the runs.
_LIST_RUNS = """
import sys
from pathlib import Path
from driftdesk.reruns.run_facts import run_facts
from driftdesk.rundir.catalog import discover_runs
for info in discover_runs([Path(sys.argv[1])], run_facts()):
    print(info.run_id, info.success)
"""


async def test_a_measured_success_is_listed_at_the_next_start_until_the_rows_change(
    home, runs_dir, make_app, settle
) -> None:  # type: ignore[no-untyped-def]
    """Seen: each start of the workbench read every run's rows again for its success (about
    2 s a million rows) and listed "success -" until then; with months of runs in one folder
    the list stayed blank for minutes at every start. What was measured is kept, keyed by the
    size and mtime of the rows' file, and measured again only when they changed."""
    import os
    import subprocess
    import sys

    from tui_runs import RUN_B, write_run

    run = write_run(runs_dir, "sandbox-sandbox-sim-20260102T100000Z", RUN_B, day=2)

    def next_start() -> str:
        return subprocess.run(
            [sys.executable, "-c", _LIST_RUNS, str(runs_dir)],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.strip()  # fmt: skip

    assert next_start() == f"{run.name} None"  # never measured
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        runs = app.screen.query_one("#runs", OptionList)
        assert "attempts passed 80%" in str(runs.get_option_at_index(0).prompt)  # 16 of 20 passed
    # The rows rewritten with every pass a fail and every fail a pass, in the same size and
    # mtime: a start that read them again would list 20 %.
    rows = run / "attempts.jsonl"
    before = rows.stat()
    text = rows.read_text()
    swapped = (
        text.replace('"pass"', '"PASS"').replace('"fail"', '"pass"').replace('"PASS"', '"fail"')
    )
    assert swapped != text and len(swapped) == len(text)
    rows.write_text(swapped)
    os.utime(rows, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert next_start() == f"{run.name} 0.8"
    # Changed rows (a newer mtime) are measured again, and that is what the next start lists.
    os.utime(rows)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        runs = app.screen.query_one("#runs", OptionList)
        assert "attempts passed 20%" in str(runs.get_option_at_index(0).prompt)
    assert next_start() == f"{run.name} 0.2"


def test_a_runs_manifest_is_read_again_only_when_it_changed(runs_dir) -> None:  # type: ignore[no-untyped-def]
    """Seen: the runs list is made again every 2 s, and it parsed every run's manifest each
    time: 0.5–0.7 s for 200 runs of 20,000 tasks (420 KB of JSON each), holding the GIL the
    UI thread needs. A manifest is parsed again only when its file changed."""
    import os

    from tui_runs import RUN_B, write_run

    from driftdesk.reruns.run_facts import run_facts
    from driftdesk.rundir.catalog import discover_runs

    run = write_run(runs_dir, "sandbox-sandbox-sim-20260102T100000Z", RUN_B, day=2)
    (info,) = discover_runs([runs_dir], run_facts())
    assert info.model == "sandbox-sim"
    # The same bytes count and mtime, another model: a list that parsed it again would say so.
    manifest = run / "manifest.json"
    before = manifest.stat()
    manifest.write_text(manifest.read_text().replace('"sandbox-sim"', '"sandbox-xyz"'))
    os.utime(manifest, ns=(before.st_atime_ns, before.st_mtime_ns))
    (info,) = discover_runs([runs_dir], run_facts())
    assert info.model == "sandbox-sim"
    os.utime(manifest)  # changed (a newer mtime): read again
    (info,) = discover_runs([runs_dir], run_facts())
    assert info.model == "sandbox-xyz"


def test_the_runs_list_does_not_hold_the_runs_task_lists(runs_dir) -> None:  # type: ignore[no-untyped-def]
    """Seen: the runs list kept every run's whole manifest, task list included: 200 runs of
    20,000 tasks held 340 MB in the app. Listing a run needs its suite, repeat, model and
    such, never its task list (the manifest file keeps it)."""
    import gc
    import tracemalloc

    from tui_runs import RUN_B, write_run

    from driftdesk.reruns.run_facts import run_facts
    from driftdesk.rundir.catalog import discover_runs

    tasks = [f"suite/task-{i:06d}" for i in range(20_000)]
    for day in range(1, 10):
        run = write_run(runs_dir, f"sandbox-sandbox-sim-2026010{day}T100000Z", RUN_B, day=day)
        manifest = json.loads((run / "manifest.json").read_text())
        (run / "manifest.json").write_text(json.dumps({**manifest, "tasks": tasks}))
    gc.collect()
    tracemalloc.start()
    try:
        runs = discover_runs([runs_dir], run_facts())
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(runs) == 9 and all(r.details.startswith("basic ×") for r in runs)
    # nine task lists of 20,000 ids are ~13 MB; the rest of nine listings, a few hundred KB
    assert held < 2_000_000, held


def test_a_store_of_measured_successes_that_does_not_parse_is_read_as_empty(home, runs_dir) -> None:  # type: ignore[no-untyped-def]
    """The store is a cache: one that does not parse never stops the runs list (its runs are
    measured again), and the next measurement replaces it."""
    from tui_runs import RUN_B, write_run

    from driftdesk.analysis import run_success
    from driftdesk.reruns.run_facts import run_facts
    from driftdesk.rundir.catalog import discover_runs

    run = write_run(runs_dir, "sandbox-sandbox-sim-20260102T100000Z", RUN_B, day=2)
    store = run_success.store_path()
    store.parent.mkdir(parents=True, exist_ok=True)
    entry = {"size": "big", "mtime_ns": 1, "success": 1.0}  # an entry that does not parse
    for garbage in (
        "{not json",
        json.dumps({"version": 1, "runs": {str(run.resolve()): entry}}),
        "[]",
    ):
        store.write_text(garbage)
        run_success.forget_measured()  # as a new start
        (info,) = discover_runs([runs_dir], run_facts())
        assert info.success is None
        assert run_success.success_to_measure([(run, info.manifest)], 0.0) == [run]
    run_success.measure_success(run)
    assert json.loads(store.read_text())["runs"][str(run.resolve())]["success"] == 0.8


def test_two_workbenches_measuring_at_once_keep_each_others_successes(home, runs_dir) -> None:  # type: ignore[no-untyped-def]
    """Seen: with two workbenches open, each saved the store from what it held, so one's
    measurements overwrote the other's (each run measured again at the next start). A save
    now merges with the store on disk, the newer measurement of a run winning."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from tui_runs import RUN_A, RUN_B, write_run

    from driftdesk.analysis import run_success

    x, y, z = (
        write_run(runs_dir, f"sandbox-sandbox-sim-2026010{day}T100000Z", outcomes, day=day)
        for day, outcomes in ((1, RUN_A), (2, RUN_B), (3, RUN_A))
    )
    other_workbench = (
        "import sys; from pathlib import Path; from driftdesk.analysis.run_success import "
        "measure_success; [measure_success(Path(run)) for run in sys.argv[1:]]"
    )

    def measured_elsewhere(*runs: Path) -> None:  # a process of its own, the same home
        subprocess.run([sys.executable, "-c", other_workbench, *map(str, runs)], check=True)

    assert os.environ["XDG_CACHE_HOME"].startswith(str(home.root))
    run_success.forget_measured()  # this workbench starts with no store
    run_success.measure_success(x)
    measured_elsewhere(y)
    # x's rows change and the other workbench measures it again (this one still holds the old)
    with open(x / "attempts.jsonl") as fh:
        rows = [json.loads(line) for line in fh]
    with open(x / "attempts.jsonl", "w") as fh:
        fh.writelines(json.dumps({**row, "outcome": "pass"}) + "\n" for row in rows)
    measured_elsewhere(x)
    run_success.measure_success(z)

    stored = json.loads(run_success.store_path().read_text())["runs"]
    assert sorted(stored) == sorted(str(run.resolve()) for run in (x, y, z))
    assert stored[str(x.resolve())]["success"] == 1.0  # the newer measurement of x
    assert stored[str(y.resolve())]["success"] == 0.8
    run_success.forget_measured()  # the next start lists all three as measured
    assert run_success.known_success(x) == 1.0
    assert run_success.success_to_measure([(run, None) for run in (x, y, z)], 0.0) == []
    # a deleted run leaves the store at the next save (the merge does not bring it back)
    shutil.rmtree(y)
    run_success.forget_measured()
    run_success.measure_success(z)
    stored = json.loads(run_success.store_path().read_text())["runs"]
    assert sorted(stored) == sorted(str(run.resolve()) for run in (x, z))


async def test_a_task_id_that_looks_like_markup_is_shown_as_it_is(
    home, runs_dir, make_app, settle
) -> None:  # type: ignore[no-untyped-def]
    """Task ids come from files: a DataTable reads a str cell as Rich markup, so "[b]x" showed
    as a bold "x" and "[/b]y" stopped the table with a markup error."""
    from tui_runs import write_run

    outcomes = {"[b]x": ["pass", "fail"], "[/b]y": ["pass", "pass"]}
    write_run(runs_dir, "sandbox-sandbox-sim-20260101T100000Z", outcomes)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = app.screen.query_one("#tasks", DataTable)
        assert table.row_count == 2
        # the lines under the header: the volatile task first
        assert "[b]x" in table.render_line(1).text and "[/b]y" in table.render_line(2).text


async def test_a_run_reached_by_a_symlink_has_its_report_built_once(
    home, runs_dir, make_app, settle, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """A run listed through a symlink (its list entry the path as listed, the screen's run the
    resolved one) was opened again when its entry was highlighted: two workers built the same
    report at once, each at half speed (seen: a 1M-row run shown after 1.4 s, not 0.9)."""
    from tui_runs import RUN_B, write_run

    from driftdesk.analysis import report

    built: list[str] = []
    real_build_report = report.build_report

    def counted(sources, **options):  # type: ignore[no-untyped-def]
        built.extend(str(source) for source in sources)
        return real_build_report(sources, **options)

    monkeypatch.setattr(report, "build_report", counted)
    elsewhere = home.project / "kept-runs"
    elsewhere.mkdir()
    run = write_run(elsewhere, "sandbox-sandbox-sim-20260102T100000Z", RUN_B, day=2)
    (runs_dir / run.name).symlink_to(run, target_is_directory=True)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, VolatilityScreen)
        assert screen.run_dir == run.resolve()  # opened at start
        assert screen.query_one("#tasks", DataTable).row_count > 0
        assert len(built) == 1, built
