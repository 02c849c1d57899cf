"""Following runs another process executes (``driftdesk run`` in a terminal, another
workbench): found in the runs folders by their manifest ("running") and their lock (held), then
tailed into a ``LiveRun`` as if their engine's events came here — the manifest gives the run's
tasks and design, new calls.jsonl lines the calls (an attempt's first call starts it),
new attempts.jsonl lines the finished attempts, new control.jsonl lines its concurrency limit
and pause (as ``reruns.run_control`` reads them: the Run screen shows them and steps from them,
as for this app's own runs); the run ends when its manifest says so or
nobody holds its lock any more. Everything here runs on a worker thread; only complete lines
are read (a line being written is read on the next poll)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from driftdesk.reruns.events import (
    AttemptEnded,
    AttemptFinished,
    AttemptStarted,
    CallRecorded,
    RunFinished,
    RunStarted,
)
from driftdesk.reruns.run_control import ControlReplay
from driftdesk.rundir import ATTEMPTS_FILE, CALLS_FILE, CONTROL_FILE, read_manifest
from driftdesk.rundir.catalog import manifest_of, run_dirs_in
from driftdesk.tui.state import AttemptKey, LiveRun

FOLLOWED_LABEL = "started elsewhere"
FINISHED = ("completed", "interrupted", "failed")


def _manifest(run_dir: Path) -> dict[str, Any] | None:
    try:
        return read_manifest(run_dir)
    except (OSError, ValueError):
        return None


def run_spec_summary(manifest: dict[str, Any]) -> dict[str, Any]:
    """What the Run screen shows of a run's design, from its manifest (the engine's
    ``RunStarted.spec`` has the same keys)."""
    suite = manifest.get("suite")
    control = manifest.get("concurrency_control")
    return {
        "profile": manifest.get("profile"),
        "model": manifest.get("model"),
        "base_url": manifest.get("base_url"),
        "suite": suite.get("name") if isinstance(suite, dict) else suite,
        "agent": manifest.get("agent"),
        "client": manifest.get("client"),
        "concurrency": manifest.get("concurrency"),
        # the setting the run runs at ("4", "auto:1-4-64"); control.jsonl says when it changes
        "concurrency_setting": control.get("setting") if isinstance(control, dict) else None,
        "adaptive": manifest.get("adaptive"),
        "executor": manifest.get("executor"),
    }


class RunFollower:
    """One run dir tailed into ``live`` (``poll()`` on a worker thread, again and again)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.live = LiveRun(label=FOLLOWED_LABEL, run_dir=run_dir)
        self.live.followed = True
        self._offsets = {ATTEMPTS_FILE: 0, CALLS_FILE: 0, CONTROL_FILE: 0}
        self._control: ControlReplay | None = None
        self._running: set[AttemptKey] = set()
        self._begun = False

    def poll(self) -> None:
        live = self.live
        if live.finished:
            return
        from driftdesk.reruns.rundir import is_live

        manifest = _manifest(self.run_dir)
        if manifest is None:
            return
        if not self._begun:
            self._begin(manifest)
        status = str(manifest.get("status") or "running")
        # Decided before the last lines are read: lines written before the end are read below.
        ending = status in FINISHED or not is_live(self.run_dir)
        for call in self._new_lines(CALLS_FILE):
            key = (str(call.get("task_id")), int(call.get("attempt") or 0))
            if key not in self._running:
                self._running.add(key)
                live.on_event(AttemptStarted(live.run_id, *key))
            live.on_event(CallRecorded(live.run_id, key[0], key[1], call))
        for row in self._new_lines(ATTEMPTS_FILE):
            key = (str(row.get("task_id")), int(row.get("attempt") or 0))
            if key in self._running:
                self._running.discard(key)
                live.on_event(AttemptEnded(live.run_id, *key))
            live.on_event(AttemptFinished(live.run_id, row))
        if self._control is not None:
            for event in self._control.events(self._new_lines(CONTROL_FILE)):
                live.on_event(event)
        if ending:
            final = status if status in FINISHED else "interrupted"
            live.on_event(RunFinished(live.run_id, final, live.stats))
            if final != "completed" and not live.error:
                live.error = f"{live.run_id}: {final} (it was started elsewhere)"

    def _begin(self, manifest: dict[str, Any]) -> None:
        tasks = tuple(str(t) for t in manifest.get("tasks") or ())
        repeat = int(manifest.get("repeat") or 0)
        design = manifest.get("adaptive")
        per_task = int(design.get("max_repeats") or repeat) if isinstance(design, dict) else repeat
        self.live.on_event(
            RunStarted(
                run_id=str(manifest.get("run_id") or self.run_dir.name),
                run_dir=self.run_dir,
                spec=run_spec_summary(manifest),
                task_ids=tasks,
                repeat=repeat,
                total_attempts=len(tasks) * per_task,
            )
        )
        self._control = ControlReplay(self.live.run_id)
        self._begun = True

    def _new_lines(self, name: str) -> list[dict[str, Any]]:
        """The complete lines appended to ``name`` since the last read, parsed (bad ones
        skipped: the report names them)."""
        path = self.run_dir / name
        try:
            with open(path, "rb") as fh:
                fh.seek(self._offsets[name])
                data = fh.read()
        except OSError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self._offsets[name] += end + 1
        rows = []
        for line in data[: end + 1].splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                rows.append(row)
        return rows


class RunWatch:
    """Finds runs to follow in ``runs_dirs``: a "running" manifest whose lock some process
    holds, not one of ``known`` (this app's own runs). A run is followed on the second look
    that finds it so: this app's own new run is known only once its child says where it
    writes, a moment after its manifest is on disk."""

    def __init__(self, runs_dirs: list[Path]) -> None:
        self.runs_dirs = runs_dirs
        self.followers: dict[Path, RunFollower] = {}
        self._candidates: set[Path] = set()

    def look(self, known: set[Path], waiting: bool) -> tuple[list[RunFollower], list[RunFollower]]:
        """The new followers and the followers whose run ended on this look (every follower
        is polled). ``waiting``: one of this app's runs has not said its run dir yet, so
        nothing new is followed on this look."""
        from driftdesk.reruns.rundir import is_live

        found: list[RunFollower] = []
        running: set[Path] = set()
        for base in self.runs_dirs:
            try:
                run_dirs = run_dirs_in(base)
            except OSError:
                continue
            for run_dir in run_dirs:
                # parsed again only when its file changed (the catalog keeps it)
                if (manifest_of(run_dir) or {}).get("status") == "running":
                    running.add(run_dir.resolve())
        fresh = {
            d
            for d in running
            if d not in known
            and (d not in self.followers or self.followers[d].live.finished)  # resumed again
            and is_live(d)
        }
        if not waiting:
            for run_dir in sorted(fresh & self._candidates):
                follower = self.followers[run_dir] = RunFollower(run_dir)
                found.append(follower)
        self._candidates = fresh
        ended: list[RunFollower] = []
        for follower in self.followers.values():
            if not follower.live.finished:
                follower.poll()
                if follower.live.finished:
                    ended.append(follower)
        return found, ended
