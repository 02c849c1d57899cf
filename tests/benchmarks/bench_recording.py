"""What call recordings cost: proxy throughput with recording on vs off, and the bytes a long
conversation's recording takes.

1. Calls per second through the metering proxy at concurrency 32, recording on and off, side
   by side in interleaved rounds (off, on, off, on...). The upstream is the sandbox endpoint in
   its own process; the clients share the proxy's event loop, as the builtin agent does; call
   rows and recordings are written on one I/O thread, as in a run. Each worker holds a
   conversation of its own that grows by a turn per call (and starts over after 8), streamed
   and not in turns. Target: recording costs <= 5 % of the throughput.
2. A 40-turn conversation (a tool list, user turns of varied prose, the model's answers) sent
   through the proxy: its recording's bytes on disk against the size of its last request
   alone. Target: <= 2x (each earlier item is stored once, compressed).

    .venv/bin/python tests/benchmarks/bench_recording.py [--calls 3000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_executor import start_sandbox
from benchlib import load, verdict

from driftdesk.fileio import JsonlAppender
from driftdesk.reruns.proxy import MeteringProxy
from driftdesk.reruns.recording import CallRecorder
from driftdesk.reruns.simulated_endpoint import SIM_MODEL
from driftdesk.rundir import RECORDING_SUFFIX, attempt_file

KEY = "sk-bench-recording-0123456789abcdef"
CONCURRENCY = 32
# A vocabulary of made-up words: prose that compresses about as badly as real text.
_LETTERS = random.Random(1)
WORDS = [
    "".join(_LETTERS.choice("etaoinshrdlucmfwypvbgkqjxz") for _ in range(_LETTERS.randint(2, 9)))
    for _ in range(3000)
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name}: " + " ".join(WORDS[:20]),
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["path"],
            },
        },
    }
    for name in ("read_file", "run_tests", "list_dir", "grep", "write_file")
]


def prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


class _Rows:
    """calls.jsonl rows appended on the I/O thread, as the engine does."""

    def __init__(self, appender: JsonlAppender, io: ThreadPoolExecutor) -> None:
        self._appender, self._io = appender, io

    def append(self, row: dict[str, Any]) -> None:
        self._io.submit(self._appender.append, row)


async def _proxy(
    base_url: str, run_dir: Path, io: ThreadPoolExecutor, record: bool
) -> MeteringProxy:
    run_dir.mkdir(parents=True, exist_ok=True)

    def on_io_thread(job: Callable[[], None]) -> None:
        io.submit(job)

    recorder = CallRecorder(run_dir, KEY, submit=on_io_thread) if record else None
    proxy = MeteringProxy(
        run_id="bench",
        upstream_base_url=base_url,
        protocol="openai",
        real_key=KEY,
        calls_file=_Rows(JsonlAppender(run_dir / "calls.jsonl", fsync=False), io),
        recorder=recorder,
    )
    await proxy.start()
    return proxy


async def _round(
    proxy: MeteringProxy, session: aiohttp.ClientSession, calls: int, io: ThreadPoolExecutor
) -> tuple[float, float]:
    """Calls per second for ``calls`` calls from CONCURRENCY workers (one slot each), their
    writes done; and this process's CPU per call (its I/O thread's included), in ms."""
    remaining = calls
    headers = {"Authorization": f"Bearer {proxy.run_key}"}

    async def worker(number: int) -> None:
        nonlocal remaining
        token = proxy.open_attempt(f"w{number}", 0)
        url = proxy.base_url_for(token) + "/chat/completions"
        rng = random.Random(number)
        messages: list[dict[str, Any]] = []
        turn = 0
        while remaining > 0:
            remaining -= 1
            if turn % 8 == 0:
                messages = [{"role": "system", "content": prose(rng, 40)}]
            messages.append({"role": "user", "content": prose(rng, 30)})
            body = {
                "model": SIM_MODEL,
                "messages": messages,
                "tools": TOOLS,
                "stream": turn % 2 == 1,
            }
            async with session.post(url, json=body, headers=headers) as response:
                data = await response.read()
                assert response.status == 200, response.status
            answer = "a streamed answer" if body["stream"] else data[:200].decode(errors="replace")
            messages.append({"role": "assistant", "content": answer})
            turn += 1
        proxy.close_attempt(token)

    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(n) for n in range(CONCURRENCY)))
    await asyncio.get_running_loop().run_in_executor(io, lambda: None)  # the writes are done
    wall = time.perf_counter() - start
    return calls / wall, (time.process_time() - cpu) / calls * 1000


async def throughput(
    base_url: str, calls: int, rounds: int
) -> dict[str, list[tuple[float, float]]]:
    results: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory(prefix="bench-recording-") as tmp:
        io = ThreadPoolExecutor(max_workers=1)
        proxies = {
            name: await _proxy(base_url, Path(tmp) / name, io, record=name == "on")
            for name in results
        }
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            for proxy in proxies.values():  # warm up both paths
                await _round(proxy, session, CONCURRENCY * 4, io)
            for number in range(rounds):
                for name, proxy in proxies.items():
                    rate, cpu = await _round(proxy, session, calls, io)
                    results[name].append((rate, cpu))
                    print(
                        f"  round {number + 1}: recording {name:<3} {rate:6.0f} calls/s  "
                        f"{cpu:6.3f} ms CPU per call  ({load()})"
                    )
        for proxy in proxies.values():
            await proxy.stop()
        io.shutdown(wait=True)
        written = sum(p.stat().st_size for p in Path(tmp, "on").rglob("*" + RECORDING_SUFFIX))
        print(f"  recorded: {written / 2**20:.1f} MiB of recordings")
    return results


async def long_conversation(base_url: str, turns: int) -> tuple[int, int]:
    """(bytes the recording holds, bytes of the last request) for a ``turns``-turn chat."""
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="bench-recording-") as tmp:
        run_dir = Path(tmp)
        io = ThreadPoolExecutor(max_workers=1)
        proxy = await _proxy(base_url, run_dir, io, record=True)
        token = proxy.open_attempt("long", 0)
        url = proxy.base_url_for(token) + "/chat/completions"
        messages: list[dict[str, Any]] = [{"role": "system", "content": prose(rng, 120)}]
        last = b""
        async with aiohttp.ClientSession() as session:
            for _ in range(turns):
                messages.append({"role": "user", "content": prose(rng, rng.randint(20, 160))})
                body = {"model": SIM_MODEL, "messages": messages, "tools": TOOLS, "stream": True}
                last = json.dumps(body).encode()
                headers = {
                    "Authorization": f"Bearer {proxy.run_key}",
                    "Content-Type": "application/json",
                }
                async with session.post(url, data=last, headers=headers) as response:
                    await response.read()
                # The model's answer, as an agent would append it (varied, like a real one).
                messages.append({"role": "assistant", "content": prose(rng, rng.randint(10, 80))})
        proxy.close_attempt(token)
        await proxy.stop()
        io.shutdown(wait=True)
        stored = attempt_file(run_dir, "long", 0, RECORDING_SUFFIX).stat().st_size
    return stored, len(last)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=3000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=40)
    args = parser.parse_args()
    process: subprocess.Popen[str]
    process, base_url = start_sandbox()
    try:
        print(f"proxy throughput at concurrency {CONCURRENCY}, {args.calls} calls per round")
        rates = asyncio.run(throughput(base_url, args.calls, args.rounds))
        off, on = (statistics.median(r for r, _ in rates[k]) for k in ("off", "on"))
        cpu_off, cpu_on = (statistics.median(c for _, c in rates[k]) for k in ("off", "on"))
        print(
            f"  median: off {off:.0f} calls/s, {cpu_off:.3f} ms CPU per call; "
            f"on {on:.0f} calls/s, {cpu_on:.3f} ms CPU per call"
        )
        print(f"  CPU per call, on / off: {cpu_on / cpu_off:.3f}")
        verdict("recording's cost (1 - on/off calls/s)", max(0.0, 1 - on / off) * 100, 5.0, " %")
        print(f"\n{args.turns}-turn conversation")
        stored, last = asyncio.run(long_conversation(base_url, args.turns))
        print(f"  recording {stored} bytes, last request {last} bytes")
        verdict("recording / last request", stored / last, 2.0)
    finally:
        process.terminate()
        process.wait(10)


if __name__ == "__main__":
    main()
