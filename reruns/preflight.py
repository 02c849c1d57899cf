"""Before a run's first attempt: every check and refusal that runs before anything is written.

The profile and its key resolved, the tasks chosen (``select_tasks``), the agent kind able to
run them, a client installed, the executor reachable (Ray connected, its nodes asked for the
client), an adaptive design's price, a resumed run's suite unchanged; a refusal is a
``RunSetupError`` and leaves no run dir behind.

And the doctor's base-URL check and its live probe, once (``check_endpoint``): a run against
a closed port or a mangled URL would otherwise end "completed" with every attempt a connection
error. The checks are the doctor's own (``providers.doctor``): the same message, the same
advice. Only a transient answer (429, 5xx) lets the run start anyway: its retries are made for
that.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from driftdesk.providers.doctor import Check, check_base_url, probe_check, probe_endpoint
from driftdesk.providers.harness_env import pass_env_problem
from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.adaptive import AdaptiveDesign, AdaptivePolicy, DesignError
from driftdesk.reruns.agent_kinds import AGENT_KINDS, agent_kind, unknown_agent_message
from driftdesk.reruns.inspect_harness import InspectRunError, check_inspect_ready, inspect_suite
from driftdesk.reruns.isolation import IsolationUnavailable, check_isolation
from driftdesk.reruns.presets import preset_problem
from driftdesk.reruns.ray_executor import (
    EXECUTORS,
    RayCluster,
    RaySettings,
    RayUnavailable,
    check_address,
)
from driftdesk.reruns.run_spec import RunSetupError, RunSpec
from driftdesk.reruns.suites import Suite, builtin_suites, load_suite

PROBE_TIMEOUT_S = 10.0


class EndpointCheckFailed(ValueError):
    """The endpoint cannot serve this run (unreachable, refused, wrong URL); nothing was run."""

    def __init__(self, profile: str, checks: list[Check]) -> None:
        self.profile = profile
        self.checks = checks
        super().__init__(
            f"the endpoint of profile {profile!r} failed its check, so the run did not start: "
            + "; ".join(check.message for check in checks)
        )


def _transient(status: int | None) -> bool:
    return status is not None and (status == 429 or status >= 500)


async def check_endpoint(
    profile: Profile, key: str | None, timeout: float = PROBE_TIMEOUT_S
) -> list[str]:
    """Raise ``EndpointCheckFailed`` when the endpoint cannot serve a run; return notices for
    what is worth saying but does not stop it (a model not listed, a 429 or 5xx right now)."""
    url_errors = [check for check in check_base_url(profile) if check.level == "error"]
    if url_errors:
        raise EndpointCheckFailed(profile.name, url_errors)
    result = await probe_endpoint(profile, key, timeout)
    check = probe_check(profile, result)
    if check.level == "error" and not _transient(result.status):
        raise EndpointCheckFailed(profile.name, [check])
    if check.level == "ok":
        return []
    return [f"endpoint check: {check.message}"]


def resolve_profile(profile: str | Profile) -> Profile:
    if isinstance(profile, Profile):
        profile.validate()
        return profile
    found = ProfileStore().get(profile)
    problem = pass_env_problem(found.pass_env)  # hand-written in the TOML file
    if problem:
        raise RunSetupError(f"profile {found.name!r}: {problem}")
    return found


def resolve_key(profile: Profile, override: str | None) -> str:
    if override:
        return override
    if profile.no_key:
        # A keyless endpoint: an unguessable stand-in the proxy never sends upstream, so the
        # scrubbing that looks for "the real key" still has something to look for.
        from secrets import token_urlsafe

        return "dd-keyless-" + token_urlsafe(24)
    from driftdesk.providers.keys import get_key

    return get_key(profile.name)


def select_tasks(spec: RunSpec, suite: Suite) -> list[str]:
    """The task ids to run, in suite order: --tasks, --only-failed/--only-volatile, --sample."""
    chosen = suite.task_ids
    if spec.tasks:
        known = set(chosen)
        unknown = [t for t in spec.tasks if t not in known]
        if unknown:
            raise RunSetupError(f"unknown task ids for suite {suite.name}: {', '.join(unknown)}")
        wanted = set(spec.tasks)
        chosen = [t for t in chosen if t in wanted]
    if spec.only_failed and spec.only_volatile:
        raise RunSetupError("use --only-failed or --only-volatile, not both")
    earlier = spec.only_failed or spec.only_volatile
    if earlier is not None:
        from driftdesk.analysis.selection import select_task_ids

        which: Literal["failed", "volatile"] = "failed" if spec.only_failed else "volatile"
        selected = set(select_task_ids([Path(earlier)], which=which))
        chosen = [t for t in chosen if t in selected]
        if not chosen:
            raise RunSetupError(f"no {which} tasks of suite {suite.name} in {earlier}")
    if spec.sample is not None:
        if spec.sample < 1:
            raise RunSetupError("--sample must be at least 1")
        picked = set(random.Random(spec.seed).sample(chosen, min(spec.sample, len(chosen))))
        chosen = [t for t in chosen if t in picked]
    return chosen


def check_agent(
    agent: str, command: str | None, suite: Suite, task_ids: list[str], isolate: bool = False
) -> None:
    kind = agent_kind(agent)
    if kind is None:
        raise RunSetupError(unknown_agent_message(agent))
    if isolate:
        problem = kind.isolation_problem()
        if problem is not None:
            raise RunSetupError(problem)
        try:
            check_isolation()
        except IsolationUnavailable as exc:
            raise RunSetupError(str(exc)) from None
    problem = kind.tasks_problem(command, suite, task_ids)
    if problem is not None:
        raise RunSetupError(problem)


def inspect_setup(spec: RunSpec, profile: Profile) -> tuple[Suite, list[str]]:
    """The inspect task file as a suite; its samples become the tasks once inspect ran."""
    if spec.sample is not None or spec.only_failed or spec.only_volatile:
        raise RunSetupError(
            "--agent inspect takes --tasks (sample ids), not --sample/--only-failed/--only-volatile"
        )
    try:
        check_inspect_ready(profile.protocol)
    except InspectRunError as exc:
        raise RunSetupError(str(exc)) from None
    return inspect_suite(spec.suite), []


def check_preset(agent: str, profile: Profile, executor: str = "local") -> None:
    """A client preset's client is installed and speaks the profile's protocol (before the
    run starts, so nothing is half-created). On Ray the client runs on the nodes, not here:
    they are asked once connected (``connect_executor``)."""
    preset = AGENT_KINDS[agent].preset
    if preset is None:
        return
    if executor == "ray":
        problem = preset.check_profile(profile.protocol)
    else:
        problem = preset_problem(preset, profile.protocol)
    if problem is not None:
        raise RunSetupError(problem)


def check_executor(executor: str, agent: str) -> None:
    if executor not in EXECUTORS:
        raise RunSetupError(f"unknown executor {executor!r}: use " + " or ".join(EXECUTORS))
    if executor == "ray" and AGENT_KINDS[agent].once_per_run:
        raise RunSetupError(
            "--agent inspect runs one inspect process for the whole run, with its own "
            "concurrency, and driftdesk reads its log live: it runs here (use --executor local)"
        )


def connect_executor(executor: str, settings: RaySettings, agent: str) -> RayCluster | None:
    """None for the local executor; for ``ray`` the cluster, connected (or a clear refusal
    before anything is written)."""
    check_executor(executor, agent)
    if executor == "local":
        return None
    try:
        check_address(settings.address)
        cluster = RayCluster(settings)
        cluster.connect()
    except (RayUnavailable, ValueError) as exc:
        raise RunSetupError(str(exc)) from None
    preset = AGENT_KINDS[agent].preset
    if preset is not None:
        try:
            lacking = cluster.nodes_without(preset.executable)
        except RayUnavailable as exc:  # the cluster failed while asked: refused, left closed
            cluster.close()
            raise RunSetupError(str(exc)) from None
        if lacking:
            cluster.close()
            raise RunSetupError(
                f"--agent {agent} on Ray runs `{preset.executable}` on the nodes; it is not on "
                f"the PATH of node(s) {', '.join(lacking)}: install it there with "
                f"{preset.install_hint} (the PATH the node was started with counts)"
            )
    return cluster


def adaptive_policy(
    manifest: dict[str, Any], profile: Profile, rows: list[dict[str, Any]]
) -> AdaptivePolicy:
    """The policy of an adaptive run's manifest, told the rows it already has; with a USD
    budget, the model's price (refused before anything runs if there is none)."""
    try:
        design = AdaptiveDesign.from_manifest(manifest["adaptive"])
    except DesignError as exc:
        raise RunSetupError(f"the run's adaptive design: {exc}") from None
    return AdaptivePolicy(
        design,
        [str(t) for t in manifest["tasks"]],
        rows,
        cost_of=row_cost(design, profile),
    )


def row_cost(design: AdaptiveDesign, profile: Profile) -> Callable[[dict[str, Any]], float] | None:
    """A row's cost in USD at the model's price, for a dollar budget (None without one);
    ``RunSetupError`` when the model has no price."""
    cost_of = None
    if design.budget_usd is not None:
        from driftdesk.analysis.prices import PriceTableError, load_prices, price_for

        try:
            price = price_for(profile.model, load_prices())
        except PriceTableError as exc:
            raise RunSetupError(str(exc)) from None
        if price is None:
            raise RunSetupError(
                f"--budget-usd needs a price for model {profile.model!r}: add it to the price "
                "table (driftdesk prices), or use --budget-attempts"
            )

        def cost_of(row: dict[str, Any]) -> float:
            return price.cost(
                int(row.get("prompt_tokens") or 0), int(row.get("completion_tokens") or 0)
            )

    return cost_of


def load_suite_for(manifest: dict[str, Any]) -> Suite:
    info = manifest.get("suite") or {}
    path = Path(str(info.get("path", "")))
    name = str(info.get("name", ""))
    if path.is_file():
        suite = load_suite(path)
    elif name in builtin_suites():
        suite = load_suite(name)  # the package moved (reinstalled): same built-in suite
    else:
        raise RunSetupError(f"the run's suite file {path} is gone; cannot resume")
    if info.get("sha256") and suite.sha256 != info["sha256"]:
        raise RunSetupError(
            f"suite {suite.path} changed since the run started (sha256 differs); resuming would "
            "mix two suites — start a new run instead"
        )
    return suite
