"""Latency the metering proxy adds with fault injection OFF, beside the proxy from before fault
injection existed, and beside a proxy that injects at 0 % (the decision made, nothing hit).

The upstream is the sandbox endpoint in its own process. One client sends the same streamed
chat completion, one at a time, in turns: direct, through the proxy before injection (the
``--base`` revision's reruns/proxy.py, loaded from git), through today's proxy with no
injection, and through today's proxy with ``500=0%``. Target: injection off adds ≤ 0.5 ms
per call over the proxy before it (p50), and so does the 0 % injector.

    .venv/bin/python tests/benchmarks/bench_inject.py [--requests 1000] [--base REV]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_executor import start_sandbox

from driftdesk.reruns.injection import FaultInjector, parse_inject
from driftdesk.reruns.proxy import MeteringProxy
from driftdesk.reruns.simulated_endpoint import SIM_MODEL
from driftdesk.reruns.suites import load_suite

REPO = Path(__file__).resolve().parents[2]
TARGET_MS = 0.5


def _base_revision() -> str:
    """The commit before fault injection was added (as reruns/faults.py, now reruns/injection.py)."""
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", "reruns/faults.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    revision = f"{added[-1]}^" if added else "HEAD"
    return subprocess.run(
        ["git", "rev-parse", "--short", revision],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def _old_proxy_module(revision: str) -> ModuleType:
    """reruns/proxy.py as it was at ``revision``, imported under another name."""
    source = subprocess.run(
        ["git", "show", f"{revision}:reruns/proxy.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    folder = Path(tempfile.mkdtemp(prefix="bench-inject-"))
    path = folder / "proxy_before_injection.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("proxy_before_injection", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


async def measure(base_url: str, requests: int, old: ModuleType) -> dict[str, list[float]]:
    prompt = load_suite("basic").task("arith-01").prompt_text
    body = {"model": SIM_MODEL, "messages": [{"role": "user", "content": prompt}], "stream": True}
    common: dict[str, Any] = {
        "run_id": "bench",
        "upstream_base_url": base_url,
        "protocol": "openai",
        "real_key": "sk-bench-key",
    }
    zero = parse_inject("500=0%")
    assert zero is not None
    proxies = {
        "before": old.MeteringProxy(**common),
        "off": MeteringProxy(**common),
        "0%": MeteringProxy(**common, injector=FaultInjector(zero, seed=0, hang_s=1.0)),
    }
    urls = {"direct": base_url + "/chat/completions"}
    keys = {"direct": "x"}
    for name, proxy in proxies.items():
        await proxy.start()
        urls[name] = proxy.base_url_for(proxy.open_attempt("arith-01", 0)) + "/chat/completions"
        keys[name] = proxy.run_key
    times: dict[str, list[float]] = {name: [] for name in urls}
    async with aiohttp.ClientSession() as session:

        async def one(name: str) -> float:
            start = time.perf_counter()
            headers = {"Authorization": f"Bearer {keys[name]}"}
            async with session.post(urls[name], json=body, headers=headers) as response:
                await response.read()
                assert response.status == 200, response.status
            return (time.perf_counter() - start) * 1000

        for _ in range(50):  # warm up every path's connections
            for name in urls:
                await one(name)
        for _ in range(requests):
            for name in urls:
                times[name].append(await one(name))
    for proxy in proxies.values():
        await proxy.stop()
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--base", help="revision of the proxy before injection (default: auto)")
    args = parser.parse_args()
    revision = args.base or _base_revision()
    old = _old_proxy_module(revision)
    process, base_url = start_sandbox()
    try:
        times = asyncio.run(measure(base_url, args.requests, old))
    finally:
        process.terminate()
        process.wait(10)
    load = os.getloadavg()[0]
    print(f"streamed chat completions, n={args.requests} each, in turns; load {load:.2f}")
    p50 = {name: percentile(values, 50) for name, values in times.items()}
    p99 = {name: percentile(values, 99) for name, values in times.items()}
    for name in times:
        print(f"  {name:<8} p50 {p50[name]:6.2f} ms  p99 {p99[name]:6.2f} ms")
    for name in ("off", "0%"):
        added = p50[name] - p50["before"]
        verdict = "met" if added <= TARGET_MS else "NOT met"
        print(
            f"  {name} vs before ({revision}): p50 {added:+.3f} ms "
            f"(ratio {p50[name] / p50['before']:.3f}; target ≤ {TARGET_MS} ms: {verdict})"
        )
    print(f"  proxy (off) vs direct: p50 {p50['off'] - p50['direct']:+.3f} ms")


if __name__ == "__main__":
    main()
