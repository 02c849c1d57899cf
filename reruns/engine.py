"""The rerun engine: every task of a suite run N times, bounded concurrency, honest retries.

Stub signatures first (the TUI codes against them); the implementation follows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from providers.profiles import Profile
from reruns.events import RunListener, RunStats


@dataclass
class RunSpec:
    profile: str | Profile
    suite: str  # a built-in suite name (``basic``) or a path to a suite JSONL file
    repeat: int = 5
    concurrency: int = 2
    timeout_s: float = 120.0
    tasks: list[str] | None = None
    sample: int | None = None
    seed: int = 0
    only_failed: Path | None = None
    only_volatile: Path | None = None
    out_dir: Path = field(default_factory=lambda: Path("runs"))
    agent: Literal["builtin", "command"] = "builtin"
    command: str | None = None
    # In-memory key override (the demo, when no keyring exists). Never written anywhere.
    api_key: str | None = field(default=None, repr=False)


@dataclass
class RunOutcome:
    run_dir: Path
    run_id: str
    status: str  # "completed" | "interrupted" | "failed"
    stats: RunStats


async def execute_run(spec: RunSpec, listener: RunListener | None = None) -> RunOutcome:
    """Start a new run dir and run every (task, attempt) slot. Cancel the task to interrupt."""
    raise NotImplementedError


async def resume_run(
    run_dir: Path, listener: RunListener | None = None, retry_link_errors: bool = False
) -> RunOutcome:
    """Run exactly the missing (task, attempt) slots of ``run_dir`` (and link_error ones)."""
    raise NotImplementedError
