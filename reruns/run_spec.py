"""The run spec: what a run is asked to do, its refusals, and its one manifest serialisation.

``RunSpec`` is what the CLI, the TUI's launch form and the demo build. ``check_run_spec`` holds
the refusals a spec meets before anything else is looked at (no profile, no suite yet).
``new_run_manifest`` writes a new run's manifest from its spec, and ``RunSettings`` reads the
same settings back from a manifest: a rerun (``RunSpec.rerun_of``) and an execution (a fresh
run or a resume, reruns/execution.py) both read through it, with one set of defaults.

A new manifest is built as a ``RunManifest`` (driftdesk/rundir) and serialised by its
``to_json``: the one serialisation of a manifest, the keys in the order written here.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from driftdesk import __version__
from driftdesk.paths import rerun_dir, runs_dir
from driftdesk.reruns import rundir
from driftdesk.reruns.adaptive import AdaptiveDesign
from driftdesk.reruns.agent_kinds import AGENT_KINDS, agent_kind
from driftdesk.reruns.concurrency import (
    AutoBounds,
    Concurrency,
    ConcurrencyError,
    concurrency_text,
    parse_concurrency,
    start_of,
)
from driftdesk.reruns.injection import InjectionSpec
from driftdesk.reruns.link_absorb import MANIFEST_DEFAULT_LINK_FAULTS, link_faults_problem
from driftdesk.reruns.ray_executor import RaySettings
from driftdesk.reruns.recording import (
    DEFAULT_MAX_RECORDED_MB,
    RecordingSettings,
    max_recorded_mb_problem,
)
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.workspace import CHECK_RULE
from driftdesk.rundir import RunManifest

if TYPE_CHECKING:
    from driftdesk.providers.profiles import Profile
    from driftdesk.reruns.suites import Suite

AgentName = Literal["builtin", "command", "inspect", "claude-code", "codex"]
AGENTS: tuple[AgentName, ...] = get_args(AgentName)

# Attempts at once for a run against a real provider: low, so a new key's rate limit is not
# hit at once (the demo's sandbox has none and runs 8). The CLI and the launch form offer it.
DEFAULT_CONCURRENCY = 2

# What a manifest that does not say gets. An imported run's manifest has ``concurrency: None``
# and its rerun has always run 4 at once; a run of ours always records its own. The repeat,
# timeout and seed defaults are the spec's.
MANIFEST_DEFAULT_CONCURRENCY = 4
DEFAULT_REPEAT = 5
DEFAULT_TIMEOUT_S = 120.0


class RunSetupError(ValueError):
    """A run that cannot start as asked (bad spec, unknown tasks, changed suite...)."""


@dataclass
class RunSpec:
    profile: str | Profile
    suite: str  # a built-in suite name (``basic``) or a path to a suite JSONL file
    repeat: int = DEFAULT_REPEAT
    # N, or the controller's bounds (``--concurrency auto[:MIN-START-MAX]``, reruns/concurrency.py)
    concurrency: Concurrency = DEFAULT_CONCURRENCY
    timeout_s: float = DEFAULT_TIMEOUT_S
    tasks: list[str] | None = None
    sample: int | None = None
    seed: int = 0
    only_failed: Path | None = None
    only_volatile: Path | None = None
    out_dir: Path = field(default_factory=lambda: Path("runs"))
    agent: AgentName = "builtin"
    command: str | None = None
    isolate: bool = False  # run the harness under bubblewrap (reruns/isolation.py)
    # Variables (names or globs) of ours a harness gets beyond the allow-list (--pass-env;
    # providers/harness_env.py). The manifest keeps the names, never a value.
    pass_env: list[str] = field(default_factory=list)
    # In-memory key override (the demo, when no keyring exists). Never written anywhere.
    api_key: str | None = field(default=None, repr=False)
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    # Lines of the suite file that cannot be read: refused unless told to leave them out.
    skip_bad_lines: bool = False
    # Check the endpoint once (the doctor's probe) before the first attempt; off for tests that
    # script every request the endpoint gets.
    probe: bool = False
    # Where attempts run: here, or as Ray tasks on a cluster (reruns/ray_executor.py).
    executor: Literal["local", "ray"] = "local"
    ray: RaySettings = field(default_factory=RaySettings)
    # Call recordings (reruns/recording.py): off with --no-bodies (or the profile's
    # record_bodies = false); the per-slot cap in MiB of compressed bytes, 0: none.
    record_bodies: bool = True
    max_recorded_mb: float = DEFAULT_MAX_RECORDED_MB
    # Fault injection at the proxy (reruns/injection.py): ``429=5%,500=2%``...; None: the
    # profile's ``inject`` setting; "none": no faults whatever the profile says.
    inject: str | None = None
    # Link faults before the first byte (reruns/link_absorb.py): "absorb" (held at the proxy,
    # sent again) or "retry" (the whole try); None: the profile's, else the agent kind's.
    link_faults: str | None = None
    # Adaptive reruns (reruns/adaptive.py): None, every task runs ``repeat`` times.
    adaptive: AdaptiveDesign | None = None

    @classmethod
    def rerun_of(
        cls,
        manifest: dict[str, Any],
        tasks: list[str],
        source: Path | None,
        *,
        profile: str | Profile | None = None,
        out_dir: Path | None = None,
        api_key: str | None = None,
    ) -> RunSpec:
        """A new run of ``tasks`` under the conditions the run of ``manifest`` recorded (suite,
        repeats or adaptive design, concurrency, timeout, seed, agent, command, isolation,
        retry policy, executor),
        beside
        its ``source`` run dir unless ``out_dir`` says otherwise."""
        settings = RunSettings.from_manifest(manifest)
        suite = manifest.get("suite") or {}
        # An imported run ("import:tau2"...) has no agent of ours: its tasks rerun built in.
        agent: AgentName = next((a for a in AGENTS if a == settings.agent), "builtin")
        if out_dir is None:
            out_dir = rerun_dir(source) if source is not None else runs_dir()
        ran_on = manifest.get("executor") or {"kind": "local"}
        on_ray = ran_on.get("kind") == "ray"
        recording = RecordingSettings.from_manifest(manifest)
        injection = InjectionSpec.from_manifest(manifest)
        return cls(
            profile=profile or str(manifest.get("profile")),
            suite=str(suite.get("path") or suite.get("name") or "basic"),
            repeat=settings.repeat,
            concurrency=settings.concurrency_setting,
            timeout_s=settings.timeout_s,
            tasks=list(tasks),
            seed=settings.seed,
            out_dir=out_dir,
            agent=agent,
            command=settings.command,
            isolate=settings.isolate,
            pass_env=list(settings.pass_env),
            api_key=api_key,
            retry_policy=RetryPolicy.from_manifest(manifest),
            probe=True,
            executor="ray" if on_ray else "local",
            ray=RaySettings.from_manifest(ran_on) if on_ray else RaySettings(),
            record_bodies=recording.bodies,
            max_recorded_mb=recording.max_recorded_mb,
            inject=injection.text() if injection is not None else "none",
            link_faults=settings.link_faults,
            adaptive=(
                AdaptiveDesign.from_manifest(manifest["adaptive"])
                if isinstance(manifest.get("adaptive"), dict)
                else None
            ),
        )


@dataclass(frozen=True)
class RunSettings:
    """A run's settings as its manifest recorded them, with the one set of defaults for what a
    manifest leaves out (an imported run's, an older run's)."""

    agent: str
    command: str | None
    isolate: bool
    pass_env: tuple[str, ...]
    repeat: int
    concurrency: int  # the fixed number, or where ``auto`` started
    timeout_s: float
    seed: int
    link_faults: str  # "absorb" | "retry"
    # the bounds of ``--concurrency auto`` (``concurrency_control``); None: fixed
    auto: AutoBounds | None = None

    @property
    def concurrency_setting(self) -> Concurrency:
        return self.auto if self.auto is not None else self.concurrency

    @classmethod
    def from_manifest(cls, manifest: dict[str, Any]) -> RunSettings:
        command = manifest.get("command")
        concurrency = int(manifest.get("concurrency") or MANIFEST_DEFAULT_CONCURRENCY)
        control = manifest.get("concurrency_control")
        auto = None
        if isinstance(control, dict) and isinstance(control.get("setting"), str):
            with contextlib.suppress(ConcurrencyError):  # unreadable: the number, as before
                setting = parse_concurrency(control["setting"])
                auto = setting if isinstance(setting, AutoBounds) else None
                if isinstance(setting, int):  # retuned to a number: it holds, as auto does
                    concurrency = setting
        return cls(
            agent=str(manifest.get("agent", "builtin")),
            command=str(command) if command is not None else None,
            isolate=bool(manifest.get("isolate", False)),
            pass_env=tuple(str(n) for n in manifest.get("pass_env") or ()),
            repeat=int(manifest.get("repeat") or DEFAULT_REPEAT),
            concurrency=concurrency,
            timeout_s=float(manifest.get("timeout_seconds") or DEFAULT_TIMEOUT_S),
            seed=int(manifest.get("seed") or 0),
            link_faults=str(manifest.get("link_faults") or MANIFEST_DEFAULT_LINK_FAULTS),
            auto=auto,
        )


def check_run_spec(spec: RunSpec) -> None:
    """The refusals a spec meets on its own, before its profile or suite is looked at."""
    kind = agent_kind(spec.agent)
    if spec.adaptive is not None and kind is not None and kind.once_per_run:
        raise RunSetupError(
            "--adaptive chooses each next attempt; --agent inspect runs one inspect process "
            "for the whole run"
        )
    if spec.repeat < 1:
        raise RunSetupError("--repeat must be at least 1")
    try:
        parse_concurrency(spec.concurrency)  # a number >= 1, or bounds (checked when parsed)
    except ConcurrencyError as exc:
        raise RunSetupError(str(exc)) from None
    if spec.timeout_s <= 0:
        raise RunSetupError("--timeout must be positive")
    problem = link_faults_problem(spec.link_faults)
    if problem is not None:
        raise RunSetupError(problem)
    problem = max_recorded_mb_problem(spec.max_recorded_mb)
    if problem is not None:
        raise RunSetupError(problem)


def suite_manifest(suite: Suite) -> dict[str, Any]:
    return {"path": str(suite.path), "name": suite.name, "sha256": suite.sha256}


def new_run_manifest(
    spec: RunSpec,
    *,
    run_id: str,
    profile: Profile,
    suite: Suite,
    task_ids: list[str],
    started: datetime,
    client: dict[str, Any] | None,
    executor: dict[str, Any],
    injection: InjectionSpec | None,
) -> dict[str, Any]:
    """A new run's manifest, as written before its first attempt (key order is the file's)."""
    fields: dict[str, Any] = {
        "run_id": run_id,
        "profile": profile.name,
        "protocol": profile.protocol,
        "base_url": profile.base_url,
        "model": profile.model,
        # How the key travelled (never the key): resume sends it the same way.
        "auth_header": profile.auth,
        "no_key": profile.no_key,
        "suite": suite_manifest(suite),
        # adaptive: the first round every task gets (the rest follow the design)
        "repeat": spec.adaptive.min_repeats if spec.adaptive else spec.repeat,
        "concurrency": start_of(spec.concurrency),  # where auto starts
        # how the concurrency ran (reruns/concurrency.py): the setting now, the limit's range,
        # rate-limit episodes and every retune (the execution fills it in at the end)
        "concurrency_control": {"setting": concurrency_text(spec.concurrency)},
        "timeout_seconds": spec.timeout_s,
        "agent": spec.agent,
        # the client behind the agent and its version (analysis.agent_identity reads it)
        "client": client,
        "check_rule": CHECK_RULE,  # how a task's check exit became an outcome
        "command": spec.command,
        "isolate": spec.isolate,
        "pass_env": list(spec.pass_env),  # names and globs only, never a value
        "executor": executor,
        "seed": spec.seed,
        "sample": spec.sample,
        "selection": (
            {"only_failed": str(spec.only_failed)}
            if spec.only_failed
            else {"only_volatile": str(spec.only_volatile)}
            if spec.only_volatile
            else None
        ),
        "tasks": task_ids,
        "retry_policy": spec.retry_policy.to_manifest(),
        # R_fault means another thing under absorbing: compare and trend read this.
        "link_faults": (
            spec.link_faults or profile.link_faults or AGENT_KINDS[spec.agent].default_link_faults
        ),
        "recording": RecordingSettings(
            bodies=spec.record_bodies and profile.records_bodies,
            max_recorded_mb=spec.max_recorded_mb,
        ).to_manifest(),
        "driftdesk_version": __version__,
        "started_at": rundir.iso(started),
        "ended_at": None,
        "status": "running",
        "resumes": [],
    }
    if injection is not None:  # a run without injection has no such key at all
        fields["injection"] = injection.to_manifest()
    if AGENT_KINDS[spec.agent].once_per_run:
        fields["inspect"] = {"sample_ids": spec.tasks}
    if spec.adaptive is not None:
        fields["adaptive"] = spec.adaptive.to_manifest()
    return RunManifest.from_json(fields).to_json()
