"""A full disk, for real: ``driftdesk run`` and ``resume`` (the real CLI, the real keyring) write
their run dir on a small tmpfs that bubblewrap mounts in a private mount namespace (no root
needed where user namespaces are allowed), so every write past its size fails with ENOSPC as
on a real disk. A filler file takes most of the space; removing it is "freeing space".

Seen before: the run kept calling the provider while rows no longer landed, the last row torn,
then a traceback; resume on the full disk tracebacked too; after freeing space the calls of the
slots whose rows were lost were paid twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from aiohttp import web
from reruns_helpers import _stream, write_suite

from driftdesk.providers.profiles import Profile

KEY = "sk-test-REALKEY-diskfull-0123456789"
TASKS = 10
REPEAT = 10
CONCURRENCY = 2


def _bwrap_tmpfs_works() -> str | None:
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    probe = subprocess.run(
        ["bwrap", "--dev-bind", "/", "/", "--size", "65536", "--tmpfs", "/mnt", "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return f"bwrap cannot mount a tmpfs here: {probe.stderr.strip()}"
    return None


class CountingEndpoint:
    """Answers 42 to every chat call and tells how many it has answered (GET /count). It lists
    its models, so the run's endpoint check lists them instead of paying for a one-token chat
    (which would be counted here as a call without a row)."""

    def __init__(self) -> None:
        self.calls = 0
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/count", self.count)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.calls += 1
        await request.read()
        return await _stream(request, "42", truncate=False)

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})

    async def count(self, request: web.Request) -> web.Response:
        return web.Response(text=str(self.calls))


SCRIPT = textwrap.dedent(
    """
    set -u
    count() { "$PY" -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())' "$URL/count" > "/report/$1.count"; }
    step() {  # name, driftdesk arguments...
        name=$1; shift
        "$PY" -m driftdesk "$@" > "/report/$name.out" 2> "/report/$name.err"
        echo $? > "/report/$name.rc"
        count "$name"
    }
    head -c "$FILL" /dev/zero > /out/filler
    step run run --profile disk --suite "$SUITE" --repeat "$REPEAT" \\
        --concurrency "$CONCURRENCY" --out /out
    run_dir=$(find /out -mindepth 1 -maxdepth 1 -type d)
    cp "$run_dir/attempts.jsonl" /report/rows-after-run.jsonl
    cp "$run_dir/manifest.json" /report/manifest-after-run.json
    step resume_full resume "$run_dir"
    rm /out/filler
    step resume_freed resume "$run_dir"
    cp -a "$run_dir" /report/final
    """
)


@pytest.mark.keyring
async def test_a_full_disk_stops_the_run_and_resume_pays_nothing_twice(
    home: object, tmp_path: Path
) -> None:
    problem = _bwrap_tmpfs_works()
    if problem:  # CI installs bubblewrap (./run tests): there it must work
        pytest.fail(problem) if os.environ.get("CI") else pytest.skip(problem)
    from driftdesk.providers.keys import set_key
    from driftdesk.providers.profiles import ProfileStore

    endpoint = CountingEndpoint()
    await endpoint.start()
    try:
        ProfileStore().save(
            Profile(name="disk", protocol="openai", base_url=endpoint.url + "/v1", model="m")
        )
        set_key("disk", KEY)
        suite = write_suite(tmp_path / "suite.jsonl", [f"answer-42-{i}" for i in range(TASKS)])
        report = tmp_path / "report"
        report.mkdir()
        script = tmp_path / "steps.sh"
        script.write_text(SCRIPT)
        size = 2 * 1024 * 1024
        process = await asyncio.create_subprocess_exec(
            "bwrap",
            "--dev-bind", "/", "/",
            "--size", str(size), "--tmpfs", "/out",
            "--bind", str(report), "/report",
            "--setenv", "PY", sys.executable,
            "--setenv", "URL", endpoint.url,
            "--setenv", "SUITE", str(suite),
            "--setenv", "REPEAT", str(REPEAT),
            "--setenv", "CONCURRENCY", str(CONCURRENCY),
            "--setenv", "FILL", str(size - 256 * 1024),
            "bash", str(script),
        )  # fmt: skip
        assert await asyncio.wait_for(process.wait(), 500) == 0
    finally:
        runner = endpoint.runner
        assert runner is not None
        await runner.cleanup()

    def step(name: str) -> tuple[int, str, str, int]:
        return (
            int((report / f"{name}.rc").read_text()),
            (report / f"{name}.out").read_text(),
            (report / f"{name}.err").read_text(),
            int((report / f"{name}.count").read_text()),
        )

    rc, out, err, paid = step("run")
    assert rc == 1, (out, err)
    assert out.startswith("interrupted: "), out
    assert "Traceback" not in out + err
    # ENOSPC, or a short write of the row that reached the end of the space.
    reason = [line for line in err.splitlines() if "cannot write" in line]
    assert "No space left on device" in reason[0] or "short write" in reason[0], err
    assert len(reason) == 1 and "driftdesk resume" in reason[0], err
    raw = (report / "rows-after-run.jsonl").read_bytes()
    assert raw.endswith(b"\n")  # no torn tail left behind
    rows = [json.loads(line) for line in raw.splitlines()]
    assert 0 < len(rows) < TASKS * REPEAT
    # New attempts stopped at once: only the ones in flight were paid without a row.
    assert paid - len(rows) <= CONCURRENCY, (paid, len(rows))

    # The manifest says so too, written into the space the run held back for it.
    manifest = json.loads((report / "manifest-after-run.json").read_text())
    assert manifest["status"] == "interrupted", manifest
    assert "cannot write" in manifest["stop_reason"] and manifest["ended_at"], manifest

    rc, out, err, paid_full = step("resume_full")
    assert "Traceback" not in out + err
    assert rc != 0 and ("No space left on device" in err), (out, err)
    assert "resuming; the run had stopped: cannot write" in err, err  # why, before it tries
    assert paid_full - paid <= CONCURRENCY

    rc, out, err, paid_end = step("resume_freed")
    assert rc == 0, (out, err)
    assert out.startswith("completed: ")
    final = [json.loads(line) for line in (report / "final" / "attempts.jsonl").open()]
    slots = [(r["task_id"], r["attempt"]) for r in final]
    assert len(slots) == len(set(slots)) == TASKS * REPEAT
    assert all(r["outcome"] == "pass" for r in final)
    assert json.loads((report / "final" / "manifest.json").read_text())["status"] == "completed"
    assert not (report / "final" / ".manifest-reserve").exists()  # released at the end
    # Every slot was paid once, but for the attempts in flight when a write failed.
    assert paid_end - TASKS * REPEAT <= 2 * CONCURRENCY, paid_end
