"""Latency the metering proxy adds to a call: p50/p99 through the proxy vs direct.

The upstream is the sandbox endpoint in its own process (no added latency). One client sends
the same chat completion directly and through the proxy, alternating, one at a time (the
proxy runs on the client's event loop, as in a run). Streamed and non-streamed requests are
measured separately. Targets: added p50 <= 2 ms, added p99 <= 10 ms.

    .venv-test/bin/python tests/benchmarks/bench_proxy.py [--requests 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_executor import start_sandbox

from driftdesk.reruns.proxy import MeteringProxy
from driftdesk.reruns.simulated_endpoint import SIM_MODEL
from driftdesk.reruns.suites import load_suite


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


async def measure(base_url: str, requests: int, stream: bool) -> tuple[list[float], list[float]]:
    prompt = load_suite("basic").task("arith-01").prompt_text
    body = {"model": SIM_MODEL, "messages": [{"role": "user", "content": prompt}], "stream": stream}
    proxy = MeteringProxy(
        run_id="bench", upstream_base_url=base_url, protocol="openai", real_key="sk-bench-key"
    )
    await proxy.start()
    token = proxy.open_attempt("arith-01", 0)
    direct_url = base_url + "/chat/completions"
    proxied_url = proxy.base_url_for(token) + "/chat/completions"
    headers = {"Authorization": f"Bearer {proxy.run_key}"}
    direct: list[float] = []
    proxied: list[float] = []
    async with aiohttp.ClientSession() as session:

        async def one(url: str) -> float:
            start = time.perf_counter()
            async with session.post(url, json=body, headers=headers) as response:
                await response.read()
                assert response.status == 200, response.status
            return (time.perf_counter() - start) * 1000

        for _ in range(50):  # warm up connections on both paths
            await one(direct_url)
            await one(proxied_url)
        for _ in range(requests):
            direct.append(await one(direct_url))
            proxied.append(await one(proxied_url))
    await proxy.stop()
    return direct, proxied


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    process: subprocess.Popen[str]
    process, base_url = start_sandbox()
    try:
        for stream in (False, True):
            direct, proxied = asyncio.run(measure(base_url, args.requests, stream))
            d50, d99 = percentile(direct, 50), percentile(direct, 99)
            p50, p99 = percentile(proxied, 50), percentile(proxied, 99)
            added50, added99 = p50 - d50, p99 - d99
            verdict = "met" if added50 <= 2 and added99 <= 10 else "NOT met"
            kind = "streamed (SSE)" if stream else "JSON"
            print(f"{kind:15} n={args.requests}")
            print(f"  direct   p50 {d50:6.2f} ms  p99 {d99:6.2f} ms")
            print(f"  proxied  p50 {p50:6.2f} ms  p99 {p99:6.2f} ms")
            print(
                f"  added    p50 {added50:6.2f} ms  p99 {added99:6.2f} ms  (targets 2 / 10: {verdict})"
            )
    finally:
        process.terminate()
        process.wait(10)


if __name__ == "__main__":
    main()
