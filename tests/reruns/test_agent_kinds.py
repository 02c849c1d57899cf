"""The agent kinds as objects: every --agent name has one, and each answers what the engine,
the tries and the Ray worker used to ask of its name."""

from __future__ import annotations

import pytest

from driftdesk.reruns.agent_kinds import AGENT_KINDS, agent_kind, unknown_agent_message
from driftdesk.reruns.presets import PRESETS
from driftdesk.reruns.run_spec import AGENTS
from driftdesk.reruns.suites import load_suite


def test_every_agent_name_has_one_kind() -> None:
    assert set(AGENT_KINDS) == set(AGENTS) == {"builtin", "command", "inspect", *PRESETS}
    assert agent_kind("import:tau2") is None
    assert "use builtin, command, inspect, claude-code or codex" in unknown_agent_message("x")


def test_each_kind_says_how_it_runs() -> None:
    kinds = {name: AGENT_KINDS[name] for name in AGENTS}
    assert [n for n, k in kinds.items() if k.in_process] == ["builtin"]
    assert [n for n, k in kinds.items() if k.once_per_run] == ["inspect"]
    assert [n for n, k in kinds.items() if k.runs_command] == ["command"]
    assert {n for n, k in kinds.items() if k.preset is not None} == set(PRESETS)
    for name, preset in PRESETS.items():
        assert kinds[name].preset is preset


def test_isolation_applies_to_a_harness_only() -> None:
    assert "runs inside driftdesk" in (AGENT_KINDS["builtin"].isolation_problem() or "")
    assert "runs once for the whole run" in (AGENT_KINDS["inspect"].isolation_problem() or "")
    for name in ("command", *PRESETS):
        assert AGENT_KINDS[name].isolation_problem() is None


@pytest.mark.parametrize(
    ("name", "command", "problem"),
    [
        ("command", None, "--agent command needs --command TEMPLATE"),
        ("command", "python h.py {task_id}", None),
        ("builtin", None, None),
        ("inspect", None, None),
    ],
)
def test_a_kind_refuses_what_it_cannot_run(
    name: str, command: str | None, problem: str | None
) -> None:
    suite = load_suite("basic")
    assert AGENT_KINDS[name].tasks_problem(command, suite, suite.task_ids) == problem
