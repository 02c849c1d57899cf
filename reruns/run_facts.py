"""The cores' ``RunFacts``: what the runs catalog (``driftdesk.rundir.catalog``, ground code)
asks of them about a run dir: whether a process still runs it and why it stopped
(``reruns.rundir``), whether its suite is still there (``reruns.suites``), its last measured
success (``analysis.run_success``) and its agent's label (``analysis.agent_identity``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from driftdesk.rundir import RunManifest
from driftdesk.rundir.catalog import RunFacts


def run_facts() -> RunFacts:
    from driftdesk.analysis.run_success import known_success
    from driftdesk.reruns.rundir import PROCESS_GONE, interruption_reason, is_live

    return RunFacts(
        is_live=lambda run_dir: _published_live(run_dir, is_live),
        interruption_reason=interruption_reason,
        process_gone=PROCESS_GONE,
        suite_available=_suite_available,
        known_success=known_success,
        agent_label=_agent_label,
    )


def _published_live(run_dir: Path, is_live: Any) -> bool:
    """A bucket's run read in place is live while its publisher's lock object is there (no
    local process holds a view); any other run, while a process holds its lock."""
    from driftdesk.rundir.remote_view import published_live

    held = published_live(run_dir)
    return is_live(run_dir) if held is None else held


def _suite_available(manifest: dict[str, Any]) -> bool:
    from driftdesk.reruns.suites import builtin_suites

    suite = RunManifest.from_json(manifest).suite  # {} unless an object
    path, name = suite.get("path"), suite.get("name")
    return bool(path and Path(str(path)).is_file()) or str(name) in builtin_suites()


def _agent_label(manifest: dict[str, Any]) -> str:
    from driftdesk.analysis.agent_identity import agent_identity
    from driftdesk.terminal import printable

    return printable(agent_identity(manifest).label, keep_newlines=False)
