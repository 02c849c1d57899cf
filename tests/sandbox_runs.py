"""Real runs against the simulated sandbox, shared by the analysis, CLI and TUI tests, the
benchmarks and the screenshot scripts: the builtin agent on a suite (``sandbox_run``; the basic
suite with faults, from outside an event loop: ``faulted_basic_run``), and a command harness of
its own (a small agent loop over the proxy) on the one-task ``fix-add`` suite whose tries an
injected 429 cuts (``command_harness_run``)."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

# What the sandbox's model has the harness run on ``fix-add``: the right fix, or a wrong one.
RIGHT = ["cat calc.py", "sed -i 's/a - b/a + b/' calc.py", "python3 -c 'import calc'"]
WRONG = ["cat calc.py", "sed -i 's/a - b/a * b/' calc.py", "python3 -c 'import calc'"]
FIX_ADD = {
    "task_id": "fix-add",
    "prompt": "In calc.py, add() subtracts. Make it add.",
    "workspace": "fix-add",
    "check": "python3 -c 'import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)'",
    "simulated": {"commands": RIGHT, "wrong": WRONG, "answer": "Done.", "skill": 0.5},
}
# An agent loop: chat completions with one shell tool, each command run in the workspace and
# its output sent back; an HTTP error ends the try (exit 3), as a client without retries does.
HARNESS = textwrap.dedent(
    """
    import json, os, subprocess, sys, urllib.error, urllib.request
    tools = [{"type": "function", "function": {"name": "shell", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}}}}]
    messages = [{"role": "user", "content": os.environ["DRIFTDESK_PROMPT"]}]
    while True:
        body = {"model": os.environ["DRIFTDESK_MODEL"], "messages": messages, "tools": tools}
        request = urllib.request.Request(
            os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
            headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                     "Content-Type": "application/json"})
        try:
            answer = json.loads(urllib.request.urlopen(request, timeout=30).read())
        except urllib.error.HTTPError as exc:
            print(f"provider said {exc.code}", file=sys.stderr)
            sys.exit(3)
        message = answer["choices"][0]["message"]
        messages.append(message)
        if not message.get("tool_calls"):
            sys.exit(0)
        for call in message["tool_calls"]:
            command = json.loads(call["function"]["arguments"])["command"]
            done = subprocess.run(command, shell=True, capture_output=True, text=True)
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": done.stdout + done.stderr})
    """
)


async def sandbox_run(base_url: str, out_dir: Path, **spec: Any) -> Path:
    """The run dir of a run of the builtin agent (``spec``: ``RunSpec``'s fields; the suite
    is the sandbox's ``basic`` unless given) against the sandbox at ``base_url``."""
    spec.setdefault("suite", "basic")
    outcome = await execute_run(
        RunSpec(
            profile=Profile(name="sim", protocol="openai", base_url=base_url, model=SIM_MODEL),
            out_dir=out_dir,
            **spec,
        )
    )
    return Path(outcome.run_dir)


def faulted_basic_run(out_dir: Path, *, server_seed: int, api_key: str) -> Path:
    """The basic suite × 5 (seed 5, eight at a time) against a sandbox that adds no latency,
    429s and 500s injected and retried: a run to show or to time, made outside an event loop.
    Its run dir."""

    async def make() -> Path:
        with SandboxServer(seed=server_seed, latency_ms=0.0) as server:
            return await sandbox_run(
                server.base_url,
                out_dir,
                repeat=5,
                concurrency=8,
                timeout_s=10.0,
                api_key=api_key,
                seed=5,
                inject="429=10%:0.01s,500=5%",
                retry_policy=RetryPolicy(max_retries=4, base_delay_s=0.005, max_delay_s=0.05),
            )

    return asyncio.run(make())


def write_fix_add_suite(folder: Path) -> Path:
    """The ``fix-add`` suite (its workspace beside it) in ``folder``; its JSONL file."""
    (folder / "fix-add").mkdir(parents=True)
    (folder / "fix-add" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    suite = folder / "fix-add.jsonl"
    suite.write_text(json.dumps(FIX_ADD) + "\n")
    return suite


async def command_harness_run(tmp_path: Path, api_key: str, **more: Any) -> Path:
    """Eight attempts of ``HARNESS`` on ``fix-add`` (seed 5, one at a time) with 429s injected
    on a quarter of the calls, each fault ending the try (``--link-faults retry``), so some
    attempts are tried again; ``more``: further ``RunSpec`` fields. The run dir."""
    suite = write_fix_add_suite(tmp_path / "suite")
    script = tmp_path / "harness.py"
    script.write_text(HARNESS)
    with SandboxServer(seed=5, suites=[suite]) as server:
        outcome = await execute_run(
            RunSpec(
                profile=Profile(
                    name="p", protocol="openai", base_url=server.base_url, model=SIM_MODEL
                ),
                suite=str(suite),
                repeat=8,
                concurrency=1,
                seed=5,
                inject="429=25%:0.01s",
                link_faults="retry",  # the faults end tries: what the tests study
                timeout_s=60.0,
                out_dir=tmp_path / "runs",
                agent="command",
                command=f"{sys.executable} {script}",
                api_key=api_key,
                retry_policy=RetryPolicy(max_retries=6, base_delay_s=0.01, max_delay_s=1.0),
                **more,
            )
        )
    assert outcome.status == "completed", outcome.reason
    return Path(outcome.run_dir)
