"""Starting a new run dir and resuming one: ``execute_run`` and ``resume_run``.

A new run passes its preflight (reruns/preflight.py), gets a fresh run dir and its manifest
(reruns/run_spec.py), then an ``Execution`` (reruns/execution.py) runs its slots. A resume
locks the run dir (``rundir.lock_run_dir``: a live run is never resumed twice), drops torn
last lines, works out the missing slots and appends a ``resumes`` entry, then runs them the
same way. A demo run, whose profile and sandbox lived only while the demo ran, is resumed
against a new sandbox like it (``reruns.demo.demo_stand_in``): the only demo case here.

Cancelling the task running ``execute_run``/``resume_run`` (Ctrl-C in the CLI, a worker
cancel in the TUI) cancels the in-flight attempts, marks the manifest ``interrupted`` and
re-raises ``CancelledError``; a ``RunFinished`` event is emitted first.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from driftdesk.fileio import JsonlProblem
from driftdesk.providers.harness_env import pass_env_problem
from driftdesk.providers.profiles import Profile, ProfileNotFound, ProfileStore
from driftdesk.reruns import rundir
from driftdesk.reruns.adaptive import AdaptivePolicy
from driftdesk.reruns.agent_kinds import AGENT_KINDS, agent_kind
from driftdesk.reruns.command_agent import kill_leftover_harnesses
from driftdesk.reruns.concurrency import Concurrency, concurrency_text
from driftdesk.reruns.demo import demo_stand_in
from driftdesk.reruns.events import RunListener
from driftdesk.reruns.execution import Execution, RunOutcome, cannot_write_run_dir
from driftdesk.reruns.injection import InjectionSpec, InjectSpecError, parse_inject
from driftdesk.reruns.preflight import (
    PROBE_TIMEOUT_S,
    adaptive_policy,
    check_agent,
    check_endpoint,
    check_executor,
    check_preset,
    connect_executor,
    inspect_setup,
    load_suite_for,
    resolve_key,
    resolve_profile,
    row_cost,
    select_tasks,
)
from driftdesk.reruns.ray_executor import RayCluster, RaySettings
from driftdesk.reruns.recording import RecordingSettings
from driftdesk.reruns.run_control import setting_now
from driftdesk.reruns.run_spec import (
    RunSettings,
    RunSetupError,
    RunSpec,
    check_run_spec,
    new_run_manifest,
)
from driftdesk.reruns.simulated_endpoint import SandboxServer
from driftdesk.reruns.suites import Suite, load_suite
from driftdesk.reruns.workspace import CHECK_RULE
from driftdesk.rundir import (
    INSPECT_LOG_DIR,
    create_run_dir,
    discard_unstarted_run_dir,
    drop_torn_tail,
    missing_folders,
    read_manifest,
    release_manifest_space,
    reserve_manifest_space,
    write_manifest,
)


async def _checkpoint() -> None:
    """Let the loop run between set-up steps (a big suite takes seconds to set up): a Ctrl-C or
    SIGTERM, which cancels the run's task, takes effect at the next step, not at the end."""
    await asyncio.sleep(0)
    await asyncio.sleep(0)


async def execute_run(spec: RunSpec, listener: RunListener | None = None) -> RunOutcome:
    """Start a new run dir and run every (task, attempt) slot (adaptive: the slots its policy
    hands out). Cancel the task to interrupt."""
    check_run_spec(spec)
    profile = resolve_profile(spec.profile)
    try:
        injection = parse_inject(spec.inject if spec.inject is not None else profile.inject)
    except InjectSpecError as exc:
        raise RunSetupError(str(exc)) from None
    notices: list[str] = []
    kind = agent_kind(spec.agent)
    if kind is not None and kind.once_per_run:
        suite, task_ids = inspect_setup(spec, profile)
    else:
        suite = load_suite(spec.suite)
        notices = suite.bad_lines(skip=spec.skip_bad_lines)
        await _checkpoint()
        task_ids = select_tasks(spec, suite)
    await _checkpoint()
    check_agent(spec.agent, spec.command, suite, task_ids, spec.isolate)
    if pass_env_problem(spec.pass_env):
        raise RunSetupError(str(pass_env_problem(spec.pass_env)))
    check_executor(spec.executor, spec.agent)
    check_preset(spec.agent, profile, spec.executor)
    if spec.adaptive is not None:
        row_cost(spec.adaptive, profile)  # a dollar budget needs a price: refused here
    await _checkpoint()
    real_key = resolve_key(profile, spec.api_key)
    if spec.probe:
        probe_key = None if profile.no_key else real_key
        notices += await check_endpoint(profile, probe_key, min(spec.timeout_s, PROBE_TIMEOUT_S))
    cluster = connect_executor(spec.executor, spec.ray, spec.agent)
    try:
        return await _execute_new_run(
            spec, profile, suite, task_ids, real_key, notices, cluster, listener, injection
        )
    finally:
        if cluster is not None:
            cluster.close()


async def _execute_new_run(
    spec: RunSpec,
    profile: Profile,
    suite: Suite,
    task_ids: list[str],
    real_key: str,
    notices: list[str],
    cluster: RayCluster | None,
    listener: RunListener | None,
    injection: InjectionSpec | None = None,
) -> RunOutcome:
    now = rundir.utc_now()
    made = missing_folders(Path(spec.out_dir))  # taken back if the run is refused
    try:
        run_id, run_dir = create_run_dir(Path(spec.out_dir), profile.name, profile.model, now)
    except OSError as exc:
        discard_unstarted_run_dir(None, made)
        raise RunSetupError(cannot_write_run_dir(Path(spec.out_dir), exc)) from None
    manifest = new_run_manifest(
        spec,
        run_id=run_id,
        profile=profile,
        suite=suite,
        task_ids=task_ids,
        started=now,
        client=await asyncio.to_thread(AGENT_KINDS[spec.agent].client_identity),
        executor=cluster.settings.manifest() if cluster is not None else {"kind": "local"},
        injection=injection,
    )
    lock = rundir.lock_run_dir(run_dir)
    try:
        policy = None
        if spec.adaptive is not None:
            policy = adaptive_policy(manifest, profile, [])
        return await _write_manifest_and_execute(
            Execution(
                run_dir=run_dir,
                manifest=manifest,
                suite=suite,
                profile=profile,
                real_key=real_key,
                listener=listener,
                notices=notices,
                cluster=cluster,
            ),
            policy,
            rundir.pending_slots(task_ids, spec.repeat, [], False),
        )
    except BaseException:
        # Refused (or interrupted) before its manifest was written: no run dir is left.
        discard_unstarted_run_dir(run_dir, made)
        raise
    finally:
        rundir.unlock_run_dir(lock)


async def _write_manifest_and_execute(
    execution: Execution, policy: AdaptivePolicy | None, slots: list[tuple[str, int]]
) -> RunOutcome:
    """What a new run and a resume share once the run dir is locked: the manifest written
    (with the space its last version needs held back), then the slots, or the adaptive
    design's, run. A manifest that cannot be written is a set-up error: nothing ran."""
    run_dir = execution.run_dir
    try:
        reserve_manifest_space(run_dir)
        write_manifest(run_dir, execution.manifest)
    except OSError as exc:
        release_manifest_space(run_dir)
        if execution.cluster is not None:
            execution.cluster.close()
        raise RunSetupError(cannot_write_run_dir(run_dir, exc)) from None
    if policy is not None:
        return await execution.run_adaptive(policy)
    return await execution.run(slots)


def _recorded_profile(manifest: dict[str, Any], stored: Profile | None) -> Profile:
    """The run's own endpoint, model and key header, even if the profile was edited since
    (runs from before the manifest said how the key travelled: the profile's way)."""
    auth_header = manifest.get("auth_header") or (stored.auth_header if stored else None)
    no_key = manifest.get("no_key")
    return Profile(
        name=str(manifest["profile"]),
        protocol=str(manifest["protocol"]),
        base_url=str(manifest["base_url"]),
        model=str(manifest["model"]),
        headers=stored.headers if stored else {},
        auth_header=str(auth_header) if auth_header else None,
        no_key=bool(stored.no_key if no_key is None and stored else no_key),
        record_bodies=stored.record_bodies if stored else None,
    )


async def resume_run(
    run_dir: Path,
    listener: RunListener | None = None,
    retry_link_errors: bool = False,
    *,
    api_key: str | None = None,
    profile: Profile | None = None,
    concurrency: Concurrency | None = None,
    probe: bool = False,
    executor: str | None = None,
    ray: RaySettings | None = None,
    link_faults: str | None = None,
) -> RunOutcome:
    """Run exactly the missing (task, attempt) slots of ``run_dir``; with
    ``retry_link_errors`` also the slots whose latest row is a link_error (the new row is
    appended later in the file and supersedes it: the last row per slot wins). ``executor``
    and ``ray`` default to the run's own (its manifest)."""
    run_dir = Path(run_dir)
    from driftdesk.rundir.remote_view import is_view

    if is_view(run_dir):  # a bucket's run read in place: its publisher resumes it (issue 51)
        raise RunSetupError(f"{run_dir} is a read-only view of a run in a bucket: resume its URL")
    manifest = read_manifest(run_dir)
    recorded_kind = agent_kind(str(manifest.get("agent")))
    if recorded_kind is not None and recorded_kind.once_per_run:
        raise RunSetupError(
            "an inspect run is not resumed by driftdesk: run `inspect eval-retry` on its log "
            f"({run_dir / INSPECT_LOG_DIR}), then `driftdesk import` that folder"
        )
    demo_sandbox: SandboxServer | None = None
    demo_note = ""
    if profile is None:
        try:
            stored: Profile | None = ProfileStore().get(str(manifest["profile"]))
        except ProfileNotFound:
            stored = None
        if stored is None:
            stand_in = await demo_stand_in(manifest)
            if stand_in is not None:
                demo_sandbox, profile, demo_note = stand_in
        if profile is None:
            profile = _recorded_profile(manifest, stored)
    try:
        lock = rundir.lock_run_dir(run_dir)  # before touching files: never under a live run
        try:
            suite = load_suite_for(manifest)
            await _checkpoint()
            notices: list[str] = [demo_note] if demo_note else []
            leftovers = kill_leftover_harnesses(str(manifest["run_id"]), run_dir)
            if leftovers:
                notices.append(
                    f"killed {leftovers} harness processes left by the run's last process"
                )
            for name in (rundir.ATTEMPTS, rundir.CALLS):
                try:
                    dropped = drop_torn_tail(run_dir / name)
                except OSError as exc:
                    raise RunSetupError(cannot_write_run_dir(run_dir, exc)) from None
                if dropped:
                    notices.append(
                        f"{name}: dropped a torn last line ({dropped} bytes) left by an interrupted writer"
                    )
            problems: list[JsonlProblem] = []
            rows = rundir.read_attempt_rows(run_dir, problems)
            await _checkpoint()
            notices.extend(f"{rundir.ATTEMPTS} {p} (skipped)" for p in problems)
            task_ids = [str(t) for t in manifest.get("tasks") or []]
            policy = None
            if manifest.get("adaptive"):
                # The design goes on from the rows: link errors are replaced anyway.
                policy = adaptive_policy(manifest, profile, rows)
                slots = []
                if retry_link_errors:
                    notices.append(
                        "an adaptive run gives a task a new attempt for each link error by "
                        "itself: --retry-link-errors changes nothing here"
                    )
            else:
                slots = rundir.pending_slots(
                    task_ids, int(manifest["repeat"]), rows, retry_link_errors
                )
            settings = RunSettings.from_manifest(manifest)
            agent = settings.agent
            check_agent(agent, settings.command, suite, task_ids, settings.isolate)
            ran_on = manifest.get("executor") or {"kind": "local"}
            executor = executor or str(ran_on.get("kind", "local"))
            check_preset(agent, profile, executor)
            real_key = resolve_key(profile, api_key)
            if probe and (slots or policy is not None):
                timeout = float(manifest.get("timeout_seconds", PROBE_TIMEOUT_S))
                probe_key = None if profile.no_key else real_key
                notices += await check_endpoint(profile, probe_key, min(timeout, PROBE_TIMEOUT_S))
            if ray is None and ran_on.get("kind") == "ray":
                ray = RaySettings.from_manifest(ran_on)
            cluster = connect_executor(executor, ray or RaySettings(), agent)
            # The run's own recording settings; a profile set to record no bodies since wins.
            recording = RecordingSettings.from_manifest(manifest)
            recording.bodies = recording.bodies and profile.records_bodies
            manifest["recording"] = recording.to_manifest()
            manifest["status"] = "running"
            if link_faults is not None:  # the resume's attempts go on in this mode
                manifest["link_faults"] = link_faults
            # The concurrency the user last left the run at (a retune by ctl or the workbench,
            # fixed or auto, outlives the run's process), unless this resume says otherwise.
            if concurrency is None:
                concurrency = setting_now(run_dir, settings.concurrency_setting)
            control = manifest.get("concurrency_control")
            control = control if isinstance(control, dict) else {}
            control.setdefault(
                "started_as",
                control.get("setting") or concurrency_text(settings.concurrency_setting),
            )
            control["setting"] = concurrency_text(concurrency)
            manifest["concurrency_control"] = control
            manifest.setdefault("resumes", []).append(
                {
                    "started_at": rundir.iso(rundir.utc_now()),
                    "retry_link_errors": retry_link_errors,
                    "slots": len(slots) if policy is None else None,  # adaptive: as it goes
                    "pid": os.getpid(),
                    "executor": cluster.settings.manifest() if cluster else {"kind": "local"},
                    # its attempts' client and check rule (the run's may be older)
                    "client": await asyncio.to_thread(AGENT_KINDS[agent].client_identity),
                    "check_rule": CHECK_RULE,
                    "link_faults": link_faults,  # None: the run's own
                }
            )
            return await _write_manifest_and_execute(
                Execution(
                    run_dir=run_dir,
                    manifest=manifest,
                    suite=suite,
                    profile=profile,
                    real_key=real_key,
                    listener=listener,
                    notices=notices,
                    cluster=cluster,
                    concurrency=concurrency,
                ),
                policy,
                slots,
            )
        finally:
            rundir.unlock_run_dir(lock)
    finally:
        if demo_sandbox is not None:
            await asyncio.to_thread(demo_sandbox.stop)


__all__ = ["execute_run", "resume_run"]
