"""The agent kinds a run can use, one object each: what each needs and how it runs.

``builtin`` is driftdesk's own agent loop, in this process; ``command`` runs a user's harness
template per try; ``claude-code`` and ``codex`` run a real client binary (a ``ClientPreset``,
reruns/presets.py) per try; ``inspect`` runs one inspect_ai process for the whole run
(reruns/inspect_harness.py). The engine, the local and Ray tries and the Ray worker ask an
agent's kind these questions instead of testing its name.

A new agent kind is one more ``AgentKind`` here (and its try function where the tries run).
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from typing import TYPE_CHECKING

from driftdesk.reruns.command_agent import COMMAND_PLACEHOLDERS, render_command
from driftdesk.reruns.presets import PRESETS, ClientPreset, client_version

if TYPE_CHECKING:
    from driftdesk.reruns.suites import Suite


@dataclass(frozen=True)
class AgentKind:
    name: str
    # Runs inside driftdesk (a Python agent loop, its SDK client made once per run): there is
    # no harness process to isolate.
    in_process: bool = False
    # One process for the whole run, with its own concurrency (inspect): no slots to resume,
    # no Ray, no adaptive design, no per-attempt isolation.
    once_per_run: bool = False
    # A user's command template (--command) is the harness.
    runs_command: bool = False
    # A real client binary run per try (Claude Code, Codex).
    preset: ClientPreset | None = None

    def client_identity(self) -> dict[str, str | None]:
        """The manifest's ``client`` (``analysis.agent_identity`` reads it): a preset's client
        and the version its binary prints, inspect_ai's package version, driftdesk's own for
        the builtin agent; none for a command (a user's program)."""
        if self.preset is not None:
            return {"name": self.name, "version": client_version(self.preset)}
        if self.once_per_run:
            try:
                version: str | None = importlib.metadata.version("inspect-ai")
            except importlib.metadata.PackageNotFoundError:
                version = None
            return {"name": "inspect_ai", "version": version}
        if self.in_process:
            from driftdesk import __version__

            return {"name": "driftdesk", "version": __version__}
        return {"name": None, "version": None}

    @property
    def default_link_faults(self) -> str:
        """``--link-faults`` when neither the flag nor the profile says. ``absorb`` where a link
        error would end the whole try (Claude Code and Codex run with their own retries off;
        a command's harness may have none): every token before it would be paid again and
        the trajectory start over. ``retry`` for the builtin agent and inspect, which retry
        the failed call itself (per call, ``--max-retries``), keeping the trajectory: one
        retry layer, theirs."""
        return "retry" if self.in_process or self.once_per_run else "absorb"

    def isolation_problem(self) -> str | None:
        """Why ``--isolate`` (a harness under bubblewrap) does not apply to this kind."""
        if self.in_process:
            return "--isolate sandboxes a harness; the builtin agent runs inside driftdesk"
        if self.once_per_run:
            return (
                "--isolate sandboxes one harness per attempt; inspect runs once for the whole "
                "run and is not isolated"
            )
        return None

    def tasks_problem(self, command: str | None, suite: Suite, task_ids: list[str]) -> str | None:
        """Why this kind cannot run these tasks (or this command template), or None. A bad
        template raises its own ``ValueError`` (``render_command``)."""
        if self.once_per_run:
            return None
        if self.preset is not None:
            lacking = [t for t in task_ids if not suite.task(t).prompt_text]
            if lacking:
                return f"--agent {self.name} needs a prompt for every task; missing in: " + (
                    ", ".join(lacking[:5])
                )
            return None
        if self.runs_command:
            if not command:
                return "--agent command needs --command TEMPLATE"
            render_command(command, dict.fromkeys(COMMAND_PLACEHOLDERS, "x"))
            return None
        lacking = [t for t in task_ids if not suite.task(t).runnable_by_builtin]
        if lacking:
            return (
                "the builtin agent needs a prompt (or messages) and expected for every task; "
                f"missing in: {', '.join(lacking[:5])}"
            )
        return None


BUILTIN = AgentKind("builtin", in_process=True)
COMMAND = AgentKind("command", runs_command=True)
INSPECT = AgentKind("inspect", once_per_run=True)

AGENT_KINDS: dict[str, AgentKind] = {
    kind.name: kind
    for kind in (
        BUILTIN,
        COMMAND,
        INSPECT,
        *(AgentKind(name, preset=preset) for name, preset in PRESETS.items()),
    )
}


def agent_kind(name: str) -> AgentKind | None:
    """The kind of ``--agent name``; None for a name no run of ours has (an imported run's)."""
    return AGENT_KINDS.get(name)


def unknown_agent_message(name: str) -> str:
    return f"unknown agent {name!r}: use builtin, command, inspect, " + " or ".join(PRESETS)
