"""One attempt never sinks the run: a huge prompt, a result path turned into a directory, a
harness flooding its output, a provider speaking broken SSE, a redirect past the proxy, a
``Retry-After: nan``. Real subprocesses and real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import random
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from reruns_helpers import ScriptedEndpoint, read_rows, write_suite

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.command_agent import MAX_LOG_BYTES
from driftdesk.reruns.retry import RetryPolicy, parse_retry_after
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.rundir import attempt_folder

KEY = "sk-test-REALKEY-attempts-0123456789"


def _command_spec(tmp_path: Path, url: str, suite: Path, command: str, repeat: int = 1) -> RunSpec:
    return RunSpec(
        profile=Profile(name="p", protocol="openai", base_url=url, model="m"),
        suite=str(suite),
        repeat=repeat,
        timeout_s=60,
        out_dir=tmp_path / "runs",
        agent="command",
        command=command,
        api_key=KEY,
        retry_policy=RetryPolicy(max_retries=0),
    )


async def test_a_200_kb_prompt_reaches_the_harness_by_file(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    # Seen: the prompt in the environment made every exec fail with "Argument list too long".
    prompt = "".join(random.Random(1).choice("abcdefgh ") for _ in range(200_000))
    suite = tmp_path / "big.jsonl"
    suite.write_text(json.dumps({"task_id": "big", "prompt": prompt}) + "\n")
    script = tmp_path / "read_prompt.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, os, sys
            with open(os.environ["DRIFTDESK_PROMPT_FILE"]) as fh:
                prompt = fh.read()
            with open(sys.argv[2]) as fh:
                same = json.loads(fh.read())["prompt"] == prompt
            with open(sys.argv[1], "w") as fh:
                json.dump({"success": same and len(prompt) == 200_000
                           and "DRIFTDESK_PROMPT" not in os.environ}, fh)
            """
        )
    )
    outcome = await execute_run(
        _command_spec(
            tmp_path,
            scripted.url,
            suite,
            f"{sys.executable} {script} {{result_path}} {suite}",
        )
    )
    (row,) = read_rows(outcome.run_dir / "attempts.jsonl")
    assert row["outcome"] == "pass", row


async def test_a_result_path_turned_into_a_directory_is_that_attempts_harness_error(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    suite = write_suite(tmp_path / "suite.jsonl", ["a", "b"])
    outcome = await execute_run(
        _command_spec(tmp_path, scripted.url, suite, "mkdir {result_path}", repeat=2)
    )
    assert outcome.status == "completed"
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert len(rows) == 4
    assert {(r["outcome"], r["error_code"]) for r in rows} == {("harness_error", "no_result")}
    assert "is a directory" in str(rows[0]["error_message"])


async def test_two_million_lines_of_output_are_capped_in_the_log(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    script = tmp_path / "flood.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, sys
            line = "flood " * 4 + "\\n"
            for _ in range(20):
                sys.stdout.write(line * 100_000)
            sys.stdout.flush()
            with open(sys.argv[1], "w") as fh:
                json.dump({"success": True}, fh)
            """
        )
    )
    suite = write_suite(tmp_path / "suite.jsonl", ["flood"])
    outcome = await execute_run(
        _command_spec(tmp_path, scripted.url, suite, f"{sys.executable} {script} {{result_path}}")
    )
    (row,) = read_rows(outcome.run_dir / "attempts.jsonl")
    assert row["outcome"] == "pass"
    log = attempt_folder(outcome.run_dir, "flood") / "0.log"
    assert log.stat().st_size < MAX_LOG_BYTES + 64 * 1024
    text = log.read_text()
    assert "log capped at" in text
    kept = text.count("[stdout] flood")
    tail = text.rsplit("[driftdesk] not logged: ", 1)[1]
    dropped = int(tail.split()[0])
    # Every line is kept or counted (the cut line itself may be split across chunks).
    assert abs(kept + dropped - 2_000_000) <= 1


# --- the builtin agent against a misbehaving provider -----------------------------------------


class Upstreams:
    """A provider that misbehaves per task (the prompt names how), and a second server on
    another port that a redirect points to: it must never be reached."""

    def __init__(self) -> None:
        self.elsewhere_hits = 0
        self.url = ""
        self.elsewhere = ""
        self._runners: list[web.AppRunner] = []

    async def _serve(self, app: web.Application) -> str:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    async def start(self) -> None:
        other = web.Application()
        other.router.add_post("/v1/chat/completions", self.answer_elsewhere)
        other.router.add_post("/v1/messages", self.answer_elsewhere)
        self.elsewhere = await self._serve(other)
        main = web.Application()
        main.router.add_post("/v1/chat/completions", self.misbehave)
        main.router.add_post("/v1/messages", self.misbehave)
        self.url = await self._serve(main) + "/v1"

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()

    async def answer_elsewhere(self, request: web.Request) -> web.StreamResponse:
        self.elsewhere_hits += 1
        if request.path.endswith("/messages"):
            return web.json_response(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "text", "text": "42"}],
                }
            )
        chunk = {
            "id": "x",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": "42"}, "finish_reason": "stop"}],
        }
        return web.Response(
            body=f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n",
            content_type="text/event-stream",
        )

    async def misbehave(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        text = json.dumps(body.get("messages"))
        if "redirect" in text:
            raise web.HTTPTemporaryRedirect(f"{self.elsewhere}{request.path}")
        # Broken SSE: an event whose data is not JSON, then a clean end.
        return web.Response(
            body=b'data: {"id": "x", "choices": [{"delta": {"content": "4\n\ndata: [DONE]\n\n',
            content_type="text/event-stream",
        )


@pytest.fixture
async def upstreams() -> AsyncIterator[Upstreams]:
    servers = Upstreams()
    await servers.start()
    yield servers
    await servers.stop()


async def _builtin_rows(tmp_path: Path, profile: Profile, task: str) -> list[dict[str, Any]]:
    """Rows of two builtin-agent attempts of ``task`` against ``profile``, no retries."""
    outcome = await execute_run(
        RunSpec(
            profile=profile,
            suite=str(write_suite(tmp_path / "suite.jsonl", [task])),
            repeat=2,
            out_dir=tmp_path / "runs",
            api_key=KEY,
            retry_policy=RetryPolicy(max_retries=0),
        )
    )
    return read_rows(outcome.run_dir / "attempts.jsonl")


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
async def test_the_builtin_agent_does_not_follow_a_redirect_past_the_proxy(
    upstreams: Upstreams, tmp_path: Path, protocol: str
) -> None:
    # Anthropic base URLs stop before /v1 (the agent adds /v1/messages).
    base_url = upstreams.url.removesuffix("/v1") if protocol == "anthropic" else upstreams.url
    rows = await _builtin_rows(tmp_path, Profile("p", protocol, base_url, "m"), "redirect")
    # The metering proxy refuses the redirect (it never follows one) and says so.
    assert [(r["outcome"], r["error_code"]) for r in rows] == [("link_error", "redirect")] * 2, [
        (r["error_code"], r["error_message"]) for r in rows
    ]
    assert upstreams.elsewhere_hits == 0


async def test_invalid_sse_from_the_provider_is_a_link_error(
    upstreams: Upstreams, tmp_path: Path
) -> None:
    rows = await _builtin_rows(tmp_path, Profile("p", "openai", upstreams.url, "m"), "broken-sse")
    # The metering proxy sees the broken stream first and names it.
    assert [(r["outcome"], r["error_code"]) for r in rows] == [("link_error", "invalid_sse")] * 2


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e999"])
def test_a_retry_after_that_is_no_number_cannot_bypass_the_delay_cap(value: str) -> None:
    policy = RetryPolicy(max_retries=3, base_delay_s=0.5, max_delay_s=2.0)
    for header in ("Retry-After", "retry-after-ms"):
        after = parse_retry_after({header: value})
        delay = policy.delay(1, after, random.Random(0))
        assert 0.0 <= delay <= 2.0, (header, after, delay)
    # Even a non-finite value handed straight to the policy stays within the cap.
    assert 0.0 <= policy.delay(2, float("nan"), random.Random(0)) <= 2.0
