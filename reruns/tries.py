"""Judging and retrying a try (builtin and command agents, client presets; here or on a Ray
node): a verdict reached over a broken link is a link error, and a try that ended on a link
error worth retrying is counted, logged and waited out, then run again from scratch."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.agents import AgentResult, AttemptContext
from driftdesk.reruns.call_verdicts import link_failure_verdict, unrecovered_link_failure
from driftdesk.reruns.events import RunEvent
from driftdesk.reruns.retry import RetryPolicy, is_retryable, too_long_message
from driftdesk.reruns.suites import Suite
from driftdesk.rundir import open_private

if TYPE_CHECKING:
    import aiohttp
    import openai

    from driftdesk.reruns.agent_kinds import AgentKind
    from driftdesk.reruns.proxy import MeteringProxy


@dataclass
class TryHost:
    """What a place where tries run (``LocalTries``, ``RayTries``) needs from its run: the
    run's settings, its proxy (started), and the run's ways to report and to write files."""

    run_dir: Path
    run_id: str
    suite: Suite
    profile: Profile
    real_key: str
    kind: AgentKind
    command: str | None
    isolate: bool
    timeout_s: float
    policy: RetryPolicy
    rng: random.Random
    proxy: MeteringProxy
    emit: Callable[[RunEvent], None]
    log_exception: Callable[[BaseException, str], None]
    # (ctx, log path, transcript path, transcript): the builtin agent's files, written redacted
    write_builtin_files: Callable[[AttemptContext, Path, Path, list[dict[str, Any]] | None], None]
    openai_client: openai.AsyncOpenAI | None = None
    http: aiohttp.ClientSession | None = None


async def retry_the_try(
    ctx: AttemptContext, result: AgentResult, retry_after_s: float | None, log_path: Path
) -> bool:
    """True when the try should run again (after the wait); False to keep ``result``."""
    if (
        result.outcome != "link_error"
        or not is_retryable(result.error_code)
        or ctx.retries >= ctx.policy.max_retries
    ):
        return False
    if ctx.policy.waits_too_long(retry_after_s):
        with open_private(log_path, "a") as fh:
            fh.write(
                f"[driftdesk] {too_long_message(result.error_code, retry_after_s, ctx.policy)}\n"
            )
        return False
    ctx.retries += 1
    delay = ctx.policy.delay(ctx.retries, retry_after_s, ctx.rng)
    ctx.on_retry(ctx.retries, str(result.error_code), delay)
    with open_private(log_path, "a") as fh:
        fh.write(f"[driftdesk] {result.error_code}: retry {ctx.retries} in {delay:.2f}s\n")
    await asyncio.sleep(delay)
    return True


def link_failure_overrides(result: AgentResult, calls: list[dict[str, Any]]) -> AgentResult:
    """A judged answer that came through an unrecovered link failure (the attempt's last call
    was cut short, refused, 5xx...) is a ``link_error``, whatever the harness concluded."""
    verdict = link_failure_verdict(result.outcome, calls)
    if verdict is not None:
        return AgentResult("link_error", error_code=verdict[0], error_message=verdict[1])
    # An agent that failed on the link (or crashed on what it got) is told apart by the proxy,
    # which saw the link itself: a cut body, invalid SSE, a redirect...
    failed = unrecovered_link_failure(calls)
    if failed is None:
        return result
    proxy_saw = str(failed["error_kind"])
    # The proxy's own verdict (a redirect it refused, invalid SSE, a body too large...) reaches
    # the agent as a 502: the row names what the proxy saw, not the 502 it made of it.
    if (
        result.outcome == "link_error"
        and not proxy_saw.isdigit()
        and result.error_code in ("502", "invalid_response")
    ):
        return AgentResult("link_error", error_code=proxy_saw, error_message=result.error_message)
    if (result.outcome, result.error_code) not in (
        ("link_error", "truncated"),
        ("link_error", "connection"),
        ("harness_error", "harness_crash"),
    ):
        return result
    return AgentResult(
        "link_error", error_code=str(failed["error_kind"]), error_message=result.error_message
    )
