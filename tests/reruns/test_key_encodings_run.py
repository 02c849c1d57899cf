"""A whole run whose tool result and answer hold the real key in every encoding redaction must
find leaves none of them anywhere: not in any file of the run dir (recordings decompressed),
not in ``explain --json``, not in what ``run`` prints.

The real CLI runs the builtin agent against a real upstream on loopback. The task's canned tool
result is what ``base64`` (76 columns, at each alignment) and ``xxd -p`` (60 columns) print of a
``.env`` file holding the key; the upstream answers with the key it received (the real one)
written with each ``-`` as ``\\u002d`` (the six characters, and that escaped once more), in
upper-case hex, URL-encoded and in wrapped base64, streamed 5 characters per event."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import sys
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from reruns_helpers import LoopbackServer, read_rows
from test_secrets_encodings import key_recoverable

from driftdesk.providers.keys import set_key
from driftdesk.providers.profiles import Profile, ProfileStore

KEY = "sk-e2e-Wr4p+Key/0123456789-abcdefXYZ"
TASK = "read-env"


def _wrapped(text: str, width: int) -> str:
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


def _env_file(lead: str, key: str) -> bytes:
    return f"# app\nDEBUG=1\n{lead}OPENAI_API_KEY={key}\nREGION=eu-west-1\n".encode()


def tool_output(key: str) -> str:
    """What a shell tool prints of the ``.env`` file: base64 at each alignment, xxd -p."""
    parts = []
    for lead in ("", "x", "xy"):
        parts.append(
            f"$ base64 .env{lead}\n" + _wrapped(base64.b64encode(_env_file(lead, key)).decode(), 76)
        )
    parts.append("$ xxd -p .env\n" + _wrapped(_env_file("", key).hex(), 60))
    return "\n".join(parts) + "\n"


def answer(key: str) -> str:
    """The model's answer holding the key it was sent, in encodings the proxy does not mask."""
    return (
        f"Found it: {key.replace('-', chr(92) + 'u002d')} (escaped), "
        f"{key.replace('-', chr(92) * 2 + 'u002d')} (escaped twice), "
        f"{key.encode().hex().upper()} (hex), {urllib.parse.quote(key, safe='')} (url), "
        f"and wrapped:\n{_wrapped(base64.b64encode(key.encode()).decode(), 20)}\nDone."
    )


class EchoingModel(LoopbackServer):
    """Chat Completions: first the task's tool is called, then the answer holds the key."""

    url_suffix = "/v1"

    def __init__(self) -> None:
        super().__init__()
        self.received: list[str] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self.chat)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        self.received.append(key)
        head = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return b"data: " + json.dumps({**head, "choices": [choice]}).encode() + b"\n\n"

        called = any(m.get("role") == "tool" for m in body["messages"])
        events = [chunk({"role": "assistant", "content": ""})]
        if not called:
            call = {"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": "read_env", "arguments": "{}"}}  # fmt: skip
            events += [chunk({"tool_calls": [call]}), chunk({}, "tool_calls")]
        else:
            text = answer(key)
            events += [chunk({"content": text[i : i + 5]}) for i in range(0, len(text), 5)]
            events.append(chunk({}, "stop"))
        usage = {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
        events += [
            b"data: " + json.dumps({**head, "choices": [], "usage": usage}).encode() + b"\n\n"
        ]
        events.append(b"data: [DONE]\n\n")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in events:
            await response.write(event)
        await response.write_eof()
        return response


@pytest.fixture
async def model() -> AsyncIterator[EchoingModel]:
    server = EchoingModel()
    await server.start()
    yield server
    await server.stop()


def _suite(path: Path) -> Path:
    task = {
        "task_id": TASK,
        "prompt": "Print the .env file and tell me what is in it.",
        "tools": [
            {
                "name": "read_env",
                "description": "prints the .env file, encoded",
                "parameters": {"type": "object", "properties": {}},
                "results": {"*": tool_output(KEY)},
            }
        ],
        "expected": {"equals": "Done."},
    }
    path.write_text(json.dumps(task) + "\n")
    return path


def _text_of(path: Path) -> str:
    """A file's text; a log's, each stream's lines joined without their "[stdout] " labels
    after the file as it is (a reader strips them as easily)."""
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    text = data.decode("utf-8", "replace")
    if path.suffix == ".log":
        lines = text.splitlines()
        for label in ("[stdout] ", "[stderr] "):
            text += "\n" + "\n".join(x[len(label) :] for x in lines if x.startswith(label))
    return text


def test_the_encodings_here_give_the_key_back() -> None:
    # The checks below could fail: each input holds the key, recoverably, in its encodings.
    found = key_recoverable(tool_output(KEY), KEY)
    assert "base64" in found and "hex" in found
    assert KEY not in answer(KEY) and key_recoverable(answer(KEY), KEY)
    assert "verbatim or url-encoded" in key_recoverable(json.dumps(answer(KEY)), KEY)


@pytest.mark.keyring
async def test_a_run_keeps_no_encoding_of_the_key_in_any_file_or_output(
    home: object, model: EchoingModel, tmp_path: Path, cli: Any
) -> None:
    ProfileStore().save(Profile(name="echo", protocol="openai", base_url=model.url, model="m"))
    set_key("echo", KEY)
    suite = _suite(tmp_path / "suite.jsonl")
    out = tmp_path / "runs"
    run = await asyncio.to_thread(
        cli, "run", "--profile", "echo", "--suite", str(suite), "--repeat", "2",
        "--out", str(out), timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert set(model.received) == {KEY}  # the upstream had the real key to echo
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    rows = read_rows(run_dir / "attempts.jsonl")
    assert len(rows) == 2
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"0.transcript.json", "0.log"} <= {n.split("/")[-1] for n in names}, names
    assert any(n.endswith(".calls.jsonl.gz") for n in names), names
    transcript = next(p for p in files if p.name == "0.transcript.json")
    assert "$ base64 .env" in transcript.read_text()  # the tool result was kept, masked
    for path in files:
        assert key_recoverable(_text_of(path), KEY) == [], path
    explained = await asyncio.to_thread(
        cli, "explain", str(run_dir), TASK, "--attempts", "0", "1", "--json", "--text"
    )
    assert explained.returncode == 0, explained.stderr
    assert "read_env" in explained.stdout
    for printed in (explained.stdout, explained.stderr, run.stdout, run.stderr):
        assert key_recoverable(printed, KEY) == [], printed


HARNESS = """
import base64, json, os, sys, urllib.request
env_file, result_path = sys.argv[1:3]
data = open(env_file, "rb").read()
print("$ base64 .env")  # what base64 prints: 76 columns
sys.stdout.write(base64.encodebytes(data).decode())
print("$ xxd -p .env", file=sys.stderr)  # what xxd -p prints: 60 columns
hexed = data.hex()
sys.stderr.write("".join(hexed[i : i + 60] + "\\n" for i in range(0, len(hexed), 60)))
for turn in range(2):  # the tool call, then the answer (after a tool message)
    messages = [{"role": "user", "content": "read .env"}]
    if turn:
        messages.append({"role": "tool", "tool_call_id": "call_1", "content": "ok"})
    body = json.dumps({"model": "m", "stream": True, "messages": messages}).encode()
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                 "Content-Type": "application/json"})
    text = ""
    for line in urllib.request.urlopen(request, timeout=20).read().decode().splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                text += choice["delta"].get("content") or ""
print("model said:", text)
json.dump({"success": True}, open(result_path, "w"))
"""


@pytest.mark.keyring
async def test_a_command_harness_printing_the_key_wrapped_leaves_it_in_no_file(
    home: object, model: EchoingModel, tmp_path: Path, cli: Any
) -> None:
    # The harness prints base64 and xxd -p of a .env file with the key (each line logged
    # apart), and the model's answer holding it in other encodings.
    ProfileStore().save(Profile(name="echo", protocol="openai", base_url=model.url, model="m"))
    set_key("echo", KEY)
    env_file = tmp_path / "project.env"
    env_file.write_bytes(_env_file("", KEY))
    script = tmp_path / "harness.py"
    script.write_text(HARNESS)
    suite = _suite(tmp_path / "suite.jsonl")
    out = tmp_path / "runs"
    command = f"{sys.executable} {script} {env_file} {{result_path}}"
    run = await asyncio.to_thread(
        cli, "run", "--profile", "echo", "--suite", str(suite), "--agent", "command",
        "--command", command, "--out", str(out), timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    (log,) = run_dir.glob("attempts/*/0.log")
    logged = log.read_text()
    assert "[stdout] $ base64 .env" in logged and "[stderr] $ xxd -p .env" in logged
    assert "model said: Found it" in logged
    for path in [p for p in run_dir.rglob("*") if p.is_file()]:
        assert key_recoverable(_text_of(path), KEY) == [], (path, _text_of(path))
    assert key_recoverable(run.stdout + run.stderr, KEY) == []


async def test_inspects_output_printing_the_key_wrapped_leaves_it_in_no_log_line(
    tmp_path: Path,
) -> None:
    """inspect's own output is logged line by line as it comes (``inspect.log``); a key it
    prints over several lines (base64, xxd -p) is masked once the output ends, and the tail
    shown when inspect fails holds none of it either."""
    from driftdesk.reruns.inspect_harness import _pump_output

    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "import sys; sys.stdout.write(sys.stdin.read())",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None
    log = tmp_path / "inspect.log"
    pumped = asyncio.create_task(_pump_output(process.stdout, log, (KEY, "dd-run-throwaway")))
    process.stdin.write(("inspect started\n" + tool_output(KEY) + "inspect ended\n").encode())
    await process.stdin.drain()
    process.stdin.close()
    tail = await pumped
    await process.wait()
    text = log.read_text()
    assert "inspect started" in text and "inspect ended" in text
    assert not key_recoverable(text, KEY), text
    assert not key_recoverable(tail, KEY), tail
