"""Which agent made a run: its kind (the manifest's ``agent``) and the client behind it.

A run's manifest records the agent kind (``builtin``, ``command``, ``claude-code``, ``codex``,
``inspect``, ``import:<format>``) and, since runs name their client, ``client``:
``{"name": ..., "version": ...}`` read once per run (``claude --version``, ``codex --version``,
inspect_ai's package metadata, driftdesk's own version for the builtin agent; a command agent
has no known client: both null). A manifest from before has no ``client``: read as unknown.
Reports, compare and trend show ``AgentIdentity.label``; trend keeps one series per kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from driftdesk.rundir import RunManifest

UNKNOWN_KIND = "?"


@dataclass(frozen=True)
class AgentIdentity:
    kind: str  # the manifest's ``agent``; "?" when it has none
    client: str | None = None  # the client's name ("claude-code", "codex", "inspect_ai"...)
    version: str | None = None  # the client's version, as the client said it
    recorded: bool = False  # the manifest has a ``client`` (False: a run from before)

    @property
    def label(self) -> str:
        """One short line: ``claude-code 2.1.332``, ``builtin (driftdesk 0.1.0)``,
        ``command``, ``codex (client unknown)``."""
        if not self.recorded:
            return f"{self.kind} (client unknown)"
        if self.client is None:
            return self.kind
        shown = f"{self.client} {self.version or '(version unknown)'}"
        return shown if self.client == self.kind else f"{self.kind} ({shown})"

    @property
    def client_label(self) -> str:
        """The client and version alone (``2.1.332`` style figures compared by compare)."""
        if not self.recorded:
            return "client unknown"
        if self.client is None:
            return "no client"
        return f"{self.client} {self.version or '(version unknown)'}"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "client": self.client,
            "version": self.version,
            "recorded": self.recorded,
        }


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def agent_identity(manifest: dict[str, Any] | None) -> AgentIdentity:
    """The identity a manifest records (an unknown kind and client for none)."""
    typed = RunManifest.from_json(manifest if isinstance(manifest, dict) else {})
    kind = typed.agent or UNKNOWN_KIND
    client = typed.client
    if client is None:
        return AgentIdentity(kind)
    return AgentIdentity(kind, _text(client.get("name")), _text(client.get("version")), True)


def identity_differences(a: AgentIdentity, b: AgentIdentity) -> list[str]:
    """What differs between two runs' agents, as words (empty: the same agent, or a client
    unknown on a side, which is not a difference anyone can see)."""
    if a.kind != b.kind:
        return [f"agent {a.label} vs {b.label}"]
    if a.recorded and b.recorded and (a.client, a.version) != (b.client, b.version):
        return [f"client {a.client_label} vs {b.client_label}"]
    return []


def identity_from_json(data: dict[str, Any] | None) -> AgentIdentity:
    """An ``AgentIdentity.to_json()`` read back (a report's or trend's ``agent``)."""
    data = data if isinstance(data, dict) else {}
    return AgentIdentity(
        _text(data.get("kind")) or UNKNOWN_KIND,
        _text(data.get("client")),
        _text(data.get("version")),
        bool(data.get("recorded")),
    )


def identity_label(data: dict[str, Any] | None) -> str:
    """The label of an ``AgentIdentity.to_json()``."""
    return identity_from_json(data).label
