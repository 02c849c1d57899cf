"""What ``driftdesk run`` and ``resume`` say around a run: the next commands a user usually
types, why nothing was judged, what became of injected faults, a sandbox that did not know the
suite, why a resumed run had stopped or why there is nothing to resume. The run's manifest and
attempt rows are each read once for all of it; paths are shown as the user would type them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from driftdesk.terminal import printable, printable_path


def read_once(run_dir: Path) -> Callable[[], list[dict[str, Any]]]:
    """A run's attempt rows, read at the first call and kept; a read that failed raises the
    same error again at each call (as each of the reads it replaces did)."""
    from driftdesk.reruns.rundir import read_attempt_rows

    kept: list[list[dict[str, Any]] | OSError] = []

    def rows() -> list[dict[str, Any]]:
        if not kept:
            try:
                kept.append(read_attempt_rows(run_dir, []))
            except OSError as exc:
                kept.append(exc)
        if isinstance(kept[0], OSError):
            raise kept[0]
        return kept[0]

    return rows


def injection_line(
    manifest: dict[str, Any], attempt_rows: Callable[[], list[dict[str, Any]]]
) -> str | None:
    """What became of the faults a run injected (None: it injected none)."""
    from driftdesk.analysis.injection_report import (
        injection_summary,
        manifest_injection_spec,
        summary_line,
    )

    if not manifest.get("injection"):
        return None
    try:
        rows = attempt_rows()
    except OSError:
        return None
    return summary_line(injection_summary(rows, manifest_injection_spec(manifest)))


def sandbox_did_not_know(
    run_dir: Path, manifest: dict[str, Any], rows: list[dict[str, Any]]
) -> str | None:
    """One line when the sandbox answered placeholders: it was started without this suite."""
    from driftdesk.reruns.simulated_endpoint import tasks_it_did_not_know

    unknown = tasks_it_did_not_know(run_dir, rows)
    if not unknown:
        return None
    tasks = len(manifest.get("tasks") or []) or len(unknown)
    suite = suite_argument(manifest.get("suite")) or "FILE"
    return (
        f"driftdesk: the sandbox does not know {len(unknown)} of {tasks} tasks (it answered a "
        f"placeholder, so they fail): restart it with driftdesk sandbox --suite {suite}"
    )


def all_harness_errors(run_dir: Path, done: int, rows: list[dict[str, Any]]) -> str:
    """Why nothing was judged: the harness broke; its most common message and one log."""
    from driftdesk.reruns.rundir import most_common_error

    common = most_common_error(run_dir, "harness_error", rows)
    lines = [
        f"driftdesk: no attempt of {done} was judged: the harness broke "
        f"{common.of if common else 'every'} of them (harness_error), so this run measures "
        "nothing about the model."
    ]
    if common is not None:
        lines.append(f"  most common ({common.count} of {common.of}): {common.message}")
        lines.append(f"  its log: {shown(common.log)}")
    lines.append(f"  every error: driftdesk report {shown(run_dir)}")
    return "\n".join(lines)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def shown(path: Path) -> str:
    """A path as the user would type it: relative to the current folder when under it; its
    control characters (a folder can be named anything) escaped, inert on a terminal."""
    try:
        return printable_path(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return printable_path(path)


def manifest_or_empty(run_dir: Path) -> dict[str, Any]:
    from driftdesk.rundir import read_manifest

    try:
        return read_manifest(run_dir)
    except (OSError, ValueError):
        return {}


def next_commands(run_dir: Path, manifest: dict[str, Any] | None = None) -> str:
    """What a user usually does after a run: read it, rerun what wobbled, compare, browse
    (``manifest``: the run's, when the caller has read it already)."""
    here = shown(run_dir)
    if manifest is None:
        manifest = manifest_or_empty(run_dir)
    lines = ["next:", f"  driftdesk report {here}   # the per-task numbers"]
    suite = suite_argument(manifest.get("suite"))
    # With one repeat no task can show both a pass and a fail: nothing can be volatile.
    if manifest.get("profile") and suite and int(manifest.get("repeat") or 0) > 1:
        lines.append(
            f"  driftdesk run --profile {manifest['profile']} --suite {suite} "
            f"--only-volatile {here}   # rerun the tasks that wobbled"
        )
    earlier = earlier_run(Path(run_dir))
    if earlier is not None:
        lines.append(f"  driftdesk compare {shown(earlier)} {here}   # against the run before")
    lines.append(
        f"  driftdesk tui --runs {shown(Path(run_dir).parent)}   # browse it in the workbench"
    )
    return printable("\n".join(lines))  # the manifest's profile name too


def suite_argument(suite: object) -> str | None:
    """How to name the run's suite on the command line: a built-in by name, a file by path."""
    from driftdesk.reruns.suites import builtin_suites

    if not isinstance(suite, dict):
        return None
    name, path = suite.get("name"), suite.get("path")
    builtin = builtin_suites().get(str(name))
    if builtin is not None and (not path or Path(str(path)).resolve() == builtin.resolve()):
        return str(name)
    return shown(Path(str(path))) if path else None


def earlier_run(run_dir: Path) -> Path | None:
    """The newest other run dir beside ``run_dir`` (by its manifest's start time)."""
    from driftdesk.rundir.catalog import manifest_of, run_dirs_in

    best: tuple[str, Path] | None = None
    try:
        siblings = run_dirs_in(run_dir.parent)
    except OSError:
        return None
    for sibling in siblings:
        if sibling.resolve() == run_dir.resolve():
            continue
        started = str((manifest_of(sibling) or {}).get("started_at") or "")
        if best is None or started > best[0]:
            best = (started, sibling)
    return None if best is None else best[1]


def say_why_it_stopped(run_dir: Path) -> None:
    """Before resuming: why the run stopped (a manifest that could not be read is the
    engine's to report)."""
    from driftdesk.reruns import rundir
    from driftdesk.rundir import read_manifest

    try:
        reason = rundir.interruption_reason(run_dir, read_manifest(run_dir))
    except (OSError, ValueError):
        return
    if reason:
        why = reason.removeprefix("stopped: ")
        print(printable(f"driftdesk: resuming; the run had stopped: {why}"), file=sys.stderr)


def nothing_to_resume(run_dir: Path, retry_link_errors: bool) -> str | None:
    """What to say when every slot of ``run_dir`` already has its row (None: there is work, or
    the run dir cannot be read, which ``resume_run`` then reports)."""
    from driftdesk.reruns import rundir

    manifest = manifest_or_empty(run_dir)
    if not manifest.get("tasks") or manifest.get("status") == "running":
        return None
    if manifest.get("agent") == "inspect":
        return None  # resume_run refuses it, pointing at inspect's own eval-retry
    if manifest.get("adaptive"):
        stopped = (manifest["adaptive"].get("result") or {}).get("stop_reason")
        if not stopped:
            return None  # the design goes on: the policy decides what is left
        return f"nothing to resume: the adaptive run is done ({stopped}).\n" + next_commands(
            run_dir
        )
    try:
        rows = rundir.read_attempt_rows(run_dir, [])
        tasks = [str(t) for t in manifest["tasks"]]
        repeat = int(manifest.get("repeat") or 0)
    except (OSError, TypeError, ValueError):
        return None
    if rundir.pending_slots(tasks, repeat, rows, retry_link_errors):
        return None
    what = "every attempt has its row" + (" and none is a link error" if retry_link_errors else "")
    return f"nothing to resume: {what} ({manifest.get('status')}).\n" + next_commands(run_dir)
