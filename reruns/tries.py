"""Retrying a harness's whole try (command agent, client presets): a try that ended on a link
error worth retrying is counted, logged and waited out, then run again from scratch."""

from __future__ import annotations

import asyncio
from pathlib import Path

from driftdesk.reruns.agents import AgentResult, AttemptContext
from driftdesk.reruns.retry import is_retryable
from driftdesk.reruns.rundir import open_private


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
    ctx.retries += 1
    delay = ctx.policy.delay(ctx.retries, retry_after_s, ctx.rng)
    ctx.on_retry(ctx.retries, str(result.error_code), delay)
    with open_private(log_path, "a") as fh:
        fh.write(f"[driftdesk] {result.error_code}: retry {ctx.retries} in {delay:.2f}s\n")
    await asyncio.sleep(delay)
    return True
