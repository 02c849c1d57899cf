"""The real Claude Code and Codex, run by driftdesk through the metering proxy against an
upstream that streams the key three characters per event (test_stream_scrub.py's): each
parses every event the proxy re-encoded, and nothing it prints or driftdesk keeps holds the
key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from reruns_helpers import read_rows, write_suite
from test_stream_scrub import AFTER, BEFORE, REAL, KeyStreamer, _no_trace, upstream

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.secrets import mask_key
from tests.conftest import real_client

__all__ = ["upstream"]  # the fixture, shared


@pytest.fixture
def claude_on_path(home: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{real_client('claude').parent}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.timeout(300)
async def test_the_real_claude_code_reads_the_stream_and_never_holds_the_key(
    upstream: KeyStreamer, claude_on_path: None, tmp_path: Path
) -> None:
    # Claude Code joins the text_delta pieces into its answer and prints it: the real client
    # parses every event the proxy re-encoded, and what it prints has the key masked.
    suite = write_suite(tmp_path / "suite.jsonl", ["echo"])
    outcome = await execute_run(
        RunSpec(
            profile=Profile(
                name="up",
                protocol="anthropic",
                base_url=upstream.url.removesuffix("/v1"),
                model="claude-sonnet-4-5",
            ),
            suite=str(suite),
            repeat=1,
            timeout_s=120.0,
            out_dir=tmp_path / "runs",
            api_key=REAL,
            agent="claude-code",
            retry_policy=RetryPolicy(max_retries=0),
        )
    )
    assert upstream.received and set(upstream.received) == {REAL}
    [row] = read_rows(outcome.run_dir / "attempts.jsonl")
    assert row["outcome"] == "fail", row  # answered (not "42"), no link or harness error
    files = [p for p in outcome.run_dir.rglob("*") if p.is_file()]
    said = "\n".join(p.read_text("utf-8", "replace") for p in files if p.suffix != ".gz")
    _no_trace(said)
    assert BEFORE + mask_key(REAL) + AFTER in said  # Claude Code's own answer, as it joined it


@pytest.fixture
def codex_on_path(home: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{real_client('codex').parent}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.timeout(300)
async def test_the_real_codex_reads_the_stream_and_never_holds_the_key(
    upstream: KeyStreamer, codex_on_path: None, tmp_path: Path
) -> None:
    # Codex keeps the answer of response.output_item.done (the whole text in one event, masked
    # before events were read too): what this shows is that the real client parses every
    # event the proxy re-encoded, deltas included, and ends the turn.
    suite = write_suite(tmp_path / "suite.jsonl", ["echo"])
    outcome = await execute_run(
        RunSpec(
            profile=Profile(name="up", protocol="openai", base_url=upstream.url, model="gpt-5"),
            suite=str(suite),
            repeat=1,
            timeout_s=120.0,
            out_dir=tmp_path / "runs",
            api_key=REAL,
            agent="codex",
            retry_policy=RetryPolicy(max_retries=0),
        )
    )
    assert upstream.received and set(upstream.received) == {REAL}
    [row] = read_rows(outcome.run_dir / "attempts.jsonl")
    assert row["outcome"] == "fail", row
    files = [p for p in outcome.run_dir.rglob("*") if p.is_file()]
    said = "\n".join(p.read_text("utf-8", "replace") for p in files if p.suffix != ".gz")
    _no_trace(said)
    assert BEFORE + mask_key(REAL) + AFTER in said
