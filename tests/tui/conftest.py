"""Fixtures for driving the workbench with Textual's Pilot in a throwaway home."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from textual.widgets import DataTable

from driftdesk.tui.app import DriftdeskApp

SIZE = (140, 42)


@pytest.fixture
def runs_dir(home) -> Path:  # type: ignore[no-untyped-def]
    path = home.project / "runs"
    path.mkdir()
    return path


@pytest.fixture
def make_app(home, runs_dir: Path):  # type: ignore[no-untyped-def]
    """A workbench whose new runs go to ``runs_dir`` and that lists only runs from there."""

    def make(**kwargs: object) -> DriftdeskApp:
        kwargs.setdefault("out_dir", runs_dir)
        kwargs.setdefault("runs_dirs", [runs_dir])
        kwargs.setdefault("blink", False)
        return DriftdeskApp(**kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture
def settle():  # type: ignore[no-untyped-def]
    return _settle


@pytest.fixture
def open_launch_form():  # type: ignore[no-untyped-def]
    """``await open_launch_form(app, pilot, repeat="2", ...)``: press n on the Run screen and
    fill the launch form's fields (widget id -> value); returns the form."""
    from driftdesk.tui.screens.launch import LaunchScreen

    async def open_form(app: DriftdeskApp, pilot, **fields: str) -> LaunchScreen:  # type: ignore[no-untyped-def]
        await _settle(app, pilot)
        await pilot.press("n")
        await _settle(app, pilot)
        form = app.screen
        assert isinstance(form, LaunchScreen)
        for widget_id, value in fields.items():
            form.query_one(f"#{widget_id}").value = value  # type: ignore[attr-defined]
        return form

    return open_form


def _busy(app: DriftdeskApp) -> bool:
    workers = [
        w for w in app.workers if w.group != "runs" and (w.is_running or w.state.name == "PENDING")
    ]
    # DataTables measure new rows on their next idle: until then columns are header-wide.
    tables = [t for t in app.screen.query(DataTable) if t._require_update_dimensions]
    return bool(workers or tables)


async def _settle(app: DriftdeskApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """Wait until no worker (other than runs) is pending or running and the screen's tables
    are measured — twice in a row, since a finished worker's message can start another."""
    from textual.worker import WorkerCancelled, WorkerFailed

    quiet = 0
    for _ in range(200):
        await pilot.pause()
        if _busy(app):
            quiet = 0
            busy = [w for w in app.workers if w.group != "runs" and w.is_running]
            if busy:
                # an exclusive worker replaced by a newer one ends cancelled: fine here
                with contextlib.suppress(WorkerFailed, WorkerCancelled):
                    await app.workers.wait_for_complete(busy)
            else:
                await pilot.pause(0.01)
            continue
        quiet += 1
        if quiet == 2:
            break


# -- fixed run dirs (the documented run-dir layout, deterministic content) ----------------------

# task -> outcomes of attempts 0..n-1 ("pass", "fail", "link_error:429", ...)
RUN_A: dict[str, list[str]] = {
    "arith-01": ["pass", "pass", "pass", "pass"],
    "arith-02": ["pass", "fail", "pass", "fail"],
    "lookup-01": ["fail", "fail", "fail", "fail"],
    "format-01": ["pass", "link_error:429", "pass", "fail"],
    "travel-2_1": ["pass", "pass", "pass", "pass"],
}
RUN_B: dict[str, list[str]] = {
    "arith-01": ["pass", "pass", "pass", "pass"],
    "arith-02": ["pass", "pass", "pass", "pass"],
    "lookup-01": ["fail", "pass", "fail", "fail"],
    "format-01": ["pass", "pass", "pass", "pass"],
    "travel-2_1": ["pass", "fail", "pass", "pass"],
}


def write_run(runs_dir: Path, run_id: str, outcomes: dict[str, list[str]], day: int = 1) -> Path:
    """A completed run dir as the engine writes it (manifest, attempts.jsonl, transcripts)."""
    import json

    run_dir = runs_dir / run_id
    (run_dir / "attempts").mkdir(parents=True)
    tasks = list(outcomes)
    repeat = max(len(v) for v in outcomes.values())
    started = f"2026-01-0{day}T10:00:00Z"
    manifest = {
        "run_id": run_id,
        "profile": "sandbox",
        "protocol": "openai",
        "base_url": "http://127.0.0.1:1/v1",
        "model": "sandbox-sim",
        "suite": {"path": None, "name": "basic", "sha256": "0" * 64},
        "repeat": repeat,
        "concurrency": 2,
        "timeout_seconds": 30,
        "agent": "builtin",
        "command": None,
        "seed": 0,
        "tasks": tasks,
        "driftdesk_version": "0.1.0",
        "started_at": started,
        "ended_at": f"2026-01-0{day}T10:05:00Z",
        "status": "completed",
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    lines = []
    for t_index, task in enumerate(tasks):
        for attempt, spec in enumerate(outcomes[task]):
            outcome, _, code = spec.partition(":")
            judged = outcome in ("pass", "fail")
            tokens = None if not judged else 100 + 10 * t_index + attempt
            row = {
                "run_id": run_id,
                "task_id": task,
                "scenario_id": None,
                "attempt": attempt,
                "outcome": outcome,
                "success": (outcome == "pass") if judged else None,
                "score": (1.0 if outcome == "pass" else 0.0) if judged else None,
                "error_code": code or None,
                "error_message": f"HTTP {code} from the provider" if code else None,
                "retries": 1 if code else 0,
                "calls": 1,
                "prompt_tokens": None if tokens is None else tokens - 20,
                "completion_tokens": None if tokens is None else 20,
                "total_tokens": tokens,
                "latency_ms": 200.0 + 15 * t_index + 3 * attempt,
                "started_at": f"2026-01-0{day}T10:0{attempt}:00Z",
                "ended_at": f"2026-01-0{day}T10:0{attempt}:01Z",
                "model": "sandbox-sim",
                "base_url": "http://127.0.0.1:1/v1",
            }
            lines.append(json.dumps(row))
            folder = run_dir / "attempts" / task
            folder.mkdir(exist_ok=True)
            transcript = [
                {"role": "user", "content": f"Solve task {task}."},
                {"role": "assistant", "content": f"Answer for {task}, attempt {attempt}."},
            ]
            (folder / f"{attempt}.transcript.json").write_text(json.dumps(transcript))
    (run_dir / "attempts.jsonl").write_text("\n".join(lines) + "\n")
    return run_dir


@pytest.fixture
def run_writer():  # type: ignore[no-untyped-def]
    """``write(runs_dir, run_id, which)`` with which "A" or "B": a fixed run dir anywhere."""

    def write(base: Path, run_id: str, which: str) -> Path:
        return write_run(
            base, run_id, RUN_A if which == "A" else RUN_B, day=1 if which == "A" else 2
        )

    return write


@pytest.fixture
def fixture_runs(runs_dir: Path) -> tuple[Path, Path]:
    return (
        write_run(runs_dir, "sandbox-sandbox-sim-20260101T100000Z", RUN_A, day=1),
        write_run(runs_dir, "sandbox-sandbox-sim-20260102T100000Z", RUN_B, day=2),
    )


# -- the real sandbox endpoint and a profile pointing at it --------------------------------------


@pytest.fixture
def sandbox(home):  # type: ignore[no-untyped-def]
    """The simulated endpoint on 127.0.0.1 (zero latency) and a ``sandbox`` profile for it."""
    from driftdesk.providers.profiles import Profile, ProfileStore
    from driftdesk.reruns.sandbox import SIM_MODEL, SandboxServer

    server = SandboxServer(latency_ms=0.0)
    server.start()
    ProfileStore().save(
        Profile(name="sandbox", protocol="openai", base_url=server.base_url, model=SIM_MODEL)
    )
    yield server
    server.stop()


@pytest.fixture
def wait_for_run():  # type: ignore[no-untyped-def]
    return _wait_for_run


async def _wait_for_run(app: DriftdeskApp, pilot, live) -> None:  # type: ignore[no-untyped-def]
    """Wait for the worker executing ``live`` (``live.worker``) to end, then let the UI catch up.

    Waits on that one worker: ``app.workers.wait_for_complete([])`` (a run that already ended
    has left the manager) waits on *every* worker, and an exclusive refresh worker replaced by
    a newer one ends cancelled — that, not the run, was the "cancelled run" seen under load.
    A cancelled run worker fails the test here."""
    from textual.worker import WorkerFailed

    assert live.worker is not None, "the run was not started through the app"
    try:
        await live.worker.wait()
    except WorkerFailed:
        # a run that failed: the test looks at how it was reported
        assert live.status == "failed", live.status
    await pilot.pause()
    assert live.finished, live.status
